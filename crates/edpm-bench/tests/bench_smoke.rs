//! Every `edpm-bench` benchmark run once at a small size (seconds each), from the debug build
//! the test command makes, so a benchmark that no longer runs fails the tests instead of
//! hanging for the next person who needs it. Each test checks that its benchmark exits 0 and
//! prints its figures' lines, never their values: performance is measured by the benchmarks
//! themselves (BENCHMARKS.md), not asserted by tests.
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

/// A bad flag is refused in words that name it, before anything starts.
#[test]
fn bench_refuses_a_bad_flag_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_edpm-bench"))
        .args(["controller", "--nodes", "ten"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--nodes \"ten\"") && err.lines().count() == 1, "{err}");
}
