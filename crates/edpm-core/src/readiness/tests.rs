//! The per-node rules, each on a small snapshot written as manifests.

use super::*;
use crate::snapshot;

const NODESET: &str = r#"
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNodeSet
metadata: {name: ns1, namespace: openstack, uid: 11111111-2222-3333-4444-555555555555}
spec:
  preProvisioned: true
  services: [configure-os, ovn, nova]
  nodeTemplate: {ansibleSSHPrivateKeySecret: key}
  nodes:
    c0: {hostName: c0, ansible: {ansibleHost: 192.0.2.10}}
    c1: {hostName: c1, ansible: {ansibleHost: 192.0.2.11}}
    c2: {hostName: c2.example.com, ansible: {ansibleHost: 192.0.2.12}}
status:
  configHash: h1
"#;

fn t(s: &str) -> Time {
    Time::parse(s).unwrap()
}

/// A Deployment over `ns1` with the given per-service conditions (`svc=True|Requested|Backoff|Error`).
fn deployment(
    name: &str,
    created: &str,
    services: &[(&str, &str)],
    extra_spec: &str,
    summaries: &str,
) -> String {
    let mut conds = String::new();
    let mut node_set = ("True", "Ready", "", "Deployment completed".to_string());
    for (svc, state) in services {
        let ty = crate::condition::types::service_deployment(svc);
        let (status, reason, sev, msg) = match *state {
            "True" => ("True", "Ready", "", format!("Deployment ready for {svc} service")),
            "Requested" => {
                ("False", "Requested", "Info", format!("Deployment not yet ready for {svc} service"))
            }
            "Backoff" => (
                "False",
                "BackoffLimitExceeded",
                "Error",
                format!(
                    "Deployment error occurred in {svc} service error backoff limit reached for execution.name {svc}-{name}-ns1"
                ),
            ),
            _ => (
                "False",
                "Error",
                "Error",
                format!("Deployment error occurred in {svc} service error not found"),
            ),
        };
        if status == "False" {
            node_set = (status, reason, sev, msg.clone());
        }
        let sev_line = if sev.is_empty() { String::new() } else { format!(", severity: {sev}") };
        conds.push_str(&format!(
            "      - {{type: {ty}, status: \"{status}\", reason: {reason}{sev_line}, message: \"{msg}\", lastTransitionTime: \"{created}\"}}\n"
        ));
    }
    let sev_line = if node_set.2.is_empty() { String::new() } else { format!(", severity: {}", node_set.2) };
    format!(
        r#"---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneDeployment
metadata: {{name: {name}, namespace: openstack, creationTimestamp: "{created}"}}
spec:
  nodeSets: [ns1]
{extra_spec}
status:
  nodeSetHashes: {{ns1: h1}}
  ansibleExecutionSummaries: {summaries}
  nodeSetConditions:
    ns1:
      - {{type: NodeSetDeploymentReady, status: "{}", reason: {}{sev_line}, message: "{}", lastTransitionTime: "{created}"}}
{conds}"#,
        node_set.0, node_set.1, node_set.3
    )
}

fn evaluate_text(text: &str, now: &str) -> Readiness {
    let snap = snapshot::from_file_text("t.yaml", text, None).unwrap();
    let model = crate::model::resolve(&snap).unwrap();
    evaluate(&snap, &model, &PhaseMap::default(), Options { evidence: true }, t(now))
}

fn node<'a>(r: &'a Readiness, name: &str) -> &'a NodeView {
    r.nodes.iter().find(|n| n.node == name).unwrap()
}

fn cond<'a>(n: &'a NodeView, ty: &str) -> &'a Condition {
    n.conditions.get(ty).unwrap_or_else(|| panic!("{} has no {ty}: {:?}", n.node, n.conditions))
}

const NOW: &str = "2026-11-23T12:00:00Z";

#[test]
fn a_completed_deployment_makes_every_node_ready() {
    let text = format!(
        "{NODESET}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        )
    );
    let r = evaluate_text(&text, NOW);
    for n in ["c0", "c1", "c2"] {
        let n = node(&r, n);
        assert!(cond(n, READY).is_true(), "{:?}", n.conditions);
        assert_eq!(cond(n, INFRASTRUCTURE).message, "1/1 infrastructure services deployed");
        assert_eq!(cond(n, SERVICES).message, "2/2 OpenStack services deployed");
        assert_eq!(cond(n, "ServiceNovaDeploymentReady").message, "Deployment ready for nova service");
        assert_eq!(cond(n, RECONCILING).status, Status::False);
        assert_eq!(cond(n, STALLED).status, Status::False);
    }
    let ns = &r.nodesets[0];
    assert_eq!(ns.conditions.get(READY).unwrap().message, "NodeSet Ready");
    assert_eq!(ns.conditions.get(DEPLOYMENT_READY).unwrap().message, "Deployment completed");
    assert_eq!(ns.counts.summary, "3/3");
    assert_eq!(ns.counts.degraded, 0);
}

#[test]
fn a_failed_job_fails_only_the_hosts_its_summary_names() {
    let summary = r#"{nova-d1-ns1: {totalHosts: 3, failedHosts: 1, unreachableHosts: 1, failurePercent: 67, failedHostList: [c0], unreachableHostList: [c2]}}"#;
    let text = format!(
        "{NODESET}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
            "",
            summary
        )
    );
    let r = evaluate_text(&text, NOW);
    let c0 = node(&r, "c0");
    assert_eq!(
        (cond(c0, SERVICES).reason.as_str(), cond(c0, SERVICES).severity),
        ("HostFailed", Severity::Error)
    );
    assert_eq!(cond(c0, STALLED).status, Status::True, "backoff exhausted: terminal");
    // The summary names host names as Ansible knows them: c2's inventory hostname is c2.
    let c2 = node(&r, "c2");
    assert_eq!(cond(c2, SERVICES).reason, "HostUnreachable");
    let c1 = node(&r, "c1");
    assert_eq!(
        (cond(c1, SERVICES).reason.as_str(), cond(c1, SERVICES).severity),
        ("OtherHostsFailed", Severity::Warning)
    );
    assert!(cond(c1, SERVICES).message.contains("c0"), "{}", cond(c1, SERVICES).message);
    assert_eq!(cond(c1, STALLED).status, Status::False, "not failed itself");
    assert!(cond(c1, INFRASTRUCTURE).is_true(), "phase 0 is unaffected by a phase-1 failure");
    // The NodeSet as a whole failed, as upstream says.
    let ns = &r.nodesets[0];
    let dr = ns.conditions.get(DEPLOYMENT_READY).unwrap();
    assert_eq!((dr.reason.as_str(), dr.severity), ("Error", Severity::Error));
    let svc = ns.conditions.get(NODESET_SERVICES).unwrap();
    assert_eq!((svc.reason.as_str(), svc.severity), ("Error", Severity::Error));
    assert!(svc.message.starts_with("0/3 nodes ready; blocking: c0 (nova: HostFailed)"), "{}", svc.message);
    // Counted as `oc get mcp` counts: c0 failed, c2 unreachable (both Error); c1 only waits.
    assert_eq!((ns.counts.total, ns.counts.ready, ns.counts.degraded), (3, 0, 2), "{:?}", ns.counts);
}

/// A pod of Job `job` (one attempt), created at `created`, whose container ended with the
/// termination message `message` (as its current state, or as its last state).
fn pod(name: &str, job: &str, created: &str, message: &str, last_state: bool) -> String {
    let state = if last_state { "lastState" } else { "state" };
    let message = serde_json::to_string(message).unwrap();
    format!(
        r#"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: openstack, creationTimestamp: "{created}", labels: {{batch.kubernetes.io/job-name: {job}}}}}
status:
  phase: Failed
  containerStatuses:
  - name: {job}
    {state}: {{terminated: {{exitCode: 2, reason: Error, finishedAt: "{created}", message: {message}}}}}
"#
    )
}

const FAILED_ON_C0: &str = r#"{"failedHostList":["c0"],"failedHosts":1,"failurePercent":33,"hostFailures":{"c0":"Deploy nova (edpm_nova/tasks/main.yml:12): non-zero return code (rc 125): Error: cannot pull image"},"rc":2,"status":"failed","totalHosts":3,"truncated":false,"unreachableHostList":[],"unreachableHosts":0}"#;

