//! A node's `NovaComputeReady` from what Nova said. Checked in this order, the first that
//! applies decides:
//!
//! | status / severity | reason | when |
//! |---|---|---|
//! | False / Info | `Requested` | the node's nova service has not succeeded yet (Nova is not blamed first) |
//! | Unknown | `NovaAPIUnavailable` | Keystone or Nova could not be asked, or Nova cannot reach the service's cell (`status: UNKNOWN`) |
//! | False / Warning | `ComputeServiceNotRegistered` | no nova-compute service for the host |
//! | False / Warning | `ComputeServiceDown` | registered, `state: down` |
//! | False / Warning | `ComputeServiceDisabled` | `status: disabled`, with Nova's reason |
//! | False / Warning | `HypervisorMissing` | up and enabled, no hypervisor: the host is not mapped to its cell yet |
//! | True | `Ready` | up, enabled, hypervisor known |
//!
//! Our own failure to ask is never False. Messages hold nothing that changes while the verdict
//! stays (no heartbeat times), so a steady cloud writes nothing; the evidence lines have the
//! rest.

use super::answer::NovaEvidence;
use super::host::{Found, HostMatch, Index, Lookup};
use crate::condition::reasons::{
    self, COMPUTE_SERVICE_DISABLED, COMPUTE_SERVICE_DOWN, COMPUTE_SERVICE_NOT_REGISTERED, HYPERVISOR_MISSING,
    NOVA_API_UNAVAILABLE,
};
use crate::condition::types::NOVA_COMPUTE;
use crate::condition::{Condition, Reason};
use crate::excerpt::echo;

/// The name Nova is expected to know a node by, and where that came from.
#[derive(Debug, Clone)]
pub struct Expected {
    pub name: String,
    pub from: String,
}

/// The nova service's state on the node, as readiness computed it.
#[derive(Debug, Clone, Copy)]
pub struct Deployed<'a> {
    /// The data-plane service's name (`nova`, or a custom one of type nova).
    pub service: &'a str,
    pub done: bool,
}

/// The reason of a node whose nova service has not succeeded yet: Nova is not asked about it.
pub const NOT_ASKED_YET: &Reason = &reasons::REQUESTED;

/// The node's condition and, for `status explain`, the evidence behind it.
pub fn verdict(
    ev: &NovaEvidence,
    index: Option<&Index<'_>>,
    expected: &Expected,
    deployed: Deployed<'_>,
) -> (Condition, Vec<String>) {
    let mut lines = vec![format!("expected host: {} ({})", expected.name, expected.from)];
    if !deployed.done {
        let c = Condition::because(
            NOVA_COMPUTE,
            NOT_ASKED_YET,
            format!("waiting for the {} service to succeed on this node", deployed.service),
        );
        return (c, lines);
    }
    let (answer, index) = match (ev, index) {
        (NovaEvidence::Answer(a), Some(ix)) => (a, ix),
        (NovaEvidence::Unavailable { message, since, last_answer }, _) => {
            lines.push(format!("Nova: not asked: {message}"));
            let mut m = format!("cannot ask Nova: {message}");
            if let Some(t) = since {
                m.push_str(&format!(" (since {t}"));
                m.push_str(&last_answer.map_or(")".to_string(), |l| format!("; last answer {l})")));
            }
            return (Condition::because(NOVA_COMPUTE, &NOVA_API_UNAVAILABLE, m), lines);
        }
        (NovaEvidence::Answer(_), None) => unreachable!("an answer is always indexed"),
    };
    lines.push(match answer.observed_at {
        Some(t) => format!("Nova: {} at {t}", answer.source),
        None => format!("Nova: {}", answer.source),
    });
    let host = &expected.name;
    let found = match index.find(host) {
        Lookup::Found(f) => f,
        Lookup::NotRegistered => {
            lines.push(format!("no nova-compute service for this host among {}", answer.services.len()));
            let c = Condition::because(
                NOVA_COMPUTE,
                &COMPUTE_SERVICE_NOT_REGISTERED,
                format!(
                    "Nova lists no nova-compute service for host {host}; check the nova_compute container on the node (podman logs nova_compute) and that its [DEFAULT] host is {host}"
                ),
            );
            return (c, lines);
        }
        Lookup::Ambiguous(names) => {
            lines.push(format!("hosts sharing the short name: {}", names.join(", ")));
            let c = Condition::because(
                NOVA_COMPUTE,
                &COMPUTE_SERVICE_NOT_REGISTERED,
                format!(
                    "Nova lists no nova-compute service for host {host}, and {} share its short name; set the node's canonical_hostname to the name Nova uses",
                    names.join(" and ")
                ),
            );
            return (c, lines);
        }
    };
    lines.extend(found_lines(&found));
    (condition(&found, host), lines)
}

