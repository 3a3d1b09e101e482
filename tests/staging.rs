//! `stage` and `mounts plan` against the example, in temporary roots: modes, idempotence,
//! ownership, refusal of links, Ceph sanity, and crash safety under SIGKILL.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::util::{bin, run};

/// A copy of examples/controlplane and examples/dataplane to edit.
fn scratch() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    crate::util::example_copy(d.path());
    d
}

pub fn stage(src: &Path, root: &Path) -> crate::util::Output {
    run(
        &[
            "--source",
            src.to_str().unwrap(),
            "stage",
            "--node",
            "edpm-compute-0",
            "--root",
            root.to_str().unwrap(),
        ],
        &[],
    )
}

fn report(out: &crate::util::Output) -> Value {
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

fn count(v: &Value, k: &str) -> usize {
    v[k].as_array().unwrap().len()
}

#[test]
fn stages_with_modes_idempotently_and_owns_only_its_files() {
    let src = scratch();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let first = report(&stage(src.path(), r));
    assert!(count(&first, "changed") >= 12, "{first}");
    let mode = |p: &str| std::fs::metadata(r.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("var/lib/openstack/config/ceph"), 0o755);
    assert_eq!(mode("var/lib/openstack/config/ceph/ceph.client.openstack.keyring"), 0o600);
    assert_eq!(mode("var/lib/openstack/config/ceph/ceph.conf"), 0o644);
    assert_eq!(mode("var/lib/openstack/configs/nova/01-nova.conf"), 0o600);
    assert_eq!(mode("var/lib/openstack/configs/nova/ssh-privatekey"), 0o600);
    assert_eq!(mode("var/lib/openstack/configs/ovn/ovsdb-config"), 0o644);
    let foreign = r.join("var/lib/openstack/configs/nova/my-own-notes.txt");
    std::fs::write(&foreign, "mine").unwrap();

    let second = report(&stage(src.path(), r));
    assert_eq!((count(&second, "changed"), count(&second, "removed")), (0, 0), "{second}");

    // Drift is repaired (content and mode), and only that counts as a change.
    std::fs::write(r.join("var/lib/openstack/config/ceph/ceph.conf"), "tampered").unwrap();
    std::fs::set_permissions(
        r.join("var/lib/openstack/configs/ovn/ovsdb-config"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let third = report(&stage(src.path(), r));
    assert_eq!(count(&third, "changed"), 2, "{third}");
    assert!(
        std::fs::read_to_string(r.join("var/lib/openstack/config/ceph/ceph.conf")).unwrap().contains("fsid")
    );

    // A file no longer wanted is removed; a file never staged is left alone.
    let cm = src.path().join("controlplane/configmaps.yaml");
    let text = std::fs::read_to_string(&cm).unwrap();
    std::fs::write(&cm, text.replace("name: nova-extra-config", "name: nova-extra-config-renamed")).unwrap();
    let fourth = report(&stage(src.path(), r));
    assert_eq!(
        fourth["removed"],
        serde_json::json!(["var/lib/openstack/configs/nova/25-nova-extra.conf"]),
        "{fourth}"
    );
    assert!(!r.join("var/lib/openstack/configs/nova/25-nova-extra.conf").exists());
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "mine");
}

/// `mounts plan` for edpm-compute-0, in JSON or text.
fn plan(src: &Path, root: &Path, json: bool) -> crate::util::Output {
    let mut a = vec![
        "--source",
        src.to_str().unwrap(),
        "mounts",
        "plan",
        "--node",
        "edpm-compute-0",
        "--root",
        root.to_str().unwrap(),
    ];
    if json {
        a.extend(["--format", "json"]);
    }
    run(&a, &[])
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn plan_shows_hashes_never_contents() {
    let src = scratch();
    let root = tempfile::tempdir().unwrap();
    let out = plan(src.path(), root.path(), true);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stdout.contains("fake-cell1-pass") && !out.stdout.contains("QVFB"),
        "no secret contents in plans"
    );
    let steps: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert!(steps.iter().all(|s| s["action"] == "create"));
    // A size only where a digest is shown: a one-line password's size is its length.
    assert!(steps.iter().all(|s| s["size"].as_u64().is_some() == (s["secret"] == false)), "{steps:?}");
    // Secret-derived files show no digest (a password's SHA-256 is as good as the password);
    // ConfigMap-derived ones keep theirs.
    let secret: Vec<&Value> = steps.iter().filter(|s| s["secret"] == true).collect();
    let plain: Vec<&Value> = steps.iter().filter(|s| s["secret"] == false).collect();
    assert!(secret.len() >= 4 && plain.len() >= 4, "{steps:?}");
    assert!(secret.iter().all(|s| s.get("sha256").is_none()), "{steps:?}");
    assert!(plain.iter().all(|s| s["sha256"].as_str().unwrap().len() == 64), "{steps:?}");
    for p in [
        "var/lib/openstack/config/ceph/ceph.client.openstack.keyring",
        "var/lib/openstack/configs/nova/01-nova.conf",
        "var/lib/openstack/configs/nova/ssh-privatekey",
    ] {
        assert!(secret.iter().any(|s| s["path"] == p), "{p} is secret: {steps:?}");
    }
    assert!(plain.iter().any(|s| s["path"] == "var/lib/openstack/configs/ovn/ovsdb-config"), "{steps:?}");
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0, "plan writes nothing");
    // No digest of a Secret file appears anywhere, whole or cut, in JSON or text.
    let text = plan(src.path(), root.path(), false);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let first = stage(src.path(), root.path());
    assert_eq!(first.code, 0, "{}", first.stderr);
    for s in &secret {
        let path = s["path"].as_str().unwrap();
        let digest = sha256_hex(&std::fs::read(root.path().join(path)).unwrap());
        assert!(!out.stdout.contains(&digest[..12]) && !text.stdout.contains(&digest[..12]), "{path}");
        let line = text.stdout.lines().find(|l| l.contains(&format!(" {path}  "))).unwrap();
        assert!(line.starts_with("create") && line.contains("(secret)"), "{line}");
    }
    for s in &plain {
        let line =
            text.stdout.lines().find(|l| l.contains(&format!(" {}  ", s["path"].as_str().unwrap()))).unwrap();
        assert!(line.contains(&s["sha256"].as_str().unwrap()[..12]), "text and json agree: {line}");
    }
    // After staging, a changed Secret is seen as an update, still without a digest.
    let sec = src.path().join("controlplane/secrets.yaml");
    let t = std::fs::read_to_string(&sec).unwrap();
    std::fs::write(
        &sec,
        t.replace(
            "QVFBRkFLRUtFWUZPUkVYQU1QTEVTT05MWTAwMDAwMDA9PQ==",
            "QVFBRkFLRUtFWUZPUkVYQU1QTEVTT05MWTAwMDAwMDE9PQ==",
        ),
    )
    .unwrap();
    let again = plan(src.path(), root.path(), true);
    let again: Vec<Value> = serde_json::from_str(&again.stdout).unwrap();
    let key = again
        .iter()
        .find(|s| s["path"] == "var/lib/openstack/config/ceph/ceph.client.openstack.keyring")
        .unwrap();
    assert_eq!((key["action"].as_str(), key.get("sha256")), (Some("update"), None), "{key}");
    assert!(
        again.iter().filter(|s| s["path"] != key["path"]).all(|s| s["action"] == "unchanged"),
        "{again:?}"
    );
}

#[test]
fn links_below_the_root_are_refused() {
    let src = scratch();
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("var/lib/openstack")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), root.path().join("var/lib/openstack/configs")).unwrap();
    let out = stage(src.path(), root.path());
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(out.stderr.contains("symbolic link"), "{}", out.stderr);
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0, "nothing written through the link");
}

