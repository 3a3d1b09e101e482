//! What each node runs and holds (issue 27), on two scenarios of ten computes in
//! `tests/fixtures/scenarios`: a minor update in two `ansibleLimit` batches with the second
//! still running (`minor-update`), and a rotated Secret delivered to 7 of 10 nodes
//! (`rotation`, whose hashes Go computed as lib-common does). Goldens for `status show` and
//! `status explain`, `status wait --for`, the status objects `status report` writes, and
//! never a credential in any output.

use crate::util::{repo, run};

const NOW: (&str, &str) = ("EDPM_AGENT_NOW", "2026-11-27T12:00:00Z");

fn scenario(name: &str) -> String {
    repo().join("tests/fixtures/scenarios").join(name).display().to_string()
}

/// A copy of scenario `name`'s files in a temporary directory, for a test to change.
fn scenario_copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["nodeset.yaml", "services.yaml", "deployments.yaml"] {
        std::fs::copy(repo().join("tests/fixtures/scenarios").join(name).join(f), dir.path().join(f))
            .unwrap();
    }
    dir
}

/// Scenario `name`'s objects in a fake cluster, with the CRDs readiness and the scenario need.
fn scenario_cluster(name: &str) -> crate::util::fake_api::FakeApi {
    let api = crate::util::fake_api::FakeApi::start();
    api.add_readiness_crds();
    api.add_crd("core.openstack.org", "v1beta1", "openstackversions");
    api.add_crd("dataplane.openstack.org", "v1beta1", "openstackdataplaneservices");
    for f in ["nodeset.yaml", "services.yaml", "deployments.yaml"] {
        let text =
            std::fs::read_to_string(repo().join("tests/fixtures/scenarios").join(name).join(f)).unwrap();
        for d in serde_saphyr::from_multiple::<serde_json::Value>(&text).unwrap() {
            api.put(d);
        }
    }
    api
}

fn golden(name: &str, args: &[&str]) {
    golden_with(name, args, &[]);
}

