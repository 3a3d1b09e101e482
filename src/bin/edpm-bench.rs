//! Benchmarks that generate their own inputs and compare against the peer in the same run.
//!
//! `edpm-bench inventory`: R roles × N nodes as manifests (seeds' model), written as YAML and as
//! JSON, as one file per Role and as one file; the wall time and peak RSS of
//! `edpm-agent inventory --list` on each, in the same rounds; what YAML parsing alone costs on
//! the same files; and the wall time of `ansible-inventory --list` reading our script versus
//! the same inventory as a static YAML file (how upstream hands it to the runner today).
//! `edpm-bench oslo-parse`: `edpm-agent oslo parse` on one large file (10,000 and 40,000 keys in
//! one section, 100,000 sections) against oslo.config's own parser on the same file.
//! `edpm-bench readiness`: the pure readiness evaluation of N nodes × S services (in process),
//! and the write requests of `edpm-agent status report` against a fake API server, for a first
//! report and an unchanged re-report.
//! `edpm-bench run`: the wall time `edpm-agent run` adds over calling ansible-runner directly,
//! for a no-op play on N local hosts, rounds interleaved.
//! `edpm-bench summarize`: `edpm-agent run --summarize-only` on a generated job_events
//! directory of N events.
//! `edpm-bench node`: the node agent's full check over a generated node (S services, F staged
//! files) against `sha256sum -c`, and the agent as a service against the fake API server: idle
//! RSS and CPU, and requests when nothing changes.
//! Run from a release build: `cargo build --release && target/release/edpm-bench inventory`.

// The fake API server of the integration tests: the same server-side apply semantics.
#[path = "../../tests/util/fake_api.rs"]
#[allow(dead_code, unreachable_pub)]
mod fake_api;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

// The same allocator as edpm-agent, so in-process measurements (oslo) match the binary.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("inventory") => inventory(&args[1..]),
        Some("oslo") => oslo_bench(&args[1..]),
        Some("oslo-parse") => oslo_parse_bench(&args[1..]),
        Some("stage") => stage_bench(&args[1..]),
        Some("readiness") => readiness_bench(&args[1..]),
        Some("node") => node_bench(&args[1..]),
        Some("run") => run_bench(&args[1..]),
        Some("summarize") => summarize_bench(&args[1..]),
        Some("measure-child") => measure_child(&args[1..]),
        Some("generate") => match args.get(1) {
            Some(dir) => flag(&args[2..], "--nodes", 10_000)
                .and_then(|n| Ok((n, flag(&args[2..], "--roles", 100)?)))
                .and_then(|(n, r)| generate(Path::new(dir), r, n)),
            None => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R]".into()),
        },
        _ => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R] | edpm-bench oslo [--nodes 1000] [--runs 3] | edpm-bench oslo-parse [--runs 5] | edpm-bench stage [--files 10000] [--ansible-files 300] | edpm-bench readiness [--nodes 10000] [--services 15] [--runs 7] [--report-nodes 1000] | edpm-bench node [--services 50] [--files 10000] [--runs 9] [--idle-seconds 60] | edpm-bench run [--hosts 50] [--runs 5] | edpm-bench summarize [--events 100000] [--runs 5] | edpm-bench inventory [--sizes 10000,50000] [--roles 100] [--runs 5] [--ansible-runs 1] [--no-ansible] [--no-parser-floor]".into()),
    };
    if let Err(e) = result {
        eprintln!("edpm-bench: {e}");
        std::process::exit(2);
    }
}

struct Measured {
    wall: Duration,
    /// User plus system time of the child and every descendant it waited for.
    cpu: Duration,
    max_rss_kib: i64,
    status: i32,
}

/// Runs a command to completion and reads its own peak RSS. The command is started by a fresh
/// `edpm-bench measure-child` process: Linux counts the memory of the process a child was
/// started from (before its exec) in the child's peak, and this benchmark holds its inputs.
fn measure(cmd: &mut Command) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut helper = Command::new(exe);
    helper.arg("measure-child").arg(cmd.get_program()).args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        helper.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => helper.env(k, v),
            None => helper.env_remove(k),
        };
    }
    let out = helper.stderr(Stdio::inherit()).output().map_err(|e| format!("spawn: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<i64> = text.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    match fields[..] {
        [wall_ns, rss, status, cpu_ns] => Ok(Measured {
            wall: Duration::from_nanos(wall_ns as u64),
            cpu: Duration::from_nanos(cpu_ns as u64),
            max_rss_kib: rss,
            status: status as i32,
        }),
        _ => Err(format!("measure-child: unexpected answer {text:?}")),
    }
}

