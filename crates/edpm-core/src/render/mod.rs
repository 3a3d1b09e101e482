//! Renders the oslo.config files of one EDPM service for one node: generated defaults from
//! templates plus derived control-plane values, the service's config data sources, and the
//! user's CustomServiceConfig last, so that oslo itself gives it priority.
//!
//! Pure: the templates, the snapshot, the model and the inventory come in; files (name, mode,
//! content, which values are secret) come out. Writing them is the shell's job.

pub mod templates;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

pub use templates::Templates;

use crate::inventory::Inventory;
use crate::model::{HostGroup, Member, Model};
use crate::nova_cell::{self, CellContext};
use crate::oslo;
use crate::redact::Redactor;
use crate::services::{ConfigFiles, Service};
use crate::snapshot::Snapshot;

/// A file to write into the service's config directory
/// (`/var/lib/openstack/configs/<service>/` on the node).
#[derive(Clone, PartialEq, Eq)]
pub struct RenderedFile {
    pub name: String,
    pub content: String,
    pub mode: u32,
    /// Where the content came from, for people: a template, or `Secret/x key k`.
    pub from: String,
    /// Exact secret values inside `content`, for redaction.
    pub secrets: Vec<String>,
    /// The whole content came from a Secret.
    pub from_secret: bool,
}

impl std::fmt::Debug for RenderedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderedFile")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .field("from", &self.from)
            .finish()
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum RenderError {
    #[error("edpm-agent does not render config files for service {service}")]
    NotRendered { service: String },
    #[error("{0}")]
    Cell(#[from] nova_cell::CellError),
    #[error("node {node}: template {template}: {message}")]
    Template { node: String, template: String, message: String },
    #[error(
        "node {node}: {file} rendered from {template} is not valid oslo.config: {error}; fix the template"
    )]
    Generated { node: String, file: String, template: String, error: oslo::ParseError },
    #[error(
        "node {node}, service {service}: {from} ({file}) would stop the service from starting: {error}; {}",
        error.hint()
    )]
    UserConfig { node: String, service: String, from: String, file: String, error: oslo::ParseError },
    #[error(
        "node {node}, service {service}: {from} names a file {file:?} that {problem}; rename the key (for example {suggestion})"
    )]
    UserFileName {
        node: String,
        service: String,
        from: String,
        file: String,
        problem: String,
        suggestion: String,
    },
    #[error(
        "node {node}, service {service}: dataSources[{index}] names {kind} \"{name}\", which does not exist; create it or mark it optional: true"
    )]
    MissingDataSource { node: String, service: String, index: usize, kind: &'static str, name: String },
    #[error("{0}")]
    SourceConfig(#[from] SourceConfigError),
    #[error("node {node} does not run service {service} (its services: {services}); pick one of those")]
    NotDeployed { node: String, service: String, services: String },
    #[error("cannot merge the {service} files of node {node}: {error}")]
    Merge { node: String, service: String, error: oslo::write::WriteError },
}

/// A data-source file a service reads as oslo.config that oslo.config cannot parse: the service
/// would fail to start on the node. Names the object, the key and the line, and never shows
/// the content of a Secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("service {service}: {object} key {key}, {}", self.problem())]
pub struct SourceConfigError {
    pub service: String,
    /// `Secret/name` or `ConfigMap/name`.
    pub object: String,
    pub kind: String,
    pub key: String,
    pub line: usize,
    pub message: &'static str,
    /// The offending line (ConfigMaps only), cut to a readable length.
    pub shown: String,
    /// A note that a Secret's content is not shown.
    pub hidden: &'static str,
}

impl SourceConfigError {
    /// What is wrong and what to do, without naming the object (for `validate`, which does).
    pub fn problem(&self) -> String {
        format!(
            "line {}: {}{}; oslo.config cannot read it, so {} would not start on the node: fix that line in the {}{}",
            self.line, self.message, self.shown, self.service, self.kind, self.hidden
        )
    }
}

/// Checks one data-source file that `service` reads as oslo.config, with the crate's port of
/// oslo's parser (the one `render` checks its own files with).
pub fn check_source_conf(
    service: &str,
    object: &crate::snapshot::resource::ObjRef,
    key: &str,
    content: &str,
    secret: bool,
) -> Result<(), SourceConfigError> {
    let Err(e) = oslo::parse(content) else { return Ok(()) };
    let shown = if secret || e.text.is_empty() {
        String::new()
    } else {
        let cut: String = e.text.chars().take(80).collect();
        let more = if cut.len() < e.text.len() { "…" } else { "" };
        format!(": {}{more}", oslo::pyrepr::repr(&cut))
    };
    Err(SourceConfigError {
        service: service.into(),
        object: object.short(),
        kind: object.kind.to_string(),
        key: key.into(),
        line: e.line,
        message: e.message,
        shown,
        hidden: if secret { " (its content is not shown: it is a Secret)" } else { "" },
    })
}

/// One node's view for rendering.
pub struct NodeView<'a> {
    pub group: &'a HostGroup,
    pub member: &'a Member,
    /// Effective inventory variables (group then host).
    pub vars: Map<String, Value>,
}

