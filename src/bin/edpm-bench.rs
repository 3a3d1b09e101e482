//! Benchmarks that generate their own inputs and compare against the peer in the same run.
//!
//! `edpm-bench inventory`: R roles × N nodes as manifests (seeds' model), written as YAML and as
//! JSON, as one file per Role and as one file; the wall time and peak RSS of
//! `edpm-agent inventory --list` on each, in the same rounds; what YAML parsing alone costs on
//! the same files; and the wall time of `ansible-inventory --list` reading our script versus
//! the same inventory as a static YAML file (how upstream hands it to the runner today).
//! Run from a release build: `cargo build --release && target/release/edpm-bench inventory`.

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
        Some("stage") => stage_bench(&args[1..]),
        Some("measure-child") => measure_child(&args[1..]),
        Some("generate") => match args.get(1) {
            Some(dir) => flag(&args[2..], "--nodes", 10_000)
                .and_then(|n| Ok((n, flag(&args[2..], "--roles", 100)?)))
                .and_then(|(n, r)| generate(Path::new(dir), r, n)),
            None => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R]".into()),
        },
        _ => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R] | edpm-bench oslo [--nodes 1000] [--runs 3] | edpm-bench stage [--files 10000] [--ansible-files 300] | edpm-bench inventory [--sizes 10000,50000] [--roles 100] [--runs 5] [--ansible-runs 1] [--no-ansible] [--no-parser-floor]".into()),
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
/// Runs a command to completion and reads its own peak RSS. The command is started by a fresh
/// `edpm-bench measure-child` process: Linux counts the memory of the process a child was
/// started from (before its exec) in the child's peak, and this benchmark holds its inputs.
fn measure(cmd: &mut Command) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut helper = Command::new(exe);
    helper.arg("measure-child").arg(cmd.get_program()).args(cmd.get_args());
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
        [wall_ns, rss, status] => Ok(Measured {
            wall: Duration::from_nanos(wall_ns as u64),
            max_rss_kib: rss,
            status: status as i32,
        }),
        _ => Err(format!("measure-child: unexpected answer {text:?}")),
    }
}

/// `edpm-bench measure-child PROGRAM ARGS...`: runs the program (output thrown away) and prints
/// its wall time in nanoseconds, its peak RSS in KiB (wait4) and its exit status.
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
    println!("{} {} {}", wall.as_nanos(), usage.ru_maxrss, libc::WEXITSTATUS(status));
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
    let read_node = |node_dir: &Path| -> Result<edpm_agent::fsutil::Texts, String> {
        let names: Vec<String> = std::fs::read_dir(node_dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        let files = oslo::layer::config_dir_files(&names).into_iter().map(|n| node_dir.join(n));
        edpm_agent::fsutil::Texts::read(files).map_err(|e| e.to_string())
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
