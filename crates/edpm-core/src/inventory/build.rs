//! Builds the inventory from the model, step by step as openstack-operator's
//! `GenerateNodeSetInventory` does, recording provenance for every variable.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::inventory::vars::{Key, Level, Provenance, Scope, Vars};
use crate::inventory::{Group, GroupSource, Host, Inventory, InventoryError, Options};
use crate::model::{AnsibleSection, Field, GroupKind, HostGroup, Member, Model};
use crate::snapshot::Snapshot;
use crate::snapshot::resource::{AnsibleVars, DataSource, IpSetNetwork, ObjRef};

/// Group names Ansible reserves.
const RESERVED_GROUPS: [&str; 2] = ["all", "ungrouped"];

/// The variables of one group and of each of its members, made apart from assembling the
/// inventory so that groups can be made on several cores.
pub struct GroupVars {
    group: Result<Vars, InventoryError>,
    hosts: Vec<Result<Vars, InventoryError>>,
}

/// Runs `work(i)` for every group index `0..n` and gives the results back in order: one after
/// the other ([`build`]), or spread over cores by the caller (the shell's `parallel::map`).
pub type Spread<'s> = &'s dyn Fn(usize, &(dyn Fn(usize) -> GroupVars + Sync)) -> Vec<GroupVars>;

pub fn build(model: &Model, snap: &Snapshot, opts: &Options) -> Result<Inventory, InventoryError> {
    build_spread(model, snap, opts, &|n, work| (0..n).map(work).collect())
}

/// [`build`], with each group's variables made through `spread`. Errors come in the order
/// [`build`] finds them: the groups' variables are made first, then checked in order.
#[allow(
    clippy::too_many_lines,
    reason = "the inventory's build steps in upstream's order; their errors must come in that order"
)]
pub fn build_spread(
    model: &Model,
    snap: &Snapshot,
    opts: &Options,
    spread: Spread,
) -> Result<Inventory, InventoryError> {
    let facts = NetFacts::from_snapshot(snap);
    let made = spread(model.groups.len(), &|i| {
        let g = &model.groups[i];
        let net = NetInfo::new(&facts);
        let group = group_vars(g, snap, opts, &net);
        let hosts = g
            .members
            .iter()
            .map(|m| {
                host_vars(g, m, snap, opts, &net).map(|mut v| {
                    v.shrink();
                    v
                })
            })
            .collect();
        GroupVars { group, hosts }
    });
    let mut group_owner: BTreeMap<String, String> = BTreeMap::new();
    let members = model.groups.iter().map(|g| g.members.len()).sum();
    // Hosts are collected and sorted once: inserting 10,000 of them into sorted maps one by
    // one was the costliest part of building the inventory.
    let mut hostnames: HashMap<&str, (&ObjRef, &str)> = HashMap::with_capacity(members);
    let mut addresses: HashMap<String, (&ObjRef, &str)> = HashMap::with_capacity(members);
    let mut hosts: Vec<(String, Host)> = Vec::with_capacity(members);
    let mut groups: Vec<(String, Group)> = Vec::with_capacity(model.groups.len());
    let mut cells: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let pair = |(id, key): (&ObjRef, &str)| (id.clone(), key.to_string());

    for (g, made) in model.groups.iter().zip(made) {
        claim_group(&mut group_owner, &g.name, &g.id.to_string())?;
        let vars = made.group?;
        let mut names = Vec::with_capacity(g.members.len());
        for (m, host) in g.members.iter().zip(made.hosts) {
            let name = m.inventory_hostname();
            if name.is_empty() {
                return Err(InventoryError::EmptyHostName {
                    object: m.id.clone(),
                    field: m.host_name.path.to_string(),
                });
            }
            let here = (&m.id, m.key.as_str());
            if let Some(first) = hostnames.insert(name, here) {
                return Err(InventoryError::DuplicateHost {
                    host: name.to_string(),
                    what: "inventory hostname",
                    first: pair(first),
                    second: pair(here),
                });
            }
            let vars = host?;
            if let Some(addr) = vars.get("ansible_host").and_then(|v| v.value.as_str())
                && let Some(first) = addresses.insert(addr.to_string(), here)
            {
                return Err(InventoryError::DuplicateHost {
                    host: addr.to_string(),
                    what: "ansible_host",
                    first: pair(first),
                    second: pair(here),
                });
            }
            let cell = m.cell(g).cloned();
            if let Some(c) = &cell {
                match cells.get_mut(&c.name) {
                    Some(list) => list.push(name.to_string()),
                    None => {
                        claim_group(&mut group_owner, &c.name, &format!("nova cell {}", c.name))?;
                        cells.insert(c.name.clone(), vec![name.to_string()]);
                    }
                }
            }
            names.push(name.to_string());
            hosts.push((
                name.to_string(),
                Host { vars, id: m.id.clone(), key: m.key.clone(), group: g.name.clone(), cell },
            ));
        }
        let group = Group {
            vars,
            hosts: names.into_iter().collect(),
            children: BTreeSet::new(),
            source: match g.kind {
                GroupKind::Role => GroupSource::Role(g.id.clone()),
                GroupKind::NodeSet => GroupSource::NodeSet(g.id.clone()),
            },
        };
        groups.push((g.name.clone(), group));
    }
    for (name, hosts) in cells {
        let group = Group {
            vars: Vars::new(opts.provenance),
            hosts: hosts.into_iter().collect(),
            children: BTreeSet::new(),
            source: GroupSource::Cell(name.clone()),
        };
        groups.push((name, group));
    }
    // Names are unique: every one was claimed above.
    Ok(Inventory { groups: groups.into_iter().collect(), hosts: hosts.into_iter().collect() })
}

