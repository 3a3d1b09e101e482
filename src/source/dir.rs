//! A directory (or single file) of manifests: the only reader of manifest files. It reads
//! `*.yaml`, `*.yml` and `*.json` recursively, in sorted order, following symbolic links (a
//! mounted ConfigMap is a tree of links) and skipping dot-names (`..data`, `.git`).
//!
//! Parsing is most of the cost of a large input, so the files' YAML sections (kubectl's `---`
//! documents) are dealt out to every core in pieces of about [`PIECE_BYTES`]: many small files
//! and one large file spread alike. The pure `snapshot::FilePart` decodes each piece; pieces
//! are put back together in file order, so results and the first reported error are the same
//! as reading one document after another.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::SourceError;
use edpm_core::snapshot::manifest::{self, Document, Layout, ParseError, Streamed};
use edpm_core::snapshot::{FilePart, Snapshot, SnapshotError};
use edpm_core::yaml::Section;
use edpm_io::files::{self, ReadError};

const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// The most manifest text one run reads, over all sources: a bound on memory against a
/// runaway input (a dump of a whole cluster, a link to a huge file). Far above any data plane:
/// 50,000 nodes take about 20 MiB.
pub(crate) const MAX_INPUT_BYTES: u64 = 2 << 30;

/// Sections are parsed in pieces of about this size: large enough that dealing them out
/// costs nothing, small enough that both cores get an even share of one large file.
const PIECE_BYTES: usize = 64 << 10;

/// Bytes read so far in this run, against [`MAX_INPUT_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct Budget {
    pub read: u64,
}

/// What to parse as one unit of work.
enum Piece {
    /// A whole JSON file (one stream of values).
    Json { file: usize },
    /// Consecutive sections of a YAML file.
    Yaml { file: usize, sections: Vec<Section> },
    /// A file that could not even be split into sections.
    Failed { file: usize, error: SnapshotError },
}

impl Piece {
    fn file(&self) -> usize {
        match self {
            Piece::Json { file } | Piece::Yaml { file, .. } | Piece::Failed { file, .. } => *file,
        }
    }
}

/// Reads the manifests under `path` into one snapshot. `namespace`, when given, keeps only
/// objects in that namespace (and those that name none); `lines` keeps every field's line.
#[allow(
    clippy::too_many_lines,
    reason = "walks a directory once: each file's read, decode and namespace filter share its errors"
)]
pub(crate) fn load(
    path: &Path,
    namespace: Option<&str>,
    lines: bool,
    budget: &mut Budget,
) -> Result<Snapshot, SourceError> {
    let files = manifest_files(path)?;
    if files.is_empty() {
        return Err(SourceError::NoManifests { path: path.display().to_string() });
    }
    // Every file's type and the run's cap are checked before anything is read: reading file by
    // file would hold 2 GiB before the file that passes the cap was reached, and a FIFO named
    // pipe.yaml would hang an inventory script (and Ansible with it), a link to /dev/zero never
    // end. A file over the per-file cap is refused by `read_opened` without being read.
    for file in &files {
        let shown = || file.display().to_string();
        let meta =
            std::fs::metadata(file).map_err(|source| SourceError::Unreadable { path: shown(), source })?;
        if let Err(ReadError::NotRegular(what)) = files::check_readable(&meta.file_type(), false) {
            return Err(SourceError::NotRegular { path: shown(), what });
        }
        if meta.len() <= files::MAX_FILE_BYTES {
            budget.read += meta.len();
            if budget.read > MAX_INPUT_BYTES {
                return Err(SourceError::TooLarge {
                    path: shown(),
                    read: budget.read,
                    limit: MAX_INPUT_BYTES,
                });
            }
        }
    }
    let mut texts = Vec::with_capacity(files.len());
    for file in files {
        let shown = file.display().to_string();
        // Checked again on the open descriptor, within the per-file cap.
        let text = files::read_opened(&file, files::MAX_FILE_BYTES, false).map_err(|e| match e {
            ReadError::Io(source) => SourceError::Unreadable { path: shown.clone(), source },
            ReadError::NotRegular(what) => SourceError::NotRegular { path: shown.clone(), what },
            ReadError::TooLarge(limit) => SourceError::FileTooLarge { path: shown.clone(), limit },
            ReadError::NotUtf8(detail) => SourceError::NotUtf8 { path: shown.clone(), detail },
        })?;
        texts.push((shown, text));
    }
    let mut pieces = Vec::new();
    for (file, (shown, text)) in texts.iter().enumerate() {
        match manifest::layout(shown, text) {
            Ok(Layout::Json) => pieces.push(Piece::Json { file }),
            Ok(Layout::Yaml(sections)) => {
                let mut run: Vec<Section> = Vec::new();
                let mut bytes = 0;
                for s in sections {
                    bytes += s.end - s.start;
                    run.push(s);
                    if bytes >= PIECE_BYTES {
                        pieces.push(Piece::Yaml { file, sections: std::mem::take(&mut run) });
                        bytes = 0;
                    }
                }
                if !run.is_empty() || pieces.last().is_none_or(|p| p.file() != file) {
                    pieces.push(Piece::Yaml { file, sections: run });
                }
            }
            Err(e) => pieces.push(Piece::Failed { file, error: e.into() }),
        }
    }
    let parts = edpm_io::parallel::map(&pieces, |piece| {
        let (shown, text) = &texts[piece.file()];
        // A `kind: List`'s items are decoded as they are read (into `staged`, kept only if the
        // document does turn out to be a List), so a List is never one tree in memory.
        let mut part = FilePart::new();
        let result = match piece {
            Piece::Json { .. } => {
                let mut staged = FilePart::new();
                let streaming = manifest::json_streaming(shown, text, &mut |doc| {
                    staged.add(shown, vec![doc], namespace, lines)
                });
                take(&mut part, shown, streaming, staged, || manifest::json(shown, text), namespace, lines)
            }
            // Each section is decoded as soon as it is parsed: one document's tree at a time.
            // Documents before a syntax error count (their errors come first).
            Piece::Yaml { sections, .. } => sections.iter().try_for_each(|s| {
                let mut staged = FilePart::new();
                let streaming = manifest::section_streaming(shown, text, s, &mut |doc| {
                    staged.add(shown, vec![doc], namespace, lines)
                });
                take(
                    &mut part,
                    shown,
                    streaming,
                    staged,
                    || manifest::section(shown, text, s),
                    namespace,
                    lines,
                )
            }),
            Piece::Failed { error, .. } => Err(error.clone()),
        };
        match result {
            Ok(()) => part,
            Err(e) => part.then_failed(e),
        }
    });
    let mut files = Vec::with_capacity(texts.len());
    let mut parts = parts.into_iter().zip(&pieces).peekable();
    while let Some((part, piece)) = parts.next() {
        let file = piece.file();
        let mut of_file = vec![part];
        while let Some((next, _)) = parts.next_if(|(_, p)| p.file() == file) {
            of_file.push(next);
        }
        files.push(FilePart::assemble(&texts[file].0, of_file)?);
    }
    // Objects defined twice are found by `source::load`, once over every source.
    Ok(Snapshot::concat(files))
}

