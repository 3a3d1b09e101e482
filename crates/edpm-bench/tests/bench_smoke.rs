//! Every `edpm-bench` benchmark run once at a small size (seconds each), from the debug build
//! the test command makes, so a benchmark that no longer runs fails the tests instead of
//! hanging for the next person who needs it. Each test checks that its benchmark exits 0 and
//! prints its figures' lines, never their values: performance is measured by the benchmarks
//! themselves (BENCHMARKS.md), not asserted by tests. And `--help` and a bad flag, which must
//! end at once, running nothing.
//!
//! A benchmark that needs what the machine lacks (the Python venv, the real API server's
//! binaries, podman) says `SKIPPED` with the reason, as the integration tests do; with `CI`
//! set that fails. Run alone: `cargo test -p edpm-bench --test bench_smoke`.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    reason = "a test: it reads its environment and runs the benchmark as a child"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

/// The repository's root, where the benchmarks look for `.venv` and `target/*.env`.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a benchmark needs beyond the binaries.
#[derive(Clone, Copy)]
enum Needs {
    Nothing,
    /// ansible-core, ansible-runner and oslo.config (scripts/setup-venv.sh).
    Venv,
    /// kube-apiserver and etcd (scripts/apiserver.sh).
    RealApi,
    /// podman and the systemd image (scripts/real-parts.sh).
    RealParts,
}

fn venv() -> Option<PathBuf> {
    let v = std::env::var_os("EDPM_AGENT_TEST_VENV")
        .filter(|v| !v.is_empty())
        .map_or_else(|| repo().join(".venv"), PathBuf::from);
    v.join("bin/ansible-runner").is_file().then_some(v)
}

/// Why the machine cannot run it, or `None`.
fn missing(needs: Needs) -> Option<String> {
    match needs {
        Needs::Nothing => None,
        Needs::Venv => venv().is_none().then(|| {
            "no Python venv with ansible-runner (run scripts/setup-venv.sh, or set EDPM_AGENT_TEST_VENV)"
                .into()
        }),
        Needs::RealApi => edpm_testkit::real_api::Binaries::find(&repo()).err(),
        Needs::RealParts => (!repo().join("target/real-parts.env").is_file()).then(|| {
            "target/real-parts.env is missing: run scripts/real-parts.sh (podman, a systemd image)".into()
        }),
    }
}

/// This benchmark's binary, with the product's beside it (`edpm-agent`, `edpm-agent-node`),
/// which cargo builds for the tests only when the whole workspace is tested: built here once
/// (a no-op when up to date).
fn binaries() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let bench = PathBuf::from(env!("CARGO_BIN_EXE_edpm-bench"));
        edpm_testkit::cargo::build_bin(&repo(), "edpm-agent", "edpm-agent", &bench)?;
        edpm_testkit::cargo::build_bin(&repo(), "edpm-node", "edpm-agent-node", &bench)?;
        Ok(bench)
    });
    built.clone().unwrap_or_else(|e| panic!("the binaries the benchmarks run: {e}"))
}