/// One owner per group name: a Role named like a cell would silently merge two groups.
fn claim_group(owners: &mut BTreeMap<String, String>, name: &str, owner: &str) -> Result<(), InventoryError> {
    if RESERVED_GROUPS.contains(&name) {
        return Err(InventoryError::GroupClash {
            name: name.into(),
            first: "Ansible (reserved name)".into(),
            second: owner.into(),
        });
    }
    match owners.get(name) {
        Some(first) if first != owner => {
            Err(InventoryError::GroupClash { name: name.into(), first: first.clone(), second: owner.into() })
        }
        Some(_) => Ok(()),
        None => {
            owners.insert(name.into(), owner.into());
            Ok(())
        }
    }
}

/// Sets the variables of one object (group or host). Provenance is built only when the
/// inventory keeps it (`explain`): for `--list` it would be thrown away at once, and building
/// it (field paths, notes) cost more than the values themselves.
struct Setter<'a> {
    /// The object being turned into vars, for errors and provenance.
    id: &'a ObjRef,
    scope: Scope,
}

impl<'a> Setter<'a> {
    fn new(id: &'a ObjRef, scope: Scope) -> Setter<'a> {
        Setter { id, scope }
    }

    fn prov(&self, field: &str, level: Level) -> Provenance {
        Provenance {
            object: self.id.clone(),
            field: field.to_string(),
            level,
            scope: self.scope,
            secret: false,
            note: None,
        }
    }

    fn prov_note(&self, field: &str, level: Level, note: impl Into<String>) -> Provenance {
        Provenance { note: Some(note.into()), ..self.prov(field, level) }
    }

    fn set<T: Clone + Into<Value>>(&self, vars: &mut Vars, key: &'static str, f: &Field<T>, level: Level) {
        vars.put(key, f.value.clone().into(), || {
            let p = self.prov(&f.path, level);
            if f.defaulted { Provenance { note: Some("default".into()), ..p } } else { p }
        });
    }
}

fn group_vars(g: &HostGroup, snap: &Snapshot, opts: &Options, net: &NetInfo) -> Result<Vars, InventoryError> {
    let s = Setter::new(&g.id, Scope::Group);
    let t = &g.template;
    let mut vars = Vars::new(opts.provenance);
    for ds in &t.vars_from {
        apply_vars_from(&mut vars, &s, ds, snap)?;
    }
    set_fields(&mut vars, &s, t);
    let user_vars = parse_ansible_vars(&g.id, t.vars.as_ref())?;
    for (var, image) in &opts.images {
        // Upstream only checks ansibleVars, so a varsFrom value is overwritten by the default;
        // we keep the operator's varsFrom value (dataplane.md §2.2, quirks).
        if !user_vars.iter().any(|(k, _)| k == var) && !vars.contains(var) {
            vars.put(var.clone(), Value::String(image.clone()), || {
                let origin = opts.image_origins.get(var).cloned().unwrap_or(
                    crate::snapshot::resource::Origin::Environment {
                        variable: format!("{}{}", crate::settings::IMAGE_ENV_PREFIX, var.to_uppercase()),
                    },
                );
                Provenance {
                    object: ObjRef::new("AgentConfig", "images", origin),
                    field: format!("images.{var}"),
                    ..s.prov("images", Level::ImageDefault)
                }
            });
        }
    }
    apply_ansible_vars(&mut vars, &s, t.vars.as_ref(), &user_vars, net);
    if let Some(n) = &t.networks {
        apply_networks(&mut vars, &s, n, net);
    }
    let generated = |field: &str| s.prov(field, Level::Generated);
    vars.put("edpm_nodeset_name", Value::String(g.name.clone()), || generated("metadata.name"));
    if let Some(tls) = &g.tls_enabled {
        s.set(&mut vars, "edpm_tls_certs_enabled", tls, Level::Generated);
    }
    if let Some(tags) = &g.tags {
        vars.put("nodeset_tags", json!(tags.value), || generated(&tags.path));
    }
    vars.put("edpm_services", json!(g.services.value), || generated(&g.services.path));
    let types: Vec<String> = g
        .services
        .value
        .iter()
        .map(|svc| {
            snap.services
                .iter()
                .find(|o| &o.id.name == svc)
                .and_then(|o| o.body.edpm_service_type.clone())
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| svc.clone())
        })
        .collect();
    vars.put("edpm_service_types", json!(types), || generated(&g.services.path));
    let key_file = format!("{}/ssh_key_{}", opts.ssh_key_dir.trim_end_matches('/'), g.name);
    vars.put("ansible_ssh_private_key_file", Value::String(key_file), || {
        s.prov_note("metadata.name", Level::Generated, "where the runner mounts the SSH key")
    });
    Ok(vars)
}