#[test]
fn ceph_sanity_and_escaping_items_fail_clearly() {
    let src = scratch();
    let sec = src.path().join("controlplane/secrets.yaml");
    let text = std::fs::read_to_string(&sec).unwrap();
    std::fs::write(&sec, text.replace("    fsid = 7a1719e8", "    fsid_typo = 7a1719e8")).unwrap();
    let out = stage(src.path(), tempfile::tempdir().unwrap().path());
    assert_eq!(out.code, 3);
    assert!(out.stderr.contains("ceph.conf") && out.stderr.contains("has no fsid"), "{}", out.stderr);

    let src = scratch();
    let roles = src.path().join("dataplane/roles.yaml");
    let text = std::fs::read_to_string(&roles).unwrap();
    std::fs::write(&roles, text.replace("              secretName: ceph-conf-files\n", "              secretName: ceph-conf-files\n              items: [{key: ceph.conf, path: ../../escape.conf}]\n")).unwrap();
    let root = tempfile::tempdir().unwrap();
    let out = stage(src.path(), root.path());
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("items[0].path") && out.stderr.contains("'..'"), "{}", out.stderr);
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

/// `items[].path` as Kubernetes places it: cleaned (`./x` lands at the top of the volume, so the
/// keyring reaches the node), and refused, by `stage` and `validate` alike, only where the API
/// server or the kubelet refuses it.
#[test]
fn item_paths_are_placed_and_refused_as_kubernetes_does() {
    let keyring = "var/lib/openstack/config/ceph/ceph.client.openstack.keyring";
    // (path, where the keyring lands under the Ceph directory, or what the error says)
    let cases: &[(&str, Result<Option<&str>, &str>)] = &[
        ("ceph.client.openstack.keyring", Ok(Some(keyring))),
        ("./ceph.client.openstack.keyring", Ok(Some(keyring))),
        (".//ceph.client.openstack.keyring", Ok(Some(keyring))),
        ("ceph.client.openstack.keyring/", Ok(Some(keyring))),
        // In a subdirectory of the volume: Kubernetes puts it there, and edpm-ansible copies
        // only the top-level files.
        ("a/./ceph.client.openstack.keyring", Ok(None)),
        ("a//ceph.client.openstack.keyring", Ok(None)),
        ("a/..ceph.client.openstack.keyring", Ok(None)),
        ("..ceph.client.openstack.keyring", Err("starts with '..'")),
        ("..", Err("has '..' as a path element")),
        ("a/../ceph.client.openstack.keyring", Err("has '..' as a path element")),
        ("/ceph.client.openstack.keyring", Err("is absolute")),
        ("", Err("is empty")),
        (".", Err("names the volume itself")),
    ];
    for (path, want) in cases {
        let src = scratch();
        let roles = src.path().join("dataplane/roles.yaml");
        let text = std::fs::read_to_string(&roles).unwrap();
        let items = format!(
            "              secretName: ceph-conf-files\n              items:\n                - {{key: ceph.conf, path: ceph.conf}}\n                - {{key: ceph.client.openstack.keyring, path: {path:?}}}\n"
        );
        std::fs::write(&roles, text.replace("              secretName: ceph-conf-files\n", &items)).unwrap();
        let root = tempfile::tempdir().unwrap();
        let out = stage(src.path(), root.path());
        let validate = run(&["--source", src.path().to_str().unwrap(), "validate"], &[]);
        match want {
            Ok(place) => {
                assert_eq!(out.code, 0, "{path:?}: {}", out.stderr);
                assert_eq!(root.path().join(keyring).exists(), place.is_some(), "{path:?}: {}", out.stdout);
                assert!(!validate.stdout.contains("items[1].path"), "{path:?}: {}", validate.stdout);
            }
            Err(problem) => {
                assert_eq!(out.code, 3, "{path:?}: {}", out.stderr);
                for needle in [
                    "OpenStackDataPlaneRole/edpm-compute",
                    "spec.nodeTemplate.extraMounts[0] volume ceph.secret.items[1].path",
                    problem,
                    "Kubernetes",
                ] {
                    assert!(out.stderr.contains(needle), "{path:?}: {needle}: {}", out.stderr);
                }
                assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0, "{path:?}: nothing written");
                assert_eq!(validate.code, 9, "{path:?}: {}", validate.stdout);
                assert!(
                    validate
                        .stdout
                        .contains("spec.nodeTemplate.extraMounts[0].volumes[0].secret.items[1].path")
                        && validate.stdout.contains(problem),
                    "{path:?}: {}",
                    validate.stdout
                );
            }
        }
    }
}

