//! `status show|explain|report|wait|crds`: readiness per node and NodeSet, computed by the pure
//! `readiness` from the snapshot (with the cluster's evidence kinds), shown, explained, written
//! to the cluster or to a directory, or waited for.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::output::{json_text, write_file, write_out};
use super::{AppError, Context};
use crate::cli::{ShowFormat, StatusAction, StatusArgs};
use crate::exit::Exit;
use edpm_core::condition::{Status, Time};
use edpm_core::environment::Env;
use edpm_core::readiness::show::Filter;
use edpm_core::readiness::{self, Options, PhaseMap, Readiness};
use edpm_core::settings::{Settings, SourceSpec};

#[allow(clippy::too_many_lines, reason = "the dispatch of the status subcommands, one arm each")]
pub(super) fn run(
    mut settings: Settings,
    args: StatusArgs,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let now = now(env)?;
    let status_dir = match &args.action {
        StatusAction::Show { status_dir, .. }
        | StatusAction::Explain { status_dir, .. }
        | StatusAction::Report { status_dir, .. }
        | StatusAction::Wait { status_dir, .. }
        | StatusAction::Plan { status_dir, .. } => status_dir.clone(),
        StatusAction::Crds {} | StatusAction::Controller { .. } | StatusAction::Identities { .. } => None,
    };
    // What report wrote last time is read back: transition times carry over from it.
    if let Some(dir) = &status_dir
        && dir.is_dir()
        && has_manifests(dir)
    {
        settings.sources.push(SourceSpec::Dir(dir.clone()));
    }
    let mut cx = Context::new(&settings);
    cx.with_evidence = true;
    cx.lease_namespace = lease_namespace(&args)?;
    let nova = NovaOpts {
        ask: !args.no_nova && settings.sources.contains(&SourceSpec::Kube),
        timeout: duration("--nova-timeout", &args.nova_timeout)?.max(Duration::from_secs(1)),
        credentials: args.nova_credentials.clone(),
        asker: std::cell::OnceCell::new(),
    };
    let nova = &nova;
    match args.action {
        StatusAction::Show { nodes, nodesets, format, .. } => {
            let r = compute(&cx, nova, false, now)?;
            let f = Filter { nodes, nodesets };
            check_selection(&r, &f)?;
            let text = match format {
                ShowFormat::Json => json_text(&readiness::show::to_json(&r, &f), true)?,
                ShowFormat::Table | ShowFormat::Wide => {
                    // Cut to fit and coloured only on a terminal; piped into a file, grep or a
                    // pager, lines are whole (`Look::of`).
                    let (terminal, columns) = super::output::stdout_terminal();
                    let look = readiness::show::Look::of(env, terminal, columns, format == ShowFormat::Wide);
                    readiness::show::table(&r, &f, look, now)
                }
            };
            write_out(out, &text)?;
            Ok(Exit::Success)
        }
        StatusAction::Explain { node, format, .. } => {
            let r = compute(&cx, nova, true, now)?;
            let is_set = r.nodesets.iter().any(|s| s.name == node) && !r.nodes.iter().any(|n| n.node == node);
            if !is_set && !r.nodes.iter().any(|x| [&x.node, &x.host, &x.host_name].contains(&&node)) {
                // Explain takes a node or a NodeSet: the nearest of either.
                let names =
                    r.nodes.iter().map(|x| x.node.as_str()).chain(r.nodesets.iter().map(|s| s.name.as_str()));
                let hint = edpm_core::model::did_you_mean(&node, names);
                return Err(AppError::not_found(format!(
                    "node, NodeSet or Role \"{}\" is not in the data plane{hint}",
                    edpm_core::excerpt::printable(&node)
                )));
            }
            if format == crate::cli::TextOrJson::Json {
                let f = if is_set {
                    Filter { nodes: vec![], nodesets: vec![node.clone()] }
                } else {
                    Filter { nodes: vec![node.clone()], nodesets: vec![] }
                };
                write_out(out, &json_text(&readiness::show::to_json(&r, &f), true)?)?;
                return Ok(Exit::Success);
            }
            // A NodeSet or Role name explains its rollup.
            if let Some(set) = r.nodesets.iter().find(|s| s.name == node).filter(|_| is_set) {
                write_out(out, &readiness::show::explain_nodeset_at(set, now))?;
                return Ok(Exit::Success);
            }
            let text: String = r
                .nodes
                .iter()
                .filter(|n| [&n.node, &n.host, &n.host_name].contains(&&node))
                .map(|n| readiness::show::explain_at(n, now))
                .collect();
            write_out(out, &text)?;
            Ok(Exit::Success)
        }
        StatusAction::Report { status_dir, timeout, .. } => {
            report(&cx, nova, status_dir.as_deref(), &timeout, now, out)
        }
        StatusAction::Wait { phase, for_condition, nodes, nodesets, timeout, interval, .. } => {
            let types = match (phase.as_deref(), for_condition.as_deref()) {
                (_, Some(c)) => condition_types(c)?,
                (Some(p), None) => phase_types(p)?,
                (None, None) => return Err(AppError::usage("status wait: give --phase or --for")),
            };
            wait(&cx, nova, types, Filter { nodes, nodesets }, &timeout, &interval, env, out)
        }
        StatusAction::Plan { nodesets, format, .. } => plan(&cx, nova, nodesets, format, now, out),
        StatusAction::Crds {} => crds(out),
        StatusAction::Identities {
            nodesets,
            server,
            certificate_authority,
            credential_lifetime,
            timeout,
            format,
            ..
        } => {
            cx.with_evidence = false;
            let flags = super::identities::Flags {
                nodesets,
                server,
                certificate_authority,
                lifetime: duration("--credential-lifetime", &credential_lifetime)?,
                timeout: duration("--timeout", &timeout)?,
                json: format == crate::cli::TextOrJson::Json,
            };
            super::identities::run(&cx, flags, out)
        }
        // Its own command (`app::run` sends it to `controller`), which shares this one's
        // checks (`lease_namespace`, `duration`).
        StatusAction::Controller { .. } => {
            Err(AppError::failure("status controller is run by app::controller, not app::status"))
        }
    }
}

