//! The condition reasons edpm-agent writes: one vocabulary beside [`super::types`], each name
//! defined once, with the status and severity it is written with and what it means. Operators
//! grep these names, and upstream's are spelled as upstream spells them: change nothing here
//! without a CHANGELOG entry.
//!
//! A condition is built from its reason ([`super::Condition::because`]), which gives it its
//! status and severity, so call sites do not pair a reason with another by hand (the fields
//! stay public for decoding what others wrote; review holds the rest). Two kinds of condition
//! carry a reason they did not choose: `Ready` and the phases mirror the condition they report
//! (lib-common's `Mirror`), and a True `Stalled` carries the reason of the terminal failure it
//! reports; those reasons are still from this list (or upstream's own, copied as they are).
//!
//! The reason tables of `docs/kubernetes.md` and `docs/node-agent.md` are generated from
//! [`ALL`] ([`table`]) and checked against it by `tests/reasons.rs`.

use super::{Severity, Status};

/// Who writes a reason (and so which guide documents it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Writer {
    /// lib-common's, as openstack-operator writes them on its own objects: edpm-agent reads
    /// them there and writes them as upstream does.
    Upstream,
    /// edpm-agent's readiness (`status report`, `status controller`), on the status objects.
    Readiness,
    /// The node agent, on its node's `EDPMNodeStatus`.
    NodeAgent,
}

impl Writer {
    /// The words the reason tables use.
    pub fn words(self) -> &'static str {
        match self {
            Writer::Upstream => "upstream (lib-common)",
            Writer::Readiness => "edpm-agent",
            Writer::NodeAgent => "node agent",
        }
    }
}

/// One reason: its name as written, who writes it, with which status and severity, and what
/// it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reason {
    pub name: &'static str,
    pub writer: Writer,
    /// The status it is written with.
    pub status: Status,
    /// With status False, the severities it is written with, the one a condition built from
    /// it gets first; the others only where a NodeSet's rollup keeps the severity of its worst
    /// node. Empty for True and Unknown, which have none.
    pub severities: &'static [Severity],
    pub meaning: &'static str,
}

impl Reason {
    /// The severity a condition built from this reason gets.
    pub fn severity(&self) -> Severity {
        self.severities.first().copied().unwrap_or(Severity::None)
    }

    /// Whether a condition of this reason may carry `severity`.
    pub fn allows(&self, severity: Severity) -> bool {
        match self.status {
            Status::False => self.severities.contains(&severity),
            Status::True | Status::Unknown => severity == Severity::None,
        }
    }

    /// `False / Error`, `False / Info, Warning`, `Unknown`, `True`: the reason tables' words.
    pub fn written(&self) -> String {
        let status = match self.status {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        };
        if self.severities.is_empty() {
            return status.to_string();
        }
        let severities: Vec<String> = self.severities.iter().map(|s| format!("{s:?}")).collect();
        format!("{status} / {}", severities.join(", "))
    }
}

/// Defines each reason's constant, and [`ALL`] in the same order, from one list.
macro_rules! reasons {
    ($(
        $id:ident = $name:literal, $writer:ident, $status:ident $(($($severity:ident),+))?,
        $meaning:literal;
    )*) => {
        $(
            #[doc = concat!("`", $name, "`: ", $meaning)]
            pub const $id: Reason = Reason {
                name: $name,
                writer: Writer::$writer,
                status: Status::$status,
                severities: &[$($(Severity::$severity),+)?],
                meaning: $meaning,
            };
        )*

        /// Every reason edpm-agent and its node agent write, upstream's first.
        pub const ALL: &[Reason] = &[$($id),*];
    };
}

