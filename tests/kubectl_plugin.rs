//! `kubectl edpm`: linked as `kubectl-edpm` (as the RPM and `packaging/install.sh` link it),
//! the binary is a kubectl plugin. kubectl runs it with every argument after `edpm` and its
//! own environment (KUBECONFIG); the source is the cluster unless told otherwise, and
//! kubectl's `--kubeconfig`, `--context` and `-n` work as kubectl's do.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{Output, bin};

/// A directory holding `kubectl-edpm`, linked to the binary under test.
fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(bin(), dir.path().join("kubectl-edpm")).unwrap();
    dir
}

/// kubectl, when installed (CI has it: a run without it fails there).
fn kubectl() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubectl is not installed; CI runs `kubectl edpm` through it"
        );
        eprintln!("kubectl_plugin: no kubectl; running kubectl-edpm directly");
    }
    found
}

/// `kubectl edpm ARGS` with the plugin on the PATH (or `kubectl-edpm ARGS` without kubectl).
fn kubectl_edpm(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = match kubectl() {
        Some(k) => {
            let mut c = Command::new(k);
            c.arg("edpm");
            c
        }
        None => Command::new(dir.join("kubectl-edpm")),
    };
    let out = cmd
        .args(args)
        .env("PATH", path)
        .env_remove("EDPM_AGENT_SOURCE")
        .env_remove("KUBECONFIG")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn kubectl_edpm_reads_the_cluster_with_kubectls_flags_and_environment() {
    let api = crate::status_api::cluster();
    let kc = api.kubeconfig();
    let dir = plugin_dir();
    // kubectl's own flags, after the plugin's name; no --source: the cluster is the default.
    let out = kubectl_edpm(
        dir.path(),
        &["status", "show", "--kubeconfig", kc.to_str().unwrap(), "--context", "fake", "-n", "openstack"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("edpm-compute-5"), "{}", out.stdout);
    // KUBECONFIG, as kubectl passes its environment on.
    let out = kubectl_edpm(dir.path(), &["status", "show"], &[("KUBECONFIG", kc.to_str().unwrap())]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("edpm-compute-5"), "{}", out.stdout);
    assert!(
        api.requests().iter().any(|r| r.contains("/namespaces/openstack/")),
        "read from the fake cluster"
    );
    // A namespace with nothing in it is that namespace, not the kubeconfig's.
    let out = kubectl_edpm(
        dir.path(),
        &["status", "show", "-n", "elsewhere", "--kubeconfig", kc.to_str().unwrap()],
        &[],
    );
    assert!(!out.stdout.contains("edpm-compute-5"), "{}", out.stdout);
    // An explicit source still wins.
    let examples = crate::util::repo().join("examples");
    let out = kubectl_edpm(dir.path(), &["validate", "--source", examples.to_str().unwrap()], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn kubectl_edpm_says_its_name_in_usage_and_help() {
    let dir = plugin_dir();
    let out = kubectl_edpm(dir.path(), &["--help"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Usage: kubectl edpm"), "{}", out.stdout);
    // It leads with what it reads by default: the cluster, in the context's namespace.
    let first = out.stdout.lines().next().unwrap_or("");
    assert!(first.starts_with("edpm-agent as a kubectl plugin: reads the cluster"), "{}", out.stdout);
    assert!(out.stdout.contains("in that context's namespace"), "{}", out.stdout);
    let out = kubectl_edpm(dir.path(), &["no-such-command"], &[]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("kubectl edpm"), "{}", out.stderr);
}

/// `packaging/install.sh` links the plugin beside the binary (the RPM's link is checked with
/// the package's file list in `packaging`).
#[test]
fn install_sh_links_the_kubectl_plugin() {
    let root = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(crate::util::repo().join("packaging/install.sh"))
        .arg(bin())
        .env("PREFIX", root.path().join("usr"))
        .env("EDPM_AGENT_CONFIG_DIR", root.path().join("etc"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let link = root.path().join("usr/bin/kubectl-edpm");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("edpm-agent"));
    let help = Command::new(&link).arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: kubectl edpm"));
}
