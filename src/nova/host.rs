//! Which of Nova's rows is a node's. Nova names a compute by its `[DEFAULT] host`, which
//! edpm-ansible sets to the node's `canonical_hostname` (`02-nova-host-specific.conf`); the
//! hypervisor by what libvirt reports (usually `hostname -f`). So the rule:
//!
//! 1. both sides are compared ASCII-lowercased without a trailing dot (DNS is
//!    case-insensitive, and so is MySQL's default collation);
//! 2. the node's expected name first (its `canonical_hostname`, else its `hostName`);
//! 3. else, by short name (the first label): accepted only when exactly one nova-compute host
//!    has it, and said so in the evidence (`matched by short name`): an FQDN expected and a
//!    short name in Nova, or the other way round. Two hosts with that short name match
//!    neither (`c0.site-a` and `c0.site-b`);
//! 4. names starting with `localhost` never match (libvirt's own rule for names it cannot
//!    trust);
//! 5. a hypervisor belongs to the matched service by `service.id` (API answers), else by
//!    `service.host`, else (the CLI's list, which has neither) by `Hypervisor Hostname` against
//!    the service's host and the expected name, by the same rules.
//!
//! The index is built once per answer, so a data plane of 10,000 nodes is matched in linear
//! time.

use std::collections::HashMap;

use super::answer::{ComputeService, Hypervisor, NovaAnswer};

/// A host name as compared: lowercased, without a trailing dot.
pub(crate) fn normalize(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

fn short(normalized: &str) -> &str {
    normalized.split('.').next().unwrap_or(normalized)
}

fn trusted(normalized: &str) -> bool {
    !normalized.is_empty() && !normalized.starts_with("localhost")
}

/// The answer's rows by name.
pub(crate) struct Index<'a> {
    answer: &'a NovaAnswer,
    services_by_name: HashMap<String, Vec<usize>>,
    /// Short name → the distinct full names having it.
    service_names_by_short: HashMap<String, Vec<String>>,
    hv_by_service_id: HashMap<&'a str, Vec<usize>>,
    hv_by_name: HashMap<String, Vec<usize>>,
    hv_names_by_short: HashMap<String, Vec<String>>,
}

/// How the node's service was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostMatch {
    /// By its expected name.
    Exact,
    /// By its short name, Nova calling it `nova`.
    Short { nova: String },
}

/// A node's rows.
#[derive(Debug, Clone)]
pub(crate) struct Found<'a> {
    pub service: &'a ComputeService,
    pub how: HostMatch,
    /// nova-compute rows for the same host (more than one after a cell move: a stale row).
    pub rows: usize,
    /// `None` when the answer has hypervisors and none is this host's; see [`Found::checked`].
    pub hypervisor: Option<&'a Hypervisor>,
    /// Whether hypervisors were asked for at all.
    pub checked: bool,
}

#[derive(Debug, Clone)]
pub(crate) enum Lookup<'a> {
    Found(Found<'a>),
    NotRegistered,
    /// Several hosts share the node's short name and none has its full name.
    Ambiguous(Vec<String>),
}

impl<'a> Index<'a> {
    pub(crate) fn new(answer: &'a NovaAnswer) -> Index<'a> {
        let mut services_by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, s) in answer.services.iter().enumerate() {
            services_by_name.entry(normalize(&s.host)).or_default().push(i);
        }
        let service_names_by_short = by_short(services_by_name.keys());
        let mut hv_by_service_id: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut hv_by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, h) in answer.hypervisors.iter().flatten().enumerate() {
            if let Some(id) = h.service_id.as_deref() {
                hv_by_service_id.entry(id).or_default().push(i);
            }
            // By the service's host when the answer names it, else by the hypervisor's name.
            let name = normalize(h.service_host.as_deref().unwrap_or(&h.hostname));
            hv_by_name.entry(name).or_default().push(i);
        }
        let hv_names_by_short = by_short(hv_by_name.keys());
        Index {
            answer,
            services_by_name,
            service_names_by_short,
            hv_by_service_id,
            hv_by_name,
            hv_names_by_short,
        }
    }

    /// The node's nova-compute service and its hypervisor, for the name Nova is expected to
    /// know it by.
    pub(crate) fn find(&self, expected: &str) -> Lookup<'a> {
        let want = normalize(expected);
        if !trusted(&want) {
            return Lookup::NotRegistered;
        }
        let (rows, how) = match self.services_by_name.get(&want) {
            Some(rows) => (rows, HostMatch::Exact),
            None => match self.service_names_by_short.get(short(&want)).map(Vec::as_slice) {
                Some([one]) => (&self.services_by_name[one], HostMatch::Short { nova: one.clone() }),
                Some(many) if !many.is_empty() => return Lookup::Ambiguous(many.to_vec()),
                _ => return Lookup::NotRegistered,
            },
        };
        let services = &self.answer.services;
        // Several rows for one host: the one a hypervisor references, else one that is up,
        // else the newest.
        let pick = rows
            .iter()
            .copied()
            .max_by_key(|&i| {
                let s = &services[i];
                (
                    self.hv_by_service_id.contains_key(s.id.as_str()),
                    s.state.as_deref() == Some("up"),
                    s.updated_at.clone(),
                )
            })
            .expect("an index entry has a row");
        let service = &services[pick];
        let hypervisor = self.hypervisor(service, &want);
        Lookup::Found(Found {
            service,
            how,
            rows: rows.len(),
            hypervisor,
            checked: self.answer.hypervisors.is_some(),
        })
    }

    fn hypervisor(&self, service: &ComputeService, want: &str) -> Option<&'a Hypervisor> {
        let all = self.answer.hypervisors.as_deref()?;
        if let Some(i) = self.hv_by_service_id.get(service.id.as_str()).and_then(|v| v.first())
            && !service.id.is_empty()
        {
            return Some(&all[*i]);
        }
        let host = normalize(&service.host);
        for name in [host.as_str(), want] {
            if let Some(i) = self.hv_by_name.get(name).and_then(|v| v.first()) {
                return Some(&all[*i]);
            }
        }
        // Libvirt's name may be the FQDN where Nova's host is short, or the other way round.
        match self.hv_names_by_short.get(short(&host)).map(Vec::as_slice) {
            Some([one]) => self.hv_by_name[one].first().map(|i| &all[*i]),
            _ => None,
        }
    }
}