#[test]
fn the_pods_termination_message_says_why_the_host_failed() {
    // The operator's copy has the host lists only; the newest pod has the reason. An older
    // attempt's pod and a pod of another Job do not count.
    let summary = r#"{nova-d1-ns1: {totalHosts: 3, failedHosts: 1, unreachableHosts: 0, failurePercent: 33, failedHostList: [c0], unreachableHostList: []}}"#;
    let older = FAILED_ON_C0.replace("cannot pull image", "an older attempt");
    let text = format!(
        "{NODESET}{}{}{}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
            "",
            summary
        ),
        pod("nova-d1-ns1-aaaaa", "nova-d1-ns1", "2026-11-01T10:05:00Z", &older, false),
        pod("nova-d1-ns1-bbbbb", "nova-d1-ns1", "2026-11-01T10:09:00Z", FAILED_ON_C0, true),
        pod(
            "ovn-d1-ns1-ccccc",
            "ovn-d1-ns1",
            "2026-11-01T10:10:00Z",
            &FAILED_ON_C0.replace("Deploy nova", "Deploy ovn"),
            false
        ),
    );
    let r = evaluate_text(&text, NOW);
    let c0 = node(&r, "c0");
    let nova = cond(c0, "ServiceNovaDeploymentReady");
    assert_eq!(nova.reason, "HostFailed");
    assert_eq!(
        nova.message,
        "nova failed on this host in job nova-d1-ns1 (Deployment d1): Deploy nova (edpm_nova/tasks/main.yml:12): non-zero return code (rc 125): Error: cannot pull image"
    );
    // The reason reaches the rollups and Ready.
    for ty in [SERVICES, READY] {
        assert!(cond(c0, ty).message.contains("cannot pull image"), "{ty}: {}", cond(c0, ty).message);
    }
    let ev = c0.evidence.get(SERVICES).map(|e| e.join("\n")).unwrap_or_default();
    assert!(ev.contains("Pod nova-d1-ns1-bbbbb termination message"), "{ev}");
    // Others keep their state.
    assert_eq!(cond(node(&r, "c1"), SERVICES).reason, "OtherHostsFailed");

    // No operator copy yet: the newest pod's summary decides, with its reason.
    let text = format!(
        "{NODESET}{}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
            "",
            "{}"
        ),
        pod("nova-d1-ns1-bbbbb", "nova-d1-ns1", "2026-11-01T10:09:00Z", FAILED_ON_C0, false),
    );
    let r = evaluate_text(&text, NOW);
    let nova = cond(node(&r, "c0"), "ServiceNovaDeploymentReady");
    assert_eq!(nova.reason, "HostFailed");
    assert!(nova.message.ends_with("Error: cannot pull image"), "{}", nova.message);
    assert_eq!(cond(node(&r, "c1"), SERVICES).reason, "OtherHostsFailed");
}

#[test]
fn a_failing_attempt_shows_as_retrying_while_the_job_has_attempts_left() {
    let job = |failed: u32, conditions: &str| {
        format!(
            r#"---
apiVersion: batch/v1
kind: Job
metadata: {{name: nova-d1-ns1, namespace: openstack, labels: {{app: openstackansibleee, openstackdataplaneservice: nova, openstackdataplanedeployment: d1, openstackdataplanenodeset: ns1}}}}
spec: {{backoffLimit: 3}}
status: {{active: 1, failed: {failed}, conditions: {conditions}}}
"#
        )
    };
    let base = deployment(
        "d1",
        "2026-11-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "Requested")],
        "",
        "{}",
    );
    let attempt = pod("nova-d1-ns1-aaaaa", "nova-d1-ns1", "2026-11-01T10:05:00Z", FAILED_ON_C0, false);
    let r = evaluate_text(&format!("{NODESET}{base}{}{attempt}", job(1, "[]")), NOW);
    let c0 = node(&r, "c0");
    let nova = cond(c0, "ServiceNovaDeploymentReady");
    assert_eq!((nova.reason.as_str(), nova.severity), ("Retrying", Severity::Warning));
    assert_eq!(
        nova.message,
        "attempt 1 of 4 failed on this host in job nova-d1-ns1 (Deployment d1): Deploy nova (edpm_nova/tasks/main.yml:12): non-zero return code (rc 125): Error: cannot pull image; the Job retries"
    );
    assert!(cond(c0, SERVICES).message.contains("attempt 1 of 4"), "{}", cond(c0, SERVICES).message);
    assert_eq!(cond(c0, STALLED).status, Status::False, "not terminal while the Job retries");
    assert_eq!(
        cond(node(&r, "c1"), "ServiceNovaDeploymentReady").reason,
        "Requested",
        "others are still in progress"
    );
    // Without a failed attempt (or once the Job has ended) there is nothing to retry.
    let r = evaluate_text(&format!("{NODESET}{base}{}{attempt}", job(0, "[]")), NOW);
    assert_eq!(cond(node(&r, "c0"), "ServiceNovaDeploymentReady").reason, "Requested");
    let r = evaluate_text(
        &format!(
            "{NODESET}{base}{}{attempt}",
            job(4, r#"[{type: Failed, status: "True", reason: BackoffLimitExceeded}]"#)
        ),
        NOW,
    );
    assert_eq!(cond(node(&r, "c0"), "ServiceNovaDeploymentReady").reason, "Requested");
}

#[test]
fn without_a_summary_the_whole_job_failed() {
    let text = format!(
        "{NODESET}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
            "",
            "{}"
        )
    );
    let r = evaluate_text(&text, NOW);
    for n in ["c0", "c1", "c2"] {
        let s = cond(node(&r, n), SERVICES);
        assert_eq!((s.reason.as_str(), s.severity), ("BackoffLimitExceeded", Severity::Error));
        assert!(s.message.contains("backoff limit reached"), "upstream's message is kept: {}", s.message);
    }
}

#[test]
fn a_node_outside_an_ansible_limit_keeps_its_earlier_state() {
    let text = format!(
        "{NODESET}{}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        ),
        deployment(
            "d2",
            "2026-11-02T10:00:00Z",
            &[("nova", "Requested")],
            "  ansibleLimit: c1\n  servicesOverride: [nova]",
            "{}"
        ),
    );
    let r = evaluate_text(&text, NOW);
    assert!(cond(node(&r, "c0"), READY).is_true(), "c0 is outside the limit");
    let c1 = node(&r, "c1");
    assert_eq!(cond(c1, "ServiceNovaDeploymentReady").reason, "Requested");
    assert_eq!(cond(c1, RECONCILING).status, Status::True);
    assert!(cond(c1, RECONCILING).message.contains("d2"));
    // The NodeSet follows upstream: its newest Deployment is running.
    let ns = &r.nodesets[0];
    assert_eq!(ns.conditions.get(DEPLOYMENT_READY).unwrap().message, "Deployment in progress");
    assert_eq!(ns.counts.summary, "2/3");
}

#[test]
fn only_the_newest_deployment_counts_and_a_later_success_heals() {
    let text = format!(
        "{NODESET}{}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
            "",
            "{}"
        ),
        deployment(
            "d2",
            "2026-11-02T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        ),
    );
    let r = evaluate_text(&text, NOW);
    for n in ["c0", "c1", "c2"] {
        assert!(cond(node(&r, n), READY).is_true(), "d2 supersedes d1's failure");
    }
    // Created order decides, whatever the file order.
    let swapped = format!(
        "{NODESET}{}{}",
        deployment(
            "d2",
            "2026-11-02T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        ),
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
            "",
            "{}"
        ),
    );
    assert!(cond(node(&evaluate_text(&swapped, NOW), "c0"), READY).is_true());
}

#[test]
fn a_services_override_failure_counts_only_while_it_is_the_newest() {
    let text = format!(
        "{NODESET}{}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        ),
        deployment(
            "d2",
            "2026-11-02T10:00:00Z",
            &[("no-such-svc", "Error")],
            "  servicesOverride: [no-such-svc]",
            "{}"
        ),
    );
    let r = evaluate_text(&text, NOW);
    let c0 = node(&r, "c0");
    let s = cond(c0, SERVICES);
    assert_eq!((s.reason.as_str(), s.severity), ("Error", Severity::Error), "{s:?}");
    assert!(cond(c0, "ServiceNovaDeploymentReady").is_true(), "nova stays deployed");
    let healed = format!(
        "{text}{}",
        deployment("d3", "2026-11-03T10:00:00Z", &[("ovn", "True")], "  servicesOverride: [ovn]", "{}")
    );
    let r = evaluate_text(&healed, NOW);
    assert!(cond(node(&r, "c0"), READY).is_true(), "{:?}", node(&r, "c0").conditions);
}

