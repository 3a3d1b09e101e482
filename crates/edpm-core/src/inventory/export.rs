//! Inventory output formats: Ansible's dynamic-inventory JSON (`--list`, `--host`) and the
//! static forms (`export --format yaml|ini|json`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::inventory::{Inventory, Vars};

/// The `--list` document, serialized straight from the inventory without building a `Value`
/// first: every group as a child of `all`, `ungrouped` present, and `_meta.hostvars` so that
/// Ansible never calls `--host` (oslo-ansible-crates.md §3). Hostvars hold host-level
/// variables only; group variables stay on their groups, so Ansible applies its own precedence
/// exactly as with upstream's static inventory.
pub fn list_json_string(inv: &Inventory, pretty: bool) -> Result<String, serde_json::Error> {
    let doc = ListDoc(inv, true);
    let mut s = if pretty { serde_json::to_string_pretty(&doc) } else { serde_json::to_string(&doc) }?;
    s.push('\n');
    Ok(s)
}

/// The compact `--list` document, byte for byte [`list_json_string`]'s, as pieces to write
/// one after the other (no copy of the whole document is made). The host variables, most of
/// it, are serialized by `hostvars`: the caller gets the hosts in order and returns their
/// entries in runs ([`hostvars_json`] of consecutive slices), so that it can spread them over
/// cores.
pub fn list_json_pieces(
    inv: &Inventory,
    hostvars: impl FnOnce(&[(&str, &Vars)]) -> Result<Vec<String>, serde_json::Error>,
) -> Result<Vec<String>, serde_json::Error> {
    let hosts: Vec<(&str, &Vars)> = inv.hosts.iter().map(|(n, h)| (n.as_str(), &h.vars)).collect();
    let runs = hostvars(&hosts)?;
    let groups = serde_json::to_string(&ListDoc(inv, false))?;
    let mut pieces = Vec::with_capacity(runs.len() * 2 + 2);
    pieces.push("{\"_meta\":{\"hostvars\":{".to_string());
    for run in runs.into_iter().filter(|r| !r.is_empty()) {
        if pieces.len() > 1 {
            pieces.push(",".into());
        }
        pieces.push(run);
    }
    // `groups` is an object; its members follow `_meta` in the same object.
    pieces.push(format!("}}}},{}\n", &groups[1..]));
    Ok(pieces)
}

/// `"host":{vars},...` for a run of hosts, as a JSON object's members.
pub fn hostvars_json(hosts: &[(&str, &Vars)]) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(hosts.len() * 384);
    for (i, (name, vars)) in hosts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, name)?;
        out.push(b':');
        serde_json::to_writer(&mut out, vars)?;
    }
    // serde_json writes only valid UTF-8.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// The `--list` document; without `_meta` when the second field is false.
struct ListDoc<'a>(&'a Inventory, bool);

#[derive(Serialize)]
struct ListGroup<'a> {
    hosts: &'a std::collections::BTreeSet<String>,
    #[serde(skip_serializing_if = "Vars::is_empty")]
    vars: &'a Vars,
    #[serde(skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    children: &'a std::collections::BTreeSet<String>,
}

impl Serialize for ListDoc<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let inv = self.0;
        let empty = std::collections::BTreeSet::new();
        let no_vars = Vars::default();
        let mut children: Vec<&str> = inv.groups.keys().map(String::as_str).collect();
        children.push("ungrouped");
        // Keys in sorted order, as a JSON object with sorted keys would have them.
        let mut names: Vec<&str> = children.clone();
        names.sort_unstable();
        let mut m = s.serialize_map(None)?;
        if self.1 {
            let hostvars: BTreeMap<&str, &Vars> =
                inv.hosts.iter().map(|(n, h)| (n.as_str(), &h.vars)).collect();
            m.serialize_entry("_meta", &MetaDoc { hostvars })?;
        }
        m.serialize_entry("all", &json!({ "children": children }))?;
        for name in names {
            match inv.groups.get(name) {
                Some(g) => m.serialize_entry(
                    name,
                    &ListGroup { hosts: &g.hosts, vars: &g.vars, children: &g.children },
                )?,
                // An object with none of hosts/vars/children would be read as a host.
                None => {
                    m.serialize_entry(name, &ListGroup { hosts: &empty, vars: &no_vars, children: &empty })?
                }
            }
        }
        m.end()
    }
}

