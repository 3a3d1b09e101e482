//! What the cluster says about deployments: the status blocks readiness is computed from.
//!
//! Typed views of upstream status (NodeSet, Deployment, batch/v1 Job, OpenStackBaremetalSet,
//! the seeds' Role/Node), of edpm-agent's own status objects (the node agent's reports) and of
//! the Leases the node agents renew. Only the fields readiness reads are kept; everything else
//! is ignored, so a newer operator's extra fields never break decoding. Pure.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::resource::{Meta, ObjRef};
use crate::condition::{Conditions, Time};

/// upstream `AnsibleExecutionSummary`: what the runner reported of one Job, as the operator
/// copies it from the termination message into the NodeSet's and Deployment's status. One
/// definition: the runner writes this type, readiness reads it back.
pub use crate::runner::termination::TerminationMessage as ExecutionSummary;

/// `OpenStackDataPlaneNodeSet.status`, the fields readiness reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSetStatus {
    #[serde(default, deserialize_with = "upstream")]
    pub conditions: Conditions,
    /// Deployment name → that Deployment's `nodeSetConditions[<this NodeSet>]`.
    #[serde(default, deserialize_with = "upstream_map")]
    pub deployment_statuses: BTreeMap<String, Conditions>,
    /// Deployment name → Job name → summary.
    #[serde(default, deserialize_with = "nullable")]
    pub deployment_execution_summaries: BTreeMap<String, BTreeMap<String, ExecutionSummary>>,
    #[serde(default)]
    pub config_hash: Option<String>,
    #[serde(default)]
    pub deployed_config_hash: Option<String>,
    #[serde(default)]
    pub bmh_ref_hash: Option<String>,
    #[serde(default)]
    pub deployed_bmh_hash: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub config_map_hashes: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub secret_hashes: BTreeMap<String, String>,
    #[serde(default)]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub deployed_version: Option<String>,
}

/// `OpenStackDataPlaneDeployment.spec`, the fields readiness reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub node_sets: Vec<String>,
    #[serde(default)]
    pub ansible_limit: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub services_override: Vec<String>,
    #[serde(default)]
    pub backoff_limit: Option<i64>,
}

/// `OpenStackDataPlaneDeployment.status`, the fields readiness reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatus {
    #[serde(default, deserialize_with = "upstream")]
    pub conditions: Conditions,
    #[serde(default, deserialize_with = "upstream_map")]
    pub node_set_conditions: BTreeMap<String, Conditions>,
    #[serde(default, deserialize_with = "nullable")]
    pub ansible_execution_summaries: BTreeMap<String, ExecutionSummary>,
    #[serde(default, deserialize_with = "nullable")]
    pub node_set_hashes: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub bmh_ref_hashes: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub config_map_hashes: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub secret_hashes: BTreeMap<String, String>,
    /// The OpenStackVersion's `spec.targetVersion` when the Deployment completed (upstream
    /// sets it then, whatever services ran; none without an OpenStackVersion).
    #[serde(default)]
    pub deployed_version: Option<String>,
    /// Image field (the OpenStackVersion's Go field name, `OvnControllerImage`) → image, for
    /// each `containerImageFields` entry of the services it ran.
    #[serde(default, deserialize_with = "nullable")]
    pub container_images: BTreeMap<String, String>,
    #[serde(default)]
    pub deployed: bool,
}

#[derive(Debug, Clone)]
pub struct Deployment {
    pub id: ObjRef,
    pub meta: Meta,
    pub spec: DeploymentSpec,
    pub status: DeploymentStatus,
}

/// A Kubernetes Job condition (`Complete`, `Failed`, `SuccessCriteriaMet`, …).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// `batch/v1 Job`: its labels (in `meta`), its limit and its status.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    #[serde(default, deserialize_with = "count")]
    pub active: i64,
    #[serde(default, deserialize_with = "count")]
    pub succeeded: i64,
    #[serde(default, deserialize_with = "count")]
    pub failed: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<JobCondition>,
    #[serde(default)]
    pub start_time: Option<String>,
    #[serde(default)]
    pub completion_time: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    #[serde(default, deserialize_with = "optional_count")]
    pub backoff_limit: Option<i64>,
}

