//! Reading manifests as Kubernetes does, through the binary: hostile input refused at each
//! limit (golden errors), very large files and lists, and YAML 1.1 octal modes carried all the
//! way through `stage`.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::util::{Output, run};

/// The exit code and stderr of a run, with the temporary directory's path made stable.
fn golden(name: &str, dir: &Path, out: &Output) {
    let text = format!(
        "exit: {}\n--- stderr\n{}",
        out.code,
        out.stderr.replace(&dir.display().to_string(), "[DIR]")
    );
    insta::with_settings!({ snapshot_path => "snapshots/manifests", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(name, text);
    });
}

fn list(dir: &Path) -> Output {
    run(&["--source", dir.to_str().unwrap(), "inventory", "--list"], &[])
}

const ROLE: &str = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneRole\nmetadata:\n  name: compute\nspec:\n  nodeTemplate:\n    ansibleUser: cloud-admin\n";

/// One manifest file holding `body` (after a Role), refused by the reader.
fn refused(name: &str, file: &str, body: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(file), format!("{ROLE}---\n{body}")).unwrap();
    let out = list(dir.path());
    assert_eq!(out.code, 3, "{name}: {}", out.stderr);
    assert!(out.stdout.is_empty());
    golden(name, dir.path(), &out);
}

fn node_header(name: &str) -> String {
    format!(
        "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNode\nmetadata:\n  name: {name}\nspec:\n  role: compute\n"
    )
}

#[test]
fn nesting_past_the_limit_is_refused_in_yaml_and_json() {
    let depth = edpm_core::yaml::MAX_DEPTH;
    let deep = format!("{}x{}", "[".repeat(depth), "]".repeat(depth));
    refused(
        "depth_yaml",
        "deep.yaml",
        &format!("{}  node:\n    ansibleVars:\n      deep: {deep}\n", node_header("n0")),
    );
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let json = format!(
        r#"{{"apiVersion": "v1", "kind": "List", "items": [{{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNode", "metadata": {{"name": "n0"}}, "spec": {{"role": "compute", "node": {{"ansibleVars": {{"deep": {deep}}}}}}}}}]}}"#
    );
    std::fs::write(dir.path().join("deep.json"), json).unwrap();
    let out = list(dir.path());
    assert_eq!(out.code, 3, "{}", out.stderr);
    golden("depth_json", dir.path(), &out);
    // One level less is fine.
    let fine = format!("{}x{}", "[".repeat(depth - 6), "]".repeat(depth - 6));
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{ROLE}---\n{}  node:\n    ansibleVars:\n      deep: {fine}\n", node_header("n0"));
    std::fs::write(dir.path().join("ok.yaml"), text).unwrap();
    assert_eq!(list(dir.path()).code, 0);
}

#[test]
fn alias_bombs_are_refused_and_anchors_reused_as_people_do_are_not() {
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\nlol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        let _ = writeln!(bomb, "lol{i}: &l{i} [{refs}]");
    }
    refused("alias_bomb", "bomb.yaml", &bomb);
    // One anchor used by every node of a large file, as hand-written manifests do.
    let dir = tempfile::tempdir().unwrap();
    let mut text = format!("{ROLE}---\napiVersion: v1\nkind: List\nitems:\n");
    text.push_str("- &node\n  apiVersion: dataplane.openstack.org/v1beta1\n  kind: OpenStackDataPlaneNode\n  metadata: {name: n0}\n  spec: &spec\n    role: compute\n    node: {ansibleVars: {rack: r1}}\n");
    for i in 1..2000 {
        let _ = writeln!(
            text,
            "- apiVersion: dataplane.openstack.org/v1beta1\n  kind: OpenStackDataPlaneNode\n  metadata: {{name: n{i}}}\n  spec:\n    <<: *spec\n    hostName: n{i}\n    ansibleHost: 10.0.{}.{}",
            i / 250,
            i % 250
        );
    }
    std::fs::write(dir.path().join("nodes.yaml"), text).unwrap();
    let out = list(dir.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["_meta"]["hostvars"].as_object().unwrap().len(), 2000);
    assert_eq!(v["_meta"]["hostvars"]["n1999"]["rack"], "r1");
}

