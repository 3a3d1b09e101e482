//! `status report` against the in-test fake API server: server-side apply of the status
//! objects, the status subresource, map-list conditions shared with the node agent's field
//! manager, nothing sent when nothing changed, and recovery after an outage.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::fake_api::{FakeApi, Fault};
use crate::util::{repo, run};

const NOW: (&str, &str) = ("EDPM_AGENT_NOW", "2026-11-23T12:00:00Z");
const STATUS_PATH: &str = "/apis/agent.edpm.openstack.org/v1alpha1/namespaces/openstack/edpmnodestatuses";

/// A cluster holding the examples' NodeSet model and its deployment evidence.
pub fn cluster() -> FakeApi {
    let api = FakeApi::start();
    api.add_readiness_crds();
    for file in
        ["examples/nodeset/nodesets.yaml", "examples/status/deployments.yaml", "examples/status/pods.yaml"]
    {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let docs = serde_saphyr::from_multiple::<Value>(&text).unwrap();
        // A `kind: List` export holds its objects in `items`.
        let docs = docs.into_iter().flat_map(|d| match d["items"].as_array() {
            Some(items) if d["kind"] == "List" => items.clone(),
            _ => vec![d],
        });
        for (i, mut d) in docs.enumerate() {
            if d["kind"] == "OpenStackDataPlaneNodeSet" {
                d["metadata"]["uid"] = json!(format!("nodeset-uid-{i}"));
            }
            d["metadata"]["namespace"] = json!("openstack");
            api.put(d);
        }
    }
    api
}

fn report(api: &FakeApi, env: &[(&str, &str)]) -> crate::util::Output {
    let kc = api.kubeconfig();
    let mut e = vec![NOW];
    e.extend_from_slice(env);
    // Nova's check has its own tests (tests/nova.rs); this cluster has no NovaCell.
    run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "report", "--no-nova"], &e)
}

fn patches(api: &FakeApi) -> usize {
    api.count("PATCH", "/apis/agent.edpm.openstack.org/")
}

fn conditions(api: &FakeApi, name: &str) -> Vec<Value> {
    api.object("EDPMNodeStatus", name).unwrap()["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn condition(api: &FakeApi, name: &str, ty: &str) -> Option<Value> {
    conditions(api, name).into_iter().find(|c| c["type"] == ty)
}

#[test]
fn a_first_report_creates_each_object_and_its_status_then_sends_nothing() {
    let api = cluster();
    let out = report(&api, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout, "5 created, 0 updated, 0 unchanged (10 write requests), 3 node agent Lease(s) created\n",
        "3 nodes and 2 NodeSets"
    );
    let lease = api.object("Lease", "edpm-compute-cell2-edpm-compute-5").unwrap();
    assert_eq!(lease["metadata"]["labels"]["agent.edpm.openstack.org/node"], "edpm-compute-5");
    assert_eq!(patches(&api), 10, "one apply of the object, one of its status");
    let obj = api.object("EDPMNodeStatus", "edpm-compute-cell2-edpm-compute-5").unwrap();
    assert_eq!(obj["spec"]["node"], "edpm-compute-5");
    assert_eq!(obj["metadata"]["ownerReferences"][0]["kind"], "OpenStackDataPlaneNodeSet");
    assert_eq!(obj["metadata"]["ownerReferences"][0]["name"], "edpm-compute-cell2");
    assert!(obj["metadata"]["ownerReferences"][0]["uid"].as_str().unwrap().starts_with("nodeset-uid-"));
    assert_eq!(obj["status"]["observedGeneration"], 1);
    let ready = condition(&api, "edpm-compute-cell2-edpm-compute-5", "Ready").unwrap();
    assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("HostFailed")));
    let set = api.object("EDPMNodeSetStatus", "edpm-compute-cell1").unwrap();
    assert_eq!(set["status"]["nodes"]["summary"], "1/2");

    // Unchanged: the second report reads, and writes nothing.
    let before = patches(&api);
    let later = ("EDPM_AGENT_NOW", "2026-11-23T13:00:00Z");
    let out = report(&api, &[later]);
    assert_eq!(out.stdout, "0 created, 0 updated, 5 unchanged (0 write requests)\n", "{}", out.stderr);
    assert_eq!(patches(&api), before, "0 writes when nothing changed");
}