/// The largest count a Job holds: the API's fields are int32.
const MAX_COUNT: i64 = i32::MAX as i64;

/// A Job's count (pods, retries): a whole number from 0 to 2^31-1, as the API server stores
/// it; anything else is named as such, not as serde's "invalid type: floating point".
fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct Count;
    impl serde::de::Visitor<'_> for Count {
        type Value = i64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a count: a whole number from 0 to {MAX_COUNT}")
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<i64, E> {
            if (0..=MAX_COUNT).contains(&v) {
                Ok(v)
            } else {
                Err(E::custom(format!("{v} is not a count (a whole number from 0 to {MAX_COUNT})")))
            }
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<i64, E> {
            match i64::try_from(v) {
                Ok(v) => self.visit_i64(v),
                Err(_) => {
                    Err(E::custom(format!("{v} is not a count (a whole number from 0 to {MAX_COUNT})")))
                }
            }
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<i64, E> {
            Err(E::custom(format!("{v} is not a count (a whole number from 0 to {MAX_COUNT})")))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<i64, E> {
            Ok(0)
        }
    }
    d.deserialize_any(Count)
}

/// An optional count: `null` or absent is `None` (the API's default applies).
fn optional_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    struct Counted(i64);
    impl<'de> Deserialize<'de> for Counted {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Counted, D::Error> {
            count(d).map(Counted)
        }
    }
    Ok(Option::<Counted>::deserialize(d)?.map(|c| c.0))
}

#[derive(Debug, Clone)]
pub struct Job {
    pub id: ObjRef,
    pub meta: Meta,
    pub spec: JobSpec,
    pub status: JobStatus,
}

impl Job {
    /// A Job condition of `type_` that is True.
    pub fn condition(&self, type_: &str) -> Option<&JobCondition> {
        self.status.conditions.iter().find(|c| c.type_ == type_ && c.status == "True")
    }
}

/// A container's `terminated` state: how it ended and its termination message.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Terminated {
    #[serde(default)]
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub finished_at: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateView {
    #[serde(default)]
    pub terminated: Option<Terminated>,
}

/// One of a pod's `status.containerStatuses`: its state, and its last termination (a
/// restarted container's previous run).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub state: ContainerStateView,
    #[serde(default)]
    pub last_state: ContainerStateView,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub container_statuses: Vec<ContainerStatus>,
}

/// A pod of an AnsibleEE Job (label `batch.kubernetes.io/job-name`): one attempt.
#[derive(Debug, Clone)]
pub struct Pod {
    pub id: ObjRef,
    pub meta: Meta,
    pub status: PodStatus,
}

impl Pod {
    /// The Job it ran for: `batch.kubernetes.io/job-name`, or the older `job-name`.
    pub fn job(&self) -> Option<&str> {
        let l = &self.meta.labels;
        l.get("batch.kubernetes.io/job-name").or_else(|| l.get("job-name")).map(String::as_str)
    }

    /// The runner's summary from the termination message, read as upstream's
    /// `ParseAnsibleExecutionSummaryFromPod` does: each container's current termination,
    /// else its last one; the first that parses and names any host. Messages that are not
    /// summaries (a crash's text) are skipped.
    pub fn summary(&self) -> Option<(ExecutionSummary, &Terminated)> {
        self.status.container_statuses.iter().find_map(|c| {
            let t = c.state.terminated.as_ref().or(c.last_state.terminated.as_ref())?;
            let mut s: ExecutionSummary = serde_json::from_str(t.message.as_deref()?).ok()?;
            // Why each host failed becomes a condition message, an Event and a log line: a
            // pod's text (an older runner's, anyone's) passes the one redactor first.
            let redactor = crate::redact::Redactor::default();
            for why in s.host_failures.values_mut() {
                *why = redactor.redact(why);
            }
            (s.total_hosts > 0).then_some((s, t))
        })
    }
}

