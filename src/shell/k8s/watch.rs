//! The controller's view of the cluster: one reflector (a watch and its store) per kind the
//! status commands read (`read::LISTED`, evidence included), so an evaluation reads memory,
//! not the API server. Every change is sent on a channel, named by its kind, for the caller
//! to decide what it touches.
//!
//! kube's watcher does the rest: it lists, then watches from the list's `resourceVersion`
//! with bookmarks; a dropped stream resumes from the last version seen, a `410 Gone` lists
//! again (an `Init` … `InitDone` cycle, which replaces the store's content), and errors back
//! off (kube's default backoff) and are counted. Secrets are never listed or watched: the
//! ConfigMaps and Secrets the objects reference are got by name at each evaluation
//! (`read::with_references`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::read::{LISTED, Listed, ReadError, listed_json, located};
use super::{Client, Error};
use crate::snapshot::Snapshot;

/// Which stored objects a snapshot takes: (kind, name, labels, spec).
pub(crate) type Keep<'k> =
    dyn Fn(&str, &str, &std::collections::BTreeMap<String, String>, &Value) -> bool + 'k;

/// What the watches report.
#[derive(Debug)]
pub(crate) enum WatchEvent {
    /// An object of `kind` was added, changed or deleted: what says which NodeSets it
    /// touches (its name, labels, and the spec fields naming NodeSets), not the whole object.
    Changed { kind: &'static str, name: String, labels: BTreeMap<String, String>, spec: Value },
    /// The kind's store holds a complete listing (again, after a relist).
    Synced { kind: &'static str },
    /// The watch failed and backs off before it retries (then resumes or relists); `code` is
    /// the API server's answer, when it gave one.
    Failed { kind: &'static str, code: Option<u16>, error: String },
}

struct Watched {
    listed: &'static Listed,
    store: Store<DynamicObject>,
    synced: Arc<AtomicBool>,
}

/// The stores of every watched kind.
pub(crate) struct Stores {
    namespace: String,
    kinds: Vec<Watched>,
}

impl Stores {
    /// Every kind has been listed completely at least once.
    pub(crate) fn synced(&self) -> bool {
        self.kinds.iter().all(|k| k.synced.load(Ordering::Acquire))
    }

    /// The kinds watched, by their `plural.group`.
    pub(crate) fn kinds(&self) -> Vec<String> {
        self.kinds.iter().map(|k| k.listed.name()).collect()
    }

    /// The snapshot the stores hold now of the objects `keep` accepts (by kind, name, labels
    /// and spec), with the ConfigMaps and Secrets it references (got by name): with every
    /// object kept, exactly what `read::snapshot` would have listed.
    pub(crate) async fn snapshot(&self, client: &Client, keep: &Keep<'_>) -> Result<Snapshot, ReadError> {
        let mut docs = Vec::new();
        let empty = BTreeMap::new();
        for k in &self.kinds {
            let action = format!("reading the watched {}", k.listed.name());
            for obj in k.store.state() {
                let name = obj.metadata.name.as_deref().unwrap_or("");
                let labels = obj.metadata.labels.as_ref().unwrap_or(&empty);
                if keep(k.listed.kind, name, labels, &obj.data["spec"]) {
                    docs.push(located(&self.namespace, listed_json(&action, k.listed, &obj)?));
                }
            }
        }
        super::read::with_references(client, docs).await
    }
}

/// Starts a reflector for each kind (`selector` applies to the kinds that produce hosts, as
/// for a read). A kind whose CRD is not installed (its list answers 404) is not watched:
/// that operator is not deployed; a restart notices one installed later.
pub(crate) async fn start(
    client: &Client,
    selector: Option<&str>,
    events: UnboundedSender<WatchEvent>,
) -> Result<Stores, Error> {
    let ns = client.namespace().to_string();
    let mut kinds = Vec::new();
    for l in LISTED {
        let ar = l.resource();
        let api: Api<DynamicObject> = Api::namespaced_with(client.kube(), &ns, &ar);
        let sel = l.selector(selector);
        let mut probe = ListParams::default().limit(1);
        if let Some(s) = &sel {
            probe = probe.labels(s);
        }
        match client.within_time(api.list_metadata(&probe)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(client.error(format!("listing {} in namespace {ns}", l.name()), &e)),
        }
        let mut config = watcher::Config::default();
        if let Some(s) = &sel {
            config = config.labels(s);
        }
        let writer = reflector::store::Writer::new(ar);
        let store = writer.as_reader();
        let synced = Arc::new(AtomicBool::new(false));
        let (flag, tx, kind) = (synced.clone(), events.clone(), l.kind);
        let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                let sent = match item {
                    Ok(
                        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o),
                    ) => {
                        let spec = &o.data["spec"];
                        // Only the fields `readiness::touch` reads: a NodeSet's spec is large.
                        let small = serde_json::json!({
                            "nodeSets": spec["nodeSets"], "nodeSet": spec["nodeSet"], "role": spec["role"],
                        });
                        tx.send(WatchEvent::Changed {
                            kind,
                            name: o.metadata.name.clone().unwrap_or_default(),
                            labels: o.metadata.labels.clone().unwrap_or_default(),
                            spec: small,
                        })
                    }
                    Ok(watcher::Event::Init) => Ok(()),
                    Ok(watcher::Event::InitDone) => {
                        flag.store(true, Ordering::Release);
                        tx.send(WatchEvent::Synced { kind })
                    }
                    Err(e) => tx.send(WatchEvent::Failed { kind, code: code(&e), error: e.to_string() }),
                };
                if sent.is_err() {
                    // The controller is gone.
                    return;
                }
            }
        });
        kinds.push(Watched { listed: l, store, synced });
    }
    Ok(Stores { namespace: ns, kinds })
}

/// The API server's status code in a watcher's error, when there is one (410 for an expired
/// resourceVersion, 403 for missing RBAC, …).
fn code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::WatchError(s) => Some(s.code),
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        _ => None,
    }
}
