//! Entry points for `edpm-bench` into the pure stages it times from outside: the crate's
//! surface stays private, and the benchmark measures exactly the library's code. Shell: it
//! reads the clock.

use std::time::{Duration, Instant};

/// What `readiness` measured.
pub struct ReadinessTimes {
    pub nodes: usize,
    pub conditions: usize,
    /// Parsing the manifests and resolving the model, once.
    pub load: Duration,
    /// `readiness::evaluate` alone, per run.
    pub evaluate: Vec<Duration>,
}

/// Parses `text` (manifests), resolves the model, then times the pure evaluation `runs` times.
pub fn readiness(text: &str, runs: usize) -> Result<ReadinessTimes, String> {
    let started = Instant::now();
    let snap = crate::snapshot::from_file_text("bench.yaml", text, None).map_err(|e| e.to_string())?;
    let model = crate::model::resolve(&snap).map_err(|e| e.to_string())?;
    let load = started.elapsed();
    let phases = crate::readiness::PhaseMap::default();
    let now = crate::condition::Time::from_unix(1_795_435_200);
    let mut evaluate = Vec::with_capacity(runs);
    let mut counts = (0, 0);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let r = crate::readiness::evaluate(&snap, &model, &phases, crate::readiness::Options::default(), now);
        evaluate.push(t.elapsed());
        counts = (r.nodes.len(), r.nodes.iter().map(|n| n.conditions.0.len()).sum::<usize>());
        drop(r);
    }
    Ok(ReadinessTimes { nodes: counts.0, conditions: counts.1, load, evaluate })
}