/// One host of an `OpenStackBaremetalSet.status.baremetalHosts`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BaremetalHost {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub provisioning_state: Option<String>,
    #[serde(default, rename = "bmhRef")]
    pub bmh_ref: Option<String>,
    #[serde(default, rename = "ipAddresses", deserialize_with = "nullable")]
    pub ip_addresses: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BaremetalSetStatus {
    #[serde(default, deserialize_with = "upstream")]
    pub conditions: Conditions,
    #[serde(default, deserialize_with = "nullable")]
    pub baremetal_hosts: BTreeMap<String, BaremetalHost>,
}

#[derive(Debug, Clone)]
pub struct BaremetalSet {
    pub id: ObjRef,
    pub meta: Meta,
    pub status: BaremetalSetStatus,
}

/// The status of a seeds' Role or Node (`conditions`, and `deployed` where it exists).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyStatus {
    #[serde(default, deserialize_with = "upstream")]
    pub conditions: Conditions,
    #[serde(default)]
    pub deployed: bool,
}

/// edpm-agent's own per-node status object, as read back: its conditions (the node agent's
/// among them) and what it names.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReportSpec {
    #[serde(default)]
    pub node_set: String,
    #[serde(default)]
    pub node: String,
    /// What edpm-agent kept of the node's runs and deliveries (`spec.record`).
    #[serde(default, deserialize_with = "nullable")]
    pub record: NodeRecord,
}

/// What edpm-agent keeps of a node so it outlives the Deployments: its runs, and what was
/// last deployed and delivered to it. Kept in the status object's **spec**, which only
/// edpm-agent (`status report`, the controller) writes: the node agent may patch the object's
/// status (its own conditions) and nothing else (`packaging/kubernetes/rbac-node-agent.yaml`),
/// and the API server takes nothing but status through the status subresource, so the node
/// agent cannot certify its own deliveries. A copy in `status` (written before issue 34) is
/// not read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// The node's last runs (at most 20), oldest first: Deployment, service, Job,
    /// attempt, result, finish time and failed task. edpm-agent keeps it from what it sees of
    /// the Jobs' pods and from this list itself, so it outlives the Deployments.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub runs: Vec<NodeRun>,
    /// The OpenStack version last deployed to the node (the OpenStackVersion's target when
    /// the newest completed Deployment that covered the node and ran an `update` or
    /// `update-services` service finished; else its newest completed full Deployment's), and
    /// that Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_version: Option<Stamp>,
    /// Image field (`OvnControllerImage`) → the image last deployed to the node for it, and the
    /// Deployment that deployed it.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "BTreeMap::is_empty")]
    pub container_images: BTreeMap<String, Stamp>,
    /// The Secrets and ConfigMaps last delivered to the node: name, the hash the delivering
    /// Deployment recorded (lib-common's, never contents), the Deployment, and since when the
    /// object differs.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub delivered_inputs: Vec<Delivery>,
}

impl NodeRecord {
    pub fn is_empty(&self) -> bool {
        *self == NodeRecord::default()
    }

    /// What the record says was last deployed to the node.
    pub fn deployed(&self) -> Deployed {
        Deployed { version: self.deployed_version.clone(), images: self.container_images.clone() }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReportStatus {
    #[serde(default)]
    pub observed_generation: Option<i64>,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Conditions,
}

/// One Secret or ConfigMap a completed Deployment delivered to a node: its name and the hash
/// the Deployment recorded of it (lib-common's, never its contents).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// `Secret` or `ConfigMap`.
    pub kind: String,
    pub name: String,
    /// The Deployment's `status.secretHashes` / `status.configMapHashes` entry.
    pub hash: String,
    pub deployment: String,
    /// The Deployment's `creationTimestamp` (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// When the object was first seen to differ from what was delivered (RFC 3339); absent
    /// while it is current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_since: Option<String>,
    /// For a Secret packing the TLS certificates of several nodes (upstream's
    /// `<nodeset>-<service>-<cert>-certs-<n>`): the hash of this node's own keys as delivered,
    /// noted while the Secret was what the Deployment recorded; another node's renewal then
    /// leaves this node current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<String>,
}

/// A value a Deployment deployed to a node: the version or an image, the Deployment, and when
/// that Deployment was created (what orders it against a later one).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stamp {
    pub value: String,
    pub deployment: String,
    /// The Deployment's `creationTimestamp` (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

/// What was last deployed to a node: the OpenStack version, and the image of each image field
/// (`OvnControllerImage`), each with the Deployment that deployed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deployed {
    pub version: Option<Stamp>,
    pub images: BTreeMap<String, Stamp>,
}