fn host_vars(
    g: &HostGroup,
    m: &Member,
    snap: &Snapshot,
    opts: &Options,
    net: &NetInfo,
) -> Result<Vars, InventoryError> {
    let s = Setter::new(&m.id, Scope::Host);
    let sec = &m.section;
    let mut vars = Vars::new(opts.provenance);
    for ds in &sec.vars_from {
        apply_vars_from(&mut vars, &s, ds, snap)?;
    }
    match &sec.host {
        Some(h) => s.set(&mut vars, "ansible_host", h, Level::Field),
        None => s.set(&mut vars, "ansible_host", &m.host_name, Level::Field),
    }
    set_fields(&mut vars, &s, sec);
    // A node with its own SSH key Secret (old model) is reached with that key.
    if let (Some(own), group) = (&sec.ssh_key_secret, &g.template.ssh_key_secret)
        && group.as_ref().is_none_or(|gk| gk.value != own.value)
    {
        let dir = opts.ssh_key_dir.trim_end_matches('/');
        vars.put("ansible_ssh_private_key_file", Value::String(format!("{dir}/ssh_key_{}", m.key)), || {
            s.prov_note(&own.path, Level::Field, "node-specific SSH key Secret")
        });
    }
    let user_vars = parse_ansible_vars(&m.id, sec.vars.as_ref())?;
    apply_ansible_vars(&mut vars, &s, sec.vars.as_ref(), &user_vars, net);
    if let Some(n) = &sec.networks {
        apply_networks(&mut vars, &s, n, net);
    }
    apply_ipam(&mut vars, &s, g, m, net);
    Ok(vars)
}

