//! `edpm-agent validate`: offline checks over a snapshot, each naming the object and field.
//!
//! Pure. Reports every problem it can find rather than stopping at the first, mirroring the
//! operator's webhook validation and the CRD schema (fields the API server would prune), plus
//! checks for references the operator only discovers at deploy time.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{Value, json};

use crate::excerpt::echo;
use crate::inventory::{
    self,
    build::{anchor_decode, decode_vars_from_value, parse_ansible_vars},
};
use crate::model::{self, AnsibleSection, Field, GroupKind};
use crate::snapshot::Snapshot;
use crate::snapshot::resource::{ObjRef, UnknownFields};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub object: ObjRef,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        // Names and values echoed from input never reach the terminal raw.
        let line = format!("{}: {}: {}", self.object, self.field, self.message);
        write!(f, "{sev}: {}", crate::excerpt::printable(&line))
    }
}

struct Report(Vec<Diagnostic>);

impl Report {
    fn push(
        &mut self,
        severity: Severity,
        object: &ObjRef,
        field: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.0.push(Diagnostic {
            severity,
            object: object.clone(),
            field: field.into(),
            message: message.into(),
        });
    }
    fn error(&mut self, o: &ObjRef, f: impl Into<String>, m: impl Into<String>) {
        self.push(Severity::Error, o, f, m);
    }
    fn warn(&mut self, o: &ObjRef, f: impl Into<String>, m: impl Into<String>) {
        self.push(Severity::Warning, o, f, m);
    }
}

/// Runs every check. Diagnostics come sorted: errors first, then by object.
pub fn validate(snap: &Snapshot, opts: &inventory::Options) -> Vec<Diagnostic> {
    let mut r = Report(Vec::new());
    check_names(snap, &mut r);
    check_unknown_fields(snap, &mut r);
    check_role_references(snap, &mut r);
    for u in &snap.unknown_kinds {
        let object = ObjRef::new(u.kind.clone(), u.name.clone(), u.origin.clone());
        r.warn(&object, "kind", format!("not a kind edpm-agent knows in {}, so the object is not read; check the kind, or ignore this if a newer operator defines it", u.api_version));
    }
    if let Ok(model) = model::resolve(snap) {
        check_model(snap, &model, &mut r);
        // Whatever the checks above missed, building the inventory will find.
        if let Err(e) = inventory::build(&model, snap, opts)
            && !r.0.iter().any(|d| d.severity == Severity::Error)
        {
            let object = model.groups.first().map(|g| g.id.clone()).unwrap_or_else(placeholder);
            r.error(&object, "inventory", e.to_string());
        }
    }
    r.0.sort_by(|a, b| (a.severity, &a.object, &a.field).cmp(&(b.severity, &b.object, &b.field)));
    r.0.dedup();
    r.0
}

fn placeholder() -> ObjRef {
    ObjRef::new("Inventory", "-", crate::snapshot::resource::Origin::Api { namespace: "-".into() })
}

pub fn summary(diags: &[Diagnostic]) -> (usize, usize) {
    let errors = diags.iter().filter(|d| d.severity == Severity::Error).count();
    (errors, diags.len() - errors)
}

pub fn to_json(diags: &[Diagnostic]) -> Value {
    let (errors, warnings) = summary(diags);
    json!({
        "errors": errors,
        "warnings": warnings,
        "diagnostics": diags.iter().map(|d| json!({
            "severity": match d.severity { Severity::Error => "error", Severity::Warning => "warning" },
            "kind": d.object.kind,
            "name": d.object.name,
            "origin": d.object.origin.to_string(),
            "field": d.field,
            "message": d.message,
        })).collect::<Vec<_>>(),
    })
}

pub use crate::rfc1123::{is_dns1123_label, is_dns1123_subdomain};

/// A host name: like a subdomain, but upper case is tolerated (resolvers ignore case).
fn is_hostname(s: &str) -> bool {
    is_dns1123_subdomain(&s.to_ascii_lowercase())
}

