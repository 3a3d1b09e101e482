//! Benchmarks that generate their own inputs and compare against the peer in the same run.
//!
//! `edpm-bench inventory`: R roles × N nodes as manifests (seeds' model), then the wall time
//! and peak RSS of `edpm-agent inventory --list`, and the wall time of `ansible-inventory --list`
//! reading our script versus the same inventory as a static YAML file (how upstream hands it
//! to the runner today).
//! Run from a release build: `cargo build --release && target/release/edpm-bench inventory`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("inventory") => inventory(&args[1..]),
        Some("generate") => match args.get(1) {
            Some(dir) => flag(&args[2..], "--nodes", 10_000)
                .and_then(|n| Ok((n, flag(&args[2..], "--roles", 100)?)))
                .and_then(|(n, r)| generate(Path::new(dir), r, n)),
            None => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R]".into()),
        },
        _ => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R] | edpm-bench inventory [--sizes 10000,50000] [--roles 100] [--runs 3] [--format yaml|json] [--ansible-runs 1] [--no-ansible]".into()),
    };
    if let Err(e) = result {
        eprintln!("edpm-bench: {e}");
        std::process::exit(2);
    }
}

struct Measured {
    wall: Duration,
    max_rss_kib: i64,
    status: i32,
}

/// Runs a command to completion and reads its own peak RSS with wait4(2).
fn measure(cmd: &mut Command) -> Result<Measured, String> {
    let start = Instant::now();
    let child =
        cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| format!("spawn: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is a plain C struct; zeroed is a valid value, and wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet reaped; pointers are to live locals.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    if rc < 0 {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    std::mem::forget(child);
    Ok(Measured { wall, max_rss_kib: usage.ru_maxrss, status: libc::WEXITSTATUS(status) })
}

fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .ok_or(format!("{name} needs a value"))?
            .parse()
            .map_err(|_| format!("bad value for {name}")),
        None => Ok(default),
    }
}

/// Rewrites every generated YAML file as a JSON `kind: List`, the shape the API server returns.
fn to_json(dir: &Path) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let text = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
        let items: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).map_err(|e| e.to_string())?;
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        fs_err::write(path.with_extension("json"), list.to_string()).map_err(|e| e.to_string())?;
        fs_err::remove_file(&path).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Writes `roles` Roles and `total / roles` Nodes each, like the example deployment.