/// `ansible_user`, `ansible_port` (a string, as upstream emits it), `management_network`,
/// and the old model's network template.
fn set_fields(vars: &mut Vars, s: &Setter, sec: &AnsibleSection) {
    if let Some(u) = &sec.user {
        s.set(vars, "ansible_user", u, Level::Field);
    }
    if let Some(p) = &sec.port {
        let as_string = Field { value: p.value.to_string(), path: p.path.clone(), defaulted: p.defaulted };
        s.set(vars, "ansible_port", &as_string, Level::Field);
    }
    if let Some(n) = &sec.management_network {
        s.set(vars, "management_network", n, Level::Field);
    }
    if let Some(t) = &sec.network_config_template {
        s.set(vars, "edpm_network_config_template", t, Level::Field);
    }
}

/// `ansibleVars` as a list of variables in key order. The earliest CRD held YAML text in a
/// string, read here as the manifests are read.
pub fn parse_ansible_vars<'f>(
    object: &ObjRef,
    f: Option<&'f Field<AnsibleVars>>,
) -> Result<Cow<'f, [(String, Value)]>, InventoryError> {
    let Some(f) = f else { return Ok(Cow::Borrowed(&[])) };
    let not_mapping = |found: &str| InventoryError::NotAMapping {
        object: object.clone(),
        field: f.path.to_string(),
        found: found.to_string(),
    };
    match &f.value {
        AnsibleVars::Map(m) => Ok(Cow::Borrowed(m)),
        AnsibleVars::Other(Value::Null) => Ok(Cow::Borrowed(&[])),
        AnsibleVars::Other(Value::String(text)) => {
            let bad = |message: String| InventoryError::BadYaml {
                object: object.clone(),
                field: f.path.to_string(),
                message,
            };
            let docs = crate::yaml::documents(text)
                .map_err(|e| bad(format!("line {} of the string: {}", e.line, e.message)))?;
            if docs.len() > 1 {
                return Err(bad("the string holds several YAML documents; keep one mapping".into()));
            }
            let parsed = docs.first().map_or(Value::Null, crate::yaml::Node::to_value);
            match parsed {
                Value::Object(m) => Ok(Cow::Owned(m.into_iter().collect())),
                Value::Null => Ok(Cow::Borrowed(&[])),
                other => Err(not_mapping(&format!("a string holding {}", type_name(&other)))),
            }
        }
        AnsibleVars::Other(other) => Err(not_mapping(type_name(other))),
    }
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn apply_ansible_vars(
    vars: &mut Vars,
    s: &Setter,
    f: Option<&Field<AnsibleVars>>,
    parsed: &[(String, Value)],
    net: &NetInfo,
) {
    let Some(f) = f else { return };
    for (k, v) in parsed {
        // Each key replaces the whole top-level value: there is no deep merge, as upstream.
        let field = || format!("{}.{k}", f.path);
        vars.put(net.name(k), v.clone(), || s.prov(&field(), Level::AnsibleVars));
    }
}

/// Decodes an `ansibleVarsFrom` value: JSON only when the *whole* string is JSON, otherwise
/// the string itself. Upstream HEAD decodes only the first JSON token and so turns
/// `192.168.122.0/24` into `192.168`; we do not copy that (dataplane.md §2.2).
pub fn decode_vars_from_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// What openstack-operator HEAD would make of the same string (first JSON token wins), so that
/// `validate` can warn where the operator and edpm-agent disagree.
pub fn anchor_decode(raw: &str) -> Value {
    let t = raw.trim_start();
    let first = t.chars().next();
    match first {
        Some('{' | '[' | '"') => serde_json::Deserializer::from_str(t)
            .into_iter::<Value>()
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| Value::String(raw.into())),
        Some('t' | 'f' | 'n') => {
            for (lit, v) in
                [("true", Value::Bool(true)), ("false", Value::Bool(false)), ("null", Value::Null)]
            {
                if t.starts_with(lit) {
                    return v;
                }
            }
            Value::String(raw.into())
        }
        Some('-' | '0'..='9') => json_number_prefix(t)
            .and_then(|n| serde_json::from_str(n).ok())
            .unwrap_or_else(|| Value::String(raw.into())),
        _ => Value::String(raw.into()),
    }
}

