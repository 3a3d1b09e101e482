//! Phase 1 as Nova sees it: a node that runs the `nova` service gets `NovaComputeReady`
//! (`crate::nova::verdict`), one more member of its `ServicesReady`, when the snapshot holds
//! Nova evidence (asked live by the shell, or a saved answer in a directory source). Without
//! any, the condition is left out: nothing was asked, so nothing is claimed.

use super::*;
use crate::nova::verdict::{Deployed, Expected, verdict};
use crate::nova::{Index, NovaEvidence};
use crate::snapshot::resource::{AnsibleVars, IpSetStatus, Object};

/// What every NodeSet's nodes share of the Nova evidence, built once per evaluation.
pub(super) struct NovaContext<'a> {
    pub(super) evidence: &'a NovaEvidence,
    pub(super) index: Option<Index<'a>>,
    /// IPSets by name (a node's is named after its host name or key).
    pub(super) ipsets: HashMap<&'a str, &'a Object<IpSetStatus>>,
}

impl<'a> NovaContext<'a> {
    pub(super) fn new(snap: &'a Snapshot, evidence: &'a NovaEvidence) -> NovaContext<'a> {
        let index = match evidence {
            NovaEvidence::Answer(a) => Some(Index::new(a)),
            NovaEvidence::Unavailable { .. } => None,
        };
        let ipsets = snap.ipsets.iter().map(|o| (o.id.name.as_str(), o)).collect();
        NovaContext { evidence, index, ipsets }
    }

    /// The name Nova is expected to know the node by: edpm-ansible sets nova's
    /// `[DEFAULT] host` to `canonical_hostname`, which the operator derives from the IPSet's
    /// ctlplane reservation (the host name, qualified with its DNS domain unless it already has
    /// one), else takes from `ansibleVars`; else the node's `hostName`.
    pub(super) fn expected(&self, group: &HostGroup, m: &Member) -> Expected {
        let host_name = &m.host_name.value;
        let ipset = self.ipsets.get(host_name.as_str()).or_else(|| self.ipsets.get(m.key.as_str()));
        if let Some(set) = ipset
            && let Some(r) = set.body.reservations.iter().find(|r| {
                r.service_network
                    .as_deref()
                    .filter(|e| !e.is_empty())
                    .unwrap_or(&r.network)
                    .eq_ignore_ascii_case("ctlplane")
            })
        {
            let (name, _) = crate::inventory::build::canonical(host_name, &r.dns_domain);
            return Expected { name, from: format!("canonical_hostname from IPSet {}", set.id.name) };
        }
        for (vars, whose) in [(&m.section.vars, "the node's"), (&group.template.vars, "the NodeSet's")] {
            if let Some(AnsibleVars::Map(vars)) = vars.as_ref().map(|f| &f.value)
                && let Some((_, v)) = vars.iter().find(|(k, _)| k == "canonical_hostname")
                && let Some(name) = v.as_str().filter(|s| !s.is_empty())
            {
                return Expected {
                    name: name.to_string(),
                    from: format!("canonical_hostname in {whose} ansibleVars"),
                };
            }
        }
        Expected { name: host_name.clone(), from: "hostName".into() }
    }
}

/// The name the Nova check goes by among a phase's members: it is no data-plane service, so
/// phase messages do not count it as one deployed.
pub(super) const NOVA_MEMBER: &str = "nova-compute";

impl<'a> GroupContext<'a> {
    /// The node's `NovaComputeReady`, as one more phase-1 member, when its services include
    /// the group's nova service and Nova evidence is at hand.
    pub(super) fn nova_member(
        &self,
        m: &Member,
        states: &[(&'a str, Phase, ServiceState)],
    ) -> Option<(&'a str, Phase, ServiceState)> {
        let nova = self.nova.as_ref()?;
        let service = self.nova_service?;
        let (_, phase, deployed) = states.iter().find(|(s, _, _)| *s == service)?;
        let expected = nova.expected(self.group, m);
        let (cond, evidence) = verdict(
            nova.evidence,
            nova.index.as_ref(),
            &expected,
            Deployed { service, done: deployed.cond.is_true() },
        );
        let evidence = if self.opts.evidence { evidence } else { Vec::new() };
        Some((
            NOVA_MEMBER,
            *phase,
            ServiceState { cond, running: None, terminal: false, evidence, cause: None },
        ))
    }
}
