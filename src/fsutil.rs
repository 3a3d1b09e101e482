//! Atomic file writes: the only way this crate replaces a file.
//!
//! A temporary file is created in the target's own directory (so the rename cannot cross a
//! filesystem), written, given its mode, fsynced, renamed over the target, and the directory
//! is fsynced so the rename survives a crash. A reader sees the old file or the new one,
//! never a part.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    replace_file(path, contents, mode)?;
    sync_dir(parent(path))
}

/// [`write_atomic`] without the directory fsync, for callers that replace many files in one
/// directory and call [`sync_dir`] once afterwards: the file content is durable before the
/// rename either way, and only the renames wait for the directory sync.
pub fn replace_file(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    let mut tmp = tempfile::Builder::new().prefix(".edpm-agent.").suffix(".tmp").tempfile_in(parent(path))?;
    tmp.write_all(contents)?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Makes renames and removals in `dir` durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    fs_err::File::open(dir)?.sync_all()
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_atomically_with_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o644).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "no temporary file left behind");
    }
}