#[test]
fn input_past_the_size_cap_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), ROLE).unwrap();
    // Sparse: no disk is spent, and the cap is checked before reading.
    let big = std::fs::File::create(dir.path().join("b.yaml")).unwrap();
    big.set_len(2 << 30).unwrap();
    let out = list(dir.path());
    assert_eq!(out.code, 3, "{}", out.stderr);
    golden("size_cap", dir.path(), &out);
    // Files each under the per-file cap, together past the run's cap.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), ROLE).unwrap();
    for i in 0..9 {
        std::fs::File::create(dir.path().join(format!("b{i}.yaml"))).unwrap().set_len(250 << 20).unwrap();
    }
    let out = list(dir.path());
    assert_eq!(out.code, 3, "{}", out.stderr);
    golden("size_cap_total", dir.path(), &out);
}

#[test]
fn deliberate_strictness_and_kubectl_rules_explain_themselves() {
    refused("duplicate_key", "dup.yaml", &format!("{}  hostName: a\n  hostName: b\n", node_header("n0")));
    refused("separator_content", "sep.yaml", &format!("{}--- {{kind: ConfigMap}}\n", node_header("n0")));
    refused("document_after_end", "end.yaml", &format!("{}...\n{}", node_header("n0"), node_header("n1")));
    refused(
        "infinity",
        "inf.yaml",
        &format!("{}  node:\n    ansibleVars:\n      ratio: .inf\n", node_header("n0")),
    );
    refused("wrong_type", "type.yaml", &format!("{}  node:\n    ansiblePort: on\n", node_header("n0")));
}

/// A Role and `n` Nodes, as documents of one file or as items of one `kind: List`.
fn many(n: usize, as_list: bool) -> String {
    let mut out = String::with_capacity(n * 300);
    if as_list {
        out.push_str("apiVersion: v1\nkind: List\nitems:\n");
    }
    let indent = |text: &str| -> String {
        if !as_list {
            return format!("---\n{text}");
        }
        let mut lines = text.lines();
        let mut s = format!("- {}\n", lines.next().unwrap());
        for l in lines {
            let _ = writeln!(s, "  {l}");
        }
        s
    };
    out.push_str(&indent(ROLE));
    for i in 0..n {
        let body = format!(
            "{}  hostName: node-{i:05}.example.com\n  ansibleHost: 10.{}.{}.{}\n  node:\n    ansibleVars: {{rack: r{}}}\n",
            node_header(&format!("node-{i:05}")),
            i / 65536,
            i / 256 % 256,
            i % 256,
            i % 40
        );
        out.push_str(&indent(&body));
    }
    out
}

#[test]
fn twenty_thousand_documents_in_one_file_and_in_one_list() {
    for as_list in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("all.yaml"), many(20_000, as_list)).unwrap();
        let out = list(dir.path());
        assert_eq!(out.code, 0, "list {as_list}: {}", out.stderr);
        assert!(out.stderr.is_empty());
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        let hosts = v["_meta"]["hostvars"].as_object().unwrap();
        assert_eq!(hosts.len(), 20_000, "list {as_list}");
        assert_eq!(hosts["node-19999"]["ansible_host"], "10.0.78.31");
        assert_eq!(hosts["node-19999"]["rack"], "r39");
        assert_eq!(v["compute"]["hosts"].as_array().unwrap().len(), 20_000);
    }
}

