//! `node`: the node agent. `--once` collects and checks once and prints the result; otherwise
//! it runs the loop (`node::shell::agent_loop`) until SIGTERM or SIGINT, reporting through the API with
//! the kubeconfig its config file names. Either way SIGTERM or SIGINT kills the `systemctl` or
//! `podman` query in flight (with its process group), so stopping never waits for one.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::AppError;
use super::output::{json_text, write_out};
use crate::condition::Conditions;
use crate::environment::Env;
use crate::node::shell::agent_loop::{self, Clock, Intervals, SystemClock};
use crate::node::shell::collect::{Collect, Host};
use crate::node::shell::notify;
use crate::node::{self, AgentConfig};
use crate::shell::cli::{NodeArgs, TextOrJson};
use crate::shell::exit::Exit;

pub(crate) const DEFAULT_CONFIG: &str = "/etc/edpm-agent/node.yaml";

fn load(path: &Path) -> Result<AgentConfig, AppError> {
    let text = super::output::read_text(path, "node agent config", Exit::InvalidInput)
        .map_err(|e| e.with_hint("the edpm_agent_node role writes it, or pass --config FILE"))?;
    node::config::parse(path, &text).map_err(AppError::invalid_input)
}

pub(super) fn run(args: NodeArgs, env: &Env, out: &mut dyn Write) -> Result<Exit, AppError> {
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
        .map_err(|e| AppError::failure(format!("cannot start the async runtime: {e}")))?;
    if args.once {
        let facts = rt.block_on(async {
            let stop = stop_signal();
            let check = tokio::task::spawn_blocking(move || host.collect());
            tokio::select! {
                facts = check => facts.map_err(|e| AppError::failure(format!("the check did not complete: {e}"))),
                signal = stop => {
                    cancel.cancel();
                    Err(AppError::failure(format!(
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
            TextOrJson::Json => json_text(
                &json!({
                    "node": config.as_ref().map(|c| c.node.clone()),
                    "object": config.as_ref().map(|c| c.object.clone()),
                    "root": root.display().to_string(),
                    "ready": conds.iter().all(|c| c.is_true()),
                    "conditions": conds,
                }),
                true,
            )?,
            TextOrJson::Text => conds
                .iter()
                .map(|c| format!("{}: {} {} — {}\n", c.type_, c.status_word(), c.reason, c.message))
                .collect(),
        };
        write_out(out, &text)?;
        return Ok(Exit::Success);
    }
    let Some(config) = config else {
        return Err(AppError::usage("the node agent needs --config"));
    };
    let result = rt.block_on(async {
        // Installed before anything talks to the API server: a SIGTERM while the kubeconfig's
        // credential plugin runs is a shutdown, not the default death.
        let mut stop = Box::pin(stop_signal());
        let settings = crate::shell::k8s::Settings {
            namespace: Some(config.namespace.clone()),
            kubeconfig: config.kubeconfig.clone(),
            context: None,
            timeout: config.request_timeout,
            attempts: 2,
            deadline: None,
            lease_namespace: config.lease_namespace.clone(),
        };
        let client = match crate::shell::k8s::Client::connect(&settings).await {
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
        let api = crate::shell::k8s::node_agent::NodeObjects {
            client,
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
        Ok::<_, crate::shell::k8s::Error>(
            agent_loop::run(&config.expect, &iv, collector, &api, &SystemClock, &notify::Systemd, shutdown).await,
        )
    });
    // A request still on a blocking thread (a credential plugin being run) is not waited for:
    // edpm-agent's exit reaches the plugin's runner (its parent-death signal), which kills the
    // plugin with its process group.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result?;
    Ok(Exit::Success)
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