/// An oslo.config file a service reads that oslo cannot parse is refused by `stage` (nothing
/// written, an earlier staging left as it was), `render` and `validate`, naming the Secret, the
/// key and the line, never the value; for a service `render` knows (neutron-metadata) and one it
/// only stages (telemetry).
#[test]
fn unreadable_service_configs_are_never_staged() {
    const LEAK: &str = "LEAKME-s3cr3t";
    let broken = [
        // (line, lines after the one replaced, what oslo says)
        (format!("    metadata_proxy_shared_secret {LEAK}"), 0, "No ':' or '=' found in assignment"),
        (format!("    [x]\n      {LEAK} = continued"), 1, "Unexpected continuation line"),
        (format!("    [DEFAULT\n    x = {LEAK}"), 0, "Invalid section (must end with ])"),
        (format!("    []\n    x = {LEAK}"), 0, "Empty section name"),
        (format!("    = {LEAK}"), 0, "Key cannot be empty"),
        (format!("    {LEAK}"), 0, "No ':' or '=' found in assignment"),
    ];
    let good = "    metadata_proxy_shared_secret = fake-metadata-proxy-secret";
    let telemetry = |body: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ceilometer-compute-config-data\n  namespace: openstack\nstringData:\n  ceilometer.conf: |\n    [DEFAULT]\n    debug = true\n{body}\n  polling.yaml: |\n    sources: []\n"
        )
    };
    for (line_text, extra, problem) in &broken {
        // The replaced line is the 5th of 05-nova-metadata.conf and the 3rd of ceilometer.conf.
        for (service, line) in [("neutron-metadata", 5 + extra), ("telemetry", 3 + extra)] {
            let src = scratch();
            let roles = src.path().join("dataplane/roles.yaml");
            let text = std::fs::read_to_string(&roles).unwrap();
            std::fs::write(&roles, text.replacen("    - nova\n", "    - nova\n    - telemetry\n", 1))
                .unwrap();
            let tele = src.path().join("controlplane/telemetry.yaml");
            std::fs::write(&tele, telemetry("    host = x")).unwrap();
            let root = tempfile::tempdir().unwrap();
            let first = stage(src.path(), root.path());
            assert_eq!(first.code, 0, "{}", first.stderr);
            assert!(root.path().join("var/lib/openstack/configs/telemetry/ceilometer.conf").exists());
            let before = snapshot_tree(root.path());
            let (object, key) = if service == "telemetry" {
                std::fs::write(&tele, telemetry(line_text)).unwrap();
                ("Secret/ceilometer-compute-config-data", "ceilometer.conf")
            } else {
                let sec = src.path().join("controlplane/secrets.yaml");
                let t = std::fs::read_to_string(&sec).unwrap();
                assert!(t.contains(good));
                std::fs::write(&sec, t.replace(good, line_text)).unwrap();
                ("Secret/nova-metadata-neutron-config", "05-nova-metadata.conf")
            };
            let out = stage(src.path(), root.path());
            assert_eq!(out.code, 3, "{service} {line_text:?}: {}", out.stderr);
            let want = format!("service {service}: {object} key {key}, line {line}: {problem}");
            assert!(out.stderr.contains(&want), "{want}: {}", out.stderr);
            assert!(out.stderr.contains("fix that line in the Secret"), "{}", out.stderr);
            assert!(!out.stderr.contains("LEAKME") && !out.stdout.contains("LEAKME"), "{}", out.stderr);
            assert_eq!(snapshot_tree(root.path()), before, "{service} {line_text:?}: nothing written");
            let validate = run(&["--source", src.path().to_str().unwrap(), "validate"], &[]);
            assert_eq!(validate.code, 9, "{}", validate.stdout);
            let want = format!("{object} (");
            assert!(
                validate.stdout.contains(&want)
                    && validate.stdout.contains(&format!("data.{key}: line {line}: {problem}")),
                "{}",
                validate.stdout
            );
            assert!(!validate.stdout.contains("LEAKME") && !validate.stderr.contains("LEAKME"));
            if service == "neutron-metadata" {
                let render = run(&["--source", src.path().to_str().unwrap(), "render", "--redact"], &[]);
                assert_eq!(render.code, 3, "{}", render.stderr);
                assert!(
                    render.stderr.contains(&format!("{object} key {key}, line {line}")),
                    "{}",
                    render.stderr
                );
                assert!(!render.stderr.contains("LEAKME") && !render.stdout.contains("LEAKME"));
            }
        }
    }
}

