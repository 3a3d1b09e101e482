//! Test helpers.

pub use edpm_testkit::fake_api;
pub mod fake_openstack;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary under test; `EDPM_AGENT_TEST_BIN` names another build (to show that a test
/// fails on an older one).
///
/// `edpm-agent node` runs `edpm-agent-node` beside it, which Cargo does not build for this
/// package's tests (a clean `cargo test --workspace` has no `target/debug/edpm-agent-node`
/// until something builds it), so the first call builds it (`node_bin`), whichever test
/// happens to run first.
pub fn bin() -> PathBuf {
    match std::env::var_os("EDPM_AGENT_TEST_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            node_bin();
            PathBuf::from(env!("CARGO_BIN_EXE_edpm-agent"))
        }
    }
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `../shared` (the upstream fixtures) is beside the checkout. Outside CI a test
/// that needs it is skipped with a notice on the terminal; in CI (`CI` set) its absence fails
/// the test, so a broken CI layout cannot pass silently.
pub fn have_shared(test: &str) -> bool {
    if repo().join("../shared/reference/upstream").is_dir() {
        return true;
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{test}: ../shared/reference/upstream is missing beside the checkout, and CI is set");
    }
    // Written to the process's stderr directly: the test harness captures only the print
    // macros, and a skip nobody sees is a silent pass.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: ../shared is not beside the checkout (clone it there to run this test)"
    );
    false
}

/// Upstream fixtures (read-only test data); call [`have_shared`] first.
pub fn upstream(rel: &str) -> String {
    let p = repo().join("../shared/reference/upstream/openstack").join(rel);
    assert!(p.exists(), "fixture {} is missing from ../shared", p.display());
    p.display().to_string()
}

pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the binary in the repository root with a clean environment (only PATH and HOME),
/// so that a developer's EDPM_AGENT_* or KUBECONFIG never leaks into a test.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_program(&bin(), args, env)
}

pub fn run_program(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(repo()).env_clear();
    for var in ["PATH", "HOME", "LANG", "TMPDIR"] {
        if let Ok(v) = std::env::var(var) {
            cmd.env(var, v);
        }
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A tool from the Python venv that `.ci/run` creates (ansible-core, oslo.config). Looks in
/// `$EDPM_AGENT_TEST_VENV/bin`, then `./.venv/bin`, then PATH.
pub fn python_tool(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(v) = std::env::var("EDPM_AGENT_TEST_VENV") {
        dirs.push(PathBuf::from(v).join("bin"));
    }
    dirs.push(repo().join(".venv/bin"));
    if let Ok(path) = std::env::var("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("{name} not found: run `bash .ci/run` once (it creates .venv with ansible-core and oslo.config) or set EDPM_AGENT_TEST_VENV")
    })
}

/// Replaces machine-specific paths so snapshots are stable.
pub fn normalize(s: &str) -> String {
    let repo = repo().display().to_string();
    let shared = repo.clone() + "/../shared/reference/upstream/openstack";
    s.replace(&shared, "[UPSTREAM]").replace(&repo, "[REPO]")
}

/// A copy of examples/controlplane and examples/dataplane to edit, in `dir/controlplane` and
/// `dir/dataplane`.
pub fn example_copy(dir: &Path) {
    for sub in ["controlplane", "dataplane"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for e in std::fs::read_dir(repo().join("examples").join(sub)).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, dir.join(sub).join(p.file_name().unwrap())).unwrap();
        }
    }
}

/// The node agent's own binary (`edpm-agent-node`, crate `edpm-node`), beside the binary under
/// test. Cargo builds it for the tests only when the whole workspace is tested, so it is
/// built here (`edpm_testkit::cargo::build_bin`), once per test process, when asked for (a
/// no-op when it is up to date);
/// `EDPM_AGENT_TEST_NODE_BIN` names another build.
pub fn node_bin() -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    if let Some(p) = std::env::var_os("EDPM_AGENT_TEST_NODE_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let built = BUILT.get_or_init(|| {
        let beside = PathBuf::from(env!("CARGO_BIN_EXE_edpm-agent"));
        edpm_testkit::cargo::build_bin(&repo(), "edpm-node", "edpm-agent-node", &beside)
    });
    built.clone().unwrap_or_else(|e| panic!("the node agent's binary: {e}"))
}

/// The real API server of this test run (kube-apiserver and etcd, `edpm_testkit::real_api`),
/// started on first use and shared: each test takes a namespace of its own. Without the
/// binaries (`scripts/apiserver.sh` builds them) the test is skipped with a notice outside CI
/// and fails in CI; a server that cannot start fails the test.
pub fn real_api(test: &str) -> Option<&'static edpm_testkit::real_api::RealApi> {
    let bins = real_api_binaries(test)?;
    Some(
        edpm_testkit::real_api::RealApi::shared(&bins)
            .unwrap_or_else(|e| panic!("{test}: the real API server: {e}")),
    )
}

/// The real API server's binaries, or `None` (skipped) outside CI when they are not built.
pub fn real_api_binaries(test: &str) -> Option<edpm_testkit::real_api::Binaries> {
    match edpm_testkit::real_api::Binaries::find(&repo()) {
        Ok(b) => Some(b),
        Err(why) => {
            if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
                panic!("{test}: no real API server, and CI is set: {why}");
            }
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            None
        }
    }
}

/// The hosts each Deployment `status plan` printed limits to (its `ansibleLimit`, split as
/// ansible-runner passes it on), in the plan's order.
pub fn planned_limits(stdout: &str) -> Vec<Vec<String>> {
    let planned: Vec<serde_json::Value> = serde_saphyr::from_multiple(stdout).unwrap();
    planned
        .iter()
        .filter(|d| d["kind"] == "OpenStackDataPlaneDeployment")
        .map(|d| d["spec"]["ansibleLimit"].as_str().unwrap().split(',').map(String::from).collect())
        .collect()
}
