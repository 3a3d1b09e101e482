//! `status plan`: the OpenStackDataPlaneDeployments that would close each NodeSet's gaps,
//! printed for an operator to review and apply (`kubectl apply -f -`), never applied here.
//!
//! A gap is a set of nodes of one NodeSet that need the same services run:
//! - failed: the failed service and every service after it in the NodeSet's order;
//! - behind the target version: the minor update's step not run on them (`ovn` first, then
//!   `update`), as `VersionCurrent` names it;
//! - holding stale inputs: the services whose data sources hold the stale objects, the
//!   service a TLS certificate Secret belongs to (its `osdp-service` label), and every service
//!   for an object of the NodeSet's `ansibleVarsFrom`.
//!
//! A gap a Deployment not finished already covers (its `ansibleLimit` covers the nodes, it
//! runs those services; whatever its status says so far, none at all included: just applied,
//! not yet reconciled) is listed as in progress instead of planned again. Each planned Deployment
//! has `ansibleLimit` of exactly its nodes (none when they are all the NodeSet's) and a name no
//! existing Deployment has.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::deploy;
use super::*;
use crate::condition::types::SECRETS_CURRENT;

/// One planned Deployment, or a gap already in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub node_set: String,
    /// Why: the gap, in words.
    pub why: String,
    pub nodes: Vec<String>,
    pub services: Vec<String>,
    /// The running Deployment that already covers it (then nothing is planned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<String>,
    /// The Deployment to apply (absent when in progress or refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment: Option<serde_json::Value>,
    /// Why no Deployment is planned for the gap although it needs one: no `ansibleLimit`
    /// selects exactly its nodes (a host name Ansible reads as a pattern), naming the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The plan for every NodeSet `want` selects (all when empty), in NodeSet order.
pub fn plan(snap: &Snapshot, model: &Model, r: &Readiness, want: &[String]) -> Vec<Step> {
    let mut taken: BTreeSet<String> = snap.evidence.deployments.iter().map(|d| d.id.name.clone()).collect();
    let shape = limit::Shape::of(model);
    let limits = limit::Limits::new(&snap.evidence, &shape);
    let mut out = Vec::new();
    for group in &model.groups {
        if group.kind != GroupKind::NodeSet || (!want.is_empty() && !want.contains(&group.name)) {
            continue;
        }
        let nodes: Vec<&NodeView> = r.nodes.iter().filter(|n| n.nodeset == group.name).collect();
        let mut gaps: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
        let status = snap.evidence.nodesets.get(&group.name);
        let runs = deploy::runs(&snap.evidence, &group.name, status, &group.services.value, &limits);
        failed_gaps(group, &nodes, &mut gaps);
        version_gaps(snap, group, &nodes, &mut gaps);
        input_gaps(snap, group, &nodes, &mut gaps);
        undecided_gaps(group, &nodes, &runs, &mut gaps);
        let gaps = by_services(group, without_overlaps(gaps));
        for (why, members, services) in gaps {
            let (in_progress, rest) = in_progress(&runs, group, &members, &services);
            for (running, members) in in_progress {
                out.push(Step {
                    node_set: group.name.clone(),
                    why: why.clone(),
                    nodes: members,
                    services: services.clone(),
                    in_progress: Some(running.to_string()),
                    deployment: None,
                    refused: None,
                });
            }
            if rest.is_empty() {
                continue;
            }
            let first = if services == group.services.value { "redeploy" } else { services[0].as_str() };
            let all = rest.len() == group.members.len();
            // The limit must select exactly these nodes, as Ansible reads it (a host named
            // `edpm-compute-*` or holding a `,` would select others, or none).
            let hosts: Vec<String> = rest.iter().map(|m| member_host(group, m)).collect();
            let mut step = Step {
                node_set: group.name.clone(),
                why,
                nodes: rest,
                services: services.clone(),
                in_progress: None,
                deployment: None,
                refused: None,
            };
            match (all, exact_limit(&hosts, &shape)) {
                (false, Err(why)) => step.refused = Some(why),
                (_, limit) => {
                    let name = free_name(&mut taken, &group.name, first);
                    let limit = if all { None } else { limit.ok() };
                    step.deployment = Some(deployment_object(&name, group, limit, &services, &nodes));
                }
            }
            out.push(step);
        }
    }
    out
}

