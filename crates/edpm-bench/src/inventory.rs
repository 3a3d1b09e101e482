//! `edpm-bench inventory`: the inventory script on generated manifests (YAML and JSON, one file and many), the YAML parser alone, and ansible-inventory reading our script against a static file.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// One input the inventory bench runs on: a format and a layout of the same objects.
pub(crate) struct Input {
    pub(crate) name: &'static str,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) bytes: u64,
    pub(crate) walls: Vec<Duration>,
    pub(crate) rss_kib: i64,
    /// The exit status, when `edpm-agent` refused this input.
    pub(crate) failed: Option<i32>,
}

/// `edpm-bench inventory`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Node counts, comma-separated: one round of every input per size.
    #[arg(long, value_name = "N,N,...", default_value = "10000,50000")]
    sizes: Sizes,
    /// Roles the nodes are spread over, one file each (at least 1).
    #[arg(long, value_name = "R", default_value_t = 100)]
    roles: usize,
    /// Rounds of `edpm-agent inventory --list`, each running every input once.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::common::count)]
    runs: usize,
    /// Runs of ansible-inventory, on our script and on the static file (sizes up to 10,000).
    #[arg(long = "ansible-runs", value_name = "N", default_value_t = 1, value_parser = crate::common::count)]
    ansible_runs: usize,
    /// Skip the ansible-inventory comparison.
    #[arg(long = "no-ansible")]
    no_ansible: bool,
    /// Skip timing YAML parsing alone on the same files.
    #[arg(long = "no-parser-floor")]
    no_parser_floor: bool,
}

impl Opts {
    pub(crate) fn check(&self) -> Result<(), String> {
        at_least_one("--roles", self.roles)
    }
}

pub(crate) fn inventory(o: &Opts) -> Result<(), String> {
    let (roles, runs, ansible_runs) = (o.roles, o.runs, o.ansible_runs);
    let (with_ansible, with_floor) = (!o.no_ansible, !o.no_parser_floor);
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
    for &size in &o.sizes.0 {
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
pub(crate) fn parser_floor(dir: &Path, runs: usize) -> Result<(), String> {
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
        let docs = edpm_core::yaml::documents(t).map_err(|e| e.to_string())?;
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
                            std::hint::black_box(edpm_core::yaml::documents(t).map_err(|e| e.to_string())?);
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

pub(crate) fn compare_ansible(agent: &Path, manifests: &Path, runs: usize) -> Result<(), String> {
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
