//! CLI tests against the built binary.

use crate::util::{bin, run, run_program};

const SEEDS: &[&str] = &["--config", "examples/edpm-agent.yaml"];

fn with<'a>(base: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(rest).copied().collect()
}

#[test]
fn list_prints_only_json_and_nothing_on_stderr() {
    let out = run(&with(SEEDS, &["inventory", "--list"]), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("stdout is one JSON document");
    assert!(v["_meta"]["hostvars"].is_object());
    assert_eq!(v["ungrouped"], serde_json::json!({"hosts": []}));
    let children = v["all"]["children"].as_array().unwrap();
    for g in ["edpm-compute", "edpm-networker", "nova-cell1", "nova-cell2", "ungrouped"] {
        assert!(children.iter().any(|c| c == g), "all.children lacks {g}");
    }
    assert_eq!(v["nova-cell2"]["hosts"], serde_json::json!(["edpm-compute-1"]));
    assert_eq!(v["nova-cell1"]["hosts"], serde_json::json!(["edpm-compute-0", "edpm-compute-2"]));
}

#[test]
fn environment_configures_inventory_script_mode() {
    let out = run(
        &["inventory", "--host", "edpm-compute-1"],
        &[("EDPM_AGENT_SOURCE", "examples/controlplane:examples/dataplane")],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["ansible_port"], "2022");
    assert_eq!(v["ansible_host"], "192.168.122.101");
}

#[test]
fn installed_as_edpm_inventory_behaves_as_inventory_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("edpm-inventory");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let out = run_program(&link, &["--list"], &[("EDPM_AGENT_CONFIG", "examples/edpm-agent.yaml")]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert!(out.stdout.starts_with('{'));
}

/// Every failure: a distinct exit code, one line on stderr naming the input, nothing on stdout.
fn assert_failure(args: &[&str], env: &[(&str, &str)], code: i32, needles: &[&str]) {
    let out = run(args, env);
    assert_eq!(out.code, code, "args {args:?}\nstderr: {}", out.stderr);
    assert_eq!(out.stdout, "", "no partial output on failure");
    assert_eq!(out.stderr.lines().count(), 1, "one-line error, got: {}", out.stderr);
    for n in needles {
        assert!(out.stderr.contains(n), "stderr lacks {n:?}: {}", out.stderr);
    }
}

fn scratch(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    d
}

const ROLE: &str = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneRole\nmetadata:\n  name: compute\nspec: {}\n";

fn node(name: &str, role: &str, host: &str) -> String {
    format!(
        "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNode\nmetadata:\n  name: {name}\nspec:\n  role: {role}\n  hostName: {name}\n  ansibleHost: {host}\n"
    )
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let d = scratch(&[("a.yaml", "kind: A\nmetadata:\n  name: [x\n")]);
    let src = d.path().join("a.yaml");
    assert_failure(
        &["--source", src.to_str().unwrap(), "inventory", "--list"],
        &[],
        3,
        &["a.yaml:3:", "unclosed"],
    );
}

#[test]
fn wrong_type_names_object_and_field() {
    let text = format!(
        "{ROLE}---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNode\nmetadata:\n  name: n0\nspec:\n  role: compute\n  node:\n    ansiblePort: twenty-two\n"
    );
    let d = scratch(&[("m.yaml", &text)]);
    let src = d.path().to_str().unwrap().to_string();
    assert_failure(
        &["--source", &src, "inventory", "--list"],
        &[],
        3,
        &["OpenStackDataPlaneNode/n0", "m.yaml:7", "spec.node.ansiblePort"],
    );
}

#[test]
fn missing_role_is_a_missing_reference() {
    let d = scratch(&[("m.yaml", &format!("{ROLE}{}", node("n0", "compte", "10.0.0.1")))]);
    let src = d.path().to_str().unwrap().to_string();
    assert_failure(
        &["--source", &src, "inventory", "--list"],
        &[],
        4,
        &["OpenStackDataPlaneNode/n0", "spec.role", "did you mean \"compute\""],
    );
}

#[test]
fn duplicate_hosts_are_a_conflict() {
    let d = scratch(&[(
        "m.yaml",
        &format!("{ROLE}{}{}", node("n0", "compute", "10.0.0.1"), node("n1", "compute", "10.0.0.1")),
    )]);
    let src = d.path().to_str().unwrap().to_string();
    assert_failure(
        &["--source", &src, "inventory", "--list"],
        &[],
        5,
        &["ansible_host \"10.0.0.1\"", "node n0", "node n1"],
    );
}

#[test]
fn duplicate_objects_across_files_are_a_conflict() {
    let d = scratch(&[("a.yaml", ROLE), ("b/c.yaml", ROLE)]);
    let src = d.path().to_str().unwrap().to_string();
    assert_failure(
        &["--source", &src, "inventory", "--list"],
        &[],
        5,
        &["OpenStackDataPlaneRole/compute is defined twice", "a.yaml:1", "c.yaml:1"],
    );
}

#[test]
fn missing_vars_from_configmap_is_a_missing_reference() {
    let ns = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: ns\nspec:\n  nodeTemplate:\n    ansibleSSHPrivateKeySecret: k\n    ansible:\n      ansibleVarsFrom:\n        - configMapRef:\n            name: absent\n  nodes:\n    n0: {}\n";
    let d = scratch(&[("ns.yaml", ns)]);
    let src = d.path().to_str().unwrap().to_string();
    assert_failure(
        &["--source", &src, "inventory", "--list"],
        &[],
        4,
        &["OpenStackDataPlaneNodeSet/ns", "ansibleVarsFrom[0].configMapRef.name", "ConfigMap \"absent\""],
    );
}

#[test]
fn non_mapping_ansible_vars_is_invalid() {
    let text = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneRole\nmetadata:\n  name: compute\nspec:\n  nodeTemplate:\n    ansibleVars: [a, b]\n";
    let d = scratch(&[("r.yaml", text)]);
    let src = d.path().to_str().unwrap().to_string();
    assert_failure(
        &["--source", &src, "inventory", "--list"],
        &[],
        3,
        &["spec.nodeTemplate.ansibleVars", "must be a mapping", "found a list"],
    );
}

#[test]
fn unreadable_or_empty_sources() {
    assert_failure(&["--source", "/nonexistent/edpm", "inventory", "--list"], &[], 6, &["/nonexistent/edpm"]);
    let d = scratch(&[("notes.txt", "hi")]);
    let src = d.path().to_str().unwrap().to_string();
    assert_failure(&["--source", &src, "inventory", "--list"], &[], 6, &["no manifests"]);
}

#[test]
fn no_source_is_a_usage_error() {
    assert_failure(&["inventory", "--list"], &[], 2, &["EDPM_AGENT_SOURCE"]);
}

#[test]
fn unknown_host_is_not_found() {
    assert_failure(
        &with(SEEDS, &["inventory", "--host", "edpm-compute-9"]),
        &[],
        8,
        &["edpm-compute-9", "did you mean"],
    );
    assert_failure(
        &with(SEEDS, &["inventory", "explain", "edpm-compute-0", "ansible_usr"]),
        &[],
        8,
        &["did you mean \"ansible_user\""],
    );
}

#[test]
fn unreachable_cluster_is_a_cluster_error() {
    let d = scratch(&[(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"http://127.0.0.1:9\"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u, namespace: openstack}}]\ncurrent-context: x\n",
    )]);
    let kc = d.path().join("kubeconfig");
    assert_failure(
        &["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "inventory", "--list"],
        &[("EDPM_AGENT_KUBE_TIMEOUT", "2")],
        7,
        &["listing openstackdataplanes", "reachable"],
    );
}

#[test]
fn export_to_file_is_atomic_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("hosts.yaml");
    std::fs::write(&target, "old\n").unwrap();
    let out = run(
        &with(SEEDS, &["inventory", "export", "--format", "yaml", "--output", target.to_str().unwrap()]),
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(std::fs::read_to_string(&target).unwrap().starts_with("edpm-compute:\n    hosts:\n"));
    assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o600);
    // A failing run leaves the previous file untouched.
    let bad =
        run(&["--source", "/nonexistent", "inventory", "export", "--output", target.to_str().unwrap()], &[]);
    assert_eq!(bad.code, 6);
    assert!(std::fs::read_to_string(&target).unwrap().starts_with("edpm-compute:"));
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
}

#[test]
fn explain_redacts_secret_values_unless_asked() {
    let ns = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: ns\nspec:\n  nodeTemplate:\n    ansibleSSHPrivateKeySecret: k\n    ansible:\n      ansibleVarsFrom:\n        - secretRef:\n            name: reg\n  nodes:\n    n0: {}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: reg\nstringData:\n  registry_password: hunter2\n";
    let d = scratch(&[("ns.yaml", ns)]);
    let src = d.path().to_str().unwrap().to_string();
    let out = run(&["--source", &src, "inventory", "explain", "n0", "registry_password"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("hunter2") && out.stdout.contains("redacted"), "{}", out.stdout);
    let out =
        run(&["--source", &src, "inventory", "explain", "n0", "registry_password", "--show-secrets"], &[]);
    assert!(out.stdout.contains("hunter2"));
    // A Secret's value copied into another variable, and any URL's password, are masked too.
    let ns = ns.replace(
        "  nodes:\n",
        "      ansibleVars:\n        mirror: https://mirror:hunter2@mirror.example:8443/repo\n        db: mysql://u:PlainPass9@db.example/x\n  nodes:\n",
    );
    let d2 = scratch(&[("ns.yaml", &ns)]);
    let src2 = d2.path().to_str().unwrap().to_string();
    for format in ["text", "json"] {
        let out = run(&["--source", &src2, "inventory", "explain", "n0", "--format", format], &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(!out.stdout.contains("hunter2") && !out.stdout.contains("PlainPass9"), "{}", out.stdout);
        assert!(
            out.stdout.contains("https://mirror:********@mirror.example:8443/repo")
                && out.stdout.contains("mysql://u:********@db.example/x"),
            "{}",
            out.stdout
        );
    }
    let out = run(&["--source", &src2, "inventory", "explain", "n0", "db", "--show-secrets"], &[]);
    assert!(out.stdout.contains("PlainPass9"), "{}", out.stdout);
    // Verbose logs never carry secret values either.
    let out = run(&["--source", &src, "-vv", "inventory", "--list"], &[]);
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

#[test]
fn validate_reports_every_problem_with_object_and_field() {
    let text = format!(
        "{ROLE}{}{}---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneRole\nmetadata:\n  name: Bad_Name\nspec:\n  nodeTemplate:\n    managed: false\n    ansibleVars: 3\n",
        node("n0", "compute", "10.0.0.1"),
        node("n1", "nope", "10.0.0.1"),
    );
    let d = scratch(&[("m.yaml", &text)]);
    let src = d.path().to_str().unwrap().to_string();
    let out = run(&["--source", &src, "validate"], &[]);
    assert_eq!(out.code, 9, "{}\n{}", out.stdout, out.stderr);
    for needle in [
        "error: OpenStackDataPlaneRole/Bad_Name",
        "metadata.name",
        "error: OpenStackDataPlaneNode/n1",
        "spec.role: Role \"nope\" does not exist",
        "warning: OpenStackDataPlaneRole/Bad_Name",
        "spec.nodeTemplate.managed: unknown field",
    ] {
        assert!(out.stdout.contains(needle), "validate output lacks {needle:?}:\n{}", out.stdout);
    }
    let json = run(&["--source", &src, "validate", "--format", "json"], &[]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(v["errors"].as_u64().unwrap() >= 2);
}

#[test]
fn validate_finds_duplicates_across_models_and_mangled_values() {
    let ns = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: ns\nspec:\n  nodeTemplate:\n    ansibleSSHPrivateKeySecret: k\n    ansible:\n      ansibleVarsFrom:\n        - configMapRef:\n            name: cm\n  nodes:\n    n0:\n      ansible:\n        ansibleHost: 10.0.0.1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  cidr: 192.168.122.0/24\n";
    let d = scratch(&[("ns.yaml", ns), ("r.yaml", &format!("{ROLE}{}", node("n0", "compute", "10.0.0.1")))]);
    let src = d.path().to_str().unwrap().to_string();
    let out = run(&["--source", &src, "validate"], &[]);
    assert_eq!(out.code, 9);
    assert!(out.stdout.contains("hostName \"n0\" is also used by"), "{}", out.stdout);
    assert!(out.stdout.contains("openstack-operator would decode it as 192.168"), "{}", out.stdout);
}

#[test]
fn validate_flags_tls_mismatch_with_the_control_plane() {
    let ns = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: ns\nspec:\n  nodeTemplate:\n    ansibleSSHPrivateKeySecret: k\n  nodes:\n    n0:\n      ansible:\n        ansibleHost: 10.0.0.1\n---\napiVersion: core.openstack.org/v1beta1\nkind: OpenStackControlPlane\nmetadata:\n  name: cp\nspec:\n  tls:\n    podLevel:\n      enabled: false\n";
    let d = scratch(&[("ns.yaml", ns)]);
    let src = d.path().to_str().unwrap().to_string();
    let out = run(&["--source", &src, "validate"], &[]);
    assert_eq!(out.code, 9, "{}", out.stdout);
    assert!(out.stdout.contains("spec.tlsEnabled: is true (the default) but OpenStackControlPlane/cp has spec.tls.podLevel.enabled false"), "{}", out.stdout);
}

#[test]
fn the_whole_examples_tree_is_one_deployment() {
    // Settings files sit beside the manifests; they hold no Kubernetes object and are skipped.
    let out = run(&["--source", "examples", "validate"], &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.ends_with("0 error(s), 0 warning(s) in 9 data-plane object(s), 7 host(s)\n"),
        "{}",
        out.stdout
    );
    let out = run(&["--source", "examples", "inventory", "--list"], &[]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["_meta"]["hostvars"].as_object().unwrap().len(), 7, "both models' hosts");
    // Debug logging names the skipped files.
    let out = run(&["--source", "examples", "-vv", "validate"], &[]);
    assert!(
        out.stderr.contains("examples/edpm-agent.yaml") && out.stderr.contains("holds no Kubernetes object")
    );
}

#[test]
fn source_options_go_before_or_after_the_command_and_not_to_oslo() {
    let before = run(
        &["--source", "examples/controlplane", "--source", "examples/dataplane", "inventory", "--list"],
        &[],
    );
    let after = run(
        &["inventory", "--list", "--source", "examples/controlplane", "--source", "examples/dataplane"],
        &[],
    );
    let split = run(
        &[
            "--source",
            "examples/controlplane",
            "inventory",
            "export",
            "--format",
            "json",
            "--source",
            "examples/dataplane",
        ],
        &[],
    );
    assert_eq!(
        (before.code, after.code, split.code),
        (0, 0, 0),
        "{}{}{}",
        before.stderr,
        after.stderr,
        split.stderr
    );
    assert_eq!(before.stdout, after.stdout);
    let out = run(&["--source", "examples", "oslo", "parse", "templates/README.md"], &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("oslo commands read only the files they name"), "{}", out.stderr);
    let help = run(&["oslo", "parse", "--help"], &[]);
    assert!(!help.stdout.contains("--source") && !help.stdout.contains("--config <"), "{}", help.stdout);
}

#[test]
fn an_empty_config_variable_means_unset() {
    let out = run(
        &["inventory", "--list"],
        &[("EDPM_AGENT_CONFIG", ""), ("EDPM_AGENT_SOURCE", "examples/dataplane:examples/controlplane")],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    // And a usage error never presents --config as a required argument.
    let out = run(&["inventory", "--bogus"], &[("EDPM_AGENT_CONFIG", "examples/edpm-agent.yaml")]);
    assert_eq!(out.code, 2);
    assert!(!out.stderr.contains("--config"), "{}", out.stderr);
}

#[test]
fn logs_are_plain_text_when_stderr_is_not_a_terminal() {
    let out = run(&with(SEEDS, &["-vv", "validate"]), &[]);
    assert!(out.stderr.contains("sources loaded"), "{}", out.stderr);
    assert!(!out.stderr.contains('\u{1b}'), "colour escapes in a file: {:?}", out.stderr);
}

#[test]
fn stage_root_problems_say_what_is_wrong() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("nope");
    assert_failure(
        &with(SEEDS, &["stage", "--node", "edpm-compute-0", "--root", missing.to_str().unwrap()]),
        &[],
        6,
        &["does not exist"],
    );
    let file = d.path().join("file");
    std::fs::write(&file, "").unwrap();
    assert_failure(
        &with(SEEDS, &["stage", "--node", "edpm-compute-0", "--root", file.to_str().unwrap()]),
        &[],
        6,
        &["not a directory"],
    );
}

#[test]
fn render_check_confirms_a_match() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    assert_eq!(run(&with(SEEDS, &["render", "--node", "edpm-compute-0", "--out", dir]), &[]).code, 0);
    let out = run(&with(SEEDS, &["render", "--node", "edpm-compute-0", "--out", dir, "--check"]), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.ends_with("match what would be rendered\n") && out.stdout.lines().count() == 1,
        "{}",
        out.stdout
    );
}

#[test]
fn validate_warns_of_variable_names_ansible_reserves() {
    let ns = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: ns\nspec:\n  nodeTemplate:\n    ansibleSSHPrivateKeySecret: k\n    ansible:\n      ansibleVars:\n        gather_facts: false\n        edpm_kernel_args: quiet\n  nodes:\n    n0:\n      ansible:\n        ansibleHost: 10.0.0.1\n        ansibleVars:\n          port: 2222\n";
    let d = scratch(&[("ns.yaml", ns)]);
    let src = d.path().to_str().unwrap().to_string();
    let out = run(&["--source", &src, "validate"], &[]);
    assert_eq!(out.code, 0, "warnings only: {}", out.stdout);
    for needle in [
        "spec.nodeTemplate.ansible.ansibleVars.gather_facts: gather_facts is a name Ansible reserves",
        "spec.nodes.n0.ansible.ansibleVars.port: port is a name Ansible reserves",
    ] {
        assert!(out.stdout.contains(needle), "validate output lacks {needle:?}:\n{}", out.stdout);
    }
    assert_eq!(out.stdout.matches("a name Ansible reserves").count(), 2, "{}", out.stdout);
    assert!(!out.stdout.contains("edpm_kernel_args"), "{}", out.stdout);
}

/// `inventory explain HOST VAR`: the one value asked for is printed whole, even when long.
#[test]
fn explaining_one_variable_prints_its_value_whole() {
    let out = run(&["--source", "examples", "inventory", "explain", "edpm-compute-0", "edpm_services"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out.stdout.lines().find(|l| l.starts_with("edpm_services = ")).unwrap();
    assert!(!line.contains('…') && line.ends_with(']'), "{line}");
}

/// A flag typo is one line, as every other error: clap's message, its tip and the usage.
#[test]
fn a_flag_typo_is_one_line() {
    let out = run(&["--source", "examples", "status", "show", "--nodset", "x"], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("edpm-agent: error: unexpected argument '--nodset' found; tip: a similar argument exists: '--nodeset'; usage: edpm-agent status show"),
        "{}",
        out.stderr
    );
    // Help is still clap's, on stdout.
    let out = run(&["status", "show", "--help"], &[]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("Usage: edpm-agent status show"), "{}", out.stdout);
}