/// Adds what a streaming read gave to `part`: its documents, the List items `staged` holds, or
/// (when the items turned out not to belong to a List) what reading `again` gives.
fn take<'t>(
    part: &mut FilePart,
    path: &str,
    streaming: Result<Streamed<'t>, ParseError>,
    staged: FilePart,
    again: impl FnOnce() -> Result<Vec<Document<'t>>, ParseError>,
    namespace: Option<&str>,
    lines: bool,
) -> Result<(), SnapshotError> {
    match streaming? {
        Streamed::Documents(docs) => part.add(path, docs, namespace, lines),
        Streamed::List => part.absorb(staged),
        Streamed::Again => part.add(path, again()?, namespace, lines),
    }
    Ok(())
}

/// Lists manifest files under `root` (or `root` itself when it is a file).
pub(crate) fn manifest_files(root: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let unreadable =
        |path: &Path, source| SourceError::Unreadable { path: path.display().to_string(), source };
    let meta = std::fs::metadata(root).map_err(|e| unreadable(root, e))?;
    if !meta.is_dir() {
        // Named outright, whatever its name: reading it says what it is if it is no file.
        return Ok(vec![root.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut visited = HashSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        // A link back to an ancestor would loop forever; canonical paths catch it.
        let canonical = std::fs::canonicalize(&dir).map_err(|e| unreadable(&dir, e))?;
        if !visited.insert(canonical) {
            continue;
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| unreadable(&dir, e))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| unreadable(&dir, e))?;
        entries.sort();
        let mut subdirs = Vec::new();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') {
                continue;
            }
            // Follows links; a dangling link is reported rather than skipped, since it is
            // probably a manifest someone meant to include.
            let meta = std::fs::metadata(&path).map_err(|e| unreadable(&path, e))?;
            if meta.is_dir() {
                subdirs.push(path);
            } else if path.extension().and_then(|e| e.to_str()).is_some_and(|e| EXTENSIONS.contains(&e)) {
                out.push(path);
            }
        }
        // Reverse so that the stack pops subdirectories in sorted order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and read their fixtures directly")]
mod tests {
    use super::*;

    #[test]
    fn walks_sorted_skips_hidden_and_other_extensions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("b/c")).unwrap();
        std::fs::create_dir_all(p.join("..data")).unwrap();
        for f in ["z.yaml", "a.yml", "b/c/x.json", "b/readme.md", ".hidden.yaml", "..data/y.yaml"] {
            std::fs::write(p.join(f), "").unwrap();
        }
        let files: Vec<String> = manifest_files(p)
            .unwrap()
            .iter()
            .map(|f| f.strip_prefix(p).unwrap().display().to_string())
            .collect();
        assert_eq!(files, ["a.yml", "z.yaml", "b/c/x.json"]);
    }

    #[test]
    fn symlink_loops_terminate() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
        std::fs::write(dir.path().join("a.yaml"), "").unwrap();
        assert_eq!(manifest_files(dir.path()).unwrap().len(), 1);
    }

    #[test]
    fn missing_directory_names_the_path() {
        let err = manifest_files(Path::new("/nonexistent/edpm")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/edpm"), "{err}");
    }
}
