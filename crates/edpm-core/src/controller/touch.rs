//! Which NodeSets an object's change can move, so a controller re-evaluates only those; and
//! when the clock alone will move something (a node agent's Lease expiring). Pure.
//!
//! An object that names no NodeSet, or a kind whose change can reach any NodeSet (a
//! DataPlaneService, the seeds' DataPlane, a NovaCell, the control plane), touches all.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::condition::Time;
use crate::kinds::ReachRule;
use crate::readiness::api::{NODESET_ANNOTATION, NODESET_LABEL};
use crate::snapshot::evidence::Evidence;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    NodeSets(BTreeSet<String>),
    All,
}

impl Touch {
    pub fn none() -> Touch {
        Touch::NodeSets(BTreeSet::new())
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Touch::NodeSets(s) if s.is_empty())
    }

    pub fn add(&mut self, other: Touch) {
        match (&mut *self, other) {
            (Touch::All, _) => {}
            (_, Touch::All) => *self = Touch::All,
            (Touch::NodeSets(a), Touch::NodeSets(b)) => a.extend(b),
        }
    }

    pub fn includes(&self, nodeset: &str) -> bool {
        match self {
            Touch::All => true,
            Touch::NodeSets(s) => s.contains(nodeset),
        }
    }
}

/// Which NodeSets an object's change can move, as the object alone says it: kept per stored
/// object (a few words, not the object), resolved to a [`Touch`] when needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// The NodeSets it names (a Deployment names several; most objects one).
    NodeSets(Vec<String>),
    /// Any NodeSet.
    All,
    /// A Job: the NodeSet of its label and every NodeSet of its Deployment (a global
    /// service's one Job runs for all of them, labelled with one), looked up when needed.
    Run { nodeset: Option<String>, deployment: String },
    /// A pod: its Job's reach, looked up when needed (the Job may be seen after the pod).
    Job(String),
}

/// What a reach that names another object needs to know of it.
pub trait Lookup {
    /// The reach of a Job (stored, or deleted lately).
    fn job(&self, name: &str) -> Option<Reach>;
    /// The NodeSets a Deployment names.
    fn deployment(&self, name: &str) -> Option<Vec<String>>;
}

/// Nothing known of other objects.
impl Lookup for () {
    fn job(&self, _: &str) -> Option<Reach> {
        None
    }
    fn deployment(&self, _: &str) -> Option<Vec<String>> {
        None
    }
}

impl Reach {
    /// The NodeSets it touches.
    pub fn touch(&self, lookup: &dyn Lookup) -> Touch {
        match self {
            Reach::NodeSets(v) => Touch::NodeSets(v.iter().cloned().collect()),
            Reach::All => Touch::All,
            Reach::Run { nodeset, deployment } => {
                let mut sets: BTreeSet<String> = nodeset.iter().cloned().collect();
                sets.extend(lookup.deployment(deployment).unwrap_or_default());
                if sets.is_empty() { Touch::All } else { Touch::NodeSets(sets) }
            }
            Reach::Job(job) => match lookup.job(job) {
                // A Job's reach never names another Job: no loop.
                Some(r @ (Reach::NodeSets(_) | Reach::Run { .. })) => r.touch(lookup),
                _ => Touch::All,
            },
        }
    }

    /// Whether an object of this reach is needed to evaluate the `touched` NodeSets.
    pub fn within(&self, touched: &Touch, lookup: &dyn Lookup) -> bool {
        match (self, touched) {
            (_, Touch::All) | (Reach::All, _) => true,
            (Reach::NodeSets(v), t) => v.iter().any(|s| t.includes(s)),
            (Reach::Run { .. } | Reach::Job(_), t) => match self.touch(lookup) {
                Touch::All => true,
                Touch::NodeSets(s) => s.iter().any(|s| t.includes(s)),
            },
        }
    }
}