#[test]
fn services_not_reached_by_a_running_deployment_are_in_progress() {
    let text = format!(
        "{NODESET}{}",
        deployment("d1", "2026-11-01T10:00:00Z", &[("configure-os", "True"), ("ovn", "Requested")], "", "{}")
    );
    let r = evaluate_text(&text, NOW);
    let c0 = node(&r, "c0");
    assert!(cond(c0, INFRASTRUCTURE).is_true());
    assert_eq!(cond(c0, "ServiceNovaDeploymentReady").reason, "Requested", "not reached yet, still coming");
    assert_eq!(cond(c0, SERVICES).severity, Severity::Info);
    assert_eq!(cond(c0, STALLED).status, Status::False);
}

#[test]
fn changed_hashes_are_config_drift_not_ready() {
    let text = format!(
        "{NODESET}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        )
    )
    .replace("configHash: h1", "configHash: h2");
    let r = evaluate_text(&text, NOW);
    let c0 = node(&r, "c0");
    let s = cond(c0, SERVICES);
    assert_eq!((s.reason.as_str(), s.severity), ("ConfigDrift", Severity::Warning));
    assert!(s.message.contains("configHash h2 (deployed h1)"), "{}", s.message);
    assert!(!cond(c0, READY).is_true());
    // upstream goes back to waiting for a Deployment.
    assert_eq!(r.nodesets[0].conditions.get(DEPLOYMENT_READY).unwrap().reason, "Requested");
}

#[test]
fn nothing_deployed_yet_is_not_deployed() {
    let r = evaluate_text(NODESET, NOW);
    let c0 = node(&r, "c0");
    assert_eq!(cond(c0, SERVICES).reason, "NotDeployed");
    assert!(cond(c0, BAREMETAL).is_true(), "pre-provisioned");
    assert_eq!(
        r.nodesets[0].conditions.get(DEPLOYMENT_READY).unwrap().message,
        "NodeSet setup ready, waiting for OpenStackDataPlaneDeployment..."
    );
}

#[test]
fn bare_metal_from_the_baremetal_set() {
    let text = NODESET.replace("preProvisioned: true", "preProvisioned: false")
        + r#"---
apiVersion: baremetal.openstack.org/v1beta1
kind: OpenStackBaremetalSet
metadata: {name: ns1, namespace: openstack}
status:
  baremetalHosts:
    c0: {hostname: c0, bmhRef: bmh-0, provisioningState: provisioned}
    c1: {hostname: c1, bmhRef: bmh-1, provisioningState: provisioning}
"#;
    let r = evaluate_text(&text, NOW);
    assert!(cond(node(&r, "c0"), BAREMETAL).is_true());
    let c1 = cond(node(&r, "c1"), BAREMETAL);
    assert_eq!(
        (c1.reason.as_str(), c1.message.as_str()),
        ("Provisioning", "BareMetalHost bmh-1 is provisioning")
    );
    let c2 = cond(node(&r, "c2"), BAREMETAL);
    assert!(c2.message.contains("has no host for c2.example.com"), "{}", c2.message);
    assert_eq!(r.nodesets[0].conditions.get(NODESET_BAREMETAL).unwrap().status, Status::False);
}

#[test]
fn transition_times_carry_over_from_the_last_report() {
    let text = format!(
        "{NODESET}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        )
    );
    let first = evaluate_text(&text, "2026-11-23T12:00:00Z");
    let c0 = node(&first, "c0");
    // The evidence dates what it can (the Deployment's conditions, here all of 10:00); the
    // rest gets the clock, as lib-common stamps, and is named untimed so no view says "now".
    assert_eq!(cond(c0, INFRASTRUCTURE).last_transition_time, t("2026-11-01T10:00:00Z"));
    assert!(!c0.untimed.contains(INFRASTRUCTURE), "{:?}", c0.untimed);
    assert!(c0.untimed.contains(BAREMETAL), "{:?}", c0.untimed);
    // Idle since the last Deployment on it finished, and not stalled since then either (what
    // would have ended a stall).
    assert_eq!(cond(c0, RECONCILING).last_transition_time, t("2026-11-01T10:00:00Z"));
    assert_eq!(cond(c0, STALLED).last_transition_time, t("2026-11-01T10:00:00Z"));
    assert!(!c0.untimed.contains(RECONCILING) && !c0.untimed.contains(STALLED), "{:?}", c0.untimed);
    // The report as written, read back an hour later: nothing changed, nothing moves.
    let report = format!(
        "---\napiVersion: agent.edpm.openstack.org/v1alpha1\nkind: EDPMNodeStatus\nmetadata: {{name: {}, namespace: openstack}}\nspec: {{nodeSet: ns1, node: c0}}\nstatus:\n  conditions: {}\n",
        c0.object,
        serde_json::to_string(&c0.conditions).unwrap()
    );
    let second = evaluate_text(&format!("{text}{report}"), "2026-11-23T13:00:00Z");
    assert_eq!(node(&second, "c0").conditions, c0.conditions);
    // Read back, every time is one a report observed: none is the clock's any more.
    assert!(node(&second, "c0").untimed.is_empty(), "{:?}", node(&second, "c0").untimed);
    // A change moves exactly the conditions that changed.
    let drifted = text.replace("configHash: h1", "configHash: h2");
    let third = evaluate_text(&format!("{drifted}{report}"), "2026-11-23T14:00:00Z");
    let n = node(&third, "c0");
    assert_eq!(cond(n, SERVICES).last_transition_time, t("2026-11-23T14:00:00Z"));
    assert_eq!(cond(n, BAREMETAL).last_transition_time, t("2026-11-23T12:00:00Z"));
}

#[test]
fn the_agents_conditions_turn_unknown_when_its_lease_expires() {
    let text = format!(
        "{NODESET}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
            "",
            "{}"
        )
    );
    let report = r#"---
apiVersion: agent.edpm.openstack.org/v1alpha1
kind: EDPMNodeStatus
metadata: {name: ns1-c0, namespace: openstack}
spec: {nodeSet: ns1, node: c0}
status:
  conditions:
    - {type: NodeAgentReady, status: "True", reason: Ready, message: agent running, lastTransitionTime: "2026-11-23T10:00:00Z"}
    - {type: ServiceNovaRuntimeReady, status: "True", reason: Ready, message: units active, lastTransitionTime: "2026-11-23T10:00:00Z"}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: ns1-c0, namespace: openstack, labels: {agent.edpm.openstack.org/node: c0}}
spec: {holderIdentity: c0, leaseDurationSeconds: 40, renewTime: "2026-11-23T11:59:50.000000Z"}
"#;
    let alive = evaluate_text(&format!("{text}{report}"), "2026-11-23T12:00:00Z");
    let c0 = node(&alive, "c0");
    assert!(cond(c0, NODE_AGENT).is_true() && cond(c0, READY).is_true());
    let dead = evaluate_text(&format!("{text}{report}"), "2026-11-23T12:05:00Z");
    let c0 = node(&dead, "c0");
    for ty in [NODE_AGENT, "ServiceNovaRuntimeReady"] {
        assert_eq!(
            (cond(c0, ty).status, cond(c0, ty).reason.as_str()),
            (Status::Unknown, "AgentHeartbeatExpired")
        );
    }
    assert_eq!(cond(c0, READY).status, Status::Unknown, "Ready mirrors the agent's Unknown");
    // A failing runtime check the agent reports blocks Ready even when deployed.
    let failing = report.replace("{type: ServiceNovaRuntimeReady, status: \"True\", reason: Ready, message: units active", "{type: ServiceNovaRuntimeReady, status: \"False\", severity: Error, reason: UnitInactive, message: edpm_nova_compute.service is failed");
    let r = evaluate_text(&format!("{text}{failing}"), "2026-11-23T12:00:00Z");
    assert_eq!(cond(node(&r, "c0"), READY).reason, "UnitInactive");
}

#[test]
fn the_phase_map_moves_services_between_phases() {
    let text = format!(
        "{NODESET}{}",
        deployment("d1", "2026-11-01T10:00:00Z", &[("configure-os", "True"), ("ovn", "Backoff")], "", "{}")
    );
    let snap = snapshot::from_file_text("t.yaml", &text, None).unwrap();
    let model = crate::model::resolve(&snap).unwrap();
    let mut phases = PhaseMap::default();
    let r = evaluate(&snap, &model, &phases, Options::default(), t(NOW));
    assert!(cond(node(&r, "c0"), INFRASTRUCTURE).is_true());
    phases.overrides.insert("ovn".into(), Phase::Infrastructure);
    let r = evaluate(&snap, &model, &phases, Options::default(), t(NOW));
    assert_eq!(cond(node(&r, "c0"), INFRASTRUCTURE).severity, Severity::Error, "ovn is phase 0 now");
}