fn golden_with(name: &str, args: &[&str], env: &[(&str, &str)]) {
    let mut env = env.to_vec();
    env.push(NOW);
    let out = run(args, &env);
    let text = format!("exit: {}\n--- stdout\n{}--- stderr\n{}", out.code, out.stdout, out.stderr);
    insta::with_settings!({ snapshot_path => "snapshots/scenarios", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn goldens_for_a_minor_update_in_batches() {
    let d = scenario("minor-update");
    golden("minor_update_show", &["--source", &d, "status", "show"]);
    // Behind: the second batch is still running on it.
    golden("minor_update_explain_behind", &["--source", &d, "status", "explain", "edpm-compute-7"]);
    golden("minor_update_explain_current", &["--source", &d, "status", "explain", "edpm-compute-2"]);
}

#[test]
fn goldens_for_a_rotated_secret() {
    let d = scenario("rotation");
    golden("rotation_show", &["--source", &d, "status", "show"]);
    golden("rotation_explain_stale", &["--source", &d, "status", "explain", "edpm-compute-8"]);
    // Upstream's NodeSet-wide record beside ours, and where they disagree.
    golden("rotation_explain_nodeset", &["--source", &d, "status", "explain", "edpm-compute"]);
    // At 80 columns on a terminal, piped, and -o wide: the stale nodes' rows say so.
    let terminal = [("EDPM_AGENT_TERMINAL", "1"), ("COLUMNS", "80"), ("NO_COLOR", "1")];
    golden_with("rotation_show_80", &["--source", &d, "status", "show"], &terminal);
    golden_with("rotation_show_wide", &["--source", &d, "status", "show", "-o", "wide"], &[]);
    golden_with(
        "minor_update_show_80",
        &["--source", &scenario("minor-update"), "status", "show"],
        &terminal,
    );
    golden_with(
        "minor_update_show_wide",
        &["--source", &scenario("minor-update"), "status", "show", "-o", "wide"],
        &[],
    );
}

/// Colour codes take no column: at 80 columns the coloured table says what the plain one says.
#[test]
fn colour_codes_take_no_width() {
    let d = scenario("rotation");
    let at80 = |colour: bool| {
        let mut env = vec![NOW, ("EDPM_AGENT_TERMINAL", "1"), ("COLUMNS", "80")];
        if !colour {
            env.push(("NO_COLOR", "1"));
        }
        run(&["--source", &d, "status", "show"], &env).stdout
    };
    let coloured = at80(true);
    assert!(coloured.contains('\x1b'), "{coloured}");
    let mut stripped = String::new();
    let mut in_code = false;
    for c in coloured.chars() {
        match c {
            '\x1b' => in_code = true,
            'm' if in_code => in_code = false,
            _ if in_code => {}
            _ => stripped.push(c),
        }
    }
    assert_eq!(stripped, at80(false));
    for line in stripped.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
    assert!(stripped.contains("lines cut to the terminal's width: -o wide shows them whole"), "{stripped}");
}

#[test]
fn wait_for_gates_on_every_node_and_names_what_is_stale_or_behind() {
    let rotation = scenario("rotation");
    let out = run(
        &[
            "--source",
            &rotation,
            "status",
            "wait",
            "--for",
            "SecretsCurrent",
            "--nodeset",
            "edpm-compute",
            "--timeout",
            "1",
        ],
        &[NOW],
    );
    assert_eq!(out.code, 11, "{}", out.stderr);
    // The summary groups the nodes by what they wait for, said once.
    assert!(
        out.stdout.contains("3 of 10 node(s) not SecretsCurrent:\n  3 node(s): edpm-compute-7, edpm-compute-8, edpm-compute-9\n    SecretsCurrent: stale: Secret nova-cell1-compute-config"),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.matches("stale: Secret").count(), 1, "{}", out.stdout);
    assert!(out.stderr.contains("edpm-compute-7, edpm-compute-8, edpm-compute-9 (SecretsCurrent: stale: Secret nova-cell1-compute-config"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(!out.stderr.contains("edpm-compute-6"), "{}", out.stderr);
    // The nodes the rotation reached: done.
    let out = run(
        &[
            "--source",
            &rotation,
            "status",
            "wait",
            "--for",
            "SecretsCurrent",
            "--node",
            "edpm-compute-0",
            "--node",
            "edpm-compute-6",
            "--timeout",
            "1",
        ],
        &[NOW],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let update = scenario("minor-update");
    let out = run(
        &[
            "--source",
            &update,
            "status",
            "wait",
            "--for",
            "VersionCurrent",
            "--nodeset",
            "edpm-compute",
            "--timeout",
            "1",
        ],
        &[NOW],
    );
    assert_eq!(out.code, 11, "{}", out.stderr);
    assert!(out.stdout.contains("  5 node(s): edpm-compute-5, edpm-compute-6, edpm-compute-7, edpm-compute-8, edpm-compute-9\n    VersionCurrent: at 18.0.3 (Deployment edpm-deployment); target 18.0.4; not run on this node: update\n    in progress: Deployment minor-update-batch-2"), "{}", out.stdout);
    assert!(out.stderr.contains("(VersionCurrent: at 18.0.3 (Deployment edpm-deployment); target 18.0.4; not run on this node: update; Deployment minor-update-batch-2 in progress)"), "{}", out.stderr);
    // --for and --phase are one or the other; an unknown condition names the two.
    let out = run(&["--source", &update, "status", "wait", "--for", "Ready", "--timeout", "1"], &[NOW]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("give VersionCurrent or SecretsCurrent"), "{}", out.stderr);
    let out = run(
        &["--source", &update, "status", "wait", "--phase", "1", "--for", "VersionCurrent", "--timeout", "1"],
        &[NOW],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[test]
fn report_keeps_what_was_delivered_and_since_when_it_differs() {
    let rotation = scenario("rotation");
    let dir = tempfile::tempdir().unwrap();
    let status = dir.path().to_str().unwrap();
    let out = run(&["--source", &rotation, "status", "report", "--status-dir", status], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let written = std::fs::read_to_string(dir.path().join("EDPMNodeStatus-edpm-compute-edpm-compute-8.yaml"))
        .or_else(|_| {
            let f = std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .find(|e| e.file_name().to_string_lossy().contains("edpm-compute-8"))
                .expect("edpm-compute-8's status object");
            std::fs::read_to_string(f.path())
        })
        .unwrap();
    assert!(written.contains("deliveredInputs:"), "{written}");
    assert!(
        written.contains("deployment: edpm-deployment")
            && written.contains("staleSince: \"2026-11-25T10:00:00Z\""),
        "{written}"
    );
    // Read back a day later: the difference keeps its first time, and says it.
    let later = ("EDPM_AGENT_NOW", "2026-11-28T12:00:00Z");
    let out = run(
        &["--source", &rotation, "status", "explain", "edpm-compute-8", "--status-dir", status],
        &[later],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("stale: Secret nova-cell1-compute-config (delivered by edpm-deployment, differs since 2026-11-25T10:00:00Z: Deployment rotate-batch-1 recorded another)"), "{}", out.stdout);
}

#[test]
fn no_credential_reaches_any_output() {
    let rotation = scenario("rotation");
    for args in [
        vec!["status", "show"],
        vec!["status", "show", "--format", "json"],
        vec!["status", "show", "-o", "wide"],
        vec!["status", "explain", "edpm-compute-8"],
        vec!["status", "explain", "edpm-compute"],
    ] {
        let mut all = vec!["--source", rotation.as_str()];
        all.extend(args.iter().copied());
        let out = run(&all, &[NOW]);
        for secret in ["NEWPASS", "OLDPASS", "transport_url", "rabbit://"] {
            assert!(
                !out.stdout.contains(secret) && !out.stderr.contains(secret),
                "{secret} in {args:?}: {}",
                out.stdout
            );
        }
    }
}

#[test]
fn goldens_for_the_plan() {
    golden("minor_update_plan", &["--source", &scenario("minor-update"), "status", "plan"]);
    golden("rotation_plan", &["--source", &scenario("rotation"), "status", "plan"]);
    golden("rotation_plan_json", &["--source", &scenario("rotation"), "status", "plan", "--format", "json"]);
    golden("examples_plan", &["--source", "examples", "status", "plan"]);
}

/// The planned Deployment reads as upstream's CRD says one is written (when ../shared is
/// there): every field it sets is in the schema.
#[test]
fn planned_deployments_are_what_the_crd_takes_and_named_anew() {
    let out = run(&["--source", &scenario("rotation"), "status", "plan"], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    let d = docs.iter().find(|d| d["kind"] == "OpenStackDataPlaneDeployment").expect("a Deployment");
    assert_eq!(d["spec"]["ansibleLimit"], "edpm-compute-7,edpm-compute-8,edpm-compute-9");
    assert_eq!(
        d["spec"]["servicesOverride"],
        serde_json::json!(["nova"]),
        "the service whose data source holds it"
    );
    if crate::util::have_shared("planned_deployments_are_what_the_crd_takes_and_named_anew") {
        let path = crate::util::upstream(
            "openstack-k8s-operators__openstack-operator@84322c77/config/crd/bases/dataplane.openstack.org_openstackdataplanedeployments.yaml",
        );
        let crd: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let spec =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        for field in d["spec"].as_object().unwrap().keys() {
            assert!(spec.get(field).is_some(), "spec.{field} is not in upstream's CRD");
        }
    }
    // A name already taken is not reused.
    let dir = scenario_copy("rotation");
    let taken = std::fs::read_to_string(dir.path().join("deployments.yaml"))
        .unwrap()
        .replace("name: rotate-batch-1", "name: edpm-agent-edpm-compute-nova");
    std::fs::write(dir.path().join("deployments.yaml"), taken).unwrap();
    let out = run(&["--source", dir.path().to_str().unwrap(), "status", "plan"], &[NOW]);
    assert!(out.stdout.contains("name: edpm-agent-edpm-compute-nova-2"), "{}", out.stdout);
}

#[test]
fn nothing_to_do_is_said_and_exits_14() {
    // Its deployments.yaml is replaced below.
    let dir = scenario_copy("minor-update");
    // Installed at the target version: nothing behind, nothing failed, nothing recorded stale.
    let all = std::fs::read_to_string(repo().join("tests/fixtures/scenarios/minor-update/deployments.yaml"))
        .unwrap();
    let install: String = all.split("\n---\n").take(2).collect::<Vec<_>>().join("\n---\n");
    std::fs::write(
        dir.path().join("deployments.yaml"),
        install.replace("deployedVersion: \"18.0.3\"", "deployedVersion: \"18.0.4\""),
    )
    .unwrap();
    let out = run(&["--source", dir.path().to_str().unwrap(), "status", "plan"], &[NOW]);
    assert_eq!(out.code, 14, "{}", out.stderr);
    assert!(out.stdout.starts_with("# nothing to do"), "{}", out.stdout);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    assert!(docs.iter().all(serde_json::Value::is_null), "no object: {}", out.stdout);
}

/// The operator's loop: the plan applied, the Deployment not yet reconciled (no status at
/// all), is in progress: planned once, exit 15, stdout without objects, and `explain` names it.
#[test]
fn a_just_applied_deployment_is_planned_once() {
    let dir = scenario_copy("rotation");
    let d = dir.path().to_str().unwrap();
    let out = run(&["--source", d, "status", "plan"], &[NOW]);
    assert_eq!(out.code, 0, "planned: {}", out.stderr);
    // Applied as printed: the object, no status.
    let planned: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    let planned = planned.iter().find(|d| d["kind"] == "OpenStackDataPlaneDeployment").unwrap();
    let name = planned["metadata"]["name"].as_str().unwrap().to_string();
    std::fs::write(dir.path().join("applied.yaml"), serde_saphyr::to_string(planned).unwrap()).unwrap();
    let out = run(&["--source", d, "status", "plan"], &[NOW]);
    assert_eq!(out.code, 15, "only work in progress: {}{}", out.stdout, out.stderr);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    assert!(docs.iter().all(serde_json::Value::is_null), "no object: {}", out.stdout);
    assert!(out.stdout.contains(&format!("# in progress: Deployment {name} runs nova")), "{}", out.stdout);
    assert!(!out.stdout.contains(&format!("{name}-2")), "{}", out.stdout);
    let out = run(&["--source", d, "status", "explain", "edpm-compute-8"], &[NOW]);
    assert!(
        out.stdout.contains(&format!("Deployment {name} covers this node and has not started yet")),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("no Deployment is running on this node"), "{}", out.stdout);
    // The same Deployment, reconciled and running (the operator's first condition): still once.
    let mut running = planned.clone();
    running["status"] = serde_json::json!({"nodeSetConditions": {"edpm-compute": [
        {"type": "NodeSetDeploymentReady", "status": "Unknown", "reason": "Init", "message": "Deployment not started", "lastTransitionTime": "2026-11-27T11:59:00Z"}
    ]}});
    std::fs::write(dir.path().join("applied.yaml"), serde_saphyr::to_string(&running).unwrap()).unwrap();
    let out = run(&["--source", d, "status", "plan"], &[NOW]);
    assert_eq!(out.code, 15, "{}{}", out.stdout, out.stderr);
    // A node the Deployment leaves out is planned.
    let mut narrow = planned.clone();
    narrow["spec"]["ansibleLimit"] = serde_json::json!("edpm-compute-7");
    std::fs::write(dir.path().join("applied.yaml"), serde_saphyr::to_string(&narrow).unwrap()).unwrap();
    let out = run(&["--source", d, "status", "plan"], &[NOW]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("ansibleLimit: edpm-compute-8,edpm-compute-9"), "{}", out.stdout);
}

/// The controller: the second batch completing turns exactly its five nodes current, each
/// written once, and the gauges say so.
#[test]
fn the_controller_moves_exactly_the_nodes_a_batch_covered() {
    use crate::controller::{Controller, condition, status_patches, wait_for};
    use std::time::Duration;
    let api = scenario_cluster("minor-update");
    let c = Controller::start(&api, &[]);
    let version = |node: &str| {
        condition(&api, &format!("edpm-compute-{node}"), "VersionCurrent")
            .map(|c| c["status"].as_str().unwrap_or("").to_string())
    };
    wait_for("the first writes", Duration::from_secs(20), || {
        (0..10).all(|i| version(&format!("edpm-compute-{i}")).is_some())
    });
    assert_eq!(version("edpm-compute-2").as_deref(), Some("True"));
    assert_eq!(version("edpm-compute-7").as_deref(), Some("False"));
    let (_, text) = c.get("/metrics");
    assert!(text.contains(r#"edpm_node_version_current{namespace="openstack",nodeset="edpm-compute",node="edpm-compute-2"} 1"#), "{text}");
    assert!(text.contains(r#"edpm_node_version_current{namespace="openstack",nodeset="edpm-compute",node="edpm-compute-7"} 0"#), "{text}");
    std::thread::sleep(Duration::from_secs(1));
    let before = status_patches(&api).len();
    // The second batch completes.
    let mut d = api.object("OpenStackDataPlaneDeployment", "minor-update-batch-2").unwrap();
    d["status"]["deployedVersion"] = serde_json::json!("18.0.4");
    d["status"]["deployed"] = serde_json::json!(true);
    d["status"]["nodeSetConditions"]["edpm-compute"] = serde_json::json!([
        {"type": "NodeSetDeploymentReady", "status": "True", "reason": "Ready", "message": "NodeSet Ready", "lastTransitionTime": "2026-11-20T13:00:00Z"},
        {"type": "ServiceUpdateDeploymentReady", "status": "True", "reason": "Ready", "message": "Deployment ready for update service", "lastTransitionTime": "2026-11-20T13:00:00Z"},
    ]);
    api.put_replace(d);
    wait_for("the batch's nodes current", Duration::from_secs(10), || {
        (5..10).all(|i| version(&format!("edpm-compute-{i}")).as_deref() == Some("True"))
    });
    std::thread::sleep(Duration::from_secs(1));
    let written: Vec<String> = status_patches(&api).split_off(before);
    let nodes: Vec<&String> = written.iter().filter(|p| p.contains("/edpmnodestatuses/")).collect();
    // Each once: its record (the spec, which the node agent cannot write) and its status.
    assert_eq!(nodes.len(), 10, "exactly the batch's nodes, once each: {written:?}");
    for i in 5..10 {
        let object = format!("edpm-compute-edpm-compute-{i}");
        assert!(nodes.iter().any(|p| p.contains(&format!("{object}?"))), "{nodes:?}");
        assert!(nodes.iter().any(|p| p.contains(&format!("{object}/status"))), "{nodes:?}");
    }
    let (code, _, err) = c.stop();
    assert_eq!(code, Some(0), "{err}");
}

/// The controller: rotating the Secret again turns exactly the nodes that held the current
/// one stale, seen by the metadata watch of Secrets, each written once.
#[test]
fn the_controller_sees_a_rotation_within_its_recheck() {
    use crate::controller::{Controller, condition, status_patches, wait_for};
    use std::time::Duration;
    let api = scenario_cluster("rotation");
    let c = Controller::start(&api, &["--inputs-interval", "1"]);
    let inputs = |i: usize| {
        condition(&api, &format!("edpm-compute-edpm-compute-{i}"), "SecretsCurrent")
            .map(|c| c["status"].as_str().unwrap_or("").to_string())
    };
    wait_for("the first writes", Duration::from_secs(20), || (0..10).all(|i| inputs(i).is_some()));
    assert!((0..7).all(|i| inputs(i).as_deref() == Some("True")));
    assert!((7..10).all(|i| inputs(i).as_deref() == Some("False")));
    // Settled: a recheck or two finds nothing changed and writes nothing.
    std::thread::sleep(Duration::from_secs(3));
    let before = status_patches(&api).len();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(status_patches(&api).len(), before, "nothing changed, nothing written");
    // Rotated again: the nodes that held the current password now hold a stale one.
    let mut secret = api.object("Secret", "nova-cell1-compute-config").unwrap();
    secret["stringData"]["01-nova.conf"] = serde_json::json!(
        "[DEFAULT]\ntransport_url = rabbit://nova:THIRDPASS@rabbitmq-cell1.openstack.svc:5672/?ssl=1\n"
    );
    api.put_replace(secret);
    let rotated = std::time::Instant::now();
    wait_for("the rotation seen", Duration::from_secs(10), || {
        (0..7).all(|i| inputs(i).as_deref() == Some("False"))
    });
    assert!(rotated.elapsed() < Duration::from_secs(5), "seen after {:?}", rotated.elapsed());
    std::thread::sleep(Duration::from_secs(1));
    let written: Vec<String> = status_patches(&api).split_off(before);
    let nodes: Vec<&String> = written.iter().filter(|p| p.contains("/edpmnodestatuses/")).collect();
    // Each once: its record (the spec: since when the Secret differs) and its status.
    assert_eq!(nodes.len(), 14, "exactly the nodes that held the current one, once each: {written:?}");
    for i in 0..7 {
        let object = format!("edpm-compute-edpm-compute-{i}");
        assert_eq!(nodes.iter().filter(|p| p.contains(&format!("{object}?"))).count(), 1, "{nodes:?}");
        assert_eq!(nodes.iter().filter(|p| p.contains(&format!("{object}/status"))).count(), 1, "{nodes:?}");
    }
    let (code, _, err) = c.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("THIRDPASS") && !err.contains("NEWPASS"), "{err}");
}

/// A Deployment that recorded a hash for an object none of the services names and that does not
/// exist: the nodes say so, and no Deployment is planned for it. A hash that is not a string is
/// bad input naming the object and field.
#[test]
fn hashes_for_unnamed_objects_and_of_the_wrong_type() {
    let dir = scenario_copy("rotation");
    let text = std::fs::read_to_string(dir.path().join("deployments.yaml")).unwrap();
    let extra = text.replacen("  secretHashes:\n", "  secretHashes:\n    unnamed-secret: nbcd\n", 1);
    std::fs::write(dir.path().join("deployments.yaml"), &extra).unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run(&["--source", d, "status", "explain", "edpm-compute-0"], &[NOW]);
    assert!(
        out.stdout.contains(
            "Secret unnamed-secret (does not exist: deleted, or never made; delivered by edpm-deployment)"
        ),
        "{}",
        out.stdout
    );
    // No Deployment delivers what does not exist: only the rotation's missing nodes are planned.
    let out = run(&["--source", d, "status", "plan"], &[NOW]);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    let planned: Vec<&serde_json::Value> =
        docs.iter().filter(|d| d["kind"] == "OpenStackDataPlaneDeployment").collect();
    assert_eq!(planned.len(), 1, "{}", out.stdout);
    assert_eq!(
        planned[0]["spec"]["ansibleLimit"], "edpm-compute-7,edpm-compute-8,edpm-compute-9",
        "{}",
        out.stdout
    );
    std::fs::write(
        dir.path().join("deployments.yaml"),
        text.replacen("  secretHashes:\n", "  secretHashes:\n    unnamed-secret: 12\n", 1),
    )
    .unwrap();
    let out = run(&["--source", d, "status", "show"], &[NOW]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("OpenStackDataPlaneDeployment/edpm-deployment")
            && out.stderr.contains("status.secretHashes.unnamed-secret"),
        "{}",
        out.stderr
    );
}

/// A failed `update` batch on nodes also behind the version: one Deployment for them, not two
/// running the same step at once.
#[test]
fn overlapping_gaps_are_planned_once() {
    let dir = scenario_copy("minor-update");
    let text = std::fs::read_to_string(dir.path().join("deployments.yaml")).unwrap();
    let (head, batch2) = text.split_at(text.find("  name: minor-update-batch-2").unwrap());
    let failed = batch2
        .replace("status: \"False\", reason: Requested, severity: Info, message: \"Deployment in progress\"", "status: \"False\", reason: BackoffLimitExceeded, severity: Error, message: \"Deployment error occurred: backoff limit reached\"")
        .replace("status: \"False\", reason: Requested, severity: Info, message: \"Deployment not yet ready for update service\"", "status: \"False\", reason: BackoffLimitExceeded, severity: Error, message: \"Deployment error occurred in update service error backoff limit reached\"");
    std::fs::write(dir.path().join("deployments.yaml"), format!("{head}{failed}")).unwrap();
    let out = run(&["--source", dir.path().to_str().unwrap(), "status", "plan"], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    let deployments: Vec<&serde_json::Value> =
        docs.iter().filter(|d| d["kind"] == "OpenStackDataPlaneDeployment").collect();
    assert_eq!(deployments.len(), 1, "{}", out.stdout);
    assert_eq!(
        deployments[0]["spec"]["ansibleLimit"],
        "edpm-compute-5,edpm-compute-6,edpm-compute-7,edpm-compute-8,edpm-compute-9",
        "{}",
        out.stdout
    );
}

/// `status wait` piped: a line of progress each time it changes (the scenario does not: one),
/// then the summary.
#[test]
fn wait_piped_says_its_progress_once_per_change() {
    let update = scenario("minor-update");
    let args = [
        "--source",
        &update,
        "status",
        "wait",
        "--for",
        "VersionCurrent",
        "--nodeset",
        "edpm-compute",
        "--timeout",
        "1.5",
        "--interval",
        "0.2",
    ];
    let out = run(&args, &[NOW]);
    assert_eq!(out.code, 11, "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().next().unwrap(),
        "waiting: 5/10 nodes not yet VersionCurrent (VersionCurrent UpdatePending; Deployment minor-update-batch-2 in progress): edpm-compute-5, edpm-compute-6, edpm-compute-7 and 2 more",
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.matches("waiting:").count(), 1, "{}", out.stdout);
    assert!(!out.stdout.contains('\r') && !out.stdout.contains('\x1b'), "{}", out.stdout);
}

/// `status wait` on a terminal (a pty, through util-linux's `script`): one line rewritten in
/// place (carriage return, erase line) with the time waited, cut to 80 columns, erased before
/// the summary.
#[test]
fn wait_on_a_terminal_rewrites_its_progress_in_place() {
    if std::process::Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` (util-linux) to give the command a terminal");
        return;
    }
    let update = scenario("minor-update");
    let bin = crate::util::bin();
    let command = format!(
        "stty cols 80; {} --source {update} status wait --for VersionCurrent --nodeset edpm-compute --timeout 1.5 --interval 0.2",
        bin.display()
    );
    let out = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env("EDPM_AGENT_NOW", NOW.1)
        .env_remove("COLUMNS")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(11), "{text}");
    let rewrites: Vec<&str> = text.split("\r\x1b[K").collect();
    assert!(rewrites.len() >= 4, "rewritten in place each poll: {text:?}");
    let line = rewrites[1];
    assert!(
        line.starts_with("[0s] 5/10 nodes not yet VersionCurrent (VersionCurrent UpdatePending"),
        "{text:?}"
    );
    assert!(line.chars().count() <= 80, "{line:?}");
    assert!(!line.contains('\n'), "{line:?}");
    // Erased, then the summary.
    assert!(rewrites.last().unwrap().starts_with("5 of 10 node(s) not VersionCurrent:"), "{text:?}");
}

/// Times, one way: the evidence's. `VersionCurrent` is dated by the Deployments (behind since
/// the target was first deployed; at the target since the batch that moved the node
/// completed), and after `status report --status-dir` a time the evidence gives stands beside
/// the report's own moment, which a report stores only for what nothing dated (an older
/// report stored it for `VersionCurrent` too: that gives way to the evidence's).
#[test]
fn times_are_the_evidences_before_and_after_a_report() {
    let d = scenario("minor-update");
    let sd = tempfile::tempdir().unwrap();
    let sd_path = sd.path().to_str().unwrap();
    let explain = |node: &str, extra: &[&str]| {
        let mut a = vec!["--source", d.as_str(), "status", "explain", node];
        a.extend_from_slice(extra);
        let out = run(&a, &[("EDPM_AGENT_NOW", "2026-11-27T18:00:00Z")]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout
    };
    let behind = "VersionCurrent: False/Warning UpdatePending since 2026-11-20T09:40:00Z, 7d8h ago\n";
    let current = "VersionCurrent: True Ready since 2026-11-20T11:10:00Z, 7d6h ago\n";
    assert!(explain("edpm-compute-7", &[]).contains(behind), "{}", explain("edpm-compute-7", &[]));
    assert!(explain("edpm-compute-2", &[]).contains(current), "{}", explain("edpm-compute-2", &[]));
    let out = run(&["--source", &d, "status", "report", "--status-dir", sd_path], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // As an older report wrote it: the report's moment on VersionCurrent.
    let file = sd.path().join("edpmnodestatus-edpm-compute-edpm-compute-7.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let (head, tail) = text.split_at(text.find("- type: VersionCurrent").unwrap());
    std::fs::write(&file, format!("{head}{}", tail.replacen("2026-11-20T09:40:00Z", NOW.1, 1))).unwrap();
    let after = explain("edpm-compute-7", &["--status-dir", sd_path]);
    assert!(after.contains(behind), "{after}");
    // What nothing dated is dated by the report that first said it.
    assert!(
        after.contains("SecretsCurrent: Unknown NoInputsDelivered since 2026-11-27T12:00:00Z, 6h0m ago\n"),
        "{after}"
    );
    assert!(explain("edpm-compute-2", &["--status-dir", sd_path]).contains(current));
}

/// `status explain` takes a node or a NodeSet: a near miss suggests either, `-o json` is taken
/// as `show` takes it, and `status --help` lists `plan`.
#[test]
fn explain_suggests_a_nodeset_and_takes_json() {
    let d = scenario("rotation");
    let out = run(&["--source", &d, "status", "explain", "edpm-compte"], &[NOW]);
    assert_eq!(out.code, 8, "{}", out.stderr);
    assert!(out.stderr.contains("did you mean") && out.stderr.contains("edpm-compute"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    let out = run(&["--source", &d, "status", "explain", "edpm-compute-8", "-o", "json"], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 1, "{}", out.stdout);
    let out = run(&["--source", &d, "status", "explain", "edpm-compute", "-o", "json"], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["nodeSets"][0]["name"], "edpm-compute", "{}", out.stdout);
    let out = run(&["status", "--help"], &[]);
    assert!(out.stdout.contains("  plan "), "{}", out.stdout);
    assert!(out.stdout.contains("show, explain, plan, wait, report"), "{}", out.stdout);
}

/// The offline walkthroughs in docs/kubernetes.md ("The operator's loop"), run exactly as
/// written: each `edpm-agent --source tests/fixtures/scenarios/…` line, its comment's `exit N`
/// the exit code, and the rest of its comment found in what it printed.
#[test]
fn the_guides_walkthroughs_do_what_they_say() {
    let guide = std::fs::read_to_string(repo().join("docs/kubernetes.md")).unwrap();
    let lines: Vec<&str> =
        guide.lines().filter(|l| l.starts_with("edpm-agent --source tests/fixtures/scenarios/")).collect();
    assert!(lines.len() >= 3, "the walkthroughs are in the guide");
    for line in lines {
        let (command, comment) = line.split_once('#').unwrap();
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        let out = run(&args, &[NOW]);
        let comment = comment.trim();
        let said = match comment.strip_prefix("exit ") {
            Some(rest) => {
                let (code, said) = rest.split_once(": ").unwrap();
                assert_eq!(out.code.to_string(), code, "{line}\n{}{}", out.stdout, out.stderr);
                said
            }
            None => {
                assert_eq!(out.code, 0, "{line}\n{}", out.stderr);
                comment
            }
        };
        // The comment's words, each in the output (the guide abbreviates lists with spaces).
        for word in said.split([' ', ',', ':', '[', ']']).filter(|w| w.len() > 3) {
            assert!(out.stdout.contains(word), "{line}: {word:?} not in\n{}", out.stdout);
        }
    }
}

/// `status wait` piped while the batch completes: a `waiting:` line, then the success, and the
/// loop closes (planned: nothing to do).
#[test]
fn wait_piped_sees_the_batch_complete() {
    let dir = scenario_copy("minor-update");
    let d = dir.path().to_str().unwrap().to_string();
    let path = dir.path().join("deployments.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, batch2) = text.split_at(text.find("  name: minor-update-batch-2").unwrap());
    let done = batch2
        .replace(
            "status: \"False\", reason: Requested, severity: Info, message: \"Deployment in progress\"",
            "status: \"True\", reason: Ready, message: \"NodeSet Ready\"",
        )
        .replace(
            "status: \"False\", reason: Requested, severity: Info, message: \"Deployment not yet ready for update service\"",
            "status: \"True\", reason: Ready, message: \"Deployment ready for update service\"",
        )
        .replace("status:\n", "status:\n  deployed: true\n  deployedVersion: \"18.0.4\"\n");
    let completed = format!("{head}{done}");
    let child = std::process::Command::new(crate::util::bin())
        .args(["--source", &d, "status", "wait", "--for", "VersionCurrent", "--nodeset", "edpm-compute"])
        .args(["--timeout", "30", "--interval", "0.3"])
        .current_dir(repo())
        .env_clear()
        .env("EDPM_AGENT_NOW", NOW.1)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // Replaced whole, as an editor or `kubectl get -o yaml >` would.
    let tmp = dir.path().join("deployments.yaml.tmp");
    std::fs::write(&tmp, &completed).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("waiting: 5/10 nodes not yet VersionCurrent"), "{stdout}");
    assert_eq!(lines.last().copied(), Some("10 node(s), 1 NodeSet(s): VersionCurrent True"), "{stdout}");
    let out = run(&["--source", &d, "status", "plan"], &[NOW]);
    assert_eq!(out.code, 14, "{}{}", out.stdout, out.stderr);
}

/// The second batch's update, run with real ansible-runner: its last play, with
/// `any_errors_fatal`, fails on edpm-compute-7 and stops edpm-compute-8 with it.
const PARTLY_FAILING_UPDATE: &str = r#"
- hosts: all
  gather_facts: false
  tasks:
    - name: update the packages
      ansible.builtin.debug:
        msg: updated
- hosts: edpm-compute-7,edpm-compute-8
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: restart the updated services
      ansible.builtin.command: /bin/false
      when: inventory_hostname == 'edpm-compute-7'
    - name: check them
      ansible.builtin.debug:
        msg: checked
"#;

const PARTLY_FAILING_ROTATION: &str = r#"
- hosts: all
  gather_facts: false
  tasks:
    - name: write the rotated nova configuration
      ansible.builtin.debug:
        msg: written
    - name: restart nova_compute
      ansible.builtin.command: /bin/false
      when: inventory_hostname == 'edpm-compute-8'
"#;

/// Issue 36, the inputs: the rotation's second batch fails on one host. Upstream records no
/// hashes for a failed Deployment, but nothing of what its pod mounted changed since it was
/// created (`managedFields`), so the hosts its run completed hold the Secret as it is now:
/// `SecretsCurrent` True there, and `status plan` names only the failed host.
#[test]
fn a_partly_failed_rotation_credits_the_inputs_on_exactly_the_hosts_it_completed() {
    let hosts = ["edpm-compute-7", "edpm-compute-8", "edpm-compute-9"];
    let job = crate::runner::Job::new(&hosts, &[]);
    job.write("project/nova.yml", PARTLY_FAILING_ROTATION);
    let ident = "nova-rotate-batch-2-edpm-compute";
    let out = job.run(&[], "nova.yml", ident, &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let message = std::fs::read_to_string(job.termination_log()).unwrap();
    let dir = scenario_copy("rotation");
    let edit = |file: &str, from: &str, to: &str| {
        let path = dir.path().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}: {from}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    };
    // When each object last changed, as the API server's managedFields say: the Secret was
    // rotated before the first batch; the NodeSet and the nova Service long before.
    let managed = |t: &str| {
        format!("managedFields: [{{manager: kubectl-client-side-apply, operation: Update, time: \"{t}\"}}]")
    };
    edit(
        "nodeset.yaml",
        "  creationTimestamp: \"2026-10-01T00:00:00Z\"\n",
        &format!("  creationTimestamp: \"2026-10-01T00:00:00Z\"\n  {}\n", managed("2026-10-01T00:00:00Z")),
    );
    edit(
        "services.yaml",
        "metadata: {name: nova, namespace: openstack}",
        &format!("metadata: {{name: nova, namespace: openstack, {}}}", managed("2026-10-01T00:00:00Z")),
    );
    edit(
        "deployments.yaml",
        "metadata: {name: nova-cell1-compute-config, namespace: openstack}",
        &format!(
            "metadata: {{name: nova-cell1-compute-config, namespace: openstack, {}}}",
            managed("2026-11-25T09:00:00Z")
        ),
    );
    let batch_2 = r#"---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneDeployment
metadata:
  name: rotate-batch-2
  namespace: openstack
  creationTimestamp: "2026-11-26T10:00:00Z"
spec:
  nodeSets: [edpm-compute]
  servicesOverride: [nova]
  ansibleLimit: "edpm-compute-7,edpm-compute-8,edpm-compute-9"
status:
  nodeSetHashes: {edpm-compute: h1}
  nodeSetConditions:
    edpm-compute:
      - {type: NodeSetDeploymentReady, status: "False", reason: BackoffLimitExceeded, severity: Error, message: "Deployment error occurred in nova service error backoff limit reached for execution.name nova-rotate-batch-2-edpm-compute", lastTransitionTime: "2026-11-26T10:30:00Z"}
      - {type: ServiceNovaDeploymentReady, status: "False", reason: BackoffLimitExceeded, severity: Error, message: "Deployment error occurred in nova service error backoff limit reached for execution.name nova-rotate-batch-2-edpm-compute", lastTransitionTime: "2026-11-26T10:30:00Z"}
"#;
    let path = dir.path().join("deployments.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}{batch_2}")).unwrap();
    let attempt = FailedAttempt { ident, pod: "q8m4z", service: "nova", deployment: "rotate-batch-2" };
    std::fs::write(
        dir.path().join("jobs.yaml"),
        attempt.docs("2026-11-26T10:01:00Z", "2026-11-26T10:29:00Z", &message),
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();

    let out = run(&["--source", d, "status", "show", "-o", "json"], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let secrets_current = |node: &str| -> (String, String) {
        let n = v["nodes"].as_array().unwrap().iter().find(|n| n["name"] == node).unwrap();
        let c = n["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "SecretsCurrent").unwrap();
        (c["status"].as_str().unwrap().to_string(), c["message"].as_str().unwrap_or_default().to_string())
    };
    for i in 0..10 {
        let node = format!("edpm-compute-{i}");
        let (status, message) = secrets_current(&node);
        let want = if i == 8 { "False" } else { "True" };
        assert_eq!(status, want, "{node}: {message}");
    }
    let (_, message) = secrets_current("edpm-compute-8");
    assert!(message.contains("Secret nova-cell1-compute-config (delivered by edpm-deployment"), "{message}");
    let out = run(&["--source", d, "status", "explain", "edpm-compute-9"], &[NOW]);
    assert!(
        out.stdout
            .contains("Secret nova-cell1-compute-config, delivered by Deployment rotate-batch-2, current"),
        "{}",
        out.stdout
    );
    let out = run(&["--source", d, "status", "plan"], &[NOW]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(crate::util::planned_limits(&out.stdout).concat(), ["edpm-compute-8"], "{}", out.stdout);
}

/// Issue 36: a partly failed update credits exactly the hosts its run completed, as the pod's
/// termination message from a real run says, and `status plan` names only the others.
#[test]
fn a_partly_failed_update_credits_exactly_the_hosts_it_completed() {
    let hosts: Vec<String> = (5..10).map(|i| format!("edpm-compute-{i}")).collect();
    let job = crate::runner::Job::new(&hosts.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    job.write("project/update.yml", PARTLY_FAILING_UPDATE);
    let ident = "update-minor-update-batch-2-edpm-compute";
    let out = job.run(&[], "update.yml", ident, &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let message = std::fs::read_to_string(job.termination_log()).unwrap();
    // The batch failed for good; its Job ended, its pod carries the message.
    let dir = scenario_copy("minor-update");
    let path = dir.path().join("deployments.yaml");
    let failed = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            r#"{type: NodeSetDeploymentReady, status: "False", reason: Requested, severity: Info, message: "Deployment in progress", lastTransitionTime: "2026-11-20T12:00:00Z"}"#,
            r#"{type: NodeSetDeploymentReady, status: "False", reason: BackoffLimitExceeded, severity: Error, message: "Deployment error occurred in update service error backoff limit reached for execution.name update-minor-update-batch-2-edpm-compute", lastTransitionTime: "2026-11-20T12:30:00Z"}"#,
        )
        .replace(
            r#"{type: ServiceUpdateDeploymentReady, status: "False", reason: Requested, severity: Info, message: "Deployment not yet ready for update service", lastTransitionTime: "2026-11-20T12:00:00Z"}"#,
            r#"{type: ServiceUpdateDeploymentReady, status: "False", reason: BackoffLimitExceeded, severity: Error, message: "Deployment error occurred in update service error backoff limit reached for execution.name update-minor-update-batch-2-edpm-compute", lastTransitionTime: "2026-11-20T12:30:00Z"}"#,
        );
    std::fs::write(&path, failed).unwrap();
    let attempt =
        FailedAttempt { ident, pod: "x7k2p", service: "update", deployment: "minor-update-batch-2" };
    std::fs::write(
        dir.path().join("jobs.yaml"),
        attempt.docs("2026-11-20T12:01:00Z", "2026-11-20T12:29:00Z", &message),
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();

    let out = run(&["--source", d, "status", "show", "-o", "json"], &[NOW]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let status = |node: &str, ty: &str| -> String {
        let nodes = v["nodes"].as_array().unwrap();
        let n = nodes.iter().find(|n| n["name"] == node).unwrap_or_else(|| panic!("{node}: no such node"));
        n["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == ty)
            .map_or(String::new(), |c| c["status"].as_str().unwrap().to_string())
    };
    for (node, credited) in [
        ("edpm-compute-5", true),
        ("edpm-compute-6", true),
        ("edpm-compute-7", false),
        ("edpm-compute-8", false),
        ("edpm-compute-9", true),
    ] {
        let want = if credited { "True" } else { "False" };
        for ty in ["ServiceUpdateDeploymentReady", "VersionCurrent"] {
            assert_eq!(status(node, ty), want, "{node} {ty}");
        }
    }
    let out = run(&["--source", d, "status", "plan"], &[NOW]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let limits = crate::util::planned_limits(&out.stdout);
    assert_eq!(limits.concat(), ["edpm-compute-7", "edpm-compute-8"], "{}", out.stdout);
    // The host that failed at update and the one the run stopped before it need the same
    // service: one Deployment for both.
    assert_eq!(limits.len(), 1, "{}", out.stdout);
    for credited in ["edpm-compute-5", "edpm-compute-6", "edpm-compute-9"] {
        assert!(!out.stdout.contains(credited), "{credited} is planned again: {}", out.stdout);
    }
}

/// A Job of edpm-compute that failed for good (backoff limit 0), and its one pod, whose
/// termination message is `message`: what openstack-operator leaves of a failed service run.
struct FailedAttempt<'a> {
    ident: &'a str,
    /// The pod's name after the Job's.
    pod: &'a str,
    service: &'a str,
    deployment: &'a str,
}

impl FailedAttempt<'_> {
    /// The Job and the pod, as YAML documents.
    fn docs(&self, created: &str, finished: &str, message: &str) -> String {
        let ident = self.ident;
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{ident}-{}", self.pod), "namespace": "openstack", "creationTimestamp": created,
                         "labels": {"batch.kubernetes.io/job-name": ident}},
            "status": {"phase": "Failed", "containerStatuses": [{"name": ident, "state": {"terminated": {
                "exitCode": 2, "reason": "Error", "finishedAt": finished, "message": message}}}]}
        });
        let job = serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": ident, "namespace": "openstack", "labels": {
                "app": "openstackansibleee", "openstackdataplaneservice": self.service,
                "openstackdataplanedeployment": self.deployment, "openstackdataplanenodeset": "edpm-compute"}},
            "spec": {"backoffLimit": 0},
            "status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
        });
        [job, pod].iter().map(|d| serde_saphyr::to_string(d).unwrap()).collect::<Vec<_>>().join("---\n")
    }
}