/// What an object reaches by its kind's `rule` (`crate::kinds`), from its name, labels and spec.
pub fn reach(rule: ReachRule, name: &str, labels: &BTreeMap<String, String>, spec: &Value) -> Reach {
    let one = |s: Option<&str>| match s {
        Some(s) if !s.is_empty() => Reach::NodeSets(vec![s.to_string()]),
        _ => Reach::All,
    };
    let label = |k: &str| labels.get(k).map(String::as_str).filter(|v| !v.is_empty());
    match rule {
        ReachRule::OwnName => one(Some(name)),
        ReachRule::SpecRole => one(spec["role"].as_str()),
        ReachRule::DeploymentNodeSets => match spec["nodeSets"].as_array() {
            Some(list) => Reach::NodeSets(list.iter().filter_map(|n| n.as_str().map(String::from)).collect()),
            None => Reach::All,
        },
        ReachRule::JobLabels => match label("openstackdataplanedeployment") {
            Some(d) => Reach::Run {
                nodeset: label("openstackdataplanenodeset").map(String::from),
                deployment: d.to_string(),
            },
            None => one(label("openstackdataplanenodeset")),
        },
        ReachRule::PodJob => match label("batch.kubernetes.io/job-name").or_else(|| label("job-name")) {
            Some(job) => Reach::Job(job.to_string()),
            None => Reach::All,
        },
        ReachRule::StatusNodeSet => one(spec["nodeSet"].as_str().or_else(|| label(NODESET_LABEL))),
        ReachRule::LeaseNodeSet => one(label(NODESET_LABEL)),
        ReachRule::All => Reach::All,
    }
}

/// The NodeSets a change of an object of `kind` can move, from its name, labels and spec.
#[cfg(test)]
pub fn touched_parts(
    kind: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    spec: &Value,
    lookup: &dyn Lookup,
) -> Touch {
    let rule = crate::kinds::named(kind).map_or(ReachRule::All, |k| k.reach);
    reach(rule, name, labels, spec).touch(lookup)
}

