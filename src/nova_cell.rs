//! Nova cells: which cell a node belongs to, and the control-plane values that cell gives its
//! computes (seed 003; mounts-nova-edpm.md §3.2).
//!
//! Pure. The chain is node → `nova.openstack.org/cell` annotation (Node, else Role/NodeSet) →
//! NovaCell → the Secret named by `NovaCell.spec.secret` → its keys. A missing link fails with
//! the whole chain, so an operator sees which object to fix.

use serde_json::Value;

use crate::model::{HostGroup, Member};
use crate::snapshot::Snapshot;

/// What a compute node needs from its cell. Secret values are kept here in memory only.
#[derive(Clone)]
pub(crate) struct CellContext {
    /// The NovaCell object name (`nova-cell1`), which is what the annotation names.
    pub name: String,
    /// `spec.cellName` (`cell1`).
    pub cell_name: String,
    pub transport_url: String,
    pub notification_transport_url: Option<String>,
    pub quorum_queues: bool,
    pub keystone_internal_url: String,
    pub region: String,
    pub service_user: String,
    pub service_password: Option<String>,
    pub application_credential: Option<(String, String)>,
    pub novncproxy_base_url: Option<String>,
    /// The Secret named by `spec.secret` (for hints; never its values).
    pub secret: String,
    /// `spec.tls.caBundleSecretName`: the control plane's CA bundle the cell's clients trust.
    pub ca_bundle_secret: Option<String>,
    /// The chain as text, for messages and provenance.
    pub chain: String,
}

impl std::fmt::Debug for CellContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellContext")
            .field("name", &self.name)
            .field("chain", &self.chain)
            .finish_non_exhaustive()
    }
}

impl CellContext {
    /// The values that must never be printed: for redaction.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let mut v = vec![self.transport_url.clone()];
        v.extend(self.notification_transport_url.clone());
        v.extend(self.service_password.clone());
        if let Some((_, secret)) = &self.application_credential {
            v.push(secret.clone());
        }
        v
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{chain}: {problem}; {fix}")]
pub struct CellError {
    pub chain: String,
    pub problem: String,
    pub fix: String,
}

/// The default region of an OpenStack deployment made by openstack-operator.
pub(crate) const DEFAULT_REGION: &str = "regionOne";

pub(crate) fn resolve(snap: &Snapshot, group: &HostGroup, member: &Member) -> Result<CellContext, CellError> {
    let node = format!("node {}", member.key);
    let Some(cell) = member.cell(group) else {
        return Err(CellError {
            chain: node,
            problem: format!(
                "no {} annotation on {} or {}",
                crate::snapshot::resource::CELL_ANNOTATION,
                member.id.short(),
                group.id.short()
            ),
            fix: "annotate the Node or its Role/NodeSet with the NovaCell this compute belongs to".into(),
        });
    };
    let mut chain =
        format!("{node} → {} {} ({}) → NovaCell {}", cell.field, cell.name, cell.object.short(), cell.name);
    let fail = |chain: &str, problem: String, fix: &str| CellError {
        chain: chain.to_string(),
        problem,
        fix: fix.to_string(),
    };
    let Some(obj) = snap.openstack_object("NovaCell", &cell.name) else {
        let known: Vec<&str> =
            snap.openstack.iter().filter(|o| o.id.kind == "NovaCell").map(|o| o.id.name.as_str()).collect();
        return Err(fail(
            &chain,
            format!("not found{}", crate::model::did_you_mean(&cell.name, known.iter().copied())),
            "create the NovaCell or fix the annotation",
        ));
    };
    let spec = obj.body.get("spec").cloned().unwrap_or(Value::Null);
    let text = |k: &str| spec.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let Some(secret_name) = text("secret") else {
        return Err(fail(
            &chain,
            "spec.secret is not set".into(),
            "the NovaCell must name the Secret holding its transport URL",
        ));
    };
    chain.push_str(&format!(" → Secret {secret_name}"));
    let Some(secret) = snap.secret(&secret_name) else {
        return Err(fail(&chain, "not found".into(), "create the Secret or correct NovaCell spec.secret"));
    };
    let key = |k: &str| {
        secret.body.data.get(k).map(|v| String::from_utf8_lossy(v).into_owned()).filter(|v| !v.is_empty())
    };
    let Some(transport_url) = key("transport_url") else {
        return Err(fail(
            &format!("{chain} → key transport_url"),
            "missing or empty".into(),
            "the cell's message bus URL belongs in this key",
        ));
    };
    let Some(keystone_internal_url) = text("keystoneAuthURL") else {
        return Err(fail(
            &format!("{chain} (NovaCell spec.keystoneAuthURL)"),
            "not set".into(),
            "set the internal Keystone URL on the NovaCell",
        ));
    };
    let application_credential = key("ACID").zip(key("ACSecret"));
    let service_password = key("ServicePassword");
    if service_password.is_none() && application_credential.is_none() {
        return Err(fail(
            &format!("{chain} → key ServicePassword"),
            "missing (and no ACID/ACSecret application credential)".into(),
            "the nova service user's password belongs in this key",
        ));
    }
    let cell_name = text("cellName").unwrap_or_else(|| cell.name.trim_start_matches("nova-").to_string());
    let namespace = obj.meta.namespace.clone().unwrap_or_else(|| "openstack".into());
    let vnc = spec.pointer("/noVNCProxyServiceTemplate/enabled").and_then(Value::as_bool).unwrap_or(false);
    Ok(CellContext {
        name: cell.name.clone(),
        novncproxy_base_url: vnc
            .then(|| format!("http://nova-novncproxy-{cell_name}-public.{namespace}.svc:6080/vnc_lite.html")),
        cell_name,
        transport_url,
        notification_transport_url: key("notification_transport_url"),
        quorum_queues: key("quorum_queues").is_some_and(|q| q == "true"),
        keystone_internal_url,
        region: text("region").unwrap_or_else(|| DEFAULT_REGION.into()),
        service_user: text("serviceUser").unwrap_or_else(|| "nova".into()),
        service_password,
        application_credential,
        secret: secret_name,
        ca_bundle_secret: spec
            .pointer("/tls/caBundleSecretName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        chain,
    })
}

/// The data-plane service of a NodeSet that deploys nova-compute (type `nova`), if any.
pub(crate) fn nova_service<'g>(snap: &Snapshot, group: &'g HostGroup) -> Option<&'g str> {
    group
        .services
        .value
        .iter()
        .map(String::as_str)
        .find(|s| snap.service_type(s) == crate::nova::SERVICE_TYPE)
}