/// A gap's nodes that a Deployment not finished covers, by that Deployment (the newest that
/// covers each node and runs every service of the gap), and the rest, to plan.
fn in_progress<'r>(
    runs: &'r [deploy::Run<'r>],
    group: &HostGroup,
    members: &[String],
    services: &[String],
) -> (Vec<(&'r str, Vec<String>)>, Vec<String>) {
    let mut covered: Vec<(&'r str, Vec<String>)> = Vec::new();
    let mut rest = Vec::new();
    for m in members {
        let host = member_host(group, m);
        let running =
            runs.iter().rev().find(|run| run.in_progress_on(&host) && services.iter().all(|s| run.runs(s)));
        match running {
            Some(run) => match covered.iter_mut().find(|(n, _)| *n == run.name) {
                Some((_, nodes)) => nodes.push(m.clone()),
                None => covered.push((run.name, vec![m.clone()])),
            },
            None => rest.push(m.clone()),
        }
    }
    (covered, rest)
}

/// Each node in one gap per set of services: a node already in an earlier gap whose services
/// include a later gap's is left out of the later one (a failed `update` and a node behind
/// the version need one Deployment, not two running the same step on the same nodes at once).
fn without_overlaps(
    gaps: Vec<(String, Vec<String>, Vec<String>)>,
) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut kept: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for (why, members, services) in gaps {
        let members: Vec<String> = members
            .into_iter()
            .filter(|m| {
                !kept.iter().any(|(_, km, ks)| km.contains(m) && services.iter().all(|s| ks.contains(s)))
            })
            .collect();
        if !members.is_empty() {
            kept.push((why, members, services));
        }
    }
    kept
}

/// Gaps that run the same services, one: a node that failed at a service and a node a run
/// stopped before it (`any_errors_fatal`, behind the version) need one Deployment, not two
/// running the same services at once. The reasons are joined; the nodes keep the NodeSet's
/// order.
fn by_services(
    group: &HostGroup,
    gaps: Vec<(String, Vec<String>, Vec<String>)>,
) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for (why, members, services) in gaps {
        match out.iter_mut().find(|(_, _, s)| *s == services) {
            Some((w, m, _)) => {
                w.push_str("; ");
                w.push_str(&why);
                m.extend(members);
            }
            None => out.push((why, members, services)),
        }
    }
    for (_, members, _) in &mut out {
        members.sort_by_key(|m| group.members.iter().position(|g| g.key == *m));
        members.dedup();
    }
    out
}

/// The inventory hostname of the node of key `key`, which an `ansibleLimit` selects.
fn member_host(group: &HostGroup, key: &str) -> String {
    group
        .members
        .iter()
        .find(|m| m.key == key)
        .map_or_else(String::new, |m| m.inventory_hostname().to_string())
}

/// Nodes whose phase failed for good: grouped by the failed service, each with it and every
/// service after it in the NodeSet's order.
fn failed_gaps(group: &HostGroup, nodes: &[&NodeView], gaps: &mut Vec<(String, Vec<String>, Vec<String>)>) {
    let mut by_service: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in nodes {
        if !n.conditions.get(STALLED).is_some_and(|c| c.status == crate::condition::Status::True) {
            continue;
        }
        let failed = [INFRASTRUCTURE, SERVICES]
            .iter()
            .filter(|ty| {
                n.conditions.get(ty).is_some_and(|c| c.severity == crate::condition::Severity::Error)
            })
            .find_map(|ty| n.blocking.get(ty).filter(|b| !b.service.is_empty()).map(|b| b.service.clone()));
        if let Some(s) = failed {
            by_service.entry(s).or_default().push(n.node.clone());
        }
    }
    let order = &group.services.value;
    for (service, members) in by_service {
        let from = order.iter().position(|s| *s == service);
        let services: Vec<String> = match from {
            Some(i) => order[i..].to_vec(),
            None => vec![service.clone()],
        };
        gaps.push((format!("failed at {service}: run it and every service after it"), members, services));
    }
}

