//! The status commands' verdicts on a directory source: evidence that is missing, conflicting
//! or malformed never reads Ready. Each case starts from the examples' NodeSet deployment
//! (`examples/{controlplane,nodeset,status}`), where edpm-compute-3 is Ready, and spoils one
//! piece of evidence.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::util::{Output, repo, run};

const NOW: &str = "2026-11-23T12:00:00Z";
const CELL1: &str = "edpm-compute-cell1";
/// edpm-compute-3's status object and Lease.
const OBJECT: &str = "edpm-compute-cell1-edpm-compute-3";

/// A copy of the examples' NodeSet deployment with its evidence, to spoil.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub src: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        for sub in ["controlplane", "nodeset", "status"] {
            let to = src.join(sub);
            std::fs::create_dir_all(&to).unwrap();
            for e in std::fs::read_dir(repo().join("examples").join(sub)).unwrap() {
                let p = e.unwrap().path();
                if p.is_file() {
                    std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
                }
            }
        }
        Fixture { _dir: dir, src }
    }

    /// Adds one object (or a saved answer) as a JSON file of its own.
    pub fn add(&self, file: &str, v: &Value) {
        std::fs::write(self.src.join(file), serde_json::to_string_pretty(v).unwrap()).unwrap();
    }

    /// Edits the objects of one of the examples' YAML files (`status/deployments.yaml`),
    /// which is then kept as a JSON List beside the others.
    pub fn edit(&self, file: &str, f: impl FnOnce(&mut Vec<Value>)) {
        let path = self.src.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text)
            .unwrap()
            .into_iter()
            .flat_map(|d| match d["items"].as_array() {
                Some(items) if d["kind"] == "List" => items.clone(),
                _ => vec![d],
            })
            .filter(|d| d.get("kind").is_some())
            .collect();
        f(&mut docs);
        std::fs::remove_file(&path).unwrap();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
        std::fs::write(path.with_extension("json"), serde_json::to_string_pretty(&list).unwrap()).unwrap();
    }

    /// Edits the examples' Deployments and Jobs.
    pub fn edit_deployments(&self, f: impl FnOnce(&mut Vec<Value>)) {
        self.edit("status/deployments.yaml", f);
    }

    pub fn status(&self, args: &[&str]) -> Output {
        self.status_at(NOW, args)
    }

    /// `status …` with the clock at `now`.
    pub fn status_at(&self, now: &str, args: &[&str]) -> Output {
        let src = self.src.to_str().unwrap();
        let mut all = vec!["--source", src, "status"];
        all.extend_from_slice(args);
        run(&all, &[("EDPM_AGENT_NOW", now)])
    }
}

/// The named Deployment among `docs`.
pub fn deployment<'a>(docs: &'a mut [Value], name: &str) -> &'a mut Value {
    docs.iter_mut()
        .find(|d| d["kind"] == "OpenStackDataPlaneDeployment" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Deployment {name}"))
}

/// The JSON of `status show -o json` for one node.
fn node_json(out: &Output, node: &str) -> Value {
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
    nodes
        .into_iter()
        .find(|n| n["name"] == node)
        .unwrap_or_else(|| panic!("no node {node} in {}", out.stdout))
}

fn condition(node: &Value, ty: &str) -> Value {
    node["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == ty).cloned())
        .unwrap_or(Value::Null)
}

fn ready(f: &Fixture, node: &str) -> Value {
    condition(&node_json(&f.status(&["show", "--format", "json"]), node), "Ready")
}

#[test]
fn the_fixture_starts_with_edpm_compute_3_ready() {
    let f = Fixture::new();
    assert_eq!(ready(&f, "edpm-compute-3")["status"], "True");
}

/// A duplicated condition type (an extra True beside the real False) reads as its worst copy,
/// and `explain` names the conflict.
#[test]
fn a_condition_held_twice_reads_as_its_worst_copy() {
    let f = Fixture::new();
    f.edit_deployments(|docs| {
        let conds =
            deployment(docs, "edpm-deployment")["status"]["nodeSetConditions"][CELL1].as_array_mut().unwrap();
        let i = conds.iter().position(|c| c["type"] == "ServiceNovaDeploymentReady").unwrap();
        // The True stays first; the False after it is the real reading.
        conds.insert(
            i + 1,
            json!({"type": "ServiceNovaDeploymentReady", "status": "False", "severity": "Error",
                "reason": "Error", "message": "nova failed", "lastTransitionTime": "2026-11-01T10:42:00Z"}),
        );
    });
    let r = ready(&f, "edpm-compute-3");
    assert_eq!(r["status"], "False", "{r}");
    let out = f.status(&["explain", "edpm-compute-3"]);
    assert!(
        out.stdout.contains("conflict:") && out.stdout.contains("2 ServiceNovaDeploymentReady conditions"),
        "{}",
        out.stdout
    );
}

/// A service condition True while its Job ended BackoffLimitExceeded and the Job's summary
/// names the host: the failure counts.
#[test]
fn a_true_service_condition_does_not_outweigh_its_failed_job() {
    let f = Fixture::new();
    f.edit_deployments(|docs| {
        let d = deployment(docs, "edpm-deployment");
        for c in d["status"]["nodeSetConditions"]["edpm-compute-cell2"].as_array_mut().unwrap() {
            c["status"] = json!("True");
            c["reason"] = json!("Ready");
            c.as_object_mut().unwrap().remove("severity");
        }
    });
    let r = ready(&f, "edpm-compute-5");
    assert_eq!((r["status"].as_str(), r["reason"].as_str()), (Some("False"), Some("HostFailed")), "{r}");
    let out = f.status(&["explain", "edpm-compute-5"]);
    assert!(out.stdout.contains("conflict:") && out.stdout.contains("the failure counts"), "{}", out.stdout);
}

/// edpm-compute-3's status object as the node agent left it: NodeAgentReady True.
fn agent_report() -> Value {
    json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus",
        "metadata": {"name": OBJECT, "namespace": "openstack"},
        "spec": {"nodeSet": CELL1, "nodeSetKind": "OpenStackDataPlaneNodeSet", "node": "edpm-compute-3"},
        "status": {"conditions": [{"type": "NodeAgentReady", "status": "True", "reason": "Ready",
            "message": "all checks pass", "lastTransitionTime": "2026-11-23T11:00:00Z"}]}})
}

