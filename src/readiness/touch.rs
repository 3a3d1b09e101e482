//! Which NodeSets an object's change can move, so a controller re-evaluates only those; and
//! when the clock alone will move something (a node agent's Lease expiring). Pure.
//!
//! An object that names no NodeSet, or a kind whose change can reach any NodeSet (a
//! DataPlaneService, the seeds' DataPlane, a NovaCell, the control plane), touches all.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::api::NODESET_LABEL;
use crate::condition::Time;
use crate::snapshot::evidence::Evidence;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Touch {
    NodeSets(BTreeSet<String>),
    All,
}

impl Touch {
    pub(crate) fn none() -> Touch {
        Touch::NodeSets(BTreeSet::new())
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Touch::NodeSets(s) if s.is_empty())
    }

    pub(crate) fn add(&mut self, other: Touch) {
        match (&mut *self, other) {
            (Touch::All, _) => {}
            (_, Touch::All) => *self = Touch::All,
            (Touch::NodeSets(a), Touch::NodeSets(b)) => a.extend(b),
        }
    }

    pub(crate) fn includes(&self, nodeset: &str) -> bool {
        match self {
            Touch::All => true,
            Touch::NodeSets(s) => s.contains(nodeset),
        }
    }

    /// Whether an object that touches `other` is needed to evaluate `self`'s NodeSets.
    pub(crate) fn overlaps(&self, other: &Touch) -> bool {
        match (self, other) {
            (Touch::All, _) | (_, Touch::All) => true,
            (Touch::NodeSets(a), Touch::NodeSets(b)) => !a.is_disjoint(b),
        }
    }
}

/// The NodeSets a change of an object of `kind` can move, from its name, labels and spec.
/// `job_nodeset` finds the NodeSet of a Job by name (a pod names only its Job).
pub(crate) fn touched_parts(
    kind: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    spec: &Value,
    job_nodeset: &dyn Fn(&str) -> Option<String>,
) -> Touch {
    let one = |s: Option<&str>| match s {
        Some(s) if !s.is_empty() => Touch::NodeSets(BTreeSet::from([s.to_string()])),
        _ => Touch::All,
    };
    let label = |k: &str| labels.get(k).map(String::as_str);
    match kind {
        "OpenStackDataPlaneNodeSet" | "OpenStackBaremetalSet" | "OpenStackDataPlaneRole" => one(Some(name)),
        // A seeds' Node belongs to its Role.
        "OpenStackDataPlaneNode" => one(spec["role"].as_str()),
        "OpenStackDataPlaneDeployment" => match spec["nodeSets"].as_array() {
            Some(list) => Touch::NodeSets(list.iter().filter_map(|n| n.as_str().map(String::from)).collect()),
            None => Touch::All,
        },
        "Job" => one(label("openstackdataplanenodeset")),
        "Pod" => {
            let job = label("batch.kubernetes.io/job-name").or_else(|| label("job-name"));
            one(job.and_then(job_nodeset).as_deref())
        }
        "EDPMNodeStatus" | "EDPMNodeSetStatus" => {
            one(spec["nodeSet"].as_str().or_else(|| label(NODESET_LABEL)))
        }
        "Lease" => one(label(NODESET_LABEL)),
        _ => Touch::All,
    }
}

/// The earliest time after `now` at which a node agent's Lease expires: then its conditions
/// turn Unknown with no event to say so.
pub(crate) fn next_expiry(ev: &Evidence, now: Time) -> Option<Time> {
    ev.leases.iter().filter_map(|l| l.expires()).filter(|t| *t > now).min()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn touched(kind: &str, obj: &Value, job_nodeset: &dyn Fn(&str) -> Option<String>) -> Touch {
        let labels: BTreeMap<String, String> = obj["metadata"]["labels"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        touched_parts(
            kind,
            obj["metadata"]["name"].as_str().unwrap_or(""),
            &labels,
            &obj["spec"],
            job_nodeset,
        )
    }

    fn sets(names: &[&str]) -> Touch {
        Touch::NodeSets(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn each_kind_names_the_nodesets_it_moves() {
        let none = |_: &str| None;
        let ns = json!({"metadata": {"name": "cell1"}});
        assert_eq!(touched("OpenStackDataPlaneNodeSet", &ns, &none), sets(&["cell1"]));
        let d = json!({"metadata": {"name": "d"}, "spec": {"nodeSets": ["cell1", "cell2"]}});
        assert_eq!(touched("OpenStackDataPlaneDeployment", &d, &none), sets(&["cell1", "cell2"]));
        let job =
            json!({"metadata": {"name": "nova-d-cell2", "labels": {"openstackdataplanenodeset": "cell2"}}});
        assert_eq!(touched("Job", &job, &none), sets(&["cell2"]));
        let pod = json!({"metadata": {"labels": {"batch.kubernetes.io/job-name": "nova-d-cell2"}}});
        let jobs = |j: &str| (j == "nova-d-cell2").then(|| "cell2".to_string());
        assert_eq!(touched("Pod", &pod, &jobs), sets(&["cell2"]));
        assert_eq!(touched("Pod", &pod, &none), Touch::All, "a pod of an unknown Job: anything");
        let lease = json!({"metadata": {"labels": {"agent.edpm.openstack.org/nodeset": "cell1"}}});
        assert_eq!(touched("Lease", &lease, &none), sets(&["cell1"]));
        let report = json!({"spec": {"nodeSet": "cell1", "node": "c0"}});
        assert_eq!(touched("EDPMNodeStatus", &report, &none), sets(&["cell1"]));
        let node = json!({"spec": {"role": "compute"}});
        assert_eq!(touched("OpenStackDataPlaneNode", &node, &none), sets(&["compute"]));
        for kind in ["OpenStackDataPlaneService", "OpenStackDataPlane", "NovaCell", "OpenStackControlPlane"] {
            assert_eq!(touched(kind, &json!({}), &none), Touch::All, "{kind}");
        }
    }

    #[test]
    fn touches_add_up() {
        let mut t = Touch::none();
        assert!(t.is_empty());
        t.add(sets(&["a"]));
        t.add(sets(&["b"]));
        assert_eq!(t, sets(&["a", "b"]));
        assert!(t.includes("a") && !t.includes("c"));
        t.add(Touch::All);
        t.add(sets(&["c"]));
        assert_eq!(t, Touch::All);
    }
}
