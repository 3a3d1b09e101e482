//! Atomic file writes: the only way this crate replaces a file. And [`Texts`], the way the
//! oslo commands read a service's config files.
//!
//! A temporary file is created in the target's own directory (so the rename cannot cross a
//! filesystem), written, given its mode, fsynced, renamed over the target, and the directory
//! is fsynced so the rename survives a crash. A reader sees the old file or the new one,
//! never a part.

use std::io::{Read, Write};
use std::ops::Range;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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

/// Several files' texts read into one buffer: one allocation for all of them and no
/// per-file `stat`, which was a third of layering a node's three small files (BENCHMARKS.md).
#[derive(Debug, Default)]
pub struct Texts {
    buf: String,
    files: Vec<(PathBuf, Range<usize>)>,
}

impl Texts {
    /// Reads `paths` in order. Fails on the first file that cannot be read or is not UTF-8,
    /// naming it.
    pub fn read(paths: impl IntoIterator<Item = PathBuf>) -> std::io::Result<Texts> {
        match Texts::read_until_error(paths) {
            (texts, None) => Ok(texts),
            (_, Some(e)) => Err(e),
        }
    }

    /// Reads `paths` in order until one fails: the files before it, and that failure. For
    /// callers that must report an earlier file's own problem (say, a parse error) first, as
    /// reading and parsing file by file would.
    pub fn read_until_error(paths: impl IntoIterator<Item = PathBuf>) -> (Texts, Option<std::io::Error>) {
        let mut bytes = Vec::new();
        let mut files = Vec::new();
        let mut failure = None;
        for path in paths {
            let start = bytes.len();
            if let Err(e) = read_one(&path, &mut bytes) {
                bytes.truncate(start);
                failure = Some(e);
                break;
            }
            files.push((path, start..bytes.len()));
        }
        // Each file's bytes were checked by read_one, and valid pieces concatenate to valid UTF-8.
        match String::from_utf8(bytes) {
            Ok(buf) => (Texts { buf, files }, failure),
            Err(e) => (Texts::default(), Some(std::io::Error::new(std::io::ErrorKind::InvalidData, e))),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.files.iter().map(|(p, r)| (p.as_path(), &self.buf[r.clone()]))
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Appends the file at `path` to `buf`, checking that its own bytes are UTF-8.
fn read_one(path: &Path, bytes: &mut Vec<u8>) -> std::io::Result<()> {
    let start = bytes.len();
    let file = fs_err::File::open(path)?;
    read_all(file.file(), bytes)
        .map_err(|e| std::io::Error::new(e.kind(), format!("failed to read {}: {e}", path.display())))?;
    match std::str::from_utf8(&bytes[start..]) {
        Ok(_) => Ok(()),
        Err(e) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: not UTF-8 text ({e})", path.display()),
        )),
    }
}

/// Appends everything `file` holds to `buf` in two system calls for a small file: one read
/// into at least 8 KiB of spare capacity, one that sees the end. Reading `std::fs::File` through
/// `Take` keeps both of std's costlier paths away: `File::read_to_end` adds a `stat` and a
/// seek for its size hint, and a reader without its own `read_buf` (such as `fs_err::File`)
/// gets the spare capacity zeroed before every call.
fn read_all(file: &std::fs::File, buf: &mut Vec<u8>) -> std::io::Result<()> {
    if buf.capacity() - buf.len() < 8 * 1024 {
        buf.reserve(16 * 1024);
    }
    file.take(u64::MAX).read_to_end(buf).map(drop)
}

/// Reads many small files of one directory (ansible-runner's job events: one file per event,
/// 100,000 for a large run), where the system calls are the cost: each file is opened relative
/// to the directory, so the kernel resolves one name instead of the whole path, and read with
/// one call into a reused buffer.
pub struct DirFiles {
    dir: std::os::fd::OwnedFd,
}

impl DirFiles {
    pub fn open(path: &Path) -> std::io::Result<DirFiles> {
        let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY).open(path)?;
        Ok(DirFiles { dir: f.into() })
    }

    /// The contents of `name`, read into `buf`, a scratch buffer kept initialized between
    /// calls (so nothing is zeroed per file). With `whole`, reads until end of file; without,
    /// a read that does not fill the buffer is taken as the end of the file, which holds for
    /// local regular files: one system call for a small file (a caller whose data does not
    /// parse reads again with `whole`).
    pub fn read<'b>(
        &self,
        name: &std::ffi::OsStr,
        buf: &'b mut Vec<u8>,
        whole: bool,
    ) -> std::io::Result<&'b [u8]> {
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(name.as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a valid directory descriptor and C string; the descriptor returned is ours.
        let fd = unsafe { libc::openat(self.dir.as_raw_fd(), c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        if buf.len() < 64 * 1024 {
            buf.resize(64 * 1024, 0);
        }
        let mut len = 0;
        loop {
            let n = match file.read(&mut buf[len..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            len += n;
            if n == 0 || (!whole && len < buf.len()) {
                return Ok(&buf[..len]);
            }
            if len == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
        }
    }
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

    #[test]
    fn dir_files_read_small_and_large_files() {
        let d = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(d.path().join("small"), b"{}").unwrap();
        std::fs::write(d.path().join("big"), &big).unwrap();
        let files = DirFiles::open(d.path()).unwrap();
        let mut buf = Vec::new();
        for whole in [false, true] {
            assert_eq!(files.read("small".as_ref(), &mut buf, whole).unwrap(), b"{}");
            assert_eq!(files.read("big".as_ref(), &mut buf, whole).unwrap(), &big[..]);
            assert_eq!(
                files.read("small".as_ref(), &mut buf, whole).unwrap(),
                b"{}",
                "no leftovers of the big one"
            );
        }
        assert!(files.read("missing".as_ref(), &mut buf, false).is_err());
    }

    #[test]
    fn texts_keep_files_apart_and_name_the_bad_one() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        std::fs::write(&a, "[DEFAULT]\né = 1\n").unwrap();
        std::fs::write(&b, "").unwrap();
        std::fs::write(&c, b"x\xff").unwrap();
        let t = Texts::read([a.clone(), b.clone()]).unwrap();
        let got: Vec<_> = t.iter().map(|(p, s)| (p.to_path_buf(), s.to_string())).collect();
        assert_eq!(got, [(a.clone(), "[DEFAULT]\né = 1\n".to_string()), (b.clone(), String::new())]);
        let e = Texts::read([a, c.clone()]).unwrap_err();
        assert!(e.to_string().contains(&c.display().to_string()), "{e}");
        let e = Texts::read([d.path().join("missing")]).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