/// Runs `edpm-bench ARGS` from the repository's root; checks that it succeeds and that its
/// output has a line with each of `lines` (the words of each figure's line).
fn bench(test: &str, needs: Needs, args: &[&str], lines: &[&str]) {
    if let Some(why) = missing(needs) {
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("{test}: {why}, and CI is set");
        }
        // The process's stderr, not the captured print macros: a skip nobody sees is a
        // silent pass.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
        return;
    }
    let exe = binaries();
    let mut cmd = Command::new(&exe);
    cmd.args(args).current_dir(repo());
    if let Some(v) = venv() {
        cmd.env("EDPM_AGENT_TEST_VENV", v);
    }
    let started = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("{test}: cannot run {}: {e}", exe.display()));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{test}: edpm-bench {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    for line in lines {
        assert!(
            stdout.lines().any(|l| l.contains(line)),
            "{test}: no line with {line:?} in its output:\n{stdout}\n{stderr}"
        );
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{test}: {:.1} s", started.elapsed().as_secs_f64());
}

/// A test named `$name` running `edpm-bench ARGS` and looking for `LINES` in its output.
macro_rules! smoke {
    ($name:ident, $needs:expr, [$($arg:expr),* $(,)?], [$($line:expr),* $(,)?]) => {
        #[test]
        fn $name() {
            bench(stringify!($name), $needs, &[$($arg),*], &[$($line),*]);
        }
    };
}

smoke!(
    bench_inventory,
    Needs::Venv,
    ["inventory", "--sizes", "200", "--roles", "4", "--runs", "1", "--ansible-runs", "1"],
    ["200 yaml", "dynamic script (edpm-inventory)"]
);
smoke!(
    bench_oslo,
    Needs::Venv,
    ["oslo", "--nodes", "10", "--runs", "1"],
    ["oslo.config engine", "oslo.config (Python) parse + layer"]
);
smoke!(
    bench_oslo_parse,
    Needs::Venv,
    ["oslo-parse", "--runs", "1"],
    ["10,000 keys, one section", "4x the keys took"]
);
smoke!(
    bench_stage,
    Needs::Venv,
    ["stage", "--files", "100", "--ansible-files", "1"],
    ["no-change re-run:", "Ansible copy module", "per file, no-change"]
);
smoke!(
    bench_readiness,
    Needs::Nothing,
    ["readiness", "--nodes", "1000", "--services", "3", "--runs", "1", "--report-nodes", "100"],
    ["readiness evaluate:", "status report, unchanged re-report:"]
);
smoke!(
    bench_nova,
    Needs::Nothing,
    ["nova", "--sizes", "250", "--runs", "1"],
    ["250 nodes: readiness::evaluate", "250 nodes: status show with Nova"]
);
smoke!(
    bench_node,
    Needs::Nothing,
    ["node", "--services", "3", "--files", "100", "--runs", "1", "--idle-seconds", "1"],
    ["node check:", "idle edpm-agent-node", "requests when nothing changes:"]
);
smoke!(
    bench_node_real,
    Needs::RealParts,
    ["node", "--real", "--services", "2", "--runs", "1"],
    ["real node:", "faked tools"]
);
smoke!(
    bench_run,
    Needs::Venv,
    ["run", "--hosts", "2", "--runs", "1"],
    ["wall: direct median", "cpu (user+sys, every process)"]
);
smoke!(
    bench_summarize,
    Needs::Nothing,
    ["summarize", "--events", "1000", "--runs", "1"],
    ["first run:", "summary:"]
);

/// The controller's figures, on either server.
const CONTROLLER_LINES: &[&str] = &[
    "controller: ready",
    "controller: a failed Job's new pod",
    "changes that move nothing",
    "controller: nothing changing",
    "evaluations over the run",
    "peer: status report",
];

/// Ten NodeSets (the fewest the latency needs), one change, a second of churn and of idle.
const CONTROLLER_ARGS: &[&str] =
    &["--nodes", "1000", "--services", "3", "--changes", "1", "--churn-seconds", "1", "--idle-seconds", "1"];

#[test]
fn bench_controller() {
    let args = [&["controller"], CONTROLLER_ARGS].concat();
    bench("bench_controller", Needs::Nothing, &args, CONTROLLER_LINES);
}

/// Two NodeSets with recorded Secrets (one every node holds, a certificate per node): a
/// certificate rotated, then the shared Secret; no failed-Job latency (fewer than ten).
const ROTATION_ARGS: &[&str] = &[
    "--nodes",
    "200",
    "--services",
    "2",
    "--shared-secrets",
    "1",
    "--node-secrets",
    "1",
    "--rotations",
    "1",
    "--changes",
    "1",
    "--churn-seconds",
    "1",
    "--idle-seconds",
    "1",
];

#[test]
fn bench_controller_rotation() {
    let args = [&["controller"], ROTATION_ARGS].concat();
    let lines = [
        "controller: ready",
        "fewer than the ten the failed-Job latency needs",
        "controller: one node's certificate rotated",
        "controller: one Secret every node holds rotated",
        "controller: nothing changing",
        "evaluations over the run",
        "peer: status report",
    ];
    bench("bench_controller_rotation", Needs::Nothing, &args, &lines);
}

#[test]
fn bench_controller_real_api() {
    let args = [&["controller", "--real-api"], CONTROLLER_ARGS].concat();
    let lines =
        [CONTROLLER_LINES, &["set-up: kube-apiserver", "real server, idle", "real server: of the"]].concat();
    bench("bench_controller_real_api", Needs::RealApi, &args, &lines);
}

/// How long a refusal or a help may take: a benchmark that starts instead runs for minutes.
const NO_RUN: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs `edpm-bench ARGS`, which must end within [`NO_RUN`] (killed and failed otherwise: it
/// started a benchmark); its exit code, stdout and stderr.
fn quick(args: &[&str]) -> (Option<i32>, String, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_edpm-bench"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > NO_RUN {
            let _ = child.kill();
            let _ = child.wait();
            panic!("edpm-bench {}: still running after {NO_RUN:?}: it started a benchmark", args.join(" "));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // Help and errors are a few KiB: the pipes never filled.
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().take(1 << 20).read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().take(1 << 20).read_to_string(&mut err).unwrap();
    (status.code(), out, err)
}

/// `--help` prints the benchmark's flags and runs nothing (it once ran the 10,000-node
/// controller benchmark).
#[test]
fn bench_help_prints_the_flags_and_runs_nothing() {
    let (code, out, err) = quick(&["controller", "--help"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    for flag in [
        "--real-api",
        "--nodes",
        "--services",
        "--changes",
        "--churn-seconds",
        "--idle-seconds",
        "--shared-secrets",
        "--node-secrets",
        "--rotations",
    ] {
        assert!(out.contains(flag), "no {flag} in the help:\n{out}");
    }
    assert!(!out.contains("set-up:") && err.is_empty(), "{out}\n{err}");
    // Every benchmark and helper mode has its help (clap checks its flags' definitions then).
    for bench in [
        "inventory",
        "oslo",
        "oslo-parse",
        "stage",
        "readiness",
        "controller",
        "nova",
        "node",
        "node-check",
        "run",
        "summarize",
        "measure-child",
        "generate",
    ] {
        let (code, out, err) = quick(&[bench, "--help"]);
        assert_eq!(code, Some(0), "{bench} --help:\n{out}\n{err}");
        assert!(out.contains(&format!("Usage: edpm-bench {bench}")), "{bench} --help:\n{out}");
    }
}

/// A flag it does not know (a typo), or a value that is not one, is refused with clap's error
/// naming it, exit 2, before anything starts (a typo once ran the default 10,000 nodes).
#[test]
fn bench_refuses_a_bad_flag_by_name() {
    for (args, names) in [
        (&["controller", "--node", "5"][..], "'--node'"),
        (&["controller", "--rotation", "3"], "'--rotation'"),
        (&["controller", "--nodes", "many"], "'many' for '--nodes <N>'"),
        (&["controller", "--nodes", "ten"], "'ten' for '--nodes <N>'"),
        (&["inventory", "--sizes", "200,x"], "--sizes"),
        // Ignored before: --real checks no staged files and runs no idle agent.
        (&["node", "--real", "--files", "10"], "'--files <F>'"),
        (&["frob"], "'frob'"),
    ] {
        let (code, out, err) = quick(args);
        assert_eq!(code, Some(2), "edpm-bench {}:\n{out}\n{err}", args.join(" "));
        assert!(err.starts_with("error:") && err.contains(names), "edpm-bench {}:\n{err}", args.join(" "));
        assert!(out.is_empty(), "edpm-bench {}:\n{out}", args.join(" "));
    }
}

/// What a benchmark cannot run with is refused the same way, in words that say what to give.
#[test]
fn bench_refuses_values_it_cannot_run_with() {
    for (args, says) in [
        (&["controller", "--nodes", "50"][..], "--nodes 50: give at least 100"),
        (
            &["controller", "--services", "2", "--node-secrets", "3"],
            "--node-secrets 3: at most --services (2)",
        ),
        (&["controller", "--idle-seconds", "0"], "give at least 1"),
        (&["generate", "/nonexistent", "--roles", "0"], "--roles 0: give at least 1"),
        // No run to take a best or a median of (node-check panicked on the empty list).
        (&["node-check", "--config", "/nonexistent", "--runs", "0"], "give at least 1"),
        (&["oslo", "--runs", "0"], "give at least 1"),
        (&["inventory", "--ansible-runs", "0"], "give at least 1"),
    ] {
        let (code, out, err) = quick(args);
        assert_eq!(code, Some(2), "edpm-bench {}:\n{out}\n{err}", args.join(" "));
        assert!(err.starts_with("error: ") && err.contains(says), "edpm-bench {}:\n{err}", args.join(" "));
    }
}

/// A benchmark that starts and fails exits 1, not a usage error's 2, and says why.
#[test]
fn a_benchmark_that_fails_exits_1() {
    let (code, out, err) = quick(&["node-check", "--config", "/nonexistent/bench.yaml", "--runs", "1"]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.starts_with("edpm-bench: ") && err.contains("/nonexistent/bench.yaml"), "{err}");
}

/// `measure-child`, which every timed child goes through, passes the command's own flags on
/// as given (they are not edpm-bench's): `sh -c 'exit $#'` exits with how many it got.
#[test]
fn measure_child_passes_the_command_on_as_given() {
    let (code, out, err) = quick(&["measure-child", "/bin/sh", "-c", "exit $#", "sh", "--help", "--", "-x"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "{out}");
    assert_eq!(fields[2], "3", "the exit status, from the 3 arguments: {out}");
}
