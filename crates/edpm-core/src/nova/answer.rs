//! What Nova said: nova-compute services and hypervisors, parsed leniently from the compute
//! API's JSON (`GET /os-services` at 2.69, `GET /os-hypervisors/detail` at 2.53, any
//! microversion read alike) or from `openstack compute service list -f json` /
//! `openstack hypervisor list -f json`. Only nova-compute services are kept.

use serde_json::{Map, Value};

use crate::condition::Time;

/// One `nova-compute` service row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeService {
    /// A UUID from microversion 2.53, an integer before (kept as text).
    pub id: String,
    /// Nova's `[DEFAULT] host` of the compute (edpm-ansible: `canonical_hostname`).
    pub host: String,
    pub zone: Option<String>,
    /// `up` or `down`: Nova's own verdict from the heartbeat (and `forced_down`).
    pub state: Option<String>,
    /// `enabled`, `disabled`, or `UNKNOWN` (2.69: the service's cell did not answer).
    pub status: Option<String>,
    pub disabled_reason: Option<String>,
    pub forced_down: Option<bool>,
    /// The row's update time, naive UTC as Nova prints it (for people, never compared).
    pub updated_at: Option<String>,
}

/// One hypervisor (a compute node row Nova's API could map to a host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hypervisor {
    pub id: String,
    pub hostname: String,
    /// The service it belongs to (API answers only; the CLI's list has neither).
    pub service_id: Option<String>,
    pub service_host: Option<String>,
    pub state: Option<String>,
    pub status: Option<String>,
}

/// One answer: the services and, when asked, the hypervisors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NovaAnswer {
    /// Where it came from, for people: `Nova API https://…/v2.1`, or the saved files.
    pub source: String,
    /// When it was asked (live answers); a saved answer has no time.
    pub observed_at: Option<Time>,
    pub services: Vec<ComputeService>,
    /// `None`: no hypervisor list was given (a saved answer of services only), so hypervisors
    /// are not checked.
    pub hypervisors: Option<Vec<Hypervisor>>,
}

impl NovaAnswer {
    /// The answer with what changes at every heartbeat (times) left out: two answers with the
    /// same verdict-relevant content compare equal, so a steady cloud makes no writes.
    pub fn steady(&self) -> NovaAnswer {
        let mut a = self.clone();
        a.observed_at = None;
        for s in &mut a.services {
            s.updated_at = None;
        }
        a.services.sort_by(|x, y| (&x.host, &x.id).cmp(&(&y.host, &y.id)));
        if let Some(h) = &mut a.hypervisors {
            h.sort_by(|x, y| (&x.hostname, &x.id).cmp(&(&y.hostname, &y.id)));
        }
        a
    }
}

/// What readiness knows of Nova: an answer, or why it could not be had (never a verdict on
/// the nodes: our own failure shows as Unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NovaEvidence {
    Answer(NovaAnswer),
    Unavailable {
        /// Why, redacted, naming what to check.
        message: String,
        /// Since when Nova could not be asked.
        since: Option<Time>,
        /// When the last good answer was had, if any.
        last_answer: Option<Time>,
    },
}

impl NovaEvidence {
    /// For comparing one poll with the last: whether the nodes' verdicts could differ.
    pub fn steady(&self) -> NovaEvidence {
        match self {
            NovaEvidence::Answer(a) => NovaEvidence::Answer(a.steady()),
            NovaEvidence::Unavailable { message, .. } => {
                NovaEvidence::Unavailable { message: message.clone(), since: None, last_answer: None }
            }
        }
    }
}

/// A saved answer found in a directory source: a file holding the compute API's JSON or the
/// openstack client's `-f json` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// `file:line`.
    pub origin: String,
    pub part: SavedPart,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavedPart {
    Services(Vec<ComputeService>),
    Hypervisors(Vec<Hypervisor>),
}

