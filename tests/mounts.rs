//! `mounts propagate` on the example and on duplicates.

use serde_json::Value;

use crate::util::run;

fn propagate(args: &[&str]) -> Value {
    let mut a = vec!["--config", "examples/edpm-agent.yaml", "mounts", "propagate"];
    a.extend_from_slice(args);
    let out = run(&a, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

fn names(v: &Value) -> Vec<&str> {
    v["volumes"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect()
}

#[test]
fn group_instance_and_global_lists_combine_local_first() {
    let cv = propagate(&["--as", "Cinder", "CinderVolume", "ceph"]);
    assert_eq!(names(&cv), ["ceph-1", "ceph"], "local (instance 'ceph') first, then global");
    assert_eq!(cv["warnings"], serde_json::json!([]));
    assert_eq!(cv["mounts"][1]["mountPath"], "/etc/ceph");
    assert_eq!(
        names(&propagate(&["--as", "Cinder", "CinderVolume", "lvm"])),
        ["ceph"],
        "other backend: global only"
    );
    assert_eq!(names(&propagate(&["--as", "Cinder", "CinderAPI"])), Vec::<&str>::new());
    assert_eq!(names(&propagate(&["--as", "Glance", "GlanceAPI", "default"])), ["ceph"]);
    let edpm = propagate(&["--as", "Compute", "--node", "edpm-compute-0"]);
    assert_eq!(names(&edpm), ["ceph"], "the Role's nodeTemplate.extraMounts");
    assert_eq!(
        edpm["sources"][0]["from"],
        "OpenStackDataPlaneRole/edpm-compute spec.nodeTemplate.extraMounts[0]"
    );
}

#[test]
fn duplicates_upstream_would_emit_are_warned_with_both_entries() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("cp.yaml"),
        "apiVersion: core.openstack.org/v1beta1\nkind: OpenStackControlPlane\nmetadata:\n  name: cp\nspec:\n  extraMounts:\n  - extraVol:\n    - propagation: [All, Compute]\n      volumes: [{name: logs, emptyDir: {}}]\n      mounts: [{name: logs, mountPath: /var/log/x}]\n",
    )
    .unwrap();
    let out = run(&["--source", d.path().to_str().unwrap(), "mounts", "propagate", "--as", "Compute"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(names(&v), ["logs", "logs"], "exactly lib-common: one copy per matching entry");
    let w = v["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    assert!(w[0].as_str().unwrap().contains("OpenStackControlPlane/cp spec.extraMounts[0].extraVol[0]"));
}

#[test]
fn malformed_extra_mounts_name_the_field() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("cp.yaml"),
        "apiVersion: core.openstack.org/v1beta1\nkind: OpenStackControlPlane\nmetadata:\n  name: cp\nspec:\n  extraMounts:\n  - extraVol:\n    - propagation: Compute\n      volumes: []\n      mounts: []\n",
    )
    .unwrap();
    let out = run(&["--source", d.path().to_str().unwrap(), "mounts", "propagate", "--as", "Compute"], &[]);
    assert_eq!(out.code, 3);
    assert!(out.stderr.contains("spec.extraMounts[0].extraVol[0].propagation"), "{}", out.stderr);
}