#[derive(Serialize)]
struct MetaDoc<'a> {
    hostvars: BTreeMap<&'a str, &'a Vars>,
}

/// The `--host HOST` document: that host's own variables.
pub fn host_json(inv: &Inventory, host: &str) -> Option<Value> {
    inv.hosts.get(host).map(|h| Value::Object(h.vars.to_json()))
}

#[derive(Serialize)]
struct YamlGroup<'a> {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    hosts: BTreeMap<&'a str, Map<String, Value>>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    vars: Map<String, Value>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    children: BTreeMap<&'a str, Map<String, Value>>,
}

/// Upstream's static layout (lib-common `ansible.Inventory`): top-level keys are groups, each
/// with `hosts` (host → vars), `vars` and `children`, keys sorted. A host's vars appear under
/// its Role/NodeSet group; cell groups list it with `{}`.
fn static_layout(inv: &Inventory) -> BTreeMap<&str, YamlGroup<'_>> {
    let mut doc: BTreeMap<&str, YamlGroup> = BTreeMap::new();
    for (name, g) in &inv.groups {
        let hosts = g
            .hosts
            .iter()
            .map(|h| {
                let vars = match inv.hosts.get(h) {
                    Some(host) if &host.group == name => host.vars.to_json(),
                    _ => Map::new(),
                };
                (h.as_str(), vars)
            })
            .collect();
        let children = g.children.iter().map(|c| (c.as_str(), Map::new())).collect();
        doc.insert(name, YamlGroup { hosts, vars: g.vars.to_json(), children });
    }
    doc
}

/// The static layout as YAML, with yaml.v3's four-space indent.
pub fn yaml(inv: &Inventory) -> Result<String, String> {
    let doc = static_layout(inv);
    let options = serde_saphyr::ser_options! {
        indent_step: 4,
        compact_list_indent: false,
        folded_wrap_chars: usize::MAX / 2,
    };
    serde_saphyr::to_string_with_options(&doc, options).map_err(|e| e.to_string())
}

/// The static layout as JSON, which Ansible's yaml inventory plugin reads too (and much faster
/// than YAML: oslo-ansible-crates.md §3).
pub fn static_json(inv: &Inventory) -> String {
    let mut s = serde_json::to_string_pretty(&static_layout(inv)).unwrap_or_default();
    s.push('\n');
    s
}

/// A static INI inventory. INI can only hold one line per variable, so every value is written
/// as a Python literal, which Ansible's INI plugin `literal_eval`s back into the same type
/// (host variables additionally go through `shlex`, hence the extra single quoting).
pub fn ini(inv: &Inventory) -> String {
    let mut out = String::new();
    for (name, g) in &inv.groups {
        let _ = writeln!(out, "[{name}]");
        for h in &g.hosts {
            out.push_str(h);
            if let Some(host) = inv.hosts.get(h).filter(|host| &host.group == name) {
                for (k, v) in host.vars.iter() {
                    let _ = write!(out, " {k}={}", shell_quote(&python_literal(&v.value)));
                }
            }
            out.push('\n');
        }
        out.push('\n');
        if !g.vars.is_empty() {
            let _ = writeln!(out, "[{name}:vars]");
            for (k, v) in g.vars.iter() {
                let _ = writeln!(out, "{k} = {}", python_literal(&v.value));
            }
            out.push('\n');
        }
        if !g.children.is_empty() {
            let _ = writeln!(out, "[{name}:children]");
            for c in &g.children {
                let _ = writeln!(out, "{c}");
            }
            out.push('\n');
        }
    }
    out
}

/// A Python literal for a JSON value. JSON string escapes are a subset of Python's, so
/// `serde_json`'s string encoding is reused; only the constants differ.
pub fn python_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(python_literal).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(m) => {
            let inner: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    format!("{}: {}", serde_json::to_string(k).unwrap_or_default(), python_literal(v))
                })
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// Quotes a word for POSIX `shlex.split`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals() {
        let v = json!({"a": [true, null, 1.5, "it's \"q\"\n"], "b": false});
        assert_eq!(python_literal(&v), r#"{"a": [True, None, 1.5, "it's \"q\"\n"], "b": False}"#);
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(shell_quote("it's"), r#"'it'"'"'s'"#);
    }
}
