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
pub struct CellContext {
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
    pub fn secrets(&self) -> Vec<String> {
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
pub const DEFAULT_REGION: &str = "regionOne";

pub fn resolve(snap: &Snapshot, group: &HostGroup, member: &Member) -> Result<CellContext, CellError> {
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
    let chain =
        format!("{node} → {} {} ({}) → NovaCell {}", cell.field, cell.name, cell.object.short(), cell.name);
    resolve_named(snap, &cell.name, chain)
}

/// The NovaCell named `name` and its Secret's keys; `chain` says how it was reached.
#[allow(
    clippy::too_many_lines,
    reason = "follows the chain NovaCell to Secret to keys, each link with its own error and fix"
)]
fn resolve_named(snap: &Snapshot, name: &str, mut chain: String) -> Result<CellContext, CellError> {
    let fail = |chain: &str, problem: String, fix: &str| CellError {
        chain: chain.to_string(),
        problem,
        fix: fix.to_string(),
    };
    let Some(obj) = snap.openstack_object("NovaCell", name) else {
        let known: Vec<&str> =
            snap.openstack.iter().filter(|o| o.id.kind == "NovaCell").map(|o| o.id.name.as_str()).collect();
        return Err(fail(
            &chain,
            format!("not found{}", crate::model::did_you_mean(name, known.iter().copied())),
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
    let cell_name = text("cellName").unwrap_or_else(|| name.trim_start_matches("nova-").to_string());
    let namespace = obj.meta.namespace.clone().unwrap_or_else(|| "openstack".into());
    let vnc = spec.pointer("/noVNCProxyServiceTemplate/enabled").and_then(Value::as_bool).unwrap_or(false);
    Ok(CellContext {
        name: name.to_string(),
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
pub fn nova_service<'g>(snap: &Snapshot, group: &'g HostGroup) -> Option<&'g str> {
    group
        .services
        .value
        .iter()
        .map(String::as_str)
        .find(|s| snap.service_type(s) == crate::nova::SERVICE_TYPE)
}

/// The group's nova service when it has nodes to ask Nova about: the one test of "this
/// NodeSet runs nova" that asking (status, the controller's poller) goes by.
pub fn runs_nova<'g>(snap: &Snapshot, g: &'g HostGroup) -> Option<&'g str> {
    nova_service(snap, g).filter(|_| !g.members.is_empty())
}

/// What asks Nova with: logins, or why there are none.
pub type Logins = Result<Vec<crate::nova::Login>, String>;

/// The logins that can ask Nova about the model's nova computes (every group's, merged);
/// `None` when no node runs a service of type `nova` (then Nova is not asked at all).
/// `explicit`: the login of a Secret named by `--nova-credentials`, or why there is none.
pub fn model_logins(
    snap: &Snapshot,
    model: &crate::model::Model,
    explicit: Option<&Result<crate::nova::Login, String>>,
) -> Option<Logins> {
    merge_logins(model.groups.iter().filter_map(|g| group_logins_with(snap, g, explicit)))
}

/// One group's logins: the explicitly named Secret's for every group that runs nova, else
/// its cells' ([`group_logins`]).
pub fn group_logins_with(
    snap: &Snapshot,
    g: &HostGroup,
    explicit: Option<&Result<crate::nova::Login, String>>,
) -> Option<Logins> {
    match explicit {
        Some(e) => runs_nova(snap, g).map(|_| e.clone().map(|l| vec![l])),
        None => group_logins(snap, g),
    }
}

/// Logins merged (each once, a login's cells gathered), or the first reason when none could
/// be made; `None` when there were none to merge.
pub fn merge_logins(found: impl IntoIterator<Item = impl std::borrow::Borrow<Logins>>) -> Option<Logins> {
    let mut any = false;
    let mut logins: Vec<crate::nova::Login> = Vec::new();
    let mut problem = None;
    for f in found {
        any = true;
        match f.borrow() {
            Ok(v) => {
                for l in v {
                    match logins.iter_mut().find(|x| x.key() == l.key() && x.password == l.password) {
                        Some(x) => {
                            for c in &l.cells {
                                if !x.cells.contains(c) {
                                    x.cells.push(c.clone());
                                }
                            }
                        }
                        None => logins.push(l.clone()),
                    }
                }
            }
            Err(why) => {
                problem.get_or_insert_with(|| why.clone());
            }
        }
    }
    if !any {
        return None;
    }
    logins.sort();
    match (logins.is_empty(), problem) {
        (true, Some(why)) => Some(Err(why)),
        _ => Some(Ok(logins)),
    }
}

/// The Keystone logins that can ask Nova about one group's computes: one per distinct
/// (Keystone, region, user, project), from each compute's cell; `None` when the group runs no
/// nova service. Nova's API answers for every cell, and nova-operator gives every cell the same
/// service user, so a compute without a cell annotation (today's NodeSets rarely carry one)
/// is asked about with the first NovaCell that resolves (cell1 before cell0). `Err` when no
/// login can be made, with the first reason.
pub fn group_logins(snap: &Snapshot, g: &HostGroup) -> Option<Result<Vec<crate::nova::Login>, String>> {
    let service = runs_nova(snap, g)?;
    let mut out: Vec<crate::nova::Login> = Vec::new();
    let mut problem: Option<CellError> = None;
    let mut any_cell = false;
    let add = |cx: &CellContext, out: &mut Vec<crate::nova::Login>| {
        let login = login(snap, cx, service);
        match out.iter_mut().find(|l| l.key() == login.key()) {
            Some(l) if !l.cells.contains(&cx.name) => l.cells.push(cx.name.clone()),
            Some(_) => {}
            None => out.push(login),
        }
    };
    for m in &g.members {
        if m.cell(g).is_none() {
            any_cell = true;
            continue;
        }
        match resolve(snap, g, m) {
            Ok(cx) => add(&cx, &mut out),
            Err(e) => {
                problem.get_or_insert(e);
            }
        }
    }
    if any_cell {
        let mut cells: Vec<&str> =
            snap.openstack.iter().filter(|o| o.id.kind == "NovaCell").map(|o| o.id.name.as_str()).collect();
        // cell0 holds no computes: its user is the same, but a compute cell is the natural one.
        cells.sort_by_key(|c| (c.ends_with("cell0"), *c));
        let found = cells.iter().find_map(|c| {
            let chain = format!(
                "{} (no {} annotation) → NovaCell {c}",
                g.id.short(),
                crate::snapshot::resource::CELL_ANNOTATION
            );
            match resolve_named(snap, c, chain) {
                Ok(cx) => Some(cx),
                Err(e) => {
                    problem.get_or_insert(e);
                    None
                }
            }
        });
        match found {
            Some(cx) => add(&cx, &mut out),
            None if cells.is_empty() => {
                problem.get_or_insert(CellError {
                    chain: g.id.short(),
                    problem: "no NovaCell in the namespace to ask Nova with".into(),
                    fix: "deploy Nova (nova-operator creates the NovaCells), or pass --no-nova".into(),
                });
            }
            None => {}
        }
    }
    if out.is_empty() {
        let why = problem.map_or_else(|| "no cell could be resolved".to_string(), |e| e.to_string());
        return Some(Err(format!("no Keystone credentials for Nova: {why}")));
    }
    Some(Ok(out))
}

/// The keys of a Secret named by `--nova-credentials`: the openstack client's environment
/// variables (`OS_CACERT` holds the PEM bundle itself, not a path).
pub const CREDENTIAL_KEYS: &[&str] = &[
    "OS_AUTH_URL",
    "OS_USERNAME",
    "OS_PASSWORD",
    "OS_PROJECT_NAME",
    "OS_USER_DOMAIN_NAME",
    "OS_PROJECT_DOMAIN_NAME",
    "OS_REGION_NAME",
    "OS_APPLICATION_CREDENTIAL_ID",
    "OS_APPLICATION_CREDENTIAL_SECRET",
    "OS_CACERT",
];

/// A login from an explicitly named Secret (`--nova-credentials`), which every compute is
/// asked about with; `Err` names the Secret and the key to fix, never a value.
#[allow(
    clippy::too_many_lines,
    reason = "each Secret key's check and its message naming the key to fix read best side by side"
)]
pub fn explicit_login(snap: &Snapshot, name: &str) -> Result<crate::nova::Login, String> {
    let Some(secret) = snap.secret(name) else {
        return Err(format!(
            "Secret {name} (--nova-credentials) not found; create it with the keys {}",
            CREDENTIAL_KEYS[..4].join(", ")
        ));
    };
    let key = |k: &str| {
        secret
            .body
            .data
            .get(k)
            .map(|v| String::from_utf8_lossy(v).trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let need = |k: &str| {
        key(k).ok_or_else(|| format!("Secret {name} (--nova-credentials): key {k} is missing or empty"))
    };
    let auth_url = need("OS_AUTH_URL")?;
    let application_credential = match (
        key("OS_APPLICATION_CREDENTIAL_ID"),
        key("OS_APPLICATION_CREDENTIAL_SECRET"),
    ) {
        (Some(id), Some(secret)) => Some((id, secret)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(format!(
                "Secret {name} (--nova-credentials): key OS_APPLICATION_CREDENTIAL_SECRET is missing or empty (OS_APPLICATION_CREDENTIAL_ID is set)"
            ));
        }
        (None, Some(_)) => {
            return Err(format!(
                "Secret {name} (--nova-credentials): key OS_APPLICATION_CREDENTIAL_ID is missing or empty (OS_APPLICATION_CREDENTIAL_SECRET is set)"
            ));
        }
    };
    let (user, password, project) = if application_credential.is_some() {
        (key("OS_USERNAME").unwrap_or_default(), None, key("OS_PROJECT_NAME").unwrap_or_default())
    } else {
        (need("OS_USERNAME")?, Some(need("OS_PASSWORD")?), need("OS_PROJECT_NAME")?)
    };
    let user_domain = key("OS_USER_DOMAIN_NAME").unwrap_or_else(|| "Default".into());
    let project_domain = key("OS_PROJECT_DOMAIN_NAME").unwrap_or_else(|| user_domain.clone());
    if project_domain != user_domain {
        return Err(format!(
            "Secret {name} (--nova-credentials): OS_USER_DOMAIN_NAME and OS_PROJECT_DOMAIN_NAME differ; edpm-agent logs in with one domain for both (use a user of the project's domain)"
        ));
    }
    Ok(crate::nova::Login {
        auth_url,
        region: key("OS_REGION_NAME").unwrap_or_else(|| DEFAULT_REGION.into()),
        user,
        domain: user_domain,
        project,
        password,
        application_credential,
        ca_bundle: key("OS_CACERT"),
        secret: name.to_string(),
        ca_secret: Some(name.to_string()),
        cells: Vec::new(),
        from: crate::nova::LoginFrom::Explicit,
    })
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
        ca_secret: Some(ca),
        cells: vec![cx.name.clone()],
        from: crate::nova::LoginFrom::Cell,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn logins_merge_per_session_and_a_set_without_any_gives_its_reason() {
        use super::{Logins, merge_logins as union};
        use crate::nova::testing::login;
        let a = Ok(vec![login("nova", "p", "nova-cell1")]);
        let b = Ok(vec![login("nova", "p", "nova-cell2")]);
        let merged = union([&a, &b]).unwrap().unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].cells, ["nova-cell1", "nova-cell2"]);
        // A rotated password is another login: asked with, not merged away.
        let c = Ok(vec![login("nova", "q", "nova-cell3")]);
        assert_eq!(union([&a, &c]).unwrap().unwrap().len(), 2);
        let bad: Logins = Err("no NovaCell".into());
        assert_eq!(union([&bad]), Some(Err("no NovaCell".into())));
        assert_eq!(
            union([&bad, &a]).unwrap().unwrap().len(),
            1,
            "one set's problem does not hide another's login"
        );
        assert_eq!(union(Vec::<&Logins>::new()), None);
    }

    #[test]
    fn an_explicit_secret_gives_one_login_and_names_the_key_to_fix() {
        let text = r#"
apiVersion: v1
kind: Secret
metadata: {name: check, namespace: openstack}
stringData: {OS_AUTH_URL: "https://ks:5000", OS_USERNAME: admin, OS_PASSWORD: s3cret-pass, OS_PROJECT_NAME: admin}
---
apiVersion: v1
kind: Secret
metadata: {name: half, namespace: openstack}
stringData: {OS_AUTH_URL: "https://ks:5000", OS_USERNAME: admin}
---
apiVersion: v1
kind: Secret
metadata: {name: split, namespace: openstack}
stringData: {OS_AUTH_URL: "https://ks:5000", OS_USERNAME: a, OS_PASSWORD: p, OS_PROJECT_NAME: x, OS_PROJECT_DOMAIN_NAME: other}
"#;
        let snap = crate::snapshot::from_file_text("s.yaml", text, None).unwrap();
        let l = super::explicit_login(&snap, "check").unwrap();
        assert_eq!(
            (l.user.as_str(), l.project.as_str(), l.domain.as_str(), l.region.as_str()),
            ("admin", "admin", "Default", "regionOne")
        );
        assert_eq!(l.secrets(), ["s3cret-pass"]);
        assert!(!format!("{l:?}").contains("s3cret-pass"));
        let e = super::explicit_login(&snap, "half").unwrap_err();
        assert_eq!(e, "Secret half (--nova-credentials): key OS_PASSWORD is missing or empty");
        assert!(super::explicit_login(&snap, "split").unwrap_err().contains("differ"));
        let half_ac = crate::snapshot::from_file_text(
            "h.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata: {name: ac}\nstringData: {OS_AUTH_URL: x, OS_APPLICATION_CREDENTIAL_ID: id}\n",
            None,
        )
        .unwrap();
        assert_eq!(
            super::explicit_login(&half_ac, "ac").unwrap_err(),
            "Secret ac (--nova-credentials): key OS_APPLICATION_CREDENTIAL_SECRET is missing or empty (OS_APPLICATION_CREDENTIAL_ID is set)"
        );
        assert_eq!(l.from, crate::nova::LoginFrom::Explicit);
        assert!(
            super::explicit_login(&snap, "none")
                .unwrap_err()
                .starts_with("Secret none (--nova-credentials) not found")
        );
    }
}