/// Every file below `root` with its content and mode.
fn snapshot_tree(root: &Path) -> Vec<(String, Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                out.push((
                    p.strip_prefix(root).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                    mode,
                ));
            }
        }
    }
    out.sort();
    out
}

/// Kill the stager with SIGKILL at many points while it replaces 2,000 files: every file is
/// always the old or the new content, never a part, and the next run finishes the job and
/// leaves no temporary file.
#[test]
fn sigkill_never_leaves_partial_files() {
    let src = scratch();
    let cm = src.path().join("controlplane/configmaps.yaml");
    let base = std::fs::read_to_string(&cm).unwrap();
    let version = |v: &str| {
        let mut data = String::new();
        for i in 0..2000 {
            data.push_str(&format!("  key-{i:04}: \"{}\"\n", format!("{v}-{i:04}-").repeat(40)));
        }
        let doc = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ovncontroller-config\ndata:\n{data}"
        );
        let rest = base.replacen("name: ovncontroller-config", "name: ovncontroller-config-unused", 1);
        std::fs::write(&cm, format!("{rest}\n---\n{doc}")).unwrap();
    };
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let file = |i: usize| r.join(format!("var/lib/openstack/configs/ovn/key-{i:04}"));
    version("old");
    report(&stage(src.path(), r));
    let check = |allowed: &[&str]| {
        for i in 0..2000 {
            let text = std::fs::read_to_string(file(i)).unwrap();
            assert!(
                allowed.iter().any(|v| text == format!("{v}-{i:04}-").repeat(40)),
                "key-{i:04} is neither old nor new: {} bytes",
                text.len()
            );
        }
    };
    let mut seed = 0x2545_f491u64;
    for round in 0..12 {
        version(if round % 2 == 0 { "new" } else { "old" });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = Command::new(bin())
            .args([
                "--source",
                src.path().to_str().unwrap(),
                "stage",
                "--node",
                "edpm-compute-0",
                "--root",
                r.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(seed % 400));
        let _ = child.kill();
        let _ = child.wait();
        check(&["old", "new"]);
    }
    version("final");
    report(&stage(src.path(), r));
    check(&["final"]);
    let leftovers: Vec<_> = walk(r)
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".edpm-agent."))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(r.join("var/lib/edpm-agent/staged.json")).unwrap())
            .unwrap();
    assert!(manifest["files"].as_object().unwrap().len() >= 2000);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn nfs_and_cephfs_volumes_become_mount_units() {
    let src = scratch();
    let roles = src.path().join("dataplane/roles.yaml");
    let text = std::fs::read_to_string(&roles).unwrap();
    let extra = "    extraMounts:\n      - extraVolType: ImageConversion\n        volumes:\n          - name: conversion\n            nfs: {server: 192.0.2.50, path: /exports/conversion}\n          - name: shared\n            cephfs: {monitors: [192.0.2.11:6789, 192.0.2.12:6789], path: /volumes/shared, user: manila, secretRef: {name: cephfs-key}, readOnly: true}\n        mounts:\n          - {name: conversion, mountPath: /var/lib/nova/conversion}\n          - {name: shared, mountPath: /var/lib/shared-data}\n";
    std::fs::write(&roles, text.replacen("    extraMounts:\n", extra, 1)).unwrap();
    std::fs::write(src.path().join("controlplane/cephfs-key.yaml"), "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cephfs-key\nstringData:\n  key: QVFDZmFrZWNlcGhmc2tleQ==\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    report(&stage(src.path(), r));
    let nfs = std::fs::read_to_string(r.join("etc/systemd/system/var-lib-nova-conversion.mount")).unwrap();
    assert!(nfs.contains("What=192.0.2.50:/exports/conversion\nWhere=/var/lib/nova/conversion\nType=nfs\nOptions=rw,_netdev"), "{nfs}");
    let ceph = std::fs::read_to_string(r.join("etc/systemd/system/var-lib-shared\\x2ddata.mount")).unwrap();
    assert!(ceph.contains("What=192.0.2.11:6789,192.0.2.12:6789:/volumes/shared\n"), "{ceph}");
    assert!(
        ceph.contains("Options=name=manila,secretfile=/etc/ceph/edpm-agent-shared.secret,ro,_netdev"),
        "{ceph}"
    );
    let key = r.join("etc/ceph/edpm-agent-shared.secret");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(
        r.join("var/lib/openstack/config/ceph/ceph.conf").is_file(),
        "the Ceph files still come from the same list"
    );
}

/// Undoes a chattr/mount when the test ends, even on failure.
struct Undo(Vec<String>);

impl Drop for Undo {
    fn drop(&mut self) {
        for cmd in &self.0 {
            let _ = Command::new("sh").args(["-c", cmd]).status();
        }
    }
}

fn sh(cmd: &str) -> bool {
    Command::new("sh").args(["-c", cmd]).status().is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn change_extra_config(src: &Path, value: &str) {
    let cm = src.join("controlplane/configmaps.yaml");
    let text = std::fs::read_to_string(&cm).unwrap();
    std::fs::write(
        &cm,
        text.replacen(
            "    cpu_allocation_ratio = 8.0\n",
            &format!("    cpu_allocation_ratio = 8.0\n    reserved_host_memory_mb = {value}\n"),
            1,
        ),
    )
    .unwrap();
}

#[test]
fn permission_errors_keep_old_files_and_name_the_path() {
    assert!(
        is_root(),
        "the failure tests make a directory immutable (chattr +i); run them as root, as CI does"
    );
    let src = scratch();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    report(&stage(src.path(), r));
    let target = r.join("var/lib/openstack/configs/nova/25-nova-extra.conf");
    let before = std::fs::read_to_string(&target).unwrap();
    let dir = r.join("var/lib/openstack/configs/nova");
    assert!(sh(&format!("chattr +i '{}'", dir.display())), "chattr +i failed");
    let _undo = Undo(vec![format!("chattr -i '{}'", dir.display())]);
    change_extra_config(src.path(), "2048");
    let out = stage(src.path(), r);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot write")
            && out.stderr.contains("configs/nova/25-nova-extra.conf")
            && out.stderr.contains("previous file is left in place"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), before);
}

#[test]
fn a_full_disk_keeps_old_files_and_names_the_path() {
    assert!(is_root(), "the failure tests mount a small tmpfs; run them as root, as CI does");
    let src = scratch();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    assert!(sh(&format!("mount -t tmpfs -o size=256k tmpfs '{}'", r.display())), "cannot mount a tmpfs");
    let _undo = Undo(vec![format!("umount '{}'", r.display())]);
    report(&stage(src.path(), r));
    let target = r.join("var/lib/openstack/configs/nova/25-nova-extra.conf");
    let before = std::fs::read_to_string(&target).unwrap();
    change_extra_config(src.path(), &"9".repeat(400 * 1024));
    let out = stage(src.path(), r);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("configs/nova/25-nova-extra.conf") && out.stderr.contains("No space left"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), before, "old file kept");
    let temps: Vec<_> = walk(r)
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".edpm-agent."))
        .collect();
    assert!(temps.is_empty(), "the failed write's temporary file is gone: {temps:?}");
}