fn condition(f: &Found<'_>, expected: &str) -> Condition {
    let s = f.service;
    let host = match &f.how {
        HostMatch::Exact => s.host.clone(),
        HostMatch::Short { nova } => format!("{nova} (matched by short name; expected {expected})"),
    };
    if let Some(c) = not_serving(f, &host) {
        return c;
    }
    if f.checked && f.hypervisor.is_none() {
        return Condition::because(
            NOVA_COMPUTE,
            &HYPERVISOR_MISSING,
            format!(
                "nova-compute {host} is up and enabled, but Nova has no hypervisor for it: the host is not mapped to its cell yet; run `nova-manage cell_v2 discover_hosts --verbose` (in the nova-cell0-conductor pod) or wait for the periodic discovery (discover_hosts_in_cells_interval, 900 s by default)"
            ),
        );
    }
    let hv = match (f.checked, f.hypervisor) {
        (true, Some(h)) => format!("; hypervisor {}", h.hostname),
        _ => "; hypervisors not checked (no hypervisor list)".to_string(),
    };
    Condition::true_(NOVA_COMPUTE, format!("nova-compute {host} is up and enabled{hv}"))
}

/// The service's own state, when it is not up and enabled: its cell unreachable, down, in no
/// known state, or disabled. `host` is how messages name it.
fn not_serving(f: &Found<'_>, host: &str) -> Option<Condition> {
    let s = f.service;
    if s.status.as_deref() == Some("UNKNOWN") {
        return Some(Condition::because(
            NOVA_COMPUTE,
            &NOVA_API_UNAVAILABLE,
            format!(
                "Nova cannot reach the cell of nova-compute {host} (status UNKNOWN); check the cell's database and message bus"
            ),
        ));
    }
    match s.state.as_deref() {
        Some("up") => {}
        Some("down") => {
            // No `updated_at` here: a forced-down compute still heartbeats, and a message
            // that moves would be a write at every poll (explain's evidence has the time).
            let forced = if s.forced_down == Some(true) { ", forced down" } else { "" };
            return Some(Condition::because(
                NOVA_COMPUTE,
                &COMPUTE_SERVICE_DOWN,
                format!(
                    "nova-compute {host} is registered but down{forced}; check the nova_compute container on the node (podman logs nova_compute) and its connection to the cell's message bus"
                ),
            ));
        }
        other => {
            return Some(Condition::because(
                NOVA_COMPUTE,
                &NOVA_API_UNAVAILABLE,
                format!("Nova gives nova-compute {host} no known state ({})", other.unwrap_or("none")),
            ));
        }
    }
    if s.status.as_deref() != Some("disabled") {
        return None;
    }
    let why = match s.disabled_reason.as_deref().filter(|r| !r.is_empty()) {
        Some(r) if r.starts_with("AUTO:") => format!(": Nova disabled it itself: {}", echo(r)),
        Some(r) => format!(": {}", echo(r)),
        None => " (no reason given)".to_string(),
    };
    Some(Condition::because(
        NOVA_COMPUTE,
        &COMPUTE_SERVICE_DISABLED,
        format!(
            "nova-compute {host} is up but disabled{why}; once fixed: openstack compute service set --enable {} nova-compute",
            s.host
        ),
    ))
}