/// Nodes of which a condition cannot be told because a Deployment's `ansibleLimit` cannot be
/// evaluated (`LimitUnknown`): that Deployment's services run on them again, with a limit that
/// can be, makes them known.
fn undecided_gaps(
    group: &HostGroup,
    nodes: &[&NodeView],
    runs: &[deploy::Run],
    gaps: &mut Vec<(String, Vec<String>, Vec<String>)>,
) {
    let mut by_run: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for n in nodes {
        if !n.conditions.iter().any(|c| c.has_reason(&crate::condition::reasons::LIMIT_UNKNOWN)) {
            continue;
        }
        let host = member_host(group, &n.node);
        for (i, run) in runs.iter().enumerate() {
            let ended = matches!(run.state(), RunState::Done | RunState::Failed { .. });
            if ended && matches!(run.covers(&host), limit::Covers::Unknown(_)) {
                by_run.entry(i).or_default().push(n.node.clone());
            }
        }
    }
    for (i, members) in by_run {
        let run = &runs[i];
        let why = match run.limit {
            Some(limit::Coverage::Unknown(why)) => why.as_str(),
            _ => "",
        };
        let why = format!(
            "cannot tell whether Deployment {} ran on them: {} cannot be evaluated ({why}); run its services on them again",
            run.name,
            run.limit_words()
        );
        gaps.push((why, members, run.services.iter().map(|s| s.to_string()).collect()));
    }
}

/// Nodes behind the target version, by the step they miss (`ovn` before `update`), each step
/// run by the NodeSet's service of that `edpmServiceType` (or the snapshot's, or upstream's
/// service of that name).
fn version_gaps(
    snap: &Snapshot,
    group: &HostGroup,
    nodes: &[&NodeView],
    gaps: &mut Vec<(String, Vec<String>, Vec<String>)>,
) {
    let mut by_step: BTreeMap<&str, (Vec<String>, String)> = BTreeMap::new();
    for n in nodes {
        let Some((target, step)) = &n.behind else { continue };
        let e = by_step.entry(step).or_insert_with(|| (Vec::new(), target.clone()));
        e.0.push(n.node.clone());
    }
    for (step, (members, target)) in by_step {
        let why = match step {
            "ovn" => format!("behind {target}: the minor update's first step, ovn, has not run on them"),
            _ => format!("behind {target}: the update step has not run on them"),
        };
        gaps.push((why, members, vec![service_of_type(snap, group, step)]));
    }
}

/// The service that runs `edpmServiceType` `ty`: the NodeSet's, else any the snapshot defines,
/// else upstream's of that name.
fn service_of_type(snap: &Snapshot, group: &HostGroup, ty: &str) -> String {
    group
        .services
        .value
        .iter()
        .find(|s| snap.service_type(s) == ty)
        .cloned()
        .or_else(|| snap.services.iter().map(|s| s.id.name.clone()).find(|s| snap.service_type(s) == ty))
        .unwrap_or_else(|| ty.to_string())
}

/// Nodes holding stale inputs, by the services that deliver those inputs.
fn input_gaps(
    snap: &Snapshot,
    group: &HostGroup,
    nodes: &[&NodeView],
    gaps: &mut Vec<(String, Vec<String>, Vec<String>)>,
) {
    let mut by_services: BTreeMap<Vec<String>, (BTreeSet<String>, Vec<String>)> = BTreeMap::new();
    for n in nodes {
        if !n.conditions.get(SECRETS_CURRENT).is_some_and(|c| c.status == crate::condition::Status::False) {
            continue;
        }
        // A delivered object that does not exist any more is no Deployment's to deliver again:
        // it has to be made again first (the condition says so).
        let stale: Vec<&crate::snapshot::evidence::Delivery> = n
            .delivered
            .iter()
            .filter(|d| d.stale_since.is_some() && super::inputs::exists(snap, &d.kind, &d.name))
            .collect();
        if stale.is_empty() {
            continue;
        }
        let mut services: BTreeSet<usize> = BTreeSet::new();
        for d in &stale {
            let found = delivering_services(snap, group, &d.kind, &d.name);
            if found.is_empty() {
                // Named by none of the NodeSet's services: only a full Deployment delivers it.
                services.extend(0..group.services.value.len());
            }
            services.extend(found);
        }
        let services: Vec<String> = services.into_iter().map(|i| group.services.value[i].clone()).collect();
        let e = by_services.entry(services).or_default();
        e.0.extend(stale.iter().map(|d| d.name.clone()));
        e.1.push(n.node.clone());
    }
    for (services, (objects, members)) in by_services {
        let objects: Vec<String> = objects.into_iter().collect();
        let why = if services == group.services.value {
            format!("stale inputs: {} (a full Deployment delivers every input again)", objects.join(", "))
        } else {
            format!("stale inputs: {} (deliver them again)", objects.join(", "))
        };
        gaps.push((why, members, services));
    }
}

