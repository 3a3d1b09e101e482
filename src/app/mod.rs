//! The imperative shell: turns the parsed command line into settings, loads sources, runs the
//! pure stages, and writes results. Output goes to the `out` writer handed in by `main`, and
//! is produced whole before anything is written, so a failure never leaves partial output.

mod inventory_cmd;
mod mounts_cmd;
mod oslo_cmd;
mod render_cmd;
mod stage_cmd;

use std::io::Write;

use crate::cli::{Cli, Command, GlobalArgs};
use crate::exit::Exit;
use crate::inventory::{self, Inventory};
use crate::resource::Origin;
use crate::settings::{self, CliValues, Settings, SourceSpec};
use crate::source::{self, Snapshot, Source, SourceError, dir::DirSource, kube::KubeSource};

/// An error that ends the run: a one-line message and the exit code for its class.
#[derive(Debug)]
pub struct AppError {
    pub code: Exit,
    pub message: String,
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl AppError {
    pub(crate) fn new(code: Exit, message: impl std::fmt::Display) -> Self {
        // Ansible shows the script's stderr as one message; keep it one line.
        let message = message.to_string().replace('\n', " ");
        AppError { code, message }
    }
}

impl From<SourceError> for AppError {
    fn from(e: SourceError) -> Self {
        let code = match &e {
            SourceError::Unreadable { .. } | SourceError::NoManifests { .. } => Exit::SourceUnreadable,
            SourceError::Parse(_) => Exit::InvalidInput,
            SourceError::Snapshot(s) if s.is_duplicate() => Exit::Conflict,
            SourceError::Snapshot(_) => Exit::InvalidInput,
            SourceError::ClusterConfig { .. } | SourceError::Cluster { .. } => Exit::Cluster,
        };
        AppError::new(code, e)
    }
}

impl From<crate::model::ModelError> for AppError {
    fn from(e: crate::model::ModelError) -> Self {
        AppError::new(Exit::MissingReference, e)
    }
}

impl From<inventory::InventoryError> for AppError {
    fn from(e: inventory::InventoryError) -> Self {
        let code = match e.kind() {
            inventory::ErrorKind::Invalid => Exit::InvalidInput,
            inventory::ErrorKind::Missing => Exit::MissingReference,
            inventory::ErrorKind::Conflict => Exit::Conflict,
        };
        AppError::new(code, e)
    }
}

pub(crate) fn write_out(out: &mut dyn Write, text: &str) -> Result<(), AppError> {
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| {
        // The reader went away (`edpm-agent … | head`): not an error worth reporting.
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return AppError { code: Exit::Success, message: String::new() };
        }
        AppError::new(Exit::Failure, format!("cannot write output: {e}"))
    })
}

/// Runs one command. `env` is the process environment (injected so tests can pass their own).
pub fn run(cli: Cli, env: &[(String, String)], out: &mut dyn Write) -> Result<Exit, AppError> {
    // oslo commands read only the files they are given: no source settings needed.
    if let Command::Oslo(args) = cli.command {
        return oslo_cmd::run(args, out);
    }
    let settings = resolve_settings(&cli.global, env)?;
    match cli.command {
        Command::Inventory(args) => inventory_cmd::run_inventory(&settings, args, out),
        Command::Validate(args) => inventory_cmd::run_validate(&settings, args, out),
        Command::Oslo(args) => oslo_cmd::run(args, out),
        Command::Render(args) => render_cmd::run(&settings, args, out),
        Command::Derive(args) => render_cmd::derive(&settings, args, out),
        Command::Mounts(crate::cli::MountsArgs {
            action: crate::cli::MountsAction::Plan { node, root, format, templates },
        }) => stage_cmd::plan(&settings, &node, &root, format, templates.as_deref(), out),
        Command::Mounts(args) => mounts_cmd::run(&settings, args, out),
        Command::Stage(args) => stage_cmd::stage(&settings, args, out),
    }
}

fn resolve_settings(g: &GlobalArgs, env: &[(String, String)]) -> Result<Settings, AppError> {
    let lookup = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let file = match &g.config {
        Some(path) => {
            let text = fs_err::read_to_string(path)
                .map_err(|e| AppError::new(Exit::InvalidInput, format!("cannot read config file: {e}")))?;
            Some((
                path.clone(),
                settings::parse_file(path, &text).map_err(|e| AppError::new(Exit::InvalidInput, e))?,
            ))
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
        config: g.config.clone(),
    };
    settings::resolve(cli, &lookup, env, file).map_err(|e| {
        let code =
            if matches!(e, settings::SettingsError::NoSource) { Exit::Usage } else { Exit::InvalidInput };
        AppError::new(code, e)
    })
}

/// The configured sources, as trait objects: nothing after this knows which it got.
pub fn sources(s: &Settings) -> Vec<Box<dyn Source>> {
    s.sources
        .iter()
        .map(|spec| -> Box<dyn Source> {
            match spec {
                SourceSpec::Dir(path) => {
                    Box::new(DirSource { path: path.clone(), namespace: s.namespace.clone() })
                }
                SourceSpec::Kube => Box::new(kube_source(s)),
            }
        })
        .collect()
}

/// The Kubernetes client settings: for reading (a source) and for applying (derive --apply).
pub(crate) fn kube_source(s: &Settings) -> KubeSource {
    KubeSource {
        namespace: s.namespace.clone(),
        selector: s.selector.clone(),
        kubeconfig: s.kubeconfig.clone(),
        context: s.context.clone(),
        timeout: s.kube_timeout,
        attempts: 4,
    }
}

pub fn inventory_options(s: &Settings) -> inventory::Options {
    let images_origin = match &s.config_file {
        Some(p) => Origin::File { path: p.display().to_string(), line: 0 },
        None => Origin::Api { namespace: "environment".into() },
    };
    inventory::Options {
        ssh_key_dir: s.ssh_key_dir.clone(),
        images: s.images.clone(),
        images_origin,
        provenance: false,
    }
}

pub(crate) fn load(s: &Settings) -> Result<Snapshot, AppError> {
    let snap = source::load_all(&sources(s))?;
    tracing::info!(objects = snap.host_sources(), ignored = snap.ignored, "sources loaded");
    Ok(snap)
}

/// The inventory's values only: what Ansible and export need. The snapshot comes back
/// without its Roles, Nodes and NodeSets, which the model has copied: freeing them before the
/// inventory is built keeps a 10,000-host run's peak memory down (BENCHMARKS.md).
pub fn build_inventory(s: &Settings) -> Result<(Snapshot, Inventory), AppError> {
    let mut snap = load(s)?;
    let model = crate::model::resolve(&snap)?;
    drop((
        std::mem::take(&mut snap.nodes),
        std::mem::take(&mut snap.roles),
        std::mem::take(&mut snap.nodesets),
    ));
    let inv = inventory::build(&model, &snap, &inventory_options(s))?;
    Ok((snap, inv))
}

/// The inventory with every variable's provenance, for `explain`.
pub fn build_inventory_traced(s: &Settings) -> Result<Inventory, AppError> {
    let snap = load(s)?;
    let model = crate::model::resolve(&snap)?;
    let opts = inventory::Options { provenance: true, ..inventory_options(s) };
    Ok(inventory::build(&model, &snap, &opts)?)
}

/// Snapshot, model and inventory: what render and derive work from.
pub(crate) fn build_all(s: &Settings) -> Result<(Snapshot, crate::model::Model, Inventory), AppError> {
    let snap = load(s)?;
    let model = crate::model::resolve(&snap)?;
    let inv = inventory::build(&model, &snap, &inventory_options(s))?;
    Ok((snap, model, inv))
}
