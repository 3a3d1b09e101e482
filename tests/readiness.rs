//! Readiness: conformance with upstream's own NodeSet conditions (kuttl fixtures), goldens of
//! `status show`/`explain` for the examples and a fixture, `status report` into a directory,
//! `status wait`'s exit codes, and the committed CRDs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{normalize, repo, run};

const NOW: (&str, &str) = ("EDPM_AGENT_NOW", "2026-11-23T12:00:00Z");

fn kuttl() -> PathBuf {
    repo().join("tests/fixtures/upstream-kuttl")
}

fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|d| d.get("kind").is_some())
        .collect()
}

fn step_of(file: &str) -> Option<u32> {
    file.split('-').next()?.parse().ok()
}

fn key(d: &Value) -> (String, String) {
    (d["kind"].as_str().unwrap_or("").to_string(), d["metadata"]["name"].as_str().unwrap_or("").to_string())
}

/// The cluster as upstream left it at an assert step: every object the steps up to it
/// applied, with the status blocks the assert shows. Deployments are created in step order.
fn cluster_at(test: &Path, step: u32) -> (Vec<Value>, Vec<Value>) {
    let mut files: Vec<String> =
        std::fs::read_dir(test).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    let mut objects: Vec<((String, String), Value)> = Vec::new();
    for f in files.iter().filter(|f| !f.contains("assert") && step_of(f).is_some_and(|s| s <= step)) {
        let s = step_of(f).unwrap();
        for mut d in docs(&test.join(f)) {
            if d["apiVersion"].as_str().is_some_and(|a| a.starts_with("kuttl.dev")) {
                // A TestStep's scripts delete Deployments (`oc delete openstackdataplanedeployment X`).
                for cmd in d["commands"].as_array().into_iter().flatten() {
                    let script = cmd["script"].as_str().or(cmd["command"].as_str()).unwrap_or("");
                    let words: Vec<&str> = script.split_whitespace().collect();
                    for w in words.windows(4) {
                        if w[0] == "oc" && w[1] == "delete" && w[2] == "openstackdataplanedeployment" {
                            let name = w[3].to_string();
                            objects
                                .retain(|((k, n), _)| !(k == "OpenStackDataPlaneDeployment" && *n == name));
                        }
                    }
                }
                continue;
            }
            if d["kind"] == "OpenStackDataPlaneDeployment" {
                d["metadata"]["creationTimestamp"] = json!(format!("2024-01-01T00:00:{s:02}Z"));
            }
            let k = key(&d);
            // kuttl applies a step onto what exists: a JSON merge patch for custom resources.
            match objects.iter_mut().find(|(x, _)| *x == k) {
                Some((_, existing)) => merge(existing, d),
                None => objects.push((k, d)),
            }
        }
    }
    let assert: Vec<Value> = docs(&test.join(format!("{step:02}-assert.yaml")))
        .into_iter()
        .filter(|d| !d["apiVersion"].as_str().is_some_and(|a| a.starts_with("kuttl.dev")))
        .collect();
    for a in &assert {
        let k = key(a);
        match objects.iter_mut().find(|(x, _)| *x == k) {
            Some((_, o)) => {
                if let Some(st) = a.get("status") {
                    o["status"] = st.clone();
                }
            }
            None if a["kind"] == "Job" => objects.push((k, a.clone())),
            None => {}
        }
    }
    (objects.into_iter().map(|(_, o)| o).collect(), assert)
}

