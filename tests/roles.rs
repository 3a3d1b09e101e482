//! The Ansible roles in roles/, run by the real ansible-playbook against localhost
//! (`connection: local`) into a temporary root, twice: the second run must report no change.

use std::os::unix::fs::PermissionsExt;

use crate::util::{bin, node_bin, python_tool, repo, run_program};

/// ansible-playbook against localhost with `connection: local`, the repository's roles on the
/// role path.
fn play_local(playbook: &std::path::Path) -> crate::util::Output {
    let roles = repo().join("roles");
    let env = [
        ("ANSIBLE_ROLES_PATH", roles.to_str().unwrap()),
        ("ANSIBLE_NOCOLOR", "1"),
        ("ANSIBLE_LOCAL_TEMP", "/tmp/edpm-agent-ansible-tmp"),
    ];
    let args = [
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        "ansible_python_interpreter={{ ansible_playbook_python }}",
        playbook.to_str().unwrap(),
    ];
    run_program(&python_tool("ansible-playbook"), &args, &env)
}

fn recap_changed(stdout: &str) -> u32 {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.contains("ok=") && l.contains("changed="))
        .unwrap_or_else(|| panic!("no recap in {stdout}"));
    line.split_whitespace().find_map(|w| w.strip_prefix("changed=")).unwrap().parse().unwrap()
}

#[test]
fn install_and_render_roles_are_idempotent() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let playbook = work.path().join("site.yml");
    let examples = repo().join("examples");
    std::fs::write(
        &playbook,
        format!(
            r#"
- hosts: localhost
  gather_facts: false
  vars:
    edpm_agent_root: "{root}"
    edpm_agent_install_src: "{bin}"
    edpm_agent_install_node_src: "{node_bin}"
    edpm_agent_config:
      source: ["{ex}/controlplane", "{ex}/dataplane"]
      namespace: openstack
    edpm_agent_render_node: edpm-compute-1
  roles:
    - edpm_agent_install
    - edpm_agent_render
"#,
            root = root.path().display(),
            bin = bin().display(),
            node_bin = node_bin().display(),
            ex = examples.display()
        ),
    )
    .unwrap();
    let play = || play_local(&playbook);
    let first = play();
    assert_eq!(first.code, 0, "first run failed:\n{}\n{}", first.stdout, first.stderr);
    assert!(recap_changed(&first.stdout) >= 4, "{}", first.stdout);
    let r = root.path();
    let mode = |p: &str| std::fs::metadata(r.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("usr/local/bin/edpm-agent"), 0o755);
    assert_eq!(mode("usr/local/bin/edpm-agent-node"), 0o755);
    assert_eq!(
        std::fs::read_link(r.join("usr/local/bin/edpm-inventory")).unwrap().to_str(),
        Some("edpm-agent")
    );
    assert_eq!(mode("etc/edpm-agent/agent.yaml"), 0o600);
    assert_eq!(mode("var/lib/openstack/configs/nova/01-nova.conf"), 0o600);
    assert_eq!(mode("var/lib/openstack/configs/nova/02-nova-host-specific.conf"), 0o644);
    let nova = std::fs::read_to_string(r.join("var/lib/openstack/configs/nova/01-nova.conf")).unwrap();
    assert!(nova.contains("rabbitmq-cell2"), "edpm-compute-1 is in cell2");
    assert!(r.join("var/lib/openstack/configs/neutron-metadata/10-neutron-metadata.conf").is_file());

    let second = play();
    assert_eq!(second.code, 0, "second run failed:\n{}\n{}", second.stdout, second.stderr);
    assert_eq!(recap_changed(&second.stdout), 0, "second run must change nothing:\n{}", second.stdout);

    // A drifted file is put back, and only that counts as a change.
    std::fs::write(r.join("var/lib/openstack/configs/nova/02-nova-host-specific.conf"), "[DEFAULT]\n")
        .unwrap();
    let third = play();
    assert_eq!(third.code, 0);
    assert_eq!(recap_changed(&third.stdout), 1, "{}", third.stdout);
    assert!(
        std::fs::read_to_string(r.join("var/lib/openstack/configs/nova/02-nova-host-specific.conf"))
            .unwrap()
            .contains("my_ip = 192.168.122.101")
    );
}