#[test]
fn global_services_are_read_from_the_nodeset_that_ran_them() {
    // ssh-known-hosts runs once, on the first NodeSet of a Deployment.
    let two = NODESET.replace("services: [configure-os, ovn, nova]", "services: [ssh-known-hosts, nova]")
        + "---"
        + &NODESET
            .replace("name: ns1", "name: ns2")
            .replace("c0:", "d0:")
            .replace("c1:", "d1:")
            .replace("c2:", "d2:")
            .replace("hostName: c0", "hostName: d0")
            .replace("hostName: c1", "hostName: d1")
            .replace("hostName: c2.example.com", "hostName: d2")
            .replace("192.0.2.1", "192.0.2.2")
            .replace("services: [configure-os, ovn, nova]", "services: [ssh-known-hosts, nova]")
        + r#"---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneDeployment
metadata: {name: d, namespace: openstack, creationTimestamp: "2026-11-01T10:00:00Z"}
spec: {nodeSets: [ns1, ns2]}
status:
  nodeSetConditions:
    ns1:
      - {type: NodeSetDeploymentReady, status: "True", reason: Ready, message: Deployment completed}
      - {type: ServiceSshKnownHostsDeploymentReady, status: "True", reason: Ready, message: Deployment ready for ssh-known-hosts service}
      - {type: ServiceNovaDeploymentReady, status: "True", reason: Ready, message: Deployment ready for nova service}
    ns2:
      - {type: NodeSetDeploymentReady, status: "True", reason: Ready, message: Deployment completed}
      - {type: ServiceNovaDeploymentReady, status: "True", reason: Ready, message: Deployment ready for nova service}
"#;
    let r = evaluate_text(&two, NOW);
    let d0 = node(&r, "d0");
    assert!(cond(d0, "ServiceSshKnownHostsDeploymentReady").is_true(), "{:?}", d0.conditions);
    assert!(cond(d0, READY).is_true());
}

#[test]
fn evaluation_never_reads_the_clock() {
    // The same input and the same `now` give the same output: nothing else leaks in.
    let text = format!(
        "{NODESET}{}",
        deployment("d1", "2026-11-01T10:00:00Z", &[("configure-os", "True")], "", "{}")
    );
    let a = evaluate_text(&text, NOW);
    let b = evaluate_text(&text, NOW);
    assert_eq!(
        a.nodes.iter().map(|n| &n.conditions).collect::<Vec<_>>(),
        b.nodes.iter().map(|n| &n.conditions).collect::<Vec<_>>()
    );
}

#[test]
fn transitions_are_told_for_objects_that_existed_and_only_when_they_move() {
    let summary = r#"{nova-d1-ns1: {totalHosts: 3, failedHosts: 1, unreachableHosts: 0, failurePercent: 33, failedHostList: [c0], unreachableHostList: []}}"#;
    let report = |node: &str, ready: &str, reason: &str| {
        format!(
            r#"---
apiVersion: agent.edpm.openstack.org/v1alpha1
kind: EDPMNodeStatus
metadata: {{name: ns1-{node}, namespace: openstack, uid: uid-{node}}}
spec: {{nodeSet: ns1, node: {node}}}
status:
  conditions:
  - {{type: Ready, status: "{ready}", reason: {reason}, message: m, lastTransitionTime: "2026-11-01T09:00:00Z"}}
  - {{type: ServicesReady, status: "{ready}", reason: {reason}, message: m, lastTransitionTime: "2026-11-01T09:00:00Z"}}
"#
        )
    };
    let text = format!(
        "{NODESET}{}{}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
            "",
            summary
        ),
        report("c0", "True", "Ready"),
        report("c1", "False", "OtherHostsFailed"),
    );
    let snap = snapshot::from_file_text("t.yaml", &text, None).unwrap();
    let model = crate::model::resolve(&snap).unwrap();
    let r = evaluate(&snap, &model, &PhaseMap::default(), Options { evidence: false }, t(NOW));
    let (told, dropped) = report::transitions(&r, &snap.evidence, 10);
    // c0 moved (True → HostFailed) on Ready and ServicesReady; c1 did not move; c2 had no
    // object yet, so nothing is told of it.
    let summary: Vec<(String, String, String, bool)> =
        told.iter().map(|t| (t.object.clone(), t.type_.clone(), t.to.clone(), t.warning)).collect();
    assert_eq!(
        summary,
        vec![
            ("ns1-c0".into(), READY.into(), "False HostFailed".into(), true),
            ("ns1-c0".into(), SERVICES.into(), "False HostFailed".into(), true),
        ]
    );
    assert_eq!(told[0].from, "True Ready");
    assert_eq!(told[0].uid.as_deref(), Some("uid-c0"));
    assert_eq!(dropped, 0);
    let (told, dropped) = report::transitions(&r, &snap.evidence, 1);
    assert_eq!((told.len(), dropped), (1, 1), "rate-limited, the rest counted");
}

/// Attempts are numbered by their place among every ended pod of the Job (one killed without
/// a summary counts), and a pod the Job has not counted yet is recorded only once it has: a
/// recorded attempt is never renumbered, so a guess would stay wrong.
#[test]
fn attempts_are_numbered_by_the_jobs_count_of_ended_pods() {
    let job = |failed: u32| {
        format!(
            r#"---
apiVersion: batch/v1
kind: Job
metadata: {{name: nova-d1-ns1, namespace: openstack, labels: {{app: openstackansibleee, openstackdataplaneservice: nova, openstackdataplanedeployment: d1, openstackdataplanenodeset: ns1}}}}
spec: {{backoffLimit: 3}}
status: {{failed: {failed}}}
"#
        )
    };
    let d1 = deployment(
        "d1",
        "2026-11-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "Requested")],
        "",
        "{}",
    );
    let oom = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: nova-d1-ns1-oom, namespace: openstack, creationTimestamp: \"2026-11-01T10:07:00Z\", labels: {batch.kubernetes.io/job-name: nova-d1-ns1}}\nstatus: {phase: Failed, containerStatuses: [{name: x, state: {terminated: {exitCode: 137, reason: OOMKilled}}}]}\n";
    let attempts = |text: &str| -> Vec<u32> {
        node(&evaluate_text(text, NOW), "c0").runs.iter().map(|r| r.attempt).collect()
    };
    // The first attempt, then one killed without a summary, then the newest: 1, (2), 3.
    let third = pod("nova-d1-ns1-ccccc", "nova-d1-ns1", "2026-11-01T10:09:00Z", FAILED_ON_C0, false);
    let first = pod("nova-d1-ns1-aaaaa", "nova-d1-ns1", "2026-11-01T10:05:00Z", FAILED_ON_C0, false);
    assert_eq!(attempts(&format!("{NODESET}{d1}{}{first}{oom}{third}", job(3))), vec![1, 3]);
    // Read before the Job counted the newest: only what it counted is recorded.
    assert_eq!(attempts(&format!("{NODESET}{d1}{}{first}{oom}{third}", job(2))), vec![1]);
}

/// A pod whose `creationTimestamp` cannot be read is not taken for the first attempt: it is
/// placed by when its container ended, and named; one of which no time at all can be read is
/// attempt 0 ("cannot be told"), the others keeping their numbers. (It took attempt 1, and
/// the runs read 1, 3, 2.)
#[test]
fn a_pod_whose_creation_time_cannot_be_read_keeps_its_place() {
    let job = |failed: u32| {
        format!(
            "---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: nova-d1-ns1, namespace: openstack, labels: {{app: openstackansibleee, openstackdataplaneservice: nova, openstackdataplanedeployment: d1, openstackdataplanenodeset: ns1}}}}\nspec: {{backoffLimit: 5}}\nstatus: {{failed: {failed}}}\n"
        )
    };
    let d1 = deployment(
        "d1",
        "2026-11-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "Requested")],
        "",
        "{}",
    );
    let runs = |text: &str| -> Vec<(u32, Option<String>)> {
        node(&evaluate_text(text, NOW), "c0").runs.iter().map(|r| (r.attempt, r.note.clone())).collect()
    };
    let first = pod("nova-d1-ns1-aaaaa", "nova-d1-ns1", "2026-11-01T10:05:00Z", FAILED_ON_C0, false);
    let second = pod("nova-d1-ns1-bbbbb", "nova-d1-ns1", "2026-11-01T10:07:00Z", FAILED_ON_C0, false)
        .replace("creationTimestamp: \"2026-11-01T10:07:00Z\"", "creationTimestamp: \"last tuesday\"");
    let third = pod("nova-d1-ns1-ccccc", "nova-d1-ns1", "2026-11-01T10:09:00Z", FAILED_ON_C0, false);
    let got = runs(&format!("{NODESET}{d1}{}{first}{second}{third}", job(3)));
    let placed = "pod nova-d1-ns1-bbbbb: metadata.creationTimestamp \"last tuesday\" is not a time; placed by when its container ended";
    assert_eq!(got, vec![(1, None), (2, Some(placed.to_string())), (3, None)]);
    // No time at all: not numbered (0), named; the others are numbered down from the Job's
    // count, as when an older pod is gone (the unplaced one is taken for older than them).
    let timeless = second.replace("finishedAt: \"2026-11-01T10:07:00Z\", ", "");
    let got = runs(&format!("{NODESET}{d1}{}{first}{timeless}{third}", job(3)));
    assert_eq!(got.iter().map(|(a, _)| *a).collect::<Vec<_>>(), vec![2, 3, 0], "{got:?}");
    assert!(got[2].1.as_deref().unwrap().ends_with("which attempt it was cannot be told"), "{got:?}");
}

