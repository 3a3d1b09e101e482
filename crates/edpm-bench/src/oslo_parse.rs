//! `edpm-bench oslo-parse`: `edpm-agent oslo parse` on one large file, against oslo.config's parser.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// Python side of `edpm-bench oslo-parse`: oslo.config's parser filling the `sections` dict
/// that `oslo parse` prints, timed in process (interpreter start-up and import excluded), best
/// of the runs for each file.
pub(crate) const OSLO_PARSE_PY: &str = r#"
import json, sys, time
from oslo_config import cfg
runs = int(sys.argv[1])
best = {}
for path in sys.argv[2:]:
    for _ in range(runs):
        t0 = time.perf_counter()
        sections = {}
        cfg.ConfigParser(path, sections).parse()
        t = time.perf_counter() - t0
        best[path] = min(best.get(path, t), t)
print(json.dumps(best))
"#;

/// `edpm-bench oslo-parse`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Runs on each file, of each parser (the best counts; 0 runs once).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::common::count)]
    runs: usize,
}

/// `edpm-agent oslo parse` as a whole process on single large files, the shapes that once made
/// it quadratic, against oslo.config's parser on the same files.
pub(crate) fn oslo_parse_bench(o: &Opts) -> Result<(), String> {
    let runs = o.runs.max(1);
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    if !agent.is_file() {
        return Err(format!("{} not found; build it first (cargo build --release)", agent.display()));
    }
    let python = find_tool("python3")
        .filter(|p| p.to_string_lossy().contains("venv"))
        .or_else(|| find_tool("python3"));
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let keys = |n: usize| {
        let mut t = String::from("[DEFAULT]\n");
        for i in 0..n {
            let _ = writeln!(t, "option_{i:06} = value {i}");
        }
        t
    };
    let mut sections = String::new();
    for i in 0..100_000 {
        let _ = writeln!(sections, "[section_{i:06}]\noption = value {i}");
    }
    let inputs = [
        ("10,000 keys, one section", "keys-10k.conf", keys(10_000)),
        ("40,000 keys, one section", "keys-40k.conf", keys(40_000)),
        ("100,000 sections, one key each", "sections-100k.conf", sections),
    ];
    let mut paths = Vec::new();
    for (_, file, text) in &inputs {
        let path = dir.path().join(file);
        fs_err::write(&path, text).map_err(|e| e.to_string())?;
        paths.push(path);
    }
    let theirs: serde_json::Value = match &python {
        Some(python) => {
            let script = dir.path().join("bench_oslo_parse.py");
            fs_err::write(&script, OSLO_PARSE_PY).map_err(|e| e.to_string())?;
            let out = Command::new(python)
                .arg(&script)
                .arg(runs.to_string())
                .args(&paths)
                .output()
                .map_err(|e| format!("{}: {e}", python.display()))?;
            if !out.status.success() {
                return Err(format!("python benchmark failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
            serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?
        }
        None => serde_json::Value::Null,
    };
    println!(
        "oslo parse at scale: `edpm-agent oslo parse FILE` as a whole process (output discarded), best of {runs}; \
         oslo.config's cfg.ConfigParser filling its sections dict in process (start-up excluded), best of {runs}"
    );
    let mut walls = Vec::new();
    for ((name, _, text), path) in inputs.iter().zip(&paths) {
        let mut best: Option<Measured> = None;
        for _ in 0..runs {
            let m = measure(Command::new(&agent).arg("oslo").arg("parse").arg(path))?;
            if m.status != 0 {
                return Err(format!("edpm-agent oslo parse {} exited {}", path.display(), m.status));
            }
            if best.as_ref().is_none_or(|b| m.wall < b.wall) {
                best = Some(m);
            }
        }
        let ours = best.ok_or("no run")?;
        walls.push(ours.wall);
        let peer = match theirs[path.to_string_lossy().as_ref()].as_f64() {
            Some(t) => format!(
                "; oslo.config {} ({:.1}x ours)",
                ms(Duration::from_secs_f64(t)),
                t / ours.wall.as_secs_f64()
            ),
            None => "; oslo.config not found (run scripts/setup-venv.sh)".to_string(),
        };
        println!(
            "  {name} ({:.1} MiB): edpm-agent {} ({} MiB peak){peer}",
            text.len() as f64 / 1048576.0,
            ms(ours.wall),
            ours.max_rss_kib / 1024
        );
    }
    println!(
        "  4x the keys took {:.1}x the time (linear: about 4x; quadratic: about 16x)",
        walls[1].as_secs_f64() / walls[0].as_secs_f64()
    );
    Ok(())
}
