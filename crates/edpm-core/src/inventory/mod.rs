//! The Ansible inventory: built from the model (pure), printed for Ansible's script contract
//! (`--list`/`--host`), exported as static YAML/INI/JSON, and explained variable by variable.
//!
//! Invariant: no I/O here. Output functions return strings; the shell writes them.

pub mod build;
pub mod explain;
pub mod export;
pub mod vars;

use std::collections::{BTreeMap, BTreeSet};

pub use build::{build, build_spread};
pub use vars::{Provenance, Scope, Vars};

use crate::model::CellRef;
use crate::snapshot::resource::{ObjRef, Origin};

/// Settings the inventory needs from outside the snapshot.
#[derive(Debug, Clone)]
pub struct Options {
    /// Directory where the runner mounts SSH keys (`/runner/env/ssh_key`).
    pub ssh_key_dir: String,
    /// Default container images (`edpm_*_image` → image), applied unless the user set them.
    pub images: BTreeMap<String, String>,
    /// Where each image was set (config file line, environment variable), for `explain`.
    pub image_origins: BTreeMap<String, Origin>,
    /// Keep every variable's provenance (for `explain`); off, only values are kept.
    pub provenance: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub groups: BTreeMap<String, Group>,
    pub hosts: BTreeMap<String, Host>,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub vars: Vars,
    pub hosts: BTreeSet<String>,
    pub children: BTreeSet<String>,
    pub source: GroupSource,
}

/// Why a group exists.
#[derive(Debug, Clone)]
pub enum GroupSource {
    Role(ObjRef),
    NodeSet(ObjRef),
    /// Hosts whose `nova.openstack.org/cell` annotation names this cell.
    Cell(String),
}

#[derive(Debug, Clone)]
pub struct Host {
    pub vars: Vars,
    /// The Node, or the NodeSet holding the node entry.
    pub id: ObjRef,
    /// The Node name or NodeSet map key.
    pub key: String,
    /// The Role or NodeSet group it belongs to.
    pub group: String,
    pub cell: Option<CellRef>,
}

impl Inventory {
    /// Groups that contain `host`, in the order Ansible applies their vars (all ours are
    /// children of `all` at depth 1, so: by name).
    pub fn groups_of(&self, host: &str) -> Vec<(&String, &Group)> {
        self.groups.iter().filter(|(_, g)| g.hosts.contains(host)).collect()
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum InventoryError {
    #[error(
        "{object}: {field} names {kind} \"{name}\", which does not exist{hint}; create it or mark the reference optional: true"
    )]
    MissingSource { object: ObjRef, field: String, kind: &'static str, name: String, hint: String },
    #[error("{object}: {field} has neither configMapRef nor secretRef; name one of them")]
    EmptySource { object: ObjRef, field: String },
    #[error("{object}: {field} must be a mapping of variable names to values, found {found}")]
    NotAMapping { object: ObjRef, field: String, found: String },
    #[error("{object}: {field} holds invalid YAML: {message}")]
    BadYaml { object: ObjRef, field: String, message: String },
    #[error("{what} \"{host}\" is used twice: by {} (node {}) and by {} (node {}); give every node a distinct hostName and ansibleHost", first.0, first.1, second.0, second.1)]
    DuplicateHost { host: String, what: &'static str, first: (ObjRef, String), second: (ObjRef, String) },
    #[error("group name \"{name}\" is claimed by {first} and by {second}; rename one of them")]
    GroupClash { name: String, first: String, second: String },
    #[error("{object}: {field} is empty, so the node has no inventory hostname; set hostName")]
    EmptyHostName { object: ObjRef, field: String },
}

impl InventoryError {
    /// Missing objects, conflicts, and malformed input map to different exit codes.
    pub fn kind(&self) -> ErrorKind {
        match self {
            InventoryError::MissingSource { .. } => ErrorKind::Missing,
            InventoryError::DuplicateHost { .. } | InventoryError::GroupClash { .. } => ErrorKind::Conflict,
            _ => ErrorKind::Invalid,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Invalid,
    Missing,
    Conflict,
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and read their fixtures directly")]
mod tests {
    use super::*;
    use crate::snapshot::{self, Snapshot};

    fn example(provenance: bool) -> Inventory {
        let mut snap = Snapshot::default();
        // The repository's examples, two folders above this crate.
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for dir in ["examples/controlplane", "examples/dataplane"] {
            let mut files: Vec<_> =
                std::fs::read_dir(repo.join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap();
                snap.merge(snapshot::from_file_text(&f.display().to_string(), &text, None).unwrap()).unwrap();
            }
        }
        let model = crate::model::resolve(&snap).unwrap();
        let opts = Options {
            ssh_key_dir: "/runner/env/ssh_key".into(),
            images: BTreeMap::new(),
            image_origins: BTreeMap::new(),
            provenance,
        };
        build(&model, &snap, &opts).unwrap()
    }

    #[test]
    fn provenance_changes_nothing_ansible_sees() {
        let (traced, plain) = (example(true), example(false));
        assert_eq!(
            export::list_json_string(&traced, true).unwrap(),
            export::list_json_string(&plain, true).unwrap()
        );
        let host = plain.hosts.keys().next().unwrap();
        assert!(plain.hosts[host].vars.iter().all(|(_, v)| v.trail.is_none()));
        assert!(traced.hosts[host].vars.iter().all(|(_, v)| v.trail.is_some()));
        assert!(explain::explain(&plain, host, None).is_err(), "explain needs provenance");
        assert!(explain::explain(&traced, host, None).is_ok());
    }

    #[test]
    fn list_json_in_runs_is_byte_identical() {
        let inv = example(false);
        let whole = export::list_json_string(&inv, false).unwrap();
        for run in [1, 2, 3, 1000] {
            let parts = export::list_json_pieces(&inv, |hosts| {
                hosts.chunks(run).map(export::hostvars_json).collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
            assert_eq!(parts.concat(), whole, "runs of {run}");
        }
        let empty = Inventory::default();
        assert_eq!(
            export::list_json_pieces(&empty, |h| Ok(vec![export::hostvars_json(h)?])).unwrap().concat(),
            export::list_json_string(&empty, false).unwrap()
        );
    }
}
