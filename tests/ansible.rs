//! Real Ansible: `ansible-inventory` and `ansible-playbook` from the venv `.ci/run` creates.
//! `ANSIBLE_INVENTORY_UNPARSED_FAILED=true` makes a broken script fail the run instead of
//! degrading to an empty inventory (oslo-ansible-crates.md §3), and the script is read only by
//! Ansible's script plugin (`ANSIBLE_INVENTORY_ENABLED=script`, as README recommends): otherwise,
//! when the script fails, Ansible feeds the executable to its YAML and INI plugins, which parse
//! the whole binary (seconds and gigabytes for a debug build) and print garbage.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::util::{bin, python_tool, repo, run, run_program};

const ANSIBLE_ENV: &[(&str, &str)] = &[
    ("ANSIBLE_INVENTORY_UNPARSED_FAILED", "true"),
    ("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "true"),
    ("ANSIBLE_HOST_KEY_CHECKING", "false"),
    ("ANSIBLE_NOCOLOR", "1"),
    ("ANSIBLE_LOCAL_TEMP", "/tmp/edpm-agent-ansible-tmp"),
];

/// Only the script plugin reads an inventory script.
const SCRIPT_ENV: (&str, &str) = ("ANSIBLE_INVENTORY_ENABLED", "script");

fn script(dir: &Path) -> PathBuf {
    let link = dir.join("edpm-inventory");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    link
}

fn env<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    ANSIBLE_ENV.iter().chain(extra).copied().collect()
}

fn script_env<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut e = env(extra);
    e.push(SCRIPT_ENV);
    e
}

/// What Ansible should see for each host: its groups' vars (by group name), then its own.
fn expected_hostvars(list: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (host, hv) in list["_meta"]["hostvars"].as_object().unwrap() {
        let mut vars = Map::new();
        let groups = list.as_object().unwrap();
        let mut names: Vec<&String> = groups.keys().filter(|g| !g.starts_with('_') && *g != "all").collect();
        names.sort();
        for g in names {
            if groups[g]["hosts"].as_array().is_some_and(|h| h.iter().any(|x| x == host.as_str())) {
                vars.extend(groups[g]["vars"].as_object().cloned().unwrap_or_default());
            }
        }
        vars.extend(hv.as_object().unwrap().clone());
        out.insert(host.clone(), Value::Object(vars));
    }
    out
}

fn ansible_inventory(inventory: &Path, extra_env: &[(&str, &str)], args: &[&str]) -> crate::util::Output {
    let tool = python_tool("ansible-inventory");
    let mut all = vec!["-i", inventory.to_str().unwrap()];
    all.extend_from_slice(args);
    run_program(&tool, &all, &env(extra_env))
}

#[test]
fn ansible_inventory_reads_the_script_like_our_own_list() {
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path());
    let cfg = [("EDPM_AGENT_CONFIG", "examples/edpm-agent.yaml"), SCRIPT_ENV];
    let out = ansible_inventory(&s, &cfg, &["--list"]);
    assert_eq!(out.code, 0, "ansible-inventory failed: {}", out.stderr);
    assert!(!out.stderr.contains("ERROR") && !out.stderr.contains("WARNING]: * Failed"), "{}", out.stderr);
    let theirs: Value = serde_json::from_str(&out.stdout).unwrap();
    let ours: Value = serde_json::from_str(
        &run(&["--config", "examples/edpm-agent.yaml", "inventory", "--list"], &[]).stdout,
    )
    .unwrap();
    assert_eq!(theirs["_meta"]["hostvars"], Value::Object(expected_hostvars(&ours)));
    assert_eq!(theirs["nova-cell2"]["hosts"], serde_json::json!(["edpm-compute-1"]));

    let graph = ansible_inventory(&s, &cfg, &["--graph"]);
    assert_eq!(graph.code, 0, "{}", graph.stderr);
    for line in [
        "@all:",
        "@edpm-compute:",
        "@nova-cell1:",
        "@nova-cell2:",
        "@edpm-networker:",
        "|  |--edpm-compute-1",
    ] {
        assert!(graph.stdout.contains(line), "--graph lacks {line:?}:\n{}", graph.stdout);
    }
}

