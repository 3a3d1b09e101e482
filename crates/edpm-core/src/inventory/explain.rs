//! `inventory explain HOST [VAR]`: the effective value of each variable of a host, which
//! object, field and precedence level set it, and what it overrode.
//!
//! Ansible's own order is followed: group variables (groups by name, as they are all direct
//! children of `all`), then host variables. Values that came from a Secret are redacted unless
//! the caller asks for them, and so are Secret values and URL passwords inside other values.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::inventory::{GroupSource, Inventory, Provenance, Scope};
use crate::model::did_you_mean;
use crate::redact::Redactor;

#[derive(Debug, Clone)]
pub struct Explanation {
    pub host: String,
    pub groups: Vec<(String, String)>,
    pub vars: Vec<VarStory>,
}

/// Every value a variable took on its way to the effective one, oldest first.
#[derive(Debug, Clone)]
pub struct VarStory {
    pub name: String,
    pub steps: Vec<(std::sync::Arc<Value>, Provenance)>,
}

impl VarStory {
    pub fn winner(&self) -> &(std::sync::Arc<Value>, Provenance) {
        self.steps.last().expect("a story has at least one step")
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ExplainError {
    #[error("host \"{host}\" is not in the inventory{hint}; `edpm-agent inventory --list` shows the hosts")]
    UnknownHost { host: String, hint: String },
    #[error("variable \"{var}\" is not set for host \"{host}\"{hint}")]
    UnsetVar { host: String, var: String, hint: String },
    #[error("the inventory was built without provenance; build it with inventory::Options::provenance set")]
    Untraced,
}

pub fn explain(inv: &Inventory, host: &str, var: Option<&str>) -> Result<Explanation, ExplainError> {
    let Some(h) = inv.hosts.get(host) else {
        return Err(ExplainError::UnknownHost {
            host: host.into(),
            hint: did_you_mean(host, inv.hosts.keys().map(String::as_str)),
        });
    };
    let groups = inv.groups_of(host);
    let mut names: Vec<&str> = groups.iter().flat_map(|(_, g)| g.vars.iter().map(|(k, _)| k)).collect();
    names.extend(h.vars.iter().map(|(k, _)| k));
    names.sort();
    names.dedup();
    if let Some(v) = var
        && !names.contains(&v)
    {
        return Err(ExplainError::UnsetVar {
            host: host.into(),
            var: v.into(),
            hint: did_you_mean(v, names.iter().copied()),
        });
    }
    let mut vars = Vec::new();
    for name in names.into_iter().filter(|n| var.is_none_or(|v| v == *n)) {
        let mut steps = Vec::new();
        let scoped = groups.iter().map(|(_, g)| &g.vars).chain(std::iter::once(&h.vars));
        for vs in scoped {
            if let Some(v) = vs.get(name) {
                let Some(t) = &v.trail else {
                    return Err(ExplainError::Untraced);
                };
                steps.extend(t.overridden.iter().cloned());
                steps.push((v.value.clone(), t.from.clone()));
            }
        }
        vars.push(VarStory { name: name.to_string(), steps });
    }
    let groups = groups
        .iter()
        .map(|(name, g)| {
            let why = match &g.source {
                GroupSource::Role(id) => format!("its OpenStackDataPlaneNode names Role {}", id.short()),
                GroupSource::NodeSet(id) => format!("it is a node of {}", id.short()),
                GroupSource::Cell(_) => match &h.cell {
                    Some(c) => format!("{} {} on {}", c.field, c.name, c.object.short()),
                    None => "nova cell".into(),
                },
            };
            ((*name).clone(), why)
        })
        .collect();
    Ok(Explanation { host: host.into(), groups, vars })
}

/// A value as explain shows it. With a redactor (no `--show-secrets`), a value from a Secret is
/// replaced by a note, and every other value has the Secrets' values and URL passwords inside
/// it masked (a Secret's password can be copied into a plain variable's URL).
fn shown(v: &Value, p: &Provenance, redactor: Option<&Redactor>) -> Value {
    match redactor {
        Some(_) if p.secret => json!("<redacted: from a Secret; pass --show-secrets>"),
        Some(r) => r.redact_json(v),
        None => v.clone(),
    }
}

pub fn to_json(e: &Explanation, redactor: Option<&Redactor>) -> Value {
    let step = |(v, p): &(std::sync::Arc<Value>, Provenance)| {
        json!({
            "value": shown(v, p, redactor),
            "scope": match p.scope { Scope::Group => "group", Scope::Host => "host" },
            "object": p.object.short(),
            "origin": p.object.origin_of(&p.field).to_string(),
            "field": p.field,
            "level": p.level.describe(),
            "note": p.note,
            "secret": p.secret,
        })
    };
    json!({
        "host": e.host,
        "groups": e.groups.iter().map(|(g, why)| json!({"name": g, "reason": why})).collect::<Vec<_>>(),
        "vars": e.vars.iter().map(|s| json!({
            "name": s.name,
            "value": shown(&s.winner().0, &s.winner().1, redactor),
            "from": step(s.winner()),
            "overrode": s.steps[..s.steps.len() - 1].iter().rev().map(step).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

pub fn to_text(e: &Explanation, redactor: Option<&Redactor>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "host {}", e.host);
    for (g, why) in &e.groups {
        let _ = writeln!(out, "  group {g}: {why}");
    }
    // One variable asked for: its value whole, however long (it is the answer).
    let whole = e.vars.len() == 1;
    for s in &e.vars {
        let (v, p) = s.winner();
        let value = shown(v, p, redactor);
        let value = if whole { value.to_string() } else { compact(&value) };
        let _ = writeln!(out, "{} = {value}", s.name);
        let _ = writeln!(out, "    set by   {p}");
        for (v, p) in s.steps[..s.steps.len() - 1].iter().rev() {
            let _ = writeln!(out, "    overrode {} = {}", p, compact(&shown(v, p, redactor)));
        }
    }
    out
}

/// One line per value, long values shortened: explain output is for reading.
fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        format!("{}… ({} chars)", s.chars().take(100).collect::<String>(), s.chars().count())
    } else {
        s
    }
}