#[test]
#[allow(clippy::too_many_lines, reason = "a scenario told step by step")]
fn a_nodes_run_history_comes_from_the_pods_and_outlives_them() {
    let job = r#"---
apiVersion: batch/v1
kind: Job
metadata: {name: nova-d1-ns1, namespace: openstack, labels: {app: openstackansibleee, openstackdataplaneservice: nova, openstackdataplanedeployment: d1, openstackdataplanenodeset: ns1}}
spec: {backoffLimit: 3}
status: {failed: 1, succeeded: 1}
"#;
    let ok = FAILED_ON_C0
        .replace(r#""failedHostList":["c0"],"failedHosts":1"#, r#""failedHostList":[],"failedHosts":0"#);
    let ok = ok.replace(r#""hostFailures":{"c0":"Deploy nova (edpm_nova/tasks/main.yml:12): non-zero return code (rc 125): Error: cannot pull image"},"#, "");
    let text = format!(
        "{NODESET}{}{job}{}{}",
        deployment(
            "d1",
            "2026-11-01T10:00:00Z",
            &[("configure-os", "True"), ("ovn", "True"), ("nova", "Requested")],
            "",
            "{}"
        ),
        pod("nova-d1-ns1-aaaaa", "nova-d1-ns1", "2026-11-01T10:05:00Z", FAILED_ON_C0, false),
        pod("nova-d1-ns1-bbbbb", "nova-d1-ns1", "2026-11-01T10:09:00Z", &ok, false),
    );
    let r = evaluate_text(&text, NOW);
    let runs = |n: &str| -> Vec<(u32, String, Option<String>)> {
        node(&r, n).runs.iter().map(|x| (x.attempt, x.result.clone(), x.failed_task.clone())).collect()
    };
    let pull =
        "Deploy nova (edpm_nova/tasks/main.yml:12): non-zero return code (rc 125): Error: cannot pull image";
    assert_eq!(runs("c0"), vec![(1, "failed".into(), Some(pull.into())), (2, "ok".into(), None)]);
    assert_eq!(
        runs("c1"),
        vec![(1, "ok".into(), None), (2, "ok".into(), None)],
        "covered by d1, not named: ok"
    );
    let first = &node(&r, "c0").runs[0];
    assert_eq!(
        (first.deployment.as_str(), first.service.as_str(), first.job.as_str()),
        ("d1", "nova", "nova-d1-ns1")
    );
    assert_eq!(first.finished.as_deref(), Some("2026-11-01T10:05:00Z"));
    let explained = show::explain(node(&r, "c0"));
    assert!(
        explained.contains("Runs (2, oldest first):\n    - 2026-11-01T10:05:00Z Deployment d1 nova (job nova-d1-ns1, attempt 1): failed: [1]"),
        "{explained}"
    );
    // The failed task's message, in the conditions, the evidence and the runs, is said once.
    assert_eq!(explained.matches(pull).count(), 1, "{explained}");
    assert!(
        explained.contains(&format!("Messages (named below by number):\n    [1] {pull}\n")),
        "{explained}"
    );

    // The Deployment, its Job and pods deleted: the history stays, from the node's object.
    let written =
        report::plan(&r, &snapshot::from_file_text("t.yaml", &text, None).unwrap().evidence, "openstack");
    let object = written.iter().find(|w| w.name == "ns1-c0").unwrap().object.clone();
    let object = serde_json::to_string(&object).unwrap();
    let later = format!("{NODESET}---\n{object}\n");
    let r2 = evaluate_text(&later, NOW);
    assert_eq!(node(&r2, "c0").runs, node(&r, "c0").runs);

    // Bounded: the newest 20 of more.
    let many: Vec<crate::snapshot::evidence::NodeRun> = (0..30)
        .map(|i| crate::snapshot::evidence::NodeRun {
            deployment: "d".into(),
            service: "s".into(),
            job: "j".into(),
            attempt: i + 1,
            result: "ok".into(),
            finished: Some(format!("2026-11-01T10:{i:02}:00Z")),
            failed_task: None,
            pod: Some(format!("j-{i}")),
            note: None,
        })
        .collect();
    let kept = history::merge(&many[..25], many[25..].to_vec());
    assert_eq!(kept.len(), api::RUN_HISTORY);
    assert_eq!((kept[0].attempt, kept[19].attempt), (11, 30));
}

/// The Nova check: a member of ServicesReady for the nodes that run nova, from a saved answer
/// (the openstack client's JSON, read from a file of its own), with host names in either form.
#[test]
fn nova_says_whether_each_compute_really_serves() {
    let done = deployment(
        "d1",
        "2026-11-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
        "",
        "{}",
    );
    let mut snap = snapshot::from_file_text("t.yaml", &format!("{NODESET}{done}"), None).unwrap();
    // c0 up with its hypervisor (Nova has the FQDN, the node the short name); c1 down;
    // c2 up but not yet discovered.
    let services = r#"[
      {"ID": "s0", "Binary": "nova-compute", "Host": "C0.example.com", "Status": "enabled", "State": "up"},
      {"ID": "s1", "Binary": "nova-compute", "Host": "c1", "Status": "enabled", "State": "down", "Updated At": "2026-11-23T11:00:00.000000"},
      {"ID": "s2", "Binary": "nova-compute", "Host": "c2.example.com", "Status": "enabled", "State": "up"}]"#;
    let hypervisors = r#"{"hypervisors": [{"id": "h0", "hypervisor_hostname": "c0.example.com",
      "state": "up", "status": "enabled", "service": {"id": "s0", "host": "C0.example.com"}}]}"#;
    for (name, text) in [("services.json", services), ("hypervisors.json", hypervisors)] {
        snap.merge(snapshot::from_file_text(name, text, None).unwrap()).unwrap();
    }
    assert!(snap.not_manifests.is_empty(), "saved answers are evidence: {:?}", snap.not_manifests);
    let model = crate::model::resolve(&snap).unwrap();
    let r = evaluate(&snap, &model, &PhaseMap::default(), Options { evidence: true }, t(NOW));
    let nova = crate::condition::types::NOVA_COMPUTE;
    let c0 = node(&r, "c0");
    assert_eq!(
        cond(c0, nova).message,
        "nova-compute c0.example.com (matched by short name; expected c0) is up and enabled; hypervisor c0.example.com"
    );
    assert!(cond(c0, READY).is_true(), "{:?}", c0.conditions);
    assert_eq!(cond(c0, SERVICES).message, "2/2 OpenStack services deployed; nova-compute serving (Nova)");
    let c1 = node(&r, "c1");
    assert_eq!(
        (cond(c1, nova).reason.as_str(), cond(c1, SERVICES).reason.as_str()),
        ("ComputeServiceDown", "ComputeServiceDown")
    );
    assert!(cond(c1, SERVICES).message.starts_with("2/2 OpenStack services deployed; nova-compute: "));
    assert_eq!(cond(c1, READY).severity, Severity::Warning);
    let c2 = node(&r, "c2");
    assert_eq!(cond(c2, nova).reason, "HypervisorMissing");
    assert!(c2.evidence[nova].iter().any(|l| l == "hypervisor: none for this host"), "{:?}", c2.evidence);
    assert_eq!(r.nodesets[0].counts.summary, "1/3");

    // Without any Nova evidence nothing is claimed.
    let plain = evaluate_text(&format!("{NODESET}{done}"), NOW);
    assert!(node(&plain, "c1").conditions.get(nova).is_none());
    assert!(cond(node(&plain, "c1"), READY).is_true());
}