impl<'a> NodeView<'a> {
    pub fn new(model: &'a Model, inv: &Inventory, host: &str) -> Option<NodeView<'a>> {
        let (group, member) = model.find_member(host)?;
        Some(NodeView { group, member, vars: effective_vars(inv, member.inventory_hostname()) })
    }
}

/// Group variables (groups by name) then host variables: what Ansible gives the host.
pub fn effective_vars(inv: &Inventory, host: &str) -> Map<String, Value> {
    let mut vars = Map::new();
    for (_, g) in inv.groups_of(host) {
        vars.extend(g.vars.to_json());
    }
    if let Some(h) = inv.hosts.get(host) {
        vars.extend(h.vars.to_json());
    }
    vars
}

/// Renders `kind` for the node. The files come sorted by name, which is the order oslo reads
/// them from a config directory.
#[allow(
    clippy::too_many_lines,
    reason = "the steps of rendering one service's files, in the order oslo layers them"
)]
pub fn render(
    snap: &Snapshot,
    node: &NodeView,
    svc: &Service,
    templates: &Templates,
) -> Result<Vec<RenderedFile>, RenderError> {
    let node_name = node.member.key.clone();
    let cfg = config_files(svc)?;
    let services = &node.group.services.value;
    if !services.iter().any(|s| s == svc.name) {
        return Err(RenderError::NotDeployed {
            node: node_name,
            service: svc.name.into(),
            services: services.join(", "),
        });
    }
    let cell = if cfg.needs_cell { Some(nova_cell::resolve(snap, node.group, node.member)?) } else { None };
    let mut context = json!({
        "node": {"name": node_name, "inventory_hostname": node.member.inventory_hostname(), "services": services},
        "vars": node.vars,
        "service": svc.name,
    });
    if let Some(c) = &cell {
        context["cell"] = cell_json(c);
    }
    // A template may carry any Secret's value, not only the cell's (a variable from an
    // ansibleVarsFrom Secret): a file holding one is 0600 and shows no digest in `mounts plan`.
    // Values shorter than the redaction minimum are too common to tell anything.
    let mut secrets = cell.as_ref().map(CellContext::secrets).unwrap_or_default();
    secrets
        .extend(snap.secret_values().filter(|v| v.trim().chars().count() >= crate::redact::MIN_SECRET_LEN));
    secrets.sort();
    secrets.dedup();
    let mut files: BTreeMap<String, RenderedFile> = BTreeMap::new();
    for t in cfg.templates {
        let text = templates.render(t.template, &context).map_err(|message| RenderError::Template {
            node: node_name.clone(),
            template: t.template.into(),
            message,
        })?;
        let content = normalize_sections(&text);
        oslo::parse(&content).map_err(|mut error| {
            // The line quoted may hold a password the template put there.
            error.text = crate::redact::Redactor::new(secrets.iter().cloned()).redact(&error.text);
            RenderError::Generated {
                node: node_name.clone(),
                file: t.file.into(),
                template: t.template.into(),
                error,
            }
        })?;
        let used: Vec<String> = secrets.iter().filter(|s| content.contains(s.as_str())).cloned().collect();
        let mode = if used.is_empty() { 0o644 } else { 0o600 };
        files.insert(
            t.file.into(),
            RenderedFile {
                name: t.file.into(),
                content,
                mode,
                from: format!("template {}", t.template),
                secrets: used,
                from_secret: false,
            },
        );
    }
    for f in data_source_files(snap, node, svc, &files)? {
        files.entry(f.name.clone()).or_insert(f);
    }
    let generated_last = files.keys().next_back().cloned().unwrap_or_default();
    for f in user_files(snap, node, svc, cfg, &generated_last)? {
        files.insert(f.name.clone(), f);
    }
    Ok(files.into_values().collect())
}

