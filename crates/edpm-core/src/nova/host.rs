//! Which of Nova's rows is a node's. Nova names a compute by its `[DEFAULT] host`, which
//! edpm-ansible sets to the node's `canonical_hostname` (`02-nova-host-specific.conf`); the
//! hypervisor by what libvirt reports (usually `hostname -f`). So the rule:
//!
//! 1. both sides are compared ASCII-lowercased without a trailing dot (DNS is
//!    case-insensitive, and so is MySQL's default collation);
//! 2. the node's expected name first (its `canonical_hostname`, else its `hostName`);
//! 3. else across the short/full divide (one side without a dot): a full name expected finds
//!    Nova's bare short name, a bare name expected finds the one full name starting with it;
//!    said so in the evidence (`matched by short name`). Two different full names never
//!    match (`c0.site-a` is not `c0.site-b`), and a bare name two full names start with
//!    matches neither;
//! 4. names starting with `localhost` never match (libvirt's own rule for names it cannot
//!    trust);
//! 5. a hypervisor belongs to the matched service by `service.id` (API answers), else by
//!    `service.host` exactly; the CLI's rows, which name no service, by `Hypervisor Hostname`
//!    against the service's host and the expected name, by the same rules.
//!
//! The index is built once per answer, so a data plane of 10,000 nodes is matched in linear
//! time.

use std::collections::HashMap;

use super::answer::{ComputeService, Hypervisor, NovaAnswer};

/// A host name as compared: lowercased, without a trailing dot.
pub fn normalize(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

fn short(normalized: &str) -> &str {
    normalized.split('.').next().unwrap_or(normalized)
}

fn trusted(normalized: &str) -> bool {
    !normalized.is_empty() && !normalized.starts_with("localhost")
}

/// The answer's rows by name.
pub struct Index<'a> {
    answer: &'a NovaAnswer,
    services: Names,
    hv_by_service_id: HashMap<&'a str, Vec<usize>>,
    /// API rows: by their service's host.
    hv_by_service_host: HashMap<String, Vec<usize>>,
    /// CLI rows (no service named): by the hypervisor's own name.
    hv_by_hostname: Names,
}

/// Rows by normalized name, and the full names (with a dot) by their short name.
#[derive(Default)]
struct Names {
    by_name: HashMap<String, Vec<usize>>,
    qualified_by_short: HashMap<String, Vec<String>>,
}

/// How a wanted name matched a set of names.
enum NameMatch<'m> {
    Exact(&'m [usize]),
    /// Across the short/full divide: one side has no dot; the name as the answer has it.
    Short(String, &'m [usize]),
    /// A bare name that more than one full name starts with.
    Ambiguous(Vec<String>),
    None,
}

impl Names {
    fn add(&mut self, name: String, row: usize) {
        self.by_name.entry(name).or_default().push(row);
    }

    fn finish(&mut self) {
        for n in self.by_name.keys().filter(|n| trusted(n) && n.contains('.')) {
            self.qualified_by_short.entry(short(n).to_string()).or_default().push(n.clone());
        }
        for v in self.qualified_by_short.values_mut() {
            v.sort();
        }
    }

    /// `want` (normalized, trusted) exactly; else, when one side is a bare name, by the short
    /// name: a full name wanted matches the bare one; a bare name wanted matches the one full
    /// name that starts with it. Two different full names never match each other.
    fn find(&self, want: &str) -> NameMatch<'_> {
        if let Some(rows) = self.by_name.get(want) {
            return NameMatch::Exact(rows);
        }
        if want.contains('.') {
            let bare = short(want);
            return match self.by_name.get(bare) {
                Some(rows) => NameMatch::Short(bare.to_string(), rows),
                None => NameMatch::None,
            };
        }
        match self.qualified_by_short.get(want).map(Vec::as_slice) {
            Some([one]) => NameMatch::Short(one.clone(), &self.by_name[one]),
            Some(many) if !many.is_empty() => NameMatch::Ambiguous(many.to_vec()),
            _ => NameMatch::None,
        }
    }
}

