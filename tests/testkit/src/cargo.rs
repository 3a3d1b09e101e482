//! Building a workspace binary from a test that runs it. Cargo builds the binaries of the
//! package under test only; one of another package (the node agent's for the product's
//! tests, the product's for the benchmarks' smoke run) is built here, once, with cargo itself
//! (a no-op when it is up to date).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `bin` of `package` in `repo` (the workspace), in the profile of the directory
/// `beside` is in (`target/debug` or `target/release`), and returns its path there.
///
/// The environment cargo gives a test process is not passed on: build scripts that track its
/// variables (ring's reruns when `CARGO_MANIFEST_DIR` or `CARGO_PKG_NAME` change) would see
/// values the command line's cargo never has, rebuild ring and all that depends on it, and
/// the next `cargo test` would rebuild it all back.
pub fn build_bin(repo: &Path, package: &str, bin: &str, beside: &Path) -> Result<PathBuf, String> {
    let dir = beside.parent().ok_or_else(|| format!("{} has no directory", beside.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo).args(["build", "--quiet", "--locked", "-p", package, "--bin", bin]);
    if dir.file_name().is_some_and(|p| p == "release") {
        cmd.arg("--release");
    }
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        let set_for_tests = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_",
            "CARGO_TARGET_TMPDIR",
        ]
        .iter()
        .any(|p| k.starts_with(p));
        if set_for_tests || k == "OUT_DIR" {
            cmd.env_remove(&key);
        }
    }
    let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build -p {package} --bin {bin}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(dir.join(bin))
}