fn check_names(snap: &Snapshot, r: &mut Report) {
    let rule = "must be a lowercase RFC 1123 name ([a-z0-9-], dots between labels, starting and ending with a letter or digit)";
    for id in snap
        .roles
        .iter()
        .map(|o| &o.id)
        .chain(snap.nodes.iter().map(|o| &o.id))
        .chain(snap.dataplanes.iter().map(|o| &o.id))
    {
        if !is_dns1123_subdomain(&id.name) {
            r.error(id, "metadata.name", format!("\"{}\" {rule}", id.name));
        }
    }
    for ns in &snap.nodesets {
        if !is_dns1123_label(&ns.id.name) {
            r.error(
                &ns.id,
                "metadata.name",
                format!(
                    "\"{}\" must be an RFC 1123 label (at most 63 of [a-z0-9-]); the webhook rejects it",
                    ns.id.name
                ),
            );
        }
    }
}

fn check_unknown_fields(snap: &Snapshot, r: &mut Report) {
    let mut warn = |id: &ObjRef, paths: Vec<String>| {
        for p in paths {
            r.warn(id, p, "unknown field: the API server prunes it silently, so it has no effect; check the spelling against the CRD");
        }
    };
    macro_rules! each {
        ($objs:expr) => {
            for o in $objs {
                let mut paths = Vec::new();
                o.body.unknown_fields("spec", &mut paths);
                warn(&o.id, paths);
            }
        };
    }
    each!(&snap.roles);
    each!(&snap.nodes);
    each!(&snap.dataplanes);
    each!(&snap.nodesets);
}

fn check_role_references(snap: &Snapshot, r: &mut Report) {
    let roles: Vec<&str> = snap
        .roles
        .iter()
        .map(|o| o.id.name.as_str())
        .chain(snap.dataplanes.iter().flat_map(|d| d.body.roles.keys().map(String::as_str)))
        .collect();
    for n in &snap.nodes {
        match n.body.role.as_deref() {
            None | Some("") => {
                r.error(&n.id, "spec.role", "is empty; set it to the name of an OpenStackDataPlaneRole")
            }
            Some(role) if !roles.contains(&role) => r.error(
                &n.id,
                "spec.role",
                format!("Role \"{role}\" does not exist{}", model::did_you_mean(role, roles.iter().copied())),
            ),
            Some(_) => {}
        }
    }
}

/// `tlsEnabled` must match `OpenStackControlPlane.spec.tls.podLevel.enabled`; upstream only finds
/// out when a Deployment starts (openstack-operator `listNodeSets`) and fails it.
fn check_tls(snap: &Snapshot, m: &model::Model, r: &mut Report) {
    for cp in snap.openstack.iter().filter(|o| o.id.kind == "OpenStackControlPlane") {
        let Some(cp_tls) = cp.body.pointer("/spec/tls/podLevel/enabled").and_then(Value::as_bool) else {
            continue;
        };
        for g in m.groups.iter().filter(|g| g.kind == GroupKind::NodeSet) {
            if let Some(t) = &g.tls_enabled
                && t.value != cp_tls
            {
                r.error(&g.id, &*t.path, format!(
                    "is {}{} but {} has spec.tls.podLevel.enabled {cp_tls}; a Deployment of this NodeSet would fail: make them match",
                    t.value,
                    if t.defaulted { " (the default)" } else { "" },
                    cp.id.short()
                ));
            }
        }
    }
}

/// Item paths of the Secret, ConfigMap and projected volumes that reach each group's EDPM job
/// (its own extraMounts and the control plane's): what Kubernetes refuses is an error here
/// too, instead of a pod that never starts or a file that never reaches the node.
fn check_volume_items(snap: &Snapshot, m: &model::Model, r: &mut Report) {
    for g in &m.groups {
        let Ok(entries) = crate::mounts::entries(snap, crate::mounts::COMPUTE, Some(g)) else { continue };
        for (place, vm) in entries {
            let object = if place.object == g.id.short() {
                g.id.clone()
            } else {
                match snap.openstack.iter().find(|o| o.id.short() == place.object) {
                    Some(o) => o.id.clone(),
                    None => continue,
                }
            };
            for (j, vol) in vm.volumes.iter().enumerate() {
                let field = format!("{}.volumes[{j}]", place.path);
                for e in crate::staging::volume::item_path_problems(&vol.source, &field) {
                    let crate::staging::volume::VolumeError::BadPath { field, path, problem } = e else {
                        continue;
                    };
                    r.error(&object, field, format!("path {path:?} {problem}"));
                }
            }
        }
    }
}