/// `--lease-namespace`, checked.
pub(crate) fn lease_namespace(args: &StatusArgs) -> Result<String, AppError> {
    if !edpm_core::validate::is_dns1123_label(&args.lease_namespace) {
        return Err(AppError::usage(format!(
            "--lease-namespace {:?} is not a namespace name (lower-case letters, digits and '-', at most 63)",
            edpm_core::excerpt::printable(&args.lease_namespace)
        )));
    }
    Ok(args.lease_namespace.clone())
}

/// The clock: `EDPM_AGENT_NOW` (RFC 3339) when set, for reproducible output; else the system's.
pub(crate) fn now(env: &Env) -> Result<Time, AppError> {
    match env.get("EDPM_AGENT_NOW") {
        Some(v) => Time::parse(v).ok_or_else(|| {
            AppError::usage(format!(
                "EDPM_AGENT_NOW={v:?} is not an RFC 3339 time such as 2024-05-06T07:08:09Z"
            ))
        }),
        None => Ok(edpm_io::clock::now()),
    }
}

fn has_manifests(dir: &Path) -> bool {
    crate::source::dir::manifest_files(dir).is_ok_and(|f| !f.is_empty())
}

/// Whether and how Nova is asked (with `--source kube`), and the client, made once per run.
struct NovaOpts {
    ask: bool,
    timeout: Duration,
    /// `--nova-credentials`: the Secret to log in with instead of the cells' users.
    credentials: Option<String>,
    asker: std::cell::OnceCell<edpm_io::openstack::asker::Asker>,
}

