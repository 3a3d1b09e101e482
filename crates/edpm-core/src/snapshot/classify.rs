//! Which documents are read: a kind of the table (`crate::kinds`) is decoded; a kind of a group
//! whose operator edpm-agent knows, but that no operator defines, is a typo (an error, with
//! the kind meant) or a newer operator's (a warning, [`UnknownKind`]); anything else is
//! ignored.

use super::SnapshotError;
use super::resource::Origin;
use crate::yaml::Node;

/// A document of a kind nobody defines in an API group edpm-agent reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKind {
    pub origin: Origin,
    pub api_version: String,
    pub kind: String,
    /// `metadata.name`, when it has one.
    pub name: String,
}

impl std::fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}/{}): kind {} is not one edpm-agent knows in {}, so the object is not read; check the kind, or ignore this if a newer operator defines it",
            self.origin, self.kind, self.name, self.kind, self.api_version
        )
    }
}

/// For a kind `classify` does not know: `None` when nothing is wrong (a group we do not read,
/// or a kind its operator defines that we do not need), else the closest kind of the group
/// when the kind is a near miss of it (a typo), or no suggestion.
fn unknown_kind(api_version: &str, kind: &str) -> Option<Option<&'static str>> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let kinds = crate::kinds::kinds_of_group(group)?;
    if kinds.contains(&kind) {
        return None;
    }
    let close = crate::suggest::closest(kind, kinds.iter().copied(), crate::suggest::KINDS);
    Some(close)
}

/// A document of a kind edpm-agent does not read (`api_version`, `kind`): ignored (`None`), a
/// typo of a kind we read (an error), or unknown (kept, to be warned about).
pub(super) fn not_read(
    origin: Origin,
    api_version: &str,
    kind: &str,
    node: &Node<'_>,
    namespace: Option<&str>,
) -> Result<Option<UnknownKind>, SnapshotError> {
    // An object another namespace holds is not read, so its kind is not our concern.
    let elsewhere = match (namespace, node.get("metadata").and_then(|m| m.get("namespace"))) {
        (Some(want), Some(have)) => have.as_str().is_some_and(|h| h != want),
        _ => false,
    };
    match unknown_kind(api_version, kind).filter(|_| !elsewhere) {
        None => Ok(None),
        Some(Some(suggestion)) => Err(SnapshotError::KindTypo {
            origin,
            kind: kind.to_string(),
            group: api_version.split_once('/').map_or("", |(g, _)| g).to_string(),
            suggestion,
        }),
        Some(None) => Ok(Some(UnknownKind {
            origin,
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            name: node
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Node::as_str)
                .unwrap_or("-")
                .to_string(),
        })),
    }
}