/// The oslo.config files each group's services read from their data sources (and, for the
/// services `render` knows, the extra-config ConfigMap) must parse: `render` and `stage` refuse
/// them, and the service would not start. Never shows a Secret's content.
fn check_service_configs(snap: &Snapshot, m: &model::Model, r: &mut Report) {
    for g in &m.groups {
        for name in &g.services.value {
            let Some(service) = crate::services::find(name) else { continue };
            let mut sources: Vec<(bool, String)> = Vec::new();
            for ds in snap.service_data_sources(name) {
                sources.extend(ds.config_map_ref.as_ref().map(|c| (false, c.name.clone())));
                sources.extend(
                    ds.secret_ref
                        .as_ref()
                        .filter(|s| !service.replaces_secret(&s.name))
                        .map(|s| (true, s.name.clone())),
                );
            }
            if service.renders() {
                sources.push((false, service.extra_config_map()));
            }
            for (secret, object) in sources {
                let (Some(files), Some(id)) =
                    (snap.object_files(secret, &object), snap.object_ref(secret, &object))
                else {
                    continue;
                };
                for (key, bytes) in files.iter().filter(|(k, _)| service.reads_oslo_key(k)) {
                    let text = String::from_utf8_lossy(bytes);
                    if let Err(e) = crate::render::check_source_conf(name, id, key, &text, secret) {
                        r.error(id, format!("data.{key}"), e.problem());
                    }
                }
            }
        }
    }
}

/// A name with a control character in it: Ansible would use it as it is, and every terminal
/// and log would show something else (a rewritten line, a fake table row).
fn control_message(what: &str) -> String {
    format!(
        "the {what} holds a control character (shown escaped); Ansible would use it as it is and every terminal would show something else: rename it"
    )
}

