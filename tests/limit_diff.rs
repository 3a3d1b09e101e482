//! Differential test of `ansibleLimit` against real Ansible: which hosts `readiness::limit`
//! says a limit selects, against what ansible-core's own `InventoryManager` keeps for
//! `--limit` (`tests/limit/harness.py`, the calls `ansible-inventory --limit … --list` makes),
//! on the inventory edpm-agent produces (`inventory --list`, read through Ansible's script
//! plugin), for thousands of generated limits; a few through the `ansible-inventory` command
//! itself, to tie the harness to it.
//!
//! The rule: where edpm-agent answers, Ansible answers the same hosts; where Ansible refuses
//! a limit, edpm-agent answers Unknown; edpm-agent answers Unknown for a limit Ansible reads
//! only when the limit holds a construct edpm-agent refuses on purpose (`EXOTIC`).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Stdio};

use edpm_core::readiness::limit::{self, Coverage, Shape};
use serde_json::{Value, json};

use crate::util::{bin, python_tool, repo, run_program};

/// Three NodeSets, two of them in Nova cells, with host names that are globs (`edpm-compute-*`),
/// upper case and `_` (`Compute_X`, from a dotted hostName), a group's name (`web`) and a
/// reserved group's (`ungrouped`).
const NODESETS: &str = r#"
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNodeSet
metadata: {name: edpm-compute, namespace: openstack, annotations: {nova.openstack.org/cell: nova-cell1}}
spec:
  preProvisioned: true
  nodeTemplate: {ansibleSSHPrivateKeySecret: key}
  nodes:
    edpm-compute-0: {hostName: edpm-compute-0}
    edpm-compute-1: {hostName: edpm-compute-1}
    edpm-compute-2: {hostName: edpm-compute-2}
    star: {hostName: "edpm-compute-*"}
    x: {hostName: "Compute_X.example.com"}
    web: {hostName: web}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNodeSet
metadata: {name: edpm-compute-b, namespace: openstack, annotations: {nova.openstack.org/cell: nova-cell2}}
spec:
  preProvisioned: true
  nodeTemplate: {ansibleSSHPrivateKeySecret: key}
  nodes:
    edpm-compute-10: {hostName: edpm-compute-10}
    edpm-compute-11: {hostName: edpm-compute-11}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNodeSet
metadata: {name: web, namespace: openstack}
spec:
  preProvisioned: true
  nodeTemplate: {ansibleSSHPrivateKeySecret: key}
  nodes:
    web-0: {hostName: web-0}
    web-1: {hostName: web-1}
    ug: {hostName: ungrouped}
"#;

/// Pieces a limit is made of: names, globs, regular expressions Python and edpm-agent read
/// alike.
const ATOMS: &[&str] = &[
    "edpm-compute-0",
    "edpm-compute-11",
    "web",
    "web-1",
    "ungrouped",
    "Compute_X",
    "edpm-compute-*",
    "edpm-compute",
    "edpm-compute-b",
    "nova-cell1",
    "nova-cell2",
    "all",
    "nope",
    "edpm-compute-7",
    "localhost",
    "edpm-*",
    "edpm-compute-?",
    "*",
    "w*",
    "*-1",
    "edpm-compute-[0-1]",
    "edpm-compute-[!0]",
    "[a-z]*",
    "Compute_?",
    "*[*]",
    "edpm-compute-[*]",
    "web*",
    "?eb",
    "e*-*",
    "al*",
    "ungr*",
    "*.*",
    "edpm-compute-1?",
    "[!e]*",
    "edpm-compute-[z-a]",
    "edpm-compute-[]]",
    "[",
    "nova-cell[12]",
    "~edpm-compute-[0-6]$",
    "~edpm",
    "~.*",
    "~web$",
    "~w|C",
    "~(edpm|web)-\\d",
    "~.*-1$",
    "~[A-Z]",
    "~\\w+$",
    "~edpm-compute-\\*",
    "~Compute_X\\Z",
    "~(?:x|web)-0",
    "~edpm-compute-1{2}$",
    "~[[:alpha:]]",
    "~e.{3}-",
    "~ungrouped",
    "~all",
    "~nova",
    "~edpm-compute-\\d{1,2}$",
    "~\\bweb\\b",
    "~.*?-b",
    "~a{,3}",
    "~[^e]",
];

