//! Delivered inputs: a rotated Secret or ConfigMap turns the nodes that hold the old one
//! stale (`SecretsCurrent`), though nothing about their NodeSet changed.
//!
//! The Secrets and ConfigMaps of the namespace are watched metadata-only (`k8s::inputs`: no
//! content crosses the wire), and the watch keeps each one's name and `resourceVersion` (no
//! content, no other metadata): a new version of one the Deployments recorded delivering (and
//! the `dataSources` of those not completed: a failed one may be credited with them,
//! `Stores::delivered_inputs`), or its deletion, names its NodeSets at once, to be evaluated
//! (where the content is got and hashed). A relist compares the versions listed with those
//! kept. The versions of the others (an SSH key Secret, an `ansibleVarsFrom` ConfigMap:
//! referenced, never recorded) are kept too, so that an evaluation gets those again only when
//! their version moved, and does not ask for one the watch has listed as absent; they name no
//! NodeSet (nothing recorded them: no node's `SecretsCurrent` reads them).
//!
//! Where the controller may not list or watch them (an older RBAC: `get` by name only), it
//! says so once and falls back to the recheck: every `--inputs-interval` the delivered ones
//! are got by name, metadata only, and the NodeSets of those whose `resourceVersion` moved (or
//! that are seen for the first time) come out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::LocalBoxStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::k8s::inputs::{Event, Seen, Version};
use crate::k8s::read::{Hashed, InputCache};
use crate::k8s::watch::Stores;
use crate::k8s::{Client, read};

type Key = (&'static str, String);

/// What the watch knows: the `resourceVersion` of every Secret and ConfigMap of the namespace
/// it has seen (present ones only), and which kinds it has listed (of those, a name it does
/// not hold is absent).
#[derive(Default)]
struct Known {
    versions: BTreeMap<Key, String>,
    listed: BTreeSet<&'static str>,
}

impl Known {
    /// Forgets everything (the watch stopped: nothing it said is current any more).
    fn clear(&mut self) {
        self.versions.clear();
        self.listed.clear();
    }
}

/// What the watch and the evaluations share: the versions the watch has seen, and the hashes
/// of what evaluations got (`read::InputCache`: an object whose version has not moved since it
/// was hashed is not got again). Never any content.
#[derive(Default)]
pub(super) struct Inputs {
    known: Arc<Mutex<Known>>,
    hashed: Mutex<HashMap<(String, String), Hashed>>,
}

fn kind_of(kind: &str) -> &'static str {
    if kind == "Secret" { "Secret" } else { "ConfigMap" }
}

impl InputCache for Inputs {
    fn version_now(&self, kind: &str, name: &str) -> Option<String> {
        lock(&self.known).versions.get(&(kind_of(kind), name.to_string())).cloned()
    }

    fn absent(&self, kind: &str, name: &str) -> bool {
        let known = lock(&self.known);
        let kind = kind_of(kind);
        known.listed.contains(kind) && !known.versions.contains_key(&(kind, name.to_string()))
    }

    fn hashed(&self, kind: &str, name: &str) -> Option<Hashed> {
        lock(&self.hashed).get(&(kind.to_string(), name.to_string())).cloned()
    }

