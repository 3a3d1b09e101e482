//! Builds the inventory from the model, step by step as openstack-operator's
//! `GenerateNodeSetInventory` does, recording provenance for every variable.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::inventory::vars::{Level, Provenance, Scope, Vars};
use crate::inventory::{Group, GroupSource, Host, Inventory, InventoryError, Options};
use crate::model::{AnsibleSection, Field, GroupKind, HostGroup, Member, Model};
use crate::snapshot::Snapshot;
use crate::snapshot::resource::{DataSource, IpSetNetwork, ObjRef};

/// Group names Ansible reserves.
const RESERVED_GROUPS: [&str; 2] = ["all", "ungrouped"];

pub(crate) fn build(model: &Model, snap: &Snapshot, opts: &Options) -> Result<Inventory, InventoryError> {
    let net = NetInfo::from_snapshot(snap);
    let mut inv = Inventory::default();
    let mut group_owner: BTreeMap<String, String> = BTreeMap::new();
    let mut hostnames: BTreeMap<String, (ObjRef, String)> = BTreeMap::new();
    let mut addresses: BTreeMap<String, (ObjRef, String)> = BTreeMap::new();

    for g in &model.groups {
        claim_group(&mut group_owner, &g.name, &g.id.to_string())?;
        let vars = group_vars(g, snap, opts, &net)?;
        let mut group = Group {
            vars,
            hosts: BTreeSet::new(),
            children: BTreeSet::new(),
            source: match g.kind {
                GroupKind::Role => GroupSource::Role(g.id.clone()),
                GroupKind::NodeSet => GroupSource::NodeSet(g.id.clone()),
            },
        };
        for m in &g.members {
            let name = m.inventory_hostname().to_string();
            if name.is_empty() {
                return Err(InventoryError::EmptyHostName {
                    object: m.id.clone(),
                    field: m.host_name.path.clone(),
                });
            }
            let here = (m.id.clone(), m.key.clone());
            if let Some(first) = hostnames.insert(name.clone(), here.clone()) {
                return Err(InventoryError::DuplicateHost {
                    host: name,
                    what: "inventory hostname",
                    first,
                    second: here,
                });
            }
            let vars = host_vars(g, m, snap, opts, &net)?;
            if let Some(addr) = vars.get("ansible_host").and_then(|v| v.value.as_str())
                && let Some(first) = addresses.insert(addr.to_string(), here.clone())
            {
                return Err(InventoryError::DuplicateHost {
                    host: addr.to_string(),
                    what: "ansible_host",
                    first,
                    second: here,
                });
            }
            let cell = m.cell(g).cloned();
            if let Some(c) = &cell {
                let owner = format!("nova cell {}", c.name);
                claim_group(&mut group_owner, &c.name, &owner)?;
                inv.groups
                    .entry(c.name.clone())
                    .or_insert_with(|| Group {
                        vars: Vars::new(opts.provenance),
                        hosts: BTreeSet::new(),
                        children: BTreeSet::new(),
                        source: GroupSource::Cell(c.name.clone()),
                    })
                    .hosts
                    .insert(name.clone());
            }
            group.hosts.insert(name.clone());
            inv.hosts.insert(
                name,
                Host { vars, id: m.id.clone(), key: m.key.clone(), group: g.name.clone(), cell },
            );
        }
        inv.groups.insert(g.name.clone(), group);
    }
    Ok(inv)
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

struct Setter<'a> {
    /// The object being turned into vars, for errors.
    id: &'a ObjRef,
    /// What provenance names: `id`, or a shared placeholder when provenance is off.
    object: Arc<ObjRef>,
    scope: Scope,
}

/// The object untracked provenance names: with `Options::provenance` off nothing reads it, so
/// hosts share one instead of each cloning its own ObjRef.
fn untracked() -> Arc<ObjRef> {
    static UNTRACKED: std::sync::LazyLock<Arc<ObjRef>> = std::sync::LazyLock::new(|| {
        Arc::new(ObjRef::new("", "", crate::snapshot::resource::Origin::Api { namespace: String::new() }))
    });
    UNTRACKED.clone()
}