/// The files `render` produces for `svc`; a service outside the catalogue's rendered ones is
/// the caller's bug, reported rather than assumed away.
fn config_files(svc: &Service) -> Result<&ConfigFiles, RenderError> {
    svc.config.as_ref().ok_or_else(|| RenderError::NotRendered { service: svc.name.into() })
}

/// Merges rendered layers into one file with the same effective values (`--merged`).
pub fn merge(node: &str, svc: &Service, files: &[RenderedFile]) -> Result<RenderedFile, RenderError> {
    let cfg = config_files(svc)?;
    let layers = oslo::layer::Layers::new(
        files
            .iter()
            .map(|f| oslo::layer::Layer {
                file: f.name.clone(),
                config: oslo::parse(&f.content).expect("rendered files parse"),
            })
            .collect(),
    );
    let header = format!(
        "{} for node {node}, merged by edpm-agent from: {}",
        svc.name,
        files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let content = oslo::write::write(&oslo::merge::merge(&layers), &[&header])
        .map_err(|error| RenderError::Merge { node: node.into(), service: svc.name.into(), error })?;
    let secret = files.iter().any(|f| f.mode == 0o600);
    // The merged file mixes layers: the values of the layers that came from a Secret are
    // known exactly, so only those are masked, not the whole file.
    let mut secrets: Vec<String> = files.iter().flat_map(|f| f.secrets.clone()).collect();
    for l in layers.layers.iter().zip(files).filter(|(_, f)| f.from_secret).map(|(l, _)| l) {
        for section in &l.config.sections {
            secrets.extend(section.entries.iter().map(|e| e.value.to_string()));
        }
    }
    Ok(RenderedFile {
        name: cfg.merged_name.into(),
        content,
        mode: if secret { 0o600 } else { 0o644 },
        from: "merge of the layered files".into(),
        secrets,
        from_secret: false,
    })
}

fn cell_json(c: &CellContext) -> Value {
    json!({
        "name": c.name,
        "cell_name": c.cell_name,
        "transport_url": c.transport_url,
        "notification_transport_url": c.notification_transport_url,
        "quorum_queues": c.quorum_queues,
        "keystone_internal_url": c.keystone_internal_url,
        "region": c.region,
        "service_user": c.service_user,
        "service_password": c.service_password,
        "application_credential_id": c.application_credential.as_ref().map(|a| &a.0),
        "application_credential_secret": c.application_credential.as_ref().map(|a| &a.1),
        "novncproxy_base_url": c.novncproxy_base_url,
    })
}

/// lib-common's `removeNewLinesInSections`: trims every line, drops blank lines, and puts one
/// blank line before each section header except the first.
pub fn normalize_sections(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('[') && !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The service's data sources: Secrets and ConfigMaps whose keys are config files for this
/// service (names matching its glob), copied as they are. A key a template already generates is
/// skipped: the generated one is derived for this node (e.g. its own cell's `01-nova.conf`).
fn data_source_files(
    snap: &Snapshot,
    node: &NodeView,
    svc: &Service,
    generated: &BTreeMap<String, RenderedFile>,
) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out = Vec::new();
    for (index, ds) in snap.service_data_sources(svc.name).iter().enumerate() {
        let missing = |k: &'static str, name: &str| RenderError::MissingDataSource {
            node: node.member.key.clone(),
            service: svc.name.into(),
            index,
            kind: k,
            name: name.into(),
        };
        // The extra-config ConfigMap is the user's CustomServiceConfig: handled by user_files.
        if let Some(r) = &ds.config_map_ref
            && r.name != svc.extra_config_map()
        {
            match snap.config_map(&r.name) {
                Some(cm) => {
                    out.extend(source_files(
                        svc,
                        generated,
                        &cm.id,
                        cm.body.data.iter(),
                        String::clone,
                        false,
                    )?);
                }
                None if r.optional == Some(true) => {}
                None => return Err(missing("ConfigMap", &r.name)),
            }
        }
        if let Some(r) = &ds.secret_ref {
            if svc.replaces_secret(&r.name) {
                continue;
            }
            match snap.secret(&r.name) {
                Some(s) => {
                    let text = |v: &Vec<u8>| String::from_utf8_lossy(v).into_owned();
                    out.extend(source_files(svc, generated, &s.id, s.body.data.iter(), text, true)?);
                }
                None if r.optional == Some(true) => {}
                None => return Err(missing("Secret", &r.name)),
            }
        }
    }
    Ok(out)
}