/// The indices (in the NodeSet's order) of the services that deliver `kind`/`name`.
fn delivering_services(snap: &Snapshot, group: &HostGroup, kind: &str, name: &str) -> Vec<usize> {
    let order = &group.services.value;
    let names = |ds: &crate::snapshot::resource::DataSource| {
        let r = if kind == "Secret" { ds.secret_ref.as_ref() } else { ds.config_map_ref.as_ref() };
        r.is_some_and(|r| r.name == name)
    };
    // An object of the NodeSet's ansibleVarsFrom: every service reads the variables.
    let vars_from = snap.nodesets.iter().find(|ns| ns.id.name == group.name).is_some_and(|ns| {
        ns.body.node_template.ansible.ansible_vars_from.iter().any(names)
            || ns.body.nodes.values().any(|n| n.ansible.ansible_vars_from.iter().any(names))
    });
    if vars_from {
        return (0..order.len()).collect();
    }
    let mut out: Vec<usize> =
        (0..order.len()).filter(|&i| snap.service_data_sources(&order[i]).iter().any(names)).collect();
    // A TLS certificate: the Secret's `osdp-service` label names its service.
    if kind == "Secret"
        && let Some(svc) = snap
            .secrets
            .iter()
            .find(|s| s.id.name == name)
            .and_then(|s| s.meta.labels.get("osdp-service").cloned())
        && let Some(i) = order.iter().position(|s| *s == svc)
        && !out.contains(&i)
    {
        out.push(i);
        out.sort_unstable();
    }
    out
}

/// The `ansibleLimit` of exactly `hosts` (their inventory hostnames, comma-separated), or why
/// there is none, naming the host: each is checked as Ansible reads the whole limit (after
/// ansible-runner's `shlex.split`), so a host name Ansible takes as a pattern, or that splits
/// the limit, is refused rather than selecting other hosts.
fn exact_limit(hosts: &[String], shape: &limit::Shape) -> Result<String, String> {
    let plain = hosts.join(",");
    let want: BTreeSet<&str> = hosts.iter().map(String::as_str).collect();
    // As it is, else quoted for ansible-runner's `shlex.split` (a space or a quote in a name).
    let quoted = format!("'{}'", plain.replace('\'', "'\\''"));
    let mut why = String::new();
    for text in [&plain, &quoted] {
        match limit::coverage(text, shape) {
            limit::Coverage::Hosts(h) if h.iter().map(String::as_str).collect::<BTreeSet<_>>() == want => {
                return Ok(text.clone());
            }
            limit::Coverage::Hosts(h) => {
                let extra = h.iter().filter(|x| !want.contains(x.as_str())).count();
                why = format!(
                    "the limit would select {extra} other host(s) and {} of {} meant",
                    h.len() - extra,
                    want.len()
                );
            }
            limit::Coverage::All => why = "the limit would select every host".into(),
            limit::Coverage::Unknown(w) => why = w,
        }
    }
    // Which host's name is read as more (or other) than itself.
    let alone = |h: &String| matches!(limit::coverage(h, shape), limit::Coverage::Hosts(ref s) if s.len() == 1 && s.contains(h.as_str()));
    let host = hosts.iter().find(|h| !alone(h)).map_or(plain.as_str(), String::as_str);
    Err(refusal(host, &why))
}

fn refusal(host: &str, why: &str) -> String {
    format!(
        "no ansibleLimit selects exactly these nodes: host {} is read by Ansible as a pattern or splits the limit ({why}); deploy them by hand (rename the host, or a limit of your own)",
        crate::excerpt::echo(&crate::excerpt::printable(host)).debug()
    )
}

/// `edpm-agent-<nodeset>-<first service, or redeploy>`, with `-2`, `-3`, … until no
/// Deployment has it; past 63 characters shortened as upstream shortens its Job names (a
/// DNS-1123 label: cut, trailing `-`/`.` removed, a hash of the whole), so every planned name
/// is a valid object name whatever the NodeSet's length.
fn free_name(taken: &mut BTreeSet<String>, nodeset: &str, first: &str) -> String {
    let base = format!("edpm-agent-{nodeset}-{first}");
    let mut name = super::names::shorten(&base);
    let mut n = 1;
    while taken.contains(&name) {
        n += 1;
        name = super::names::shorten(&format!("{base}-{n}"));
    }
    taken.insert(name.clone());
    name
}