/// The longest prefix of `s` that is a JSON number.
fn json_number_prefix(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if b.get(i) == Some(&b'0') {
        i += 1;
    } else if !digits(&mut i) {
        return None;
    }
    let mut end = i;
    if b.get(i) == Some(&b'.') {
        let mut j = i + 1;
        if digits(&mut j) {
            end = j;
            i = j;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digits(&mut j) {
            end = j;
        }
    }
    Some(&s[..end])
}

fn apply_vars_from(
    vars: &mut Vars,
    s: &Setter,
    f: &Field<DataSource>,
    snap: &Snapshot,
) -> Result<(), InventoryError> {
    let ds = &f.value;
    if ds.config_map_ref.is_none() && ds.secret_ref.is_none() {
        return Err(InventoryError::EmptySource { object: s.id.clone(), field: f.path.to_string() });
    }
    let prefix = ds.prefix.as_deref().unwrap_or("");
    let missing =
        |kind: &'static str, name: &str, field: String, names: Vec<&str>| InventoryError::MissingSource {
            object: s.id.clone(),
            field,
            kind,
            name: name.to_string(),
            hint: crate::model::did_you_mean(name, names.into_iter()),
        };
    if let Some(r) = &ds.config_map_ref {
        match snap.config_map(&r.name) {
            Some(cm) => {
                for (k, raw) in &cm.body.data {
                    vars.put(format!("{prefix}{k}"), decode_vars_from_value(raw), || {
                        let field = format!("{}.configMapRef", f.path);
                        s.prov_note(&field, Level::VarsFrom, format!("key {k} of {}", cm.id.short()))
                    });
                }
            }
            None if r.optional == Some(true) => {}
            None => {
                let names = snap.config_maps.iter().map(|o| o.id.name.as_str()).collect();
                return Err(missing("ConfigMap", &r.name, format!("{}.configMapRef.name", f.path), names));
            }
        }
    }
    if let Some(r) = &ds.secret_ref {
        match snap.secret(&r.name) {
            Some(sec) => {
                for (k, raw) in &sec.body.data {
                    vars.put(
                        format!("{prefix}{k}"),
                        decode_vars_from_value(&String::from_utf8_lossy(raw)),
                        || {
                            let field = format!("{}.secretRef", f.path);
                            let note = format!("key {k} of {}", sec.id.short());
                            Provenance { secret: true, ..s.prov_note(&field, Level::VarsFrom, note) }
                        },
                    );
                }
            }
            None if r.optional == Some(true) => {}
            None => {
                let names = snap.secrets.iter().map(|o| o.id.name.as_str()).collect();
                return Err(missing("Secret", &r.name, format!("{}.secretRef.name", f.path), names));
            }
        }
    }
    Ok(())
}

/// `nodeset_networks` and the map shared by `networks_lower` and `network_servicenet_map`.
type NetworkVars = (Arc<Value>, Arc<Value>);

/// Network facts from NetConfig, DNSMasq and the IPSets, when the source has them.
struct NetFacts<'a> {
    networks: Vec<&'a crate::snapshot::resource::NetConfigNetwork>,
    dns_addresses: Option<Vec<String>>,
    /// IPSets by name (a cluster has one per node).
    ipsets: HashMap<&'a str, &'a crate::snapshot::resource::Object<crate::snapshot::resource::IpSetStatus>>,
}

impl<'a> NetFacts<'a> {
    fn from_snapshot(snap: &'a Snapshot) -> Self {
        let mut ipsets = HashMap::with_capacity(snap.ipsets.len());
        for o in &snap.ipsets {
            // The first of a name wins, as a search in order would find it.
            ipsets.entry(o.id.name.as_str()).or_insert(o);
        }
        NetFacts {
            networks: snap.netconfigs.iter().flat_map(|n| n.body.networks.iter()).collect(),
            dns_addresses: snap.dnsmasqs.first().map(|d| d.body.dns_addresses.clone()),
            ipsets,
        }
    }
}

