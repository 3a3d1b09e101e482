//! The node agent's command (`edpm-agent-node`, and `edpm-agent node`). `--once` collects and
//! checks once and prints the result; otherwise it runs the loop (`agent_loop`) until SIGTERM
//! or SIGINT, reporting through the API with the kubeconfig its config file names. Either way
//! SIGTERM or SIGINT kills the `systemctl` or `podman` query in flight (with its process
//! group), so stopping never waits for one.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use edpm_core::condition::Conditions;
use edpm_core::environment::Env;
use edpm_core::node::{self, AgentConfig};
use serde_json::json;

use crate::agent_loop::{self, Clock, Intervals, SystemClock};
use crate::collect::{Collect, Host};
use crate::notify;

pub const DEFAULT_CONFIG: &str = "/etc/edpm-agent/node.yaml";

/// The node agent's command line (also `edpm-agent node`'s).
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// The agent's config file (kubeconfig, namespace, object, node, expectations).
    /// [default: /etc/edpm-agent/node.yaml; optional with --once]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Run one check, print it, and exit (for operators and Ansible); no API needed.
    #[arg(long)]
    pub once: bool,
    /// With --once: text for people, json for tools.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Check this root instead of the config's (`/` on the node).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

/// `--once`'s output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Why the node agent stopped short, by the exit code's class (edpm-agent's table:
/// docs/reference.md, "Exit codes").
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Bad usage (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The config file is malformed or unreadable (exit 3).
    #[error("{0}")]
    InvalidInput(String),
    /// The API server could not be reached or refused (exit 7).
    #[error("{0}")]
    Cluster(#[from] edpm_io::k8s::Error),
    /// Anything else (exit 1): a runtime that cannot start, an interrupted check, output.
    #[error("{0}")]
    Failure(String),
}

impl edpm_io::program::Failure for NodeError {
    /// The process exit code of this error's class.
    fn exit_code(&self) -> u8 {
        match self {
            NodeError::Usage(_) => 2,
            NodeError::InvalidInput(_) => 3,
            NodeError::Cluster(_) => 7,
            NodeError::Failure(_) => 1,
        }
    }
}

fn load(path: &Path) -> Result<AgentConfig, NodeError> {
    let text = edpm_io::files::read_bounded(path, edpm_io::files::MAX_FILE_BYTES, true).map_err(|e| {
        NodeError::InvalidInput(format!(
            "cannot read node agent config {}: {e}; the edpm_agent_node role writes it, or pass --config FILE",
            path.display()
        ))
    })?;
    node::config::parse(path, &text).map_err(|e| NodeError::InvalidInput(e.to_string()))
}

/// Runs the node agent (`--once`: one check, printed to `out`).
#[allow(
    clippy::too_many_lines,
    reason = "the agent's start-up in order: config, facts, API, then once or the loop"
)]
pub fn run(args: NodeArgs, env: &Env, out: &mut dyn Write) -> Result<(), NodeError> {
    let config_path = args
        .config
        .clone()
        .or_else(|| env.get("EDPM_AGENT_NODE_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    // One check needs no API: a missing default config means "check / with no expectations".
    let config = match (args.once, args.config.is_some() || config_path.exists()) {
        (true, false) => None,
        _ => Some(load(&config_path)?),
    };
    let root =
        args.root.clone().or_else(|| config.as_ref().map(|c| c.root.clone())).unwrap_or_else(|| "/".into());
    let expect = config.as_ref().map(|c| c.expect.clone()).unwrap_or_default();
    let host = Host::new(root.clone())
        .with_command_timeout(config.as_ref().map_or(node::config::COMMAND_TIMEOUT, |c| c.command_timeout));
    let cancel = host.cancel();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| NodeError::Failure(format!("cannot start the async runtime: {e}")))?;
    if args.once {
        let facts = rt.block_on(async {
            let stop = stop_signal();
            let check = tokio::task::spawn_blocking(move || host.collect());
            tokio::select! {
                facts = check => facts.map_err(|e| NodeError::Failure(format!("the check did not complete: {e}"))),
                signal = stop => {
                    cancel.cancel();
                    Err(NodeError::Failure(format!(
                        "interrupted by {signal}: the check was stopped and the systemctl and podman queries it ran were killed"
                    )))
                }
            }
        })?;
        let conds = Conditions::carry_times(
            node::evaluate(&facts, &expect),
            &Conditions::default(),
            SystemClock.now(),
        );
        let text = match args.format {
            Format::Json => {
                let v = json!({
                    "node": config.as_ref().map(|c| c.node.clone()),
                    "object": config.as_ref().map(|c| c.object.clone()),
                    "root": root.display().to_string(),
                    "ready": conds.iter().all(|c| c.is_true()),
                    "conditions": conds,
                });
                let mut t = serde_json::to_string_pretty(&v)
                    .map_err(|e| NodeError::Failure(format!("cannot encode the check: {e}")))?;
                t.push('\n');
                t
            }
            Format::Text => conds
                .iter()
                .map(|c| format!("{}: {} {} — {}\n", c.type_, c.status_word(), c.reason, c.message))
                .collect(),
        };
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| NodeError::Failure(format!("cannot write the check: {e}")))?;
        return Ok(());
    }
    let Some(config) = config else {
        return Err(NodeError::Usage("the node agent needs --config".into()));
    };
    let result = rt.block_on(async {
        // Installed before anything talks to the API server: a SIGTERM while the kubeconfig's
        // credential plugin runs is a shutdown, not the default death.
        let mut stop = Box::pin(stop_signal());
        let settings = edpm_io::k8s::Settings {
            namespace: Some(config.namespace.clone()),
            kubeconfig: config.kubeconfig.clone(),
            context: None,
            timeout: config.request_timeout,
            attempts: 2,
            deadline: None,
            lease_namespace: config.lease_namespace.clone(),
        };
        let client = match edpm_io::k8s::Client::connect(&settings).await {
            Ok(c) => c,
            Err(e) => {
                // kube runs the credential plugin while it builds the client, holding this
                // thread: a SIGTERM meanwhile (which also stops the plugin's runner, in the
                // unit's cgroup) is read only now. Stopping is not a failure.
                if let Ok(signal) = tokio::time::timeout(std::time::Duration::from_millis(200), &mut stop).await {
                    tracing::info!(signal, "stopped while connecting");
                    return Ok(agent_loop::Stats::default());
                }
                return Err(e);
            }
        };
        let credential = crate::api::Credential::load(&settings, config.credential_renew_percent);
        if credential.is_none() {
            tracing::info!("the kubeconfig holds no bound ServiceAccount token: the agent renews no credential");
        }
        let api = crate::api::NodeObjects {
            client: std::sync::RwLock::new(client),
            credential,
            object: config.object.clone(),
            holder: config.node.clone(),
            lease_namespace: config.lease_namespace.clone(),
        };
        let iv = Intervals {
            check: config.check_interval,
            lease: config.lease_interval,
            lease_duration: config.lease_duration,
            heartbeat: config.heartbeat,
            watchdog: notify::watchdog_interval(),
        };
        let shutdown = async move {
            let signal = stop.await;
            // The check in flight may be waiting on podman: kill it now, not at its limit.
            cancel.cancel();
            tracing::info!(signal, "stopping");
        };
        tracing::info!(object = %config.object, namespace = %config.namespace, root = %config.root.display(), "node agent starting");
        let collector: Arc<dyn Collect> = Arc::new(host);
        Ok::<_, edpm_io::k8s::Error>(
            agent_loop::run(&config.expect, &iv, collector, &api, &SystemClock, &notify::Systemd, shutdown).await,
        )
    });
    // A request still on a blocking thread (a credential plugin being run) is not waited for:
    // edpm-agent's exit reaches the plugin's runner (its parent-death signal), which kills the
    // plugin with its process group.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result?;
    Ok(())
}

/// SIGTERM or SIGINT, whichever comes first (its name). The handlers are installed when this
/// is called, not when it is first awaited: a signal that arrives while the check starts is
/// not lost. Never completes when they cannot be installed. Call within the runtime.
fn stop_signal() -> impl Future<Output = &'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let streams = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
    async move {
        match streams {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => "SIGTERM",
                    _ = int.recv() => "SIGINT",
                }
            }
            _ => std::future::pending().await,
        }
    }
}
