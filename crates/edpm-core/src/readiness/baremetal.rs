//! Phase -1 per node: pre-provisioned, the OpenStackBaremetalSet's host state, or upstream's
//! own provisioning condition.

use super::*;
use crate::condition::reasons::{DEPROVISIONING, NOT_OBSERVED, PROVISIONING};
use crate::snapshot::evidence::BaremetalSet;

impl<'a> GroupContext<'a> {
    /// Phase -1 for one node, and the evidence it was read from.
    pub(super) fn baremetal(&self, m: &Member) -> (Condition, Vec<String>) {
        if self.group.members.is_empty() {
            // The NodeSet's own view (no nodes): nothing to provision.
            return (
                Condition::true_(BAREMETAL, "no nodes to provision"),
                vec!["the NodeSet has no nodes".into()],
            );
        }
        if self.group.pre_provisioned {
            let c = Condition::true_(
                BAREMETAL,
                "pre-provisioned: the operating system was installed before edpm-agent saw it",
            );
            // True since the NodeSet said so: since it was created (unknown without its time).
            let since = self.group_created().unwrap_or(Time(0));
            return (
                Condition { last_transition_time: since, ..c },
                vec![format!("{} spec.preProvisioned is true", self.group.id.short())],
            );
        }
        match self.bms {
            Some(bms) => from_baremetal_set(bms, m),
            None => self.upstream_provisioning(),
        }
    }

    /// Without an OpenStackBaremetalSet: the NodeSet's (or Role's) own provisioning condition.
    fn upstream_provisioning(&self) -> (Condition, Vec<String>) {
        let upstream = match self.group.kind {
            GroupKind::NodeSet => self.status.and_then(|s| s.conditions.get(NODESET_BAREMETAL)),
            GroupKind::Role => {
                self.legacy.and_then(|s| s.conditions.get(crate::condition::types::ROLE_BAREMETAL))
            }
        };
        match upstream {
            Some(c) => (
                c.as_type(BAREMETAL),
                vec![format!(
                    "{} status.conditions {} {} ({})",
                    self.group.id.short(),
                    c.type_,
                    c.status_word(),
                    c.message
                )],
            ),
            None => (
                Condition::because(
                    BAREMETAL,
                    &NOT_OBSERVED,
                    "no OpenStackBaremetalSet and no provisioning condition on the NodeSet: read them with --source kube",
                ),
                vec!["no OpenStackBaremetalSet of the same name in the snapshot".into()],
            ),
        }
    }
}

/// The node's host in its OpenStackBaremetalSet (by host name, else by node name).
fn from_baremetal_set(bms: &BaremetalSet, m: &Member) -> (Condition, Vec<String>) {
    let host =
        bms.status.baremetal_hosts.get(&m.host_name.value).or_else(|| bms.status.baremetal_hosts.get(&m.key));
    let ev = |state: &str| {
        vec![format!(
            "{} status.baremetalHosts[{}].provisioningState {state:?}",
            bms.id.short(),
            m.host_name.value
        )]
    };
    match host {
        Some(h) => {
            let state = h.provisioning_state.as_deref().unwrap_or("");
            let bmh = h.bmh_ref.as_deref().unwrap_or("unassigned");
            (provisioning(state, bmh), ev(state))
        }
        None => (
            Condition::because(
                BAREMETAL,
                &PROVISIONING,
                format!("OpenStackBaremetalSet {} has no host for {} yet", bms.id.name, m.host_name.value),
            ),
            ev(""),
        ),
    }
}

/// Phase -1 from a BareMetalHost's provisioning state (metal3's words).
fn provisioning(state: &str, bmh: &str) -> Condition {
    match state {
        "provisioned" | "externally provisioned" => {
            Condition::true_(BAREMETAL, format!("BareMetalHost {bmh} is {state}"))
        }
        "deprovisioning" | "deleting" | "powering off before delete" => {
            Condition::because(BAREMETAL, &DEPROVISIONING, format!("BareMetalHost {bmh} is {state}"))
        }
        "" => Condition::because(
            BAREMETAL,
            &PROVISIONING,
            format!("BareMetalHost {bmh} has no provisioning state yet"),
        ),
        _ => Condition::because(BAREMETAL, &PROVISIONING, format!("BareMetalHost {bmh} is {state}")),
    }
}