    fn keep(&self, kind: &str, name: &str, hashed: Hashed) {
        let mut kept = lock(&self.hashed);
        // Bounded by what the namespace holds: the objects no longer there go. Not before the
        // watch has listed both kinds (until then it holds nothing, and every hash the first
        // evaluation kept would go: 40,000 certificates got again at the next).
        let known = lock(&self.known);
        if known.listed.len() == 2 && kept.len() > 2 * known.versions.len() + 1024 {
            kept.retain(|(k, n), _| known.versions.contains_key(&(kind_of(k), n.clone())));
        }
        drop(known);
        kept.insert((kind.to_string(), name.to_string()), hashed);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the moves come from.
enum Mode {
    /// Asking whether the watch is allowed.
    Start,
    Watching(LocalBoxStream<'static, Seen>, Versions),
    /// The fallback (list or watch refused).
    Rechecking(Recheck, tokio::time::Interval),
    /// Refused, and no recheck (`--inputs-interval 0`).
    Idle,
}

/// The moves of delivered inputs as a source of triggers: the NodeSets whose delivered
/// objects moved, from the watch or (where it is refused) the recheck every `interval`
/// (`None`: none, `--inputs-interval 0`).
pub(super) fn moves<'a>(
    interval: Option<Duration>,
    client: &'a Client,
    stores: &'a Stores,
    inputs: &'a Inputs,
    metrics: &'a crate::probes::Metrics,
) -> LocalBoxStream<'a, BTreeSet<String>> {
    futures::stream::unfold(Mode::Start, move |mut mode| async move {
        loop {
            mode = match mode {
                Mode::Start => match crate::k8s::inputs::refused(client).await {
                    None => {
                        tracing::info!(
                            namespace = client.namespace(),
                            "watching the versions of Secrets and ConfigMaps (metadata only)"
                        );
                        Mode::Watching(crate::k8s::inputs::watch(client), Versions::new(inputs.known.clone()))
                    }
                    Some(why) => fall_back(&why, interval),
                },
                Mode::Watching(mut seen, mut versions) => match seen.next().await {
                    // kube's watcher never ends its stream.
                    None => return None,
                    Some((kind, Ok(ev))) => {
                        let moved = versions.take(kind, ev, stores);
                        if !moved.is_empty() {
                            return Some((moved, Mode::Watching(seen, versions)));
                        }
                        Mode::Watching(seen, versions)
                    }
                    Some((kind, Err((Some(403), error)))) => {
                        metrics.api_error("watch", Some(403));
                        // The versions will not move any more: none is taken as current, and
                        // every delivered object is got whole again, as before the watch.
                        lock(&inputs.known).clear();
                        fall_back(&format!("watching {kind}s is forbidden: {error}"), interval)
                    }
                    Some((kind, Err((code, error)))) => {
                        // Counted as the other watches' are (edpm_watch_restarts{kind}).
                        metrics.watch_restarted(kind);
                        metrics.api_error("watch", code);
                        tracing::warn!(kind, %error, "the watch of Secrets and ConfigMaps failed; it backs off and resumes or lists again");
                        Mode::Watching(seen, versions)
                    }
                },
                Mode::Rechecking(mut recheck, mut tick) => {
                    tick.tick().await;
                    let moved = recheck.tick(client, || stores.delivered_inputs()).await;
                    if !moved.is_empty() {
                        return Some((moved, Mode::Rechecking(recheck, tick)));
                    }
                    Mode::Rechecking(recheck, tick)
                }
                Mode::Idle => std::future::pending().await,
            };
        }
    })
    .boxed_local()
}

/// Said once: the watch is refused, and what is done instead.
fn fall_back(why: &str, interval: Option<Duration>) -> Mode {
    const GRANT: &str = "grant list and watch on secrets and configmaps in this namespace (packaging/kubernetes/rbac-controller.yaml) for a rotation to be seen at once";
    match interval {
        Some(interval) => {
            tracing::warn!(
                reason = why,
                "cannot watch Secrets and ConfigMaps: falling back to getting the delivered ones by name every {}s (--inputs-interval); {GRANT}",
                interval.as_secs()
            );
            Mode::Rechecking(Recheck::new(Some(interval)), tokio::time::interval(Duration::from_secs(1)))
        }
        None => {
            tracing::warn!(
                reason = why,
                "cannot watch Secrets and ConfigMaps, and --inputs-interval is 0: a rotated one is seen only when its NodeSet changes; {GRANT}"
            );
            Mode::Idle
        }
    }
}

/// What the watch keeps (`Known`, shared with the evaluations), and the listing of a kind
/// under way.
#[derive(Default)]
struct Versions {
    known: Arc<Mutex<Known>>,
    listing: BTreeMap<&'static str, BTreeMap<String, Option<String>>>,
}

impl Versions {
    fn new(known: Arc<Mutex<Known>>) -> Versions {
        Versions { known, ..Versions::default() }
    }

    /// Takes in one watcher event of `kind`; returns the NodeSets of the delivered objects
    /// (`delivered`, each with its NodeSets) it moved.
    fn take(
        &mut self,
        kind: &'static str,
        ev: Event<Version>,
        delivered: &impl Delivered,
    ) -> BTreeSet<String> {
        let mut moved = BTreeSet::new();
        match ev {
            Event::Init => {
                self.listing.insert(kind, BTreeMap::new());
            }
            Event::InitApply((name, version)) => {
                self.listing.entry(kind).or_default().insert(name, version);
            }
            Event::InitDone => {
                let listing = self.listing.remove(kind).unwrap_or_default();
                let mut known = lock(&self.known);
                // The first listing counts as a change of every delivered object: one may have
                // moved between the evaluation that read it and the listing.
                let first = known.listed.insert(kind);
                let (before, others): (BTreeMap<_, _>, BTreeMap<_, _>) =
                    std::mem::take(&mut known.versions).into_iter().partition(|(k, _)| k.0 == kind);
                known.versions = others;
                for ((k, name), sets) in delivered.all() {
                    if k != kind {
                        continue;
                    }
                    let key = (k, name);
                    if first || before.get(&key) != listing.get(&key.1).and_then(Option::as_ref) {
                        moved.extend(sets);
                    }
                }
                known.versions.extend(listing.into_iter().filter_map(|(name, v)| Some(((kind, name), v?))));
            }
            Event::Apply((name, version)) => moved = self.one(kind, name, version, delivered),
            Event::Delete((name, _)) => moved = self.one(kind, name, None, delivered),
        }
        moved
    }