/// `edpm-bench measure-child PROGRAM ARGS...`: runs the program (output thrown away) and prints
/// its wall time in nanoseconds, its peak RSS in KiB (wait4), its exit status and its CPU time
/// in nanoseconds.
fn measure_child(args: &[String]) -> Result<(), String> {
    let (program, rest) = args.split_first().ok_or("measure-child needs a program")?;
    let start = Instant::now();
    let child = Command::new(program)
        .args(rest)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {program}: {e}"))?;
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
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
    println!("{} {} {} {}", wall.as_nanos(), usage.ru_maxrss, libc::WEXITSTATUS(status), cpu.as_nanos());
    Ok(())
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

/// The generated Role files as one JSON `kind: List` each (the shape the API server returns),
/// read with edpm-agent's own YAML reader.
fn to_json(from: &Path, to: &Path) -> Result<(), String> {
    for path in files_in(from)? {
        let text = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
        let items = edpm_agent::yaml::to_json_values(&text).map_err(|e| e.to_string())?;
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let name = path.with_extension("json");
        let name = name.file_name().ok_or("no file name")?;
        fs_err::write(to.join(name), list.to_string()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The generated YAML files as one file of as many documents; the JSON ones as one List.
fn to_one_file(from: &Path, to: &Path, json: bool) -> Result<(), String> {
    let mut out = String::new();
    let mut items = Vec::new();
    for path in files_in(from)? {
        let text = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
        if json {
            let list: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            items.extend(list["items"].as_array().cloned().unwrap_or_default());
        } else {
            out.push_str("---\n");
            out.push_str(&text);
        }
    }
    if json {
        out = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    }
    fs_err::write(to.join(if json { "all.json" } else { "all.yaml" }), out).map_err(|e| e.to_string())
}

fn files_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(|e| e.to_string())?.filter_map(|e| Some(e.ok()?.path())).collect();
    files.sort();
    Ok(files)
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

/// One input the inventory bench runs on: a format and a layout of the same objects.
struct Input {
    name: &'static str,
    dir: tempfile::TempDir,
    bytes: u64,
    walls: Vec<Duration>,
    rss_kib: i64,
    /// The exit status, when `edpm-agent` refused this input.
    failed: Option<i32>,
}

fn inventory(args: &[String]) -> Result<(), String> {
    let sizes: String = flag(args, "--sizes", "10000,50000".to_string())?;
    let roles: usize = flag(args, "--roles", 100)?;
    let runs: usize = flag(args, "--runs", 5)?;
    let ansible_runs: usize = flag(args, "--ansible-runs", 1)?;
    let with_ansible = !args.iter().any(|a| a == "--no-ansible");
    let with_floor = !args.iter().any(|a| a == "--no-parser-floor");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let agent = exe.with_file_name("edpm-agent");
    if !agent.is_file() {
        return Err(format!("{} not found; build it with cargo build --release", agent.display()));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "edpm-agent inventory --list ({}), {runs} rounds; each round runs every input once, in turn; {cores} cores",
        agent.display()
    );
    println!(
        "{:>8} {:<12} {:>8} {:>11} {:>11} {:>11} {:>11} {:>10}",
        "nodes", "input", "size", "best wall", "median", "worst", "peak RSS", "per node"
    );
    let mut first: Vec<(String, usize, Duration)> = Vec::new();
    for size in sizes.split(',').map(|s| s.trim().parse::<usize>().map_err(|_| format!("bad size {s}"))) {
        let size = size?;
        let yaml = tempfile::tempdir().map_err(|e| e.to_string())?;
        generate(yaml.path(), roles, size)?;
        let json = tempfile::tempdir().map_err(|e| e.to_string())?;
        to_json(yaml.path(), json.path())?;
        let yaml_one = tempfile::tempdir().map_err(|e| e.to_string())?;
        to_one_file(yaml.path(), yaml_one.path(), false)?;
        let json_one = tempfile::tempdir().map_err(|e| e.to_string())?;
        to_one_file(json.path(), json_one.path(), true)?;
        let mut inputs: Vec<Input> =
            [("yaml", yaml), ("json", json), ("yaml, 1 file", yaml_one), ("json, 1 List", json_one)]
                .into_iter()
                .map(|(name, dir)| {
                    let bytes = files_in(dir.path())
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|f| f.metadata().ok())
                        .map(|m| m.len())
                        .sum();
                    Input { name, dir, bytes, walls: Vec::new(), rss_kib: 0, failed: None }
                })
                .collect();
        let mut outputs: Vec<Vec<u8>> = Vec::new();
        for _ in 0..runs {
            for input in inputs.iter_mut().filter(|i| i.failed.is_none()) {
                let m = measure(Command::new(&agent).args([
                    "--source",
                    input.dir.path().to_str().unwrap(),
                    "inventory",
                    "--list",
                ]))?;
                if m.status != 0 {
                    // An older build may refuse some layouts; say so and go on with the rest.
                    input.failed = Some(m.status);
                    continue;
                }
                input.walls.push(m.wall);
                input.rss_kib = input.rss_kib.max(m.max_rss_kib);
            }
        }
        // Every input holds the same objects: the inventories must be the same, byte for byte.
        for input in inputs.iter().filter(|i| i.failed.is_none()) {
            let out = Command::new(&agent)
                .args(["--source", input.dir.path().to_str().unwrap(), "inventory", "--list"])
                .output()
                .map_err(|e| e.to_string())?;
            outputs.push(out.stdout);
        }
        if outputs.windows(2).any(|w| w[0] != w[1]) {
            return Err("the inputs gave different inventories".into());
        }
        for input in &mut inputs {
            if let Some(status) = input.failed {
                println!("{:>8} {:<12} refused (exit status {status})", size, input.name);
                continue;
            }
            input.walls.sort();
            let best = input.walls[0];
            println!(
                "{:>8} {:<12} {:>7.1}M {:>11} {:>11} {:>11} {:>7.1} MiB {:>7.2} µs",
                size,
                input.name,
                input.bytes as f64 / 1048576.0,
                ms(best),
                ms(input.walls[input.walls.len() / 2]),
                ms(*input.walls.last().unwrap()),
                input.rss_kib as f64 / 1024.0,
                best.as_secs_f64() * 1e6 / size as f64
            );
            match first.iter().find(|(n, _, _)| n == input.name) {
                None => first.push((input.name.to_string(), size, best)),
                Some((_, s0, w0)) => println!(
                    "{:>19} growth: {:.1}x nodes took {:.2}x the time per node (1.00 = linear)",
                    "",
                    size as f64 / *s0 as f64,
                    best.as_secs_f64() / w0.as_secs_f64() / (size as f64 / *s0 as f64)
                ),
            }
        }
        if with_floor {
            parser_floor(inputs[0].dir.path(), runs)?;
        }
        if with_ansible && size <= 10_000 {
            compare_ansible(&agent, inputs[0].dir.path(), ansible_runs)?;
        }
    }
    Ok(())
}

/// What parsing alone costs on the same YAML files, in this process, best of `runs`: the
/// event parser (granit-parser) with nothing built, the whole reader (events into trees, with
/// Kubernetes' scalar rules), and the reader on every core as `edpm-agent` spreads it.
fn parser_floor(dir: &Path, runs: usize) -> Result<(), String> {
    let texts: Vec<String> = files_in(dir)?
        .iter()
        .map(|f| fs_err::read_to_string(f).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let time = |f: &dyn Fn(&str) -> Result<usize, String>| -> Result<(Duration, usize), String> {
        let mut best = Duration::MAX;
        let mut n = 0;
        for _ in 0..runs {
            let start = Instant::now();
            n = 0;
            for t in &texts {
                n += f(t)?;
            }
            best = best.min(start.elapsed());
        }
        Ok((best, n))
    };
    let (events, count) = time(&|t| {
        let mut options = granit_parser::Options::default();
        options.set_emit_comments(false);
        let mut n = 0;
        for ev in granit_parser::Parser::new_from_str_with_options(t, options) {
            std::hint::black_box(ev.map_err(|e| e.to_string())?);
            n += 1;
        }
        Ok(n)
    })?;
    let (trees, _) = time(&|t| {
        let docs = edpm_agent::yaml::documents(t).map_err(|e| e.to_string())?;
        Ok(std::hint::black_box(docs).len())
    })?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut spread = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        std::thread::scope(|scope| -> Result<(), String> {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let texts = &texts;
                    scope.spawn(move || -> Result<(), String> {
                        for t in texts.iter().skip(w).step_by(workers) {
                            std::hint::black_box(edpm_agent::yaml::documents(t).map_err(|e| e.to_string())?);
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "worker panicked".to_string())??;
            }
            Ok(())
        })?;
        spread = spread.min(start.elapsed());
    }
    println!("{:>19} YAML parsing alone, same files, best of {runs}:", "");
    println!("{:>21} granit-parser events ({count}), one thread: {}", "", ms(events));
    println!("{:>21} edpm-agent's reader (events to trees), one thread: {}", "", ms(trees));
    println!("{:>21} edpm-agent's reader on {workers} cores: {}", "", ms(spread));
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

/// Python side of the oslo benchmark: oslo.config's own parser (cfg.ConfigParser, as
/// ConfigOpts uses it) on every file, then the layered value of every option with oslo's
/// rule (newest file first, last occurrence; multi: all, oldest first), and separately a full
/// ConfigOpts run with --config-dir for a sample of nodes.
const OSLO_PY: &str = r#"
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

fn oslo_bench(args: &[String]) -> Result<(), String> {
    use edpm_agent::oslo;
    let nodes: usize = flag(args, "--nodes", 1000)?;
    let runs: usize = flag(args, "--runs", 3)?;
    let python = find_tool("python3")
        .filter(|p| p.to_string_lossy().contains("venv"))
        .or_else(|| find_tool("python3"));
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let templates = edpm_agent::render::Templates::embedded();
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
            let text = edpm_agent::render::normalize_sections(&templates.render(t, &ctx)?);
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
    let read_node = |node_dir: &Path| -> Result<edpm_agent::shell::files::Texts, String> {
        let names: Vec<String> = std::fs::read_dir(node_dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        let files = oslo::layer::config_dir_files(&names).into_iter().map(|n| node_dir.join(n));
        edpm_agent::shell::files::Texts::read(files).map_err(|e| e.to_string())
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

/// Python side of `edpm-bench oslo-parse`: oslo.config's parser filling the `sections` dict
/// that `oslo parse` prints, timed in process (interpreter start-up and import excluded), best
/// of the runs for each file.
const OSLO_PARSE_PY: &str = r#"
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

/// `edpm-agent oslo parse` as a whole process on single large files, the shapes that once made
/// it quadratic, against oslo.config's parser on the same files.
fn oslo_parse_bench(args: &[String]) -> Result<(), String> {
    let runs: usize = flag(args, "--runs", 5)?.max(1);
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

/// Writes a one-node NodeSet running only `ovn`, whose data source holds `files` keys.
fn stage_source(dir: &Path, files: usize, version: &str, changed_every: usize) -> Result<(), String> {
    let mut text = String::from(
        "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: bench\nspec:\n  services: [ovn]\n  nodeTemplate:\n    ansibleSSHPrivateKeySecret: ssh\n  nodes:\n    node-0: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ovncontroller-config\ndata:\n",
    );
    for i in 0..files {
        let v = if changed_every > 0 && i % changed_every == 0 { version } else { "base" };
        let _ = writeln!(text, "  key-{i:05}: \"{}\"", format!("{v}-{i:05}-").repeat(60));
    }
    fs_err::write(dir.join("bench.yaml"), text).map_err(|e| e.to_string())
}

fn stage_bench(args: &[String]) -> Result<(), String> {
    let files: usize = flag(args, "--files", 10_000)?;
    let sample: usize = flag(args, "--ansible-files", 300)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let agent = exe.with_file_name("edpm-agent");
    let src = tempfile::tempdir().map_err(|e| e.to_string())?;
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let stage = || -> Result<(Duration, serde_json::Value), String> {
        let start = Instant::now();
        let out = Command::new(&agent)
            .args([
                "--source",
                src.path().to_str().unwrap(),
                "stage",
                "--node",
                "node-0",
                "--root",
                root.path().to_str().unwrap(),
            ])
            .output()
            .map_err(|e| e.to_string())?;
        let t = start.elapsed();
        if !out.status.success() {
            return Err(format!("stage failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok((t, serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?))
    };
    let n = |v: &serde_json::Value, k: &str| v[k].as_array().map_or(0, Vec::len);
    stage_source(src.path(), files, "base", 0)?;
    println!("edpm-agent stage: {files} files of ~1 KiB from one data source");
    let (t1, r1) = stage()?;
    println!(
        "  first run:        {:>9}  {} written ({:.1} µs per file)",
        ms(t1),
        n(&r1, "changed"),
        t1.as_secs_f64() * 1e6 / files as f64
    );
    let (t2, r2) = stage()?;
    println!(
        "  no-change re-run: {:>9}  {} unchanged ({:.1} µs per file)",
        ms(t2),
        n(&r2, "unchanged"),
        t2.as_secs_f64() * 1e6 / files as f64
    );
    stage_source(src.path(), files, "v2", 100)?;
    let (t3, r3) = stage()?;
    println!(
        "  1% changed:       {:>9}  {} written, {} unchanged",
        ms(t3),
        n(&r3, "changed"),
        n(&r3, "unchanged")
    );

    if sample == 0 {
        return Ok(());
    }
    let Some(playbook_bin) = find_tool("ansible-playbook") else {
        println!("  ansible-playbook not found (run scripts/setup-venv.sh); no comparison");
        return Ok(());
    };
    // The same kind of files through Ansible's copy module, as edpm-ansible stages them today.
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let from = work.path().join("src");
    let to = work.path().join("dest");
    fs_err::create_dir_all(&from).map_err(|e| e.to_string())?;
    for i in 0..sample {
        fs_err::write(from.join(format!("key-{i:05}")), format!("base-{i:05}-").repeat(60))
            .map_err(|e| e.to_string())?;
    }
    let play = work.path().join("copy.yml");
    fs_err::write(
        &play,
        format!(
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.file: {{path: {to}, state: directory, mode: '0755'}}\n    - ansible.builtin.copy: {{src: '{from}/key-{{{{ item }}}}', dest: '{to}/', mode: '0644'}}\n      loop: \"{{{{ range({sample}) | map('string') | map('regex_replace', '^(.*)$', '0000\\\\1') | map('regex_replace', '^0*(.{{5}})$', '\\\\1') | list }}}}\"\n",
            to = to.display(),
            from = from.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let run_play = || -> Result<Duration, String> {
        let start = Instant::now();
        let out = Command::new(&playbook_bin)
            .args([
                "-i",
                "localhost,",
                "-c",
                "local",
                "-e",
                "ansible_python_interpreter={{ ansible_playbook_python }}",
                play.to_str().unwrap(),
            ])
            .env("ANSIBLE_NOCOLOR", "1")
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("ansible-playbook failed: {}", String::from_utf8_lossy(&out.stdout)));
        }
        Ok(start.elapsed())
    };
    let a1 = run_play()?;
    let a2 = run_play()?;
    let copied = std::fs::read_dir(&to).map(|d| d.count()).unwrap_or(0);
    println!("Ansible copy module (connection local), {sample} of the same files ({copied} copied):");
    println!(
        "  first run:        {:>9}  ({:.1} ms per file)",
        ms(a1),
        a1.as_secs_f64() * 1e3 / sample as f64
    );
    println!(
        "  no-change re-run: {:>9}  ({:.1} ms per file)",
        ms(a2),
        a2.as_secs_f64() * 1e3 / sample as f64
    );
    println!(
        "  per file, no-change re-run: edpm-agent {:.1} µs vs copy {:.1} ms ({:.0}x)",
        t2.as_secs_f64() * 1e6 / files as f64,
        a2.as_secs_f64() * 1e3 / sample as f64,
        (a2.as_secs_f64() / sample as f64) / (t2.as_secs_f64() / files as f64)
    );
    Ok(())
}

/// NodeSets of 100 nodes, each with a completed Deployment over `services` services, except
/// one NodeSet in ten whose last service failed on one host (with the Job's summary).
fn readiness_manifests(nodes: usize, services: usize) -> String {
    let svc: Vec<String> = (0..services).map(|i| format!("svc-{i:02}")).collect();
    let mut out = String::new();
    let sets = nodes.div_ceil(100);
    for s in 0..sets {
        let ns = format!("nodeset-{s:04}");
        let _ = write!(
            out,
            "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata: {{name: {ns}, namespace: openstack}}\nspec:\n  preProvisioned: true\n  services: [{}]\n  nodeTemplate: {{ansibleSSHPrivateKeySecret: key}}\n  nodes:\n",
            svc.join(", ")
        );
        let count = (nodes - s * 100).min(100);
        for n in 0..count {
            let _ = writeln!(
                out,
                "    compute-{s:04}-{n:03}: {{ansible: {{ansibleHost: 10.{}.{}.{}}}}}",
                s / 250,
                s % 250,
                n + 1
            );
        }
        let failed = s % 10 == 9;
        let _ = write!(
            out,
            "status: {{configHash: h{s}}}\n---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneDeployment\nmetadata: {{name: deploy-{s:04}, namespace: openstack, creationTimestamp: \"2026-11-01T10:00:00Z\"}}\nspec: {{nodeSets: [{ns}]}}\nstatus:\n  nodeSetHashes: {{{ns}: h{s}}}\n"
        );
        let job = format!("{}-deploy-{s:04}-{ns}", svc[services - 1]);
        if failed {
            let _ = write!(
                out,
                "  ansibleExecutionSummaries:\n    {job}: {{totalHosts: {count}, failedHosts: 1, failedHostList: [compute-{s:04}-000], unreachableHostList: []}}\n"
            );
        }
        out.push_str("  nodeSetConditions:\n    ");
        out.push_str(&ns);
        out.push_str(":\n");
        let (st, reason, sev) = if failed {
            ("False", "BackoffLimitExceeded", ", severity: Error")
        } else {
            ("True", "Ready", "")
        };
        let _ = writeln!(
            out,
            "      - {{type: NodeSetDeploymentReady, status: \"{st}\", reason: {reason}{sev}, message: m, lastTransitionTime: \"2026-11-01T11:00:00Z\"}}"
        );
        for (i, name) in svc.iter().enumerate() {
            let camel: String = name.split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect();
            let last = i == services - 1;
            let (st, reason, sev) = if failed && last {
                ("False", "BackoffLimitExceeded", ", severity: Error")
            } else {
                ("True", "Ready", "")
            };
            let _ = writeln!(
                out,
                "      - {{type: Service{camel}DeploymentReady, status: \"{st}\", reason: {reason}{sev}, message: m, lastTransitionTime: \"2026-11-01T11:00:00Z\"}}"
            );
        }
    }
    out
}

fn readiness_bench(args: &[String]) -> Result<(), String> {
    let nodes = flag(args, "--nodes", 10_000)?;
    let services = flag(args, "--services", 15)?;
    let runs = flag(args, "--runs", 7)?;
    let report_nodes = flag(args, "--report-nodes", 1_000)?;
    let text = readiness_manifests(nodes, services);
    let t = edpm_agent::shell::bench::readiness(&text, runs)?;
    let mut times = t.evaluate.clone();
    times.sort();
    println!(
        "readiness evaluate: {} nodes × {services} services ({} conditions): min {}, median {} over {} runs (parse + model, once: {})",
        t.nodes,
        t.conditions,
        ms(times[0]),
        ms(times[times.len() / 2]),
        times.len(),
        ms(t.load)
    );

    // status report against the fake API server.
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    let api = fake_api::FakeApi::start();
    api.add_readiness_crds();
    let small = readiness_manifests(report_nodes, services);
    for d in serde_saphyr::from_multiple::<serde_json::Value>(&small).map_err(|e| e.to_string())? {
        api.put(d);
    }
    let kc = api.kubeconfig();
    let objects = report_nodes + report_nodes.div_ceil(100);
    for pass in ["first report", "unchanged re-report"] {
        let before = api.count("PATCH", "/apis/agent.edpm.openstack.org/");
        let started = Instant::now();
        let out = Command::new(&agent)
            .args(["--source", "kube", "--kubeconfig", kc.to_str().unwrap_or_default(), "status", "report"])
            .env("EDPM_AGENT_NOW", "2026-11-23T12:00:00Z")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", agent.display()))?;
        let wall = started.elapsed();
        if !out.status.success() {
            return Err(format!("status report failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let writes = api.count("PATCH", "/apis/agent.edpm.openstack.org/") - before;
        println!(
            "status report, {pass}: {objects} objects, {writes} write requests ({:.2} per object), {} wall at concurrency 8: {}",
            writes as f64 / objects as f64,
            ms(wall),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    Ok(())
}
/// A runner directory with `hosts` local hosts and a no-op play: one `debug` task, which runs
/// on the controller, so the play's own cost is Ansible's and little else.
fn noop_runner_dir(dir: &Path, hosts: usize, python: &Path) -> Result<(), String> {
    let mut inv = String::from("all:\n  hosts:\n");
    for i in 0..hosts {
        let _ = writeln!(inv, "    host-{i:03}: {{ansible_connection: local}}");
    }
    let _ = writeln!(inv, "  vars:\n    ansible_python_interpreter: {}", python.display());
    for (rel, text) in [
        ("inventory/hosts", inv.as_str()),
        (
            "project/noop.yml",
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug: {msg: noop}\n",
        ),
        ("env/settings", "pexpect_timeout: 0.2\n"),
    ] {
        let p = dir.join(rel);
        fs_err::create_dir_all(p.parent().unwrap()).map_err(|e| e.to_string())?;
        fs_err::write(p, text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn run_bench(args: &[String]) -> Result<(), String> {
    let hosts: usize = flag(args, "--hosts", 50)?;
    let runs: usize = flag(args, "--runs", 5)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let agent = exe.with_file_name("edpm-agent");
    let runner = find_tool("ansible-runner").ok_or("ansible-runner not found (run scripts/setup-venv.sh)")?;
    let python = find_tool("python3")
        .filter(|p| p.starts_with(runner.parent().unwrap()))
        .unwrap_or_else(|| "python3".into());
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    noop_runner_dir(dir.path(), hosts, &python)?;
    let path =
        format!("{}:{}", runner.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let d = dir.path().to_str().unwrap().to_string();
    let time = |cmd: &mut Command| -> Result<Measured, String> {
        let m = measure(
            cmd.env("PATH", &path)
                .env("ANSIBLE_NOCOLOR", "1")
                .env("EDPM_AEE_TERMINATION_LOG", dir.path().join("tlog")),
        )?;
        if m.status != 0 {
            return Err(format!("run failed with status {}", m.status));
        }
        Ok(m)
    };
    println!(
        "edpm-agent run vs ansible-runner run: no-op play (one debug task) on {hosts} local hosts, {runs} interleaved rounds"
    );
    let (mut direct, mut ours) = (Vec::new(), Vec::new());
    // One warm-up of each, so neither side pays for a cold page cache.
    for round in 0..=runs {
        let a = time(Command::new(&runner).args([
            "run",
            &d,
            "-p",
            "noop.yml",
            "-i",
            &format!("direct-{round}"),
        ]))?;
        let b = time(Command::new(&agent).args([
            "run",
            "--",
            "ansible-runner",
            "run",
            &d,
            "-p",
            "noop.yml",
            "-i",
            &format!("agent-{round}"),
        ]))?;
        if round > 0 {
            direct.push(a);
            ours.push(b);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (label, cpu) in [("wall", false), ("cpu (user+sys, every process)", true)] {
        let get = |m: &Measured| if cpu { m.cpu } else { m.wall }.as_secs_f64();
        let d: Vec<f64> = direct.iter().map(get).collect();
        let o: Vec<f64> = ours.iter().map(get).collect();
        let ratio = median(d.iter().zip(&o).map(|(d, o)| o / d).collect());
        let diff = median(d.iter().zip(&o).map(|(d, o)| o - d).collect());
        println!(
            "  {label}: direct median {:.1} ms, through edpm-agent median {:.1} ms; paired: {:+.2}% ({:+.1} ms) median",
            median(d.clone()) * 1e3,
            median(o.clone()) * 1e3,
            (ratio - 1.0) * 100.0,
            diff * 1e3
        );
    }
    println!("  (target: under 2% of the wall time; on a loaded machine the cpu figure is the steadier one)");
    Ok(())
}

/// Writes a job_events directory of about `events` events, shaped like a real run: per task a
/// task start, then per host a runner_on_start and a result with a module-sized `res`; every
/// 50th host fails the last task; then the statistics.
fn generate_events(dir: &Path, events: usize) -> Result<usize, String> {
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

fn summarize_bench(args: &[String]) -> Result<(), String> {
    let events: usize = flag(args, "--events", 100_000)?;
    let runs: usize = flag(args, "--runs", 5)?;
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

/// A node root as edpm-ansible and `stage` leave it: `services` deployed services (one
/// container each, with quadlet files), `files` staged files with their manifest; and a `bin`
/// directory with `systemctl` and `podman` answering for those containers (active, healthy),
/// from files, as fast as a process can answer.
fn node_root(dir: &Path, services: usize, files: usize) -> Result<(PathBuf, PathBuf), String> {
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
fn node_config(
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
fn thread_cpu_ns(pid: u32) -> Result<Vec<(String, u64)>, String> {
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
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn node_bench(args: &[String]) -> Result<(), String> {
    let services = flag(args, "--services", 50)?;
    let files = flag(args, "--files", 10_000)?;
    let runs = flag(args, "--runs", 9)?;
    let idle = flag(args, "--idle-seconds", 60u64)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (root, tools) = node_root(dir.path(), services, files)?;
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    // SAFETY: no other thread exists yet (the fake API server starts below), so nothing reads
    // the environment concurrently. The collector finds systemctl and podman on PATH.
    unsafe { std::env::set_var("PATH", &path) };

    // One full check, in process: the collector and the evaluation, as the loop runs them.
    let (cfg, text) = node_config(dir.path(), "check", &root, None, "")?;
    let t = edpm_agent::shell::bench::node_check(&cfg, &text, runs)?;
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
    let once = measure(
        Command::new(std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent"))
            .args(["node", "--once", "--format", "json", "--config"])
            .arg(&cfg),
    )?;
    println!(
        "edpm-agent node --once (a new process, so a first check): {} wall, {} CPU, peak RSS {:.1} MiB",
        ms(once.wall),
        ms(once.cpu),
        once.max_rss_kib as f64 / 1024.0
    );

    // The agent as a service, against the fake API server: idle (no checks in the window),
    // checking every 10 s (the default), and with every interval a tenth of its default to
    // count requests.
    let api = fake_api::FakeApi::start();
    api.add_crd("agent.edpm.openstack.org", "v1alpha1", "edpmnodestatuses");
    let kc = api.kubeconfig();
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    let variants = [
        ("idle", "check_interval_seconds: 3600\n"),
        ("checking", ""),
        (
            "scaled",
            "check_interval_seconds: 1\nlease_interval_seconds: 1\nlease_duration_seconds: 4\nheartbeat_seconds: 30\n",
        ),
    ];
    // The environment the systemd unit gives the agent.
    let unit = fs_err::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/systemd/edpm-agent-node.service"
    ))
    .map_err(|e| e.to_string())?;
    let unit_env: Vec<(String, String)> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut children = Vec::new();
    for (name, extra) in variants {
        let object = format!("bench-{name}");
        api.put(serde_json::json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus", "metadata": {"name": object, "namespace": "openstack"}, "spec": {}}));
        api.put(serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": object, "namespace": "openstack"}, "spec": {}}));
        let (cfg, _) = node_config(dir.path(), &object, &root, Some(&kc), extra)?;
        let child = Command::new(&agent)
            .args(["node", "--config"])
            .arg(&cfg)
            .env("PATH", &path)
            .envs(unit_env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", agent.display()))?;
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
            "idle" => println!(
                "idle agent ({files} staged files known): RSS {:.1} MiB ({:.1} anonymous, {:.1} file-backed; peak {:.1} MiB), CPU {per_min:.2} ms per idle minute (Lease renewals, no checks){}, {requests} requests in {idle} s",
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
                let status = api.count("PATCH", &format!("/edpmnodestatuses/{object}/status"));
                let per_hour = requests as f64 * 3600.0 / idle as f64 / 10.0;
                println!(
                    "requests when nothing changes: {requests} in {idle} s with intervals a tenth of the defaults ({leases} Lease renewals and {status} status writes in all, first report included) → {per_hour:.0} per hour at the defaults (360 renewals + 12 heartbeats = 372 by design)"
                );
            }
        }
    }
    Ok(())
}
