//! Atomic file writes: the only way this crate replaces a file. And [`Texts`], the way the
//! oslo commands read a service's config files.
//!
//! A temporary file is created in the target's own directory (so the rename cannot cross a
//! filesystem), written, given its mode, fsynced, renamed over the target, and the directory
//! is fsynced so the rename survives a crash. A reader sees the old file or the new one,
//! never a part.
#![allow(
    clippy::disallowed_methods,
    reason = "the one module that reads inputs bounded and replaces files atomically"
)]

use std::io::{Read, Write};
use std::ops::Range;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    replace_file(path, contents, mode)?;
    sync_dir(parent(path))
}

/// Refuses a `path` that exists and is not a regular file: a rename would replace the link,
/// FIFO, device or socket itself (as root, `-o /dev/full` replaced the device node), which is
/// never what someone who named it meant. The error says what it is; the kind is
/// `AlreadyExists` so callers can tell it from a failed write.
pub fn check_replaceable(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) => {
            let what = match std::fs::read_link(path) {
                Ok(target) => format!("a symbolic link to {}", target.display()),
                Err(_) => kind_of(&m.file_type()).to_string(),
            };
            Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("it exists and is {what}, not a regular file, and edpm-agent never replaces one"),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// What a file that is not a regular file is, in words.
pub fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a regular file"
    }
}

/// The most one input file may hold: far above any manifest or config file (a must-gather
/// of a 50,000-node data plane is about 20 MiB), far below what would exhaust memory (a link
/// to `/dev/zero` once grew the process to 23 GB). Documented in docs/reference.md.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Why [`read_bounded`] gave no text.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a regular file after following links (a FIFO would block, a device never end).
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than the cap (checked on the size and again while reading: a file may grow).
    #[error("it is larger than the {} MiB cap on one file", .0 >> 20)]
    TooLarge(u64),
    /// Not UTF-8: what was found and where.
    #[error("it is not UTF-8 text: {0}")]
    NotUtf8(String),
}

/// Reads the file at `path` as UTF-8 text, at most `cap` bytes. Only a regular file (after
/// following links) unless `streams` (FIFOs and character devices, for a path named on the
/// command line such as `<(…)`), which are then read up to the cap. The file is opened
/// non-blocking and checked on its descriptor, so a FIFO without a writer never hangs the
/// reader and a file swapped between check and read is still the one checked.
pub fn read_bounded(path: &Path, cap: u64, streams: bool) -> Result<String, ReadError> {
    // Checked before opening too: opening a socket fails with a baffling "No such device or
    // address", and opening some devices has side effects.
    check_readable(&std::fs::metadata(path)?.file_type(), streams)?;
    read_opened(path, cap, streams)
}

/// Whether a file of type `t` may be read: a regular file, or with `streams` a FIFO or
/// character device.
pub fn check_readable(t: &std::fs::FileType, streams: bool) -> Result<(), ReadError> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() || (streams && (t.is_fifo() || t.is_char_device())) {
        Ok(())
    } else {
        Err(ReadError::NotRegular(kind_of(t)))
    }
}

/// Whether `path` is a regular file (after following links) that can be opened for reading,
/// without reading it: opened non-blocking and checked on the descriptor, so a FIFO in its
/// place is named, never waited on.
pub fn check_regular_readable(path: &Path) -> Result<(), ReadError> {
    check_readable(&std::fs::metadata(path)?.file_type(), false)?;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    check_readable(&file.metadata()?.file_type(), false)
}

/// [`read_bounded`] for a caller that has already checked the path's type with
/// [`check_readable`] (the directory source, which refuses every non-regular file before it
/// reads any): opened non-blocking unless `streams`, checked again on the descriptor.
pub fn read_opened(path: &Path, cap: u64, streams: bool) -> Result<String, ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(if streams { 0 } else { libc::O_NONBLOCK })
        .open(path)?;
    let meta = file.metadata()?;
    // Again on the descriptor: the path may have been swapped since.
    check_readable(&meta.file_type(), streams)?;
    let bytes = read_capped(&file, meta.len(), cap)?;
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8(describe_encoding(e.as_bytes(), e.utf8_error())))
}

