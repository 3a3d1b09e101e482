//! Entry points for `edpm-bench` into the pure stages it times from outside: the crate's
//! surface stays private, and the benchmark measures exactly the library's code. Shell: it
//! reads the clock.

use std::time::{Duration, Instant};

/// What `readiness` measured.
pub(crate) struct ReadinessTimes {
    pub nodes: usize,
    pub conditions: usize,
    /// Parsing the manifests and resolving the model, once.
    pub load: Duration,
    /// `readiness::evaluate` alone, per run.
    pub evaluate: Vec<Duration>,
}

/// Parses `text` (manifests), resolves the model, then times the pure evaluation `runs` times.
pub(crate) fn readiness(text: &str, runs: usize) -> Result<ReadinessTimes, String> {
    let started = Instant::now();
    let snap = edpm_core::snapshot::from_file_text("bench.yaml", text, None).map_err(|e| e.to_string())?;
    let model = edpm_core::model::resolve(&snap).map_err(|e| e.to_string())?;
    let load = started.elapsed();
    let phases = edpm_core::readiness::PhaseMap::default();
    let now = edpm_core::condition::Time::from_unix(1_795_435_200);
    let mut evaluate = Vec::with_capacity(runs);
    let mut counts = (0, 0);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let r = edpm_core::readiness::evaluate_spread(
            &snap,
            &model,
            &phases,
            edpm_core::readiness::Options::default(),
            now,
            &edpm_io::parallel::spread,
        );
        evaluate.push(t.elapsed());
        counts = (r.nodes.len(), r.nodes.iter().map(|n| n.conditions.0.len()).sum::<usize>());
        drop(r);
    }
    Ok(ReadinessTimes { nodes: counts.0, conditions: counts.1, load, evaluate })
}

/// What Nova's evidence adds to one readiness evaluation, in process: the same snapshot
/// evaluated without and with a Nova answer (the saved-answer files given, as a directory
/// source would hold them), interleaved; (without, with) per run, and the number of nodes
/// that got `NovaComputeReady`.
pub(crate) fn readiness_nova(
    text: &str,
    answer: &[(&str, &str)],
    runs: usize,
) -> Result<(Vec<Duration>, Vec<Duration>, usize), String> {
    let plain = edpm_core::snapshot::from_file_text("bench.yaml", text, None).map_err(|e| e.to_string())?;
    let mut with = plain.clone();
    for (name, json) in answer {
        with.merge(edpm_core::snapshot::from_file_text(name, json, None).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let model = edpm_core::model::resolve(&plain).map_err(|e| e.to_string())?;
    let phases = edpm_core::readiness::PhaseMap::default();
    let now = edpm_core::condition::Time::from_unix(1_795_435_200);
    let (mut a, mut b, mut judged) = (Vec::new(), Vec::new(), 0);
    for _ in 0..runs.max(1) {
        for (snap, out) in [(&plain, &mut a), (&with, &mut b)] {
            let t = Instant::now();
            let r = edpm_core::readiness::evaluate_spread(
                snap,
                &model,
                &phases,
                edpm_core::readiness::Options::default(),
                now,
                &edpm_io::parallel::spread,
            );
            out.push(t.elapsed());
            judged = r
                .nodes
                .iter()
                .filter(|n| n.conditions.get(edpm_core::condition::types::NOVA_COMPUTE).is_some())
                .count();
        }
    }
    Ok((a, b, judged))
}

/// What `node` measured: one full check (collect the facts, evaluate them) per run.
pub(crate) struct NodeCheckTimes {
    /// The first check of a fresh agent: every staged file is hashed.
    pub cold: Duration,
    /// Later checks: staged files are only stat'ed (none changed).
    pub warm: Vec<Duration>,
    pub conditions: usize,
    pub staged_files: usize,
    /// Every condition True: the check did all its work (nothing short-circuited).
    pub ready: bool,
}

/// Runs the node agent's check `runs + 1` times over the root its config (`path`, `text`)
/// names, as the agent's loop does: the same collector each time.
pub(crate) fn node_check(path: &std::path::Path, text: &str, runs: usize) -> Result<NodeCheckTimes, String> {
    use edpm_node::collect::Collect;
    let config = edpm_core::node::config::parse(path, text).map_err(|e| e.to_string())?;
    let host = edpm_node::collect::Host::new(config.root.clone());
    let check = || {
        let t = Instant::now();
        let facts = host.collect();
        let conds = edpm_core::node::evaluate(&facts, &config.expect);
        let staged = facts.staged.as_ref().map(|(n, _)| *n).unwrap_or(0);
        (t.elapsed(), conds, staged)
    };
    let (cold, conds, staged_files) = check();
    let ready = conds.iter().all(|c| c.is_true());
    let warm = (0..runs.max(1)).map(|_| check().0).collect();
    Ok(NodeCheckTimes { cold, warm, conditions: conds.len(), staged_files, ready })
}
