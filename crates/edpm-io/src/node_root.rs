//! Writes the staging plan (`staging`) under a root (`/` on a node), and reads back what is
//! there: the only code that writes host files.
//!
//! Invariants: every write is atomic (same-directory temp file, fsync, rename; each touched
//! directory fsynced once before the manifest records completion), so a reader or a crash sees
//! the old file or the new one; unchanged files are not
//! rewritten; a path with `..`, an absolute path, or a symbolic link anywhere below the root is
//! refused; only files recorded in the manifest are ever removed. The manifest is written twice:
//! before changing anything it already lists every file this run may create (old ∪ new), and
//! after, only the wanted ones; so a run killed half-way is cleaned up by the next one, which
//! also removes the temporary files the killed run left.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use edpm_core::staging::{Action, MANIFEST, Manifest, Record, Step, Want, sha256_hex, volume};

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("refusing {path}: {reason}")]
    Unsafe { path: String, reason: String },
    #[error("cannot {action} {path}: {source}; {}", consequence(action))]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "manifest {path} is not valid: {message}; it records what edpm-agent staged: restore it or remove it (files it listed will then be left alone)"
    )]
    Manifest { path: String, message: String },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
    pub removed: Vec<String>,
}

/// What a failed step leaves behind, for the operator reading the error: only a write replaces
/// a file, and only a sync decides whether earlier replacements survive a crash.
fn consequence(action: &str) -> &'static str {
    match action {
        "write" => "the previous file is left in place; fix the cause and run again",
        "remove" => "the file is left in place; fix the cause and run again",
        "sync" => {
            "files replaced so far may not survive a crash until a later run syncs them; fix the cause and run again"
        }
        _ => "nothing was replaced by this step; fix the cause and run again",
    }
}

const TEMP_PREFIX: &str = ".edpm-agent.";
const TEMP_SUFFIX: &str = ".tmp";

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FsError + use<> {
    let path = path.display().to_string();
    move |source| FsError::Io { action, path, source }
}

/// The absolute path of `rel` under `root`, after checking every existing component below the
/// root: no symbolic links, directories where directories are needed.
pub fn safe_path(root: &Path, rel: &str, create_dirs: bool) -> Result<PathBuf, FsError> {
    volume::check_relative("path", rel)
        .map_err(|e| FsError::Unsafe { path: rel.into(), reason: e.to_string() })?;
    let mut cur = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        cur.push(part);
        let last = i == parts.len() - 1;
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(FsError::Unsafe {
                    path: cur.display().to_string(),
                    reason: "it is a symbolic link; staged paths never follow links".into(),
                });
            }
            Ok(m) if !last && !m.is_dir() => {
                return Err(FsError::Unsafe {
                    path: cur.display().to_string(),
                    reason: "it is not a directory".into(),
                });
            }
            Ok(m) if last && m.is_dir() => {
                return Err(FsError::Unsafe {
                    path: cur.display().to_string(),
                    reason: "it is a directory".into(),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !last && create_dirs {
                    std::fs::create_dir(&cur).map_err(io("create directory", &cur))?;
                    std::fs::set_permissions(&cur, std::fs::Permissions::from_mode(0o755))
                        .map_err(io("set mode of", &cur))?;
                }
            }
            Err(e) => return Err(io("inspect", &cur)(e)),
        }
    }
    Ok(cur)
}

/// sha256 and mode of each path that exists (and is a regular file).
pub fn observe<'a>(
    root: &Path,
    paths: impl Iterator<Item = &'a str>,
) -> Result<BTreeMap<String, (String, u32)>, FsError> {
    let mut out = BTreeMap::new();
    for rel in paths {
        let path = safe_path(root, rel, false)?;
        // A FIFO or device in a staged file's place is refused, never read.
        if let Some((bytes, mode)) =
            crate::files::read_existing(&path, crate::files::MAX_FILE_BYTES).map_err(io("read", &path))?
        {
            out.insert(rel.to_string(), (sha256_hex(&bytes), mode));
        }
    }
    Ok(out)
}

pub fn read_manifest(root: &Path) -> Result<Manifest, FsError> {
    let path = safe_path(root, MANIFEST, false)?;
    match crate::files::read_existing(&path, crate::files::MAX_FILE_BYTES) {
        Ok(Some((bytes, _))) => serde_json::from_slice(&bytes)
            .map_err(|e| FsError::Manifest { path: path.display().to_string(), message: e.to_string() }),
        Ok(None) => Ok(Manifest::default()),
        Err(e) => Err(io("read", &path)(e)),
    }
}