/// Subscripts put after a name or a glob.
const SUBSCRIPTS: &[&str] = &["[0]", "[1]", "[-1]", "[0:1]", "[1:]", "[2:0]", "[9]", "[0-1]", "[-7]"];

/// Constructs edpm-agent refuses on purpose: a limit holding one may be Unknown.
const EXOTIC: &[&str] =
    &["~(?i)EDPM", "~edpm(?=-c)", "@hosts", "~a{", "~(a)\\1", "~a**", "~\\x41", "~edpm-compute-(?!0)"];

/// A small deterministic generator (xorshift): the same limits every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n as u64).unwrap()
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.next(from.len())]
    }

    /// One pattern: an atom, maybe with a subscript (never after a regex), maybe signed.
    fn pattern(&mut self, exotic: bool) -> String {
        let mut p =
            if exotic && self.next(3) == 0 { self.pick(EXOTIC) } else { self.pick(ATOMS) }.to_string();
        if !p.starts_with(['~', '@']) && self.next(4) == 0 {
            p.push_str(self.pick(SUBSCRIPTS));
        }
        match self.next(6) {
            0 => format!("!{p}"),
            1 => format!("&{p}"),
            _ => p,
        }
    }

    fn limit(&mut self, exotic: bool) -> String {
        let n = 1 + self.next(4);
        let sep = self.pick(&[",", ",", ", ", ":", " "]);
        (0..n).map(|_| self.pattern(exotic)).collect::<Vec<_>>().join(sep)
    }
}