/// The keys of one data source that this service copies and that no generated file replaces.
/// Secret keys hold credentials: mode 0600.
/// Each must parse as oslo.config: the service reads it.
fn source_files<'k, V: 'k>(
    svc: &Service,
    generated: &BTreeMap<String, RenderedFile>,
    id: &crate::snapshot::resource::ObjRef,
    keys: impl Iterator<Item = (&'k String, &'k V)>,
    text: impl Fn(&V) -> String,
    from_secret: bool,
) -> Result<Vec<RenderedFile>, RenderError> {
    keys.filter(|(k, _)| svc.matches(k) && !generated.contains_key(*k))
        .map(|(k, v)| {
            let content = text(v);
            check_source_conf(svc.name, id, k, &content, from_secret)?;
            Ok(RenderedFile {
                name: k.clone(),
                content,
                mode: if from_secret { 0o600 } else { 0o644 },
                from: format!("{} key {k}", id.short()),
                secrets: vec![],
                from_secret,
            })
        })
        .collect()
}

/// The user's CustomServiceConfig: the keys of the service's extra-config ConfigMap (e.g.
/// `nova-extra-config`), and for nova a NovaExternalCompute's `spec.customServiceConfig`.
/// Each must parse with oslo's rules (a broken snippet stops the service), match the glob the
/// role copies, and sort after every generated file so that it wins.
fn user_files(
    snap: &Snapshot,
    node: &NodeView,
    svc: &Service,
    cfg: &ConfigFiles,
    generated_last: &str,
) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out = Vec::new();
    let check = |from: String, file: String, content: String| -> Result<RenderedFile, RenderError> {
        let name_err = |problem: String| RenderError::UserFileName {
            node: node.member.key.clone(),
            service: svc.name.into(),
            from: from.clone(),
            file: file.clone(),
            problem,
            suggestion: cfg.custom_name.into(),
        };
        if !svc.matches(&file) {
            return Err(name_err(format!(
                "edpm-ansible does not copy (it copies {})",
                cfg.globs.join(" and ")
            )));
        }
        if file.as_str() <= generated_last {
            return Err(name_err(format!(
                "sorts before the generated {generated_last}, so the defaults would override it"
            )));
        }
        oslo::parse(&content)
            .map_err(|mut error| {
                // A user's config may carry a credential from a Secret: never quote it.
                error.text = redactor(snap).redact(&error.text);
                error
            })
            .map_err(|error| RenderError::UserConfig {
                node: node.member.key.clone(),
                service: svc.name.into(),
                from: from.clone(),
                file: file.clone(),
                error,
            })?;
        Ok(RenderedFile { name: file, content, mode: 0o644, from, secrets: vec![], from_secret: false })
    };
    let extra = svc.extra_config_map();
    if let Some(cm) = snap.config_map(&extra) {
        for (k, v) in &cm.body.data {
            out.push(check(format!("{} key {k}", cm.id.short()), k.clone(), v.clone())?);
        }
    }
    if cfg.needs_cell
        && let Some(nec) = snap.openstack_object("NovaExternalCompute", &node.member.key)
        && let Some(csc) = nec
            .body
            .pointer("/spec/customServiceConfig")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
    {
        out.push(check(
            format!("{} spec.customServiceConfig", nec.id.short()),
            cfg.custom_name.into(),
            csc.to_string(),
        )?);
    }
    Ok(out)
}

/// The file as `render --redact` prints it: every value from a Secret masked (the whole file's
/// values when it came from a Secret; the known secret values and every Secret's values
/// elsewhere, as `redactor` knows them), and the password of every URL.
pub fn redact(file: &RenderedFile, redactor: &Redactor) -> String {
    redactor.redact_config(&file.content, file.from_secret, &file.secrets)
}