/// One answer from the saved parts of a directory source (services from every services file,
/// hypervisors from every hypervisors file), or `None` when there is none. An answer of
/// hypervisors without services is refused: nothing could be said of a node.
pub fn from_saved(saved: &[Saved]) -> Result<Option<NovaAnswer>, String> {
    if saved.is_empty() {
        return Ok(None);
    }
    let mut services = Vec::new();
    let mut hypervisors: Option<Vec<Hypervisor>> = None;
    let mut files = Vec::new();
    for s in saved {
        files.push(s.origin.as_str());
        match &s.part {
            SavedPart::Services(v) => services.extend(v.iter().cloned()),
            SavedPart::Hypervisors(v) => hypervisors.get_or_insert_with(Vec::new).extend(v.iter().cloned()),
        }
    }
    if !saved.iter().any(|s| matches!(s.part, SavedPart::Services(_))) {
        return Err(format!(
            "{}: a saved hypervisor list without a service list; add the output of `openstack compute service list -f json` (or GET /os-services) beside it",
            files.join(", ")
        ));
    }
    Ok(Some(NovaAnswer {
        source: format!("saved answer {}", files.join(", ")),
        observed_at: None,
        services,
        hypervisors,
    }))
}

/// Whether a document that is not a Kubernetes object is a saved Nova answer, and if so what
/// it holds. `None`: not one (it stays an ordinary skipped file). `Some(Err)`: it has the shape
/// of one but a field is wrong; the message names it.
pub fn detect(v: &Value) -> Option<Result<SavedPart, String>> {
    match v {
        Value::Object(o) => {
            // `GET /os-services` answers `{"services": [...]}` and nothing else: an empty list
            // there is an answer (a fresh cloud, no compute registered yet). A `services` list
            // beside other keys (Helm values, anything) is Nova's only when its rows are
            // (each has a `binary`); a row without `host` is then bad input, not skipped.
            if let Some(list) = o.get("services").and_then(Value::as_array)
                && ((list.is_empty() && o.len() == 1)
                    || (!list.is_empty() && list.iter().all(|s| s.get("binary").is_some())))
            {
                return Some(services(v).map(SavedPart::Services));
            }
            if let Some(list) = o.get("hypervisors").and_then(Value::as_array)
                && list.iter().all(|h| h.get("hypervisor_hostname").is_some())
            {
                return Some(hypervisors(v).map(SavedPart::Hypervisors));
            }
            None
        }
        Value::Array(items) => {
            let first = items.first()?;
            if first.get("Binary").is_some() && first.get("Host").is_some() {
                Some(services(v).map(SavedPart::Services))
            } else if first.get("Hypervisor Hostname").is_some() {
                Some(hypervisors(v).map(SavedPart::Hypervisors))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The nova-compute services of a `GET /os-services` answer (`{"services": […]}`) or of
/// `openstack compute service list -f json` (a list keyed by column headers).
pub fn services(v: &Value) -> Result<Vec<ComputeService>, String> {
    let (items, cli) = items(v, "services")?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let o = item.as_object().ok_or_else(|| format!("services[{i}] is not an object"))?;
        let f = Fields { o, cli, at: format!("services[{i}]") };
        if f.text("binary", "Binary")?.as_deref() != Some("nova-compute") {
            continue;
        }
        out.push(ComputeService {
            id: f.id("id", "ID")?.unwrap_or_default(),
            host: f.text("host", "Host")?.ok_or_else(|| format!("{}: no host", f.at))?,
            zone: f.text("zone", "Zone")?,
            state: f.text("state", "State")?,
            status: f.text("status", "Status")?,
            // Nova's (or a person's) words: a condition message quotes them.
            disabled_reason: f
                .text("disabled_reason", "Disabled Reason")?
                .map(|r| crate::redact::scrub(&r).into_owned()),
            forced_down: f.flag("forced_down", "Forced Down")?,
            updated_at: f.text("updated_at", "Updated At")?,
        });
    }
    Ok(out)
}

/// The hypervisors of one `GET /os-hypervisors/detail` page (`{"hypervisors": […]}`) or of
/// `openstack hypervisor list -f json`.
pub fn hypervisors(v: &Value) -> Result<Vec<Hypervisor>, String> {
    let (items, cli) = items(v, "hypervisors")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let o = item.as_object().ok_or_else(|| format!("hypervisors[{i}] is not an object"))?;
        let f = Fields { o, cli, at: format!("hypervisors[{i}]") };
        let service = o.get("service").and_then(Value::as_object);
        let svc = |k: &str| service.and_then(|s| s.get(k)).and_then(scalar_text);
        out.push(Hypervisor {
            id: f.id("id", "ID")?.unwrap_or_default(),
            hostname: f
                .text("hypervisor_hostname", "Hypervisor Hostname")?
                .ok_or_else(|| format!("{}: no hypervisor_hostname", f.at))?,
            service_id: svc("id"),
            service_host: svc("host"),
            state: f.text("state", "State")?,
            status: f.text("status", "Status")?,
        });
    }
    Ok(out)
}

/// The `next` link of a hypervisor page (`hypervisors_links`), to follow until there is none.
pub fn next_page(v: &Value) -> Option<&str> {
    v.get("hypervisors_links")?
        .as_array()?
        .iter()
        .find(|l| l.get("rel").and_then(Value::as_str) == Some("next"))?
        .get("href")?
        .as_str()
}

/// The list of an API answer (`{key: […]}`) or of the CLI's output (a list), and which it was.
fn items<'v>(v: &'v Value, key: &str) -> Result<(&'v Vec<Value>, bool), String> {
    match v {
        Value::Array(a) => Ok((a, true)),
        Value::Object(o) => match o.get(key) {
            Some(Value::Array(a)) => Ok((a, false)),
            Some(Value::Null) | None => Err(format!("the answer has no {key:?} list")),
            Some(_) => Err(format!("{key:?} is not a list")),
        },
        _ => Err(format!("expected an object with a {key:?} list, or a list of rows")),
    }
}

struct Fields<'a> {
    o: &'a Map<String, Value>,
    cli: bool,
    at: String,
}