/// At most `cap` bytes of an open file whose size was `len` when checked: the size is checked
/// first (nothing read past the cap), and the read stops one byte past it (a file may grow).
fn read_capped(file: &std::fs::File, len: u64, cap: u64) -> Result<Vec<u8>, ReadError> {
    if len > cap {
        return Err(ReadError::TooLarge(cap));
    }
    let mut bytes = Vec::with_capacity(len as usize + 1);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge(cap));
    }
    Ok(bytes)
}

/// The bytes and permission bits of a file about to be compared with what would replace it;
/// `Ok(None)` when nothing is there. Opened without following a final link and non-blocking,
/// and checked on the descriptor: a link, FIFO, device or socket in its place is an error
/// naming it (kind `AlreadyExists`, as from [`check_replaceable`]), never read, so a FIFO
/// cannot hang `stage`, `render --check` or `mounts plan`, nor a device feed them without end.
pub fn read_existing(path: &Path, cap: u64) -> std::io::Result<Option<(Vec<u8>, u32)>> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // ELOOP: the final component is a symbolic link.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return check_replaceable(path).map(|()| None),
        // A socket cannot be opened at all ("No such device or address"): say what it is.
        Err(e) => {
            return match std::fs::symlink_metadata(path) {
                Ok(m) if !m.file_type().is_file() => check_replaceable(path).map(|()| None),
                _ => Err(e),
            };
        }
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("it exists and is {}, not a regular file", kind_of(&meta.file_type())),
        ));
    }
    let bytes = read_capped(&file, meta.len(), cap).map_err(|e| match e {
        ReadError::Io(e) => e,
        other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
    })?;
    Ok(Some((bytes, meta.permissions().mode() & 0o7777)))
}

/// Says which encoding `bytes` seem to be in and where the first byte that is not UTF-8 is,
/// by line and byte offset: enough to find it in an editor and to pick `iconv`'s arguments.
pub fn describe_encoding(bytes: &[u8], e: std::str::Utf8Error) -> String {
    let at = e.valid_up_to();
    let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let bom = |b: &[u8]| bytes.starts_with(b);
    let found = if bom(&[0xFF, 0xFE, 0, 0]) || bom(&[0, 0, 0xFE, 0xFF]) {
        "it looks like UTF-32 (it starts with a UTF-32 byte-order mark)".to_string()
    } else if bom(&[0xFF, 0xFE]) || bom(&[0xFE, 0xFF]) {
        "it looks like UTF-16 (it starts with a UTF-16 byte-order mark)".to_string()
    } else if bytes.iter().take(4096).any(|&b| b == 0) {
        "it looks like UTF-16 or binary data (it holds NUL bytes)".to_string()
    } else {
        format!(
            "it looks like Latin-1 or Windows-1252 (byte 0x{:02X} does not start a UTF-8 character)",
            bytes[at]
        )
    };
    format!(
        "{found}; the first byte that is not UTF-8 is at line {line}, byte {at}; convert the file to UTF-8 (e.g. with `iconv -t UTF-8`)"
    )
}

/// [`write_atomic`] without the directory fsync, for callers that replace many files in one
/// directory and call [`sync_dir`] once afterwards: the file content is durable before the
/// rename either way, and only the renames wait for the directory sync.
pub fn replace_file(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    check_replaceable(path)?;
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
    if (bytes.len() - start) as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {}", path.display(), ReadError::TooLarge(MAX_FILE_BYTES)),
        ));
    }
    match std::str::from_utf8(&bytes[start..]) {
        Ok(_) => Ok(()),
        Err(e) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: not UTF-8 text: {}", path.display(), describe_encoding(&bytes[start..], e)),
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
    // One byte past the cap tells a file at the cap from a larger one (or an endless device).
    file.take(MAX_FILE_BYTES + 1).read_to_end(buf).map(drop)
}