impl<'a> Setter<'a> {
    fn new(id: &'a ObjRef, scope: Scope, opts: &Options) -> Setter<'a> {
        let object = if opts.provenance { Arc::new(id.clone()) } else { untracked() };
        Setter { id, object, scope }
    }

    fn prov(&self, field: &str, level: Level) -> Provenance {
        Provenance {
            object: self.object.clone(),
            field: field.to_string(),
            level,
            scope: self.scope,
            secret: false,
            note: None,
        }
    }

    fn set<T: Clone + Into<Value>>(&self, vars: &mut Vars, key: &str, f: &Field<T>, level: Level) {
        let mut p = self.prov(&f.path, level);
        if f.defaulted {
            p.note = Some("default".into());
        }
        vars.set(key, f.value.clone().into(), p);
    }
}

fn group_vars(g: &HostGroup, snap: &Snapshot, opts: &Options, net: &NetInfo) -> Result<Vars, InventoryError> {
    let s = Setter::new(&g.id, Scope::Group, opts);
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
        if !user_vars.contains_key(var) && !vars.contains(var) {
            let mut p = s.prov("images", Level::ImageDefault);
            let origin = opts.image_origins.get(var).cloned().unwrap_or(
                crate::snapshot::resource::Origin::Environment {
                    variable: format!("{}{}", crate::settings::IMAGE_ENV_PREFIX, var.to_uppercase()),
                },
            );
            p.object = Arc::new(ObjRef::new("AgentConfig", "images", origin));
            p.field = format!("images.{var}");
            vars.set(var.clone(), Value::String(image.clone()), p);
        }
    }
    apply_ansible_vars(&mut vars, &s, t.vars.as_ref(), user_vars);
    if let Some(n) = &t.networks {
        apply_networks(&mut vars, &s, n, net);
    }
    let generated = |field: &str| s.prov(field, Level::Generated);
    vars.set("edpm_nodeset_name", Value::String(g.name.clone()), generated("metadata.name"));
    if let Some(tls) = &g.tls_enabled {
        s.set(&mut vars, "edpm_tls_certs_enabled", tls, Level::Generated);
    }
    if let Some(tags) = &g.tags {
        vars.set("nodeset_tags", json!(tags.value), generated(&tags.path));
    }
    vars.set("edpm_services", json!(g.services.value), generated(&g.services.path));
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
    vars.set("edpm_service_types", json!(types), generated(&g.services.path));
    let key_file = format!("{}/ssh_key_{}", opts.ssh_key_dir.trim_end_matches('/'), g.name);
    let mut p = generated("metadata.name");
    p.note = Some("where the runner mounts the SSH key".into());
    vars.set("ansible_ssh_private_key_file", Value::String(key_file), p);
    Ok(vars)
}

fn host_vars(
    g: &HostGroup,
    m: &Member,
    snap: &Snapshot,
    opts: &Options,
    net: &NetInfo,
) -> Result<Vars, InventoryError> {
    let s = Setter::new(&m.id, Scope::Host, opts);
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
        let mut p = s.prov(&own.path, Level::Field);
        p.note = Some("node-specific SSH key Secret".into());
        let dir = opts.ssh_key_dir.trim_end_matches('/');
        vars.set("ansible_ssh_private_key_file", Value::String(format!("{dir}/ssh_key_{}", m.key)), p);
    }
    let user_vars = parse_ansible_vars(&m.id, sec.vars.as_ref())?;
    apply_ansible_vars(&mut vars, &s, sec.vars.as_ref(), user_vars);
    if let Some(n) = &sec.networks {
        apply_networks(&mut vars, &s, n, net);
    }
    apply_ipam(&mut vars, &s, g, m, snap, net);
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