fn write_manifest(root: &Path, m: &Manifest) -> Result<(), FsError> {
    let path = safe_path(root, MANIFEST, true)?;
    let text = serde_json::to_string_pretty(m).map_err(|e| FsError::Manifest {
        path: path.display().to_string(),
        message: format!("cannot encode: {e}"),
    })?;
    crate::files::write_atomic(&path, text.as_bytes(), 0o600).map_err(io("write", &path))
}

/// Removes temporary files an interrupted run left in `dir`.
fn clean_temps(dir: &Path) -> Result<(), FsError> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(TEMP_PREFIX)
            && name.ends_with(TEMP_SUFFIX)
            && e.file_type().is_ok_and(|t| t.is_file())
        {
            std::fs::remove_file(e.path()).map_err(io("remove leftover", &e.path()))?;
        }
    }
    Ok(())
}

/// Applies a plan made by [`super::plan`] for `wants`.
pub fn apply(root: &Path, wants: &[Want], steps: &[Step]) -> Result<Report, FsError> {
    let old = read_manifest(root)?;
    let mut dirs: Vec<PathBuf> = wants
        .iter()
        .map(|w| &w.path)
        .chain(old.files.keys())
        .filter_map(|p| root.join(p).parent().map(Path::to_path_buf))
        .collect();
    dirs.push(root.join(MANIFEST).parent().map(Path::to_path_buf).unwrap_or_default());
    dirs.sort();
    dirs.dedup();
    for d in &dirs {
        clean_temps(d)?;
    }
    let record = |w: &Want| Record { sha256: sha256_hex(&w.bytes), mode: w.mode };
    let mut intent = old.clone();
    for w in wants {
        intent.files.insert(w.path.clone(), record(w));
    }
    if intent != old {
        write_manifest(root, &intent)?;
    }
    let mut report = Report::default();
    let mut touched: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
    for step in steps {
        match step.action {
            Action::Unchanged => report.unchanged.push(step.path.clone()),
            Action::Create | Action::Update => {
                let w = wants.iter().find(|w| w.path == step.path).expect("plan steps come from wants");
                let path = safe_path(root, &w.path, true)?;
                crate::files::replace_file(&path, &w.bytes, w.mode).map_err(io("write", &path))?;
                touched.extend(path.parent().map(Path::to_path_buf));
                report.changed.push(step.path.clone());
            }
            Action::Remove => {
                let path = safe_path(root, &step.path, false)?;
                match std::fs::remove_file(&path) {
                    Ok(()) => {
                        if let Some(parent) = path.parent() {
                            fs_err::File::open(parent)
                                .and_then(|d| d.sync_all())
                                .map_err(io("sync", parent))?;
                        }
                        report.removed.push(step.path.clone());
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io("remove", &path)(e)),
                }
            }
        }
    }
    // One directory fsync per directory, before the manifest says the work is done.
    for dir in &touched {
        crate::files::sync_dir(dir).map_err(io("sync", dir))?;
    }
    let final_manifest = Manifest { files: wants.iter().map(|w| (w.path.clone(), record(w))).collect() };
    if final_manifest != intent || intent != old {
        write_manifest(root, &final_manifest)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_say_what_was_left_behind() {
        let e = |action| {
            io(action, Path::new("/r/x"))(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
                .to_string()
        };
        assert!(e("write").contains("previous file is left in place"), "{}", e("write"));
        assert!(e("create directory").contains("nothing was replaced"), "{}", e("create directory"));
        assert!(!e("create directory").contains("previous file"));
        assert!(e("sync").contains("may not survive a crash"));
    }

    #[test]
    fn refuses_links_and_escapes() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("real")).unwrap();
        std::os::unix::fs::symlink(d.path().join("real"), d.path().join("link")).unwrap();
        assert!(matches!(safe_path(d.path(), "link/x", true), Err(FsError::Unsafe { .. })));
        assert!(matches!(safe_path(d.path(), "../x", true), Err(FsError::Unsafe { .. })));
        assert!(matches!(safe_path(d.path(), "/etc/x", true), Err(FsError::Unsafe { .. })));
        assert!(safe_path(d.path(), "real/new/x", true).is_ok());
        assert!(d.path().join("real/new").is_dir());
    }
}