/// The example with extraMounts volumes of all three kinds whose modes are written in octal,
/// as manifests do (the API server reads `0640` as 416).
fn octal_example(default_mode: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    crate::util::example_copy(d.path());
    let roles = d.path().join("dataplane/roles.yaml");
    let text = std::fs::read_to_string(&roles).unwrap();
    let volumes = format!(
        "        volumes:
          - name: ceph
            secret:
              secretName: ceph-conf-files
              defaultMode: {default_mode}
              items:
                - {{key: ceph.conf, path: ceph.conf, mode: 0640}}
                - {{key: ceph.client.openstack.keyring, path: ceph.client.openstack.keyring}}
          - name: ceph2-conf
            configMap:
              name: ceph2-conf
              defaultMode: 0640
          - name: ceph2-key
            projected:
              defaultMode: 0440
              sources:
                - secret:
                    name: ceph-conf-files-1
                    items:
                      - {{key: ceph2.client.cinder.keyring, path: ceph2.client.cinder.keyring, mode: 0600}}
        mounts:
          - {{name: ceph2-conf, mountPath: /etc/ceph/ceph2.conf, subPath: ceph2.conf}}
          - {{name: ceph2-key, mountPath: /etc/ceph/ceph2.client.cinder.keyring, subPath: ceph2.client.cinder.keyring}}
"
    );
    let old = "        volumes:\n          - name: ceph\n            secret:\n              secretName: ceph-conf-files\n        mounts:\n";
    assert!(text.contains(old), "the example's Ceph volume moved");
    std::fs::write(&roles, text.replacen(old, &volumes, 1)).unwrap();
    std::fs::write(
        d.path().join("controlplane/ceph2.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ceph2-conf\n  namespace: openstack\ndata:\n  ceph2.conf: |\n    [global]\n    fsid = 0c3f4b1e-5d2a-4b8e-9f31-2a6d8e4c7b90\n    mon_host = 192.0.2.21\n",
    )
    .unwrap();
    d
}

#[test]
fn octal_modes_in_secret_configmap_and_projected_volumes_reach_stage() {
    let src = octal_example("0400");
    let s = src.path().to_str().unwrap();
    let out =
        run(&["--source", s, "mounts", "propagate", "--as", "Compute", "--node", "edpm-compute-0"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let volume =
        |name: &str| v["volumes"].as_array().unwrap().iter().find(|x| x["name"] == name).unwrap().clone();
    assert_eq!(volume("ceph")["secret"]["defaultMode"], 256);
    assert_eq!(volume("ceph")["secret"]["items"][0]["mode"], 416);
    assert_eq!(volume("ceph2-conf")["configMap"]["defaultMode"], 416);
    assert_eq!(volume("ceph2-key")["projected"]["defaultMode"], 288);
    assert_eq!(volume("ceph2-key")["projected"]["sources"][0]["secret"]["items"][0]["mode"], 384);

    let root = tempfile::tempdir().unwrap();
    let out = crate::staging::stage(src.path(), root.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    // On the node, Ceph files get edpm_ceph_client_files' modes whatever the pod's were:
    // keyrings 0600, the rest 0644.
    let ceph = root.path().join("var/lib/openstack/config/ceph");
    let mode = |f: &str| std::fs::metadata(ceph.join(f)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("ceph.conf"), 0o644);
    assert_eq!(mode("ceph.client.openstack.keyring"), 0o600);
    assert_eq!(mode("ceph2.conf"), 0o644);
    assert_eq!(mode("ceph2.client.cinder.keyring"), 0o600);
    assert!(std::fs::read_to_string(ceph.join("ceph2.conf")).unwrap().contains("0c3f4b1e"));

    // 0999 is no octal number: go-yaml reads it as the decimal 999, which is no mode. The
    // error names the object once and says how to write a mode.
    let src = octal_example("0999");
    let root = tempfile::tempdir().unwrap();
    let out = crate::staging::stage(src.path(), root.path());
    assert_ne!(out.code, 0);
    assert_eq!(out.stderr.matches("OpenStackDataPlaneRole/edpm-compute").count(), 1, "{}", out.stderr);
    golden("stage_bad_mode", src.path(), &out);
}

#[test]
fn yaml_1_1_surprises_in_string_fields_say_to_quote() {
    refused("unquoted_yes", "yes.yaml", &format!("{}  hostName: yes\n", node_header("n0")));
}

#[test]
fn explain_points_at_field_lines_in_yaml_and_at_objects_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{ROLE}---\n{}  hostName: n0\n  ansibleHost: 10.0.0.1\n  node:\n    ansibleVars:\n      rack: r1\n",
        node_header("n0")
    );
    std::fs::write(dir.path().join("m.yaml"), &text).unwrap();
    let explain = |dir: &Path| {
        let out = run(&["--source", dir.to_str().unwrap(), "inventory", "explain", "n0", "rack"], &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout.replace(&dir.display().to_string(), "[DIR]")
    };
    // The Node starts on line 9; `rack:` is written on line 19.
    assert!(explain(dir.path()).contains("at [DIR]/m.yaml:19"), "{}", explain(dir.path()));
    let json = tempfile::tempdir().unwrap();
    let values: Vec<Value> = edpm_core::yaml::to_json_values(&text).unwrap();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": values});
    std::fs::write(json.path().join("m.json"), serde_json::to_string_pretty(&list).unwrap()).unwrap();
    assert!(explain(json.path()).contains("at [DIR]/m.json:1"), "{}", explain(json.path()));
}