#[allow(
    clippy::too_many_lines,
    reason = "one check after another over the model, each a few lines; a list reads best whole"
)]
fn check_model(snap: &Snapshot, m: &model::Model, r: &mut Report) {
    check_tls(snap, m, r);
    check_service_configs(snap, m, r);
    check_volume_items(snap, m, r);
    let mut host_names: BTreeMap<String, Vec<(ObjRef, String)>> = BTreeMap::new();
    let mut addresses: BTreeMap<String, Vec<(ObjRef, String)>> = BTreeMap::new();
    for g in &m.groups {
        check_section(snap, &g.id, &g.template, r);
        match &g.template.ssh_key_secret {
            Some(k) if snap.secret(&k.value).is_none() => r.warn(
                &g.id,
                &*k.path,
                format!("Secret \"{}\" is not in the source; the runner cannot mount the SSH key and SetupReady stays False", k.value),
            ),
            None if g.kind == GroupKind::NodeSet => r.error(&g.id, "spec.nodeTemplate.ansibleSSHPrivateKeySecret", "is required by the CRD; name the Secret holding ssh-privatekey"),
            _ => {}
        }
        if let Some(c) = &g.cell {
            check_cell(snap, c, r);
        }
        for (i, mount) in g.extra_mounts.value.iter().enumerate() {
            for (j, vol) in mount.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let name = vol.get("name").and_then(Value::as_str).unwrap_or("");
                if !is_dns1123_label(name) {
                    r.error(
                        &g.id,
                        format!("{}[{i}].volumes[{j}].name", g.extra_mounts.path),
                        format!("\"{name}\" must be an RFC 1123 label; the webhook rejects it"),
                    );
                }
            }
        }
        if crate::excerpt::has_control(&g.name) {
            r.error(&g.id, "metadata.name", control_message("name"));
        }
        for mem in &g.members {
            let here = (mem.id.clone(), mem.key.clone());
            check_section(snap, &mem.id, &mem.section, r);
            if crate::excerpt::has_control(&mem.key) {
                r.error(&mem.id, format!("node key {}", echo(&mem.key)), control_message("node key"));
            }
            if !is_hostname(&mem.host_name.value) {
                r.error(
                    &mem.id,
                    &*mem.host_name.path,
                    format!("\"{}\" is not a valid host name", mem.host_name.value),
                );
            }
            host_names.entry(mem.host_name.value.clone()).or_default().push(here.clone());
            let addr = mem.section.host.as_ref().map_or(&mem.host_name.value, |h| &h.value);
            addresses.entry(addr.clone()).or_default().push(here);
            if let Some(c) = &mem.own_cell {
                check_cell(snap, c, r);
            }
            let has_ipset =
                snap.ipsets.iter().any(|o| o.id.name == mem.host_name.value || o.id.name == mem.key);
            let nets = mem.section.networks.as_ref().or(g.template.networks.as_ref());
            let has_fixed = nets.is_some_and(|n| {
                n.value.iter().any(|n| n.fixed_ip.as_deref().is_some_and(|ip| !ip.is_empty()))
            });
            if !has_ipset && !has_fixed {
                r.warn(&mem.id, format!("{} (node {})", nets.map_or("networks", |n| &*n.path), mem.key),
                    "no IPSet and no fixedIP: ctlplane_ip and canonical_hostname are not set, and nova's my_ip/host will be missing");
            }
            if g.pre_provisioned && g.kind == GroupKind::NodeSet {
                let host = mem.section.host.as_ref();
                if host.is_none_or(|h| h.value.parse::<IpAddr>().is_err()) {
                    let field = host.map_or_else(
                        || format!("spec.nodes.{}.ansible.ansibleHost", mem.key),
                        |h| h.path.to_string(),
                    );
                    r.warn(&mem.id, field, "pre-provisioned nodes should have an IP address as ansibleHost; the webhook requires it");
                }
            }
        }
    }
    for (what, map) in [("hostName", host_names), ("ansibleHost", addresses)] {
        for (value, users) in map.into_iter().filter(|(_, u)| u.len() > 1) {
            for (id, key) in &users[1..] {
                r.error(
                    id,
                    format!("node {key}"),
                    format!(
                        "{what} \"{value}\" is also used by {} (node {}); the webhook rejects duplicates",
                        users[0].0.short(),
                        users[0].1
                    ),
                );
            }
        }
    }
}

fn check_cell(snap: &Snapshot, c: &model::CellRef, r: &mut Report) {
    if snap.openstack_object("NovaCell", &c.name).is_none() {
        let cells = snap.openstack.iter().filter(|o| o.id.kind == "NovaCell").map(|o| o.id.name.as_str());
        r.warn(
            &c.object,
            c.field,
            format!(
                "NovaCell \"{}\" is not in the source{}; nova config for these nodes cannot be derived",
                c.name,
                model::did_you_mean(&c.name, cells)
            ),
        );
    }
}

fn check_section(snap: &Snapshot, id: &ObjRef, s: &AnsibleSection, r: &mut Report) {
    let field = s.vars.as_ref().map_or("ansibleVars", |f| &*f.path);
    match parse_ansible_vars(id, s.vars.as_ref()) {
        Err(e) => {
            let msg = e.to_string();
            let msg = msg.split_once(&format!("{field} ")).map_or(msg.as_str(), |(_, m)| m).to_string();
            r.error(id, field, msg);
        }
        Ok(vars) => {
            for (name, _) in vars.iter().filter(|(n, _)| ANSIBLE_RESERVED.contains(&n.as_str())) {
                r.warn(id, format!("{field}.{name}"), format!(
                    "{name} is a name Ansible reserves (a play or task keyword): every run warns \"Found variable using reserved name\", and a play setting such as gather_facts belongs in the playbook; rename the variable or remove it"
                ));
            }
        }
    }
    for f in &s.vars_from {
        check_vars_from(snap, id, f, r);
    }
}