/// The Keystone logins that can ask Nova about the model's nova computes: one per distinct
/// (Keystone, region, user, project), from each compute's cell; and each compute whose cell
/// cannot be resolved, with why (those nodes' Nova check is Unknown).
pub(crate) fn logins(
    snap: &Snapshot,
    model: &crate::model::Model,
) -> (Vec<crate::nova::Login>, Vec<CellError>) {
    let mut out: Vec<crate::nova::Login> = Vec::new();
    let mut problems = Vec::new();
    for g in &model.groups {
        let Some(service) = nova_service(snap, g) else { continue };
        for m in &g.members {
            let cx = match resolve(snap, g, m) {
                Ok(cx) => cx,
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            };
            let login = login(snap, &cx, service);
            match out.iter_mut().find(|l| l.key() == login.key()) {
                Some(l) if !l.cells.contains(&cx.name) => l.cells.push(cx.name.clone()),
                Some(_) => {}
                None => out.push(login),
            }
        }
    }
    (out, problems)
}

/// How a cell's service user logs in: nova-operator's `01-nova.conf` (`project_name = service`,
/// domains `Default`), trusting the NovaCell's CA bundle, else the nova service's `caCerts`.
fn login(snap: &Snapshot, cx: &CellContext, service: &str) -> crate::nova::Login {
    let ca = cx.ca_bundle_secret.clone().unwrap_or_else(|| snap.service_ca_certs(service));
    let ca_bundle = snap
        .secret(&ca)
        .and_then(|s| s.body.data.get(crate::services::CA_BUNDLE_KEY))
        .map(|b| String::from_utf8_lossy(b).into_owned());
    crate::nova::Login {
        auth_url: cx.keystone_internal_url.clone(),
        region: cx.region.clone(),
        user: cx.service_user.clone(),
        domain: "Default".into(),
        project: "service".into(),
        password: cx.service_password.clone(),
        application_credential: cx.application_credential.clone(),
        ca_bundle,
        secret: cx.secret.clone(),
        cells: vec![cx.name.clone()],
    }
}
