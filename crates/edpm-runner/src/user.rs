//! The container user the play runs as ([`user_environment`]).

use std::io::Write;
use std::path::{Path, PathBuf};

/// What the ansible-builder part of upstream's entrypoint does for a container started with
/// an arbitrary UID (OpenShift): give the UID a passwd entry (ssh refuses to run without
/// one) and point HOME at a writable directory.
pub(crate) fn user_environment(
    runner_dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let passwd_home = passwd_home(uid);
    if passwd_home.is_none() && writable(Path::new("/etc/passwd")) {
        let line = format!("{uid}:x:{uid}:0:container user {uid}:{}:/bin/bash\n", runner_dir.display());
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .open("/etc/passwd")
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
    let home = lookup("HOME").map(PathBuf::from);
    let candidates = [passwd_home, home.clone(), Some(runner_dir.to_path_buf()), Some(PathBuf::from("/tmp"))];
    match candidates.into_iter().flatten().find(|c| c != Path::new("/") && c.is_dir() && writable(c)) {
        Some(h) if Some(&h) != home.as_ref() => vec![("HOME".into(), h.display().to_string())],
        _ => Vec::new(),
    }
}

fn writable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid C string; access(2) only reads it.
    unsafe {
        libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0
            || (p.is_file() && libc::access(c.as_ptr(), libc::W_OK) == 0)
    }
}

fn passwd_home(uid: libc::uid_t) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: getpwuid_r fills `pwd` with pointers into `buf`, which outlives their use here.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found);
        if rc != 0 || found.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pwd.pw_dir);
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
    }
}