/// Ansible's answers, through the harness, for `limits` and `raw` ansibleLimit texts.
fn ansible(script: &std::path::Path, limits: &[String], raw: &[String]) -> (Vec<Value>, Vec<Value>) {
    let mut child = Command::new(python_tool("python3"))
        .arg(repo().join("tests/limit/harness.py"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ANSIBLE_INVENTORY_ENABLED", "script")
        .env("ANSIBLE_LOCAL_TEMP", "/tmp/edpm-agent-ansible-tmp")
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the limit harness");
    let request = json!({"inventory": script, "limits": limits, "raw": raw});
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "harness failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (v["limits"].as_array().unwrap().clone(), v["raw"].as_array().unwrap().clone())
}

/// The inventory edpm-agent produces for [`NODESETS`], as a script Ansible runs, and the two
/// shapes readiness could use: from the model, and from the `--list` itself.
fn inventory(dir: &std::path::Path) -> (std::path::PathBuf, Shape, Shape) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("nodesets.yaml"), NODESETS).unwrap();
    let out = run_program(&bin(), &["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = dir.join("inventory.json");
    std::fs::write(&json, &out.stdout).unwrap();
    let script = dir.join("inventory.sh");
    std::fs::write(&script, format!("#!/bin/sh\ncat '{}'\n", json.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let list: Value = serde_json::from_str(&out.stdout).unwrap();
    let groups: Vec<(String, Vec<&str>)> = list
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "_meta")
        .map(|(k, v)| {
            let hosts = v["hosts"]
                .as_array()
                .map(|h| h.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            (k.clone(), hosts)
        })
        .collect();
    let from_list = Shape::new(groups);
    let snap = edpm_core::snapshot::from_file_text("nodesets.yaml", NODESETS, None).unwrap();
    let model = edpm_core::model::resolve(&snap).unwrap();
    (script, Shape::of(&model), from_list)
}

/// Ours, as Ansible's harness writes its answer: the hosts, or `None` for Unknown.
fn ours(limit: &str, shape: &Shape, all: &BTreeSet<String>) -> Option<BTreeSet<String>> {
    match limit::subset(limit, shape) {
        Ok(None) => Some(all.clone()),
        Ok(Some(_)) => match limit::coverage(&format!("'{}'", limit.replace('\'', "'\\''")), shape) {
            Coverage::All => Some(all.clone()),
            Coverage::Hosts(h) => Some(h.into_iter().collect()),
            Coverage::Unknown(why) => panic!("{limit:?}: subset answers, coverage says Unknown: {why}"),
        },
        Err(_) => None,
    }
}

fn theirs(answer: &Value) -> Option<BTreeSet<String>> {
    answer["hosts"].as_array().map(|h| h.iter().map(|x| x.as_str().unwrap().to_string()).collect())
}

#[test]
fn limits_select_what_ansible_selects() {
    let d = tempfile::tempdir().unwrap();
    let (script, of_model, of_list) = inventory(d.path());
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    let mut limits: Vec<(String, bool)> = ATOMS.iter().map(|a| (a.to_string(), false)).collect();
    limits.extend(EXOTIC.iter().map(|a| (a.to_string(), true)));
    limits.extend((0..2500).map(|_| (g.limit(false), false)));
    limits.extend((0..500).map(|_| (g.limit(true), true)));
    let texts: Vec<String> = limits.iter().map(|(l, _)| l.clone()).collect();
    let (answers, _) = ansible(&script, &texts, &[]);
    let all = theirs(&ansible(&script, &["all".into()], &[]).0[0]).unwrap();
    let (mut unknown, mut refused) = (0, 0);
    for ((limit, exotic), answer) in limits.iter().zip(&answers) {
        for shape in [&of_model, &of_list] {
            let (o, t) = (ours(limit, shape, &all), theirs(answer));
            match (&o, &t) {
                (Some(o), Some(t)) => assert_eq!(o, t, "--limit {limit:?}"),
                (Some(o), None) => {
                    panic!("--limit {limit:?}: Ansible refuses it ({answer}), edpm-agent says {o:?}")
                }
                (None, None) => refused += 1,
                (None, Some(_)) => {
                    let why = limit::subset(limit, shape).unwrap_err();
                    assert!(*exotic, "--limit {limit:?}: Ansible reads it, edpm-agent says Unknown: {why}");
                    unknown += 1;
                }
            }
        }
    }
    eprintln!(
        "{} limits: {refused} refused by Ansible (Unknown here too), {unknown} exotic ones Unknown",
        limits.len()
    );
    assert!(refused > 0 && unknown > 0, "the generator reaches both");
}

/// An `ansibleLimit` passes ansible-runner's `shlex.split` first: quotes are taken off, and
/// more than one word is a command line ansible-playbook refuses (Unknown here).
#[test]
fn an_ansible_limit_is_split_as_ansible_runner_splits_it() {
    let d = tempfile::tempdir().unwrap();
    let (script, shape, _) = inventory(d.path());
    let raw: Vec<String> = [
        "'edpm-compute-0'",
        "\"web,web-0\"",
        "edpm-compute-0 edpm-compute-1",
        "edpm-compute-0, edpm-compute-1",
        "-x",
        "'unclosed",
        "",
        "  ",
        "e\\*",
        "'~edpm-compute-[0-6]$'",
        "'edpm-compute-*'",
        "\"a b\",web",
        "nova-cell1,!edpm-compute-1",
        "edpm-compute-\\[\\*\\]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (_, answers) = ansible(&script, &[], &raw);
    let (all_answer, _) = ansible(&script, &["all".into()], &[]);
    let all = theirs(&all_answer[0]).unwrap();
    for (text, answer) in raw.iter().zip(&answers) {
        let ours = match limit::coverage(text, &shape) {
            Coverage::All => Some(all.clone()),
            Coverage::Hosts(h) => Some(h.into_iter().collect()),
            Coverage::Unknown(_) => None,
        };
        assert_eq!(ours, theirs(answer), "ansibleLimit {text:?}: Ansible {answer}");
    }
}

/// The harness asks what `ansible-inventory --limit … --list` does: a few limits through the
/// command itself.
#[test]
fn the_harness_answers_as_ansible_inventory_does() {
    let d = tempfile::tempdir().unwrap();
    let (script, _, _) = inventory(d.path());
    let limits: Vec<String> =
        ["~edpm-compute-[0-6]$", "edpm-*,!nova-cell2", "&web", "all[-1]", "edpm-compute-*", "w*[1:]"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let (answers, _) = ansible(&script, &limits, &[]);
    let tool = python_tool("ansible-inventory");
    for (limit, answer) in limits.iter().zip(&answers) {
        let out = run_program(
            &tool,
            &["-i", script.to_str().unwrap(), "--limit", limit, "--list"],
            &[("ANSIBLE_INVENTORY_ENABLED", "script"), ("ANSIBLE_LOCAL_TEMP", "/tmp/edpm-agent-ansible-tmp")],
        );
        assert_eq!(out.code, 0, "{limit}: {}", out.stderr);
        let list: Value = serde_json::from_str(&out.stdout).unwrap();
        let hosts: BTreeSet<String> =
            list["_meta"]["hostvars"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(Some(hosts), theirs(answer), "--limit {limit:?}");
    }
}