    /// An object added, changed (`version`) or deleted (`None`) since the listing.
    fn one(
        &mut self,
        kind: &'static str,
        name: String,
        version: Option<String>,
        delivered: &impl Delivered,
    ) -> BTreeSet<String> {
        let key = (kind, name);
        let before = {
            let mut known = lock(&self.known);
            match version {
                Some(v) => known.versions.insert(key.clone(), v.clone()).filter(|b| *b == v),
                None => {
                    known.versions.remove(&key);
                    None
                }
            }
        };
        // The same version again (a duplicate event) moves nothing.
        if before.is_some() {
            return BTreeSet::new();
        }
        // Only what a Deployment recorded names NodeSets.
        delivered.to(kind, &key.1)
    }
}

/// Which NodeSets the Deployments recorded delivering what (the stores', in the controller).
trait Delivered {
    /// Every delivered object with its NodeSets.
    fn all(&self) -> BTreeMap<Key, BTreeSet<String>>;
    /// The NodeSets `kind` `name` was delivered to.
    fn to(&self, kind: &str, name: &str) -> BTreeSet<String>;
}

impl Delivered for Stores {
    fn all(&self) -> BTreeMap<Key, BTreeSet<String>> {
        self.delivered_inputs()
    }

    fn to(&self, kind: &str, name: &str) -> BTreeSet<String> {
        self.delivered_to(kind, name)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Recorded;

    impl Delivered for Recorded {
        fn all(&self) -> BTreeMap<Key, BTreeSet<String>> {
            BTreeMap::from([
                (("Secret", "shared".to_string()), BTreeSet::from(["a".to_string(), "b".to_string()])),
                (("Secret", "cert-a-0".to_string()), BTreeSet::from(["a".to_string()])),
            ])
        }

        fn to(&self, kind: &str, name: &str) -> BTreeSet<String> {
            self.all()
                .into_iter()
                .find(|((k, n), _)| *k == kind && n == name)
                .map(|(_, s)| s)
                .unwrap_or_default()
        }
    }

    const RECORDED: &Recorded = &Recorded;

    fn v(name: &str, rv: &str) -> Version {
        (name.to_string(), Some(rv.to_string()))
    }

    fn sets(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn only_a_delivered_object_that_moved_names_its_nodesets() {
        let mut w = Versions::default();
        w.take("Secret", Event::Init, RECORDED);
        for (n, rv) in [("shared", "1"), ("cert-a-0", "2"), ("unrelated", "3")] {
            w.take("Secret", Event::InitApply(v(n, rv)), RECORDED);
        }
        // The first listing counts as a change of every delivered object.
        assert_eq!(w.take("Secret", Event::InitDone, RECORDED), sets(&["a", "b"]));
        // Every name is kept with its version (no content), recorded or not; the kind is
        // listed: a name not there is absent.
        assert_eq!(lock(&w.known).versions.len(), 3);
        assert!(lock(&w.known).listed.contains("Secret"));
        assert_eq!(w.take("Secret", Event::Apply(v("unrelated", "4")), RECORDED), sets(&[]));
        assert_eq!(w.take("Secret", Event::Apply(v("cert-a-0", "5")), RECORDED), sets(&["a"]));
        // The same version again (a duplicate event) moves nothing; a ConfigMap of the same
        // name is another object.
        assert_eq!(w.take("Secret", Event::Apply(v("cert-a-0", "5")), RECORDED), sets(&[]));
        assert_eq!(w.take("ConfigMap", Event::Apply(v("cert-a-0", "6")), RECORDED), sets(&[]));
        assert_eq!(w.take("Secret", Event::Delete(v("shared", "7")), RECORDED), sets(&["a", "b"]));
        // A relist: what moved while the watch was away, and only that.
        w.take("Secret", Event::Init, RECORDED);
        w.take("Secret", Event::InitApply(v("cert-a-0", "5")), RECORDED);
        w.take("Secret", Event::InitApply(v("shared", "8")), RECORDED);
        assert_eq!(w.take("Secret", Event::InitDone, RECORDED), sets(&["a", "b"]));
        w.take("Secret", Event::Init, RECORDED);
        w.take("Secret", Event::InitApply(v("cert-a-0", "5")), RECORDED);
        w.take("Secret", Event::InitApply(v("shared", "8")), RECORDED);
        assert_eq!(w.take("Secret", Event::InitDone, RECORDED), sets(&[]));
    }
}
