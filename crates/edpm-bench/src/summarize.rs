//! `edpm-bench summarize`: `run --summarize-only` over generated job events.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Writes a job_events directory of about `events` events, shaped like a real run: per task a
/// task start, then per host a runner_on_start and a result with a module-sized `res`; every
/// 50th host fails the last task; then the statistics.
pub(crate) fn generate_events(dir: &Path, events: usize) -> Result<usize, String> {
    let hosts = 1000usize;
    let tasks = events.div_ceil(hosts * 2 + 1).max(1);
    let jobs = dir.join("job_events");
    fs_err::create_dir_all(&jobs).map_err(|e| e.to_string())?;
    let mut counter = 0usize;
    let mut write = |event: &str, data: serde_json::Value| -> Result<(), String> {
        counter += 1;
        let uuid = format!("{counter:08x}-0000-4000-8000-{counter:012x}");
        let ev = serde_json::json!({"uuid": uuid, "counter": counter, "stdout": "", "start_line": counter, "end_line": counter,
            "runner_ident": "bench", "event": event, "pid": 1, "created": "2026-11-23T17:03:21.082681+00:00", "event_data": data});
        fs_err::write(jobs.join(format!("{counter}-{uuid}.json")), ev.to_string()).map_err(|e| e.to_string())
    };
    let mut failures = serde_json::Map::new();
    write(
        "playbook_on_play_start",
        serde_json::json!({"play": "deploy", "play_uuid": "p1", "play_pattern": "all"}),
    )?;
    for t in 0..tasks {
        let task = serde_json::json!({"play": "deploy", "play_uuid": "p1", "task": format!("task {t}"), "task_uuid": format!("t{t}"),
            "task_action": "ansible.builtin.command", "task_path": format!("/runner/project/site.yml:{t}")});
        write("playbook_on_task_start", task.clone())?;
        for h in 0..hosts {
            let mut d = task.clone();
            d["host"] = format!("compute-{h:04}").into();
            write("runner_on_start", d.clone())?;
            let fail = t + 1 == tasks && h % 50 == 0;
            d["res"] = serde_json::json!({"changed": true, "rc": i32::from(fail), "cmd": ["podman", "run", "--rm", "nova"],
                "stdout": "x".repeat(300), "stderr": if fail { "error: cannot pull image" } else { "" }, "msg": if fail { "non-zero return code" } else { "" },
                "invocation": {"module_args": {"_raw_params": "podman run --rm nova", "chdir": null}}});
            if fail {
                failures.insert(format!("compute-{h:04}"), 1.into());
            }
            write(if fail { "runner_on_failed" } else { "runner_on_ok" }, d)?;
        }
    }
    let all: serde_json::Map<String, serde_json::Value> =
        (0..hosts).map(|h| (format!("compute-{h:04}"), 1.into())).collect();
    write(
        "playbook_on_stats",
        serde_json::json!({"processed": all, "ok": all, "failures": failures, "dark": {}, "changed": all}),
    )?;
    fs_err::write(dir.join("rc"), "2").map_err(|e| e.to_string())?;
    fs_err::write(dir.join("status"), "failed").map_err(|e| e.to_string())?;
    Ok(counter)
}

/// `edpm-bench summarize`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Job events in the generated job_events directory (about).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    events: usize,
    /// Timed runs of `edpm-agent run --summarize-only`.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::common::count)]
    runs: usize,
}

pub(crate) fn summarize_bench(o: &Opts) -> Result<(), String> {
    let (events, runs) = (o.events, o.runs);
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("artifacts/bench");
    let n = generate_events(&dir, events)?;
    let bytes: u64 = std::fs::read_dir(dir.join("job_events"))
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!(
        "edpm-agent run --summarize-only: {n} job_events files ({:.1} MiB), 1,000 hosts; {runs} runs (page cache warm after the first)",
        bytes as f64 / 1048576.0
    );
    let r = root.path().to_str().unwrap().to_string();
    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    for _ in 0..=runs {
        let m = measure(
            Command::new(&agent)
                .args([
                    "run",
                    "--summarize-only",
                    "--",
                    "ansible-runner",
                    "run",
                    &r,
                    "-p",
                    "x.yml",
                    "-i",
                    "bench",
                ])
                .env("EDPM_AEE_TERMINATION_LOG", root.path().join("tlog")),
        )?;
        if m.status != 0 {
            return Err(format!("summarize failed with status {}", m.status));
        }
        walls.push(m.wall);
        cpus.push(m.cpu);
    }
    let first = walls.remove(0);
    cpus.remove(0);
    walls.sort();
    cpus.sort();
    println!("  first run: {}", ms(first));
    println!(
        "  cpu (user+sys, all threads): best {}  median {}; on {} cores",
        ms(cpus[0]),
        ms(cpus[cpus.len() / 2]),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "  best {}  worst {}  ({:.1} µs per event; target: under 1 s)",
        ms(walls[0]),
        ms(*walls.last().unwrap()),
        walls[0].as_secs_f64() * 1e6 / n as f64
    );
    let summary: serde_json::Value = serde_json::from_str(
        &fs_err::read_to_string(dir.join("edpm-summary.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    println!(
        "  summary: {} hosts, {} failed",
        summary["hosts"].as_object().map_or(0, |h| h.len()),
        summary["terminationMessage"]["failedHosts"]
    );
    Ok(())
}