#[test]
fn a_node_not_running_nova_or_not_yet_deployed_is_not_judged_by_nova() {
    let partial = deployment(
        "d1",
        "2026-11-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "Requested")],
        "",
        "{}",
    );
    let mut snap = snapshot::from_file_text("t.yaml", &format!("{NODESET}{partial}"), None).unwrap();
    let services = r#"{"services": [{"binary": "nova-compute", "host": "elsewhere", "state": "up", "status": "enabled"}]}"#;
    snap.merge(snapshot::from_file_text("s.json", services, None).unwrap()).unwrap();
    let model = crate::model::resolve(&snap).unwrap();
    let r = evaluate(&snap, &model, &PhaseMap::default(), Options { evidence: true }, t(NOW));
    let c = cond(node(&r, "c0"), crate::condition::types::NOVA_COMPUTE);
    assert_eq!((c.reason.as_str(), c.severity), ("Requested", Severity::Info));
    assert_eq!(c.message, "waiting for the nova service to succeed on this node");
    // A NodeSet without nova gets no Nova condition.
    let no_nova = NODESET.replace("services: [configure-os, ovn, nova]", "services: [configure-os, ovn]");
    let mut snap = snapshot::from_file_text("t.yaml", &no_nova, None).unwrap();
    snap.merge(snapshot::from_file_text("s.json", services, None).unwrap()).unwrap();
    let model = crate::model::resolve(&snap).unwrap();
    let r = evaluate(&snap, &model, &PhaseMap::default(), Options::default(), t(NOW));
    assert!(node(&r, "c0").conditions.get(crate::condition::types::NOVA_COMPUTE).is_none());
}

#[test]
fn a_large_data_plane_is_the_same_however_the_caller_spreads_it() {
    // 30 NodeSets × 70 nodes: over the threshold where the groups go through `spread`.
    let mut text = String::new();
    for s in 0..30 {
        let nodes: String = (0..70)
            .map(|n| format!("    n{s}-{n}: {{hostName: n{s}-{n}, ansible: {{ansibleHost: 192.0.2.{n}}}}}\n"))
            .collect();
        text.push_str(&format!(
            "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata: {{name: ns{s}, namespace: openstack}}\nspec:\n  preProvisioned: true\n  services: [configure-os]\n  nodeTemplate: {{ansibleSSHPrivateKeySecret: key}}\n  nodes:\n{nodes}"
        ));
    }
    let snap = snapshot::from_file_text("big.yaml", &text, None).unwrap();
    let model = crate::model::resolve(&snap).unwrap();
    let now = t("2026-01-01T00:00:00Z");
    let phases = PhaseMap::default();
    let spread_calls = std::cell::Cell::new(0);
    // Runs the groups last to first, then puts the results back in order: as a thread pool may.
    let reversed = |n: usize, work: &(dyn Fn(usize) -> GroupReadiness + Sync)| {
        spread_calls.set(spread_calls.get() + 1);
        let mut out: Vec<(usize, GroupReadiness)> = (0..n).rev().map(|i| (i, work(i))).collect();
        out.sort_by_key(|(i, _)| *i);
        out.into_iter().map(|(_, r)| r).collect()
    };
    let one_by_one = evaluate(&snap, &model, &phases, Options::default(), now);
    let spread = evaluate_spread(&snap, &model, &phases, Options::default(), now, &reversed);
    assert_eq!(spread_calls.get(), 1, "2,100 nodes go through the caller's spread");
    assert_eq!(one_by_one.nodes.len(), 2_100);
    assert_eq!(format!("{one_by_one:?}"), format!("{spread:?}"));
}

/// The nova Job of d1, ended: failed for good.
const NOVA_JOB_FAILED: &str = r#"---
apiVersion: batch/v1
kind: Job
metadata: {name: nova-d1-ns1, namespace: openstack, labels: {app: openstackansibleee, openstackdataplaneservice: nova, openstackdataplanedeployment: d1, openstackdataplanenodeset: ns1}}
spec: {backoffLimit: 0}
status: {failed: 1, conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded}]}
"#;

/// Installed at 18.0.3, the `ovn` step of the update to 18.0.4 done, then d1 failed at nova
/// (on c0), recording no version (upstream records one only on completion); its Job's pod
/// says which hosts its playbook ran to the end for (`completed`: a JSON list, or nothing:
/// upstream's runner).
fn partly_failed(completed: Option<&str>, job: &str, more: &str) -> String {
    let install = deployment(
        "d-install",
        "2026-09-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
        "",
        "{}",
    )
    .replace("status:\n  nodeSetHashes", "status:\n  deployedVersion: \"18.0.3\"\n  nodeSetHashes");
    let ovn =
        deployment("d-ovn", "2026-10-01T10:00:00Z", &[("ovn", "True")], "  servicesOverride: [ovn]", "{}")
            .replace("status:\n  nodeSetHashes", "status:\n  deployedVersion: \"18.0.4\"\n  nodeSetHashes");
    partly_failed_after(&format!("{install}{ovn}"), completed, job, more)
}

fn partly_failed_after(earlier: &str, completed: Option<&str>, job: &str, more: &str) -> String {
    let message = match completed {
        Some(list) => FAILED_ON_C0.replacen('{', &format!("{{\"completedHostList\":{list},"), 1),
        None => FAILED_ON_C0.to_string(),
    };
    let d1 = deployment(
        "d1",
        "2026-11-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
        "",
        "{}",
    );
    format!(
        "{NODESET}---\napiVersion: core.openstack.org/v1beta1\nkind: OpenStackVersion\nmetadata: {{name: openstack, namespace: openstack}}\nspec: {{targetVersion: 18.0.4}}\n{earlier}{d1}{job}{}{more}",
        pod("nova-d1-ns1-aaaaa", "nova-d1-ns1", "2026-11-01T10:05:00Z", &message, false)
    )
}