/// One run of one service on one node: an attempt of an AnsibleEE Job, from its pod's
/// termination message. Kept in `EDPMNodeStatus.spec.record.runs`, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRun {
    pub deployment: String,
    pub service: String,
    pub job: String,
    /// 1 for the Job's first pod, then one more per retry, in the order the pods ran; 0 when
    /// its pod's place cannot be told (`note` says why).
    pub attempt: u32,
    /// `ok`, `failed`, `unreachable` or `interrupted` (the run was canceled or timed out).
    pub result: String,
    /// When the attempt's container ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// Why the host failed: the runner's `hostFailures` entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_task: Option<String>,
    /// The attempt's pod: what keeps a recorded attempt the same record after its pod (or an
    /// older one) is gone. Absent from records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Why `attempt` was not placed by the pod's `creationTimestamp` (one that cannot be read):
    /// placed by when its container ended, or not at all (attempt 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NodeReport {
    pub id: ObjRef,
    pub meta: Meta,
    pub spec: NodeReportSpec,
    pub status: NodeReportStatus,
}

/// One of edpm-agent's own status objects that does not decode (a field another writer
/// broke, a hand-edited copy): it is skipped, as if absent, and reported, so one bad object
/// never stops every other node's evaluation and write.
#[derive(Debug, Clone)]
pub struct Unreadable {
    pub id: ObjRef,
    pub uid: Option<String>,
    /// What is wrong, naming the field.
    pub problem: String,
}

impl Unreadable {
    /// The warning for it (the status commands' and the controller's): it was skipped.
    pub fn warning(&self) -> String {
        format!(
            "{} cannot be read ({}): skipped, and left as it is; its node is still evaluated; delete it (or mend the field) to have it written anew",
            self.id, self.problem
        )
    }
}

/// A `coordination.k8s.io/v1 Lease` (the node agent's heartbeat).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {
    #[serde(default)]
    pub holder_identity: Option<String>,
    #[serde(default)]
    pub lease_duration_seconds: Option<i64>,
    #[serde(default)]
    pub renew_time: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Lease {
    pub id: ObjRef,
    pub meta: Meta,
    /// `None`: the object has no `spec` at all.
    pub spec: Option<LeaseSpec>,
    /// When the controller, by its own clock, last saw `renewTime` change (`None` outside the
    /// controller). client-go's leader election judges a holder this way: a Lease whose
    /// `renewTime` stops moving ends a duration after it was last seen to move, whatever the
    /// holder's clock wrote.
    pub observed: Option<Time>,
}

/// The longest `leaseDurationSeconds` read as a heartbeat: a day. kubelet's node Leases last
/// 40 s and the node agent's default is the same; a longer one would keep a dead node's last
/// word alive, and an absurd one (2^63 s) would overflow any clock.
pub const MAX_LEASE_SECONDS: i64 = 86_400;

/// What a node agent's Lease says of its heartbeat at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heartbeat {
    /// Renewed, and unexpired until `expires`.
    Alive { renewed: Time, expires: Time },
    /// Its time ran out at `expires`.
    Expired { renewed: Time, expires: Time },
    /// `renewTime` is further ahead of `now` than the Lease lasts: the node's clock (or the
    /// writer's) is wrong, and such a time is no evidence of anything.
    Skewed { renewed: Time, ahead: i64 },
    /// The Lease cannot support anything; the text says which field is wrong.
    Unreadable(String),
}

