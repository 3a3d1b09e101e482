//! Helpers every benchmark uses: timing a child process (wall time, peak RSS), generated manifests, finding the peer tools.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Measured {
    pub(crate) wall: Duration,
    /// User plus system time of the child and every descendant it waited for.
    pub(crate) cpu: Duration,
    pub(crate) max_rss_kib: i64,
    pub(crate) status: i32,
}

/// Runs a command to completion and reads its own peak RSS. The command is started by a fresh
/// `edpm-bench measure-child` process: Linux counts the memory of the process a child was
/// started from (before its exec) in the child's peak, and this benchmark holds its inputs.
pub(crate) fn measure(cmd: &mut Command) -> Result<Measured, String> {
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

/// `edpm-bench measure-child PROGRAM ARGS...`: the command [`measure`] starts, its arguments
/// passed on as given (flags included).
#[derive(clap::Args)]
pub(crate) struct MeasureChild {
    /// The program to run (its output is thrown away).
    program: std::ffi::OsString,
    /// Its arguments, passed on as given, flags included.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<std::ffi::OsString>,
}

/// Runs the program and prints its wall time in nanoseconds, its peak RSS in KiB (wait4), its
/// exit status and its CPU time in nanoseconds.
pub(crate) fn measure_child(o: &MeasureChild) -> Result<(), String> {
    let program = &o.program;
    let start = Instant::now();
    let child = Command::new(program)
        .args(&o.args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", program.to_string_lossy()))?;
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

/// `edpm-bench generate DIR`: the inventory benchmark's input, written for a profiler to read.
#[derive(clap::Args)]
pub(crate) struct GenerateOpts {
    /// The directory to write the Role files into (it must exist).
    dir: PathBuf,
    /// Nodes in all, spread evenly over the Roles.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    nodes: usize,
    /// Roles (one file each).
    #[arg(long, value_name = "R", default_value_t = 100)]
    roles: usize,
}

impl GenerateOpts {
    pub(crate) fn check(&self) -> Result<(), String> {
        at_least_one("--roles", self.roles)
    }
}

pub(crate) fn generate_cmd(o: &GenerateOpts) -> Result<(), String> {
    generate(&o.dir, o.roles, o.nodes)
}

/// `Err` naming `flag` when `value` is 0 (what the benchmark divides by or needs one of).
pub(crate) fn at_least_one(flag: &str, value: usize) -> Result<(), String> {
    if value == 0 { Err(format!("{flag} 0: give at least 1")) } else { Ok(()) }
}

/// Node counts, comma-separated (`--sizes 10000,50000`): one benchmark round per size.
#[derive(Clone, Debug)]
pub(crate) struct Sizes(pub(crate) Vec<usize>);

impl std::str::FromStr for Sizes {
    type Err = String;
    fn from_str(s: &str) -> Result<Sizes, String> {
        s.split(',')
            .map(|n| {
                n.trim().parse().map_err(|_| format!("{n:?} is not a number of nodes (give e.g. 250,10000)"))
            })
            .collect::<Result<_, _>>()
            .map(Sizes)
    }
}

/// The generated Role files as one JSON `kind: List` each (the shape the API server returns),
/// read with edpm-agent's own YAML reader.
pub(crate) fn to_json(from: &Path, to: &Path) -> Result<(), String> {
    for path in files_in(from)? {
        let text = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
        let items = edpm_core::yaml::to_json_values(&text).map_err(|e| e.to_string())?;
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let name = path.with_extension("json");
        let name = name.file_name().ok_or("no file name")?;
        fs_err::write(to.join(name), list.to_string()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The generated YAML files as one file of as many documents; the JSON ones as one List.
pub(crate) fn to_one_file(from: &Path, to: &Path, json: bool) -> Result<(), String> {
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

pub(crate) fn files_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(|e| e.to_string())?.filter_map(|e| Some(e.ok()?.path())).collect();
    files.sort();
    Ok(files)
}

/// Writes `roles` Roles and `total / roles` Nodes each, like the example deployment.
pub(crate) fn generate(dir: &Path, roles: usize, total: usize) -> Result<(), String> {
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

pub(crate) fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs = vec![PathBuf::from(".venv/bin")];
    if let Ok(v) = std::env::var("EDPM_AGENT_TEST_VENV") {
        dirs.insert(0, PathBuf::from(v).join("bin"));
    }
    if let Ok(p) = std::env::var("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The repository's root: the benchmarks read its packaging and scripts.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A count of runs or rounds, parsed: at least 1 (the tables take a best and a median of them).
pub(crate) fn count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("give at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}