impl Fields<'_> {
    fn get(&self, api: &str, cli: &str) -> Option<&Value> {
        self.o.get(if self.cli { cli } else { api }).filter(|v| !v.is_null())
    }

    fn text(&self, api: &str, cli: &str) -> Result<Option<String>, String> {
        match self.get(api, cli) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!(
                "{}.{}: expected text, found {}",
                self.at,
                if self.cli { cli } else { api },
                crate::excerpt::echo(&other.to_string())
            )),
        }
    }

    /// An id: a UUID string, or an integer before microversion 2.53.
    fn id(&self, api: &str, cli: &str) -> Result<Option<String>, String> {
        match self.get(api, cli) {
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            _ => self.text(api, cli),
        }
    }

    fn flag(&self, api: &str, cli: &str) -> Result<Option<bool>, String> {
        match self.get(api, cli) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            // The CLI prints some booleans as text in older releases.
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(other) => Err(format!(
                "{}.{}: expected true or false, found {}",
                self.at,
                if self.cli { cli } else { api },
                crate::excerpt::echo(&other.to_string())
            )),
        }
    }
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn api_services_keep_only_nova_compute_and_read_both_id_forms() {
        let v = json!({"services": [
            {"id": "e81d66a4", "binary": "nova-compute", "host": "c0.example.com", "zone": "nova",
             "state": "up", "status": "disabled", "disabled_reason": "AUTO: Connection to libvirt lost: 1",
             "updated_at": "2012-10-29T13:42:05.000000", "forced_down": false},
            {"id": 7, "binary": "nova-compute", "host": "c1", "status": "UNKNOWN"},
            {"id": 8, "binary": "nova-scheduler", "host": "ctl", "state": "up", "status": "enabled"}]});
        let s = services(&v).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].disabled_reason.as_deref(), Some("AUTO: Connection to libvirt lost: 1"));
        assert_eq!(s[0].forced_down, Some(false));
        assert_eq!((s[1].id.as_str(), s[1].state.as_deref()), ("7", None));
        assert!(matches!(detect(&v), Some(Ok(SavedPart::Services(_)))));
    }

    #[test]
    fn cli_rows_read_by_column_header() {
        let v = json!([
            {"ID": "u1", "Binary": "nova-compute", "Host": "c0", "Zone": "nova", "Status": "enabled",
             "State": "down", "Updated At": "2024-05-01T10:00:00.000000", "Forced Down": "True"},
            {"ID": 2, "Binary": "nova-conductor", "Host": "ctl", "Status": "enabled", "State": "up"}]);
        let s = services(&v).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].state.as_deref(), s[0].forced_down), (Some("down"), Some(true)));
        let h = json!([{"ID": "h1", "Hypervisor Hostname": "c0.example.com", "Hypervisor Type": "QEMU",
                        "Host IP": "192.168.122.100", "State": "up"}]);
        let hv = hypervisors(&h).unwrap();
        assert_eq!((hv[0].hostname.as_str(), hv[0].service_host.as_deref()), ("c0.example.com", None));
        assert!(matches!(detect(&h), Some(Ok(SavedPart::Hypervisors(_)))));
    }

    #[test]
    fn hypervisor_pages_name_their_service_and_the_next_page() {
        let v = json!({"hypervisors": [{"id": "h1", "hypervisor_hostname": "c0.example.com", "state": "up",
            "status": "enabled", "service": {"id": "s1", "host": "c0.example.com", "disabled_reason": null}}],
            "hypervisors_links": [{"rel": "next", "href": "https://nova/v2.1/os-hypervisors/detail?limit=1&marker=h1"}]});
        let h = hypervisors(&v).unwrap();
        assert_eq!(h[0].service_id.as_deref(), Some("s1"));
        assert_eq!(next_page(&v), Some("https://nova/v2.1/os-hypervisors/detail?limit=1&marker=h1"));
        assert_eq!(next_page(&json!({"hypervisors": []})), None);
    }

    #[test]
    fn other_documents_are_not_taken_for_answers_and_broken_answers_say_where() {
        // A Helm values file with a `services` list is not Nova's.
        assert!(detect(&json!({"services": ["nova", "ovn"]})).is_none());
        // An answer with no compute registered yet is an answer; beside other keys it is not.
        assert_eq!(detect(&json!({"services": []})).unwrap().unwrap(), SavedPart::Services(Vec::new()));
        assert!(detect(&json!({"services": [], "image": "x"})).is_none());
        // A row without its host is Nova's answer, broken: named, not skipped.
        let e =
            detect(&json!({"services": [{"binary": "nova-compute", "state": "up"}]})).unwrap().unwrap_err();
        assert_eq!(e, "services[0]: no host");
        assert!(matches!(detect(&json!({"hypervisors": []})), Some(Ok(SavedPart::Hypervisors(_)))));
        assert!(detect(&json!([{"name": "x"}])).is_none());
        assert!(detect(&json!([])).is_none());
        assert!(detect(&json!("text")).is_none());
        let bad = json!({"services": [{"binary": "nova-compute", "host": 5}]});
        assert_eq!(detect(&bad).unwrap().unwrap_err(), "services[0].host: expected text, found 5");
        let err = services(&json!({"services": [{"binary": "nova-compute", "host": null}]})).unwrap_err();
        assert_eq!(err, "services[0]: no host");
    }

    #[test]
    fn steady_answers_ignore_heartbeats_and_order() {
        let a = services(&json!({"services": [
            {"id": "1", "binary": "nova-compute", "host": "b", "state": "up", "status": "enabled", "updated_at": "t1"},
            {"id": "2", "binary": "nova-compute", "host": "a", "state": "up", "status": "enabled", "updated_at": "t1"}]}))
        .unwrap();
        let mut b = a.clone();
        b.reverse();
        b[0].updated_at = Some("t2".into());
        let ans =
            |s| NovaAnswer { source: "x".into(), observed_at: Some(Time(1)), services: s, hypervisors: None };
        assert_eq!(ans(a.clone()).steady(), ans(b.clone()).steady());
        b[1].state = Some("down".into());
        assert_ne!(ans(a).steady(), ans(b).steady());
    }

    #[test]
    fn saved_parts_make_one_answer_and_hypervisors_alone_are_refused() {
        let s = Saved { origin: "a.json:1".into(), part: SavedPart::Services(vec![]) };
        let h = Saved { origin: "b.json:1".into(), part: SavedPart::Hypervisors(vec![]) };
        let a = from_saved(&[s.clone(), h.clone()]).unwrap().unwrap();
        assert_eq!(a.hypervisors, Some(vec![]));
        assert_eq!(from_saved(&[s]).unwrap().unwrap().hypervisors, None);
        assert!(from_saved(&[h]).unwrap_err().contains("without a service list"));
        assert_eq!(from_saved(&[]).unwrap(), None);
    }
}