reasons! {
    // Upstream's (lib-common `modules/common/condition`), read from openstack-operator's objects.
    READY = "Ready", Upstream, True,
        "lib-common's `ReadyReason`: the condition holds. Every True condition has it, but `Reconciling` (`Deploying`) and a True `Stalled`, which say why";
    REQUESTED = "Requested", Upstream, False(Info, Warning),
        "lib-common's `RequestedReason`: under way or waited for: a service a running Deployment has not finished on the node, a NodeSet no Deployment has completed on yet, a `NovaComputeReady` waiting for the node's nova service; a NodeSet phase whose worst node is in progress (Warning while a Job retries it)";
    ERROR = "Error", Upstream, False(Error, Warning),
        "lib-common's `ErrorReason`: failed, as upstream's condition says (its message), on a service or the NodeSet's `DeploymentReady`; a NodeSet phase whose worst node failed (Warning when that failure is a Warning)";
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded", Upstream, False(Error),
        "lib-common's `JobReasonBackoffLimitExceeded`: the service's AnsibleEE Job ran out of attempts and no summary says which hosts failed, so the whole Job failed (upstream's message); terminal";
    INIT = "Init", Upstream, Unknown,
        "lib-common's `InitReason`: nothing to go by yet; `Ready` of an object with no other condition";

    // Readiness (`status report`, `status controller`): a service on a node.
    HOST_FAILED = "HostFailed", Readiness, False(Error),
        "the service's Job ran out of attempts and its summary names this host among the failed ones; the message ends with why (the pod's `hostFailures`); terminal";
    HOST_UNREACHABLE = "HostUnreachable", Readiness, False(Error),
        "the service's Job ran out of attempts and its summary names this host unreachable; terminal";
    OTHER_HOSTS_FAILED = "OtherHostsFailed", Readiness, False(Warning),
        "the service's Job failed on other hosts (named); this one was not reported failed, but the play stopped before the service completed here";
    RETRYING = "Retrying", Readiness, False(Warning),
        "an attempt of the service's Job failed on this host (or found it unreachable) and the Job has attempts left: it retries; the message has that attempt's reason";
    // Readiness: what the node runs (`VersionCurrent`, `NodeSetVersionCurrent`).
    UPDATE_PENDING = "UpdatePending", Readiness, False(Warning),
        "the node's deployed OpenStack version (set by the newest completed Deployment that covered it and ran an `update` or `update-services` service, else by its newest completed full Deployment) is not the OpenStackVersion's `spec.targetVersion`: the message names both and the minor update's steps (`ovn`, `update`) not run on the node; a NodeSet's names how many nodes are at the target and which are behind";
    NO_TARGET_VERSION = "NoTargetVersion", Readiness, Unknown,
        "no OpenStackVersion in the namespace, or one whose `spec.targetVersion` cannot be used (named, with the field): nothing to compare the nodes' versions with";
    VERSION_UNKNOWN = "VersionUnknown", Readiness, Unknown,
        "no completed Deployment that covered the node recorded a version (the NodeSet's `deployedVersion`, which upstream moves after any batch, is named but not taken as the node's); a NodeSet's: no node is behind, some have no version recorded";
    // Readiness: what the node holds (`SecretsCurrent`, `NodeSetSecretsCurrent`).
    SECRETS_STALE = "SecretsStale", Readiness, False(Warning),
        "a Secret or ConfigMap last delivered to the node (recorded by the completed Deployment that covered it) differs now from what was delivered, or no longer exists: the message names the objects (names only), the Deployment that delivered each and since when it differs; a NodeSet's names how many nodes hold every current input and which objects are stale on which nodes";
    NO_INPUTS_DELIVERED = "NoInputsDelivered", Readiness, Unknown,
        "no completed Deployment that covered the node recorded the Secrets and ConfigMaps it delivered";

    LIMIT_UNKNOWN = "LimitUnknown", Readiness, Unknown,
        "a completed (or failed) Deployment that may have covered the node has an `ansibleLimit` edpm-agent cannot evaluate exactly as Ansible does (`@file`, a regular expression outside what Python and edpm-agent read alike, a subscript Ansible refuses, a limit ansible-runner splits into several words): whether it ran on the node cannot be told, so a service it ran, `VersionCurrent` and `SecretsCurrent` read Unknown, naming the Deployment, its limit and why";
    NOT_DEPLOYED = "NotDeployed", Readiness, False(Info),
        "no OpenStackDataPlaneDeployment has deployed the service on this node yet";
    INVALID_EVIDENCE = "InvalidEvidence", Readiness, Unknown,
        "a Deployment that runs the service on this node has a `creationTimestamp` that is not a time, so which Deployment ran last cannot be told; or (`SecretsCurrent`) a Deployment that covered the node recorded a `secretHashes`/`configMapHashes` key that is no object name, which is never asked for; the message names it";
    CONFIG_DRIFT = "ConfigDrift", Readiness, False(Warning),
        "a phase, and its NodeSet rollup: the NodeSet changed (`configHash`, or `bmhRefHash` when provisioned) since the Deployment that last completed on it; run a new Deployment";

    // Readiness: bare metal (phase -1).
    PROVISIONING = "Provisioning", Readiness, False(Info),
        "`BaremetalProvisionReady`: the node's BareMetalHost is being provisioned or has no provisioning state yet, or the OpenStackBaremetalSet has no host for the node yet";
    DEPROVISIONING = "Deprovisioning", Readiness, False(Warning),
        "`BaremetalProvisionReady`: the node's BareMetalHost is deprovisioning, being deleted, or powering off before delete";
    NOT_OBSERVED = "NotObserved", Readiness, Unknown,
        "`BaremetalProvisionReady`: no OpenStackBaremetalSet and no provisioning condition on the NodeSet were read (read them with `--source kube`)";

    // Readiness: kstatus.
    DEPLOYING = "Deploying", Readiness, True,
        "`Reconciling`: a Deployment is running on the node (the message says which and what)";
    IDLE = "Idle", Readiness, False(Info),
        "`Reconciling`: no Deployment is running on the node";
    PROGRESSING = "Progressing", Readiness, False(Info),
        "`Stalled`: no terminal failure on the node (a True `Stalled` carries the failure's own reason)";

    // Readiness: the node agent's conditions, when its Lease cannot vouch for them.
    AGENT_HEARTBEAT_EXPIRED = "AgentHeartbeatExpired", Readiness, Unknown,
        "the node agent's conditions: its Lease expired (a duration after the earlier of its `renewTime` and when the controller saw it move), so its last report is no evidence any more: the agent stopped, or the node's clock is behind by more than the Lease lasts";
    AGENT_CLOCK_SKEW = "AgentClockSkew", Readiness, Unknown,
        "the node agent's conditions: its Lease's `renewTime` is further ahead of this clock than the Lease lasts: a clock is wrong (check NTP on the node)";
    AGENT_LEASE_UNREADABLE = "AgentLeaseUnreadable", Readiness, Unknown,
        "the node agent's conditions: its Lease cannot vouch for them (no `spec`, never renewed, a `renewTime` that is not a time, a `leaseDurationSeconds` outside 1–86400 s)";
    AGENT_LEASE_MISSING = "AgentLeaseMissing", Readiness, Unknown,
        "the node agent's conditions: it reported, but it has no Lease, or the Leases cannot be read (the message says what to grant)";

    // Readiness: `NovaComputeReady`, from Nova's API.
    NOVA_API_UNAVAILABLE = "NovaAPIUnavailable", Readiness, Unknown,
        "`NovaComputeReady`: Keystone or Nova could not be asked (never False on our own failure), or Nova cannot reach the compute's cell (`status: UNKNOWN`) or gives it no known state";
    COMPUTE_SERVICE_NOT_REGISTERED = "ComputeServiceNotRegistered", Readiness, False(Warning),
        "`NovaComputeReady`: Nova lists no nova-compute service for the node's host (or several share its short name)";
    COMPUTE_SERVICE_DOWN = "ComputeServiceDown", Readiness, False(Warning),
        "`NovaComputeReady`: nova-compute is registered, but `state: down`";
    COMPUTE_SERVICE_DISABLED = "ComputeServiceDisabled", Readiness, False(Warning),
        "`NovaComputeReady`: nova-compute is up but `status: disabled`, with Nova's reason (`AUTO: …` when Nova disabled it itself)";
    HYPERVISOR_MISSING = "HypervisorMissing", Readiness, False(Warning),
        "`NovaComputeReady`: nova-compute is up and enabled, but Nova has no hypervisor for it: the host is not mapped to its cell yet (`nova-manage cell_v2 discover_hosts`)";

    // The node agent: `NodeAgentReady`.
    HOSTNAME_MISMATCH = "HostnameMismatch", NodeAgent, False(Error),
        "`NodeAgentReady`: the node's host name is not the one the inventory gave it";
    ADDRESS_MISSING = "AddressMissing", NodeAgent, False(Error),
        "`NodeAgentReady`: the node holds none of the addresses the inventory gave it";
    UNEXPECTED_OS = "UnexpectedOS", NodeAgent, False(Error),
        "`NodeAgentReady`: the node booted another operating system than the inventory's";
    NETWORK_CONFIG_FAILED = "NetworkConfigFailed", NodeAgent, False(Error),
        "`NodeAgentReady`: `os-net-config.returncode` or `nmstate.returncode` records a failure";
    CONTAINER_RUNTIME_MISSING = "ContainerRuntimeMissing", NodeAgent, False(Error),
        "`NodeAgentReady`: podman is not installed, is not executable, or cannot be started (deployed services or not)";
    STAGED_FILE_MISMATCH = "StagedFileMismatch", NodeAgent, False(Warning),
        "`NodeAgentReady`: files `stage` wrote no longer have their sha256 or mode (paths named, contents never); run `stage` again";
    FACTS_UNAVAILABLE = "FactsUnavailable", NodeAgent, Unknown,
        "`NodeAgentReady`, `Service<Camel>RuntimeReady`: a fact could not be read (a file, systemd, podman), or `deployed_services.yaml` is of the wrong shape";

    // The node agent: `AgentCredentialExpiring`.
    CREDENTIAL_CURRENT = "CredentialCurrent", NodeAgent, False(Info),
        "`AgentCredentialExpiring`: the agent's token is renewed before it expires (the message says when it expires and when it is renewed)";
    CREDENTIAL_EXPIRING = "CredentialExpiring", NodeAgent, True,
        "`AgentCredentialExpiring`: the agent's token is past the point it is renewed at and renewing it failed (the message says when it expires and why); see the runbook in docs/node-agent.md";

    // The node agent: `Service<Camel>RuntimeReady`.
    UNIT_INACTIVE = "UnitInactive", NodeAgent, False(Error),
        "`Service<Camel>RuntimeReady`: an `edpm_<container>.service` of the service is not active, or does not exist";
    CONFIG_HASH_MISMATCH = "ConfigHashMismatch", NodeAgent, False(Warning),
        "`Service<Camel>RuntimeReady`: a container runs with another `config_hash` than its quadlet file's, or systemd has not loaded the changed file (restart the unit)";
    HEALTHCHECK_FAILING = "HealthcheckFailing", NodeAgent, False(Error),
        "`Service<Camel>RuntimeReady`: a container of the service is unhealthy (podman's health check)";
    HEALTHCHECK_STARTING = "HealthcheckStarting", NodeAgent, False(Info),
        "`Service<Camel>RuntimeReady`: a container's health check is still starting";
    IMAGE_MISMATCH = "ImageMismatch", NodeAgent, False(Warning),
        "`Service<Camel>RuntimeReady`: a container runs another image than the one of its repository last deployed to the node (the node's `EDPMNodeStatus` `spec.record.containerImages`): a container restarted on a stale image after a failed update, say";
}