/// Decodes `ansibleVars` into a mapping. The earliest CRD held YAML text in a string.
pub(crate) fn parse_ansible_vars(
    object: &ObjRef,
    f: Option<&Field<Value>>,
) -> Result<Map<String, Value>, InventoryError> {
    let Some(f) = f else { return Ok(Map::new()) };
    let not_mapping = |found: &str| InventoryError::NotAMapping {
        object: object.clone(),
        field: f.path.clone(),
        found: found.to_string(),
    };
    match &f.value {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(Map::new()),
        Value::String(text) => {
            // The earliest CRD held YAML in a string; read it as the manifests are read.
            let bad = |message: String| InventoryError::BadYaml {
                object: object.clone(),
                field: f.path.clone(),
                message,
            };
            let docs = crate::yaml::documents(text)
                .map_err(|e| bad(format!("line {} of the string: {}", e.line, e.message)))?;
            if docs.len() > 1 {
                return Err(bad("the string holds several YAML documents; keep one mapping".into()));
            }
            let parsed = docs.first().map_or(Value::Null, crate::yaml::Node::to_value);
            match parsed {
                Value::Object(m) => Ok(m),
                Value::Null => Ok(Map::new()),
                other => Err(not_mapping(&format!("a string holding {}", type_name(&other)))),
            }
        }
        other => Err(not_mapping(type_name(other))),
    }
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn apply_ansible_vars(vars: &mut Vars, s: &Setter, f: Option<&Field<Value>>, parsed: Map<String, Value>) {
    let Some(f) = f else { return };
    for (k, v) in parsed {
        // Each key replaces the whole top-level value: there is no deep merge, as upstream.
        vars.set(k.clone(), v, s.prov(&format!("{}.{k}", f.path), Level::AnsibleVars));
    }
}

/// Decodes an `ansibleVarsFrom` value: JSON only when the *whole* string is JSON, otherwise
/// the string itself. Upstream HEAD decodes only the first JSON token and so turns
/// `192.168.122.0/24` into `192.168`; we do not copy that (dataplane.md §2.2).
pub(crate) fn decode_vars_from_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// What openstack-operator HEAD would make of the same string (first JSON token wins), so that
/// `validate` can warn where the operator and edpm-agent disagree.
pub(crate) fn anchor_decode(raw: &str) -> Value {
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
        return Err(InventoryError::EmptySource { object: s.id.clone(), field: f.path.clone() });
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
                    let mut p = s.prov(&format!("{}.configMapRef", f.path), Level::VarsFrom);
                    p.note = Some(format!("key {k} of {}", cm.id.short()));
                    vars.set(format!("{prefix}{k}"), decode_vars_from_value(raw), p);
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
                    let mut p = s.prov(&format!("{}.secretRef", f.path), Level::VarsFrom);
                    p.note = Some(format!("key {k} of {}", sec.id.short()));
                    p.secret = true;
                    vars.set(
                        format!("{prefix}{k}"),
                        decode_vars_from_value(&String::from_utf8_lossy(raw)),
                        p,
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

/// Network facts from NetConfig and DNSMasq, when the source has them.
struct NetInfo<'a> {
    networks: Vec<&'a crate::snapshot::resource::NetConfigNetwork>,
    dns_addresses: Option<Vec<String>>,
}

impl<'a> NetInfo<'a> {
    fn from_snapshot(snap: &'a Snapshot) -> Self {
        NetInfo {
            networks: snap.netconfigs.iter().flat_map(|n| n.body.networks.iter()).collect(),
            dns_addresses: snap.dnsmasqs.first().map(|d| d.body.dns_addresses.clone()),
        }
    }

    fn network(&self, name: &str) -> Option<&'a crate::snapshot::resource::NetConfigNetwork> {
        self.networks.iter().copied().find(|n| n.name.eq_ignore_ascii_case(name))
    }

    /// The service network a network name maps to (NetConfig `serviceNetwork`, which defaults
    /// to the lower-cased name).
    fn service_network(&self, name: &str) -> String {
        self.network(name)
            .and_then(|n| n.service_network.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| name.to_lowercase())
    }
}

fn apply_networks(vars: &mut Vars, s: &Setter, f: &Field<Vec<IpSetNetwork>>, net: &NetInfo) {
    let mut names = Vec::new();
    let mut map = Map::new();
    for n in &f.value {
        let svc = net.service_network(&n.name);
        if svc == "ctlplane" {
            continue;
        }
        names.push(Value::String(n.name.clone()));
        map.insert(n.name.clone(), Value::String(svc));
    }
    let p = s.prov(&f.path, Level::Networks);
    vars.set("nodeset_networks", Value::Array(names), p.clone());
    vars.set("networks_lower", Value::Object(map.clone()), p.clone());
    vars.set("network_servicenet_map", Value::Object(map), p);
}

fn prefix_len(cidr: &str) -> Option<u8> {
    let (addr, len) = cidr.split_once('/')?;
    let ip: IpAddr = addr.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some(len)
}

/// `canonical_hostname` and the search domain it adds, as `populateInventoryFromIPAM` does.
fn canonical(host_name: &str, dns_domain: &str) -> (String, Option<String>) {
    match host_name.split_once('.') {
        Some((_, domain)) => (host_name.to_string(), (domain != dns_domain).then(|| domain.to_string())),
        None if dns_domain.is_empty() => (host_name.to_string(), None),
        None => (format!("{host_name}.{dns_domain}"), None),
    }
}

fn apply_ipam(vars: &mut Vars, s: &Setter, g: &HostGroup, m: &Member, snap: &Snapshot, net: &NetInfo) {
    let host_name = &m.host_name.value;
    let ipset = snap
        .ipsets
        .iter()
        .find(|o| &o.id.name == host_name)
        .or_else(|| snap.ipsets.iter().find(|o| o.id.name == m.key));
    let mut search = Vec::new();
    if let Some(ipset) = ipset {
        // Exactly upstream's populateInventoryFromIPAM, reservation by reservation.
        let ipset_id = Arc::new(ipset.id.clone());
        let set = |vars: &mut Vars, key: String, v: Value, field: &str| {
            let mut p = s.prov(field, Level::Ipam);
            p.object = ipset_id.clone();
            vars.set(key, v, p);
        };
        for (i, r) in ipset.body.reservations.iter().enumerate() {
            let field = format!("status.reservations[{i}]");
            let entry = r
                .service_network
                .clone()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| r.network.to_lowercase());
            set(vars, format!("{entry}_ip"), json!(r.address), &field);
            if let Some(len) = r.cidr.as_deref().and_then(prefix_len) {
                set(vars, format!("{entry}_cidr"), json!(len), &field);
            }
            if let Some(vlan) = r.vlan {
                set(vars, format!("{entry}_vlan_id"), json!(vlan), &field);
            }
            set(vars, format!("{entry}_mtu"), json!(r.mtu.unwrap_or(0)), &field);
            set(vars, format!("{entry}_gateway_ip"), json!(r.gateway), &field);
            set(vars, format!("{entry}_host_routes"), json!(r.routes), &field);
            if entry == "ctlplane" {
                let dns = net.dns_addresses.clone().unwrap_or_default();
                set(vars, "ctlplane_dns_nameservers".into(), json!(dns), &field);
                let (canon, extra) = canonical(host_name, &r.dns_domain);
                set(vars, "canonical_hostname".into(), json!(canon), &field);
                search.extend(extra);
            }
            search.push(r.dns_domain.clone());
        }
        set(vars, "dns_search_domains".into(), json!(search), "status.reservations");
        return;
    }
    // No IPSet (a directory of manifests, or IPAM not yet reconciled): use fixedIP, with the
    // subnet facts from NetConfig when it is there.
    let networks = m.section.networks.as_ref().or(g.template.networks.as_ref());
    let Some(networks) = networks else { return };
    for (i, n) in networks.value.iter().enumerate() {
        let Some(ip) = n.fixed_ip.as_deref().filter(|ip| !ip.is_empty()) else { continue };
        let field = format!("{}[{i}].fixedIP", networks.path);
        let mut p = s.prov(&field, Level::Ipam);
        p.note = Some("fixedIP; no IPSet found".into());
        let entry = net.service_network(&n.name);
        vars.set(format!("{entry}_ip"), json!(ip), p.clone());
        let netcfg = net.network(&n.name);
        let subnet = netcfg.and_then(|nc| {
            nc.subnets
                .iter()
                .find(|sn| Some(sn.name.as_str()) == n.subnet_name.as_deref())
                .or(nc.subnets.first())
        });
        let mut from_netconfig = p.clone();
        from_netconfig.note = Some("fixedIP with subnet facts from NetConfig".into());
        if let Some(sn) = subnet {
            if let Some(len) = sn.cidr.as_deref().and_then(prefix_len) {
                vars.set(format!("{entry}_cidr"), json!(len), from_netconfig.clone());
            }
            if let Some(v) = sn.vlan {
                vars.set(format!("{entry}_vlan_id"), json!(v), from_netconfig.clone());
            }
            vars.set(format!("{entry}_gateway_ip"), json!(sn.gateway), from_netconfig.clone());
            vars.set(format!("{entry}_host_routes"), json!(sn.routes), from_netconfig.clone());
        }
        if let Some(mtu) = netcfg.and_then(|nc| nc.mtu) {
            vars.set(format!("{entry}_mtu"), json!(mtu), from_netconfig.clone());
        }
        let domain = netcfg.and_then(|nc| nc.dns_domain.clone()).unwrap_or_default();
        if entry == "ctlplane" {
            if let Some(dns) = &net.dns_addresses {
                vars.set("ctlplane_dns_nameservers", json!(dns), from_netconfig.clone());
            }
            let (canon, extra) = canonical(host_name, &domain);
            vars.set("canonical_hostname", json!(canon), p.clone());
            search.extend(extra);
        }
        if !domain.is_empty() {
            search.push(domain);
        }
    }
    if !search.is_empty() {
        let mut p = s.prov(&networks.path, Level::Ipam);
        p.note = Some("dnsDomain of each network in NetConfig".into());
        vars.set("dns_search_domains", json!(search), p);
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