/// The network facts, and the names and values the hosts of one group share, made once per
/// group (each group's variables may be made on another thread).
struct NetInfo<'f, 'a> {
    facts: &'f NetFacts<'a>,
    /// Variable names built from data (`ctlplane_ip`, ansibleVars keys), one allocation each,
    /// and the buffer names are looked up in.
    names: std::cell::RefCell<HashMap<String, Arc<str>>>,
    scratch: std::cell::RefCell<String>,
    /// Service networks by network name.
    service_networks: std::cell::RefCell<HashMap<String, Arc<str>>>,
    /// `nodeset_networks` and the networks map for a list of networks, by the names in it.
    network_vars: std::cell::RefCell<HashMap<Vec<String>, NetworkVars>>,
    last_networks: std::cell::RefCell<Option<(Vec<String>, NetworkVars)>>,
}

impl<'f, 'a> NetInfo<'f, 'a> {
    fn new(facts: &'f NetFacts<'a>) -> Self {
        NetInfo {
            facts,
            names: Default::default(),
            scratch: Default::default(),
            service_networks: Default::default(),
            network_vars: Default::default(),
            last_networks: Default::default(),
        }
    }

    /// `first` and `second` joined, as a shared variable name; joined in a reused buffer, so
    /// a name seen before costs no allocation.
    fn name2(&self, first: &str, second: &str) -> Key {
        let mut scratch = self.scratch.borrow_mut();
        scratch.clear();
        scratch.push_str(first);
        scratch.push_str(second);
        let mut names = self.names.borrow_mut();
        if let Some(k) = names.get(scratch.as_str()) {
            return Key::Shared(k.clone());
        }
        let k: Arc<str> = scratch.as_str().into();
        names.insert(scratch.clone(), k.clone());
        Key::Shared(k)
    }

    fn name(&self, name: &str) -> Key {
        self.name2(name, "")
    }

    fn network(&self, name: &str) -> Option<&'a crate::snapshot::resource::NetConfigNetwork> {
        self.facts.networks.iter().copied().find(|n| n.name.eq_ignore_ascii_case(name))
    }

    /// The service network a network name maps to (NetConfig `serviceNetwork`, which defaults
    /// to the lower-cased name).
    fn service_network(&self, name: &str) -> Arc<str> {
        if let Some(s) = self.service_networks.borrow().get(name) {
            return s.clone();
        }
        let s: Arc<str> = self
            .network(name)
            .and_then(|n| n.service_network.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| name.to_lowercase())
            .into();
        self.service_networks.borrow_mut().insert(name.to_string(), s.clone());
        s
    }
}

fn apply_networks(vars: &mut Vars, s: &Setter, f: &Field<Vec<IpSetNetwork>>, net: &NetInfo) {
    // Neighbouring hosts (a Role's Nodes) list the same networks: the last list answers
    // without building a key.
    let same =
        |last: &[String]| last.len() == f.value.len() && last.iter().zip(&f.value).all(|(a, b)| *a == b.name);
    let last = net.last_networks.borrow().as_ref().filter(|(k, _)| same(k)).map(|(_, v)| v.clone());
    let key: Vec<String> =
        if last.is_some() { Vec::new() } else { f.value.iter().map(|n| n.name.clone()).collect() };
    let cached = last.or_else(|| net.network_vars.borrow().get(&key).cloned());
    let (names, map) = cached.unwrap_or_else(|| {
        let mut names = Vec::new();
        let mut map = Map::new();
        for n in &f.value {
            let svc = net.service_network(&n.name);
            if &*svc == "ctlplane" {
                continue;
            }
            names.push(Value::String(n.name.clone()));
            map.insert(n.name.clone(), Value::String(svc.to_string()));
        }
        let made = (Arc::new(Value::Array(names)), Arc::new(Value::Object(map)));
        net.network_vars.borrow_mut().insert(key.clone(), made.clone());
        made
    });
    if !key.is_empty() {
        *net.last_networks.borrow_mut() = Some((key, (names.clone(), map.clone())));
    }
    let p = || s.prov(&f.path, Level::Networks);
    vars.put("nodeset_networks", names, p);
    vars.put("networks_lower", map.clone(), p);
    vars.put("network_servicenet_map", map, p);
}

