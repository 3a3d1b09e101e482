//! Delivered inputs, rechecked. The controller never lists or watches Secrets (its RBAC gets
//! them by name only), so a rotated Secret raises no event; `SecretsCurrent` would wait for
//! the next change to its NodeSet. Every `--inputs-interval` the Secrets and ConfigMaps the
//! Deployments recorded delivering are got by name, metadata only, and the NodeSets of those
//! whose `resourceVersion` moved (or that are seen for the first time) are evaluated at once
//! (where their content is got and hashed).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::k8s::watch::Stores;
use crate::k8s::{Client, read};

type Key = (&'static str, String);

/// The recheck as a source of triggers: every second it starts a check when one is due and
/// takes in the one that finished; the NodeSets whose delivered objects moved come out.
/// Nothing ever, with no interval (`--inputs-interval 0`).
pub(super) fn moves<'a>(
    interval: Option<Duration>,
    client: &'a Client,
    stores: &'a Stores,
) -> futures::stream::LocalBoxStream<'a, BTreeSet<String>> {
    use futures::StreamExt;
    if interval.is_none() {
        return futures::stream::empty().boxed_local();
    }
    let tick = tokio::time::interval(Duration::from_secs(1));
    futures::stream::unfold((Recheck::new(interval), tick), move |(mut recheck, mut tick)| async move {
        loop {
            tick.tick().await;
            let moved = recheck.tick(client, || stores.delivered_inputs()).await;
            if !moved.is_empty() {
                return Some((moved, (recheck, tick)));
            }
        }
    })
    .boxed_local()
}
/// A check under way: what it asked (each object with its NodeSets), and its task.
type Check = (Vec<(Key, BTreeSet<String>)>, JoinHandle<Vec<Result<Option<String>, String>>>);

/// The recheck's state: when it is next due, the versions seen last, the check under way.
struct Recheck {
    interval: Option<Duration>,
    next: Instant,
    seen: BTreeMap<Key, Option<String>>,
    running: Option<Check>,
}

impl Recheck {
    /// `interval` `None`: never (`--inputs-interval 0`).
    fn new(interval: Option<Duration>) -> Recheck {
        Recheck { interval, next: Instant::now(), seen: BTreeMap::new(), running: None }
    }

    /// Called every tick of the loop: starts a check when one is due (and none is running) of
    /// `objects` (each with the NodeSets it was delivered to); returns the NodeSets whose
    /// objects changed when a check has finished.
    async fn tick(
        &mut self,
        client: &Client,
        objects: impl FnOnce() -> BTreeMap<Key, BTreeSet<String>>,
    ) -> BTreeSet<String> {
        let mut moved = BTreeSet::new();
        if let Some((_, task)) = &self.running
            && task.is_finished()
            && let Some((asked, task)) = self.running.take()
        {
            match task.await {
                Ok(versions) => {
                    for ((key, sets), version) in asked.into_iter().zip(versions) {
                        let version = match version {
                            Ok(v) => v,
                            Err(e) => {
                                tracing::warn!(kind = key.0, name = %key.1, error = %e, "cannot recheck a delivered object; trying again next time");
                                continue;
                            }
                        };
                        // First sight counts as a change too: the object may have moved between
                        // the evaluation that read it and now, and one more evaluation of its
                        // NodeSets costs less than a rotation never seen.
                        if self.seen.insert(key, version.clone()).is_none_or(|before| before != version) {
                            moved.extend(sets);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "the recheck of delivered inputs ended abnormally"),
            }
        }
        let Some(interval) = self.interval else { return moved };
        if self.running.is_none() && Instant::now() >= self.next {
            self.next = Instant::now() + interval;
            let asked: Vec<(Key, BTreeSet<String>)> = objects().into_iter().collect();
            // Objects no Deployment names any more are forgotten.
            self.seen.retain(|k, _| asked.iter().any(|(a, _)| a == k));
            if !asked.is_empty() {
                let keys: Vec<(String, String)> =
                    asked.iter().map(|((kind, name), _)| ((*kind).to_string(), name.clone())).collect();
                let client = client.clone();
                let task = tokio::spawn(async move {
                    let answers = read::resource_versions(&client, keys).await;
                    answers.into_iter().map(|a| a.map_err(|e| e.to_string())).collect()
                });
                self.running = Some((asked, task));
            }
        }
        moved
    }
}
