//! Hands this process over to another program (`execve`): the same process id, so the same
//! signals, exit code and parent; nothing of ours is left running. How `edpm-agent node` runs
//! the node agent's own binary.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// Replaces this process with `program`, started as `arg0` (what it calls itself) with `args`
/// and this process's environment; returns only when it could not, with why.
pub fn hand_over(program: &Path, arg0: &str, args: impl IntoIterator<Item = OsString>) -> std::io::Error {
    std::process::Command::new(program).arg0(arg0).args(args).exec()
}