fn prefix_len(cidr: &str) -> Option<u8> {
    let (addr, len) = cidr.split_once('/')?;
    let ip: IpAddr = addr.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some(len)
}

/// `canonical_hostname` and the search domain it adds, as `populateInventoryFromIPAM` does.
pub fn canonical(host_name: &str, dns_domain: &str) -> (String, Option<String>) {
    match host_name.split_once('.') {
        Some((_, domain)) => (host_name.to_string(), (domain != dns_domain).then(|| domain.to_string())),
        None if dns_domain.is_empty() => (host_name.to_string(), None),
        None => (format!("{host_name}.{dns_domain}"), None),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "upstream's populateInventoryFromIPAM, reservation by reservation, so the two read side by side"
)]
fn apply_ipam(vars: &mut Vars, s: &Setter, g: &HostGroup, m: &Member, net: &NetInfo) {
    let host_name = &m.host_name.value;
    let ipset = net.facts.ipsets.get(host_name.as_str()).or_else(|| net.facts.ipsets.get(m.key.as_str()));
    let mut search = Vec::new();
    if let Some(ipset) = ipset {
        // Exactly upstream's populateInventoryFromIPAM, reservation by reservation.
        let set = |vars: &mut Vars, key: Key, v: Value, field: &dyn Fn() -> String| {
            vars.put(key, v, || Provenance { object: ipset.id.clone(), ..s.prov(&field(), Level::Ipam) });
        };
        for (i, r) in ipset.body.reservations.iter().enumerate() {
            let field = || format!("status.reservations[{i}]");
            let entry = r
                .service_network
                .clone()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| r.network.to_lowercase());
            set(vars, net.name2(&entry, "_ip"), json!(r.address), &field);
            if let Some(len) = r.cidr.as_deref().and_then(prefix_len) {
                set(vars, net.name2(&entry, "_cidr"), json!(len), &field);
            }
            if let Some(vlan) = r.vlan {
                set(vars, net.name2(&entry, "_vlan_id"), json!(vlan), &field);
            }
            set(vars, net.name2(&entry, "_mtu"), json!(r.mtu.unwrap_or(0)), &field);
            set(vars, net.name2(&entry, "_gateway_ip"), json!(r.gateway), &field);
            set(vars, net.name2(&entry, "_host_routes"), json!(r.routes), &field);
            if entry == "ctlplane" {
                let dns = net.facts.dns_addresses.clone().unwrap_or_default();
                set(vars, Key::Static("ctlplane_dns_nameservers"), json!(dns), &field);
                let (canon, extra) = canonical(host_name, &r.dns_domain);
                set(vars, Key::Static("canonical_hostname"), json!(canon), &field);
                search.extend(extra);
            }
            search.push(r.dns_domain.clone());
        }
        set(vars, Key::Static("dns_search_domains"), json!(search), &|| "status.reservations".to_string());
        return;
    }
    // No IPSet (a directory of manifests, or IPAM not yet reconciled): use fixedIP, with the
    // subnet facts from NetConfig when it is there.
    let networks = m.section.networks.as_ref().or(g.template.networks.as_ref());
    let Some(networks) = networks else { return };
    for (i, n) in networks.value.iter().enumerate() {
        let Some(ip) = n.fixed_ip.as_deref().filter(|ip| !ip.is_empty()) else { continue };
        let field = || format!("{}[{i}].fixedIP", networks.path);
        let fixed = || s.prov_note(&field(), Level::Ipam, "fixedIP; no IPSet found");
        let from_netconfig =
            || s.prov_note(&field(), Level::Ipam, "fixedIP with subnet facts from NetConfig");
        let entry = net.service_network(&n.name);
        vars.put(net.name2(&entry, "_ip"), json!(ip), fixed);
        let netcfg = net.network(&n.name);
        let subnet = netcfg.and_then(|nc| {
            nc.subnets
                .iter()
                .find(|sn| Some(sn.name.as_str()) == n.subnet_name.as_deref())
                .or(nc.subnets.first())
        });
        if let Some(sn) = subnet {
            if let Some(len) = sn.cidr.as_deref().and_then(prefix_len) {
                vars.put(net.name2(&entry, "_cidr"), json!(len), from_netconfig);
            }
            if let Some(v) = sn.vlan {
                vars.put(net.name2(&entry, "_vlan_id"), json!(v), from_netconfig);
            }
            vars.put(net.name2(&entry, "_gateway_ip"), json!(sn.gateway), from_netconfig);
            vars.put(net.name2(&entry, "_host_routes"), json!(sn.routes), from_netconfig);
        }
        if let Some(mtu) = netcfg.and_then(|nc| nc.mtu) {
            vars.put(net.name2(&entry, "_mtu"), json!(mtu), from_netconfig);
        }
        let domain = netcfg.and_then(|nc| nc.dns_domain.clone()).unwrap_or_default();
        if &*entry == "ctlplane" {
            if let Some(dns) = &net.facts.dns_addresses {
                vars.put("ctlplane_dns_nameservers", json!(dns), from_netconfig);
            }
            let (canon, extra) = canonical(host_name, &domain);
            vars.put("canonical_hostname", json!(canon), fixed);
            search.extend(extra);
        }
        if !domain.is_empty() {
            search.push(domain);
        }
    }
    if !search.is_empty() {
        vars.put("dns_search_domains", json!(search), || {
            s.prov_note(&networks.path, Level::Ipam, "dnsDomain of each network in NetConfig")
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vars_from_values_decode_only_whole_json() {
        assert_eq!(decode_vars_from_value("42"), json!(42));
        assert_eq!(decode_vars_from_value("[1, 2]"), json!([1, 2]));
        assert_eq!(decode_vars_from_value("true"), json!(true));
        for s in ["192.168.122.0/24", "17.1.0", "2001:db8::1", "123abc", "010", "br-ex", "eth0", ""] {
            assert_eq!(decode_vars_from_value(s), json!(s), "{s}");
        }
    }

    #[test]
    fn anchor_decode_matches_upstream_truncation() {
        assert_eq!(anchor_decode("192.168.122.0/24"), json!(192.168));
        assert_eq!(anchor_decode("17.1.0"), json!(17.1));
        assert_eq!(anchor_decode("2001:db8::1"), json!(2001));
        assert_eq!(anchor_decode("123abc"), json!(123));
        assert_eq!(anchor_decode("010"), json!(0));
        assert_eq!(anchor_decode("br-ex"), json!("br-ex"));
        assert_eq!(anchor_decode("eth0"), json!("eth0"));
        assert_eq!(anchor_decode("[1] x"), json!([1]));
    }

    #[test]
    fn canonical_hostname_rules() {
        assert_eq!(canonical("c0", "ctlplane.example.com"), ("c0.ctlplane.example.com".into(), None));
        assert_eq!(
            canonical("c0.lab.test", "ctlplane.example.com"),
            ("c0.lab.test".into(), Some("lab.test".into()))
        );
        assert_eq!(canonical("c0.lab.test", "lab.test"), ("c0.lab.test".into(), None));
    }

    #[test]
    fn prefix_len_parses_cidrs() {
        assert_eq!(prefix_len("192.168.122.0/24"), Some(24));
        assert_eq!(prefix_len("fd00::/64"), Some(64));
        assert_eq!(prefix_len("10.0.0.0/33"), None);
        assert_eq!(prefix_len("nonsense"), None);
    }
}