#[test]
fn static_exports_mean_the_same_to_ansible_as_the_script() {
    let d = tempfile::tempdir().unwrap();
    for cfg in ["examples/edpm-agent.yaml", "examples/edpm-agent-nodeset.yaml"] {
        let ours: Value =
            serde_json::from_str(&run(&["--config", cfg, "inventory", "--list"], &[]).stdout).unwrap();
        let expected = Value::Object(expected_hostvars(&ours));
        for (format, ext) in [("yaml", "yml"), ("ini", "ini"), ("json", "json")] {
            let file = d.path().join(format!("hosts.{ext}"));
            let out = run(
                &[
                    "--config",
                    cfg,
                    "inventory",
                    "export",
                    "--format",
                    format,
                    "--output",
                    file.to_str().unwrap(),
                ],
                &[],
            );
            assert_eq!(out.code, 0, "{}", out.stderr);
            let inv = ansible_inventory(&file, &[], &["--list"]);
            assert_eq!(inv.code, 0, "{format}: {}", inv.stderr);
            let theirs: Value = serde_json::from_str(&inv.stdout).unwrap();
            assert_eq!(theirs["_meta"]["hostvars"], expected, "{cfg} exported as {format}");
        }
    }
}

#[test]
fn a_failing_script_fails_the_ansible_run_with_our_message() {
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path());
    let out =
        ansible_inventory(&s, &[("EDPM_AGENT_SOURCE", "/nonexistent/manifests"), SCRIPT_ENV], &["--list"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("/nonexistent/manifests"), "{}", out.stderr);
    // Only the script plugin tried: no other plugin parsed the executable and printed it.
    assert!(
        out.stderr.len() < 4096 && !out.stderr.contains("ELF"),
        "Ansible fed the binary to other inventory plugins:\n{}",
        &out.stderr[..out.stderr.len().min(2000)]
    );
}

#[test]
fn ansible_playbook_runs_against_the_script_inventory() {
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path());
    let results = d.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let playbook = d.path().join("site.yml");
    std::fs::write(
        &playbook,
        r#"
- hosts: edpm-compute
  gather_facts: false
  tasks:
    - name: inventory variables reach the play with the right precedence
      ansible.builtin.assert:
        that:
          - ansible_user == 'cloud-admin'
          - edpm_nodeset_name == 'edpm-compute'
          - "'nova' in edpm_services"
          - ansible_ssh_private_key_file == '/runner/env/ssh_key/ssh_key_edpm-compute'
    - name: the node's own values win over its role's
      ansible.builtin.assert:
        that:
          - ansible_port == '2022'
          - edpm_chrony_ntp_servers == ['ntp.cell2.example.com']
          - "'nova-cell2' in group_names"
          - "'nova-cell1' not in group_names"
      when: inventory_hostname == 'edpm-compute-1'
    - name: record what each host saw
      ansible.builtin.copy:
        dest: "{{ results_dir }}/{{ inventory_hostname }}"
        content: "{{ ctlplane_ip }} {{ canonical_hostname }} {{ group_names | join(',') }}\n"
"#,
    )
    .unwrap();
    let tool = python_tool("ansible-playbook");
    let rd = format!("results_dir={}", results.display());
    let out = run_program(
        &tool,
        &[
            "-i",
            s.to_str().unwrap(),
            playbook.to_str().unwrap(),
            "-e",
            "ansible_connection=local",
            "-e",
            "ansible_python_interpreter={{ ansible_playbook_python }}",
            "-e",
            &rd,
        ],
        &script_env(&[("EDPM_AGENT_CONFIG", repo().join("examples/edpm-agent.yaml").to_str().unwrap())]),
    );
    assert_eq!(out.code, 0, "ansible-playbook failed:\n{}\n{}", out.stdout, out.stderr);
    let seen = |h: &str| std::fs::read_to_string(results.join(h)).unwrap();
    assert_eq!(
        seen("edpm-compute-0"),
        "192.168.122.100 edpm-compute-0.ctlplane.example.com edpm-compute,nova-cell1\n"
    );
    assert_eq!(
        seen("edpm-compute-1"),
        "192.168.122.101 edpm-compute-1.ctlplane.example.com edpm-compute,nova-cell2\n"
    );
    assert_eq!(
        seen("edpm-compute-2"),
        "192.168.122.102 edpm-compute-2.lab.example.com edpm-compute,nova-cell1\n"
    );
    assert!(!results.join("edpm-networker-0").exists());
}

/// `validate`'s list of the names Ansible reserves is the installed Ansible's own
/// (`ansible.vars.reserved.get_reserved_names()`, less `vars`, which it ignores), and a
/// reserved name in ansibleVars is what ansible-playbook warns about.
#[test]
fn validate_knows_the_names_ansible_reserves() {
    let python = python_tool("python3");
    let out = run_program(
        &python,
        &[
            "-c",
            "from ansible.vars.reserved import get_reserved_names; print('\\n'.join(sorted(get_reserved_names() - {'vars'})))",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ansible: Vec<&str> = out.stdout.lines().collect();
    let mut ours: Vec<&str> = edpm_core::validate::ANSIBLE_RESERVED.to_vec();
    ours.sort_unstable();
    assert_eq!(ours, ansible, "update edpm_core::validate::ANSIBLE_RESERVED to the installed Ansible's list");
}
