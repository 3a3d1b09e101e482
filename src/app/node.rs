//! `node`: the node agent, which is a program of its own (`edpm-agent-node`, the `edpm-node`
//! crate). This process hands itself over to that binary, found beside this one (`execve`:
//! the same process id, so the same signals, output and exit code as `edpm-agent-node` run
//! directly), so that `edpm-agent` links none of the node agent (ARCHITECTURE.md, "Layout").

use std::ffi::OsString;

use super::AppError;
use crate::cli::NodeArgs;
use crate::exit::Status;

/// The node agent's binary, beside this one.
const NODE_AGENT: &str = "edpm-agent-node";

/// Runs `edpm-agent-node` with `args` (and `-v` as often as given before `node`): returns only
/// when it could not be started.
pub(super) fn run(args: NodeArgs, verbose: u8) -> Result<Status, AppError> {
    let exe = std::env::current_exe().map_err(|e| {
        AppError::failure(format!("cannot find the running binary to run {NODE_AGENT} beside it: {e}"))
    })?;
    let node = exe.with_file_name(NODE_AGENT);
    let flags = std::iter::repeat_n(OsString::from("-v"), usize::from(verbose)).chain(args.args);
    let e = edpm_io::process::hand_over(&node, edpm_io::program::NODE_AGENT_AS_SUBCOMMAND, flags);
    Err(AppError::failure(format!(
        "cannot run the node agent, {}: {e}; install the edpm-agent-node package (its binary goes beside edpm-agent), or run edpm-agent-node itself",
        node.display()
    )))
}