fn found_lines(f: &Found<'_>) -> Vec<String> {
    let s = f.service;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut lines = vec![format!(
        "service {}: host {}{}, state {}, status {}{}{}, updated_at {}, zone {}",
        if s.id.is_empty() { "?" } else { &s.id },
        s.host,
        match &f.how {
            HostMatch::Exact => String::new(),
            HostMatch::Short { .. } => " (matched by short name)".into(),
        },
        opt(&s.state),
        opt(&s.status),
        s.disabled_reason.as_deref().map_or(String::new(), |r| format!(" ({})", echo(r))),
        s.forced_down.map_or(String::new(), |d| format!(", forced_down {d}")),
        opt(&s.updated_at),
        opt(&s.zone),
    )];
    if f.rows > 1 {
        lines.push(format!("{} nova-compute services for this host; the one above was chosen", f.rows));
    }
    lines.push(match (f.checked, f.hypervisor) {
        (false, _) => "hypervisors: not in the answer".into(),
        (true, None) => "hypervisor: none for this host".into(),
        (true, Some(h)) => format!(
            "hypervisor {}: {}, state {}, status {}",
            if h.id.is_empty() { "?" } else { &h.id },
            h.hostname,
            opt(&h.state),
            opt(&h.status)
        ),
    });
    lines
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::condition::{Severity, Status, Time};
    use crate::nova::answer::{NovaAnswer, hypervisors, services};

    fn answer(svcs: serde_json::Value, hvs: Option<serde_json::Value>) -> NovaEvidence {
        NovaEvidence::Answer(NovaAnswer {
            source: "Nova API http://nova/v2.1".into(),
            observed_at: Some(Time(1_700_000_000)),
            services: services(&svcs).unwrap(),
            hypervisors: hvs.map(|h| hypervisors(&h).unwrap()),
        })
    }

    fn judge(ev: &NovaEvidence, host: &str, done: bool) -> (Condition, Vec<String>) {
        let ix = match ev {
            NovaEvidence::Answer(a) => Some(Index::new(a)),
            NovaEvidence::Unavailable { .. } => None,
        };
        let expected = Expected { name: host.into(), from: "hostName".into() };
        verdict(ev, ix.as_ref(), &expected, Deployed { service: "nova", done })
    }

    fn svc(host: &str, state: &str, status: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut v = json!({"id": format!("id-{host}"), "binary": "nova-compute", "host": host,
            "state": state, "status": status, "updated_at": "2026-11-26T10:00:00.000000"});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    fn hv(host: &str) -> serde_json::Value {
        json!({"id": format!("hv-{host}"), "hypervisor_hostname": host, "state": "up", "status": "enabled",
               "service": {"id": format!("id-{host}"), "host": host}})
    }

    #[test]
    fn every_reason_in_its_order() {
        let ev = answer(
            json!({"services": [
                svc("ok", "up", "enabled", json!({})),
                svc("down", "down", "enabled", json!({"forced_down": true})),
                svc("off", "up", "disabled", json!({"disabled_reason": "AUTO: Connection to libvirt lost: 1"})),
                svc("new", "up", "enabled", json!({})),
                {"binary": "nova-compute", "host": "lost", "status": "UNKNOWN"}]}),
            Some(json!({"hypervisors": [hv("ok"), hv("down"), hv("off")]})),
        );
        let (c, lines) = judge(&ev, "ok", true);
        assert_eq!((c.status, c.reason.as_str()), (Status::True, reasons::READY.name));
        assert_eq!(c.message, "nova-compute ok is up and enabled; hypervisor ok");
        assert!(lines.iter().any(|l| l == "hypervisor hv-ok: ok, state up, status enabled"), "{lines:?}");
        let (c, _) = judge(&ev, "down", true);
        assert_eq!((c.reason.as_str(), c.severity), (COMPUTE_SERVICE_DOWN.name, Severity::Warning));
        assert!(
            c.message.contains("is registered but down, forced down; check") && !c.message.contains("2026"),
            "{}",
            c.message
        );
        let (c, _) = judge(&ev, "off", true);
        assert_eq!(c.reason, COMPUTE_SERVICE_DISABLED.name);
        assert!(c.message.contains("Nova disabled it itself: AUTO: Connection to libvirt lost: 1"));
        let (c, _) = judge(&ev, "new", true);
        assert_eq!((c.status, c.reason.as_str()), (Status::False, HYPERVISOR_MISSING.name));
        assert!(c.message.contains("discover_hosts"));
        let (c, _) = judge(&ev, "lost", true);
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, NOVA_API_UNAVAILABLE.name));
        let (c, _) = judge(&ev, "absent", true);
        assert_eq!(c.reason, COMPUTE_SERVICE_NOT_REGISTERED.name);
        // Before the nova service succeeded, Nova is not asked about the node.
        let (c, _) = judge(&ev, "absent", false);
        assert_eq!((c.reason.as_str(), c.severity), (NOT_ASKED_YET.name, Severity::Info));
    }

    #[test]
    fn our_own_failure_is_unknown_never_false() {
        let ev = NovaEvidence::Unavailable {
            message: "Keystone http://ks/v3: no answer in time".into(),
            since: Some(Time(1_700_000_000)),
            last_answer: None,
        };
        let (c, lines) = judge(&ev, "c0", true);
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, NOVA_API_UNAVAILABLE.name));
        assert!(c.message.starts_with("cannot ask Nova: Keystone http://ks/v3: no answer in time (since "));
        assert!(lines[1].starts_with("Nova: not asked"));
    }

    #[test]
    fn a_short_name_match_is_said_and_a_saved_answer_without_hypervisors_checks_none() {
        let ev = answer(json!({"services": [svc("c0", "up", "enabled", json!({}))]}), None);
        let (c, lines) = judge(&ev, "c0.ctlplane.example.com", true);
        assert_eq!(
            c.message,
            "nova-compute c0 (matched by short name; expected c0.ctlplane.example.com) is up and enabled; hypervisors not checked (no hypervisor list)"
        );
        assert!(lines.iter().any(|l| l.contains("(matched by short name)")));
    }

    #[test]
    fn a_steady_cloud_gives_the_same_message_at_every_heartbeat() {
        let at = |t: &str| {
            answer(
                json!({"services": [svc("c0", "up", "enabled", json!({"updated_at": t}))]}),
                Some(json!({"hypervisors": [hv("c0")]})),
            )
        };
        assert_eq!(judge(&at("t1"), "c0", true).0, judge(&at("t2"), "c0", true).0);
    }
}