/// The variable names Ansible reserves (`ansible.vars.reserved.get_reserved_names()`, less
/// `vars`, which it ignores): an inventory variable of one of these names makes every run
/// warn. ansible-core 2.19's list, checked against the installed Ansible by
/// `tests/ansible.rs` `validate_knows_the_names_ansible_reserves`.
pub const ANSIBLE_RESERVED: &[&str] = &[
    "action",
    "always",
    "any_errors_fatal",
    "args",
    "async",
    "async_val",
    "become",
    "become_exe",
    "become_flags",
    "become_method",
    "become_user",
    "block",
    "changed_when",
    "check_mode",
    "collections",
    "connection",
    "cycler",
    "debugger",
    "delay",
    "delegate_facts",
    "delegate_to",
    "dict",
    "diff",
    "environment",
    "fact_path",
    "failed_when",
    "force_handlers",
    "gather_facts",
    "gather_timeout",
    "handlers",
    "hosts",
    "ignore_errors",
    "ignore_unreachable",
    "joiner",
    "lipsum",
    "local_action",
    "lookup",
    "loop",
    "loop_control",
    "loop_with",
    "max_fail_percentage",
    "module_defaults",
    "name",
    "namespace",
    "no_log",
    "notify",
    "now",
    "omit",
    "order",
    "poll",
    "port",
    "post_tasks",
    "pre_tasks",
    "q",
    "query",
    "range",
    "register",
    "remote_user",
    "rescue",
    "retries",
    "roles",
    "run_once",
    "serial",
    "strategy",
    "tags",
    "tasks",
    "throttle",
    "timeout",
    "undef",
    "until",
    "vars_files",
    "vars_prompt",
    "when",
    "with_",
];

fn check_vars_from(
    snap: &Snapshot,
    id: &ObjRef,
    f: &Field<crate::snapshot::resource::DataSource>,
    r: &mut Report,
) {
    let ds = &f.value;
    if ds.config_map_ref.is_none() && ds.secret_ref.is_none() {
        r.error(id, &*f.path, "has neither configMapRef nor secretRef");
    }
    let missing = |r: &mut Report, kind: &str, field: &str, name: &str, known: Vec<&str>| {
        r.error(
            id,
            format!("{}.{field}.name", f.path),
            format!(
                "{kind} \"{name}\" does not exist{}; inventory generation fails until it does",
                model::did_you_mean(name, known.into_iter())
            ),
        );
    };
    if let Some(cm) = &ds.config_map_ref {
        match snap.config_map(&cm.name) {
            None if cm.optional != Some(true) => {
                let known = snap.config_maps.iter().map(|o| o.id.name.as_str()).collect();
                missing(r, "ConfigMap", "configMapRef", &cm.name, known);
            }
            None => {}
            Some(obj) => {
                for (k, v) in &obj.body.data {
                    let ours = decode_vars_from_value(v);
                    let theirs = anchor_decode(v);
                    if ours != theirs {
                        r.warn(id, format!("{}.configMapRef", f.path), format!(
                            "key {} of {} is {}: edpm-agent keeps {}, but openstack-operator would decode it as {}; quote it as a JSON string to be safe with both",
                            echo(k), obj.id.short(), echo(v).debug(), echo(&ours.to_string()), echo(&theirs.to_string())));
                    }
                }
            }
        }
    }
    if let Some(s) = &ds.secret_ref
        && snap.secret(&s.name).is_none()
        && s.optional != Some(true)
    {
        let known = snap.secrets.iter().map(|o| o.id.name.as_str()).collect();
        missing(r, "Secret", "secretRef", &s.name, known);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Whatever names and messages hold, a diagnostic prints as one line with no control
        /// character (a node key with ESC or CR cannot fake a line of validate's output).
        #[test]
        fn a_diagnostic_is_one_printable_line(chars in proptest::collection::vec(proptest::char::any(), 0..40)) {
            let t: String = chars.into_iter().collect();
            let object = ObjRef::new(t.clone(), t.clone(), crate::snapshot::resource::Origin::Api { namespace: t.clone() });
            let d = Diagnostic { severity: Severity::Error, object, field: t.clone(), message: t };
            let line = d.to_string();
            proptest::prop_assert!(!crate::excerpt::has_control(&line), "{:?}", line);
        }
    }

    #[test]
    fn rfc1123() {
        assert!(is_dns1123_label("edpm-compute-0"));
        assert!(!is_dns1123_label("Edpm"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(is_hostname("Compute-0.Example.com"));
        assert!(!is_hostname("compute_0"));
    }
}