/// `status plan`: the Deployments that would close each NodeSet's gaps, printed for review.
fn plan(
    cx: &Context,
    nova: &NovaOpts,
    nodesets: Vec<String>,
    format: crate::cli::YamlOrJson,
    now: Time,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let (snap, model, r) = compute_all(cx, nova, false, now)?;
    check_selection(&r, &Filter { nodes: vec![], nodesets: nodesets.clone() })?;
    let steps = readiness::plan::plan(&snap, &model, &r, &nodesets);
    let text = match format {
        // As the YAML: no control or bidi character raw on a terminal or in an editor.
        crate::cli::YamlOrJson::Json => {
            escape_controls(&json_text(&serde_json::json!({"steps": steps}), true)?)
        }
        crate::cli::YamlOrJson::Yaml => plan_yaml(&steps)?,
    };
    write_out(out, &text)?;
    let refused: Vec<&str> = steps.iter().filter_map(|s| s.refused.as_deref()).collect();
    for why in &refused {
        edpm_io::output::warn(why);
    }
    // A plan that leaves a gap unplanned is no plan to apply as it is.
    Ok(if refused.is_empty() { plan_exit(&steps) } else { Exit::InvalidInput })
}

/// `d` as a YAML document no terminal or editor shows other than it is: YAML when it holds no
/// control or bidi character, else its JSON (which is YAML) with each of those escaped as
/// `\uXXXX` (they can only be inside strings there).
fn planned_yaml(d: &serde_json::Value) -> Result<String, AppError> {
    let yaml = serde_saphyr::to_string(d)
        .map_err(|e| AppError::failure(format!("cannot write the planned Deployment as YAML: {e}")))?;
    if !yaml.split('\n').any(edpm_core::excerpt::has_control) {
        return Ok(yaml);
    }
    let json = serde_json::to_string_pretty(d)
        .map_err(|e| AppError::failure(format!("cannot write the planned Deployment as JSON: {e}")))?;
    let mut out = escape_controls(&json);
    out.push('\n');
    Ok(out)
}