/// The examples with a Manila CSI volume of share `share` on the first Role.
fn with_manila_volume(share: &str) -> tempfile::TempDir {
    let src = scratch();
    let roles = src.path().join("dataplane/roles.yaml");
    let text = std::fs::read_to_string(&roles).unwrap();
    let extra = format!(
        "    extraMounts:\n      - volumes:\n          - name: manila-share\n            csi:\n              driver: cephfs.manila.csi.openstack.org\n              volumeAttributes: {{shareID: {share}, shareAccessID: {}}}\n              nodePublishSecretRef: {{name: csi-manila-secret}}\n        mounts:\n          - {{name: manila-share, mountPath: /var/lib/manila-share}}\n",
        crate::util::fake_openstack::ACCESS
    );
    std::fs::write(&roles, text.replacen("    extraMounts:\n", &extra, 1)).unwrap();
    src
}

#[test]
fn manila_csi_volumes_resolve_through_keystone_and_manila() {
    use crate::util::fake_openstack::{self as os, FakeOpenStack};
    let api = FakeOpenStack::start();
    let src = with_manila_volume(os::SHARE);
    let secret = |id: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: csi-manila-secret\nstringData:\n  os-authURL: http://{}\n  os-region: regionOne\n  os-applicationCredentialID: {id}\n  os-applicationCredentialSecret: {}\n",
            api.addr,
            os::APP_SECRET
        )
    };
    std::fs::write(src.path().join("controlplane/manila.yaml"), secret(os::APP_ID)).unwrap();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    report(&stage(src.path(), r));
    let unit = std::fs::read_to_string(r.join("etc/systemd/system/var-lib-manila\\x2dshare.mount")).unwrap();
    assert!(unit.contains(&format!("What={}\n", os::EXPORT)), "preferred export location: {unit}");
    assert!(
        unit.contains(
            "Type=ceph\nOptions=name=edpm,secretfile=/etc/ceph/edpm-agent-manila-share.secret,_netdev"
        ),
        "{unit}"
    );
    let key = r.join("etc/ceph/edpm-agent-manila-share.secret");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), os::KEY);
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    let reqs = api.requests();
    assert!(
        reqs.iter().any(|q| q.starts_with("GET /manila/v2/share-access-rules/access-1 microversion=2.51")),
        "{reqs:?}"
    );

    std::fs::write(src.path().join("controlplane/manila.yaml"), secret("wrong-id")).unwrap();
    let out = stage(src.path(), r);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("Manila share share-1")
            && out.stderr.contains("401")
            && out.stderr.contains("Secret csi-manila-secret were rejected"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(os::APP_SECRET), "no credential in messages");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), os::KEY, "nothing changed on failure");
}

