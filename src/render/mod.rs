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

use crate::cell::{self, CellContext};
use crate::inventory::Inventory;
use crate::model::{HostGroup, Member, Model};
use crate::oslo;
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
    Cell(#[from] cell::CellError),
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
    #[error("node {node} does not run service {service} (its services: {services}); pick one of those")]
    NotDeployed { node: String, service: String, services: String },
    #[error("cannot merge the {service} files of node {node}: {error}")]
    Merge { node: String, service: String, error: oslo::write::WriteError },
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
    let cell = if cfg.needs_cell { Some(cell::resolve(snap, node.group, node.member)?) } else { None };
    let mut context = json!({
        "node": {"name": node_name, "inventory_hostname": node.member.inventory_hostname(), "services": services},
        "vars": node.vars,
        "service": svc.name,
    });
    if let Some(c) = &cell {
        context["cell"] = cell_json(c);
    }
    let secrets = cell.as_ref().map(CellContext::secrets).unwrap_or_default();
    let mut files: BTreeMap<String, RenderedFile> = BTreeMap::new();
    for t in cfg.templates {
        let text = templates.render(t.template, &context).map_err(|message| RenderError::Template {
            node: node_name.clone(),
            template: t.template.into(),
            message,
        })?;
        let content = normalize_sections(&text);
        oslo::parse(&content).map_err(|error| RenderError::Generated {
            node: node_name.clone(),
            file: t.file.into(),
            template: t.template.into(),
            error,
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
    Ok(RenderedFile {
        name: cfg.merged_name.into(),
        content,
        mode: if secret { 0o600 } else { 0o644 },
        from: "merge of the layered files".into(),
        secrets: files.iter().flat_map(|f| f.secrets.clone()).collect(),
        from_secret: files.iter().any(|f| f.from_secret),
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
                    ));
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
                    out.extend(source_files(svc, generated, &s.id, s.body.data.iter(), text, true));
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
fn source_files<'k, V: 'k>(
    svc: &Service,
    generated: &BTreeMap<String, RenderedFile>,
    id: &crate::snapshot::resource::ObjRef,
    keys: impl Iterator<Item = (&'k String, &'k V)>,
    text: impl Fn(&V) -> String,
    from_secret: bool,
) -> Vec<RenderedFile> {
    keys.filter(|(k, _)| svc.matches(k) && !generated.contains_key(*k))
        .map(|(k, v)| RenderedFile {
            name: k.clone(),
            content: text(v),
            mode: if from_secret { 0o600 } else { 0o644 },
            from: format!("{} key {k}", id.short()),
            secrets: vec![],
            from_secret,
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
        oslo::parse(&content).map_err(|error| RenderError::UserConfig {
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

/// Masks secret values: the known ones exactly, URL passwords, and values of keys that name
/// credentials in files that came from Secrets.
pub fn redact(file: &RenderedFile) -> String {
    let mut text = file.content.clone();
    for s in &file.secrets {
        text = text.replace(s.as_str(), "<redacted>");
    }
    if !file.from_secret {
        return text;
    }
    let sensitive = |key: &str| {
        let k = key.to_ascii_lowercase();
        ["password", "secret", "transport_url", "connection", "token", "credential", "key"]
            .iter()
            .any(|w| k.contains(w))
    };
    text.lines()
        .map(|line| match line.split_once('=') {
            Some((k, _)) if !line.starts_with(['#', ';', '[', ' ', '\t']) && sensitive(k.trim()) => {
                format!("{}= <redacted>", k)
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_like_lib_common() {
        assert_eq!(normalize_sections("\n[a]\n  x = 1\n\n\n[b]\ny=2\n\n"), "[a]\nx = 1\n\n[b]\ny=2\n");
    }

    #[test]
    fn redaction_masks_known_values_and_credential_keys() {
        let f = RenderedFile {
            name: "f".into(),
            content: "[DEFAULT]\ntransport_url=rabbit://u:pw@h\ndebug=true\n".into(),
            mode: 0o600,
            from: "t".into(),
            secrets: vec!["rabbit://u:pw@h".into()],
            from_secret: false,
        };
        assert_eq!(redact(&f), "[DEFAULT]\ntransport_url=<redacted>\ndebug=true\n");
        let s = RenderedFile {
            content: "[ovn]\novn_sb_connection = tcp:1.2.3.4:6642\nfoo = bar\n".into(),
            from_secret: true,
            secrets: vec![],
            ..f
        };
        assert_eq!(redact(&s), "[ovn]\novn_sb_connection = <redacted>\nfoo = bar\n");
    }
}
