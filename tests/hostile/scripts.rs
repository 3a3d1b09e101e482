//! `scripts/`: the image build script takes only image references, and runs from any directory.

use std::process::Command;

use crate::util::repo;

/// A container engine that only records that it was called.
fn fake_engine(dir: &std::path::Path) -> std::path::PathBuf {
    let engine = dir.join("engine");
    let called = dir.join("called");
    std::fs::write(&engine, format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit 0\n", called.display())).unwrap();
    std::fs::set_permissions(&engine, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    engine
}

fn image_sh(
    cwd: &std::path::Path,
    script: &str,
    args: &[&str],
    engine: &std::path::Path,
) -> crate::util::Output {
    let out = Command::new("bash")
        .arg(script)
        .args(args)
        .current_dir(cwd)
        .env("CONTAINER_ENGINE", engine)
        .output()
        .unwrap();
    crate::util::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Targets that are no image reference (`;`, spaces, `$(...)`, upper case in a path, a tag
/// with a `;`) are refused, naming the target, before the engine is asked anything; it used to
/// build them and print "built" with a garbage tag. A real reference still builds.
#[test]
fn image_sh_refuses_what_is_no_image_reference() {
    let dir = tempfile::tempdir().unwrap();
    let engine = fake_engine(dir.path());
    let called = dir.path().join("called");
    for target in
        ["x;y", "quay.io/a b", "quay.io/$(id)", "quay.io/Example", "quay.io/example:1.0;reboot", "a`b`"]
    {
        for action in ["build", "push"] {
            let out = image_sh(&repo(), "scripts/image.sh", &[action, target], &engine);
            assert_eq!(out.code, 1, "{action} {target:?}: {}{}", out.stdout, out.stderr);
            assert!(out.stderr.contains(&format!("image.sh: {target}:")), "{target:?}: {}", out.stderr);
            assert!(out.stderr.contains("no image"), "{target:?}: {}", out.stderr);
            assert!(!out.stdout.contains("built"), "{target:?}: {}", out.stdout);
            assert!(
                !called.exists(),
                "{action} {target:?}: the engine was called: {:?}",
                std::fs::read_to_string(&called)
            );
        }
    }
    // What is a reference goes on to the engine.
    for target in ["quay.io/example", "localhost:5000", "registry.local:5000/edpm:1.0-rc_1"] {
        let out = image_sh(&repo(), "scripts/image.sh", &["push", target], &engine);
        assert_eq!(out.code, 0, "{target}: {}{}", out.stdout, out.stderr);
    }
    let calls = std::fs::read_to_string(&called).unwrap();
    assert!(calls.contains("push registry.local:5000/edpm/edpm-agent-runner:1.0-rc_1"), "{calls}");
}

/// Run as `./image.sh` from `scripts/`, its usage is still found and shown (it used to say
/// "sed: can't read ./image.sh").
#[test]
fn image_sh_run_from_its_own_directory_shows_its_usage() {
    let dir = tempfile::tempdir().unwrap();
    let engine = fake_engine(dir.path());
    let out = image_sh(&repo().join("scripts"), "./image.sh", &[], &engine);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("Builds and pushes edpm-agent's images"), "{}", out.stderr);
    assert!(!out.stderr.contains("can't read"), "{}", out.stderr);
    // And it works from there: a push of a good target goes to the engine.
    let out = image_sh(&repo().join("scripts"), "./image.sh", &["push", "quay.io/example:2"], &engine);
    assert_eq!(out.code, 0, "{}", out.stderr);
}