#[test]
fn the_report_says_why_a_node_failed_from_the_jobs_pods() {
    let api = cluster();
    let out = report(&api, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The pods were listed as upstream selects them, and nothing else of the core group.
    let pods: Vec<String> = api.requests().into_iter().filter(|r| r.contains("/pods")).collect();
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert!(
        pods[0].starts_with("GET /api/v1/namespaces/openstack/pods?")
            && pods[0].contains("labelSelector=batch.kubernetes.io"),
        "{pods:?}"
    );
    let failed = condition(&api, "edpm-compute-cell2-edpm-compute-5", "ServiceNovaDeploymentReady").unwrap();
    assert_eq!(failed["reason"], "HostFailed");
    assert!(
        failed["message"].as_str().unwrap().ends_with("lookup quay.io: no such host"),
        "the pod's reason reaches the node's condition: {failed}"
    );
    let ready = condition(&api, "edpm-compute-cell2-edpm-compute-5", "Ready").unwrap();
    assert!(ready["message"].as_str().unwrap().contains("lookup quay.io"), "{ready}");
    let retrying =
        condition(&api, "edpm-compute-cell1-edpm-compute-4", "ServiceNovaDeploymentReady").unwrap();
    assert_eq!(
        (&retrying["reason"], &retrying["severity"]),
        (&json!("Retrying"), &json!("Warning")),
        "{retrying}"
    );
    assert!(
        retrying["message"].as_str().unwrap().contains("failed to connect to the hypervisor"),
        "{retrying}"
    );
    // The other node of that NodeSet keeps its state.
    assert_eq!(condition(&api, "edpm-compute-cell1-edpm-compute-3", "Ready").unwrap()["status"], "True");
}

#[test]
fn the_node_agents_conditions_and_ours_never_clobber_each_other() {
    let api = cluster();
    assert_eq!(report(&api, &[]).code, 0);
    let name = "edpm-compute-cell1-edpm-compute-3";
    // The node agent applies its own condition types under its own field manager.
    let agent_body = json!({
        "apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus", "metadata": {"name": name},
        "status": {"conditions": [
            {"type": "NodeAgentReady", "status": "True", "reason": "Ready", "message": "agent running", "lastTransitionTime": "2026-11-23T12:00:30Z"},
            {"type": "ServiceNovaRuntimeReady", "status": "True", "reason": "Ready", "message": "units active", "lastTransitionTime": "2026-11-23T12:00:30Z"}]}
    });
    let (code, _) = api
        .patch(&format!("{STATUS_PATH}/{name}/status?fieldManager=edpm-agent-node&force=true"), &agent_body);
    assert_eq!(code, 200);
    let types = |api: &FakeApi| -> Vec<String> {
        conditions(api, name).iter().map(|c| c["type"].as_str().unwrap().to_string()).collect()
    };
    assert!(
        types(&api).contains(&"ServicesReady".to_string())
            && types(&api).contains(&"NodeAgentReady".to_string())
    );

    // A report after a change (a new Deployment fails nova everywhere) keeps the agent's.
    let mut d = api.object("OpenStackDataPlaneDeployment", "edpm-deployment").unwrap();
    d["status"]["nodeSetConditions"]["edpm-compute-cell1"][0]["status"] = json!("False");
    d["status"]["nodeSetConditions"]["edpm-compute-cell1"][0]["reason"] = json!("Requested");
    d["status"]["nodeSetConditions"]["edpm-compute-cell1"][0]["severity"] = json!("Info");
    api.put_replace(d);
    let out = report(&api, &[("EDPM_AGENT_NOW", "2026-11-23T12:10:00Z")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(types(&api).contains(&"NodeAgentReady".to_string()), "{:?}", types(&api));
    assert!(types(&api).contains(&"ServiceNovaRuntimeReady".to_string()));

    // And the agent's next apply keeps ours; without force, it may not touch ours.
    let (code, _) = api
        .patch(&format!("{STATUS_PATH}/{name}/status?fieldManager=edpm-agent-node&force=true"), &agent_body);
    assert_eq!(code, 200);
    assert!(types(&api).contains(&"ServicesReady".to_string()) && types(&api).contains(&"Ready".to_string()));
    let grab = json!({
        "apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "mine now", "lastTransitionTime": "2026-11-23T12:00:30Z"}]}
    });
    let (code, body) = api.patch(&format!("{STATUS_PATH}/{name}/status?fieldManager=someone-else"), &grab);
    assert_eq!(code, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("edpm-agent"), "{body}");
}

#[test]
fn an_outage_loses_nothing_and_backs_off() {
    let api = cluster();
    // Every write fails for a while: the report fails when its --timeout runs out, naming
    // what the server said.
    api.fault("/edpmnode", Fault::Status(503), 1000);
    let kc = api.kubeconfig();
    let out = run(
        &[
            "--source",
            "kube",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "status",
            "report",
            "--no-nova",
            "--timeout",
            "3",
        ],
        &[NOW, ("EDPM_AGENT_KUBE_TIMEOUT", "2")],
    );
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(out.stderr.contains("503"), "{}", out.stderr);
    assert!(
        api.object("EDPMNodeStatus", "edpm-compute-cell2-edpm-compute-5")
            .is_none_or(|o| o.get("status").is_none())
    );

    // The API comes back: the next report sends the latest state.
    api.clear_faults();
    let out = report(&api, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        condition(&api, "edpm-compute-cell2-edpm-compute-5", "Ready").unwrap()["reason"],
        "HostFailed"
    );
}

#[test]
fn throttling_dropped_connections_and_server_errors_are_retried() {
    let api = cluster();
    api.fault("/edpmnodesetstatuses/edpm-compute-cell1?", Fault::RetryAfter(429, 1), 1);
    api.fault("/edpmnodestatuses/edpm-compute-cell1-edpm-compute-3/status", Fault::Status(500), 1);
    api.fault("/edpmnodestatuses/edpm-compute-cell1-edpm-compute-4?", Fault::Drop, 1);
    let started = Instant::now();
    let out = report(&api, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After was honoured");
    assert_eq!(api.count("PATCH", "/edpmnodesetstatuses/edpm-compute-cell1?"), 2);
    assert_eq!(api.count("PATCH", "/edpmnodestatuses/edpm-compute-cell1-edpm-compute-3/status"), 2);
    assert!(condition(&api, "edpm-compute-cell1-edpm-compute-4", "Ready").is_some());
}

#[test]
fn an_expired_lease_turns_the_agents_conditions_unknown_until_it_returns() {
    let api = cluster();
    assert_eq!(report(&api, &[]).code, 0);
    let name = "edpm-compute-cell1-edpm-compute-3";
    let agent = |time: &str| {
        json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus", "metadata": {"name": name},
            "status": {"conditions": [{"type": "NodeAgentReady", "status": "True", "reason": "Ready", "message": "agent running", "lastTransitionTime": time}]}})
    };
    api.patch(
        &format!("{STATUS_PATH}/{name}/status?fieldManager=edpm-agent-node&force=true"),
        &agent("2026-11-23T12:00:30Z"),
    );
    api.put_replace(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "edpm-node-lease", "labels": {"agent.edpm.openstack.org/node": "edpm-compute-3"}},
        "spec": {"holderIdentity": "edpm-compute-3", "leaseDurationSeconds": 40, "renewTime": "2026-11-23T12:00:30.000000Z"}}));
    let out = report(&api, &[("EDPM_AGENT_NOW", "2026-11-23T12:30:00Z")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let c = condition(&api, name, "NodeAgentReady").unwrap();
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("Unknown"), Some("AgentHeartbeatExpired"))
    );
    assert_eq!(condition(&api, name, "Ready").unwrap()["status"], "Unknown");
    // The agent comes back and writes its condition again (with force, it is the authority).
    let (code, _) = api.patch(
        &format!("{STATUS_PATH}/{name}/status?fieldManager=edpm-agent-node&force=true"),
        &agent("2026-11-23T12:31:00Z"),
    );
    assert_eq!(code, 200);
    assert_eq!(condition(&api, name, "NodeAgentReady").unwrap()["status"], "True");
}