fn by_short<'k>(names: impl Iterator<Item = &'k String>) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for n in names.filter(|n| trusted(n)) {
        out.entry(short(n).to_string()).or_default().push(n.clone());
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(id: &str, host: &str, state: &str) -> ComputeService {
        ComputeService {
            id: id.into(),
            host: host.into(),
            zone: None,
            state: Some(state.into()),
            status: Some("enabled".into()),
            disabled_reason: None,
            forced_down: None,
            updated_at: None,
        }
    }

    fn hv(id: &str, name: &str, service: Option<(&str, &str)>) -> Hypervisor {
        Hypervisor {
            id: id.into(),
            hostname: name.into(),
            service_id: service.map(|s| s.0.into()),
            service_host: service.map(|s| s.1.into()),
            state: Some("up".into()),
            status: Some("enabled".into()),
        }
    }

    fn answer(services: Vec<ComputeService>, hvs: Option<Vec<Hypervisor>>) -> NovaAnswer {
        NovaAnswer { source: "test".into(), observed_at: None, services, hypervisors: hvs }
    }

    fn found<'a>(l: Lookup<'a>) -> Found<'a> {
        match l {
            Lookup::Found(f) => f,
            other => panic!("expected a match, got {other:?}"),
        }
    }

    #[test]
    fn every_host_name_form_matches_and_says_how() {
        let a = answer(
            vec![svc("1", "c0.ctlplane.example.com", "up"), svc("2", "c1", "up")],
            Some(vec![
                hv("h0", "c0.ctlplane.example.com", Some(("1", "c0.ctlplane.example.com"))),
                hv("h1", "c1.ctlplane.example.com", Some(("2", "c1"))),
            ]),
        );
        let ix = Index::new(&a);
        // FQDN ↔ FQDN, in any case, with a trailing dot.
        let f = found(ix.find("C0.CtlPlane.Example.com."));
        assert_eq!((f.service.id.as_str(), f.how.clone()), ("1", HostMatch::Exact));
        assert_eq!(f.hypervisor.map(|h| h.id.as_str()), Some("h0"));
        // FQDN expected, short name in Nova.
        let f = found(ix.find("c1.ctlplane.example.com"));
        assert_eq!(f.how, HostMatch::Short { nova: "c1".into() });
        assert_eq!(f.hypervisor.map(|h| h.id.as_str()), Some("h1"));
        // Short expected, FQDN in Nova.
        let f = found(ix.find("c0"));
        assert_eq!(f.how, HostMatch::Short { nova: "c0.ctlplane.example.com".into() });
        // Short ↔ short.
        assert_eq!(found(ix.find("c1")).how, HostMatch::Exact);
        assert!(matches!(ix.find("c2.ctlplane.example.com"), Lookup::NotRegistered));
    }

    #[test]
    fn a_short_name_two_hosts_share_matches_neither_and_localhost_never_matches() {
        let a = answer(
            vec![svc("1", "c0.site-a", "up"), svc("2", "c0.site-b", "up"), svc("3", "localhost", "up")],
            None,
        );
        let ix = Index::new(&a);
        match ix.find("c0") {
            Lookup::Ambiguous(names) => assert_eq!(names, ["c0.site-a", "c0.site-b"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(found(ix.find("c0.site-b")).service.id, "2");
        assert!(matches!(ix.find("localhost"), Lookup::NotRegistered));
        assert!(matches!(ix.find("localhost.localdomain"), Lookup::NotRegistered));
        assert!(!found(ix.find("c0.site-a")).checked);
    }

    #[test]
    fn of_several_rows_for_a_host_the_one_a_hypervisor_names_wins_then_one_up() {
        let a = answer(
            vec![svc("old", "c0", "down"), svc("new", "c0", "up"), svc("mapped", "c0", "down")],
            Some(vec![hv("h", "c0", Some(("mapped", "c0")))]),
        );
        let f = found(Index::new(&a).find("c0"));
        assert_eq!((f.service.id.as_str(), f.rows), ("mapped", 3));
        let a = answer(vec![svc("old", "c0", "down"), svc("new", "c0", "up")], Some(vec![]));
        let f = found(Index::new(&a).find("c0"));
        assert_eq!(f.service.id, "new");
        assert!(f.checked && f.hypervisor.is_none());
    }

    #[test]
    fn cli_hypervisors_match_by_their_hostname_in_either_form() {
        let a = answer(
            vec![svc("1", "c0.ctlplane.example.com", "up"), svc("2", "c1", "up")],
            Some(vec![hv("h0", "c0.ctlplane.example.com", None), hv("h1", "c1.lab", None)]),
        );
        let ix = Index::new(&a);
        assert_eq!(found(ix.find("c0.ctlplane.example.com")).hypervisor.map(|h| h.id.as_str()), Some("h0"));
        assert_eq!(found(ix.find("c1")).hypervisor.map(|h| h.id.as_str()), Some("h1"));
    }
}
