//! The commands: each turns its part of the parsed command line into settings and calls what
//! does the work (the shared pipeline, `pipeline`, for the commands that read the data plane;
//! the controller's and the runner's crates; the node agent's binary), then writes the results
//! (`output`). One file per command, named after it; module errors become exit codes in one
//! place (`errors`). Output is produced whole before anything is written, so a failure never
//! leaves partial output.

mod controller;
mod derive;
mod errors;
mod identities;
mod inventory;
mod mounts;
mod node;
mod nova;
mod oslo;
pub(crate) mod output;
pub(crate) mod pipeline;
mod render;
mod run;
mod stage;
pub(crate) mod status;
mod validate;

use std::io::Write;

use crate::cli::{Cli, Command, SourceArgs, StatusAction, StatusArgs};
use crate::exit::{Exit, Status};
use edpm_core::settings::{self, CliValues, Settings};

pub use edpm_core::environment::Env;
pub use errors::AppError;
use pipeline::Context;

/// Runs one command. `env` is the process environment (injected so tests can pass their own).
pub fn run(cli: Cli, env: &Env, out: &mut dyn Write) -> Result<Status, AppError> {
    // oslo commands read only the files they are given: no source settings needed.
    if let Command::Oslo(args) = cli.command {
        return oslo::run(args, out).map(Into::into);
    }
    // `run` resolves the source settings itself, only when it builds its own inventory.
    if let Command::Run(args) = cli.command {
        return run::run(&cli.source, args, env, out);
    }
    if let Command::Node(args) = cli.command {
        return node::run(args, cli.verbose);
    }
    if let Command::Status(StatusArgs { action: StatusAction::Crds {}, .. }) = cli.command {
        return status::crds(out).map(Into::into);
    }
    // The controller: its own crate, its own checks of the source settings.
    if let Command::Status(args @ StatusArgs { action: StatusAction::Controller { .. }, .. }) = cli.command {
        return controller::run(&cli.source, args, env, out);
    }
    let settings = resolve_settings(&cli.source, env)?;
    let mut cx = Context::new(&settings);
    // As Ansible's inventory script: stderr stays empty on success, so warnings go to the log.
    cx.script = matches!(&cli.command, Command::Inventory(a) if a.action.is_none());
    match cli.command {
        Command::Inventory(args) => inventory::run(&cx, args, out),
        Command::Validate(args) => validate::run(&cx, args, out),
        Command::Oslo(args) => oslo::run(args, out),
        Command::Node(args) => return node::run(args, cli.verbose),
        Command::Render(args) => render::run(&cx, args, out),
        Command::Derive(args) => derive::run(&cx, args, out),
        Command::Mounts(args) => mounts::run(&cx, args, out),
        Command::Stage(args) => stage::run(&cx, args, out),
        Command::Status(args) => status::run(settings.clone(), args, env, out),
        Command::Run(args) => return run::run(&cli.source, args, env, out),
    }
    .map(Into::into)
}

pub(crate) fn resolve_settings(g: &SourceArgs, env: &Env) -> Result<Settings, AppError> {
    let config = g.config.clone().or_else(|| env.get("EDPM_AGENT_CONFIG").map(Into::into));
    let file = match &config {
        Some(path) => {
            let text = output::read_text(path, "config file", Exit::InvalidInput)?;
            Some((path.clone(), settings::parse_file(path, &text).map_err(AppError::invalid_input)?))
        }
        None => None,
    };
    let cli = CliValues {
        sources: g.sources.clone(),
        namespace: g.namespace.clone(),
        selector: g.selector.clone(),
        kubeconfig: g.kubeconfig.clone(),
        context: g.context.clone(),
        ssh_key_dir: g.ssh_key_dir.clone(),
        allow_empty: g.allow_empty,
    };
    Ok(settings::resolve(cli, env, file)?)
}
