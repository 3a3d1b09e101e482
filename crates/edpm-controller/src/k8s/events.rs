//! Kubernetes Events on edpm-agent's status objects (kube's event recorder, events.k8s.io/v1):
//! each move of a node's `Ready` or phase condition, so `kubectl describe edpmnode/…` and
//! `kubectl get events` tell a node's story. A repeat of the same event becomes a series
//! (the recorder's cache) rather than a new object. Notes are condition messages, which never
//! carry secrets; they are cut to the API's 1 kB.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::Client;
use edpm_core::readiness::api;
use edpm_core::readiness::report::Transition;

/// The most bytes of an Event's note the API server takes.
const NOTE_LIMIT: usize = 1024;

pub struct Events {
    recorder: Recorder,
    namespace: String,
}

impl Events {
    pub fn new(client: &Client, instance: &str) -> Events {
        let reporter = Reporter { controller: "edpm-agent".into(), instance: Some(instance.into()) };
        Events { recorder: Recorder::new(client.kube(), reporter), namespace: client.namespace().to_string() }
    }

    /// Publishes one Event per transition; returns how many failed (logged, never fatal:
    /// an Event is a courtesy, the status object is the record).
    pub async fn publish(&self, client: &super::Client, transitions: &[Transition]) -> usize {
        let mut failed = 0;
        for t in transitions {
            let regarding = ObjectReference {
                api_version: Some(api::API_VERSION.into()),
                kind: Some(api::NODE_KIND.into()),
                name: Some(t.object.clone()),
                namespace: Some(self.namespace.clone()),
                uid: t.uid.clone(),
                ..Default::default()
            };
            let note = cut(format!("{} {} → {}: {}", t.type_, t.from, t.to, t.message));
            let event = Event {
                type_: if t.warning { EventType::Warning } else { EventType::Normal },
                reason: t.reason.chars().take(128).collect(),
                note: Some(note),
                action: "Evaluated".into(),
                secondary: None,
            };
            // The controller's client reads without a timeout (it watches): bounded here.
            if let Err(e) = client.within_time(self.recorder.publish(&event, &regarding)).await {
                failed += 1;
                tracing::warn!(object = %t.object, error = %e, "cannot record an Event");
            }
        }
        failed
    }

    /// A Warning Event on each of edpm-agent's status objects that could not be decoded and
    /// was skipped; returns how many failed.
    pub async fn unreadable(
        &self,
        client: &super::Client,
        objects: &[edpm_core::snapshot::evidence::Unreadable],
    ) -> usize {
        let mut failed = 0;
        // A few per evaluation: the metric and the log count them all.
        for u in objects.iter().take(UNREADABLE_EVENTS) {
            let regarding = ObjectReference {
                api_version: Some(api::API_VERSION.into()),
                kind: Some(u.id.kind.to_string()),
                name: Some(u.id.name.clone()),
                namespace: Some(self.namespace.clone()),
                uid: u.uid.clone(),
                ..Default::default()
            };
            let event = Event {
                type_: EventType::Warning,
                reason: "Unreadable".into(),
                note: Some(cut(format!("cannot be decoded, skipped until rewritten: {}", u.problem))),
                action: "Evaluated".into(),
                secondary: None,
            };
            if let Err(e) = client.within_time(self.recorder.publish(&event, &regarding)).await {
                failed += 1;
                tracing::warn!(object = %u.id.name, error = %e, "cannot record an Event");
            }
        }
        failed
    }
}

/// At most this many `Unreadable` Events per evaluation.
const UNREADABLE_EVENTS: usize = 10;

/// A note cut to what the API server takes.
fn cut(mut note: String) -> String {
    if note.len() > NOTE_LIMIT {
        let mut end = NOTE_LIMIT - '…'.len_utf8();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}