#[test]
fn an_endless_manila_answer_is_cut_at_its_bound() {
    use crate::util::fake_openstack::{self as os, FakeOpenStack};
    let api = FakeOpenStack::start();
    let src = with_manila_volume(os::HUGE_SHARE);
    std::fs::write(
        src.path().join("controlplane/manila.yaml"),
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: csi-manila-secret\nstringData:\n  os-authURL: http://{}\n  os-applicationCredentialID: {}\n  os-applicationCredentialSecret: {}\n",
            api.addr,
            os::APP_ID,
            os::APP_SECRET
        ),
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let out = stage(src.path(), root.path());
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("Manila share share-huge")
            && out.stderr.contains("export locations")
            && out.stderr.contains("larger than 4 MiB"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("xxxxxxxx"), "the answer is not quoted: {}", out.stderr.len());
}

#[test]
fn tls_nodesets_get_each_service_ca_bundle() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let out = run(
        &[
            "--config",
            "examples/edpm-agent-nodeset.yaml",
            "stage",
            "--node",
            "edpm-compute-3",
            "--root",
            r.to_str().unwrap(),
        ],
        &[],
    );
    report(&out);
    let bundle = r.join("var/lib/openstack/cacerts/nova/tls-ca-bundle.pem");
    assert!(std::fs::read_to_string(&bundle).unwrap().contains("BEGIN CERTIFICATE"));
    assert_eq!(std::fs::metadata(&bundle).unwrap().permissions().mode() & 0o777, 0o644);
    assert!(
        r.join("var/lib/openstack/cacerts/bootstrap/tls-ca-bundle.pem").is_file(),
        "edpm_bootstrap reads it too"
    );
    // The seeds' Role model has no tlsEnabled: no bundles.
    let seeds = tempfile::tempdir().unwrap();
    report(&run(
        &[
            "--config",
            "examples/edpm-agent.yaml",
            "stage",
            "--node",
            "edpm-compute-0",
            "--root",
            seeds.path().to_str().unwrap(),
        ],
        &[],
    ));
    assert!(!seeds.path().join("var/lib/openstack/cacerts").exists());

    let d = tempfile::tempdir().unwrap();
    for sub in ["controlplane", "nodeset"] {
        std::fs::create_dir(d.path().join(sub)).unwrap();
        for e in std::fs::read_dir(crate::util::repo().join("examples").join(sub)).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, d.path().join(sub).join(p.file_name().unwrap())).unwrap();
        }
    }
    let sec = d.path().join("controlplane/secrets.yaml");
    let text = std::fs::read_to_string(&sec).unwrap();
    std::fs::write(&sec, text.replace("name: combined-ca-bundle", "name: other-bundle")).unwrap();
    let out = run(
        &[
            "--source",
            d.path().to_str().unwrap(),
            "stage",
            "--node",
            "edpm-compute-3",
            "--root",
            tempfile::tempdir().unwrap().path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("caCerts Secret \"combined-ca-bundle\"")
            && out.stderr.contains("tlsEnabled: false"),
        "{}",
        out.stderr
    );
}
