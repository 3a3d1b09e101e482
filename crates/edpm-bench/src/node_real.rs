//! `edpm-bench node --real`: one check against a real systemd and real podman (the node of
//! `edpm_testkit::real_node`, with `--services` EDPM-like containers, each active and healthy),
//! beside the same check against the faked `systemctl`/`podman` of `edpm-bench node`. Needs
//! `scripts/real-parts.sh` to have run (`target/real-parts.env`).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use edpm_testkit::real_node::RealNode;

use crate::common::*;
use crate::node::{node_config, node_root};

pub(crate) fn node_real_bench(o: &crate::node::Opts) -> Result<(), String> {
    let (services, runs) = (o.services, o.runs);
    let repo = &crate::common::repo();
    let env_file = repo.join("target/real-parts.env");
    let env: Vec<(String, String)> = fs_err::read_to_string(&env_file)
        .map_err(|e| format!("{e}: run bash scripts/real-parts.sh first"))?
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let node = RealNode::boot(
        &env,
        &exe.with_file_name("edpm-agent"),
        &exe.with_file_name("edpm-agent-node"),
        repo,
    )?;
    node.copy_in(&exe, "/usr/local/bin/edpm-bench")?;

    // The containers, health-checked every 30 s as edpm-ansible's containers are (a 2 s
    // interval would have podman run 25 checks a second beside the measurement).
    let names: Vec<String> = (0..services).map(|s| format!("svc{s:02}_container")).collect();
    let specs: Vec<String> = names.iter().map(|n| format!("{n}:pass")).collect();
    let started = Instant::now();
    let (ok, out) = node.exec(&format!("EDPM_HEALTH_INTERVAL=30s edpm-containers {}", specs.join(" ")));
    if !ok {
        return Err(format!("edpm-containers: {out}"));
    }
    let made = started.elapsed();
    let mut deployed = String::from("services:\n");
    for (s, n) in names.iter().enumerate() {
        deployed.push_str(&format!("  svc{s:02}:\n    containers: [{n}]\n"));
    }
    node.write("/var/lib/edpm-config/deployed_services.yaml", &deployed)?;
    // Every first health check done (podman runs one when the container starts).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, ps) = node.exec("podman ps --format '{{.Status}}'");
        if ps.lines().filter(|l| l.contains("(healthy)")).count() == services {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("not every container became healthy:\n{ps}"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    node.write(
        "/etc/edpm-agent/bench.yaml",
        "namespace: openstack\nobject: bench-real\nnode: bench-real\nroot: /\n",
    )?;
    let (ok, out) =
        node.exec(&format!("edpm-bench node-check --config /etc/edpm-agent/bench.yaml --runs {runs}"));
    if !ok {
        return Err(format!("node-check in the node: {out}"));
    }
    let real: serde_json::Value = serde_json::from_str(out.trim()).map_err(|e| format!("{e}: {out}"))?;
    let f = |k: &str| real[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "real node: {services} containers made and started with their units in {}; one check (systemctl show + podman ps + evaluation, no staged files): min {:.1} ms, median {:.1} ms over {runs} (first {:.1} ms); ready {}",
        ms(made),
        f("warm_min_ms"),
        f("warm_median_ms"),
        f("cold_ms"),
        real["ready"]
    );
    println!(
        "  of which, run alone: systemctl show of {services} units median {:.1} ms, podman ps --all --format json median {:.1} ms",
        f("systemctl_median_ms"),
        f("podman_median_ms")
    );

    // The same check with the faked tools, same services, no staged files.
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (root, tools) = node_root(dir.path(), services, 0)?;
    let (cfg, text) = node_config(dir.path(), "check", &root, None, "")?;
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    // SAFETY: single-threaded here (the node's podman calls are child processes, now ended).
    unsafe { std::env::set_var("PATH", &path) };
    let t = crate::bench::node_check(&cfg, &text, runs)?;
    let mut warm = t.warm.clone();
    warm.sort();
    println!(
        "faked tools (shell scripts that cat prepared answers), the same {services} services: min {}, median {} over {runs}",
        ms(warm[0]),
        ms(warm[warm.len() / 2])
    );
    Ok(())
}

/// `edpm-bench node-check --config FILE [--runs N]`: what `node --real` runs inside the node.
#[derive(clap::Args)]
pub(crate) struct CheckOpts {
    /// The node agent's config file (its root and expectations).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Checks after the first one, timed; and runs of systemctl and podman alone.
    #[arg(long, value_name = "N", default_value_t = 9, value_parser = crate::common::count)]
    runs: usize,
}

/// Run inside the node: the check's times, and systemctl's and podman's alone, as one JSON
/// line.
pub(crate) fn node_check_here(o: &CheckOpts) -> Result<(), String> {
    let (runs, cfg) = (o.runs, &o.config);
    let text = fs_err::read_to_string(cfg).map_err(|e| e.to_string())?;
    let t = crate::bench::node_check(cfg, &text, runs)?;
    let mut warm = t.warm.clone();
    warm.sort();
    let median_of = |program: &str, args: &[String]| -> Result<f64, String> {
        let mut times = Vec::new();
        for _ in 0..runs {
            let start = Instant::now();
            let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
            if !out.status.success() {
                return Err(format!("{program} failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
            times.push(start.elapsed());
        }
        times.sort();
        Ok(times[times.len() / 2].as_secs_f64() * 1e3)
    };
    let deployed =
        fs_err::read_to_string("/var/lib/edpm-config/deployed_services.yaml").map_err(|e| e.to_string())?;
    let mut show = vec![
        "show".to_string(),
        "--property=Id,LoadState,ActiveState,SubState,NeedDaemonReload".into(),
        "--".into(),
    ];
    show.extend(deployed.lines().filter_map(|l| {
        l.trim().strip_prefix("containers: [")?.strip_suffix(']').map(|c| format!("edpm_{c}.service"))
    }));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let line = serde_json::json!({
        "cold_ms": ms(t.cold),
        "warm_min_ms": ms(warm[0]),
        "warm_median_ms": ms(warm[warm.len() / 2]),
        "ready": t.ready,
        "conditions": t.conditions,
        "systemctl_median_ms": median_of("systemctl", &show)?,
        "podman_median_ms": median_of("podman", &["ps".into(), "--all".into(), "--format".into(), "json".into()])?,
    });
    println!("{line}");
    Ok(())
}
