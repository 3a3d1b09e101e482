//! Hostile and faulty input, class by class, through the binary: files that are not regular
//! files (links, FIFOs, devices, sockets) as outputs and as manifests, encodings, unknown
//! kinds, empty inventories, label selectors, duplicate keys in JSON, and the words errors use.
//! Filesystem cases use real links, FIFOs and devices in temporary directories.
//!
//! One file per surface, so a new case goes where its surface is: `sources` (manifests and
//! outputs), `runner` (`edpm-agent run`: its job's inputs, summaries and secrets), `node_agent`
//! (the node's facts and commands), `readiness` (the status commands' verdicts on a directory
//! source), `kube` (the API client: credentials, timeouts, partial answers), `controller`
//! (`status controller`), `scripts` (`scripts/image.sh`), `text` (control characters and secrets in every human output).

mod controller;
mod kube;
mod node_agent;
mod readiness;
mod runner;
mod scripts;
mod sources;
mod text;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Output, repo};

/// A copy of examples/nodeset (a NodeSet deployment: hosts, ConfigMaps, Secrets) to add to.
pub fn nodeset_copy(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for e in std::fs::read_dir(repo().join("examples/nodeset")).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, src.join(p.file_name().unwrap())).unwrap();
        }
    }
    src
}

/// Runs the binary, killing it (and failing) if it has not finished in 30 s: a hang must
/// fail the test, not the CI job.
pub fn run_bounded(args: &[&str]) -> Output {
    run_within(args, &[], Duration::from_secs(30)).0
}

/// Runs the binary like `util::run`, killing it (and failing) past `limit`; returns how long
/// it took.
pub fn run_within(args: &[&str], env: &[(&str, &str)], limit: Duration) -> (crate::util::Output, Duration) {
    let mut cmd = Command::new(crate::util::bin());
    cmd.args(args)
        .current_dir(repo())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in ["PATH", "HOME", "TMPDIR"] {
        if let Ok(v) = std::env::var(var) {
            cmd.env(var, v);
        }
    }
    cmd.envs(env.iter().copied());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    // Read both pipes on threads, so a chatty child never blocks on a full pipe.
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("edpm-agent {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let out = crate::util::Output {
        code: status.code().unwrap_or(-1),
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    };
    (out, took)
}

pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
}

/// A Unix socket bound at `path`; kept open by the returned listener.
pub fn socket(path: &Path) -> std::os::unix::net::UnixListener {
    std::os::unix::net::UnixListener::bind(path).unwrap()
}

/// A character device node (a copy of /dev/null's numbers) when running as root; `None` (and a
/// notice) otherwise, where the /dev/zero and /dev/full links stand in for it.
pub fn char_device(path: &Path) -> Option<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: the device-node case is covered by links to /dev/zero and /dev/full only");
        return None;
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; 1:3 is /dev/null.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    (rc == 0).then_some(())
}

/// What is at `path`, without following a link.
pub fn file_kind(path: &Path) -> &'static str {
    match std::fs::symlink_metadata(path) {
        Err(_) => "missing",
        Ok(m) if m.file_type().is_symlink() => "link",
        Ok(m) if m.file_type().is_fifo() => "fifo",
        Ok(m) if m.file_type().is_socket() => "socket",
        Ok(m) if m.file_type().is_char_device() => "char",
        Ok(m) if m.file_type().is_dir() => "dir",
        Ok(_) => "file",
    }
}
