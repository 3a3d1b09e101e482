//! Variables with provenance: every value knows which object and field set it, at which
//! precedence level, and what it replaced.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::snapshot::resource::ObjRef;

/// Where in the inventory a variable lives; Ansible gives host vars precedence over group vars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Group,
    Host,
}

/// The step of inventory generation that set a variable, in the order steps run (a later
/// step overwrites an earlier one within the same scope). Mirrors openstack-operator's
/// `GenerateNodeSetInventory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `ansibleVarsFrom`: a ConfigMap or Secret key.
    VarsFrom,
    /// An explicit CR field such as `ansibleUser`, or the host's address.
    Field,
    /// A default container image from the agent's configuration.
    ImageDefault,
    /// `ansibleVars`.
    AnsibleVars,
    /// Derived from `networks` (`nodeset_networks`, `networks_lower`, ...).
    Networks,
    /// Fixed by the generator (`edpm_nodeset_name`, `edpm_services`, key file path, ...).
    Generated,
    /// IP address management: an IPSet reservation, or `fixedIP` plus NetConfig.
    Ipam,
}

impl Level {
    pub fn describe(self) -> &'static str {
        match self {
            Level::VarsFrom => "ansibleVarsFrom",
            Level::Field => "explicit field",
            Level::ImageDefault => "default image",
            Level::AnsibleVars => "ansibleVars",
            Level::Networks => "networks",
            Level::Generated => "generated",
            Level::Ipam => "IPAM",
        }
    }
}

/// Who set a variable.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// Shared: every variable of a host points at the same object.
    pub object: ObjRef,
    /// Field path within `object`, e.g. `spec.nodeTemplate.ansible.ansibleVars.foo`, or for
    /// ConfigMap/Secret sources, `data.key`.
    pub field: String,
    pub level: Level,
    pub scope: Scope,
    /// The value came from a Secret: never shown unless asked for.
    pub secret: bool,
    /// Extra words for people: "webhook default", "via spec.nodeTemplate...", etc.
    pub note: Option<String>,
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = match self.scope {
            Scope::Group => "group var",
            Scope::Host => "host var",
        };
        write!(f, "{scope}, {} {} [{}]", self.object.short(), self.field, self.level.describe())?;
        if let Some(n) = &self.note {
            write!(f, " ({n})")?;
        }
        write!(f, " at {}", self.object.origin_of(&self.field))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    /// Shared: the same networks map or route list on every host of a group is one value.
    pub value: Arc<Value>,
    /// Where the value came from; `None` when the inventory was built without provenance.
    pub trail: Option<Box<Trail>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trail {
    pub from: Provenance,
    /// Earlier values of the same variable in the same scope, oldest first.
    pub overridden: Vec<(Arc<Value>, Provenance)>,
}

/// A variable's name: most are fixed (`ansible_host`), the rest shared by every host that has
/// them (`ctlplane_ip`), so names cost an allocation per build, not per host.
#[derive(Debug, Clone, Eq)]
pub enum Key {
    Static(&'static str),
    Shared(Arc<str>),
}

impl std::ops::Deref for Key {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Key::Static(s) => s,
            Key::Shared(s) => s,
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl From<&'static str> for Key {
    fn from(s: &'static str) -> Key {
        Key::Static(s)
    }
}

impl From<String> for Key {
    fn from(s: String) -> Key {
        Key::Shared(s.into())
    }
}

impl From<Arc<str>> for Key {
    fn from(s: Arc<str>) -> Key {
        Key::Shared(s)
    }
}

impl serde::Serialize for Key {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

/// An ordered set of variables (sorted by name, as upstream's yaml.v3 output is).
///
/// With `track` off (`inventory --list`, `--host`, export, render), only values are kept:
/// only `explain` reads provenance. Entries are a sorted list, not a tree: a host has a few
/// dozen variables, and a 10,000-host inventory is mostly these lists (BENCHMARKS.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Vars {
    entries: Vec<(Key, Var)>,
    track: bool,
}

impl Default for Vars {
    fn default() -> Self {
        Vars::new(true)
    }
}

impl Vars {
    pub fn new(track: bool) -> Self {
        Vars { entries: Vec::new(), track }
    }

    pub fn set(&mut self, key: impl Into<Key>, value: impl Into<Arc<Value>>, from: Provenance) {
        self.put(key, value, || from);
    }

    /// Sets `key`; `from` is called only when this `Vars` keeps provenance.
    pub fn put(
        &mut self,
        key: impl Into<Key>,
        value: impl Into<Arc<Value>>,
        from: impl FnOnce() -> Provenance,
    ) {
        let key = key.into();
        let value = value.into();
        match self.entries.binary_search_by(|(k, _)| (**k).cmp(&*key)) {
            Err(at) => {
                let trail = self.track.then(|| Box::new(Trail { from: from(), overridden: Vec::new() }));
                self.entries.insert(at, (key, Var { value, trail }));
            }
            Ok(at) => {
                let var = &mut self.entries[at].1;
                let old_value = std::mem::replace(&mut var.value, value);
                if let Some(t) = &mut var.trail {
                    let old_from = std::mem::replace(&mut t.from, from());
                    t.overridden.push((old_value, old_from));
                }
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&Var> {
        self.entries.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &self.entries[i].1)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Var)> {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Gives back the room the list grew into; for a finished host.
    pub fn shrink(&mut self) {
        self.entries.shrink_to_fit();
    }

    /// The plain values, as Ansible sees them.
    pub fn to_json(&self) -> serde_json::Map<String, Value> {
        self.entries.iter().map(|(k, v)| (k.to_string(), (*v.value).clone())).collect()
    }
}

/// Serializes as a mapping of names to plain values, without copying them.
impl serde::Serialize for Vars {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.entries.iter().map(|(k, v)| (k, &*v.value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::resource::Origin;

    fn prov(field: &str) -> Provenance {
        Provenance {
            object: ObjRef::new("K", "n", Origin::Api { namespace: "ns".into() }),
            field: field.into(),
            level: Level::Field,
            scope: Scope::Group,
            secret: false,
            note: None,
        }
    }

    #[test]
    fn set_keeps_the_override_chain() {
        let mut v = Vars::default();
        v.set("a", Value::from(1), prov("x"));
        v.set("a", Value::from(2), prov("y"));
        let var = v.get("a").unwrap();
        assert_eq!(*var.value, 2);
        let trail = var.trail.as_ref().unwrap();
        assert_eq!(trail.from.field, "y");
        assert_eq!(trail.overridden, vec![(Arc::new(Value::from(1)), prov("x"))]);
    }

    #[test]
    fn untracked_vars_keep_values_only() {
        let mut v = Vars::new(false);
        v.set("a", Value::from(1), prov("x"));
        v.set("a", Value::from(2), prov("y"));
        assert_eq!(v.get("a").unwrap(), &Var { value: Arc::new(Value::from(2)), trail: None });
    }
}