impl Lease {
    /// The heartbeat as of `now` (see [`Heartbeat`]): the end is a duration after `renewTime`;
    /// with `observed` (the controller), a duration after the earlier of `renewTime` and when
    /// it was last seen to change. The skew tolerated either way is the Lease's duration less
    /// the agent's renewal interval; past it, ahead is `Skewed`, behind is `Expired`.
    pub fn heartbeat(&self, now: Time) -> Heartbeat {
        let Some(spec) = &self.spec else {
            // What `status report` creates for the agent, which has not renewed it (yet): an
            // agent that renews its Lease in another namespace looks like this too.
            return Heartbeat::Unreadable(format!(
                "it has no spec: the node agent never renewed it here (check that the agent runs and that lease_namespace in its node.yaml names namespace {})",
                self.meta.namespace.as_deref().unwrap_or("?")
            ));
        };
        let Some(text) = spec.renew_time.as_deref() else {
            return Heartbeat::Unreadable(format!(
                "spec.renewTime is not set: the node agent never renewed it here (check that the agent runs and that lease_namespace in its node.yaml names namespace {})",
                self.meta.namespace.as_deref().unwrap_or("?")
            ));
        };
        let Some(renewed) = Time::parse(text) else {
            return Heartbeat::Unreadable(format!(
                "spec.renewTime {} is not an RFC 3339 time",
                crate::excerpt::echo(&crate::excerpt::printable(text)).debug()
            ));
        };
        let duration = match spec.lease_duration_seconds {
            None => return Heartbeat::Unreadable("spec.leaseDurationSeconds is not set".into()),
            Some(d) if !(1..=MAX_LEASE_SECONDS).contains(&d) => {
                return Heartbeat::Unreadable(format!(
                    "spec.leaseDurationSeconds {d} is outside 1–{MAX_LEASE_SECONDS} s"
                ));
            }
            Some(d) => d,
        };
        let ahead = renewed.0.saturating_sub(now.0);
        if ahead > duration {
            return Heartbeat::Skewed { renewed, ahead };
        }
        // One rule for every reader (issue 34): the Lease vouches until a duration after its
        // renewTime by the reader's clock; the controller, which watched it, also until a
        // duration after it last saw renewTime change, whichever ends first. What the
        // controller saw only shortens: a node whose clock is behind by more than a Lease
        // lasts reads expired to the controller as to `status show` (both say so), and one
        // ahead is judged by what the controller saw (client-go's rule), not the node's word.
        let from = self.observed.map_or(renewed, |o| o.min(renewed));
        let expires = Time(from.0.saturating_add(duration));
        if expires < now {
            Heartbeat::Expired { renewed, expires }
        } else {
            Heartbeat::Alive { renewed, expires }
        }
    }

    /// When the heartbeat ends, if it is alive at `now`: when the controller must look again.
    pub fn alive_until(&self, now: Time) -> Option<Time> {
        match self.heartbeat(now) {
            Heartbeat::Alive { expires, .. } => Some(expires),
            _ => None,
        }
    }

    /// `spec.renewTime` as written, for the controller's comparison of two readings.
    pub fn renew_time(&self) -> Option<&str> {
        self.spec.as_ref()?.renew_time.as_deref()
    }

    /// Sets [`Lease::observed`] for a reading arriving at `now` (the controller's clock),
    /// given the previous reading of the same Lease: unchanged `renewTime` keeps the time it
    /// was last seen to move; a changed one was renewed now. A Lease seen for the first time
    /// counts from its `renewTime` when that is not in the future (a long-dead node's Lease
    /// is expired at once, as the status commands judge it), else from now.
    pub fn observe(&mut self, previous: Option<&Lease>, now: Time) {
        self.observed = match previous {
            Some(p) if p.renew_time() == self.renew_time() => p.observed.or(Some(now)),
            Some(_) => Some(now),
            None => Some(self.renew_time().and_then(Time::parse).map_or(now, |r| r.min(now))),
        };
    }
}

