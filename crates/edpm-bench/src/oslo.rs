//! `edpm-bench oslo`: reading and layering config files, against oslo.config.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// Python side of the oslo benchmark: oslo.config's own parser (cfg.ConfigParser, as
/// ConfigOpts uses it) on every file, then the layered value of every option with oslo's
/// rule (newest file first, last occurrence; multi: all, oldest first), and separately a full
/// ConfigOpts run with --config-dir for a sample of nodes.
pub(crate) const OSLO_PY: &str = r#"
import json, os, sys, time
from oslo_config import cfg
root, sample = sys.argv[1], int(sys.argv[2])
nodes = sorted(os.listdir(root))
t0 = time.perf_counter()
count = 0
for n in nodes:
    d = os.path.join(root, n)
    parsed = []
    for f in sorted(os.listdir(d)):
        sections, normalized = {}, {}
        p = cfg.ConfigParser(os.path.join(d, f), sections)
        p._add_normalized(normalized)
        p.parse()
        parsed.insert(0, normalized)
    keys = {(g, k) for s in parsed for g, kv in s.items() for k in kv}
    for g, k in keys:
        single = next(s[g][k][-1] for s in parsed if g in s and k in s[g])
        multi = [v for s in reversed(parsed) if g in s and k in s[g] for v in s[g][k]]
        count += 1
t1 = time.perf_counter()
for n in nodes[:sample]:
    conf = cfg.ConfigOpts()
    conf(args=["--config-dir", os.path.join(root, n)], project="bench", default_config_files=[], default_config_dirs=[])
t2 = time.perf_counter()
print(json.dumps({"parse_layer": t1 - t0, "options": count, "configopts_sample": t2 - t1}))
"#;

/// `edpm-bench oslo`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Nodes whose nova config files are rendered, then read and layered.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    nodes: usize,
    /// Runs of each side, ours and oslo.config's.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = crate::common::count)]
    runs: usize,
}