#[test]
fn stage_role_is_idempotent_and_removes_what_it_no_longer_wants() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    crate::util::example_copy(&src);
    let playbook = work.path().join("site.yml");
    std::fs::write(
        &playbook,
        format!(
            "- hosts: localhost\n  gather_facts: false\n  vars:\n    edpm_agent_root: \"{root}\"\n    edpm_agent_install_src: \"{bin}\"\n    edpm_agent_install_node_src: \"{node_bin}\"\n    edpm_agent_config:\n      source: [\"{src}/controlplane\", \"{src}/dataplane\"]\n    edpm_agent_stage_node: edpm-compute-0\n  roles:\n    - edpm_agent_install\n    - edpm_agent_stage\n",
            root = root.path().display(),
            bin = bin().display(),
            node_bin = node_bin().display(),
            src = src.display()
        ),
    )
    .unwrap();
    let play = || play_local(&playbook);
    let first = play();
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let r = root.path();
    assert_eq!(
        std::fs::metadata(r.join("var/lib/openstack/config/ceph/ceph.client.openstack.keyring"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert!(r.join("var/lib/openstack/configs/nova/ssh-privatekey").is_file());
    let second = play();
    assert_eq!(second.code, 0);
    assert_eq!(recap_changed(&second.stdout), 0, "{}", second.stdout);
    let cm = src.join("controlplane/configmaps.yaml");
    let text = std::fs::read_to_string(&cm).unwrap();
    std::fs::write(&cm, text.replace("name: nova-extra-config", "name: nova-extra-config-off")).unwrap();
    let third = play();
    assert_eq!(third.code, 0);
    assert_eq!(recap_changed(&third.stdout), 1, "{}", third.stdout);
    assert!(!r.join("var/lib/openstack/configs/nova/25-nova-extra.conf").exists());
}

#[test]
fn node_role_installs_config_kubeconfig_and_unit_idempotently_without_starting_it_under_a_root() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let playbook = work.path().join("site.yml");
    // Stands in for the content of the node's kubeconfig Secret.
    let token = "token-that-must-never-be-printed";
    std::fs::write(
        &playbook,
        format!(
            r#"
- hosts: localhost
  gather_facts: false
  vars:
    edpm_agent_root: "{root}"
    edpm_agent_install_src: "{bin}"
    edpm_agent_install_node_src: "{node_bin}"
    edpm_agent_node_nodeset: edpm-compute-cell1
    edpm_agent_node_name: edpm-compute-3
    edpm_agent_node_expect_hostname: edpm-compute-3.ctlplane.example.com
    edpm_agent_node_expect_addresses: ["192.168.122.103"]
    edpm_agent_node_settings:
      heartbeat_seconds: 600
    edpm_agent_node_kubeconfig: |
      apiVersion: v1
      kind: Config
      users:
        - name: edpm-agent-node
          user:
            token: {token}
  roles:
    - edpm_agent_install
    - edpm_agent_node
"#,
            root = root.path().display(),
            bin = bin().display(),
            node_bin = node_bin().display(),
        ),
    )
    .unwrap();
    let play = || play_local(&playbook);
    let first = play();
    assert_eq!(first.code, 0, "first run failed:\n{}\n{}", first.stdout, first.stderr);
    assert!(!first.stdout.contains(token) && !first.stderr.contains(token), "the kubeconfig was printed");
    // The test runs under a temporary root, so the role installs the unit but never starts it,
    // and says why.
    assert!(
        first.stdout.contains("edpm-agent-node.service not started: installing under edpm_agent_root"),
        "{}",
        first.stdout
    );
    let r = root.path();
    let mode = |p: &str| std::fs::metadata(r.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("etc/edpm-agent/kubeconfig"), 0o600);
    assert_eq!(mode("etc/edpm-agent/node.yaml"), 0o600);
    assert!(std::fs::read_to_string(r.join("etc/edpm-agent/kubeconfig")).unwrap().contains(token));
    let unit = std::fs::read(r.join("etc/systemd/system/edpm-agent-node.service")).unwrap();
    assert_eq!(unit, std::fs::read(repo().join("packaging/systemd/edpm-agent-node.service")).unwrap());
    let dropin =
        std::fs::read_to_string(r.join("etc/systemd/system/edpm-agent-node.service.d/10-edpm-agent.conf"))
            .unwrap();
    assert!(
        dropin.contains(
            "ExecStart=\nExecStart=/usr/local/bin/edpm-agent-node --config /etc/edpm-agent/node.yaml\n"
        ),
        "{dropin}"
    );

    // The agent reads what the role wrote: the object is derived as `status report` names it.
    let config = r.join("etc/edpm-agent/node.yaml");
    let once = run_program(
        &r.join("usr/local/bin/edpm-agent-node"),
        &["--config", config.to_str().unwrap(), "--once", "--format", "json"],
        &[],
    );
    assert_eq!(once.code, 0, "{}", once.stderr);
    let v: serde_json::Value = serde_json::from_str(&once.stdout).unwrap();
    assert_eq!(v["object"], "edpm-compute-cell1-edpm-compute-3");
    assert_eq!(v["node"], "edpm-compute-3");
    assert_eq!(v["root"], r.display().to_string());
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("heartbeat_seconds: 600") && text.contains("192.168.122.103"), "{text}");
    assert!(text.contains("lease_namespace: edpm-node-lease"), "the Leases' own namespace: {text}");

    let second = play();
    assert_eq!(second.code, 0, "second run failed:\n{}\n{}", second.stdout, second.stderr);
    assert_eq!(recap_changed(&second.stdout), 0, "second run must change nothing:\n{}", second.stdout);
}

#[test]
fn node_role_refuses_to_run_without_its_identity_or_credentials() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let playbook = work.path().join("site.yml");
    std::fs::write(
        &playbook,
        format!(
            "- hosts: localhost\n  gather_facts: false\n  vars:\n    edpm_agent_root: \"{}\"\n  roles:\n    - edpm_agent_node\n",
            root.path().display()
        ),
    )
    .unwrap();
    let out = play_local(&playbook);
    assert_ne!(out.code, 0);
    assert!(out.stdout.contains("edpm_agent_node needs edpm_agent_node_nodeset"), "{}", out.stdout);
    assert!(std::fs::read_dir(root.path()).unwrap().next().is_none(), "nothing written");
}

#[test]
fn node_roles_unit_is_the_packaged_one() {
    assert_eq!(
        std::fs::read(repo().join("roles/edpm_agent_node/files/edpm-agent-node.service")).unwrap(),
        std::fs::read(repo().join("packaging/systemd/edpm-agent-node.service")).unwrap(),
        "roles/edpm_agent_node/files/edpm-agent-node.service is a copy of packaging/systemd's: copy it again"
    );
}