fn deployment_object(
    name: &str,
    group: &HostGroup,
    limit: Option<String>,
    services: &[String],
    nodes: &[&NodeView],
) -> serde_json::Value {
    let namespace = nodes.first().and_then(|n| n.namespace.clone());
    let mut spec = serde_json::json!({"nodeSets": [group.name]});
    if let Some(limit) = limit {
        // The nodes by the name their inventory uses (an ansibleLimit matches it).
        spec["ansibleLimit"] = serde_json::Value::String(limit);
    }
    if services != group.services.value.as_slice() {
        spec["servicesOverride"] = serde_json::json!(services);
    }
    let mut metadata = serde_json::json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = serde_json::Value::String(ns);
    }
    serde_json::json!({
        "apiVersion": "dataplane.openstack.org/v1beta1",
        "kind": "OpenStackDataPlaneDeployment",
        "metadata": metadata,
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAP: &str = r#"
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNodeSet
metadata: {name: ns1, namespace: openstack}
spec:
  preProvisioned: true
  services: [configure-os, ovn, neutron-metadata, nova]
  nodeTemplate:
    ansibleSSHPrivateKeySecret: key
    ansible:
      ansibleVarsFrom:
        - secretRef: {name: site-vars}
  nodes:
    c0: {hostName: c0}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneService
metadata: {name: nova, namespace: openstack}
spec:
  dataSources:
    - secretRef: {name: nova-cell1-compute-config}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneService
metadata: {name: neutron-metadata, namespace: openstack}
spec:
  dataSources:
    - secretRef: {name: nova-cell1-compute-config}
    - configMapRef: {name: neutron-metadata-config}
---
apiVersion: v1
kind: Secret
metadata:
  name: cert-ovn-default-c0
  namespace: openstack
  labels: {osdpns: ns1, osdp-service: ovn, osdp-service-cert-key: default}
"#;

    fn services(kind: &str, name: &str) -> Vec<String> {
        let snap = crate::snapshot::from_file_text("t.yaml", SNAP, None).unwrap();
        let model = crate::model::resolve(&snap).unwrap();
        let g = &model.groups[0];
        delivering_services(&snap, g, kind, name).into_iter().map(|i| g.services.value[i].clone()).collect()
    }

    #[test]
    fn stale_inputs_pick_the_services_that_deliver_them() {
        // Every service whose data sources name it, in the NodeSet's order.
        assert_eq!(services("Secret", "nova-cell1-compute-config"), ["neutron-metadata", "nova"]);
        assert_eq!(services("ConfigMap", "neutron-metadata-config"), ["neutron-metadata"]);
        // Not a ConfigMap of that name: nothing.
        assert!(services("ConfigMap", "nova-cell1-compute-config").is_empty());
        // A TLS certificate: the service its label names.
        assert_eq!(services("Secret", "cert-ovn-default-c0"), ["ovn"]);
        // The NodeSet's ansibleVarsFrom: every service.
        assert_eq!(services("Secret", "site-vars"), ["configure-os", "ovn", "neutron-metadata", "nova"]);
    }

    #[test]
    fn an_update_step_is_run_by_the_service_of_its_type() {
        let text = format!(
            "{SNAP}---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneService\nmetadata: {{name: minor-update, namespace: openstack}}\nspec: {{edpmServiceType: update}}\n"
        );
        let snap = crate::snapshot::from_file_text("t.yaml", &text, None).unwrap();
        let model = crate::model::resolve(&snap).unwrap();
        assert_eq!(service_of_type(&snap, &model.groups[0], "update"), "minor-update");
        // None of that type: upstream's service of the step's name.
        assert_eq!(service_of_type(&snap, &model.groups[0], "ovn"), "ovn");
    }

    #[test]
    fn names_never_collide() {
        let mut taken: BTreeSet<String> = ["edpm-agent-ns1-nova".to_string()].into();
        assert_eq!(free_name(&mut taken, "ns1", "nova"), "edpm-agent-ns1-nova-2");
        assert_eq!(free_name(&mut taken, "ns1", "nova"), "edpm-agent-ns1-nova-3");
        assert_eq!(free_name(&mut taken, "ns1", "ovn"), "edpm-agent-ns1-ovn");
        // A NodeSet name of 228 characters: a label of 63, never ending in `-`, distinct.
        let long = "n".repeat(228);
        let a = free_name(&mut taken, &long, "nova");
        let b = free_name(&mut taken, &long, "nova");
        for n in [&a, &b] {
            assert!(n.len() <= 63 && crate::validate::is_dns1123_label(n), "{n}");
        }
        assert_ne!(a, b);
    }
}
