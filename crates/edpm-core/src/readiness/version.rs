//! What each node runs: the OpenStack version and the container images last deployed to it,
//! from the Deployments that completed on it, kept in its status object so that they outlive
//! those Deployments; and `VersionCurrent` against the namespace's OpenStackVersion.
//!
//! openstack-operator keeps one version per NodeSet, moved by *any* completed Deployment that
//! ran an update service, whatever its `ansibleLimit`: after the first batch of a batched
//! minor update the whole NodeSet reads as updated. Here the same rules apply per node:
//!
//! - A Deployment counts for a node when it completed on the node's NodeSet
//!   (`NodeSetDeploymentReady` True) and its `ansibleLimit` covers the node, matched as
//!   Ansible matches it (readiness's own rule). Running and failed Deployments never count.
//! - Version: the newest such Deployment that ran a service whose `edpmServiceType` is
//!   `update` or `update-services` sets it, from its `status.deployedVersion` (upstream writes
//!   the OpenStackVersion's `spec.targetVersion` there when it completes). A node no update
//!   Deployment covered takes it from the newest completed full Deployment (no
//!   `servicesOverride`): the deployment that installed it installed the then-current
//!   version. Never from the NodeSet's `status.deployedVersion`.
//! - Images: every such Deployment sets, for each `containerImageFields` entry of the
//!   services it ran, the image it recorded in `status.containerImages`.
//! - Newest is readiness's order (by creation). A value kept in the status object stands until
//!   a Deployment created after the one that set it sets another: a deleted Deployment's
//!   value survives, an older Deployment still present cannot move it back.

use super::*;
use crate::condition::reasons::{NO_TARGET_VERSION, UPDATE_PENDING, VERSION_UNKNOWN};
use crate::condition::types::{NODESET_VERSION_CURRENT, VERSION_CURRENT};
use crate::snapshot::evidence::{Deployed, Stamp};

/// The `edpmServiceType`s whose Deployment moves a version (upstream's rule for the NodeSet).
pub const UPDATE_TYPES: [&str; 2] = ["update", "update-services"];
/// The service type of the minor update's first data-plane step.
pub const OVN_TYPE: &str = "ovn";

/// The namespace's target version: `spec.targetVersion` of its one OpenStackVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Version {
        version: String,
        object: String,
    },
    /// No OpenStackVersion in the namespace.
    None {
        namespace: String,
    },
    /// One that cannot be used (named, with the field).
    Unusable(String),
}

impl Target {
    /// Why there is no target to compare with (`NoTargetVersion`'s message).
    fn missing(&self) -> String {
        match self {
            Target::None { namespace } => {
                format!("no OpenStackVersion {namespace}: no target version to compare with")
            }
            Target::Unusable(problem) => problem.clone(),
            Target::Version { version, object } => format!("target {version} (OpenStackVersion {object})"),
        }
    }
}