/// Reads many small files of one directory (ansible-runner's job events: one file per event,
/// 100,000 for a large run), where the system calls are the cost: each file is opened relative
/// to the directory, so the kernel resolves one name instead of the whole path, and read with
/// one call into a reused buffer.
///
/// As every input: only a regular file is read (opened non-blocking and checked on the
/// descriptor, so a FIFO is refused, never waited on, and a link to `/dev/zero` never read),
/// and at most `cap` bytes of it.
pub struct DirFiles {
    dir: std::os::fd::OwnedFd,
    cap: u64,
}

impl DirFiles {
    pub fn open(path: &Path, cap: u64) -> std::io::Result<DirFiles> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK)
            .open(path)?;
        Ok(DirFiles { dir: f.into(), cap })
    }

    /// The contents of `name`, read into `buf`, a scratch buffer kept initialized between
    /// calls (so nothing is zeroed per file). With `whole`, reads until end of file; without,
    /// a read that does not fill the buffer is taken as the end of the file, which holds for
    /// local regular files: one system call for a small file (a caller whose data does not
    /// parse reads again with `whole`). A file that is not regular, or larger than the cap,
    /// is an error that says so.
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
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        let invalid = |e: ReadError| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string());
        // On the descriptor: whatever the name pointed to when it was opened.
        check_readable(&file.metadata()?.file_type(), false).map_err(invalid)?;
        if buf.len() < 64 * 1024 {
            buf.resize(64 * 1024, 0);
        }
        // One byte past the cap tells a file at the cap from a larger one (or one that grows).
        let limit = usize::try_from(self.cap.saturating_add(1)).unwrap_or(usize::MAX);
        let mut file = file.take(self.cap.saturating_add(1));
        let mut len = 0;
        loop {
            let n = match file.read(&mut buf[len..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            len += n;
            if len >= limit {
                return Err(invalid(ReadError::TooLarge(self.cap)));
            }
            if n == 0 || (!whole && len < buf.len()) {
                return Ok(&buf[..len]);
            }
            if len == buf.len() {
                buf.resize(buf.len().saturating_mul(2).min(limit.max(buf.len() + 1)), 0);
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
    fn existing_files_are_read_only_when_regular() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        assert_eq!(read_existing(&f, 10).unwrap().map(|(b, _)| b), Some(b"x".to_vec()));
        assert!(read_existing(&d.path().join("none"), 10).unwrap().is_none());
        let fifo = d.path().join("p");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_existing(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        std::os::unix::fs::symlink("/dev/zero", d.path().join("z")).unwrap();
        let e = read_existing(&d.path().join("z"), 10).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        std::fs::write(&f, b"0123456789ab").unwrap();
        assert!(read_existing(&f, 10).is_err(), "past the cap");
    }

    #[test]
    fn dir_files_read_small_and_large_files() {
        let d = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(d.path().join("small"), b"{}").unwrap();
        std::fs::write(d.path().join("big"), &big).unwrap();
        let files = DirFiles::open(d.path(), MAX_FILE_BYTES).unwrap();
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
    fn dir_files_refuse_what_is_not_a_regular_file_and_stop_at_the_cap() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("1-fifo.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", d.path().join("2-zero.json")).unwrap();
        std::fs::write(d.path().join("3-big.json"), vec![b'x'; 300_000]).unwrap();
        std::fs::write(d.path().join("4-at-cap.json"), vec![b'y'; 100_000]).unwrap();
        let files = DirFiles::open(d.path(), 100_000).unwrap();
        let mut buf = Vec::new();
        for whole in [false, true] {
            // Neither waited on nor read without end: the test would hang or run out of memory.
            let e = files.read("1-fifo.json".as_ref(), &mut buf, whole).unwrap_err();
            assert!(e.to_string().contains("FIFO"), "{e}");
            let e = files.read("2-zero.json".as_ref(), &mut buf, whole).unwrap_err();
            assert!(e.to_string().contains("character device"), "{e}");
            let e = files.read("3-big.json".as_ref(), &mut buf, whole).unwrap_err();
            assert!(e.to_string().contains("larger than"), "{e}");
        }
        assert_eq!(files.read("4-at-cap.json".as_ref(), &mut buf, true).unwrap().len(), 100_000);
        assert!(buf.len() <= 100_001 + 64 * 1024, "the buffer grew past the cap: {}", buf.len());
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
