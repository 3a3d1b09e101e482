//! A manifest file's snapshot, from its pieces: the documents of each piece are decoded as
//! they are parsed, and the pieces are put together in document order, the first problem in
//! document order winning (`source::dir` parses the pieces of a large file on every core).

use super::manifest::{self, Document};
use super::resource::{FieldLines, Origin};
use super::{Snapshot, SnapshotError};
use crate::kinds::KnownKind;
use crate::yaml::Node;

/// Parses and decodes one manifest file's text (read from `path`) into its own snapshot, on
/// this thread. See [`FilePart`] for the rules; `source::dir` does the same on every core.
pub fn from_file_text(path: &str, text: &str, namespace: Option<&str>) -> Result<Snapshot, SnapshotError> {
    let mut part = FilePart::new();
    match manifest::parse(path, text) {
        Ok(docs) => part.add(path, docs, namespace, false),
        Err(e) => part = part.then_failed(e.into()),
    }
    FilePart::assemble(path, vec![part])
}

/// What a piece of one file (a run of its YAML sections, or a whole JSON file) decoded to.
///
/// A file in which no document is a mapping with `apiVersion` or `kind` is not a manifest at
/// all (a settings file, Helm values beside the manifests): it is skipped and named in
/// [`Snapshot::not_manifests`]. A file with at least one object keeps today's strictness:
/// every document must be an object. Which case applies is known only once every piece of the
/// file is decoded, so a piece keeps its first non-object document's error aside.
#[derive(Debug, Default)]
pub struct FilePart {
    snap: Snapshot,
    /// Documents that look like Kubernetes objects.
    objects: usize,
    /// The first document that is not an object, if that came before any hard error.
    not_object: Option<SnapshotError>,
    /// A syntax or decoding error; the piece stops there.
    error: Option<SnapshotError>,
}

impl FilePart {
    /// An empty piece, before its first document.
    pub fn new() -> FilePart {
        FilePart::default()
    }

    /// Decodes more documents of this piece, unless an earlier one failed; `lines` keeps every
    /// field's line on the objects (for `explain`). Callers pass each section's documents (or
    /// List item) as soon as it is parsed, so only one tree is alive at a time.
    pub fn add(&mut self, path: &str, docs: Vec<Document<'_>>, namespace: Option<&str>, lines: bool) {
        if self.error.is_some() {
            return;
        }
        // Typed objects are large: give the usual kinds their room at once.
        let kinds: Vec<Option<KnownKind>> = docs
            .iter()
            .map(|d| {
                let text = |k: &str| d.node.get(k).and_then(Node::as_str).unwrap_or_default();
                crate::kinds::classify(text("apiVersion"), text("kind"))
            })
            .collect();
        let count = |k: KnownKind| kinds.iter().filter(|x| **x == Some(k)).count();
        self.snap.nodes.reserve(count(KnownKind::Node));
        self.snap.roles.reserve(count(KnownKind::Role));
        self.snap.ipsets.reserve(count(KnownKind::IpSet));
        self.snap.config_maps.reserve(count(KnownKind::ConfigMap));
        self.snap.secrets.reserve(count(KnownKind::Secret));
        for doc in docs {
            let looks_like_object = doc.node.get("apiVersion").is_some() || doc.node.get("kind").is_some();
            self.objects += usize::from(looks_like_object);
            let origin = Origin::File { path: path.to_string(), line: doc.line };
            // A saved Nova answer (`openstack … -f json`, or the compute API's JSON) is not an
            // object: it becomes evidence.
            if !looks_like_object && let Some(found) = crate::nova::answer::detect(&doc.node.to_value()) {
                match found {
                    Ok(part) => {
                        let origin = format!("{path}:{}", doc.line);
                        self.snap.evidence.nova_saved.push(crate::nova::Saved { origin, part });
                        continue;
                    }
                    Err(message) => {
                        self.error = Some(SnapshotError::NovaAnswer { origin, message });
                        break;
                    }
                }
            }
            let field_lines = if lines {
                let mut entries = Vec::new();
                doc.node.field_lines(&mut entries);
                FieldLines::new(path, entries)
            } else {
                FieldLines::default()
            };
            match self.snap.add(origin, field_lines, doc.node, namespace) {
                Ok(()) => {}
                Err(e) if !looks_like_object => {
                    self.not_object.get_or_insert(e);
                }
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
        }
    }

    /// Adds what `other`, the documents that follow, decoded to: its objects and first
    /// problems come after this piece's, and nothing does once this piece has failed.
    pub fn absorb(&mut self, other: FilePart) {
        if self.error.is_some() {
            return;
        }
        self.snap.absorb(other.snap);
        self.objects += other.objects;
        if self.not_object.is_none() {
            self.not_object = other.not_object;
        }
        self.error = other.error;
    }

    /// This piece, whose text stopped parsing after its documents (an error after them).
    pub fn then_failed(mut self, e: SnapshotError) -> FilePart {
        self.error.get_or_insert(e);
        self
    }

    /// The snapshot of a whole file from its pieces, in order; the first problem in document
    /// order wins.
    pub fn assemble(path: &str, parts: Vec<FilePart>) -> Result<Snapshot, SnapshotError> {
        let objects: usize = parts.iter().map(|p| p.objects).sum();
        let mut snaps = Vec::with_capacity(parts.len());
        let mut docs = 0;
        for p in parts {
            docs += p.objects + usize::from(p.not_object.is_some());
            match (p.not_object, p.error) {
                (Some(e), _) if objects > 0 => return Err(e),
                (_, Some(e)) => return Err(e),
                _ => snaps.push(p.snap),
            }
        }
        if objects == 0 && docs > 0 {
            return Ok(Snapshot { not_manifests: vec![path.to_string()], ..Default::default() });
        }
        Ok(Snapshot::concat(snaps))
    }
}