/// The reason named `name`, if edpm-agent writes it.
pub fn find(name: &str) -> Option<&'static Reason> {
    ALL.iter().find(|r| r.name == name)
}

/// The reason table of `writers`' reasons, in [`ALL`]'s order: what the guides hold between
/// their `reasons:begin` and `reasons:end` markers.
pub fn table(writers: &[Writer]) -> String {
    let mut out = String::from("| reason | status / severity | written by | meaning |\n|---|---|---|---|\n");
    for r in ALL.iter().filter(|r| writers.contains(&r.writer)) {
        out.push_str(&format!("| `{}` | {} | {} | {} |\n", r.name, r.written(), r.writer.words(), r.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_camel_case_and_meanings_fit_a_table_cell() {
        for (i, r) in ALL.iter().enumerate() {
            assert!(ALL[..i].iter().all(|p| p.name != r.name), "{} is listed twice", r.name);
            assert!(r.name.starts_with(|c: char| c.is_ascii_uppercase()), "{}", r.name);
            assert!(r.name.chars().all(|c| c.is_ascii_alphanumeric()), "{}", r.name);
            assert!(!r.meaning.trim().is_empty(), "{} has no meaning", r.name);
            assert!(!r.meaning.contains(['|', '\n']), "{}'s meaning breaks a table row", r.name);
            assert_eq!(find(r.name), Some(r));
        }
        assert_eq!(find("Custom"), None);
    }

    #[test]
    fn false_reasons_have_severities_and_the_others_none() {
        for r in ALL {
            match r.status {
                Status::False => {
                    assert!(!r.severities.is_empty(), "{}", r.name);
                    assert!(!r.severities.contains(&Severity::None), "{}", r.name);
                    assert!(r.allows(r.severity()), "{}", r.name);
                }
                Status::True | Status::Unknown => {
                    assert!(r.severities.is_empty(), "{}", r.name);
                    assert!(r.allows(Severity::None) && !r.allows(Severity::Info), "{}", r.name);
                }
            }
        }
        assert_eq!(REQUESTED.written(), "False / Info, Warning");
        assert_eq!(AGENT_HEARTBEAT_EXPIRED.written(), "Unknown");
        assert_eq!(HOST_FAILED.severity(), Severity::Error);
    }

    #[test]
    fn upstreams_come_first_and_every_writer_has_a_table() {
        let first_other = ALL.iter().position(|r| r.writer != Writer::Upstream).unwrap();
        assert!(ALL[first_other..].iter().all(|r| r.writer != Writer::Upstream));
        for w in [Writer::Upstream, Writer::Readiness, Writer::NodeAgent] {
            let t = table(&[w]);
            assert_eq!(t.lines().count(), 2 + ALL.iter().filter(|r| r.writer == w).count(), "{t}");
        }
        assert!(table(&[Writer::Readiness]).contains("| `HostFailed` | False / Error | edpm-agent | "));
    }
}