fn lease(spec: Option<Value>) -> Value {
    let mut l = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": OBJECT, "namespace": "openstack",
            "labels": {"agent.edpm.openstack.org/nodeset": CELL1}}});
    if let Some(s) = spec {
        l["spec"] = s;
    }
    l
}

/// Only a present, readable, unexpired Lease supports the node agent's last word: a Lease
/// dated in the future beyond its duration (clock skew), unreadable, never renewed, without
/// spec, or missing, turns it Unknown with a reason that says which.
#[test]
fn the_node_agents_word_needs_a_live_lease() {
    let renewed = |t: &str, d: Value| {
        Some(json!({"holderIdentity": "edpm-compute-3", "leaseDurationSeconds": d, "renewTime": t}))
    };
    let cases: Vec<(&str, Option<Value>, &str, &str)> = vec![
        ("alive", renewed("2026-11-23T11:59:50.000000Z", json!(40)), "True", "Ready"),
        ("expired", renewed("2026-11-23T11:50:00Z", json!(40)), "Unknown", "AgentHeartbeatExpired"),
        ("dated in 2099", renewed("2099-01-01T00:00:00Z", json!(40)), "Unknown", "AgentClockSkew"),
        ("unparseable renewTime", renewed("soon", json!(40)), "Unknown", "AgentLeaseUnreadable"),
        (
            "absurd duration",
            renewed("2026-11-23T11:59:50Z", json!(9223372036854775807_i64)),
            "Unknown",
            "AgentLeaseUnreadable",
        ),
        (
            "never renewed",
            Some(json!({"holderIdentity": "x", "leaseDurationSeconds": 40})),
            "Unknown",
            "AgentLeaseUnreadable",
        ),
        ("no spec", None, "Unknown", "AgentLeaseUnreadable"),
    ];
    for (what, spec, status, reason) in cases {
        let f = Fixture::new();
        f.add("report.json", &agent_report());
        f.add("lease.json", &lease(spec));
        let n = node_json(&f.status(&["show", "--format", "json"]), "edpm-compute-3");
        let agent = condition(&n, "NodeAgentReady");
        assert_eq!(
            (agent["status"].as_str(), agent["reason"].as_str()),
            (Some(status), Some(reason)),
            "{what}: {agent}"
        );
        assert_eq!(condition(&n, "Ready")["status"] == "True", status == "True", "{what}: {n}");
        assert!(!agent["message"].as_str().unwrap_or("").contains("1970"), "{what}: {agent}");
    }
    // No Lease at all.
    let f = Fixture::new();
    f.add("report.json", &agent_report());
    let n = node_json(&f.status(&["show", "--format", "json"]), "edpm-compute-3");
    assert_eq!(condition(&n, "NodeAgentReady")["reason"], "AgentLeaseMissing", "{n}");
    assert_eq!(condition(&n, "Ready")["status"], "Unknown", "{n}");
    // What is written says the same: the stored object never keeps the agent's True beside an
    // Unknown Ready, and Ready turned Unknown now, not when the agent last reported.
    let dir = tempfile::tempdir().unwrap();
    let out = f.status(&["report", "--status-dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = std::fs::read_to_string(dir.path().join(format!("edpmnodestatus-{OBJECT}.yaml"))).unwrap();
    let stored: Value = serde_saphyr::from_str(&text).unwrap();
    let agent = condition(&stored["status"], "NodeAgentReady");
    assert_eq!(
        (agent["status"].as_str(), agent["reason"].as_str()),
        (Some("Unknown"), Some("AgentLeaseMissing")),
        "{stored}"
    );
    assert_eq!(condition(&stored["status"], "Ready")["lastTransitionTime"], NOW, "{stored}");
}

/// A message edpm-agent builds may hold a word the redactor keys on (a service named
/// `install-secrets`): what it wrote reads back the same, so nothing is rewritten (it was, at
/// every report, when every condition read was masked again).
#[test]
fn what_is_written_reads_back_the_same() {
    let f = Fixture::new();
    f.edit("nodeset/nodesets.yaml", |docs| {
        for set in docs.iter_mut().filter(|d| d["kind"] == "OpenStackDataPlaneNodeSet") {
            set["spec"]["services"].as_array_mut().unwrap().insert(0, json!("install-secrets"));
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let report = |now: &str| f.status_at(now, &["report", "--status-dir", dir.path().to_str().unwrap()]);
    let first = report(NOW);
    assert_eq!(first.code, 0, "{}", first.stderr);
    // An hour later nothing changed: a message that read back otherwise would move its time.
    let again = report("2026-11-23T13:00:00Z");
    assert!(again.stdout.starts_with("0 written"), "rewritten: {}", again.stdout);
}

/// A Deployment whose creationTimestamp is not a time cannot be put in order: the nodes it
/// covers read Unknown and name it, instead of reading as if it were the oldest (which made
/// edpm-compute-4, with a nova retry running on it, Ready).
#[test]
fn a_deployment_that_cannot_be_ordered_is_named_not_reordered() {
    let f = Fixture::new();
    f.edit_deployments(|docs| {
        deployment(docs, "edpm-deployment-nova-retry")["metadata"]["creationTimestamp"] =
            json!("last tuesday");
    });
    let n = node_json(&f.status(&["show", "--format", "json"]), "edpm-compute-4");
    let nova = condition(&n, "ServiceNovaDeploymentReady");
    assert_eq!(
        (nova["status"].as_str(), nova["reason"].as_str()),
        (Some("Unknown"), Some("InvalidEvidence")),
        "{nova}"
    );
    let message = nova["message"].as_str().unwrap();
    assert!(message.contains("edpm-deployment-nova-retry metadata.creationTimestamp"), "{message}");
    assert_ne!(condition(&n, "Ready")["status"], "True", "{n}");
    // The node it does not cover keeps its verdict.
    assert_eq!(ready(&f, "edpm-compute-3")["status"], "True");
}

/// A saved Nova answer of a fresh cloud (`{"services": []}`, no compute registered yet) is an
/// answer: every compute reads ComputeServiceNotRegistered, with or without an empty
/// hypervisor list beside it. A service row without its host is bad input, named.
#[test]
fn an_empty_nova_service_list_is_an_answer() {
    for hypervisors in [None, Some(json!({"hypervisors": []}))] {
        let f = Fixture::new();
        std::fs::remove_file(f.src.join("status/nova-hypervisors.json")).unwrap();
        f.add("status/nova-compute-services.json", &json!({"services": []}));
        if let Some(h) = &hypervisors {
            f.add("status/nova-hypervisors.json", h);
        }
        let out = f.status(&["show", "--format", "json"]);
        let n = node_json(&out, "edpm-compute-3");
        let nova = condition(&n, "NovaComputeReady");
        assert_eq!(
            (nova["status"].as_str(), nova["reason"].as_str()),
            (Some("False"), Some("ComputeServiceNotRegistered")),
            "{hypervisors:?}: {n}"
        );
        assert_ne!(condition(&n, "Ready")["status"], "True");
    }
    let f = Fixture::new();
    f.add(
        "status/nova-compute-services.json",
        &json!({"services": [{"id": 1, "binary": "nova-compute", "state": "up", "status": "enabled"}]}),
    );
    let out = f.status(&["show"]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("nova-compute-services.json") && out.stderr.contains("no host"),
        "{}",
        out.stderr
    );
}

/// One of edpm-agent's own status objects that does not decode is named on stderr and
/// skipped: every node is still evaluated (it used to fail the whole command, exit 3).
#[test]
fn one_unreadable_status_object_is_skipped_not_fatal() {
    let f = Fixture::new();
    let mut broken = agent_report();
    broken["status"]["conditions"][0]["status"] = json!("Maybe");
    f.add("report.json", &broken);
    let out = f.status(&["show", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("EDPMNodeStatus/{OBJECT}")) && out.stderr.contains("skipped"),
        "{}",
        out.stderr
    );
    assert_eq!(condition(&node_json(&out, "edpm-compute-3"), "Ready")["status"], "True");
    assert_eq!(condition(&node_json(&out, "edpm-compute-5"), "Ready")["status"], "False");
}

/// The runs edpm-compute-5's status object records, from a report into `dir`.
fn recorded_runs(f: &Fixture, dir: &std::path::Path) -> Vec<Value> {
    let out = f.status(&["report", "--status-dir", dir.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text =
        std::fs::read_to_string(dir.join("edpmnodestatus-edpm-compute-cell2-edpm-compute-5.yaml")).unwrap();
    let v: Value = serde_saphyr::from_str(&text).unwrap();
    v["spec"]["record"]["runs"].as_array().cloned().unwrap_or_default()
}

/// The run history outlives the pods: when a Job's oldest pod is gone, the attempts recorded
/// keep their numbers and records (they used to be renumbered, and attempt 1 was lost).
#[test]
fn a_recorded_attempt_outlives_its_pod() {
    let f = Fixture::new();
    // The Job has run twice: both pods are still there.
    f.edit_deployments(|docs| {
        let job = docs
            .iter_mut()
            .find(|d| d["metadata"]["name"] == "nova-edpm-deployment-edpm-compute-cell2")
            .unwrap();
        job["status"]["failed"] = json!(2);
    });
    let dir = tempfile::tempdir().unwrap();
    let before = recorded_runs(&f, dir.path());
    let attempts: Vec<(u64, String)> = before
        .iter()
        .map(|r| (r["attempt"].as_u64().unwrap(), r["finished"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(attempts.iter().map(|a| a.0).collect::<Vec<_>>(), [1, 2], "{before:?}");
    // The older pod is deleted (a TTL, a person): the record of attempt 1 stays as it was.
    let pods = f.src.join("status/pods.yaml");
    let text = std::fs::read_to_string(&pods).unwrap();
    let mut list: Value = serde_saphyr::from_str(&text).unwrap();
    list["items"]
        .as_array_mut()
        .unwrap()
        .retain(|p| p["metadata"]["name"] != "nova-edpm-deployment-edpm-compute-cell2-2hq9s");
    std::fs::remove_file(&pods).unwrap();
    f.add("status/pods.json", &list);
    let after = recorded_runs(&f, dir.path());
    assert_eq!(after, before, "the recorded attempts are never rewritten");
}

/// A Job count past what the API stores (2^64 and more) is named as a count out of range,
/// with the object and field, not as serde's "invalid type: floating point".
#[test]
fn an_impossible_job_count_is_named_as_such() {
    let f = Fixture::new();
    f.edit_deployments(|docs| {
        let job = docs
            .iter_mut()
            .find(|d| d["metadata"]["name"] == "nova-edpm-deployment-edpm-compute-cell2")
            .unwrap();
        job["status"]["failed"] = json!(1e20);
    });
    let out = f.status(&["show"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("nova-edpm-deployment-edpm-compute-cell2")
            && out.stderr.contains("status.failed")
            && out.stderr.contains("is not a count"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("floating point"), "{}", out.stderr);
}

/// The rotation scenario (a rotated Secret delivered to 7 of 10 nodes), its batch's
/// `ansibleLimit` replaced by `limit`: each node's `SecretsCurrent` status and reason.
fn rotation_with_limit(limit: &str) -> Vec<(String, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    for f in ["nodeset.yaml", "services.yaml", "deployments.yaml"] {
        let text = std::fs::read_to_string(repo().join("tests/fixtures/scenarios/rotation").join(f)).unwrap();
        let text = text.replace(
            "ansibleLimit: \"edpm-compute-0,edpm-compute-1,edpm-compute-2,edpm-compute-3,edpm-compute-4,edpm-compute-5,edpm-compute-6\"",
            &format!("ansibleLimit: {}", serde_json::to_string(limit).unwrap()),
        );
        std::fs::write(dir.path().join(f), text).unwrap();
    }
    let out = run(
        &["--source", dir.path().to_str().unwrap(), "status", "show", "--format", "json"],
        &[("EDPM_AGENT_NOW", "2026-11-27T12:00:00Z")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let mut got: Vec<(String, String, String)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let c = condition(n, "SecretsCurrent");
            (
                n["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    got.sort();
    got
}

/// A rotation batch limited by a regular expression (`~edpm-compute-[0-6]$`, Python's
/// `re.match`) covers the seven nodes it names, not all ten: the three left out stay stale
/// (they read current when every `~regex` was taken as covering every node). A regular
/// expression edpm-agent cannot evaluate makes the nodes Unknown (`LimitUnknown`), never
/// current.
#[test]
fn an_ansible_limit_holding_a_regex_covers_what_ansible_selects() {
    for limit in [
        "~edpm-compute-[0-6]$",
        "edpm-compute-[0-6]*",
        "~edpm-compute-[0-9],!~.*[7-9]",
        "all,!edpm-compute-[7-9]*",
    ] {
        let got = rotation_with_limit(limit);
        assert_eq!(got.len(), 10, "{got:?}");
        for (node, status, reason) in &got {
            let left_out = ["edpm-compute-7", "edpm-compute-8", "edpm-compute-9"].contains(&node.as_str());
            if left_out {
                assert_eq!(status, "False", "{limit}: {node} {reason}");
            } else {
                assert_eq!(status, "True", "{limit}: {node} {reason}");
            }
        }
    }
    // Lookahead: outside what edpm-agent evaluates; the batch may have covered any node.
    for limit in ["~edpm-compute-(?![7-9])", "@batch.txt"] {
        for (node, status, reason) in rotation_with_limit(limit) {
            assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "LimitUnknown"), "{limit}: {node}");
        }
    }
}

/// The rotation scenario with edpm-compute-8's status object claiming the rotated Secret was
/// delivered to it by `deployment`, created at `created`: its `SecretsCurrent` status and
/// reason.
fn rotation_with_claim(deployment: &str, created: &str) -> (String, String) {
    rotation_with_claim_in("spec", deployment, created)
}

/// [`rotation_with_claim`], the claim kept in the object's `place`: `spec` (`spec.record`,
/// where edpm-agent keeps it) or `status` (which the node agent may patch).
fn rotation_with_claim_in(place: &str, deployment: &str, created: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    for f in ["nodeset.yaml", "services.yaml", "deployments.yaml"] {
        std::fs::copy(repo().join("tests/fixtures/scenarios/rotation").join(f), dir.path().join(f)).unwrap();
    }
    let rotated = "nd7h677h554h5dch566h5dh7ch5bdh65bh57bh5f6h597hddhf8h64dh557h598hd7hd9h658h596h5cfhd7h56h7h55fh5b8h9h564h5f7h57bh94q";
    let delivered = json!([{"kind": "Secret", "name": "nova-cell1-compute-config", "hash": rotated,
        "deployment": deployment, "created": created}]);
    let mut claim = json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus",
        "metadata": {"name": "edpm-compute-edpm-compute-8", "namespace": "openstack"},
        "spec": {"nodeSet": "edpm-compute", "nodeSetKind": "OpenStackDataPlaneNodeSet", "node": "edpm-compute-8"},
        "status": {}});
    if place == "spec" {
        claim["spec"]["record"] = json!({"deliveredInputs": delivered});
    } else {
        // Where it was kept before issue 34, and where the node agent's RBAC lets it write.
        claim["status"]["deliveredInputs"] = delivered;
    }
    std::fs::write(dir.path().join("claim.json"), claim.to_string()).unwrap();
    let out = run(
        &["--source", dir.path().to_str().unwrap(), "status", "show", "--format", "json"],
        &[("EDPM_AGENT_NOW", "2026-11-27T12:00:00Z")],
    );
    let c = condition(&node_json(&out, "edpm-compute-8"), "SecretsCurrent");
    (c["status"].as_str().unwrap_or("").to_string(), c["reason"].as_str().unwrap_or("").to_string())
}

/// A kept delivery is evidence only when it can be: one by a Deployment that never existed,
/// dated 2099, made the stale edpm-compute-8 current for ever (no real Deployment could
/// replace it); one naming a real Deployment under another date is no evidence either. A
/// claim by a Deployment since deleted, dated before now, still counts (kept deliveries are
/// for that), until a newer real Deployment replaces it.
#[test]
fn a_kept_delivery_dated_in_the_future_is_no_evidence() {
    let stale = ("False".to_string(), "SecretsStale".to_string());
    assert_eq!(rotation_with_claim("never-existed", "2099-01-01T00:00:00Z"), stale);
    assert_eq!(rotation_with_claim("never-existed", "soon"), stale);
    assert_eq!(
        rotation_with_claim("rotate-batch-1", "2026-11-26T00:00:00Z"),
        stale,
        "a real name, another date"
    );
    // Before every real Deployment: the install (2026-10-01) replaces it.
    assert_eq!(rotation_with_claim("deleted-batch", "2026-09-01T00:00:00Z"), stale);
    // A since-deleted batch after the rotation, dated before now: kept evidence.
    assert_eq!(
        rotation_with_claim("deleted-batch", "2026-11-26T00:00:00Z"),
        ("True".to_string(), "Ready".to_string())
    );
    // The same claim where the node agent can write (the status subresource): no evidence.
    assert_eq!(rotation_with_claim_in("status", "deleted-batch", "2026-11-26T00:00:00Z"), stale);
}

/// The node agent's RBAC grants it the status subresource of its own object and nothing that
/// changes the spec, where edpm-agent keeps what it trusts as delivery evidence.
#[test]
fn the_node_agent_cannot_write_what_is_trusted_as_delivery_evidence() {
    let text = std::fs::read_to_string(repo().join("packaging/kubernetes/rbac-node-agent.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut status_grant = false;
    for d in docs.iter().filter(|d| d["kind"] == "Role") {
        for rule in d["rules"].as_array().unwrap() {
            let list = |k: &str| -> Vec<String> {
                rule[k].as_array().unwrap().iter().filter_map(Value::as_str).map(String::from).collect()
            };
            let (resources, verbs) = (list("resources"), list("verbs"));
            if resources.iter().any(|r| r == "edpmnodestatuses" || r == "*") {
                assert!(
                    verbs.iter().all(|v| ["get", "list", "watch"].contains(&v.as_str())),
                    "the node agent may {verbs:?} {resources:?}: it could write spec.record"
                );
            }
            status_grant |= resources.iter().any(|r| r == "edpmnodestatuses/status");
        }
    }
    assert!(status_grant, "the node agent writes its conditions through the status subresource");
}

/// The rotation scenario with its NodeSet renamed `nodeset` and node `node`'s hostName
/// `host_name`: `status plan`'s output.
fn rotation_plan(nodeset: &str, node: &str, host_name: &str, format: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    for f in ["nodeset.yaml", "services.yaml", "deployments.yaml"] {
        let text = std::fs::read_to_string(repo().join("tests/fixtures/scenarios/rotation").join(f)).unwrap();
        let text = text
            .replace("  name: edpm-compute\n", &format!("  name: {nodeset}\n"))
            .replace("[edpm-compute]", &format!("[{nodeset}]"))
            .replace("{edpm-compute: h1}", &format!("{{{nodeset}: h1}}"))
            .replace("    edpm-compute:\n", &format!("    {nodeset}:\n"))
            .replace(
                &format!("hostName: {node}\n"),
                &format!("hostName: {}\n", serde_json::to_string(host_name).unwrap()),
            );
        std::fs::write(dir.path().join(f), text).unwrap();
    }
    run(
        &["--source", dir.path().to_str().unwrap(), "status", "plan", "--format", format],
        &[("EDPM_AGENT_NOW", "2026-11-27T12:00:00Z")],
    )
}

/// Every Deployment `status plan` writes is one the API server takes and selects exactly the
/// nodes meant: a valid 228-character NodeSet name gave a 240-character name ending in `-`; a
/// host name holding a glob (`edpm-compute-*`) made its `ansibleLimit` select every host (it
/// is refused now, naming the host); a bidi override in a host name landed raw in the YAML.
#[test]
fn status_plan_writes_only_valid_exact_and_printable_deployments() {
    // A NodeSet name of 228 characters (a valid object name: labels of at most 63).
    let long = format!("{}.{}.{}.{}", "a".repeat(56), "b".repeat(56), "c".repeat(56), "d".repeat(57));
    assert_eq!(long.len(), 228);
    let out = rotation_plan(&long, "edpm-compute-7", "edpm-compute-7", "json");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{v}");
    for s in steps {
        let name = s["deployment"]["metadata"]["name"].as_str().unwrap();
        assert!(
            name.len() <= 63
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !name.ends_with('-')
                && !name.starts_with('-'),
            "{name} ({} characters)",
            name.len()
        );
    }
    // A host named as a glob, among the stale nodes: Ansible takes a pattern that is a host's
    // name as that host, so the limit selects exactly the three (as edpm-agent reads it now,
    // which `limit_diff` holds to ansible-inventory); never the whole NodeSet.
    let out = rotation_plan("edpm-compute", "edpm-compute-7", "edpm-compute-*", "json");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let limit = v["steps"][0]["deployment"]["spec"]["ansibleLimit"].as_str().unwrap().to_string();
    let mut hosts: Vec<String> = (0..10).map(|i| format!("edpm-compute-{i}")).collect();
    hosts[7] = "edpm-compute-*".into();
    let shape = edpm_core::readiness::limit::Shape::new(vec![(
        "edpm-compute".to_string(),
        hosts.iter().map(String::as_str).collect(),
    )]);
    let selected = match edpm_core::readiness::limit::coverage(&limit, &shape) {
        edpm_core::readiness::limit::Coverage::Hosts(h) => {
            h.into_iter().collect::<std::collections::BTreeSet<_>>()
        }
        other => panic!("{limit}: {other:?}"),
    };
    assert_eq!(
        selected,
        ["edpm-compute-*", "edpm-compute-8", "edpm-compute-9"].iter().map(|s| s.to_string()).collect(),
        "{limit}"
    );
    // A host name no limit can select alone (it holds the `,` that separates patterns):
    // refused, naming it, and no Deployment planned for the gap.
    let out = rotation_plan("edpm-compute", "edpm-compute-7", "edpm-compute-7,edpm-compute-0", "yaml");
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("host \"edpm-compute-7,edpm-compute-0\""), "{}", out.stderr);
    assert!(out.stdout.contains("# not planned:"), "{}", out.stdout);
    assert!(!out.stdout.contains("ansibleLimit:") && !out.stdout.contains("kind:"), "{}", out.stdout);
    // A bidi override in a host name: escaped wherever it lands.
    let out = rotation_plan("edpm-compute", "edpm-compute-8", "edpm-compute-8\u{202e}x", "yaml");
    assert!(!edpm_core::excerpt::has_control(&out.stdout.replace('\n', "")), "{:?}", out.stdout);
    assert!(!edpm_core::excerpt::has_control(&out.stderr.replace('\n', "")), "{:?}", out.stderr);
    // What is printed is still the Deployment: it reads back with the character in place.
    if out.code == 0 {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
        let limit =
            docs.iter().filter_map(|d| d["spec"]["ansibleLimit"].as_str()).collect::<Vec<_>>().join(",");
        assert!(limit.contains("edpm-compute-8\u{202e}x") || limit.is_empty(), "{limit:?}");
    }
    // `-o json` escapes it as the YAML does (serde_json leaves it raw), and reads back the same.
    let out = rotation_plan("edpm-compute", "edpm-compute-8", "edpm-compute-8\u{202e}x", "json");
    assert!(!edpm_core::excerpt::has_control(&out.stdout.replace('\n', "")), "{:?}", out.stdout);
    assert!(out.stdout.contains("edpm-compute-8\\u202ex"), "{}", out.stdout);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v.to_string().contains("edpm-compute-8\u{202e}x"), "{v}");
}

/// lib-common's hash of an Opaque Secret holding `data`.
fn secret_hash(data: &[(String, String)]) -> String {
    let map: std::collections::BTreeMap<String, Vec<u8>> =
        data.iter().map(|(k, v)| (k.clone(), v.clone().into_bytes())).collect();
    edpm_core::objecthash::secret_parts(&map, &Default::default(), "Opaque")
}

/// Standard base64 with padding, for a Secret's `data`.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn secret_doc(name: &str, labels: Value, data: &[(String, String)]) -> Value {
    let enc: serde_json::Map<String, Value> =
        data.iter().map(|(k, v)| (k.clone(), json!(base64(v.as_bytes())))).collect();
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": "openstack", "labels": labels}, "data": enc})
}

/// The rotation scenario plus upstream's TLS certificates of service ovn: a Secret per node
/// (labelled `osdpns`, `osdp-service`, `osdp-service-cert-key`, `hostname`) and the packed
/// `edpm-compute-ovn-default-certs-0` (keys `<ctlplane host>-tls.crt`, …), all recorded by a
/// completed ovn Deployment; node `renewed`'s certificate then renewed by cert-manager
/// (`renewed` None: as delivered). Writes them into `dir`.
fn certs_scenario(dir: &std::path::Path, renewed: Option<usize>) {
    for f in ["nodeset.yaml", "services.yaml", "deployments.yaml"] {
        std::fs::copy(repo().join("tests/fixtures/scenarios/rotation").join(f), dir.join(f)).unwrap();
    }
    let crt = |n: usize| if Some(n) == renewed { format!("crt-{n}-renewed") } else { format!("crt-{n}") };
    let mut docs = Vec::new();
    let mut hashes = serde_json::Map::new();
    let mut packed = Vec::new();
    for n in 0..10 {
        let host = format!("edpm-compute-{n}");
        let name = format!("cert-ovn-default-{host}");
        let data = vec![("tls.crt".to_string(), crt(n)), ("tls.key".to_string(), format!("key-{n}"))];
        let labels = json!({"osdpns": "edpm-compute", "osdp-service": "ovn", "osdp-service-cert-key": "default", "hostname": host});
        docs.push(secret_doc(&name, labels, &data));
        let delivered =
            vec![("tls.crt".to_string(), format!("crt-{n}")), ("tls.key".to_string(), format!("key-{n}"))];
        hashes.insert(name, json!(secret_hash(&delivered)));
        packed.push((format!("{host}.ctlplane.example.com-tls.crt"), crt(n)));
        packed.push((format!("{host}.ctlplane.example.com-tls.key"), format!("key-{n}")));
        packed.push((format!("{host}.ctlplane.example.com-ca.crt"), "ca".to_string()));
    }
    let delivered: Vec<(String, String)> =
        packed.iter().map(|(k, v)| (k.clone(), v.replace("-renewed", ""))).collect();
    hashes.insert("edpm-compute-ovn-default-certs-0".into(), json!(secret_hash(&delivered)));
    docs.push(secret_doc(
        "edpm-compute-ovn-default-certs-0",
        json!({"numberOfSecrets": "1", "secretNumber": "0"}),
        &packed,
    ));
    docs.push(json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneDeployment",
        "metadata": {"name": "certs-ovn", "namespace": "openstack", "creationTimestamp": "2026-11-26T00:00:00Z"},
        "spec": {"nodeSets": ["edpm-compute"], "servicesOverride": ["ovn"]},
        "status": {"secretHashes": hashes, "deployed": true, "nodeSetConditions": {"edpm-compute": [
            {"type": "NodeSetDeploymentReady", "status": "True", "reason": "Ready", "message": "NodeSet Ready",
                "lastTransitionTime": "2026-11-26T00:30:00Z"},
            {"type": "ServiceOvnDeploymentReady", "status": "True", "reason": "Ready", "message": "ready",
                "lastTransitionTime": "2026-11-26T00:30:00Z"}]}}}));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    std::fs::write(dir.join("certs.json"), list.to_string()).unwrap();
}

/// Each node's `SecretsCurrent` (status, message) on a directory source.
fn secrets_by_node(dir: &std::path::Path) -> std::collections::BTreeMap<String, (String, String)> {
    let out = run(
        &["--source", dir.to_str().unwrap(), "status", "show", "--format", "json"],
        &[("EDPM_AGENT_NOW", "2026-11-27T12:00:00Z")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let c = condition(n, "SecretsCurrent");
            (
                n["name"].as_str().unwrap().to_string(),
                (
                    c["status"].as_str().unwrap_or("").to_string(),
                    c["message"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect()
}

/// cert-manager renews one node's certificate: that node is stale, not its NodeSet (every
/// renewal turned every covered node stale, and `status plan` redeployed them all). Per-node
/// certificate Secrets are told by their labels and delivered to their host alone; of the
/// packed Secret, a node's share is its own keys (known once a status object noted them).
#[test]
fn a_certificate_renewed_for_one_node_makes_that_node_stale_not_its_nodeset() {
    let dir = tempfile::tempdir().unwrap();
    // As delivered: the nodes the rotation reached are current, certificates and all, and
    // one status report notes each node's share of the packed Secret.
    certs_scenario(dir.path(), None);
    let before = secrets_by_node(dir.path());
    assert_eq!(before["edpm-compute-4"].0, "True", "{:?}", before["edpm-compute-4"]);
    assert!(!before["edpm-compute-4"].1.contains("edpm-compute-5"), "{:?}", before["edpm-compute-4"]);
    let objects = dir.path().join("objects");
    let out = run(
        &[
            "--source",
            dir.path().to_str().unwrap(),
            "status",
            "report",
            "--status-dir",
            objects.to_str().unwrap(),
        ],
        &[("EDPM_AGENT_NOW", "2026-11-27T12:00:00Z")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // edpm-compute-4's certificate renewed, in its own Secret and in the packed one.
    certs_scenario(dir.path(), Some(4));
    let after = secrets_by_node(dir.path());
    let (status, message) = &after["edpm-compute-4"];
    assert_eq!(status, "False", "{message}");
    assert!(message.contains("cert-ovn-default-edpm-compute-4"), "{message}");
    assert!(message.contains("edpm-compute-ovn-default-certs-0"), "{message}");
    for n in [0, 1, 2, 3, 5, 6] {
        let (status, message) = &after[&format!("edpm-compute-{n}")];
        assert_eq!(status, "True", "edpm-compute-{n}: {message}");
    }
    // The nodes the rotation left out are stale for that alone.
    let (status, message) = &after["edpm-compute-8"];
    assert_eq!(status, "False");
    assert!(!message.contains("cert-ovn"), "{message}");
    assert!(!message.contains("certs-0"), "{message}");
}

/// A pod whose `creationTimestamp` cannot be read does not take attempt number 1: the newest
/// attempt of cell2's nova Job (7 of 7) keeps its number, placed by when its container ended,
/// and its run says why. It used to sort as the oldest and take the lowest number, so the runs
/// read 7, 6.
#[test]
fn a_pod_whose_creation_time_cannot_be_read_keeps_its_attempt_number() {
    let f = Fixture::new();
    f.edit("status/pods.yaml", |docs| {
        let pod = docs
            .iter_mut()
            .find(|d| d["metadata"]["name"] == "nova-edpm-deployment-edpm-compute-cell2-x7k2p")
            .unwrap();
        pod["metadata"]["creationTimestamp"] = json!("garbage");
    });
    let out = f.status(&["explain", "edpm-compute-5"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let runs: Vec<&str> =
        out.stdout.lines().skip_while(|l| !l.starts_with("Runs (")).skip(1).take(2).collect();
    assert_eq!(runs.len(), 2, "{}", out.stdout);
    assert!(runs[0].contains("2026-11-01T10:45:10Z") && runs[0].contains("attempt 6)"), "{runs:?}");
    assert!(runs[1].contains("2026-11-01T11:04:50Z") && runs[1].contains("attempt 7)"), "{runs:?}");
    assert!(
        runs[1].contains(r#"pod nova-edpm-deployment-edpm-compute-cell2-x7k2p: metadata.creationTimestamp "garbage" is not a time; placed by when its container ended"#),
        "{runs:?}"
    );
    assert!(!runs[0].contains("creationTimestamp"), "{runs:?}");
}
