//! The node agent: its facts (files of the wrong shape, missing runtimes), the commands it runs (podman, systemctl) and its settings.
//!
//! Each case runs the binary on a small node root (no `stage` needed) with fake `systemctl`
//! and `podman` shell scripts first on PATH. A misbehaving fake records the pids of what it
//! started, so a test can tell that the agent killed them rather than left them running.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::fake_api::FakeApi;
use crate::util::{Output, bin, repo};

/// A node as edpm-ansible leaves it, with nova deployed and fake tools that answer well.
struct Node {
    dir: tempfile::TempDir,
    root: PathBuf,
    tools: PathBuf,
}

const UNITS: &str = "Id=edpm_nova_compute.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNeedDaemonReload=no\n";
const PS: &str = r#"[{"Names":["nova_compute"],"Status":"Up 2 hours (healthy)","Labels":{}}]"#;

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let tools = dir.path().join("bin");
        std::fs::create_dir_all(&tools).unwrap();
        let n = Node { dir, root, tools };
        n.write("etc/hostname", "edpm-compute-3\n");
        n.write(
            "proc/net/fib_trie",
            "Local:\n  +-- 192.168.122.0/24 2 0 2\n     |-- 192.168.122.103\n        /32 host LOCAL\n",
        );
        n.write("etc/os-release", "NAME=\"CentOS Stream\"\nPRETTY_NAME=\"CentOS Stream 9\"\n");
        n.write("var/lib/edpm-config/os-net-config.returncode", "0\n");
        n.write("usr/bin/podman", "#!/bin/sh\n");
        n.chmod("usr/bin/podman", 0o755);
        n.write(
            "var/lib/edpm-config/deployed_services.yaml",
            "services:\n  nova:\n    containers: [nova_compute]\n    updated_at: '2026-11-01T10:00:00Z'\n",
        );
        std::fs::write(n.dir.path().join("units.txt"), UNITS).unwrap();
        std::fs::write(n.dir.path().join("ps.json"), PS).unwrap();
        n.tool("systemctl", &format!("cat {}", n.dir.path().join("units.txt").display()));
        n.tool("podman", &format!("cat {}", n.dir.path().join("ps.json").display()));
        n
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn chmod(&self, rel: &str, mode: u32) {
        std::fs::set_permissions(self.root.join(rel), std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
    }

    fn chmod_tool(&self, name: &str, mode: u32) {
        std::fs::set_permissions(self.tools.join(name), std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
    }

    /// A fake command on PATH: a shell script with this body.
    fn tool(&self, name: &str, body: &str) {
        let p = self.tools.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// node.yaml for this root, with `extra` lines appended.
    fn config(&self, extra: &str) -> PathBuf {
        let p = self.file("node.yaml");
        std::fs::write(
            &p,
            format!(
                "namespace: openstack\nobject: edpm-compute-cell1-edpm-compute-3\nnode: edpm-compute-3\nroot: {}\nexpect:\n  hostname: edpm-compute-3\n  addresses: [192.168.122.103]\n{extra}",
                self.root.display()
            ),
        )
        .unwrap();
        p
    }

    fn path(&self) -> String {
        format!("{}:{}", self.tools.display(), std::env::var("PATH").unwrap_or_default())
    }

    /// `node --once --format json` with this config, bounded.
    fn once(&self, config: &Path) -> (Output, Value) {
        let out =
            self.run(&["node", "--once", "--format", "json", "--config", config.to_str().unwrap()], None);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let v = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
        (out, v)
    }

    /// Runs the binary with the fake tools first on PATH, its output to files (so nothing it
    /// leaves behind can hold a pipe of ours), killed and failed after 60 s. `data_limit`
    /// bounds its data segment (RLIMIT_DATA, which counts anonymous memory).
    fn run(&self, args: &[&str], data_limit: Option<u64>) -> Output {
        self.run_measured(args, data_limit).0
    }

    /// [`Node::run`], and the most memory the process held (its peak resident set, in KiB).
    fn run_measured(&self, args: &[&str], data_limit: Option<u64>) -> (Output, i64) {
        let (out, err) = (self.file("stdout"), self.file("stderr"));
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .current_dir(repo())
            .env_clear()
            .env("PATH", self.path())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap());
        if let Some(limit) = data_limit {
            // SAFETY: setrlimit is async-signal-safe and only touches this child.
            unsafe {
                cmd.pre_exec(move || {
                    let l = libc::rlimit { rlim_cur: limit, rlim_max: limit };
                    if libc::setrlimit(libc::RLIMIT_DATA, &l) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        // Reaped below by wait4, not by Child::wait.
        let pid = cmd.spawn().unwrap().id() as i32;
        let started = Instant::now();
        // wait4 rather than Child::wait: it also gives the peak resident set.
        let (status, max_rss) = loop {
            let mut status = 0;
            // SAFETY: rusage is plain data, written by wait4 for our own child.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: wait4 on our own child, with out-pointers to locals.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid {
                break (status, usage.ru_maxrss);
            }
            assert_eq!(r, 0, "wait4: {}", std::io::Error::last_os_error());
            if started.elapsed() > Duration::from_secs(60) {
                // SAFETY: killing and reaping our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                panic!("edpm-agent {args:?} still running after 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
        let out = Output {
            code,
            stdout: std::fs::read_to_string(out).unwrap(),
            stderr: std::fs::read_to_string(err).unwrap(),
        };
        (out, max_rss)
    }
}

fn wait_bounded(child: &mut std::process::Child, limit: Duration, what: &[&str]) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("edpm-agent {what:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cond<'a>(v: &'a Value, ty: &str) -> &'a Value {
    v["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {v}"))
}

fn message(c: &Value) -> &str {
    c["message"].as_str().unwrap()
}

/// Whether the process is gone (or a zombie nobody reaped yet: it runs no more).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (bounded) until every pid in `file` is gone; the pids still running otherwise.
fn still_running(file: &Path, within: Duration) -> Vec<i32> {
    let pids: Vec<i32> = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}: the fake never ran", file.display()))
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(!pids.is_empty());
    let deadline = Instant::now() + within;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|p| !gone(*p)).collect();
        if left.is_empty() || Instant::now() > deadline {
            for p in &left {
                // SAFETY: kill(2) on a pid this test's fake started; cleaning up after a failure.
                unsafe { libc::kill(*p, libc::SIGKILL) };
            }
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn waits_for_file(file: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !file.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    // The fake writes its pids in one echo; give it the moment to finish the line.
    std::thread::sleep(Duration::from_millis(100));
}

// ---------------------------------------------------------------------------------------------
// It says Ready when it is not.

#[test]
fn deployed_services_of_the_wrong_shape_are_facts_unavailable_naming_the_file_and_key() {
    let n = Node::new();
    let cfg = n.config("");
    for (text, key) in [
        // A typo in the top-level key: read before as "0 deployed service(s)", Ready.
        ("servics:\n  nova:\n    containers: [nova_compute]\n", "services"),
        // A typo in a service's key: read before as "0 container(s) active", Ready.
        ("services:\n  nova:\n    container: [nova_compute]\n", "services.nova.containers"),
        ("services: [nova]\n", "services"),
        ("services:\n  nova: [nova_compute]\n", "services.nova"),
        ("- nova\n", "services"),
    ] {
        n.write("var/lib/edpm-config/deployed_services.yaml", text);
        let (_, v) = n.once(&cfg);
        let c = cond(&v, "NodeAgentReady");
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("Unknown"), Some("FactsUnavailable")),
            "{text:?}: {c}"
        );
        let m = message(c);
        assert!(m.contains("deployed_services.yaml") && m.contains(key), "{text:?}: {m}");
        assert!(!m.contains("deployed service(s)"), "{m}");
        assert_eq!(v["ready"], false);
    }
    // What edpm-ansible writes when nothing is deployed (and reads an empty file as) is not a
    // problem.
    for text in ["services: {}\n", ""] {
        n.write("var/lib/edpm-config/deployed_services.yaml", text);
        let (_, v) = n.once(&cfg);
        assert_eq!(cond(&v, "NodeAgentReady")["status"], "True", "{text:?}: {v}");
    }
}

/// No podman under the root: `NodeAgentReady` is False (`ContainerRuntimeMissing`), deployed
/// services or not (it was True, "no container runtime yet", before any was deployed); nor is
/// a directory or a file no one may execute in podman's place a runtime.
#[test]
fn without_podman_under_the_root_the_runtime_is_not_called_present() {
    let n = Node::new();
    let cfg = n.config("");
    std::fs::remove_file(n.root.join("usr/bin/podman")).unwrap();
    std::fs::remove_file(n.root.join("var/lib/edpm-config/deployed_services.yaml")).unwrap();
    let (_, v) = n.once(&cfg);
    let c = cond(&v, "NodeAgentReady");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("ContainerRuntimeMissing")),
        "{c}"
    );
    let m = message(c).to_string();
    assert!(!m.contains("container runtime present"), "{m}");
    assert!(m.contains("podman is not installed (no program at usr/bin/podman)"), "{m}");
    assert_eq!(v["ready"], false);

    // A file in podman's place that no one may execute.
    n.write("usr/bin/podman", "#!/bin/sh\n");
    n.chmod("usr/bin/podman", 0o644);
    let (_, v) = n.once(&cfg);
    let c = cond(&v, "NodeAgentReady");
    assert_eq!(c["status"], "False", "{c}");
    assert!(message(c).contains("usr/bin/podman cannot be executed (mode 0644)"), "{c}");
    std::fs::remove_file(n.root.join("usr/bin/podman")).unwrap();

    // Something that is not a program in podman's place is no runtime either.
    std::fs::create_dir_all(n.root.join("usr/bin/podman")).unwrap();
    let (_, v) = n.once(&cfg);
    assert_eq!(cond(&v, "NodeAgentReady")["status"], "False", "{v}");
    assert!(!message(cond(&v, "NodeAgentReady")).contains("container runtime present"), "{v}");
    n.write(
        "var/lib/edpm-config/deployed_services.yaml",
        "services:\n  nova:\n    containers: [nova_compute]\n",
    );
    let (_, v) = n.once(&cfg);
    assert_eq!(cond(&v, "NodeAgentReady")["reason"], "ContainerRuntimeMissing", "{v}");
}

/// podman is in its place, but the podman the agent runs cannot be started (permission
/// denied): `NodeAgentReady` is False, saying so, never "container runtime present" beside the
/// services' "permission denied".
#[test]
fn a_podman_that_cannot_be_executed_is_no_runtime() {
    let n = Node::new();
    let cfg = n.config("");
    // The only podman on PATH may not be executed (PATH is the fake tools' alone, so that a
    // podman of the machine running the test is not found after it).
    n.chmod_tool("podman", 0o644);
    let out = crate::util::run_program(
        &bin(),
        &["node", "--once", "--format", "json", "--config", cfg.to_str().unwrap()],
        &[("PATH", n.tools.to_str().unwrap())],
    );
    let v: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", out.stdout, out.stderr));
    let c = cond(&v, "NodeAgentReady");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("ContainerRuntimeMissing")),
        "{c}"
    );
    let m = message(c);
    assert!(m.contains("podman cannot be run") && m.contains("permission denied"), "{m}");
    assert!(!m.contains("container runtime present"), "{m}");
    assert_eq!(v["ready"], false);
}