/// For each NodeSet, the earliest time after `now` at which one of its node agents' Leases
/// expires: then its conditions turn Unknown with no event to say so. A Lease without the
/// NodeSet label counts for every NodeSet (`""`).
pub fn next_expiries(ev: &Evidence, now: Time) -> BTreeMap<String, Time> {
    let mut out: BTreeMap<String, Time> = BTreeMap::new();
    for l in &ev.leases {
        let Some(t) = l.alive_until(now).filter(|t| *t > now) else { continue };
        // The whole name when the label had to be shortened (`api::labels_and_annotations`).
        let set = l.meta.annotations.get(NODESET_ANNOTATION).or_else(|| l.meta.labels.get(NODESET_LABEL));
        let set = set.cloned().unwrap_or_default();
        let slot = out.entry(set).or_insert(t);
        *slot = (*slot).min(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Jobs and Deployments known by name.
    #[derive(Default)]
    struct Known {
        jobs: BTreeMap<String, Reach>,
        deployments: BTreeMap<String, Vec<String>>,
    }

    impl Lookup for Known {
        fn job(&self, name: &str) -> Option<Reach> {
            self.jobs.get(name).cloned()
        }
        fn deployment(&self, name: &str) -> Option<Vec<String>> {
            self.deployments.get(name).cloned()
        }
    }

    fn known() -> Known {
        let mut k = Known::default();
        k.jobs.insert("nova-d-cell2".into(), Reach::NodeSets(vec!["cell2".into()]));
        k.jobs.insert(
            "ssh-d-cell1".into(),
            Reach::Run { nodeset: Some("cell1".into()), deployment: "d".into() },
        );
        k.deployments.insert("d".into(), vec!["cell1".into(), "cell3".into()]);
        k
    }

    fn touched(kind: &str, obj: &Value, lookup: &dyn Lookup) -> Touch {
        let labels: BTreeMap<String, String> = obj["metadata"]["labels"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        touched_parts(kind, obj["metadata"]["name"].as_str().unwrap_or(""), &labels, &obj["spec"], lookup)
    }

    fn sets(names: &[&str]) -> Touch {
        Touch::NodeSets(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn each_kind_names_the_nodesets_it_moves() {
        let none = ();
        let ns = json!({"metadata": {"name": "cell1"}});
        assert_eq!(touched("OpenStackDataPlaneNodeSet", &ns, &none), sets(&["cell1"]));
        let d = json!({"metadata": {"name": "d"}, "spec": {"nodeSets": ["cell1", "cell2"]}});
        assert_eq!(touched("OpenStackDataPlaneDeployment", &d, &none), sets(&["cell1", "cell2"]));
        let job =
            json!({"metadata": {"name": "nova-d-cell2", "labels": {"openstackdataplanenodeset": "cell2"}}});
        assert_eq!(touched("Job", &job, &none), sets(&["cell2"]));
        let pod = json!({"metadata": {"labels": {"batch.kubernetes.io/job-name": "nova-d-cell2"}}});
        assert_eq!(touched("Pod", &pod, &known()), sets(&["cell2"]));
        // A global service's Job: its label's NodeSet and every NodeSet of its Deployment.
        let run = json!({"metadata": {"labels": {"openstackdataplanenodeset": "cell1", "openstackdataplanedeployment": "d"}}});
        assert_eq!(touched("Job", &run, &known()), sets(&["cell1", "cell3"]));
        assert_eq!(touched("Job", &run, &none), sets(&["cell1"]), "its Deployment not seen: its label");
        let ssh = json!({"metadata": {"labels": {"batch.kubernetes.io/job-name": "ssh-d-cell1"}}});
        assert_eq!(touched("Pod", &ssh, &known()), sets(&["cell1", "cell3"]));
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
    fn a_stored_object_is_needed_by_the_nodesets_it_reaches() {
        let jobs = known();
        let cell1 = sets(&["cell1"]);
        assert!(Reach::NodeSets(vec!["cell1".into()]).within(&cell1, &jobs));
        assert!(!Reach::NodeSets(vec!["cell2".into()]).within(&cell1, &jobs));
        assert!(Reach::NodeSets(vec!["cell2".into(), "cell1".into()]).within(&cell1, &jobs));
        assert!(Reach::All.within(&cell1, &jobs), "a DataPlaneService is needed by every NodeSet");
        assert!(Reach::NodeSets(vec!["cell2".into()]).within(&Touch::All, &jobs));
        assert!(!Reach::Job("nova-d-cell2".into()).within(&cell1, &jobs));
        assert!(Reach::Job("nova-d-cell2".into()).within(&sets(&["cell2"]), &jobs));
        assert!(Reach::Job("unknown".into()).within(&cell1, &jobs), "a pod of an unseen Job: kept");
        let cell3 = sets(&["cell3"]);
        assert!(
            Reach::Job("ssh-d-cell1".into()).within(&cell3, &jobs),
            "a global service's run reaches cell3"
        );
        assert!(!Reach::Job("ssh-d-cell1".into()).within(&sets(&["cell2"]), &jobs));
    }

    #[test]
    fn each_nodeset_waits_for_its_own_earliest_lease_expiry() {
        let lease = |name: &str, set: Option<&str>, renewed: &str| {
            let labels = match set {
                Some(s) => format!(
                    "labels: {{agent.edpm.openstack.org/node: {name}, agent.edpm.openstack.org/nodeset: {s}}}"
                ),
                None => format!("labels: {{agent.edpm.openstack.org/node: {name}}}"),
            };
            format!(
                "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {name}, {labels}}}\nspec: {{holderIdentity: {name}, leaseDurationSeconds: 60, renewTime: \"{renewed}\"}}\n---\n"
            )
        };
        let text = [
            lease("a0", Some("a"), "2026-11-01T10:00:30Z"),
            lease("a1", Some("a"), "2026-11-01T10:00:10Z"),
            lease("a2", Some("a"), "2026-11-01T09:00:00Z"), // expired already: nothing to wait for
            lease("b0", Some("b"), "2026-11-01T10:00:20Z"),
            lease("x", None, "2026-11-01T10:00:40Z"),
        ]
        .concat();
        let snap = crate::snapshot::from_file_text("l.yaml", &text, None).unwrap();
        let now = Time::parse("2026-11-01T10:00:30Z").unwrap();
        let got = next_expiries(&snap.evidence, now);
        let at = |s: &str| Time::parse(s).unwrap();
        assert_eq!(
            got,
            BTreeMap::from([
                (String::new(), at("2026-11-01T10:01:40Z")),
                ("a".into(), at("2026-11-01T10:01:10Z")),
                ("b".into(), at("2026-11-01T10:01:20Z")),
            ])
        );
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