/// The OpenStackVersion target for objects in `namespace` (`None`: a directory source's
/// objects without one, which any OpenStackVersion given beside them serves).
pub fn target(snap: &Snapshot, namespace: Option<&str>) -> Target {
    let found: Vec<&crate::snapshot::resource::Object<serde_json::Value>> = snap
        .openstack
        .iter()
        .filter(|o| o.id.kind == "OpenStackVersion")
        .filter(|o| match (namespace, o.meta.namespace.as_deref()) {
            (Some(want), Some(ns)) => want == ns,
            _ => true,
        })
        .collect();
    let ns = namespace.map_or_else(|| "in the source".to_string(), |n| format!("in namespace {n}"));
    match found.as_slice() {
        [] => Target::None { namespace: ns },
        [one] => {
            let name = &one.id.name;
            match one.body.get("spec").and_then(|s| s.get("targetVersion")) {
                Some(serde_json::Value::String(v)) if !v.trim().is_empty() => {
                    Target::Version { version: v.clone(), object: name.clone() }
                }
                Some(serde_json::Value::String(_)) | None | Some(serde_json::Value::Null) => {
                    Target::Unusable(format!(
                        "OpenStackVersion {name}: spec.targetVersion is not set; set it to the version the cloud updates to"
                    ))
                }
                Some(other) => Target::Unusable(format!(
                    "OpenStackVersion {name}: spec.targetVersion is {}, not a string; write it as a string (quoted)",
                    crate::excerpt::printable(&other.to_string())
                )),
            }
        }
        many => Target::Unusable(format!(
            "{} OpenStackVersions {ns} ({}): upstream takes exactly one; delete the others",
            many.len(),
            many.iter().map(|o| o.id.name.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Whether a value set by Deployment `candidate` (with its `creationTimestamp`) replaces one
/// kept from Deployment `kept`: the same Deployment, one created no earlier, or a kept value
/// without a creation time. A kept value outlives its Deployment; an older Deployment still
/// present cannot move it back.
pub(super) fn replaces(candidate: (&str, Option<&str>), kept: (&str, Option<&str>)) -> bool {
    if candidate.0 == kept.0 {
        return true;
    }
    match (candidate.1.and_then(Time::parse), kept.1.and_then(Time::parse)) {
        (Some(c), Some(k)) => c >= k,
        _ => true,
    }
}

/// Whether a value kept in a node's status object (delivered by Deployment `deployment`,
/// created at `created`) can be evidence at `now`: a Deployment the snapshot holds under
/// that name must have that creation time (a kept value cannot claim a real Deployment's
/// name and another date), and a creation time must be a time, not in the future (as a
/// Lease renewed in 2099 vouches for nothing, a delivery dated 2099 would outrank every real
/// Deployment for ever). A kept value without a creation time stays, and any real Deployment
/// replaces it ([`replaces`]).
pub(super) fn admissible(
    deployments: &[crate::snapshot::evidence::Deployment],
    deployment: &str,
    created: Option<&str>,
    now: Time,
) -> bool {
    if let Some(real) = deployments.iter().find(|d| d.id.name == deployment)
        && real.meta.creation_timestamp.as_deref().and_then(Time::parse) != created.and_then(Time::parse)
    {
        return false;
    }
    match created {
        None => true,
        Some(t) => Time::parse(t).is_some_and(|t| t <= now),
    }
}

fn stamp_replaces(candidate: &Stamp, kept: &Stamp) -> bool {
    replaces(
        (&candidate.deployment, candidate.created.as_deref()),
        (&kept.deployment, kept.created.as_deref()),
    )
}

/// `VersionCurrent` among what a node runs and holds (`super::HOLDINGS`).
pub(super) const HOLDING: Holding = Holding {
    ty: VERSION_CURRENT,
    node: |cx, m, held| cx.version_current(m, held.deployed),
    nodeset: |cx, nodes| (cx.nodeset_version_current(nodes), Vec::new()),
};

impl<'a> GroupContext<'a> {
    /// The completed runs that cover the host of inventory hostname `host`, oldest first,
    /// with their Deployments: those that completed, and those that failed for good but
    /// completed on this host ([`Self::failed_but_done_on`]).
    pub(super) fn completed_on(&self, host: &str) -> Vec<(usize, &'a crate::snapshot::evidence::Deployment)> {
        (0..self.runs.len())
            .filter(|&i| self.runs[i].covers(host) == Covers::Yes)
            .filter(|&i| match self.states[i] {
                RunState::Done => true,
                RunState::Failed { terminal: true } => self.failed_but_done_on(i, host),
                _ => false,
            })
            .filter_map(|i| self.runs[i].deployment.map(|d| (i, d)))
            .collect()
    }

    /// The version a run that failed for good deployed to the hosts it completed, which
    /// upstream never records (it writes `deployedVersion` only on completion, the target of
    /// that moment): the target now, when a Deployment of this NodeSet that completed before
    /// run `i` was created recorded that same version, so the target was already it when run
    /// `i` ran (a target only moves forward). Otherwise none: no version is credited.
    fn failed_run_version(&self, i: usize, d: &crate::snapshot::evidence::Deployment) -> Option<&str> {
        if self.states[i] != (RunState::Failed { terminal: true }) {
            return None;
        }
        let Target::Version { version, .. } = &self.target else { return None };
        let created = d.meta.creation_timestamp.as_deref().and_then(Time::parse)?;
        let before = (0..self.runs.len()).any(|j| {
            self.states[j] == RunState::Done
                && self.runs[j]
                    .deployment
                    .is_some_and(|e| e.status.deployed_version.as_ref() == Some(version))
                && self.runs[j].nodeset_condition().is_some_and(|c| c.last_transition_time <= created)
        });
        before.then_some(version.as_str())
    }

    /// Whether run `i`, which failed for good, did on `host` all a completed run does: every
    /// service it runs is done on the NodeSet (its condition True, its Job not failed), or
    /// failed there while its Job's newest attempt ran the playbook to the end for `host`
    /// (`completedHostList`). A service it never reached, or one still pending, and it does not.
    pub(super) fn failed_but_done_on(&self, i: usize, host: &str) -> bool {
        let run = &self.runs[i];
        !self.run_svcs[i].is_empty()
            && self.run_svcs[i].iter().all(|&k| {
                let name = self.svcs[k].name;
                match self.outcomes[i][k] {
                    Some(Outcome::Done(_)) => {
                        !self.failed_jobs.iter().any(|(s, d)| *s == name && *d == run.name)
                    }
                    Some(Outcome::Failed(_)) => self.completed_here(name, run, &[host]).is_some(),
                    _ => false,
                }
            })
    }

    /// A completed run whose `ansibleLimit` cannot be evaluated, that may have covered `host`
    /// and still matters to what it runs and holds, as the message of `LimitUnknown`: one no
    /// newer completed run that covered the host supersedes (one that ran every service it ran
    /// and recorded every input it recorded, a full one if it was full).
    pub(super) fn undecided_on(&self, host: &str) -> Option<String> {
        let done = self.completed_on(host);
        (0..self.runs.len()).filter(|&i| self.states[i] == RunState::Done).find_map(|i| {
            let Covers::Unknown(why) = self.runs[i].covers(host) else { return None };
            let u = self.runs[i].deployment?;
            let superseded = done.iter().any(|&(j, d)| {
                let (run, older) = (&self.runs[j], &self.runs[i]);
                replaces(
                    (run.name, d.meta.creation_timestamp.as_deref()),
                    (older.name, u.meta.creation_timestamp.as_deref()),
                ) && run.name != older.name
                    && older.services.iter().all(|s| run.services.contains(s))
                    && u.status.secret_hashes.keys().all(|k| d.status.secret_hashes.contains_key(k))
                    && u.status.config_map_hashes.keys().all(|k| d.status.config_map_hashes.contains_key(k))
                    && (!u.spec.services_override.is_empty() || d.spec.services_override.is_empty())
            });
            (!superseded).then(|| {
                super::service::limit_unknown(
                    &self.runs[i],
                    why,
                    "whether it deployed to this node, and so what the node runs and holds,",
                )
            })
        })
    }

    fn stamp(&self, i: usize, d: &crate::snapshot::evidence::Deployment, value: &str) -> Stamp {
        Stamp {
            value: value.to_string(),
            deployment: self.runs[i].name.to_string(),
            created: d.meta.creation_timestamp.clone(),
        }
    }

    /// What was last deployed to the node: from the completed Deployments that covered it,
    /// over what its status object kept.
    pub(super) fn deployed(&self, m: &Member, kept: Option<&Deployed>, now: Time) -> Deployed {
        let done = self.completed_on(m.inventory_hostname());
        let mut out = kept.cloned().unwrap_or_default();
        // What was kept is evidence only where it can be (`admissible`).
        let deployments = &self.snap.evidence.deployments;
        let ok = |s: &Stamp| admissible(deployments, &s.deployment, s.created.as_deref(), now);
        out.version = out.version.filter(ok);
        out.images.retain(|_, s| ok(s));
        let runs_type = |i: usize, types: &[&str]| {
            self.runs[i].services.iter().any(|s| types.contains(&self.snap.service_type(s).as_str()))
        };
        let version = done
            .iter()
            .rev()
            .filter(|(i, _)| runs_type(*i, &UPDATE_TYPES))
            .chain(done.iter().rev().filter(|(_, d)| d.spec.services_override.is_empty()))
            .find_map(|(i, d)| {
                let v = d.status.deployed_version.as_deref().or_else(|| self.failed_run_version(*i, d))?;
                Some(self.stamp(*i, d, v))
            });
        if let Some(v) = version
            && out.version.as_ref().is_none_or(|k| stamp_replaces(&v, k))
        {
            out.version = Some(v);
        }
        for (i, d) in &done {
            for s in &self.runs[*i].services {
                for field in self.snap.service_image_fields(s) {
                    let Some(image) = d.status.container_images.get(field) else { continue };
                    let v = self.stamp(*i, d, image);
                    if out.images.get(field).is_none_or(|k| stamp_replaces(&v, k)) {
                        out.images.insert(field.clone(), v);
                    }
                }
            }
        }
        out
    }

    /// Whether a completed Deployment that covered the node ran the `ovn` step for `target`.
    fn ovn_step_done(&self, m: &Member, target: &str) -> bool {
        self.completed_on(m.inventory_hostname()).iter().any(|(i, d)| {
            d.status.deployed_version.as_deref() == Some(target)
                && self.runs[*i].services.iter().any(|s| self.snap.service_type(s) == OVN_TYPE)
        })
    }

    /// `VersionCurrent`: the node's version against the target (not a member of `Ready`: a
    /// node on the previous version still serves).
    pub(super) fn version_current(&self, m: &Member, d: &Deployed) -> (Condition, Vec<String>) {
        let mut ev = deployed_evidence(d);
        let Target::Version { version, object } = &self.target else {
            return (Condition::because(VERSION_CURRENT, &NO_TARGET_VERSION, self.target.missing()), ev);
        };
        let recorded = self.target_recorded(version);
        ev.push(match recorded {
            Some((t, by)) => format!(
                "target {version} (OpenStackVersion {object}), first deployed by Deployment {by}, completed {t}"
            ),
            None => format!("target {version} (OpenStackVersion {object}), deployed by no Deployment yet"),
        });
        let nodeset_says = self.status.and_then(|s| s.deployed_version.as_deref());
        let Some(node_version) = &d.version else {
            return (self.version_not_recorded(m, version, nodeset_says), ev);
        };
        // Since the node got its version (the Deployment that set it completed); behind, since
        // the later of that and the target's first deployment, when one says when.
        let set = self.completed_at(&node_version.deployment, node_version.created.as_deref());
        if node_version.value == *version {
            let c = Condition::true_(
                VERSION_CURRENT,
                format!("at {version} (Deployment {})", node_version.deployment),
            );
            return (Condition { last_transition_time: set, ..c }, ev);
        }
        let since = match recorded {
            Some((t, _)) if set != Time(0) => set.max(t),
            _ => set,
        };
        let steps = self.missing_steps(m, version);
        let c = Condition::because(
            VERSION_CURRENT,
            &UPDATE_PENDING,
            format!(
                "at {} (Deployment {}); target {version}; not run on this node: {steps}",
                node_version.value, node_version.deployment
            ),
        );
        (Condition { last_transition_time: since, ..c }, ev)
    }

    /// When what Deployment `name` set on its nodes was set: its `NodeSetDeploymentReady` True
    /// on this NodeSet (when it completed), else its creation (`created`, what a record kept
    /// of a Deployment since deleted); zero when nothing says.
    pub(super) fn completed_at(&self, name: &str, created: Option<&str>) -> Time {
        let run = self.runs.iter().find(|r| r.name == name);
        let done =
            run.and_then(Run::nodeset_condition).filter(|c| c.is_true()).map(|c| c.last_transition_time);
        done.filter(|t| *t != Time(0))
            .or_else(|| run.and_then(Run::created))
            .or_else(|| created.and_then(Time::parse))
            .unwrap_or_default()
    }

    /// The first completion of a Deployment in this namespace that recorded `target` as its
    /// `deployedVersion` (upstream writes the OpenStackVersion's target there): since then, at
    /// the latest, `target` is the version to be at. With that Deployment's name.
    fn target_recorded(&self, target: &str) -> Option<(Time, &'a str)> {
        let ns = self.group_namespace();
        self.snap
            .evidence
            .deployments
            .iter()
            .filter(|d| d.status.deployed_version.as_deref() == Some(target))
            .filter(|d| match (&ns, &d.meta.namespace) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            })
            .filter_map(|d| {
                let ready = d.status.node_set_conditions.values().filter_map(|c| {
                    c.get(crate::condition::types::NODESET_DEPLOYMENT_READY)
                        .filter(|c| c.is_true() && c.last_transition_time != Time(0))
                        .map(|c| c.last_transition_time)
                });
                let created =
                    || d.status.deployed.then(|| d.meta.creation_timestamp.as_deref().and_then(Time::parse));
                let t = ready.min().or_else(|| created().flatten())?;
                Some((t, d.id.name.as_str()))
            })
            .min()
    }

    /// `VersionCurrent` of a node no Deployment recorded a version for: Unknown, unless the
    /// NodeSet says one (which upstream moves after any batch, so it is not the node's).
    fn version_not_recorded(&self, m: &Member, target: &str, nodeset_says: Option<&str>) -> Condition {
        let nodeset = match nodeset_says {
            None => format!("and NodeSet {} has none either", self.group.name),
            // Upstream moves it after any batch: it is no evidence of this node's.
            Some(said) => format!(
                "and NodeSet {}'s {said} (target {target}) may come from a Deployment that left it out",
                self.group.name
            ),
        };
        Condition::because(
            VERSION_CURRENT,
            &VERSION_UNKNOWN,
            format!("no completed Deployment that covered {} recorded a version, {nodeset}", m.key),
        )
    }

    /// When the node is behind the target version: the target and the first step it misses
    /// (`ovn`, then `update`), for `status plan`.
    pub(super) fn behind(&self, m: &Member, c: &Condition) -> Option<(String, &'static str)> {
        let Target::Version { version, .. } = &self.target else { return None };
        if c.status != crate::condition::Status::False {
            return None;
        }
        Some((version.clone(), if self.ovn_step_done(m, version) { "update" } else { OVN_TYPE }))
    }

    /// The minor update's data-plane steps not run on the node for `target`.
    fn missing_steps(&self, m: &Member, target: &str) -> String {
        if self.ovn_step_done(m, target) { "update".into() } else { "ovn, update".into() }
    }

    /// `NodeSetVersionCurrent`: how many nodes are at the target, and which are behind.
    pub(super) fn nodeset_version_current(&self, nodes: &[NodeView]) -> Condition {
        let Target::Version { version, .. } = &self.target else {
            return Condition::because(NODESET_VERSION_CURRENT, &NO_TARGET_VERSION, self.target.missing());
        };
        let status = |n: &&NodeView| n.conditions.get(VERSION_CURRENT).map(|c| c.status);
        let of = |s: crate::condition::Status| -> Vec<&str> {
            nodes.iter().filter(|n| status(n) == Some(s)).map(|n| n.node.as_str()).collect()
        };
        let (behind, unknown) = (of(crate::condition::Status::False), of(crate::condition::Status::Unknown));
        let at = nodes.len() - behind.len() - unknown.len();
        let unknown_words = if unknown.is_empty() {
            String::new()
        } else {
            format!("; version not recorded: {}", names_cut(&unknown))
        };
        if !behind.is_empty() {
            return Condition::because(
                NODESET_VERSION_CURRENT,
                &UPDATE_PENDING,
                format!(
                    "{at}/{} nodes at {version}; behind: {}{unknown_words}",
                    nodes.len(),
                    names_cut(&behind)
                ),
            );
        }
        if !unknown.is_empty() {
            return Condition::because(
                NODESET_VERSION_CURRENT,
                &VERSION_UNKNOWN,
                format!("{at}/{} nodes at {version}{unknown_words}", nodes.len()),
            );
        }
        Condition::true_(NODESET_VERSION_CURRENT, format!("{at}/{} nodes at {version}", nodes.len()))
    }
}

/// What was deployed to a node, for `status explain`.
fn deployed_evidence(d: &Deployed) -> Vec<String> {
    let mut ev = Vec::new();
    if let Some(v) = &d.version {
        ev.push(format!("deployed version {} (Deployment {})", v.value, v.deployment));
    }
    for (field, img) in &d.images {
        ev.push(format!("{field}: {} (Deployment {})", img.value, img.deployment));
    }
    ev
}

/// `a, b, c … (63)`: the first ten names, then how many in all.
pub(super) fn names_cut(names: &[&str]) -> String {
    const SHOWN: usize = 10;
    if names.len() <= SHOWN {
        return names.join(", ");
    }
    format!("{} … ({})", names[..SHOWN].join(", "), names.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::Status;
    use crate::condition::types::{NODESET_SECRETS_CURRENT, SECRETS_CURRENT};
    use crate::snapshot;

    const NODESET: &str = r#"
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNodeSet
metadata: {name: ns1, namespace: openstack}
spec:
  preProvisioned: true
  services: [configure-os, ovn, nova]
  nodeTemplate: {ansibleSSHPrivateKeySecret: key}
  nodes:
    c0: {hostName: c0, ansible: {ansibleHost: 192.0.2.10}}
    c1: {hostName: c1, ansible: {ansibleHost: 192.0.2.11}}
    c2: {hostName: c2, ansible: {ansibleHost: 192.0.2.12}}
status:
  configHash: h1
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneService
metadata: {name: ovn, namespace: openstack}
spec: {edpmServiceType: ovn, containerImageFields: [OvnControllerImage]}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneService
metadata: {name: update, namespace: openstack}
spec: {edpmServiceType: update}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneService
metadata: {name: nova, namespace: openstack}
spec: {edpmServiceType: nova, containerImageFields: [NovaComputeImage]}
"#;

    fn osv(target: &str) -> String {
        format!(
            "---\napiVersion: core.openstack.org/v1beta1\nkind: OpenStackVersion\nmetadata: {{name: openstack, namespace: openstack}}\nspec: {{targetVersion: {target}}}\n"
        )
    }

    /// A Deployment over ns1: `done` (completed), `running` or `failed`; `services` as its
    /// `servicesOverride` (empty: the NodeSet's), `limit` as its `ansibleLimit`.
    fn deployment(
        name: &str,
        created: &str,
        state: &str,
        services: &[&str],
        limit: &str,
        version: &str,
        images: &str,
    ) -> String {
        let (status, reason, sev) = match state {
            "done" => ("True", "Ready", ""),
            "running" => ("False", "Requested", ", severity: Info"),
            _ => ("False", "Error", ", severity: Error"),
        };
        let over = if services.is_empty() {
            String::new()
        } else {
            format!("  servicesOverride: [{}]\n", services.join(", "))
        };
        let lim = if limit.is_empty() { String::new() } else { format!("  ansibleLimit: \"{limit}\"\n") };
        let ver =
            if version.is_empty() { String::new() } else { format!("  deployedVersion: \"{version}\"\n") };
        let img = if images.is_empty() { String::new() } else { format!("  containerImages: {images}\n") };
        format!(
            "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneDeployment\nmetadata: {{name: {name}, namespace: openstack, creationTimestamp: \"{created}\"}}\nspec:\n  nodeSets: [ns1]\n{over}{lim}status:\n  nodeSetHashes: {{ns1: h1}}\n{ver}{img}  nodeSetConditions:\n    ns1:\n      - {{type: NodeSetDeploymentReady, status: \"{status}\", reason: {reason}{sev}, message: m, lastTransitionTime: \"{created}\"}}\n"
        )
    }

    fn evaluate(text: &str) -> Readiness {
        let snap = snapshot::from_file_text("t.yaml", text, None).unwrap();
        let model = crate::model::resolve(&snap).unwrap();
        super::super::evaluate(
            &snap,
            &model,
            &PhaseMap::default(),
            Options { evidence: true },
            Time::parse("2026-11-23T12:00:00Z").unwrap(),
        )
    }

    fn version<'a>(r: &'a Readiness, node: &str) -> &'a Condition {
        r.nodes.iter().find(|n| n.node == node).unwrap().conditions.get(VERSION_CURRENT).unwrap()
    }

    /// The documented minor update in batches: a full deployment at 18.0.3, the `ovn` step
    /// everywhere, then `update` on c0 and c1 (done) and on c2 (still running).
    fn batches(second: &str) -> String {
        [
            NODESET.to_string(),
            osv("18.0.4"),
            deployment(
                "install",
                "2026-11-01T00:00:00Z",
                "done",
                &[],
                "",
                "18.0.3",
                "{OvnControllerImage: ovn:old, NovaComputeImage: nova:old}",
            ),
            deployment(
                "ovn-all",
                "2026-11-10T00:00:00Z",
                "done",
                &["ovn"],
                "",
                "18.0.4",
                "{OvnControllerImage: ovn:new}",
            ),
            deployment("update-1", "2026-11-11T00:00:00Z", "done", &["update"], "c0,c1", "18.0.4", ""),
            deployment("update-2", "2026-11-12T00:00:00Z", second, &["update"], "c2", "18.0.4", ""),
        ]
        .concat()
    }

    #[test]
    fn batches_move_exactly_their_nodes() {
        let r = evaluate(&batches("running"));
        for n in ["c0", "c1"] {
            let c = version(&r, n);
            assert_eq!(
                (c.status, c.message.as_str()),
                (Status::True, "at 18.0.4 (Deployment update-1)"),
                "{n}"
            );
        }
        let c = version(&r, "c2");
        assert_eq!((c.status, c.reason.as_str()), (Status::False, "UpdatePending"));
        assert_eq!(c.message, "at 18.0.3 (Deployment install); target 18.0.4; not run on this node: update");
        let set = r.nodesets[0].conditions.get(NODESET_VERSION_CURRENT).unwrap();
        assert_eq!(set.message, "2/3 nodes at 18.0.4; behind: c2");
        // Images: the ovn step's on every node, nova's from the install.
        let c2 = r.nodes.iter().find(|n| n.node == "c2").unwrap();
        assert_eq!(c2.deployed.images["OvnControllerImage"].value, "ovn:new");
        assert_eq!(c2.deployed.images["OvnControllerImage"].deployment, "ovn-all");
        assert_eq!(c2.deployed.images["NovaComputeImage"].value, "nova:old");
        // Not Ready's business: a node on the old version still serves.
        assert!(c2.conditions.get(READY).is_some_and(|c| !c.message.contains("18.0")));
        // A failed batch moves nothing either; the second batch done moves c2.
        assert_eq!(version(&evaluate(&batches("failed")), "c2").status, Status::False);
        let done = evaluate(&batches("done"));
        assert_eq!(version(&done, "c2").message, "at 18.0.4 (Deployment update-2)");
        assert_eq!(done.nodesets[0].conditions.get(NODESET_VERSION_CURRENT).unwrap().status, Status::True);
    }

    /// Dated by the evidence, never "since unknown" beside a message that names the
    /// Deployments: at the target since the Deployment that set it completed; behind since the
    /// later of the node's version and the target's first deployment (else the version's).
    #[test]
    fn versions_are_dated_by_the_deployments_that_set_them() {
        let t = |s: &str| Time::parse(s).unwrap();
        let r = evaluate(&batches("running"));
        assert_eq!(version(&r, "c0").last_transition_time, t("2026-11-11T00:00:00Z"));
        // c2 at 18.0.3 since 2026-11-01, behind since 18.0.4 was first deployed (ovn-all).
        assert_eq!(version(&r, "c2").last_transition_time, t("2026-11-10T00:00:00Z"));
        let c2 = r.nodes.iter().find(|n| n.node == "c2").unwrap();
        assert!(!c2.untimed.contains(VERSION_CURRENT));
        assert!(
            c2.evidence[VERSION_CURRENT].contains(
                &"target 18.0.4 (OpenStackVersion openstack), first deployed by Deployment ovn-all, completed 2026-11-10T00:00:00Z"
                    .to_string()
            ),
            "{:?}",
            c2.evidence[VERSION_CURRENT]
        );
        // The target deployed nowhere yet: behind since the node's version was set.
        let text = [
            NODESET.to_string(),
            osv("18.0.4"),
            deployment("install", "2026-11-01T00:00:00Z", "done", &[], "", "18.0.3", ""),
        ]
        .concat();
        assert_eq!(version(&evaluate(&text), "c1").last_transition_time, t("2026-11-01T00:00:00Z"));
        // Every input current since the newest delivery completed.
        let r = evaluate(&rotation(&secret("cell1-secret", "new")));
        let c = inputs(&r, "c0");
        assert_eq!((c.status, c.last_transition_time), (Status::True, t("2026-11-10T00:00:00Z")), "{c:?}");
    }

    #[test]
    fn the_ovn_step_is_named_while_it_has_not_run() {
        let text = [
            NODESET.to_string(),
            osv("18.0.4"),
            deployment("install", "2026-11-01T00:00:00Z", "done", &[], "", "18.0.3", ""),
            deployment("ovn-c0", "2026-11-10T00:00:00Z", "done", &["ovn"], "c0", "18.0.4", ""),
        ]
        .concat();
        let r = evaluate(&text);
        assert!(version(&r, "c0").message.ends_with("not run on this node: update"));
        assert!(version(&r, "c1").message.ends_with("not run on this node: ovn, update"));
    }

    #[test]
    fn without_a_usable_target_the_condition_is_unknown_and_says_why() {
        let base = [
            NODESET.to_string(),
            deployment("install", "2026-11-01T00:00:00Z", "done", &[], "", "18.0.3", ""),
        ]
        .concat();
        let c = version(&evaluate(&base), "c0").clone();
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, "NoTargetVersion"));
        assert!(c.message.contains("no OpenStackVersion in namespace openstack"), "{}", c.message);
        let number = format!("{base}{}", osv("18"));
        assert!(version(&evaluate(&number), "c0").message.contains("spec.targetVersion is 18, not a string"));
        let unset = format!(
            "{base}---\napiVersion: core.openstack.org/v1beta1\nkind: OpenStackVersion\nmetadata: {{name: v, namespace: openstack}}\nspec: {{}}\n"
        );
        assert!(
            version(&evaluate(&unset), "c0")
                .message
                .contains("OpenStackVersion v: spec.targetVersion is not set")
        );
        let two =
            format!("{base}{}{}", osv("18.0.4"), osv("18.0.4").replace("name: openstack,", "name: other,"));
        assert!(
            version(&evaluate(&two), "c0")
                .message
                .contains("2 OpenStackVersions in namespace openstack (openstack, other)")
        );
    }

    #[test]
    fn a_node_nothing_versioned_is_unknown_unless_the_nodeset_says_a_version() {
        // A Deployment done before any OpenStackVersion existed records none.
        let base = [
            NODESET.to_string(),
            osv("18.0.4"),
            deployment("install", "2026-11-01T00:00:00Z", "done", &[], "", "", ""),
        ]
        .concat();
        let c = version(&evaluate(&base), "c0").clone();
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, "VersionUnknown"));
        let said = base.replace("  configHash: h1\n", "  configHash: h1\n  deployedVersion: \"18.0.4\"\n");
        let c = version(&evaluate(&said), "c0").clone();
        assert_eq!(c.status, Status::Unknown, "the NodeSet's version is not the node's");
        assert!(
            c.message
                .contains("NodeSet ns1's 18.0.4 (target 18.0.4) may come from a Deployment that left it out"),
            "{}",
            c.message
        );
        // Nothing to plan for a version nobody recorded.
        assert!(evaluate(&said).nodes.iter().all(|n| n.behind.is_none()));
        let set = evaluate(&said).nodesets[0].conditions.get(NODESET_VERSION_CURRENT).unwrap().clone();
        assert_eq!(
            (set.status, set.message.as_str()),
            (Status::Unknown, "0/3 nodes at 18.0.4; version not recorded: c0, c1, c2")
        );
    }

    #[test]
    fn a_kept_version_outlives_its_deployment_and_is_not_moved_back() {
        // c2's status object says update-9 (since deleted, created after every Deployment
        // here) deployed 18.0.4: an older Deployment still present does not move it back.
        let kept = "---\napiVersion: agent.edpm.openstack.org/v1alpha1\nkind: EDPMNodeStatus\nmetadata: {name: ns1-c2, namespace: openstack}\nspec:\n  nodeSet: ns1\n  node: c2\n  record:\n    deployedVersion: {value: 18.0.4, deployment: update-9, created: \"2026-11-20T00:00:00Z\"}\n    containerImages: {OvnControllerImage: {value: \"ovn:newest\", deployment: ovn-9, created: \"2026-11-20T00:00:00Z\"}}\n";
        let r = evaluate(&format!("{}{kept}", batches("failed")));
        assert_eq!(version(&r, "c2").message, "at 18.0.4 (Deployment update-9)");
        let c2 = r.nodes.iter().find(|n| n.node == "c2").unwrap();
        assert_eq!(c2.deployed.images["OvnControllerImage"].value, "ovn:newest");
        // A Deployment created later replaces what was kept.
        let later = deployment("update-10", "2026-11-21T00:00:00Z", "done", &["update"], "c2", "18.0.5", "");
        let r = evaluate(&format!("{}{kept}{later}", batches("failed")));
        assert!(version(&r, "c2").message.starts_with("at 18.0.5 (Deployment update-10)"));
    }

    // Delivered inputs (`inputs.rs`), on the same NodeSet.

    fn secret(name: &str, password: &str) -> String {
        format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: openstack}}\nstringData: {{password: {password}}}\n"
        )
    }

    /// The hash upstream records of `secret(name, password)`, as the API server stores it.
    fn recorded(password: &str) -> String {
        let data = BTreeMap::from([("password".to_string(), password.as_bytes().to_vec())]);
        crate::objecthash::secret_parts(&data, &BTreeMap::new(), "Opaque")
    }

    fn with_secret_hashes(deployment: String, hashes: &str) -> String {
        deployment.replacen("status:\n", &format!("status:\n  secretHashes: {hashes}\n"), 1)
    }

    fn inputs<'a>(r: &'a Readiness, node: &str) -> &'a Condition {
        r.nodes.iter().find(|n| n.node == node).unwrap().conditions.get(SECRETS_CURRENT).unwrap()
    }

    /// The install delivered the old password everywhere; it was rotated, and the rotation
    /// delivered to c0 and c1 only.
    fn rotation(now_secret: &str) -> String {
        [
            NODESET.to_string(),
            now_secret.to_string(),
            with_secret_hashes(
                deployment("install", "2026-11-01T00:00:00Z", "done", &[], "", "", ""),
                &format!("{{cell1-secret: {}}}", recorded("old")),
            ),
            with_secret_hashes(
                deployment("rotate-1", "2026-11-10T00:00:00Z", "done", &["nova"], "c0,c1", "", ""),
                &format!("{{cell1-secret: {}}}", recorded("new")),
            ),
        ]
        .concat()
    }

    #[test]
    fn a_rotated_secret_is_current_exactly_where_it_was_delivered() {
        let r = evaluate(&rotation(&secret("cell1-secret", "new")));
        for n in ["c0", "c1"] {
            let c = inputs(&r, n);
            assert_eq!(
                (c.status, c.message.as_str()),
                (Status::True, "every delivered input current (1 Secrets, 0 ConfigMaps)"),
                "{n}"
            );
        }
        let c = inputs(&r, "c2");
        assert_eq!((c.status, c.reason.as_str()), (Status::False, "SecretsStale"));
        // Since when: the evidence's word (rotate-1 recorded another hash), never the clock.
        assert_eq!(
            c.message,
            "stale: Secret cell1-secret (delivered by install, differs since 2026-11-10T00:00:00Z: Deployment rotate-1 recorded another)"
        );
        let set = r.nodesets[0].conditions.get(NODESET_SECRETS_CURRENT).unwrap();
        assert_eq!(set.message, "2/3 nodes have every current input; stale: cell1-secret on c2");
        // Names and hashes only: the password is nowhere.
        let text = format!("{:?}", r.nodes);
        assert!(!text.contains("new\"") && !text.contains("password"), "{text}");
        // The difference is noted with a time, for the status object.
        let c2 = r.nodes.iter().find(|n| n.node == "c2").unwrap();
        assert_eq!(c2.delivered[0].stale_since.as_deref(), Some("2026-11-10T00:00:00Z"));
        // Nothing rotated yet: every node current; the Secret deleted: said so.
        let r = evaluate(&rotation(&secret("cell1-secret", "old")));
        assert_eq!(inputs(&r, "c2").status, Status::True);
        assert_eq!(inputs(&r, "c0").status, Status::False, "c0 got the new one, the Secret holds the old");
        let r = evaluate(&rotation(""));
        assert!(
            inputs(&r, "c2").message.contains(
                "Secret cell1-secret (does not exist: deleted, or never made; delivered by install)"
            )
        );
    }

    #[test]
    fn a_difference_noted_before_keeps_its_time_and_a_deleted_deployment_its_delivery() {
        // c2's status object remembers a delivery by a Deployment since deleted, seen
        // differing since the 15th.
        let kept = format!(
            "---\napiVersion: agent.edpm.openstack.org/v1alpha1\nkind: EDPMNodeStatus\nmetadata: {{name: ns1-c2, namespace: openstack}}\nspec:\n  nodeSet: ns1\n  node: c2\n  record:\n    deliveredInputs:\n    - {{kind: Secret, name: cell1-secret, hash: {}, deployment: gone-1, created: \"2026-11-05T00:00:00Z\", staleSince: \"2026-11-15T00:00:00Z\"}}\n",
            recorded("old")
        );
        let r = evaluate(&format!("{}{kept}", rotation(&secret("cell1-secret", "new"))));
        let c = inputs(&r, "c2");
        // The evidence's time first; the kept delivery outlives its Deployment.
        assert_eq!(
            c.message,
            "stale: Secret cell1-secret (delivered by gone-1, differs since 2026-11-10T00:00:00Z: Deployment rotate-1 recorded another)"
        );
    }

    #[test]
    fn a_full_deployment_delivers_the_whole_set() {
        // After the rotation, a full Deployment that records only another Secret: the rotated
        // one is no input of these nodes any more.
        let later = with_secret_hashes(
            deployment("redeploy", "2026-11-20T00:00:00Z", "done", &[], "", "", ""),
            &format!("{{other-secret: {}}}", recorded("x")),
        );
        let r = evaluate(&format!("{}{}{later}", rotation(""), secret("other-secret", "x")));
        for n in ["c0", "c2"] {
            let c = inputs(&r, n);
            assert_eq!(
                (c.status, c.message.as_str()),
                (Status::True, "every delivered input current (1 Secrets, 0 ConfigMaps)"),
                "{n}"
            );
        }
    }

    #[test]
    fn no_recorded_delivery_is_unknown() {
        let r = evaluate(
            &[NODESET.to_string(), deployment("install", "2026-11-01T00:00:00Z", "done", &[], "", "", "")]
                .concat(),
        );
        let c = inputs(&r, "c0");
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, "NoInputsDelivered"));
        assert_eq!(r.nodesets[0].conditions.get(NODESET_SECRETS_CURRENT).unwrap().status, Status::Unknown);
    }

    #[test]
    fn names_are_cut_after_ten() {
        let many: Vec<String> = (0..63).map(|i| format!("edpm-compute-{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let cut = names_cut(&refs);
        assert!(
            cut.starts_with("edpm-compute-0, edpm-compute-1,") && cut.ends_with("edpm-compute-9 … (63)"),
            "{cut}"
        );
    }
}