/// Everything the snapshot holds about deployments and their results.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// NodeSet name → status.
    pub nodesets: BTreeMap<String, NodeSetStatus>,
    /// Role name → status (seeds' model).
    pub roles: BTreeMap<String, LegacyStatus>,
    /// Node name → status (seeds' model).
    pub nodes: BTreeMap<String, LegacyStatus>,
    pub deployments: Vec<Deployment>,
    pub jobs: Vec<Job>,
    /// The Jobs' pods, one per attempt.
    pub pods: Vec<Pod>,
    pub baremetal_sets: Vec<BaremetalSet>,
    pub reports: Vec<NodeReport>,
    /// edpm-agent's own per-NodeSet status objects, as written last time.
    pub rollups: Vec<NodeReport>,
    pub leases: Vec<Lease>,
    /// edpm-agent's own status objects that did not decode: skipped, reported by the shell.
    pub unreadable: Vec<Unreadable>,
    /// Why the node agents' Leases could not be read at all (a 403), when so: said with each
    /// agent condition that a missing Lease turns Unknown.
    pub leases_unread: Option<String>,
    /// What Nova said of the computes, asked live by the shell (`None`: not asked).
    pub nova: Option<std::sync::Arc<crate::nova::NovaEvidence>>,
    /// Saved Nova answers found in a directory source (`openstack … -f json`, or the API's
    /// JSON), used when Nova was not asked live.
    pub nova_saved: Vec<crate::nova::Saved>,
}

impl Evidence {
    pub fn absorb(&mut self, other: Evidence) {
        self.nodesets.extend(other.nodesets);
        self.roles.extend(other.roles);
        self.nodes.extend(other.nodes);
        self.deployments.extend(other.deployments);
        self.jobs.extend(other.jobs);
        self.pods.extend(other.pods);
        self.baremetal_sets.extend(other.baremetal_sets);
        self.reports.extend(other.reports);
        self.rollups.extend(other.rollups);
        self.leases.extend(other.leases);
        self.unreadable.extend(other.unreadable);
        if other.leases_unread.is_some() {
            self.leases_unread = other.leases_unread;
        }
        if other.nova.is_some() {
            self.nova = other.nova;
        }
        self.nova_saved.extend(other.nova_saved);
    }

    pub fn is_empty(&self) -> bool {
        self.nodesets.is_empty()
            && self.roles.is_empty()
            && self.nodes.is_empty()
            && self.deployments.is_empty()
            && self.jobs.is_empty()
            && self.pods.is_empty()
            && self.baremetal_sets.is_empty()
            && self.reports.is_empty()
            && self.rollups.is_empty()
            && self.leases.is_empty()
            && self.nova_saved.is_empty()
    }
}

/// A condition list or map that may be written as `null`.
/// Conditions the operators (or anyone but edpm-agent) wrote: their messages become ours
/// (mirrored, quoted in phases, Events, output), so what they quote passes the one redactor
/// once, here, where it enters. edpm-agent's own status objects are read as written: their
/// messages were built from these, and masking them again would make every message a change.
fn upstream<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Conditions, D::Error> {
    Ok(nullable::<D, Conditions>(d)?.scrubbed())
}

fn upstream_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Conditions>, D::Error> {
    let map: BTreeMap<String, Conditions> = nullable(d)?;
    Ok(map.into_iter().map(|(k, v)| (k, v.scrubbed())).collect())
}

fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::resource::Origin;

    fn lease(renew: Option<&str>, duration: Option<i64>) -> Lease {
        Lease {
            id: ObjRef::new("Lease", "n", Origin::Api { namespace: "openstack".into() }),
            meta: Meta::default(),
            spec: Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: duration,
                renew_time: renew.map(str::to_string),
            }),
            observed: None,
        }
    }

    const NOW: &str = "2026-11-23T12:00:00Z";

    fn now() -> Time {
        Time::parse(NOW).unwrap()
    }

    #[test]
    fn only_a_present_readable_unexpired_lease_is_alive() {
        let alive = lease(Some("2026-11-23T11:59:50Z"), Some(40));
        assert!(
            matches!(alive.heartbeat(now()), Heartbeat::Alive { expires, .. } if expires == Time(now().0 + 30))
        );
        assert!(matches!(
            lease(Some("2026-11-23T11:59:00Z"), Some(40)).heartbeat(now()),
            Heartbeat::Expired { .. }
        ));
        // A node whose clock is two minutes behind renews it as the controller watches: the
        // controller's sight of it moving does not outlast its renewTime (one rule for every
        // reader).
        let mut behind = lease(Some("2026-11-23T11:58:00Z"), Some(40));
        behind.observed = Some(now());
        assert!(
            matches!(behind.heartbeat(now()), Heartbeat::Expired { .. }),
            "{:?}",
            behind.heartbeat(now())
        );
        assert_eq!(behind.heartbeat(now()), lease(Some("2026-11-23T11:58:00Z"), Some(40)).heartbeat(now()));
        // Ahead of now, but by less than it lasts: a small skew, still alive.
        assert!(matches!(
            lease(Some("2026-11-23T12:00:30Z"), Some(40)).heartbeat(now()),
            Heartbeat::Alive { .. }
        ));
        assert_eq!(
            lease(Some("2099-01-01T00:00:00Z"), Some(40)).heartbeat(now()),
            Heartbeat::Skewed {
                renewed: Time::parse("2099-01-01T00:00:00Z").unwrap(),
                ahead: Time::parse("2099-01-01T00:00:00Z").unwrap().0 - now().0
            }
        );
        for (l, says) in [
            (lease(None, Some(40)), "never renewed"),
            (lease(Some("yesterday\u{1b}[2J"), Some(40)), "not an RFC 3339 time"),
            (lease(Some(NOW), None), "leaseDurationSeconds is not set"),
            (lease(Some(NOW), Some(0)), "outside 1–86400"),
            (lease(Some(NOW), Some(i64::MAX)), "9223372036854775807 is outside"),
            (lease(Some(NOW), Some(-5)), "outside"),
            (Lease { spec: None, ..lease(None, None) }, "no spec"),
        ] {
            match l.heartbeat(now()) {
                Heartbeat::Unreadable(why) => {
                    assert!(why.contains(says), "{why}");
                    assert!(!crate::excerpt::has_control(&why), "{why:?}");
                }
                other => panic!("{says}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_controller_judges_a_lease_by_when_it_saw_it_move() {
        let t = |s: i64| Time(now().0 + s);
        // First seen with a renewTime in the past: counts from it (a dead node is dead at once).
        let mut first = lease(Some("2026-11-23T11:59:00Z"), Some(40));
        first.observe(None, now());
        assert_eq!(first.observed, Some(t(-60)));
        assert!(matches!(first.heartbeat(now()), Heartbeat::Expired { .. }));
        // First seen dated ahead (within its duration): counts from now, not from the future.
        let mut ahead = lease(Some("2026-11-23T12:00:30Z"), Some(40));
        ahead.observe(None, now());
        assert_eq!(ahead.observed, Some(now()));
        // It never moves again: it ends 40 s after the controller saw it, not 70 s.
        let mut same = lease(Some("2026-11-23T12:00:30Z"), Some(40));
        same.observe(Some(&ahead), t(20));
        assert_eq!(same.observed, Some(now()));
        assert!(matches!(same.heartbeat(t(41)), Heartbeat::Expired { expires, .. } if expires == t(40)));
        // A renewal seen moves it, whatever the time written.
        let mut moved = lease(Some("2026-11-23T12:00:35Z"), Some(40));
        moved.observe(Some(&same), t(30));
        assert_eq!(moved.observed, Some(t(30)));
        assert!(matches!(moved.heartbeat(t(41)), Heartbeat::Alive { .. }));
    }
}