pub(crate) fn oslo_bench(o: &Opts) -> Result<(), String> {
    use edpm_core::oslo;
    let (nodes, runs) = (o.nodes, o.runs);
    let python = find_tool("python3")
        .filter(|p| p.to_string_lossy().contains("venv"))
        .or_else(|| find_tool("python3"));
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let templates = edpm_core::render::Templates::embedded();
    // Render: 01-nova.conf and 02-nova-host-specific.conf per node, as `render` does.
    let render_start = Instant::now();
    let mut bytes = 0;
    for i in 0..nodes {
        let ctx = serde_json::json!({
            "node": {"name": format!("compute-{i}"), "inventory_hostname": format!("compute-{i}"), "services": ["nova"]},
            "vars": {"ctlplane_ip": format!("10.0.{}.{}", i / 250, i % 250), "canonical_hostname": format!("compute-{i}.example.com")},
            "service": "nova",
            "cell": {"name": "nova-cell1", "cell_name": "cell1", "transport_url": "rabbit://u:p@rabbit:5672/?ssl=0",
                     "notification_transport_url": null, "quorum_queues": true, "keystone_internal_url": "https://keystone:5000",
                     "region": "regionOne", "service_user": "nova", "service_password": "pw",
                     "application_credential_id": null, "application_credential_secret": null, "novncproxy_base_url": null},
        });
        let node_dir = dir.path().join(format!("compute-{i:05}"));
        fs_err::create_dir(&node_dir).map_err(|e| e.to_string())?;
        for (t, f) in [
            ("nova/01-nova.conf.j2", "01-nova.conf"),
            ("nova/02-nova-host-specific.conf.j2", "02-nova-host-specific.conf"),
        ] {
            let text = edpm_core::render::normalize_sections(&templates.render(t, &ctx)?);
            bytes += text.len();
            fs_err::write(node_dir.join(f), text).map_err(|e| e.to_string())?;
        }
        let custom = format!(
            "[DEFAULT]\ncpu_allocation_ratio = {}.0\nreserved_host_memory_mb = 4096\n\n[libvirt]\nimages_type = rbd\ncpu_mode = custom\ncpu_models = Cascadelake-Server\n",
            i % 16 + 1
        );
        bytes += custom.len();
        fs_err::write(node_dir.join("25-nova-extra.conf"), custom).map_err(|e| e.to_string())?;
    }
    let render_time = render_start.elapsed();
    println!(
        "oslo.config engine: {nodes} nodes x 3 files (01-nova.conf, 02-nova-host-specific.conf, 25-nova-extra.conf), {:.1} MiB",
        bytes as f64 / 1048576.0
    );
    println!("  render (minijinja, 2 templates per node, incl. writing): {}", ms(render_time));
    let mut entries: Vec<_> = std::fs::read_dir(dir.path())
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    entries.sort();
    // What `oslo get --config-dir` does to read a node's files.
    let read_node = |node_dir: &Path| -> Result<edpm_io::files::Texts, String> {
        let names: Vec<String> = std::fs::read_dir(node_dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        let files = oslo::layer::config_dir_files(&names).into_iter().map(|n| node_dir.join(n));
        edpm_io::files::Texts::read(files).map_err(|e| e.to_string())
    };
    // One node: list its directory, parse every *.conf, and look every option up both ways.
    let layer_node = |node_dir: &Path| -> Result<usize, String> {
        let texts = read_node(node_dir)?;
        let mut layers = Vec::new();
        for (path, text) in texts.iter() {
            let config = oslo::parse(text).map_err(|e| e.to_string())?;
            layers.push(oslo::layer::Layer { file: path.display().to_string(), config });
        }
        let layers = oslo::layer::Layers::new(layers);
        let mut count = 0;
        for (g, k) in layers.options_iter() {
            std::hint::black_box(layers.get(g, k));
            for f in layers.get_multi(g, k) {
                std::hint::black_box(f);
            }
            count += 1;
        }
        Ok(count)
    };
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let run_parallel = || -> Result<(), String> {
        std::thread::scope(|scope| -> Result<(), String> {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let (entries, layer_node) = (&entries, &layer_node);
                    scope.spawn(move || {
                        entries.iter().skip(w).step_by(workers).try_for_each(|d| layer_node(d).map(drop))
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "worker panicked".to_string())??;
            }
            Ok(())
        })
    };
    let script_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let script = script_dir.path().join("bench_oslo.py");
    fs_err::write(&script, OSLO_PY).map_err(|e| e.to_string())?;
    let sample = nodes.min(100);
    let run_python = |python: &Path| -> Result<serde_json::Value, String> {
        let out = Command::new(python)
            .arg(&script)
            .arg(dir.path())
            .arg(sample.to_string())
            .output()
            .map_err(|e| format!("{}: {e}", python.display()))?;
        if !out.status.success() {
            return Err(format!("python benchmark failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
    };
    // Rounds interleave both sides, so a slow moment of this shared machine hits both; each
    // side's best is reported, and the median of the rounds' own ratios next to it.
    let (mut best_read, mut best, mut best_parallel) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let (mut py, mut co) = (Duration::MAX, Duration::MAX);
    let mut options = 0;
    let mut py_options = serde_json::Value::Null;
    let mut round_ratios = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        for node_dir in &entries {
            std::hint::black_box(read_node(node_dir)?.len());
        }
        best_read = best_read.min(start.elapsed());
        let start = Instant::now();
        options = 0;
        for node_dir in &entries {
            options += layer_node(node_dir)?;
        }
        let ours = start.elapsed();
        best = best.min(ours);
        let start = Instant::now();
        run_parallel()?;
        best_parallel = best_parallel.min(start.elapsed());
        if let Some(python) = &python {
            let v = run_python(python)?;
            let theirs = Duration::from_secs_f64(v["parse_layer"].as_f64().unwrap_or(0.0));
            py = py.min(theirs);
            co = co.min(Duration::from_secs_f64(v["configopts_sample"].as_f64().unwrap_or(0.0)));
            py_options = v["options"].clone();
            round_ratios.push(theirs.as_secs_f64() / ours.as_secs_f64());
        }
    }
    println!(
        "  edpm-agent parse + layer (every option, single and multi): {} (best of {runs}), {options} options",
        ms(best)
    );
    println!("    of which listing and reading the files: {} (best of {runs})", ms(best_read));
    println!("  edpm-agent on {workers} cores: {} (best of {runs})", ms(best_parallel));
    if python.is_none() {
        println!("  python3 with oslo.config not found (run scripts/setup-venv.sh); no comparison");
        return Ok(());
    }
    round_ratios.sort_by(f64::total_cmp);
    println!(
        "  oslo.config (Python) parse + layer, same files and options: {} (best of {runs}, {} options)",
        ms(py),
        py_options
    );
    println!(
        "  ratio, single-threaded: edpm-agent is {:.1}x faster (best against best; median of the rounds' own ratios {:.1}x)",
        py.as_secs_f64() / best.as_secs_f64(),
        round_ratios[round_ratios.len() / 2]
    );
    println!(
        "  ratio on {workers} cores: {:.1}x (Python's parser cannot use a second core)",
        py.as_secs_f64() / best_parallel.as_secs_f64()
    );
    println!(
        "  for reference, oslo.config ConfigOpts(--config-dir) start-up, {sample} nodes: {} ({:.2} ms per node)",
        ms(co),
        co.as_secs_f64() * 1e3 / sample as f64
    );
    Ok(())
}
