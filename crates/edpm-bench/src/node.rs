//! `edpm-bench node`: the node agent's check and its idle cost as a service.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use crate::fake_api;

/// A node root as edpm-ansible and `stage` leave it: `services` deployed services (one
/// container each, with quadlet files), `files` staged files with their manifest; and a `bin`
/// directory with `systemctl` and `podman` answering for those containers (active, healthy),
/// from files, as fast as a process can answer.
pub(crate) fn node_root(dir: &Path, services: usize, files: usize) -> Result<(PathBuf, PathBuf), String> {
    use sha2::{Digest, Sha256};
    let root = dir.join("root");
    let w = |rel: &str, text: &[u8]| -> Result<(), String> {
        let p = root.join(rel);
        fs_err::create_dir_all(p.parent().unwrap()).map_err(|e| e.to_string())?;
        fs_err::write(p, text).map_err(|e| e.to_string())
    };
    w("etc/hostname", b"bench-node-0\n")?;
    w(
        "proc/net/fib_trie",
        b"Local:\n  +-- 192.168.122.0/24 2 0 2\n     |-- 192.168.122.50\n        /32 host LOCAL\n",
    )?;
    w("etc/os-release", b"NAME=\"CentOS Stream\"\nPRETTY_NAME=\"CentOS Stream 9\"\n")?;
    w("var/lib/edpm-config/os-net-config.returncode", b"0\n")?;
    w("usr/bin/podman", b"")?;
    // Executable, as the agent wants its runtime (the podman it asks is the fake on PATH).
    std::fs::set_permissions(
        root.join("usr/bin/podman"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .map_err(|e| e.to_string())?;
    let mut deployed = String::from("services:\n");
    let mut units = String::new();
    let mut ps = Vec::new();
    for s in 0..services {
        let c = format!("svc{s:02}_container");
        let _ =
            writeln!(deployed, "  svc{s:02}:\n    containers: [{c}]\n    updated_at: '2026-11-01T10:00:00Z'");
        w(
            &format!("etc/containers/systemd/edpm_{c}.container"),
            format!("# config_hash=h{s}\n[Container]\nImage=x\n").as_bytes(),
        )?;
        let _ = write!(
            units,
            "Id=edpm_{c}.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNeedDaemonReload=no\n\n"
        );
        ps.push(serde_json::json!({"Names": [c], "Status": "Up 2 hours (healthy)", "Labels": {"config_hash": format!("h{s}")}}));
    }
    w("var/lib/edpm-config/deployed_services.yaml", deployed.as_bytes())?;
    // Staged files of config-file size (1–3 KiB), a tenth of them secrets (0600).
    let mut manifest = serde_json::Map::new();
    for i in 0..files {
        let rel = format!("var/lib/openstack/configs/svc{:02}/{i:05}.conf", i % services.max(1));
        let body = format!("[DEFAULT]\n# file {i}\n{}", "option = value\n".repeat(64 + i % 128));
        w(&rel, body.as_bytes())?;
        let mode = if i % 10 == 0 { 0o600 } else { 0o644 };
        std::fs::set_permissions(root.join(&rel), std::os::unix::fs::PermissionsExt::from_mode(mode))
            .map_err(|e| e.to_string())?;
        let sha: String = Sha256::digest(body.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        manifest.insert(rel, serde_json::json!({"sha256": sha, "mode": mode}));
    }
    w("var/lib/edpm-agent/staged.json", serde_json::json!({"files": manifest}).to_string().as_bytes())?;
    let bin = dir.join("bin");
    fs_err::create_dir_all(&bin).map_err(|e| e.to_string())?;
    fs_err::write(dir.join("units.txt"), units).map_err(|e| e.to_string())?;
    fs_err::write(dir.join("ps.json"), serde_json::Value::Array(ps).to_string())
        .map_err(|e| e.to_string())?;
    for (tool, answer) in [("systemctl", "units.txt"), ("podman", "ps.json")] {
        let p = bin.join(tool);
        fs_err::write(&p, format!("#!/bin/sh\nexec cat {}\n", dir.join(answer).display()))
            .map_err(|e| e.to_string())?;
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(|e| e.to_string())?;
    }
    Ok((root, bin))
}

/// The node agent's config for `root`, with extra settings.
pub(crate) fn node_config(
    dir: &Path,
    name: &str,
    root: &Path,
    kubeconfig: Option<&Path>,
    extra: &str,
) -> Result<(PathBuf, String), String> {
    let kc = kubeconfig.map(|k| format!("kubeconfig: {}\n", k.display())).unwrap_or_default();
    let text = format!(
        "{kc}namespace: openstack\nobject: {name}\nnode: bench-node-0\nroot: {}\nexpect:\n  hostname: bench-node-0\n  addresses: [192.168.122.50]\n  os: CentOS Stream\n{extra}",
        root.display()
    );
    let p = dir.join(format!("{name}.yaml"));
    fs_err::write(&p, &text).map_err(|e| e.to_string())?;
    Ok((p, text))
}

/// Each live thread's CPU time so far, in nanoseconds (schedstat).
pub(crate) fn thread_cpu_ns(pid: u32) -> Result<Vec<(String, u64)>, String> {
    let mut out = Vec::new();
    for t in fs_err::read_dir(format!("/proc/{pid}/task")).map_err(|e| e.to_string())? {
        let t = t.map_err(|e| e.to_string())?;
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            let ns = s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            out.push((t.file_name().to_string_lossy().into_owned(), ns));
        }
    }
    Ok(out)
}

/// The process's user + system time in clock ticks, ended threads and reaped children
/// (systemctl, podman) included.
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

pub(crate) fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// `edpm-bench node`'s flags (with `--real`, `node_real`'s).
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Check a real node instead: a real systemd and podman in a container (needs
    /// scripts/real-parts.sh), beside the same check against the faked tools.
    #[arg(long)]
    pub(crate) real: bool,
    /// Deployed services on the node, one container each.
    #[arg(long, value_name = "S", default_value_t = 50)]
    pub(crate) services: usize,
    /// Staged files the check verifies (not with --real).
    #[arg(long, value_name = "F", default_value_t = 10_000, conflicts_with = "real")]
    files: usize,
    /// Checks after the first one, timed.
    #[arg(long, value_name = "N", default_value_t = 9, value_parser = crate::common::count)]
    pub(crate) runs: usize,
    /// How long each idle agent is measured, as a service against the fake API server (not
    /// with --real).
    #[arg(long = "idle-seconds", value_name = "SECONDS", default_value_t = 60, conflicts_with = "real")]
    idle: u64,
}

pub(crate) fn node_bench(o: &Opts) -> Result<(), String> {
    let (services, files, runs, idle) = (o.services, o.files, o.runs, o.idle);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (root, tools) = node_root(dir.path(), services, files)?;
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    // SAFETY: no other thread exists yet (the fake API server starts below), so nothing reads
    // the environment concurrently. The collector finds systemctl and podman on PATH.
    unsafe { std::env::set_var("PATH", &path) };

    // One full check, in process: the collector and the evaluation, as the loop runs them.
    let (cfg, text) = node_config(dir.path(), "check", &root, None, "")?;
    let t = crate::bench::node_check(&cfg, &text, runs)?;
    if !t.ready || t.staged_files != files {
        return Err(format!(
            "the generated node is not ready ({} staged files): the check would not do all its work",
            t.staged_files
        ));
    }
    let mut warm = t.warm.clone();
    warm.sort();
    println!(
        "node check: {services} services, {files} staged files, {} conditions: first check (hashes every file) {}, later checks min {}, median {} over {} runs",
        t.conditions,
        ms(t.cold),
        ms(warm[0]),
        ms(warm[warm.len() / 2]),
        warm.len()
    );
    // The peer: verifying the same files with sha256sum, as a shell or Ansible check would.
    let list: String = {
        let m: serde_json::Value = serde_json::from_str(
            &fs_err::read_to_string(root.join("var/lib/edpm-agent/staged.json"))
                .map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        m["files"]
            .as_object()
            .map(|f| {
                f.iter().map(|(p, r)| format!("{}  {p}\n", r["sha256"].as_str().unwrap_or(""))).collect()
            })
            .unwrap_or_default()
    };
    fs_err::write(dir.path().join("sums"), list).map_err(|e| e.to_string())?;
    let mut peer = Vec::new();
    for _ in 0..if files > 0 { 3 } else { 0 } {
        let m = measure(
            Command::new("sha256sum").args(["--quiet", "-c"]).arg(dir.path().join("sums")).current_dir(&root),
        )?;
        if m.status != 0 {
            return Err("sha256sum -c found a mismatch in the generated files".into());
        }
        peer.push(m.wall);
    }
    peer.sort();
    if let Some(p) = peer.get(1) {
        println!("peer: sha256sum -c over the same {files} files: median {} over 3 runs", ms(*p));
    }
    // A first check in a new process: the node agent's own binary, and `edpm-agent node`,
    // which starts the 25 MB CLI and hands its process over to the node agent beside it.
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // The node agent as it ships: built with the `node` profile (size-optimised, LTO) when
    // that build is there; else the one beside this benchmark.
    let shipped = repo().join("target/node/edpm-agent-node");
    let node_agent = if shipped.is_file() { shipped } else { exe.with_file_name("edpm-agent-node") };
    println!("node agent binary: {}", node_agent.display());
    let product = exe.with_file_name("edpm-agent");
    for (shown, program, prefix) in [
        ("edpm-agent-node --once", &node_agent, &[][..]),
        ("edpm-agent node --once", &product, &["node"][..]),
    ] {
        let once = measure(
            Command::new(program).args(prefix).args(["--once", "--format", "json", "--config"]).arg(&cfg),
        )?;
        println!(
            "{shown} (a new process, so a first check): {} wall, {} CPU, peak RSS {:.1} MiB",
            ms(once.wall),
            ms(once.cpu),
            once.max_rss_kib as f64 / 1024.0
        );
    }

    // The agent as a service, against the fake API server: idle (no checks in the window),
    // idle with the API unreachable, checking every 10 s (the default), and with every
    // interval a tenth of its default to count requests; and, for comparison, idle as
    // `edpm-agent node`.
    let api = fake_api::FakeApi::start();
    let status =
        edpm_core::kinds::named(edpm_core::readiness::api::NODE_KIND).ok_or("no EDPMNodeStatus kind")?;
    api.add_crd(status.group, status.version, status.plural);
    let kc = api.kubeconfig();
    // The same credentials, pointing at a port nothing listens on.
    let unreachable = dir.path().join("unreachable.kubeconfig");
    let kc_text = fs_err::read_to_string(&kc).map_err(|e| e.to_string())?;
    let kc_text: String = kc_text
        .lines()
        .map(|l| match l.trim().strip_prefix("server: ") {
            Some(_) => format!("{}server: https://127.0.0.1:9\n", &l[..l.len() - l.trim_start().len()]),
            None => format!("{l}\n"),
        })
        .collect();
    fs_err::write(&unreachable, kc_text).map_err(|e| e.to_string())?;
    let idle_settings = "check_interval_seconds: 3600\n";
    let variants: [(&str, &PathBuf, &[&str], &Path, &str); 5] = [
        ("idle", &node_agent, &[], &kc, idle_settings),
        ("unreachable", &node_agent, &[], &unreachable, idle_settings),
        ("checking", &node_agent, &[], &kc, ""),
        (
            "scaled",
            &node_agent,
            &[],
            &kc,
            "check_interval_seconds: 1\nlease_interval_seconds: 1\nlease_duration_seconds: 4\nheartbeat_seconds: 30\nrequest_timeout_seconds: 1\ncommand_timeout_seconds: 2\n",
        ),
        ("idle-product", &product, &["node"], &kc, idle_settings),
    ];
    // The environment the systemd unit gives the agent.
    let unit = fs_err::read_to_string(repo().join("packaging/systemd/edpm-agent-node.service"))
        .map_err(|e| e.to_string())?;
    let unit_env: Vec<(String, String)> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut children = Vec::new();
    for (name, program, prefix, kubeconfig, extra) in variants {
        let object = format!("bench-{name}");
        api.put(serde_json::json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus", "metadata": {"name": object, "namespace": "openstack"}, "spec": {}}));
        api.put(serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": object, "namespace": "edpm-node-lease"}, "spec": {}}));
        let (cfg, _) = node_config(dir.path(), &object, &root, Some(kubeconfig), extra)?;
        let child = Command::new(program)
            .args(prefix)
            .arg("--config")
            .arg(&cfg)
            .env("PATH", &path)
            .envs(unit_env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        children.push((name, object, child));
    }
    // Settle: the first check and the first report, and the worker threads of that check gone
    // (tokio keeps an idle blocking thread 10 s).
    std::thread::sleep(Duration::from_secs(15));
    let start_cpu: Vec<Vec<(String, u64)>> =
        children.iter().map(|(_, _, c)| thread_cpu_ns(c.id())).collect::<Result<_, _>>()?;
    let start_ticks: Vec<u64> = children.iter().map(|(_, _, c)| cpu_ticks(c.id())).collect();
    let start_req: Vec<usize> = children.iter().map(|(_, o, _)| api.count("", &format!("/{o}"))).collect();
    std::thread::sleep(Duration::from_secs(idle));
    for (i, (name, object, child)) in children.iter_mut().enumerate() {
        // Idle: every thread's own clock, for threads alive at both ends (nothing starts or
        // stops while idle; if one did, its time is missing and the line says so). Checking:
        // the process's clock, in ticks, which keeps the time of threads that ended.
        let end = thread_cpu_ns(child.id())?;
        let (mut cpu, mut changed) = (0u64, end.len() != start_cpu[i].len());
        for (tid, ns) in &end {
            match start_cpu[i].iter().find(|(t, _)| t == tid) {
                Some((_, before)) => cpu += ns.saturating_sub(*before),
                None => changed = true,
            }
        }
        let per_min = cpu as f64 * 60.0 / idle as f64 / 1e6;
        let ticks = cpu_ticks(child.id()).saturating_sub(start_ticks[i]);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let per_min_ticks = ticks as f64 * 1000.0 / hz * 60.0 / idle as f64;
        let rss = status_kib(child.id(), "VmRSS:");
        let (anon, file) = (status_kib(child.id(), "RssAnon:"), status_kib(child.id(), "RssFile:"));
        let hwm = status_kib(child.id(), "VmHWM:");
        let requests = api.count("", &format!("/{object}")) - start_req[i];
        let leases = api.count("PATCH", &format!("/leases/{object}"));
        let _ = child.kill();
        let _ = child.wait();
        match *name {
            "idle" | "unreachable" | "idle-product" => println!(
                "{} ({files} staged files known): RSS {:.1} MiB ({:.1} anonymous, {:.1} file-backed; peak {:.1} MiB), CPU {per_min:.2} ms per idle minute (Lease renewals, no checks){}, {requests} requests in {idle} s",
                match *name {
                    "idle" => "idle edpm-agent-node",
                    "unreachable" => "idle edpm-agent-node, the API unreachable",
                    _ => "idle edpm-agent node (handed over to edpm-agent-node)",
                },
                rss as f64 / 1024.0,
                anon as f64 / 1024.0,
                file as f64 / 1024.0,
                hwm as f64 / 1024.0,
                if changed { " (threads came or went: under-counted)" } else { "" }
            ),
            "checking" => println!(
                "agent checking every 10 s: RSS {:.1} MiB, CPU {per_min_ticks:.0} ms per minute, {requests} requests in {idle} s",
                rss as f64 / 1024.0
            ),
            _ => {
                let status = api.count("PATCH", &format!("/{}/{object}/status", status.plural));
                let per_hour = requests as f64 * 3600.0 / idle as f64 / 10.0;
                println!(
                    "requests when nothing changes: {requests} in {idle} s with intervals a tenth of the defaults ({leases} Lease renewals and {status} status writes in all, first report included) → {per_hour:.0} per hour at the defaults (360 renewals + 12 heartbeats = 372 by design)"
                );
            }
        }
    }
    Ok(())
}
