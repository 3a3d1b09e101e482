//! A directory (or single file) of manifests: the only reader of manifest files. It reads
//! `*.yaml`, `*.yml` and `*.json` recursively, in sorted order, following symbolic links (a
//! mounted ConfigMap is a tree of links) and skipping dot-names (`..data`, `.git`); the pure
//! `snapshot::from_file_text` parses and decodes each file, on every core.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::SourceError;
use crate::snapshot::{self, Snapshot};

const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Reads the manifests under `path` into one snapshot. `namespace`, when given, keeps only
/// objects in that namespace (and those that name none).
pub(crate) fn load(path: &Path, namespace: Option<&str>) -> Result<Snapshot, SourceError> {
    let files = manifest_files(path)?;
    if files.is_empty() {
        return Err(SourceError::NoManifests { path: path.display().to_string() });
    }
    let mut texts = Vec::with_capacity(files.len());
    for file in files {
        let shown = file.display().to_string();
        let text = fs_err::read_to_string(&file)
            .map_err(|source| SourceError::Unreadable { path: shown.clone(), source })?;
        texts.push((shown, text));
    }
    // YAML parsing is most of the cost of a large inventory; files are independent. Each file
    // becomes its own snapshot, so its intermediate JSON values are freed before the next.
    let parts = crate::par::map(&texts, |(p, t)| snapshot::from_file_text(p, t, namespace));
    let mut snap = Snapshot::default();
    for part in parts {
        snap.absorb(part?);
    }
    snap.check_duplicates()?;
    Ok(snap)
}

/// Lists manifest files under `root` (or `root` itself when it is a file).
pub(crate) fn manifest_files(root: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let unreadable =
        |path: &Path, source| SourceError::Unreadable { path: path.display().to_string(), source };
    let meta = std::fs::metadata(root).map_err(|e| unreadable(root, e))?;
    if meta.is_file() {
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