fn generate(dir: &Path, roles: usize, total: usize) -> Result<(), String> {
    let per_role = total / roles;
    for r in 0..roles {
        let mut text = String::with_capacity(per_role * 700);
        let _ = write!(
            text,
            "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneRole\nmetadata:\n  name: role-{r:03}\n  annotations:\n    nova.openstack.org/cell: nova-cell{}\nspec:\n  nodeTemplate:\n    ansibleUser: cloud-admin\n    ansiblePort: 22\n    managementNetwork: ctlplane\n    ansibleSSHPrivateKeySecret: ssh-key\n    networks:\n      - {{name: ctlplane, subnetName: subnet1}}\n      - {{name: internalapi, subnetName: subnet1}}\n    ansibleVars:\n      neutron_physical_bridge_name: br-ex\n      edpm_chrony_ntp_servers: [pool.ntp.example.com]\n",
            r % 2 + 1
        );
        for n in 0..per_role {
            let i = r * per_role + n;
            let (a, b) = (i / 250, i % 250);
            let _ = write!(
                text,
                "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNode\nmetadata:\n  name: node-{i:06}\nspec:\n  role: role-{r:03}\n  hostName: node-{i:06}.example.com\n  ansibleHost: 10.{a}.{b}.10\n  node:\n    ansibleVars:\n      rack: r{r}\n    networks:\n      - {{name: ctlplane, subnetName: subnet1, fixedIP: 10.{a}.{b}.10}}\n      - {{name: internalapi, subnetName: subnet1, fixedIP: 172.{a}.{b}.10}}\n"
            );
        }
        fs_err::write(dir.join(format!("role-{r:03}.yaml")), text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs = vec![PathBuf::from(".venv/bin")];
    if let Ok(v) = std::env::var("EDPM_AGENT_TEST_VENV") {
        dirs.insert(0, PathBuf::from(v).join("bin"));
    }
    if let Ok(p) = std::env::var("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn inventory(args: &[String]) -> Result<(), String> {
    let sizes: String = flag(args, "--sizes", "10000,50000".to_string())?;
    let roles: usize = flag(args, "--roles", 100)?;
    let runs: usize = flag(args, "--runs", 3)?;
    let ansible_runs: usize = flag(args, "--ansible-runs", 1)?;
    let with_ansible = !args.iter().any(|a| a == "--no-ansible");
    let format: String = flag(args, "--format", "yaml".to_string())?;
    if format != "yaml" && format != "json" {
        return Err("--format is yaml or json".into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let agent = exe.with_file_name("edpm-agent");
    if !agent.is_file() {
        return Err(format!("{} not found; build it with cargo build --release", agent.display()));
    }
    println!(
        "edpm-agent inventory --list on {format} manifests: {} ({runs} run(s) each, best and worst shown)",
        agent.display()
    );
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>12} {:>14}",
        "nodes", "input", "best wall", "worst wall", "peak RSS", "per node"
    );
    let mut first: Option<(usize, Duration)> = None;
    for size in sizes.split(',').map(|s| s.trim().parse::<usize>().map_err(|_| format!("bad size {s}"))) {
        let size = size?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        generate(dir.path(), roles, size)?;
        if format == "json" {
            to_json(dir.path())?;
        }
        let bytes: u64 = std::fs::read_dir(dir.path())
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum();
        let mut walls = Vec::new();
        let mut rss = 0;
        for _ in 0..runs {
            let m = measure(Command::new(&agent).args([
                "--source",
                dir.path().to_str().unwrap(),
                "inventory",
                "--list",
            ]))?;
            if m.status != 0 {
                return Err(format!("edpm-agent failed with status {}", m.status));
            }
            walls.push(m.wall);
            rss = rss.max(m.max_rss_kib);
        }
        walls.sort();
        let best = walls[0];
        println!(
            "{:>8} {:>9.1}M {:>12} {:>12} {:>9.1} MiB {:>11.2} µs",
            size,
            bytes as f64 / 1048576.0,
            ms(best),
            ms(*walls.last().unwrap()),
            rss as f64 / 1024.0,
            best.as_secs_f64() * 1e6 / size as f64
        );
        match first {
            None => first = Some((size, best)),
            Some((s0, w0)) => println!(
                "         growth: {:.1}x nodes took {:.2}x time (1.00 = linear)",
                size as f64 / s0 as f64,
                best.as_secs_f64() / w0.as_secs_f64() / (size as f64 / s0 as f64)
            ),
        }
        if with_ansible && size <= 10_000 {
            compare_ansible(&agent, dir.path(), ansible_runs)?;
        }
    }
    Ok(())
}

fn compare_ansible(agent: &Path, manifests: &Path, runs: usize) -> Result<(), String> {
    let Some(ai) = find_tool("ansible-inventory") else {
        println!(
            "  ansible-inventory not found (run scripts/setup-venv.sh); skipping the Ansible comparison"
        );
        return Ok(());
    };
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let script = dir.path().join("edpm-inventory");
    std::os::unix::fs::symlink(agent, &script).map_err(|e| e.to_string())?;
    let static_yaml = dir.path().join("hosts.yml");
    let st = Command::new(agent)
        .args([
            "--source",
            manifests.to_str().unwrap(),
            "inventory",
            "export",
            "--format",
            "yaml",
            "--output",
            static_yaml.to_str().unwrap(),
        ])
        .status()
        .map_err(|e| e.to_string())?;
    if !st.success() {
        return Err("export failed".into());
    }
    let time = |inv: &Path| -> Result<Duration, String> {
        let mut best = Duration::MAX;
        for _ in 0..runs {
            let m = measure(
                Command::new(&ai)
                    .args(["-i", inv.to_str().unwrap(), "--list"])
                    .env("EDPM_AGENT_SOURCE", manifests)
                    .env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "true"),
            )?;
            if m.status != 0 {
                return Err(format!("ansible-inventory -i {} failed", inv.display()));
            }
            best = best.min(m.wall);
        }
        Ok(best)
    };
    let t_script = time(&script)?;
    let t_static = time(&static_yaml)?;
    println!("  ansible-inventory --list, dynamic script (edpm-inventory): {}", ms(t_script));
    println!("  ansible-inventory --list, static YAML (upstream's hand-over):  {}", ms(t_static));
    println!("  static YAML / script: {:.1}x", t_static.as_secs_f64() / t_script.as_secs_f64());
    Ok(())
}