/// A redactor for everything `snap`'s Secrets hold.
pub fn redactor(snap: &Snapshot) -> Redactor {
    Redactor::new(snap.secret_values())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_like_lib_common() {
        assert_eq!(normalize_sections("\n[a]\n  x = 1\n\n\n[b]\ny=2\n\n"), "[a]\nx = 1\n\n[b]\ny=2\n");
    }

    #[test]
    fn redaction_masks_known_values_and_whole_secret_files() {
        let f = RenderedFile {
            name: "f".into(),
            content: "[DEFAULT]\ntransport_url=rabbit://u:pw@h\ndebug=true\n[k]\npassword = abc\n".into(),
            mode: 0o600,
            from: "t".into(),
            secrets: vec!["rabbit://u:pw@h".into(), "abc".into()],
            from_secret: false,
        };
        let r = Redactor::default();
        assert_eq!(
            redact(&f, &r),
            "[DEFAULT]\ntransport_url=rabbit://u:********@h\ndebug=true\n[k]\npassword = ********\n"
        );
        let s = RenderedFile {
            content: "[ovn]\novn_sb_connection = tcp:1.2.3.4:6642\nfoo = bar\n".into(),
            from_secret: true,
            secrets: vec![],
            ..f
        };
        assert_eq!(redact(&s, &r), "[ovn]\novn_sb_connection = ********\nfoo = ********\n");
    }

    /// A deployment whose Secrets hold the credentials `c`, which also show up (copied by an
    /// operator) inside URLs and plain values of ConfigMaps and CustomServiceConfig.
    fn deployment(c: &[String]) -> Snapshot {
        let docs = [
            json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
                "metadata": {"name": "ns", "namespace": "openstack", "annotations": {"nova.openstack.org/cell": "nova-cell1"}},
                "spec": {"services": ["neutron-metadata", "nova"], "nodeTemplate": {
                    "ansibleSSHPrivateKeySecret": "ssh",
                    "ansible": {"ansibleVarsFrom": [{"prefix": "edpm_", "secretRef": {"name": "vars"}}]}},
                    "nodes": {"edpm-compute-0": {"hostName": "edpm-compute-0", "ansible": {"ansibleHost": "192.0.2.10",
                    "ansibleVars": {"ctlplane_ip": "192.0.2.10", "canonical_hostname": "edpm-compute-0.example"}}}}}}),
            json!({"apiVersion": "nova.openstack.org/v1beta1", "kind": "NovaCell", "metadata": {"name": "nova-cell1", "namespace": "openstack"},
                "spec": {"cellName": "cell1", "secret": "nova-cell1", "keystoneAuthURL": "https://keystone.svc:5000"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nova-cell1", "namespace": "openstack"},
                "stringData": {"ServicePassword": c[0], "transport_url": format!("rabbit://nova:{}@rabbit.svc:5672/?ssl=0", c[1])}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vars", "namespace": "openstack"},
                "stringData": {"neutron_metadata_agent_ovs_ovsdb_connection": c[4]}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ssh", "namespace": "openstack"},
                "stringData": {"ssh-privatekey": "k"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nova-migration-ssh-key", "namespace": "openstack"},
                "stringData": {"ssh-privatekey": "k"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "neutron-ovn-metadata-agent-neutron-config", "namespace": "openstack"},
                "stringData": {"10-neutron-metadata.conf": format!(
                    "[DEFAULT]\n# shared with nova: {}\nmetadata_proxy_shared_secret = {}\n[database]\nconnection = mysql+pymysql://neutron:{}@db.svc/neutron\n",
                    c[2], c[2], c[3])}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nova-metadata-neutron-config", "namespace": "openstack"},
                "stringData": {"05-nova-metadata.conf": "[DEFAULT]\nnova_metadata_host = meta.svc\n"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nova-extra-config", "namespace": "openstack"},
                "data": {"25-nova-extra.conf": format!(
                    "[DEFAULT]\nmy_url = https://admin:{}@keystone.svc:5000/v3\nbackend = redis://:{}@redis.svc:6379\nopt = {}\nother = prefix-{}-suffix\n[x]\ndb = mysql+pymysql://nova:{}@db/nova\n",
                    c[0], c[2], c[1], c[3], c[4])}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "neutron-metadata-extra-config", "namespace": "openstack"},
                "data": {"50-metadata-custom.conf": format!(
                    "[DEFAULT]\nproxy = http://u:{}@proxy.svc:3128\nx = {}\n", c[3], c[0])}}),
        ];
        Snapshot::from_documents(
            docs.iter().map(|v| {
                crate::snapshot::Located::from_value(
                    crate::snapshot::resource::Origin::File { path: "t".into(), line: 1 },
                    v,
                )
            }),
            None,
        )
        .unwrap()
    }

    /// Every rendered file of both services, then their merge, as `render --redact` prints them.
    fn redacted_output(snap: &Snapshot) -> (String, String) {
        let model = crate::model::resolve(snap).unwrap();
        let opts = crate::inventory::Options {
            ssh_key_dir: "/runner/env/ssh_key".into(),
            images: BTreeMap::new(),
            image_origins: BTreeMap::new(),
            provenance: false,
        };
        let inv = crate::inventory::build(&model, snap, &opts).unwrap();
        let view = NodeView::new(&model, &inv, "edpm-compute-0").unwrap();
        let templates = Templates::new(BTreeMap::new()).unwrap();
        let r = redactor(snap);
        let (mut plain, mut redacted) = (String::new(), String::new());
        for svc in ["nova", "neutron-metadata"] {
            let svc = crate::services::find_rendered(svc).unwrap();
            let files = render(snap, &view, svc, &templates).unwrap();
            let merged = merge("edpm-compute-0", svc, &files).unwrap();
            for f in files.iter().chain([&merged]) {
                plain.push_str(&f.content);
                redacted.push_str(&redact(f, &r));
            }
        }
        (plain, redacted)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn redacted_render_never_holds_a_secret_credential(
            c in proptest::collection::vec("[A-Za-z0-9._~!$&+=-]{6,24}", 5)
        ) {
            let snap = deployment(&c);
            let (plain, redacted) = redacted_output(&snap);
            for (i, cred) in c.iter().enumerate() {
                proptest::prop_assert!(plain.contains(cred.as_str()), "credential {} is rendered at all", i);
                proptest::prop_assert!(!redacted.contains(cred.as_str()), "credential {} leaked:\n{}", i, redacted);
            }
            // What an operator debugs stays readable.
            for visible in ["rabbit://nova:", "@rabbit.svc:5672/", "redis://:", "@redis.svc:6379", "@proxy.svc:3128", "@keystone.svc:5000/v3", "[DEFAULT]"] {
                proptest::prop_assert!(redacted.contains(visible), "{} masked:\n{}", visible, redacted);
            }
        }
    }

    /// Every way oslo.config refuses a file, from a Secret (content never shown) and from a
    /// ConfigMap (the line shown, cut).
    #[test]
    fn source_configs_oslo_cannot_read_are_refused_by_line() {
        use crate::snapshot::resource::{ObjRef, Origin};
        let origin = || Origin::File { path: "t.yaml".into(), line: 3 };
        let secret = ObjRef::new("Secret", "s", origin());
        let cm = ObjRef::new("ConfigMap", "c", origin());
        let cases = [
            ("[DEFAULT]\nmetadata_proxy_shared_secret LEAKME-9\n", 2, oslo::parse::NO_ASSIGNMENT),
            ("proxy_secret = LEAKME-9\n", 1, oslo::parse::NO_SECTION),
            ("  LEAKME-9 = x\n[DEFAULT]\n", 1, oslo::parse::UNEXPECTED_CONTINUATION),
            ("[DEFAULT\nx = LEAKME-9\n", 1, oslo::parse::NO_SECTION_END),
            ("[]\nx = LEAKME-9\n", 1, oslo::parse::EMPTY_SECTION),
            ("[DEFAULT]\na = 1\n= LEAKME-9\n", 3, oslo::parse::EMPTY_KEY),
        ];
        for (text, line, message) in cases {
            let e = check_source_conf("neutron-metadata", &secret, "05-x.conf", text, true).unwrap_err();
            let msg = e.to_string();
            assert_eq!((e.line, e.message), (line, message), "{text:?}");
            assert!(!msg.contains("LEAKME"), "{msg}");
            assert!(
                msg.starts_with(&format!(
                    "service neutron-metadata: Secret/s key 05-x.conf, line {line}: {message}"
                )) && msg.ends_with("fix that line in the Secret (its content is not shown: it is a Secret)"),
                "{msg}"
            );
            let e = check_source_conf("neutron-metadata", &cm, "05-x.conf", text, false).unwrap_err();
            assert_eq!(e.line, line);
        }
        let e =
            check_source_conf("nova", &cm, "k.conf", "[DEFAULT]\nno equals sign here\n", false).unwrap_err();
        assert!(e.to_string().contains(": 'no equals sign here';"), "{e}");
        let long = format!("[DEFAULT]\n{}\n", "x".repeat(10_000));
        let e = check_source_conf("nova", &cm, "k.conf", &long, false).unwrap_err().to_string();
        assert!(e.len() < 400 && e.contains("…"), "{e}");
        assert!(check_source_conf("nova", &secret, "k.conf", "[DEFAULT]\n# c\nx = 1\n  y\n", true).is_ok());
        assert!(check_source_conf("nova", &secret, "k.conf", "", true).is_ok());
    }
}