/// `expect.addresses` holding a host name (not an IP address) is refused at start, naming the
/// file, its line and the field; it used to be read as an address the node never holds.
#[test]
fn a_host_name_in_expect_addresses_is_refused_at_start() {
    let n = Node::new();
    let p = n.file("node.yaml");
    std::fs::write(
        &p,
        format!(
            "namespace: openstack\nobject: edpm-compute-cell1-edpm-compute-3\nnode: edpm-compute-3\nroot: {}\nexpect:\n  hostname: edpm-compute-3\n  addresses: [192.168.122.103, edpm-compute-3.ctlplane.example.com]\n",
            n.root.display()
        ),
    )
    .unwrap();
    let out = n.run(&["node", "--once", "--format", "json", "--config", p.to_str().unwrap()], None);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("node.yaml:7"), "{}", out.stderr);
    assert!(
        out.stderr.contains("expect.addresses")
            && out.stderr.contains("\"edpm-compute-3.ctlplane.example.com\" is not an IP address"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

// ---------------------------------------------------------------------------------------------
// It leaks secrets.

#[test]
fn podman_stderr_reaches_conditions_masked_and_escaped() {
    let n = Node::new();
    let cfg = n.config("");
    n.tool(
        "podman",
        "printf 'WARN[0000] \\033[31mcannot reach postgres://nova:S3cretPassw0rd@db.example/nova\\033[0m\\n' >&2\nprintf 'Error: login failed: password=hunter2hunter2 \\033]0;pwned\\007\\n' >&2\nexit 125",
    );
    let (_, v) = n.once(&cfg);
    let c = cond(&v, "ServiceNovaRuntimeReady");
    assert_eq!(c["reason"], "FactsUnavailable", "{c}");
    let m = message(c);
    assert!(m.contains("podman") && m.contains("125"), "{m}");
    assert!(!m.contains("S3cretPassw0rd") && !m.contains("hunter2hunter2"), "{m}");
    assert!(!m.chars().any(|ch| ch.is_control()), "control characters reach the condition: {m:?}");
    // The text form of the same check.
    let out = n.run(&["node", "--once", "--config", cfg.to_str().unwrap()], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stdout.contains("S3cretPassw0rd") && !out.stdout.contains("hunter2hunter2"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains('\u{1b}') && !out.stdout.contains('\u{7}'), "{:?}", out.stdout);

    // The same from systemctl.
    let n = Node::new();
    n.tool("systemctl", "echo 'Failed to connect to bus: token=abcdef0123456789abcdef' >&2\nexit 1");
    let (_, v) = n.once(&n.config(""));
    let m = message(cond(&v, "ServiceNovaRuntimeReady"));
    assert!(m.contains("systemctl") && !m.contains("abcdef0123456789abcdef"), "{m}");
}

// ---------------------------------------------------------------------------------------------
// It waits past its timeout, or forever.

#[test]
fn a_grandchild_holding_podmans_output_is_killed_at_the_limit() {
    let n = Node::new();
    let cfg = n.config("command_timeout_seconds: 3\n");
    let pids = n.file("pids");
    // podman answers and exits, leaving a process behind that holds its stdout open.
    n.tool(
        "podman",
        &format!("sleep 600 &\necho $! > {}\ncat {}", pids.display(), n.file("ps.json").display()),
    );
    let (_, v) = n.once(&cfg);
    let c = cond(&v, "ServiceNovaRuntimeReady");
    assert_eq!(c["reason"], "FactsUnavailable", "{c}");
    let m = message(c);
    assert!(m.contains("podman") && m.contains("3 s") && m.contains("killed"), "{m}");
    assert_eq!(
        still_running(&pids, Duration::from_secs(10)),
        Vec::<i32>::new(),
        "the grandchild was left running"
    );
}

#[test]
fn endless_output_is_capped() {
    let n = Node::new();
    let cfg = n.config("command_timeout_seconds: 3\n");
    // Hundreds of megabytes a second, for ever.
    n.tool("podman", "exec yes '[{\"Names\":[\"nova_compute\"],\"Status\":\"Up\"}]'");
    // A gigabyte of memory as a safety net: what the output reaches in a few seconds when
    // nothing caps it.
    let (out, max_rss_kib) = n.run_measured(
        &["node", "--once", "--format", "json", "--config", cfg.to_str().unwrap()],
        Some(1 << 30),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(max_rss_kib < 256 * 1024, "the agent held {max_rss_kib} KiB: the output was not capped");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let c = cond(&v, "ServiceNovaRuntimeReady");
    assert_eq!(c["reason"], "FactsUnavailable", "{c}");
    let m = message(c);
    assert!(m.contains("podman") && m.contains("bytes"), "{m}");
}

#[test]
fn a_failure_with_much_stderr_is_reported_as_its_exit_status() {
    let n = Node::new();
    // The default limit (20 s): a hang would show as a timeout.
    let cfg = n.config("");
    // 138 KB of warnings (more than a pipe holds), then an error and exit 125.
    n.tool(
        "podman",
        "i=0\nwhile [ $i -lt 2000 ]; do echo \"WARN[0000] a warning podman prints on every call, number $i\" >&2; i=$((i+1)); done\necho 'Error: database is locked' >&2\nexit 125",
    );
    let (_, v) = n.once(&cfg);
    let m = message(cond(&v, "ServiceNovaRuntimeReady")).to_string();
    assert!(m.contains("125") && m.contains("Error: database is locked"), "{m}");
    assert!(!m.contains("did not finish"), "{m}");
    // Killed by a signal: said so.
    n.tool("podman", "kill -9 $$");
    let (_, v) = n.once(&cfg);
    let m = message(cond(&v, "ServiceNovaRuntimeReady")).to_string();
    assert!(m.contains("podman") && m.contains("signal 9"), "{m}");
}

#[test]
fn sigterm_kills_the_running_query_with_its_group() {
    // --once: interrupted, it kills what it started and says so.
    let n = Node::new();
    let cfg = n.config("");
    let pids = n.file("pids");
    n.tool("podman", &format!("sleep 600 &\necho $$ $! > {}\nwait", pids.display()));
    let mut child = Command::new(bin())
        .args(["node", "--once", "--config", cfg.to_str().unwrap()])
        .env_clear()
        .env("PATH", n.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(n.file("stderr")).unwrap())
        .spawn()
        .unwrap();
    waits_for_file(&pids, Duration::from_secs(30));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_bounded(&mut child, Duration::from_secs(30), &["node", "--once"]);
    assert_ne!(status.code(), Some(0), "an interrupted check is no result");
    let err = std::fs::read_to_string(n.file("stderr")).unwrap();
    assert!(err.contains("podman") || err.contains("interrupted"), "{err}");
    assert_eq!(
        still_running(&pids, Duration::from_secs(10)),
        Vec::<i32>::new(),
        "podman's group was left running"
    );

    // The service: SIGTERM during a check stops it within seconds, not at the command's limit,
    // and kills the query's group.
    let n = Node::new();
    let api = FakeApi::start();
    let kc = api.kubeconfig();
    let cfg = n.config(&format!("kubeconfig: {}\n", kc.display()));
    let pids = n.file("pids");
    n.tool("podman", &format!("sleep 600 &\necho $$ $! > {}\nwait", pids.display()));
    let mut child = Command::new(bin())
        .args(["node", "--config", cfg.to_str().unwrap()])
        .env_clear()
        .env("PATH", n.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(n.file("stderr")).unwrap())
        .spawn()
        .unwrap();
    waits_for_file(&pids, Duration::from_secs(30));
    let started = Instant::now();
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_bounded(&mut child, Duration::from_secs(60), &["node"]);
    let took = started.elapsed();
    let err = std::fs::read_to_string(n.file("stderr")).unwrap();
    assert!(status.success(), "{status}: {err}");
    // The command's limit is 20 s; a stop that waits for it is a stop that hangs.
    assert!(took < Duration::from_secs(15), "took {took:?}: {err}");
    assert_eq!(
        still_running(&pids, Duration::from_secs(10)),
        Vec::<i32>::new(),
        "podman's group was left running"
    );
}

// ---------------------------------------------------------------------------------------------
// Settings: zero, absurd and empty values are refused at start.

#[test]
fn zero_and_absurd_durations_are_refused_at_start_naming_file_key_and_range() {
    let n = Node::new();
    let api = FakeApi::start();
    let kc = api.kubeconfig();
    for key in [
        "check_interval_seconds",
        "lease_interval_seconds",
        "lease_duration_seconds",
        "heartbeat_seconds",
        "request_timeout_seconds",
        "command_timeout_seconds",
    ] {
        for value in ["0", "18446744073709551615", "9223372036854775807", "-1"] {
            let cfg = n.config(&format!("kubeconfig: {}\n{key}: {value}\n", kc.display()));
            // The service, not --once: it must not start (and never report, or panic).
            let out = n.run(&["node", "--config", cfg.to_str().unwrap()], None);
            assert_eq!(out.code, 3, "{key}: {value}: {}", out.stderr);
            let err = &out.stderr;
            assert!(
                err.contains("node.yaml") && err.contains(key) && !err.contains("panicked"),
                "{key}: {value}: {err}"
            );
            if value != "-1" {
                assert!(err.contains(" to "), "{key}: {value}: the accepted range: {err}");
            }
        }
    }
}

#[test]
fn an_absurd_watchdog_interval_neither_panics_nor_spins() {
    let n = Node::new();
    let api = crate::status_api::cluster();
    let kc = api.kubeconfig();
    let out = crate::util::run(
        &["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "report"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cfg = n.config(&format!("kubeconfig: {}\ncheck_interval_seconds: 1\n", kc.display()));
    for usec in ["18446744073709551615", "0"] {
        let sock_path = n.file(&format!("notify-{usec}.sock"));
        let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut child = Command::new(bin())
            .args(["node", "--config", cfg.to_str().unwrap()])
            .env_clear()
            .env("PATH", n.path())
            .env("NOTIFY_SOCKET", &sock_path)
            .env("WATCHDOG_USEC", usec)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(n.file("stderr")).unwrap())
            .spawn()
            .unwrap();
        // READY=1 (however long a loaded machine takes to get there), then three seconds of
        // notifications: no flood of WATCHDOG=1.
        let mut got: Vec<String> = Vec::new();
        let mut buf = [0u8; 4096];
        let started = Instant::now();
        let mut until: Option<Instant> = None;
        while until.is_none_or(|u| Instant::now() < u) {
            if let Ok(k) = sock.recv(&mut buf) {
                got.push(String::from_utf8_lossy(&buf[..k]).into_owned());
            }
            if until.is_none() && got.iter().any(|m| m.lines().any(|l| l == "READY=1")) {
                until = Some(Instant::now() + Duration::from_secs(3));
            }
            assert!(started.elapsed() < Duration::from_secs(60), "WATCHDOG_USEC={usec}: no READY=1: {got:?}");
            if let Some(s) = child.try_wait().unwrap() {
                panic!(
                    "WATCHDOG_USEC={usec}: exited {s}: {}",
                    std::fs::read_to_string(n.file("stderr")).unwrap()
                );
            }
        }
        // SAFETY: signalling the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = wait_bounded(&mut child, Duration::from_secs(30), &["node"]);
        let err = std::fs::read_to_string(n.file("stderr")).unwrap();
        assert!(status.success() && !err.contains("panicked"), "WATCHDOG_USEC={usec}: {status}: {err}");
        let watchdogs = got.iter().filter(|m| m.lines().any(|l| l == "WATCHDOG=1")).count();
        assert!(got.iter().any(|m| m.lines().any(|l| l == "READY=1")), "WATCHDOG_USEC={usec}: {got:?}");
        assert!(watchdogs <= 10, "WATCHDOG_USEC={usec}: {watchdogs} WATCHDOG=1 in 3 s");
    }
}

// ---------------------------------------------------------------------------------------------
// Messages.

#[test]
fn a_blank_pretty_name_falls_back_to_id_and_version() {
    let n = Node::new();
    n.write("etc/os-release", "PRETTY_NAME=\" \"\nID=centos\nVERSION_ID=\"9\"\n");
    let (_, v) = n.once(&n.config("  os: centos 9\n"));
    assert_eq!(cond(&v, "NodeAgentReady")["status"], "True", "{v}");
    let (_, v) = n.once(&n.config("  os: Fedora\n"));
    let m = message(cond(&v, "NodeAgentReady"));
    assert!(m.contains("booted \"centos 9\""), "{m}");
    // Nothing to go by: said so, not matched against a blank.
    n.write("etc/os-release", "PRETTY_NAME=\"\"\n");
    let (_, v) = n.once(&n.config("  os: Fedora\n"));
    let c = cond(&v, "NodeAgentReady");
    assert_eq!(c["reason"], "FactsUnavailable", "{c}");
    assert!(message(c).contains("etc/os-release"), "{c}");
}

#[test]
fn an_empty_expected_os_is_refused() {
    let n = Node::new();
    for value in ["\"\"", "\"  \""] {
        let cfg = n.config(&format!("  os: {value}\n"));
        let out = n.run(&["node", "--once", "--config", cfg.to_str().unwrap()], None);
        assert_eq!(out.code, 3, "os: {value}: {}", out.stdout);
        assert!(out.stderr.contains("node.yaml") && out.stderr.contains("expect.os"), "{}", out.stderr);
    }
}

/// A unit state of 900 KiB from systemctl (as a 1 MiB image name from podman) makes no such
/// condition message: every message is bounded at 32 KiB, as `metav1.Condition` validates
/// it, and says it was cut.
#[test]
fn a_huge_answer_makes_no_condition_message_past_32_kib() {
    let n = Node::new();
    let huge = UNITS
        .replace("SubState=running", &format!("SubState={}", "x".repeat(900_000)))
        .replace("ActiveState=active", "ActiveState=failed");
    std::fs::write(n.dir.path().join("units.txt"), huge).unwrap();
    let (_, v) = n.once(&n.config(""));
    let mut cut = 0;
    for c in v["conditions"].as_array().unwrap() {
        let m = message(c);
        assert!(m.len() <= 32 * 1024, "{}: a message of {} bytes", c["type"], m.len());
        if m.contains(" bytes in all)") {
            cut += 1;
        }
    }
    assert!(cut > 0, "no message names the cut: {v}");
}