/// JSON text `json` with each control or bidi character but the newline escaped as `\uXXXX`
/// (outside strings JSON holds none but whitespace, so they can only be inside strings, where
/// the escape reads back as the same character).
fn escape_controls(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c != '\n' && edpm_core::excerpt::has_control(c.encode_utf8(&mut [0; 4])) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `status plan`'s exit code, for scripts: 0 when there is something to apply (stdout holds
/// Deployments), 15 when only Deployments not finished cover the gaps (stdout holds no object),
/// 14 when there is nothing to do at all.
fn plan_exit(steps: &[readiness::plan::Step]) -> Exit {
    if steps.iter().any(|s| s.deployment.is_some()) {
        Exit::Success
    } else if steps.is_empty() {
        Exit::NothingToDo
    } else {
        Exit::InProgress
    }
}

/// The plan as YAML documents, each Deployment under a comment saying why; gaps a running
/// Deployment covers as comments only.
fn plan_yaml(steps: &[readiness::plan::Step]) -> Result<String, AppError> {
    if steps.is_empty() {
        return Ok(
            "# nothing to do: no node failed, is behind the target version or holds a stale input (exit 14)\n".into()
        );
    }
    let mut text = String::new();
    for s in steps {
        let nodes = edpm_core::excerpt::printable(&s.nodes.join(", ")).into_owned();
        let why = edpm_core::excerpt::printable(&s.why).into_owned();
        match (&s.in_progress, &s.deployment) {
            (Some(running), _) => text.push_str(&format!(
                "# NodeSet {}: {why}: {nodes}\n# in progress: Deployment {running} runs {} on them; not planned again\n",
                s.node_set,
                s.services.join(", ")
            )),
            (None, Some(d)) => {
                let yaml = planned_yaml(d)?;
                text.push_str(&format!("---\n# NodeSet {}: {why}: {nodes}\n{yaml}", s.node_set));
            }
            (None, None) => {
                let refused = edpm_core::excerpt::printable(s.refused.as_deref().unwrap_or("")).into_owned();
                text.push_str(&format!("# NodeSet {}: {why}: {nodes}\n# not planned: {refused}\n", s.node_set));
            }
        }
    }
    if steps.iter().all(|s| s.deployment.is_none()) {
        text.push_str(
            "# nothing to apply until the Deployments above finish: `status wait`, then plan again (exit 15)\n",
        );
    }
    Ok(text)
}

/// The snapshot (its evidence taken out), the model and the readiness.
fn compute_all(
    cx: &Context,
    nova: &NovaOpts,
    evidence: bool,
    now: Time,
) -> Result<(edpm_core::snapshot::Snapshot, edpm_core::model::Model, Readiness), AppError> {
    let mut snap = cx.snapshot()?;
    let model = edpm_core::model::resolve(&snap)?;
    let r = evaluate(cx, nova, &mut snap, &model, evidence, now)?;
    Ok((snap, model, r))
}

/// The snapshot's evidence (the status objects already there, for `report`) and the readiness.
fn compute_with(
    cx: &Context,
    nova: &NovaOpts,
    evidence: bool,
    now: Time,
) -> Result<(edpm_core::snapshot::evidence::Evidence, Readiness), AppError> {
    let mut snap = cx.snapshot()?;
    let model = edpm_core::model::resolve(&snap)?;
    let r = evaluate(cx, nova, &mut snap, &model, evidence, now)?;
    Ok((std::mem::take(&mut snap.evidence), r))
}

/// Readiness of a snapshot read and resolved: Nova asked first where it is asked.
fn evaluate(
    cx: &Context,
    nova: &NovaOpts,
    snap: &mut edpm_core::snapshot::Snapshot,
    model: &edpm_core::model::Model,
    evidence: bool,
    now: Time,
) -> Result<Readiness, AppError> {
    // Readiness of nothing would be vacuously Ready (and `wait` would return at once). A
    // NodeSet without nodes still has conditions to show.
    cx.check_not_empty(model.members().count() + model.groups.len(), &super::pipeline::Found::of(snap))?;
    // A saved Nova answer that cannot be used is bad input, not an Unknown.
    edpm_core::nova::answer::from_saved(&snap.evidence.nova_saved).map_err(AppError::invalid_input)?;
    if nova.ask {
        super::nova::ask_into(cx, &nova.asker, nova.timeout, nova.credentials.as_deref(), snap, model, now)?;
    }
    let phases = PhaseMap { overrides: cx.settings.service_phases.clone() };
    Ok(readiness::evaluate_spread(
        snap,
        model,
        &phases,
        Options { evidence },
        now,
        &edpm_io::parallel::spread,
    ))
}

fn compute(cx: &Context, nova: &NovaOpts, evidence: bool, now: Time) -> Result<Readiness, AppError> {
    compute_with(cx, nova, evidence, now).map(|(_, r)| r)
}

/// A node or NodeSet asked for by name must exist: a typo must not look like "nothing to do".
fn check_selection(r: &Readiness, f: &Filter) -> Result<(), AppError> {
    for n in &f.nodes {
        if !r.nodes.iter().any(|x| [&x.node, &x.host, &x.host_name].contains(&n)) {
            let hint = edpm_core::model::did_you_mean(n, r.nodes.iter().map(|x| x.node.as_str()));
            return Err(AppError::not_found(format!("node \"{n}\" is not in the data plane{hint}")));
        }
    }
    for s in &f.nodesets {
        if !r.nodesets.iter().any(|x| &x.name == s) {
            let hint = edpm_core::model::did_you_mean(s, r.nodesets.iter().map(|x| x.name.as_str()));
            return Err(AppError::not_found(format!(
                "NodeSet or Role \"{s}\" is not in the data plane{hint}"
            )));
        }
    }
    Ok(())
}

/// The longest duration a flag takes: a week. Longer is a typo, and an absurd one
/// (18446744073709551615 s) would overflow every clock it is added to.
const MAX_FLAG_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// `30`, `30s`, `1.5`, `0.5m`, `5m`, `1h`: seconds, or a number with s, m or h; decimals
/// are taken; at most a week.
pub(crate) fn duration(flag: &str, text: &str) -> Result<Duration, AppError> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let shown = edpm_core::excerpt::printable(text);
    let n: f64 = match num.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 && !num.is_empty() => n,
        _ => {
            return Err(AppError::usage(format!(
                "{flag} {shown:?}: give seconds, or a number with s, m or h (90, 1.5s, 10m, 1h)"
            )));
        }
    };
    let secs = match unit {
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => {
            return Err(AppError::usage(format!(
                "{flag} {shown:?}: the unit must be s, m or h (decimals are fine: 1.5s, 0.5m)"
            )));
        }
    };
    if secs > MAX_FLAG_SECONDS {
        return Err(AppError::usage(format!("{flag} {shown:?}: at most a week (168h)")));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn report(
    cx: &Context,
    nova: &NovaOpts,
    status_dir: Option<&Path>,
    timeout: &str,
    now: Time,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let deadline = duration("--timeout", timeout)?;
    // --timeout bounds the whole command: reading, asking Nova and writing.
    let started = std::time::Instant::now();
    cx.set_deadline(deadline);
    let left = || deadline.saturating_sub(started.elapsed());
    let to_cluster = cx.settings.sources.contains(&SourceSpec::Kube);
    if !to_cluster && status_dir.is_none() {
        return Err(AppError::usage(
            "status report needs --source kube (to write to the cluster) or --status-dir DIR (to write files)",
        ));
    }
    let (existing, r) = compute_with(cx, nova, false, now)?;
    if to_cluster {
        let cluster = cx.cluster()?;
        let ns = cluster.client().namespace().to_string();
        let writes = readiness::report::plan(&r, &existing, &ns);
        let outcome =
            cluster.block_on(edpm_io::k8s::status::apply(cluster.client(), writes, left(), &|| true))?;
        // Each node agent's Lease, created once: the agent may only patch it.
        let missing = readiness::report::missing_leases(&r, &existing);
        let leases = if missing.is_empty() {
            0
        } else {
            cluster.block_on(edpm_io::k8s::status::ensure_leases(cluster.client(), missing, left()))?
        };
        let lease_note =
            if leases > 0 { format!(", {leases} node agent Lease(s) created") } else { String::new() };
        let text = format!(
            "{} created, {} updated, {} unchanged ({} write requests){lease_note}\n",
            outcome.created.len(),
            outcome.updated.len(),
            outcome.unchanged,
            outcome.requests
        );
        write_out(out, &text)?;
        return Ok(Exit::Success);
    }
    let Some(dir) = status_dir else { return Err(AppError::usage("--status-dir is needed")) };
    fs_err::create_dir_all(dir).map_err(|e| AppError::failure(format!("{e}; nothing was written")))?;
    let ns = cx.settings.namespace.clone().unwrap_or_else(|| "openstack".into());
    let writes = readiness::report::plan(&r, &existing, &ns);
    let (mut written, mut unchanged) = (0, 0);
    for w in &writes {
        let path: PathBuf = dir.join(format!("{}-{}.yaml", w.kind.to_lowercase(), w.name));
        let text = serde_saphyr::to_string(&w.object)
            .map_err(|e| AppError::failure(format!("cannot encode {} {}: {e}", w.kind, w.name)))?;
        // Files are compared whole: an unchanged object keeps its file (and mtime).
        let old = edpm_io::files::read_existing(&path, edpm_io::files::MAX_FILE_BYTES);
        if old.ok().flatten().is_some_and(|(old, _)| old == text.as_bytes()) {
            unchanged += 1;
            continue;
        }
        write_file(&path, text.as_bytes(), 0o644)?;
        written += 1;
    }
    write_out(out, &format!("{written} written, {unchanged} unchanged in {}\n", dir.display()))?;
    Ok(Exit::Success)
}

/// The condition a phase names, for a node and for a NodeSet (`condition::types::TYPES`).
fn phase_types(phase: &str) -> Result<(&'static str, &'static str), AppError> {
    edpm_core::condition::types::phase_named(phase).ok_or_else(|| {
        AppError::usage(format!("--phase {phase:?}: give {}", edpm_core::condition::types::phases_said()))
    })
}

/// `--for`: the node condition and the NodeSet's rollup of it (`condition::types::TYPES`).
fn condition_types(condition: &str) -> Result<(&'static str, &'static str), AppError> {
    edpm_core::condition::types::wait_named(condition).ok_or_else(|| {
        AppError::usage(format!(
            "--for {:?}: give {} (for a phase, --phase)",
            edpm_core::excerpt::printable(condition),
            edpm_core::condition::types::wait_said()
        ))
    })
}

/// Polls until every selected node (or NodeSet) has the phase True: exit 0; a selected node
/// `Stalled` (a terminal failure no running Deployment will retry): exit 12; time out: 11.
/// Progress on stdout: on a terminal one line rewritten in place (how many nodes remain, which,
/// what they wait for); piped, a line each time it changes; at a timeout, a summary grouping
/// the nodes by what they wait for and naming the Deployment in progress on them.
#[allow(clippy::too_many_arguments, reason = "one per flag of `status wait`")]
#[allow(
    clippy::too_many_lines,
    reason = "the wait loop: its deadline, interval and exit codes share the state of the last evaluation"
)]
fn wait(
    cx: &Context,
    nova: &NovaOpts,
    (node_ty, set_ty): (&'static str, &'static str),
    f: Filter,
    timeout: &str,
    interval: &str,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let timeout = duration("--timeout", timeout)?;
    let interval = duration("--interval", interval)?.max(Duration::from_millis(100));
    let started = std::time::Instant::now();
    // Reading the cluster is bounded by the same time: a hung API server is a timeout too.
    cx.set_deadline(timeout);
    let (terminal, columns) = super::output::stdout_terminal();
    let look = readiness::show::Look::of(env, terminal, columns, false);
    let mut progress = Progress { width: look.width, last: String::new(), shown: false };
    let mut checked = false;
    loop {
        let r = match compute(cx, nova, false, now(env)?) {
            Ok(r) => r,
            Err(e) if started.elapsed() >= timeout => {
                progress.clear(out)?;
                return Err(AppError::timeout(format!(
                    "timed out after {timeout:?} before the cluster answered: {e}"
                )));
            }
            Err(e) => return Err(e),
        };
        if !checked {
            check_selection(&r, &f)?;
            checked = true;
        }
        let all = f.nodes.is_empty() && f.nodesets.is_empty();
        let picked =
            |n: &readiness::NodeView| [&n.node, &n.host, &n.host_name].iter().any(|x| f.nodes.contains(x));
        let nodes: Vec<_> = r.nodes.iter().filter(|n| all || picked(n)).collect();
        let sets: Vec<_> = r.nodesets.iter().filter(|s| f.nodesets.contains(&s.name)).collect();
        // The nodes the wait is about: those selected, and those of the NodeSets selected.
        let scope: Vec<&readiness::NodeView> =
            r.nodes.iter().filter(|n| all || picked(n) || f.nodesets.contains(&n.nodeset)).collect();
        let not_true = |n: &&readiness::NodeView| !n.conditions.get(node_ty).is_some_and(|c| c.is_true());
        let waiting_nodes: Vec<&readiness::NodeView> = nodes.iter().copied().filter(not_true).collect();
        let waiting_sets: Vec<String> = sets
            .iter()
            .filter(|s| !s.conditions.get(set_ty).is_some_and(|c| c.is_true()))
            .map(|s| s.name.clone())
            .collect();
        if waiting_nodes.is_empty() && waiting_sets.is_empty() {
            progress.clear(out)?;
            // The nodes counted: those selected, and those of the NodeSets selected.
            write_out(out, &format!("{} node(s), {} NodeSet(s): {node_ty} True\n", scope.len(), sets.len()))?;
            return Ok(Exit::Success);
        }
        let waiting: Vec<&readiness::NodeView> = scope.iter().copied().filter(not_true).collect();
        // Terminal: a waited-for node (or a node of a waited-for NodeSet) is Stalled.
        let failures: Vec<String> = scope
            .iter()
            .filter_map(|n| {
                let c = n.conditions.get(edpm_core::condition::types::STALLED)?;
                (c.status == Status::True).then(|| format!("{} ({})", n.node, c.message))
            })
            .collect();
        if !failures.is_empty() {
            progress.clear(out)?;
            return Err(AppError::terminal(format!(
                "terminal failure, not waiting any longer: {}",
                failures.join("; ")
            )));
        }
        if started.elapsed() >= timeout {
            progress.clear(out)?;
            if waiting.is_empty() {
                let what: Vec<String> = waiting_sets.iter().map(|s| format!("NodeSet {s}")).collect();
                return Err(AppError::timeout(format!(
                    "timed out after {timeout:?}: {set_ty} is not True for {}",
                    what.join(", ")
                )));
            }
            write_out(out, &readiness::wait::summary(scope.len(), &waiting, node_ty))?;
            return Err(AppError::timeout(format!(
                "timed out after {timeout:?}: {}",
                readiness::wait::summary_line(scope.len(), &waiting, node_ty)
            )));
        }
        progress.show(
            out,
            &readiness::wait::progress_line(scope.len(), &waiting, node_ty),
            started.elapsed(),
        )?;
        tracing::info!(nodes = waiting_nodes.len(), nodesets = waiting_sets.len(), "waiting");
        std::thread::sleep(
            interval.min(timeout.saturating_sub(started.elapsed())).max(Duration::from_millis(10)),
        );
    }
}