/// How the node's service was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMatch {
    /// By its expected name.
    Exact,
    /// By its short name, Nova calling it `nova`.
    Short { nova: String },
}

/// A node's rows.
#[derive(Debug, Clone)]
pub struct Found<'a> {
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
pub enum Lookup<'a> {
    Found(Found<'a>),
    NotRegistered,
    /// Several hosts share the node's short name and none has its full name.
    Ambiguous(Vec<String>),
}

impl<'a> Index<'a> {
    pub fn new(answer: &'a NovaAnswer) -> Index<'a> {
        let mut services = Names::default();
        for (i, s) in answer.services.iter().enumerate() {
            services.add(normalize(&s.host), i);
        }
        services.finish();
        let mut hv_by_service_id: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut hv_by_service_host: HashMap<String, Vec<usize>> = HashMap::new();
        let mut hv_by_hostname = Names::default();
        for (i, h) in answer.hypervisors.iter().flatten().enumerate() {
            if let Some(id) = h.service_id.as_deref().filter(|id| !id.is_empty()) {
                hv_by_service_id.entry(id).or_default().push(i);
            }
            match h.service_host.as_deref() {
                Some(host) => hv_by_service_host.entry(normalize(host)).or_default().push(i),
                None => hv_by_hostname.add(normalize(&h.hostname), i),
            }
        }
        hv_by_hostname.finish();
        Index { answer, services, hv_by_service_id, hv_by_service_host, hv_by_hostname }
    }

    /// The node's nova-compute service and its hypervisor, for the name Nova is expected to
    /// know it by.
    pub fn find(&self, expected: &str) -> Lookup<'a> {
        let want = normalize(expected);
        if !trusted(&want) {
            return Lookup::NotRegistered;
        }
        let (rows, how) = match self.services.find(&want) {
            NameMatch::Exact(rows) => (rows, HostMatch::Exact),
            NameMatch::Short(nova, rows) => (rows, HostMatch::Short { nova }),
            NameMatch::Ambiguous(names) => return Lookup::Ambiguous(names),
            NameMatch::None => return Lookup::NotRegistered,
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

    /// An API row names its service: joined by its id, else by its host, exactly. A CLI row
    /// names none: joined by its own name (libvirt's, usually `hostname -f`) against the
    /// service's host, then the expected name, by the same rules as services.
    fn hypervisor(&self, service: &ComputeService, want: &str) -> Option<&'a Hypervisor> {
        let all = self.answer.hypervisors.as_deref()?;
        let first = |rows: &[usize]| rows.first().map(|i| &all[*i]);
        if !service.id.is_empty()
            && let Some(h) = self.hv_by_service_id.get(service.id.as_str()).and_then(|v| first(v))
        {
            return Some(h);
        }
        let host = normalize(&service.host);
        if let Some(h) = self.hv_by_service_host.get(&host).and_then(|v| first(v)) {
            return Some(h);
        }
        for name in [host.as_str(), want] {
            match self.hv_by_hostname.find(name) {
                NameMatch::Exact(rows) | NameMatch::Short(_, rows) => return first(rows),
                NameMatch::Ambiguous(_) | NameMatch::None => {}
            }
        }
        None
    }
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
        // Two different full names never match, though their first labels do.
        assert!(matches!(ix.find("c0.other.example.com"), Lookup::NotRegistered));
        assert!(matches!(ix.find("c1.lab"), Lookup::Found(_)), "a full name finds the bare one");
    }

    #[test]
    fn an_api_hypervisor_of_another_full_name_is_not_taken() {
        let a = answer(
            vec![svc("1", "c0.site-a", "up")],
            Some(vec![hv("h", "c0.site-b", Some(("9", "c0.site-b")))]),
        );
        let f = found(Index::new(&a).find("c0.site-a"));
        assert!(f.checked && f.hypervisor.is_none(), "{f:?}");
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