/// RFC 7386 merge patch: maps merge, everything else is replaced.
fn merge(into: &mut Value, patch: Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    a.remove(&k);
                } else {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

fn status_json(dir: &Path) -> Value {
    let out = run(&["--source", dir.to_str().unwrap(), "status", "show", "--format", "json"], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

fn write_docs(dir: &Path, objects: &[Value]) {
    let mut text = String::new();
    for o in objects {
        text.push_str("---\n");
        text.push_str(&serde_saphyr::to_string(o).unwrap());
    }
    std::fs::write(dir.join("cluster.yaml"), text).unwrap();
}

/// Compares the keys the assert pins (kuttl ignores the others).
fn agree(want: &Value, have: &Value, keys: &[&str], what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for k in keys {
        if let Some(w) = want.get(*k)
            && Some(w) != have.get(*k)
        {
            problems.push(format!("{what}: {k} is {:?}, upstream says {w}", have.get(*k)));
        }
    }
    problems
}

#[test]
fn the_nodeset_view_agrees_with_upstreams_own_conditions() {
    let mut checked = 0;
    let mut problems = Vec::new();
    let mut tests: Vec<PathBuf> =
        std::fs::read_dir(kuttl()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    tests.sort();
    for test in &tests {
        let mut asserts: Vec<u32> = std::fs::read_dir(test)
            .unwrap()
            .filter_map(|e| {
                let n = e.unwrap().file_name().into_string().unwrap();
                n.ends_with("-assert.yaml").then(|| step_of(&n)).flatten()
            })
            .collect();
        asserts.sort();
        for step in asserts {
            let (objects, assert) = cluster_at(test, step);
            let expected: Vec<&Value> = assert
                .iter()
                .filter(|d| d["kind"] == "OpenStackDataPlaneNodeSet" && d["status"]["conditions"].is_array())
                .collect();
            if expected.is_empty() {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            write_docs(dir.path(), &objects);
            let ours = status_json(dir.path());
            let case = format!("{}/{step:02}", test.file_name().unwrap().to_string_lossy());
            for ns in expected {
                let name = ns["metadata"]["name"].as_str().unwrap();
                let Some(view) = ours["nodeSets"].as_array().unwrap().iter().find(|s| s["name"] == name)
                else {
                    problems.push(format!("{case}: no NodeSet {name} in our view"));
                    continue;
                };
                let find = |ty: &str| {
                    view["conditions"].as_array().unwrap().iter().find(|c| c["type"] == ty).cloned()
                };
                for c in ns["status"]["conditions"].as_array().unwrap() {
                    let ty = c["type"].as_str().unwrap();
                    let keys: &[&str] = match ty {
                        "Ready" => &["status", "reason", "severity"],
                        "DeploymentReady" => &["status", "reason", "severity", "message"],
                        _ => continue,
                    };
                    match find(ty) {
                        Some(have) => problems.extend(agree(c, &have, keys, &format!("{case} {name} {ty}"))),
                        None => problems.push(format!("{case} {name}: no {ty}")),
                    }
                    checked += 1;
                }
                // upstream's service conditions of the newest Deployment that has them.
                let newest_services = assert
                    .iter()
                    .filter(|d| d["kind"] == "OpenStackDataPlaneDeployment")
                    .filter_map(|d| d["status"]["nodeSetConditions"][name].as_array())
                    .next_back()
                    .cloned();
                for c in newest_services
                    .into_iter()
                    .flatten()
                    .filter(|c| c["type"].as_str().unwrap().starts_with("Service"))
                {
                    let ty = c["type"].as_str().unwrap();
                    match find(ty) {
                        Some(have) => problems.extend(agree(
                            &c,
                            &have,
                            &["status", "reason", "severity", "message"],
                            &format!("{case} {name} {ty}"),
                        )),
                        None => problems.push(format!("{case} {name}: no {ty}")),
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(problems.is_empty(), "{} disagreement(s):\n{}", problems.len(), problems.join("\n"));
    assert!(checked >= 40, "only {checked} conditions compared: the fixtures were not read");
}

fn golden(name: &str, args: &[&str]) {
    golden_with(name, args, &[]);
}

/// A golden of `args` run with `env` besides the clock.
fn golden_with(name: &str, args: &[&str], env: &[(&str, &str)]) {
    let env: Vec<(&str, &str)> = std::iter::once(NOW).chain(env.iter().copied()).collect();
    let out = run(args, &env);
    let text = format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.code,
        normalize(&out.stdout),
        normalize(&out.stderr)
    );
    insta::with_settings!({ snapshot_path => "snapshots/readiness", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn goldens_for_the_examples() {
    golden("examples_table", &["--source", "examples", "status", "show"]);
    golden(
        "examples_json",
        &["--source", "examples", "status", "show", "--format", "json", "--nodeset", "edpm-compute-cell2"],
    );
    golden("examples_explain_failed", &["--source", "examples", "status", "explain", "edpm-compute-5"]);
    golden("examples_explain_limited", &["--source", "examples", "status", "explain", "edpm-compute-4"]);
    golden("examples_explain_nodeset", &["--source", "examples", "status", "explain", "edpm-compute-cell1"]);
    // Nova's evidence, from the saved answers in examples/status/nova-*.json.
    golden("examples_explain_nova", &["--source", "examples", "status", "explain", "edpm-compute-3"]);
    golden("examples_unknown_node", &["--source", "examples", "status", "show", "--node", "edpm-compute-9"]);
}

#[test]
fn goldens_for_an_upstream_failure() {
    let test = kuttl().join("dataplane-service-failure");
    let (objects, _) = cluster_at(&test, 0);
    let dir = tempfile::tempdir().unwrap();
    write_docs(dir.path(), &objects);
    let d = dir.path().to_str().unwrap();
    golden("upstream_service_failure_table", &["--source", d, "status", "show"]);
    golden("upstream_service_failure_json", &["--source", d, "status", "show", "--format", "json"]);
}

/// Stands for a terminal on stdout (the binary reads it as it reads `isatty`).
const TERMINAL: (&str, &str) = ("EDPM_AGENT_TERMINAL", "1");

/// Each not-ready node's first cause on its row: on a terminal of 80 and 200 columns (cut to
/// fit), piped (whole, whatever COLUMNS says) and wide (every column, whole messages).
#[test]
fn goldens_for_the_rows_at_each_width() {
    let show = ["--source", "examples", "status", "show"];
    golden_with("examples_table_80", &show, &[TERMINAL, ("COLUMNS", "80"), ("NO_COLOR", "1")]);
    golden_with("examples_table_200", &show, &[TERMINAL, ("COLUMNS", "200"), ("NO_COLOR", "1")]);
    golden_with("examples_table_piped", &show, &[("COLUMNS", "80")]);
    golden_with("examples_table_wide", &["--source", "examples", "status", "show", "-o", "wide"], &[]);
}

#[test]
fn the_table_fits_its_columns_and_piped_keeps_whole_lines() {
    for columns in ["80", "200"] {
        let out = run(&["--source", "examples", "status", "show"], &[NOW, TERMINAL, ("COLUMNS", columns)]);
        let width: usize = columns.parse().unwrap();
        for line in out.stdout.lines().map(strip_colour) {
            assert!(line.chars().count() <= width, "{} columns: {line}", line.chars().count());
        }
        assert!(out.stdout.contains('…'), "something was cut to fit");
        // The failed task, on the failed node's row.
        assert!(out.stdout.contains("edpm-compute-5   \u{1b}[32mok"), "{}", out.stdout);
        // Cut at 80 columns, whole at 200.
        let cause = if width >= 200 {
            "nova: HostFailed — Deploy nova (edpm_nova/tasks/install.yml:31)"
        } else {
            "nova: HostFailed — Deploy"
        };
        assert!(out.stdout.contains(cause), "{}", out.stdout);
    }
    // Piped: nothing is cut, even with COLUMNS exported, so grep finds every blocking node and
    // the whole cause; and nothing is coloured.
    for env in [vec![NOW], vec![NOW, ("COLUMNS", "80")]] {
        let piped = run(&["--source", "examples", "status", "show"], &env);
        assert!(!piped.stdout.contains('…'), "{}", piped.stdout);
        assert!(!piped.stdout.contains('\u{1b}'), "no colour when stdout is not a terminal");
        assert!(piped.stdout.contains("edpm-compute-2 (configure-network: NotDeployed)"), "{}", piped.stdout);
        assert!(
            piped.stdout.contains("nova: HostFailed — Deploy nova (edpm_nova/tasks/install.yml:31): non-zero return code (rc 125): Error: initializing source docker://quay.io/podified-antelope-centos9/openstack-nova-compute:current-podified: pinging container registry quay.io: Get \"https://quay.io/v2/\": dial tcp: lookup quay.io: no such host\n"),
            "{}",
            piped.stdout
        );
    }
    // Wide: whole on a terminal too, with the Nova, agent and since columns.
    let wide = run(
        &["--source", "examples", "status", "show", "--output", "wide"],
        &[NOW, TERMINAL, ("COLUMNS", "80")],
    );
    assert_eq!(wide.code, 0, "{}", wide.stderr);
    assert!(!wide.stdout.contains('…') && wide.stdout.contains("SINCE"), "{}", wide.stdout);
    let same = run(
        &["--source", "examples", "status", "show", "--format", "wide"],
        &[NOW, TERMINAL, ("COLUMNS", "80")],
    );
    assert_eq!(same.stdout, wide.stdout, "--format wide and -o wide are one flag");
    let bad = run(&["--source", "examples", "status", "show", "-o", "yaml"], &[NOW]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("table") && bad.stderr.contains("wide") && bad.stderr.contains("json"),
        "{}",
        bad.stderr
    );
}

/// The text without its colour codes.
fn strip_colour(line: &str) -> String {
    let mut out = String::new();
    let mut code = false;
    for c in line.chars() {
        match c {
            '\u{1b}' => code = true,
            'm' if code => code = false,
            _ if code => {}
            _ => out.push(c),
        }
    }
    out
}

/// Colour only on a terminal, and never with NO_COLOR; never in explain or JSON.
#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let show = ["--source", "examples", "status", "show"];
    let terminal = run(&show, &[NOW, TERMINAL]);
    assert!(terminal.stdout.contains("\u{1b}[31mFAIL"), "{}", terminal.stdout);
    let no_color = run(&show, &[NOW, TERMINAL, ("NO_COLOR", "1")]);
    assert!(!no_color.stdout.contains('\u{1b}'), "{}", no_color.stdout);
    assert_eq!(no_color.stdout, strip_colour(&terminal.stdout), "the same table, uncoloured");
    for args in [
        vec!["--source", "examples", "status", "explain", "edpm-compute-5"],
        vec!["--source", "examples", "status", "show", "--format", "json"],
    ] {
        let out = run(&args, &[NOW, TERMINAL]);
        assert!(!out.stdout.contains('\u{1b}'), "{args:?}: {}", out.stdout);
    }
}

/// "since" is the condition's own time, from the evidence or a stored report; without either
/// it is unknown, never the moment of the command.
#[test]
fn since_is_never_the_commands_clock() {
    let later = ("EDPM_AGENT_NOW", "2026-12-01T00:00:00Z");
    let out = run(&["--source", "examples", "status", "show", "--format", "json"], &[later]);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let node =
        |name: &str| v["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name).unwrap().clone();
    let time = |n: &Value, ty: &str| {
        n["conditions"].as_array().unwrap().iter().find(|c| c["type"] == ty).unwrap()["lastTransitionTime"]
            .clone()
    };
    let n5 = node("edpm-compute-5");
    // From the Deployment's conditions: when it failed, and when infrastructure was done.
    assert_eq!(time(&n5, "Ready"), "2026-11-01T11:05:00Z");
    assert_eq!(time(&n5, "Stalled"), "2026-11-01T11:05:00Z");
    assert_eq!(time(&n5, "InfrastructureReady"), "2026-11-01T11:05:00Z");
    // Idle since its Deployment failed for good; no evidence says when Stalled turned False
    // on edpm-compute-4, whose retry runs: unknown.
    assert_eq!(time(&n5, "Reconciling"), "2026-11-01T11:05:00Z");
    assert_eq!(time(&node("edpm-compute-0"), "Stalled"), Value::Null);
    let all = out.stdout.matches("2026-12-01T00:00:00Z").count();
    assert_eq!(all, 0, "no condition is dated by the command's clock:\n{}", out.stdout);
    let explained = run(&["--source", "examples", "status", "explain", "edpm-compute-5"], &[later]);
    assert!(!explained.stdout.contains("2026-12-01"), "{}", explained.stdout);
    assert!(
        explained.stdout.contains("Reconciling: False/Info Idle since 2026-11-01T11:05:00Z, 29d ago\n"),
        "{}",
        explained.stdout
    );
}

/// `status explain` says each long message once: the failed task's error, which the
/// conditions, the evidence and each run repeat, is printed once and named by number.
#[test]
fn explain_says_each_message_once() {
    let out = run(&["--source", "examples", "status", "explain", "edpm-compute-5"], &[NOW]);
    let error = "Error: initializing source docker://quay.io/podified-antelope-centos9/openstack-nova-compute:current-podified";
    assert_eq!(out.stdout.matches(error).count(), 1, "{}", out.stdout);
    assert!(out.stdout.contains("    [1] Deploy nova (edpm_nova/tasks/install.yml:31): non-zero return code (rc 125): Error: initializing"), "{}", out.stdout);
    assert!(out.stdout.contains("hostFailures: [1]\n"), "{}", out.stdout);
    // Ready and ServicesReady say the same: the second points to the first.
    assert!(
        out.stdout.contains(
            "ServicesReady: False/Error HostFailed since 2026-11-01T11:05:00Z, 22d ago\n    (as Ready above)\n"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn report_writes_objects_that_show_reads_back_with_stable_times() {
    let d = tempfile::tempdir().unwrap();
    let status = d.path().join("status");
    let s = status.to_str().unwrap();
    let out = run(&["--source", "examples", "status", "report", "--status-dir", s], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("11 written, 0 unchanged in {s}\n"), "7 nodes and 4 NodeSets/Roles");
    let file = status.join("edpmnodestatus-edpm-compute-cell2-edpm-compute-5.yaml");
    let obj: Value = serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(obj["apiVersion"], "agent.edpm.openstack.org/v1alpha1");
    assert_eq!(obj["kind"], "EDPMNodeStatus");
    // The spec: what names the node, and what edpm-agent keeps of it (`record`: its runs
    // here), which the node agent cannot write.
    let mut spec = obj["spec"].clone();
    let record = spec.as_object_mut().unwrap().remove("record").unwrap_or_default();
    assert_eq!(
        spec,
        json!({"nodeSet": "edpm-compute-cell2", "nodeSetKind": "OpenStackDataPlaneNodeSet", "node": "edpm-compute-5", "hostName": "edpm-compute-5"})
    );
    assert!(record["runs"].as_array().is_some_and(|r| !r.is_empty()), "{record}");
    assert!(obj["status"].get("runs").is_none(), "{obj}");
    assert_eq!(obj["metadata"]["labels"]["agent.edpm.openstack.org/nodeset"], "edpm-compute-cell2");
    let ready =
        obj["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("HostFailed")));

    // An hour later nothing changed: no file is rewritten, and show keeps the times.
    let later = ("EDPM_AGENT_NOW", "2026-11-23T13:00:00Z");
    let out = run(&["--source", "examples", "status", "report", "--status-dir", s], &[later]);
    assert_eq!(out.stdout, format!("0 written, 11 unchanged in {s}\n"), "{}", out.stderr);
    let out =
        run(&["--source", "examples", "status", "show", "--format", "json", "--status-dir", s], &[later]);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let node3 = v["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "edpm-compute-3").unwrap();
    let time = |ty: &str| {
        node3["conditions"].as_array().unwrap().iter().find(|c| c["type"] == ty).unwrap()["lastTransitionTime"]
            .clone()
    };
    // No evidence dates BaremetalProvisionReady (no OpenStackBaremetalSet): the first report's
    // time (when it was first seen), kept.
    assert_eq!(time("BaremetalProvisionReady"), "2026-11-23T12:00:00Z", "kept from the first report");
    // The evidence dates InfrastructureReady: its Deployment's time, written and kept.
    assert_eq!(time("InfrastructureReady"), "2026-11-01T10:42:00Z", "from the evidence");
    // Without --status-dir there is nowhere to write.
    let out = run(&["--source", "examples", "status", "report"], &[NOW]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--status-dir"), "{}", out.stderr);
}

#[test]
fn wait_exits_by_outcome() {
    let ok = run(&["--source", "examples", "status", "wait", "--phase", "-1", "--timeout", "5"], &[]);
    assert_eq!(
        (ok.code, ok.stdout.as_str()),
        (0, "7 node(s), 0 NodeSet(s): BaremetalProvisionReady True\n"),
        "{}",
        ok.stderr
    );
    let ready = run(
        &[
            "--source",
            "examples",
            "status",
            "wait",
            "--phase",
            "ready",
            "--node",
            "edpm-compute-3",
            "--timeout",
            "5",
        ],
        &[],
    );
    assert_eq!(ready.code, 0, "{}", ready.stderr);
    let terminal = run(
        &[
            "--source",
            "examples",
            "status",
            "wait",
            "--phase",
            "1",
            "--nodeset",
            "edpm-compute-cell2",
            "--timeout",
            "30",
        ],
        &[],
    );
    assert_eq!(terminal.code, 12, "{}", terminal.stderr);
    assert!(
        terminal.stderr.contains("edpm-compute-5") && terminal.stderr.contains("HostFailed")
            || terminal.stderr.contains("nova"),
        "{}",
        terminal.stderr
    );
    let started = std::time::Instant::now();
    let timeout = run(
        &[
            "--source",
            "examples",
            "status",
            "wait",
            "--phase",
            "1",
            "--node",
            "edpm-compute-4",
            "--timeout",
            "1",
            "--interval",
            "1",
        ],
        &[],
    );
    assert_eq!(timeout.code, 11, "{}", timeout.stderr);
    assert!(
        timeout.stderr.contains("timed out") && timeout.stderr.contains("edpm-compute-4"),
        "{}",
        timeout.stderr
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    // A NodeSet that times out names the nodes it waits for, not only itself.
    let set = run(
        &["--source", "examples", "status", "wait", "--phase", "1", "--nodeset", "edpm-compute-cell1"]
            .into_iter()
            .chain(["--timeout", "1", "--interval", "1"])
            .collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(set.code, 11, "{}", set.stderr);
    assert!(
        set.stderr.contains(
            "ServicesReady is not True for 1 of 2 node(s): edpm-compute-4 (ServicesReady: nova Retrying; Deployment edpm-deployment-nova-retry in progress)"
        ),
        "{}",
        set.stderr
    );
    // A node wait names the conditions too; for ready, each one not yet True.
    let nodes = run(
        &["--source", "examples", "status", "wait", "--phase", "ready", "--node", "edpm-compute-4"]
            .into_iter()
            .chain(["--node", "edpm-compute-1", "--timeout", "1", "--interval", "1"])
            .collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(nodes.code, 11, "{}", nodes.stderr);
    assert!(
        nodes.stderr.contains(
            "Ready is not True for 2 of 2 node(s): edpm-compute-1 (InfrastructureReady: configure-network NotDeployed, ServicesReady: ceph-client NotDeployed); edpm-compute-4 (ServicesReady: nova Retrying; Deployment edpm-deployment-nova-retry in progress)"
        ),
        "{}",
        nodes.stderr
    );
    let bad = run(&["--source", "examples", "status", "wait", "--phase", "2", "--timeout", "1"], &[]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("-1 (bare metal)"), "{}", bad.stderr);
}

#[test]
fn the_committed_crds_match_the_types() {
    let out = run(&["status", "crds"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let committed = std::fs::read_to_string(repo().join("packaging/kubernetes/crds.yaml")).unwrap();
    assert_eq!(
        committed, out.stdout,
        "packaging/kubernetes/crds.yaml is stale: regenerate it with `edpm-agent status crds > packaging/kubernetes/crds.yaml`"
    );
    let crds: Vec<Value> = serde_saphyr::from_multiple(&committed).unwrap();
    let names: BTreeMap<&str, &Value> =
        crds.iter().map(|c| (c["spec"]["names"]["kind"].as_str().unwrap(), c)).collect();
    for kind in ["EDPMNodeStatus", "EDPMNodeSetStatus"] {
        let crd = names[kind];
        assert_eq!(crd["spec"]["group"], "agent.edpm.openstack.org");
        let v = &crd["spec"]["versions"][0];
        let columns: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        for col in ["Baremetal", "Infra", "Services", "Ready"] {
            assert!(columns.contains(&col), "{kind} lacks printer column {col}: {columns:?}");
        }
    }
}

#[test]
fn rbac_is_least_privilege_and_covers_what_the_reader_lists() {
    let text = std::fs::read_to_string(repo().join("packaging/kubernetes/rbac-reporter.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    // The rules of every Role (the data plane's namespace, and the Leases' own).
    let rules: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] == "Role")
        .flat_map(|role| {
            role["rules"].as_array().unwrap().iter().map(move |r| {
                let mut r = r.clone();
                r["namespace"] = role["metadata"]["namespace"].clone();
                r
            })
        })
        .collect();
    let rules = &rules;
    let verbs = |group: &str, resource: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| r["apiGroups"].as_array().unwrap().iter().any(|g| g == group))
            .filter(|r| r["resources"].as_array().unwrap().iter().any(|x| x == resource))
            .flat_map(|r| r["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()))
            .collect()
    };
    // Everything the kube source lists for the status commands.
    for (g, r) in [
        ("dataplane.openstack.org", "openstackdataplanenodesets"),
        ("dataplane.openstack.org", "openstackdataplanedeployments"),
        ("dataplane.openstack.org", "openstackdataplaneservices"),
        ("network.openstack.org", "ipsets"),
        ("nova.openstack.org", "novacells"),
        ("core.openstack.org", "openstackcontrolplanes"),
        ("baremetal.openstack.org", "openstackbaremetalsets"),
        ("batch", "jobs"),
        ("coordination.k8s.io", "leases"),
        ("agent.edpm.openstack.org", "edpmnodestatuses"),
    ] {
        let v = verbs(g, r);
        assert!(v.contains(&"get".into()) && v.contains(&"list".into()), "{g}/{r}: {v:?}");
    }
    assert_eq!(verbs("", "secrets"), ["get"], "Secrets are read by name, never listed");
    assert!(verbs("agent.edpm.openstack.org", "edpmnodestatuses/status").contains(&"patch".into()));
    for r in rules {
        let groups: Vec<&str> =
            r["apiGroups"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
        let writes = r["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| ["create", "patch", "update", "delete"].contains(&v.as_str().unwrap()));
        // Lease writes only where the node agents' Leases live: never another operator's.
        let ours = groups == ["agent.edpm.openstack.org"]
            || (groups == ["coordination.k8s.io"]
                && r["resources"] == json!(["leases"])
                && r["namespace"] == "edpm-node-lease");
        assert!(!writes || ours, "writes outside our own objects and the agents' Leases: {r}");
        assert!(!r["verbs"].as_array().unwrap().iter().any(|v| v == "delete" || v == "*"), "{r}");
    }
    let agent = std::fs::read_to_string(repo().join("packaging/kubernetes/rbac-node-agent.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&agent).unwrap();
    let roles: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Role").collect();
    assert_eq!(roles.len(), 2, "its objects' Role and its Lease's, in the Leases' namespace");
    let lease_role = roles.iter().find(|r| r["metadata"]["namespace"] == "LEASE_NAMESPACE").unwrap();
    assert_eq!(lease_role["rules"][0]["resources"], json!(["leases"]));
    for r in roles.iter().flat_map(|role| role["rules"].as_array().unwrap()) {
        let token = r["resources"] == json!(["serviceaccounts/token"]);
        let own = if token { json!(["edpm-agent-node-NODE_OBJECT"]) } else { json!(["NODE_OBJECT"]) };
        assert_eq!(r["resourceNames"], own, "every rule is for its own object: {r}");
        // The only create: a token for its own ServiceAccount.
        assert!(
            !r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| (v == "create" && !token) || v == "list" || v == "delete"),
            "{r}"
        );
    }
    // The template is the identity `status identities` makes, by hand: the same rules.
    let set = edpm_core::identity::NodeSet {
        name: "cell1".into(),
        kind: edpm_core::readiness::api::OwnerKind::OpenStackDataPlaneNodeSet,
        owner: None,
        namespace: "openstack".into(),
        lease_namespace: "edpm-node-lease".into(),
        nodes: vec![edpm_core::identity::Node { key: "compute-3".into(), host_name: "compute-3".into() }],
    };
    let made = edpm_core::identity::objects(&set).unwrap();
    for role in &roles {
        let object = edpm_core::readiness::names::node_object("cell1", "compute-3");
        let ns =
            if role["metadata"]["namespace"] == "LEASE_NAMESPACE" { "edpm-node-lease" } else { "openstack" };
        let rules = serde_json::to_string(&role["rules"]).unwrap().replace("NODE_OBJECT", &object);
        let generated = made
            .iter()
            .find(|o| o.kind == edpm_core::identity::Kind::Role && o.namespace == ns)
            .unwrap_or_else(|| panic!("no generated Role in {ns}"));
        assert_eq!(
            serde_json::from_str::<Value>(&rules).unwrap(),
            generated.body["rules"],
            "rbac-node-agent.yaml's Role in {ns} differs from what status identities makes"
        );
    }
}