/// `status wait`'s progress on stdout: on a terminal (`width`), one line rewritten in place
/// with the time waited; piped, a line each time what it says changes.
struct Progress {
    width: Option<usize>,
    last: String,
    shown: bool,
}

impl Progress {
    fn show(&mut self, out: &mut dyn Write, line: &str, waited: Duration) -> Result<(), AppError> {
        match self.width {
            Some(width) => {
                let line = format!(
                    "[{}] {line}",
                    readiness::show::age(Time(waited.as_secs().try_into().unwrap_or(i64::MAX)), Time(0))
                );
                let cut = readiness::show::fit_visible(&line, Some(width.saturating_sub(1)));
                self.shown = true;
                write_out(out, &format!("\r\x1b[K{cut}"))
            }
            None if line != self.last => {
                self.last = line.to_string();
                write_out(out, &format!("waiting: {line}\n"))
            }
            None => Ok(()),
        }
    }

    /// The terminal's progress line erased, before what comes last.
    fn clear(&mut self, out: &mut dyn Write) -> Result<(), AppError> {
        if std::mem::take(&mut self.shown) {
            write_out(out, "\r\x1b[K")?;
        }
        Ok(())
    }
}

pub(super) fn crds(out: &mut dyn Write) -> Result<Exit, AppError> {
    let mut text = String::new();
    for crd in readiness::api::crds() {
        text.push_str("---\n");
        text.push_str(&serde_saphyr::to_string(&crd).map_err(AppError::failure)?);
    }
    write_out(out, &text)?;
    Ok(Exit::Success)
}
