//! `run`: the AnsibleEE job entrypoint, `edpm_runner::run` with the command line's options and,
//! when edpm-agent provides the play's inventory, this command's sources to build it from.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{AppError, Context};
use crate::cli::{RunArgs, SourceArgs};
use crate::exit::{Exit, Status};
use edpm_core::environment::Env;
use edpm_core::runner::argv::DEFAULT_RUNNER_DIR;
use edpm_core::runner::policy::Given;
use edpm_runner::{Ended, Inventory};

pub(super) fn run(
    source: &SourceArgs,
    args: RunArgs,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Status, AppError> {
    let build = |i: Inventory, secrets: &mut Vec<String>| build_inventory(source, env, &i, secrets);
    Ok(match edpm_runner::run(given(args), env, out, build)? {
        Ended::Play(code) => Status::Play(code),
        Ended::Summarized => Exit::Success.into(),
    })
}

/// The command line's options as the runner's policy takes them.
fn given(args: RunArgs) -> Given {
    Given {
        runner_dir: args.runner_dir,
        inventory_source: args.inventory_source,
        retry_failed: args.retry_failed,
        executor: args.executor,
        init: args.init,
        grace_period: args.grace_period,
        summarize_only: args.summarize_only,
        command: args.command,
    }
}

/// edpm-agent's own inventory, built now into `scratch` (mode 0600: it holds values from
/// Secrets), whose Secrets' values are added to `secrets`.
fn build_inventory(
    source: &SourceArgs,
    env: &Env,
    i: &Inventory,
    secrets: &mut Vec<String>,
) -> Result<PathBuf, AppError> {
    let (dir, scratch) = (i.runner_dir, i.scratch);
    let mut source = source.clone();
    if i.kube_only {
        source.sources = vec!["kube".into()];
    }
    let mut settings = super::resolve_settings(&source, env)?;
    if settings.ssh_key_dir == edpm_core::settings::DEFAULT_SSH_KEY_DIR
        && dir != Path::new(DEFAULT_RUNNER_DIR)
    {
        settings.ssh_key_dir = dir.join("env/ssh_key").display().to_string();
    }
    let (snap, _model, inv) = Context::new(&settings).inventory()?;
    for s in &snap.secrets {
        secrets.extend(s.body.data.values().filter_map(|v| String::from_utf8(v.clone()).ok()));
    }
    let path = scratch.join("edpm-inventory.json");
    super::output::write_file(&path, edpm_core::inventory::export::static_json(&inv).as_bytes(), 0o600)?;
    Ok(path)
}