#[test]
fn a_partly_failed_run_credits_exactly_the_hosts_it_completed() {
    let r = evaluate_text(&partly_failed(Some(r#"["c1"]"#), NOVA_JOB_FAILED, ""), NOW);
    let c1 = node(&r, "c1");
    let nova = cond(c1, "ServiceNovaDeploymentReady");
    assert!(nova.is_true(), "{nova:?}");
    assert!(nova.message.contains("ran its playbook to the end here"), "{}", nova.message);
    assert!(cond(c1, READY).is_true(), "{:?}", c1.conditions);
    assert!(cond(c1, "VersionCurrent").is_true(), "{:?}", cond(c1, "VersionCurrent"));
    // c0 failed; c2, stopped early, is not listed: neither is credited.
    assert_eq!(cond(node(&r, "c0"), "ServiceNovaDeploymentReady").reason, "HostFailed");
    let c2 = node(&r, "c2");
    assert_eq!(cond(c2, "ServiceNovaDeploymentReady").reason, "OtherHostsFailed");
    assert!(!cond(c2, "VersionCurrent").is_true());
    assert!(!cond(c2, READY).is_true());
    assert_eq!(cond(c2, "VersionCurrent").status, Status::False, "still at 18.0.3");
    // Nothing completed at 18.0.4 before d1 was created: the version d1 deployed is unknown,
    // and no version is credited (the service still is).
    let install = deployment(
        "d-install",
        "2026-09-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
        "",
        "{}",
    )
    .replace("status:\n  nodeSetHashes", "status:\n  deployedVersion: \"18.0.3\"\n  nodeSetHashes");
    let r = evaluate_text(&partly_failed_after(&install, Some(r#"["c1"]"#), NOVA_JOB_FAILED, ""), NOW);
    let c1 = node(&r, "c1");
    assert!(cond(c1, "ServiceNovaDeploymentReady").is_true());
    assert_eq!(cond(c1, "VersionCurrent").status, Status::False, "{:?}", cond(c1, "VersionCurrent"));
}

#[test]
fn without_exact_evidence_a_failed_run_credits_nobody() {
    let check = |text: String, why: &str| {
        let r = evaluate_text(&text, NOW);
        for n in ["c1", "c2"] {
            let n = node(&r, n);
            assert_eq!(cond(n, "ServiceNovaDeploymentReady").reason, "OtherHostsFailed", "{why}");
            assert!(!cond(n, "VersionCurrent").is_true(), "{why}");
        }
    };
    check(partly_failed(None, NOVA_JOB_FAILED, ""), "upstream's runner says nothing of completed hosts");
    check(partly_failed(Some("[]"), NOVA_JOB_FAILED, ""), "an empty list");
    // The Job has not ended (no Failed condition): another attempt may run the hosts again.
    let running = NOVA_JOB_FAILED.replace(
        r#"conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded}]"#,
        "conditions: []",
    );
    check(partly_failed(Some(r#"["c1"]"#), &running, ""), "a Job still going");
    // A newer attempt ended without a message (an OOM kill): its word is unknown.
    let oom = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: nova-d1-ns1-bbbbb, namespace: openstack, creationTimestamp: \"2026-11-01T10:09:00Z\", labels: {batch.kubernetes.io/job-name: nova-d1-ns1}}\nstatus:\n  phase: Failed\n  containerStatuses:\n  - name: nova-d1-ns1\n    state: {terminated: {exitCode: 137, reason: OOMKilled, finishedAt: \"2026-11-01T10:10:00Z\"}}\n";
    check(partly_failed(Some(r#"["c1"]"#), NOVA_JOB_FAILED, oom), "a newer attempt without a message");
}

/// d1 of [`partly_failed`] delivering Secret `nova-cfg` (the nova service's dataSource), last
/// changed at `changed` (`None`: no `managedFields`, so nobody can tell when); the Services
/// and the NodeSet last changed long before; the install recorded an older `nova-cfg`.
fn failed_rotation(completed: Option<&str>, changed: Option<&str>) -> String {
    let managed =
        |t: &str| format!("managedFields: [{{manager: kubectl, operation: Update, time: \"{t}\"}}]");
    let old = managed("2026-08-01T00:00:00Z");
    let services: String = ["configure-os", "ovn", "nova"]
        .iter()
        .map(|s| {
            let sources = if *s == "nova" { "dataSources: [{secretRef: {name: nova-cfg}}]" } else { "" };
            format!(
                "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneService\nmetadata: {{name: {s}, namespace: openstack, {old}}}\nspec: {{edpmServiceType: {s}, {sources}}}\n"
            )
        })
        .collect();
    let secret_meta = changed.map(|t| format!(", {}", managed(t))).unwrap_or_default();
    let secret = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: nova-cfg, namespace: openstack, creationTimestamp: \"2026-08-01T00:00:00Z\"{secret_meta}}}\nstringData: {{nova.conf: NEWPASS}}\n"
    );
    let install = deployment(
        "d-install",
        "2026-09-01T10:00:00Z",
        &[("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
        "",
        "{}",
    )
    .replace(
        "status:\n  nodeSetHashes",
        "status:\n  deployedVersion: \"18.0.4\"\n  secretHashes: {nova-cfg: old}\n  nodeSetHashes",
    );
    partly_failed_after(&install, completed, NOVA_JOB_FAILED, &format!("{services}{secret}")).replacen(
        "uid: 11111111-2222-3333-4444-555555555555}",
        &format!("uid: 11111111-2222-3333-4444-555555555555, {old}}}"),
        1,
    )
}

#[test]
fn a_partly_failed_run_credits_the_inputs_it_mounted_unchanged_on_the_hosts_it_completed() {
    let r = evaluate_text(&failed_rotation(Some(r#"["c1"]"#), Some("2026-10-15T00:00:00Z")), NOW);
    let c1 = cond(node(&r, "c1"), "SecretsCurrent");
    assert!(c1.is_true(), "{c1:?}");
    let delivered = &node(&r, "c1").delivered;
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!((delivered[0].name.as_str(), delivered[0].deployment.as_str()), ("nova-cfg", "d1"));
    let snap = snapshot::from_file_text("t.yaml", &failed_rotation(None, None), None).unwrap();
    let now = snap.secrets.iter().find(|s| s.id.name == "nova-cfg").unwrap();
    assert_eq!(delivered[0].hash, crate::objecthash::secret(&now.body), "the Secret as it is now");
    // c0 failed, c2 was not reached: they still hold the install's.
    for n in ["c0", "c2"] {
        let c = cond(node(&r, n), "SecretsCurrent");
        assert_eq!(c.status, Status::False, "{n}: {c:?}");
        assert!(c.message.contains("Secret nova-cfg (delivered by d-install"), "{n}: {}", c.message);
    }
}

#[test]
fn a_partly_failed_run_credits_no_input_it_cannot_tell_was_mounted_as_it_is() {
    let check = |text: String, why: &str| {
        let r = evaluate_text(&text, NOW);
        for n in ["c0", "c1", "c2"] {
            let c = cond(node(&r, n), "SecretsCurrent");
            assert_eq!(c.status, Status::False, "{why}: {n}: {c:?}");
            assert!(c.message.contains("Secret nova-cfg (delivered by d-install"), "{why}: {}", c.message);
        }
    };
    // d1 was created at 10:00:00: a change after it (or within its second) may not be what
    // its pods mounted.
    check(failed_rotation(Some(r#"["c1"]"#), Some("2026-11-01T10:03:00Z")), "changed after the run began");
    check(failed_rotation(Some(r#"["c1"]"#), Some("2026-11-01T10:00:00Z")), "changed within its second");
    check(failed_rotation(Some(r#"["c1"]"#), None), "no managedFields: when it changed is unknown");
    check(failed_rotation(None, Some("2026-10-15T00:00:00Z")), "upstream's runner names no completed host");
    // The Service changed after the run began: its dataSources then are unknown.
    let text = failed_rotation(Some(r#"["c1"]"#), Some("2026-10-15T00:00:00Z")).replace(
        "metadata: {name: nova, namespace: openstack, managedFields: [{manager: kubectl, operation: Update, time: \"2026-08-01T00:00:00Z\"}]}",
        "metadata: {name: nova, namespace: openstack, managedFields: [{manager: kubectl, operation: Update, time: \"2026-11-02T00:00:00Z\"}]}",
    );
    assert!(text.contains("2026-11-02T00:00:00Z"));
    check(text, "the Service changed since");
    // A status update does not count; one entry without a time does.
    let status_only = failed_rotation(Some(r#"["c1"]"#), Some("2026-10-15T00:00:00Z")).replace(
        "uid: 11111111-2222-3333-4444-555555555555, managedFields: [",
        "uid: 11111111-2222-3333-4444-555555555555, managedFields: [{manager: operator, operation: Update, subresource: status, time: \"2026-11-20T00:00:00Z\"}, ",
    );
    let r = evaluate_text(&status_only, NOW);
    assert!(cond(node(&r, "c1"), "SecretsCurrent").is_true(), "a status update is no change of spec");
    let no_time = failed_rotation(Some(r#"["c1"]"#), Some("2026-10-15T00:00:00Z")).replace(
        "uid: 11111111-2222-3333-4444-555555555555, managedFields: [",
        "uid: 11111111-2222-3333-4444-555555555555, managedFields: [{manager: other, operation: Update}, ",
    );
    check(no_time, "an entry without a time");
}

/// The certificate Secrets of [`failed_tls_rotation`]: each host's, and the packed one (last
/// changed at `packed`) holding each under the host's canonical name.
fn tls_certificates(packed: &str) -> (String, String) {
    let managed =
        |t: &str| format!("managedFields: [{{manager: operator, operation: Update, time: \"{t}\"}}]");
    let hosts = [
        ("c0", "c0.ctlplane.example.com"),
        ("c1", "c1.ctlplane.example.com"),
        ("c2.example.com", "c2.example.com"),
    ];
    let mut certs = String::new();
    let mut packed_data = String::new();
    for (host, canonical) in hosts {
        certs.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: cert-nova-default-{host}, namespace: openstack, labels: {{osdpns: ns1, osdp-service: nova, osdp-service-cert-key: default, hostname: {host}}}, {}}}\ntype: kubernetes.io/tls\nstringData: {{tls.crt: NEWCRT-{host}, tls.key: NEWKEY-{host}, ca.crt: CA}}\n",
            managed("2026-11-01T09:59:00Z")
        ));
        packed_data.push_str(&format!(
            "  {canonical}-tls.crt: NEWCRT-{host}\n  {canonical}-tls.key: NEWKEY-{host}\n  {canonical}-ca.crt: CA\n"
        ));
    }
    let packed = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: ns1-nova-default-certs-0, namespace: openstack, labels: {{numberOfSecrets: \"1\", secretNumber: \"0\"}}, {}}}\ntype: Opaque\nstringData:\n{packed_data}",
        managed(packed)
    );
    (certs, packed)
}

/// A certificate rotation that failed at nova on c0 and completed on c1 (`completedHostList`):
/// NodeSet `ns1` with TLS runs install-certs (`addCertMounts`), configure-os, ovn and nova
/// (`tlsCerts` key `default`); d-install recorded each host's certificate Secret at an old
/// hash; then the certificates were reissued (cert-manager's Secrets `cert-nova-default-<host>`)
/// and d1, created at 10:00:00, packed them into `ns1-nova-default-certs-0` (last changed at
/// `packed`) and created its install-certs Job at `job` (`None`: the Job is gone). `more` is
/// appended: what a check changes.
fn failed_tls_rotation(packed: &str, job: Option<&str>, more: &str) -> String {
    let managed =
        |t: &str| format!("managedFields: [{{manager: operator, operation: Update, time: \"{t}\"}}]");
    let old = managed("2026-08-01T00:00:00Z");
    let nodeset = format!(
        "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata: {{name: ns1, namespace: openstack, uid: 11111111-2222-3333-4444-555555555555, {old}}}\nspec:\n  preProvisioned: true\n  tlsEnabled: true\n  services: [install-certs, configure-os, ovn, nova]\n  nodeTemplate: {{ansibleSSHPrivateKeySecret: key}}\n  nodes:\n    c0: {{hostName: c0, ansible: {{ansibleHost: 192.0.2.10}}}}\n    c1: {{hostName: c1, ansible: {{ansibleHost: 192.0.2.11}}}}\n    c2: {{hostName: c2.example.com, ansible: {{ansibleHost: 192.0.2.12}}}}\nstatus:\n  configHash: h1\n"
    );
    let services: String = [
        ("install-certs", "addCertMounts: true"),
        ("configure-os", ""),
        ("ovn", ""),
        ("nova", "tlsCerts: {default: {contents: [dnsnames]}}"),
    ]
    .iter()
    .map(|(s, extra)| {
        format!(
            "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneService\nmetadata: {{name: {s}, namespace: openstack, {old}}}\nspec: {{edpmServiceType: {s}, {extra}}}\n"
        )
    })
    .collect();
    let (certs, packed) = tls_certificates(packed);
    let install = deployment(
        "d-install",
        "2026-09-01T10:00:00Z",
        &[("install-certs", "True"), ("configure-os", "True"), ("ovn", "True"), ("nova", "True")],
        "",
        "{}",
    )
    .replace(
        "status:\n  nodeSetHashes",
        "status:\n  secretHashes: {cert-nova-default-c0: old, cert-nova-default-c1: old, cert-nova-default-c2.example.com: old}\n  nodeSetHashes",
    );
    let d1 = deployment(
        "d1",
        "2026-11-01T10:00:00Z",
        &[("install-certs", "True"), ("configure-os", "True"), ("ovn", "True"), ("nova", "Backoff")],
        "",
        "{}",
    );
    let install_job = job.map_or(String::new(), |t| {
        format!(
            "---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: install-certs-d1-ns1, namespace: openstack, creationTimestamp: \"{t}\", labels: {{app: openstackansibleee, openstackdataplaneservice: install-certs, openstackdataplanedeployment: d1, openstackdataplanenodeset: ns1}}}}\nspec: {{backoffLimit: 0}}\nstatus: {{succeeded: 1, conditions: [{{type: Complete, status: \"True\"}}]}}\n"
        )
    });
    let message = FAILED_ON_C0.replacen('{', "{\"completedHostList\":[\"c1\"],", 1);
    format!(
        "{nodeset}{services}{certs}{packed}{install}{d1}{install_job}{NOVA_JOB_FAILED}{}{more}",
        pod("nova-d1-ns1-aaaaa", "nova-d1-ns1", "2026-11-01T10:05:00Z", &message, false)
    )
}

#[test]
fn a_partly_failed_rotation_credits_the_certificates_its_install_certs_job_mounted_as_they_are() {
    let text = failed_tls_rotation("2026-11-01T10:00:30Z", Some("2026-11-01T10:01:00Z"), "");
    let r = evaluate_text(&text, NOW);
    let c1 = node(&r, "c1");
    assert!(cond(c1, "ServiceNovaDeploymentReady").is_true());
    let current = cond(c1, "SecretsCurrent");
    assert!(current.is_true(), "{current:?}");
    let delivered: Vec<(&str, &str)> =
        c1.delivered.iter().map(|d| (d.name.as_str(), d.deployment.as_str())).collect();
    assert_eq!(delivered, [("cert-nova-default-c1", "d1")]);
    let snap = snapshot::from_file_text("t.yaml", &text, None).unwrap();
    let now = snap.secrets.iter().find(|s| s.id.name == "cert-nova-default-c1").unwrap();
    assert_eq!(c1.delivered[0].hash, crate::objecthash::secret(&now.body), "the Secret as it is now");
    // c0 failed, c2 was not reached: they still hold the install's.
    for (n, host) in [("c0", "c0"), ("c2", "c2.example.com")] {
        let c = cond(node(&r, n), "SecretsCurrent");
        assert_eq!(c.status, Status::False, "{n}: {c:?}");
        assert!(
            c.message.contains(&format!("Secret cert-nova-default-{host} (delivered by d-install")),
            "{n}: {}",
            c.message
        );
    }
    // Its Job gone, the packed Secret is bounded by the Deployment's creation instead.
    let r = evaluate_text(&failed_tls_rotation("2026-10-20T00:00:00Z", None, ""), NOW);
    assert!(cond(node(&r, "c1"), "SecretsCurrent").is_true());
}

#[test]
fn a_partly_failed_rotation_credits_no_certificate_it_cannot_tell_the_host_got_as_it_is() {
    let check = |text: String, why: &str| {
        let r = evaluate_text(&text, NOW);
        let c = cond(node(&r, "c1"), "SecretsCurrent");
        assert_eq!(c.status, Status::False, "{why}: {c:?}");
        assert!(c.message.contains("Secret cert-nova-default-c1 (d"), "{why}: {}", c.message);
        assert!(node(&r, "c1").delivered.iter().all(|d| d.deployment == "d-install"), "{why}");
        // The run still counts for c1: only its certificate is not credited.
        assert!(cond(node(&r, "c1"), "ServiceNovaDeploymentReady").is_true(), "{why}");
    };
    let job = Some("2026-11-01T10:01:00Z");
    check(failed_tls_rotation("2026-11-01T10:02:00Z", job, ""), "packed again after the Job was created");
    check(failed_tls_rotation("2026-11-01T10:01:00Z", job, ""), "packed within the Job's second");
    check(failed_tls_rotation("2026-11-01T10:00:30Z", None, ""), "no Job, packed after the Deployment");
    // Renewed after it was packed: the host holds the older one.
    let renewed = failed_tls_rotation("2026-11-01T10:00:30Z", job, "")
        .replace("tls.crt: NEWCRT-c1, tls.key: NEWKEY-c1", "tls.crt: NEWERCRT-c1, tls.key: NEWERKEY-c1");
    assert!(renewed.contains("NEWERCRT-c1"));
    check(renewed, "renewed since");
    // The host's certificate Secret gone, or the packed one.
    let text = failed_tls_rotation("2026-11-01T10:00:30Z", job, "");
    // `text` with `from` replaced: each check changes what it says it does.
    let with = |from: &str, to: &str| {
        assert!(text.contains(from), "{from}");
        text.replace(from, to)
    };
    check(with("name: cert-nova-default-c1,", "name: cert-nova-default-c1-old,"), "no certificate Secret");
    check(with("name: ns1-nova-default-certs-0,", "name: ns1-nova-default-certs-9,"), "no packed Secret");
    // A second packed Secret the reader did not get.
    check(with("numberOfSecrets: \"1\"", "numberOfSecrets: \"2\""), "a packed Secret missing");
    // Labelled for another host: not c1's at all (d-install's record of it neither).
    let r = evaluate_text(
        &with(
            "osdp-service-cert-key: default, hostname: c1}",
            "osdp-service-cert-key: default, hostname: c9}",
        ),
        NOW,
    );
    assert!(node(&r, "c1").delivered.is_empty(), "{:?}", node(&r, "c1").delivered);
    assert!(!cond(node(&r, "c1"), "SecretsCurrent").is_true());
    // The NodeSet's TLS off, or its canonical host names its own.
    check(with("  tlsEnabled: true\n", ""), "no tlsEnabled");
    check(
        with(
            "nodeTemplate: {ansibleSSHPrivateKeySecret: key}",
            "nodeTemplate: {ansibleSSHPrivateKeySecret: key, ansible: {ansibleVars: {canonical_hostname: x}}}",
        ),
        "canonical_hostname set",
    );
    // Two entries the host's first label matches: which it copied cannot be told.
    check(
        with(
            "  c1.ctlplane.example.com-tls.crt:",
            "  c1.other.example.com-tls.crt: X\n  c1.other.example.com-tls.key: X\n  c1.other.example.com-ca.crt: X\n  c1.ctlplane.example.com-tls.crt:",
        ),
        "two entries of the host",
    );
    // Nothing mounted the certificates.
    check(with("addCertMounts: true", ""), "no install-certs service");
    // Upstream may have deduplicated nova onto another NodeSet: its certificates not mounted here.
    check(
        with("nova, tlsCerts: {default", "nova, deployOnAllNodeSets: true, tlsCerts: {default"),
        "a global service",
    );
    check(
        with(
            "install-certs, addCertMounts: true",
            "install-certs, addCertMounts: true, deployOnAllNodeSets: true",
        ),
        "a global install-certs",
    );
}
