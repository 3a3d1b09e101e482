//! The controller's view of the cluster: one watch per kind the status commands read
//! (`read::listed`: the kinds of `edpm_core::kinds`, evidence included), each feeding a store of its own, so an evaluation
//! reads memory, not the API server. Every change is sent on a channel, named by its kind,
//! for the caller to decide what it touches.
//!
//! The stores hold what the evaluation reads, not the objects: each object is decoded once,
//! when it arrives, into its part of a [`Snapshot`] (typed, `managedFields` cut to their
//! times, kubectl's last-applied copy dropped), beside the few fields that say which NodeSets
//! it touches. At 10,000 nodes, kube's reflector stores of `DynamicObject`s (JSON trees) held
//! over 600 MiB; the typed parts are a fraction of that, and an evaluation clones the parts it
//! needs instead of decoding JSON again.
//!
//! kube's watcher does the rest: it lists, then watches from the list's `resourceVersion`
//! with bookmarks; a dropped stream resumes from the last version seen, a `410 Gone` lists
//! again (an `Init` … `InitDone` cycle, whose objects replace the store's at the end), and
//! errors back off (kube's default backoff) and are counted. Secrets and ConfigMaps are not
//! stored here: the ones the objects reference are got by name at each evaluation
//! (`read::add_references`), and their versions watched metadata-only (`super::inputs`).
//!
//! A kind whose CRD is not installed (its list answers 404) is empty until its CRD appears on
//! the watch of CRDs (`super::crds`, metadata only): an operator installed after the
//! controller started is watched from then on, at once, and nothing is asked for meanwhile. A
//! CRD deleted empties its kind's store. Where the CRD watch is refused (an older RBAC), an
//! absent kind is asked for again every `--crd-recheck` (jittered) instead.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use super::crds::Presence;
use super::read::{Listed, Listing, ReadError, listed, listed_json, located};
use super::{Client, Error};
use edpm_core::controller::touch::{self, Lookup, Reach, Touch};

use super::{WatchEvent, code};
use edpm_core::kinds::KnownKind;
use edpm_core::snapshot::resource::{FieldLines, Origin};
use edpm_core::snapshot::{Entry, Snapshot, SnapshotError};

/// kubectl's copy of the whole object as last applied: nothing reads it, and on a NodeSet it
/// doubles what the store would hold.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One stored object: the NodeSets it reaches, and the object decoded (or why it does not
/// decode: an evaluation that needs it reports that).
#[derive(Debug)]
struct Part {
    reach: Reach,
    entry: Result<Entry, SnapshotError>,
}

type Store = BTreeMap<String, Part>;

struct Watched {
    listed: &'static Listed,
    store: Arc<Mutex<Store>>,
    synced: Arc<AtomicBool>,
}

/// The stores of every watched kind.
pub struct Stores {
    kinds: Vec<Watched>,
    /// The NodeSets of Jobs deleted lately: their pods go after them (background deletion),
    /// and each pod's deletion would otherwise touch every NodeSet.
    departed: Departed,
}

/// Job name → its reach, of deleted Jobs; forgotten wholesale past [`DEPARTED_MAX`].
type Departed = Arc<Mutex<std::collections::HashMap<String, Reach>>>;
const DEPARTED_MAX: usize = 10_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code holding these locks panics; were one poisoned, the map would still be whole.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Stores {
    /// Every kind has been listed completely at least once.
    pub fn synced(&self) -> bool {
        self.kinds.iter().all(|k| k.synced.load(Ordering::Acquire))
    }

    /// The kinds watched, by their `plural.group`.
    pub fn kinds(&self) -> Vec<String> {
        self.kinds.iter().map(|k| k.listed.name()).collect()
    }

    /// The names of every NodeSet and seeds' Role stored: the groups of hosts an evaluation
    /// of everything covers, in name order.
    pub fn group_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .kinds
            .iter()
            .filter(|k| k.listed.holds_hosts())
            .flat_map(|k| lock(&k.store).keys().cloned().collect::<Vec<_>>())
            .collect();
        // The seeds' DataPlane declares Roles inline too.
        for k in self.kinds.iter().filter(|k| k.listed.known == KnownKind::DataPlane) {
            for p in lock(&k.store).values() {
                if let Ok(Entry::DataPlane(dp)) = &p.entry {
                    names.extend(dp.body.roles.keys().cloned());
                }
            }
        }
        names.sort();
        names.dedup();
        names
    }

    /// The Secrets and ConfigMaps the stored Deployments recorded delivering (`kind`, name),
    /// each with the NodeSets of the Deployments that did: what `SecretsCurrent` compares.
    pub fn delivered_inputs(&self) -> BTreeMap<(&'static str, String), BTreeSet<String>> {
        let mut out: BTreeMap<(&'static str, String), BTreeSet<String>> = BTreeMap::new();
        let Some(d) = self.kinds.iter().find(|k| k.listed.known == KnownKind::Deployment) else { return out };
        for part in lock(&d.store).values() {
            let Ok(Entry::Deployment(d)) = &part.entry else { continue };
            let names = d
                .status
                .secret_hashes
                .keys()
                .map(|n| ("Secret", n))
                .chain(d.status.config_map_hashes.keys().map(|n| ("ConfigMap", n)));
            // A key that is no object name is never asked for (readiness names it as bad input
            // on that Deployment's nodes).
            for (kind, name) in names.filter(|(_, n)| edpm_core::validate::is_dns1123_subdomain(n)) {
                out.entry((kind, name.clone())).or_default().extend(d.spec.node_sets.iter().cloned());
            }
        }
        for (key, sets) in self.mounted_by_unfinished() {
            out.entry(key).or_default().extend(sets);
        }
        out
    }

    /// What the stored Deployments that have not completed may have delivered though they
    /// record nothing: the `dataSources` of the services they run, with their NodeSets. A run
    /// that failed for good credits them to the hosts it completed
    /// (`readiness::inputs::failed_run_inputs`), so their moves must be seen too. Nothing to
    /// look up while every Deployment has completed.
    fn mounted_by_unfinished(&self) -> BTreeMap<(&'static str, String), BTreeSet<String>> {
        let find = |known: KnownKind| self.kinds.iter().find(|k| k.listed.known == known);
        let Some(d) = find(KnownKind::Deployment) else { return BTreeMap::new() };
        let runs: Vec<(Vec<String>, Vec<String>)> = lock(&d.store)
            .values()
            .filter_map(|p| match &p.entry {
                Ok(Entry::Deployment(d)) if !d.status.deployed => {
                    Some((d.spec.services_override.clone(), d.spec.node_sets.clone()))
                }
                _ => None,
            })
            .collect();
        if runs.is_empty() {
            return BTreeMap::new();
        }
        // One store locked at a time.
        let nodeset_services: BTreeMap<String, Vec<String>> = find(KnownKind::NodeSet)
            .map(|k| {
                lock(&k.store)
                    .values()
                    .filter_map(|p| match &p.entry {
                        Ok(Entry::NodeSet(o, _)) => {
                            Some((o.id.name.clone(), o.body.services.clone().unwrap_or_default()))
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let sources: BTreeMap<String, Vec<edpm_core::snapshot::resource::DataSource>> =
            find(KnownKind::Service)
                .map(|k| {
                    lock(&k.store)
                        .values()
                        .filter_map(|p| match &p.entry {
                            Ok(Entry::Service(o)) => Some((o.id.name.clone(), o.body.data_sources.clone())),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
        mounted(&runs, &nodeset_services, &sources)
    }

    /// The NodeSets of the stored Deployments that recorded delivering `kind` (`Secret` or
    /// `ConfigMap`) `name`; empty when none did. A lookup per Deployment, no map built: what a
    /// watch event of one Secret costs.
    pub fn delivered_to(&self, kind: &str, name: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let Some(d) = self.kinds.iter().find(|k| k.listed.known == KnownKind::Deployment) else { return out };
        for part in lock(&d.store).values() {
            let Ok(Entry::Deployment(d)) = &part.entry else { continue };
            let recorded = match kind {
                "Secret" => d.status.secret_hashes.contains_key(name),
                _ => d.status.config_map_hashes.contains_key(name),
            };
            if recorded {
                out.extend(d.spec.node_sets.iter().cloned());
            }
        }
        let key = (if kind == "Secret" { "Secret" } else { "ConfigMap" }, name.to_string());
        if let Some(sets) = self.mounted_by_unfinished().remove(&key) {
            out.extend(sets);
        }
        out
    }

    /// The snapshot the stores hold now of the objects the `touched` NodeSets need, with the
    /// ConfigMaps and Secrets it references (got by name, unless `cache` has one's hash at its
    /// version now): what `read::snapshot` would have listed, less the objects of other
    /// NodeSets.
    pub async fn snapshot(
        &self,
        client: &Client,
        touched: &Touch,
        cache: &dyn super::read::InputCache,
    ) -> Result<Snapshot, ReadError> {
        let mut snap = Snapshot::default();
        for k in &self.kinds {
            // Lock order: a store, then the Jobs' or Deployments' to look a reach up; a Job's
            // or a Deployment's own reach never looks up its own kind.
            let store = lock(&k.store);
            let kept = store.values().filter(|p| p.reach.within(touched, self));
            // Filed straight into one snapshot: absorbing a snapshot per kind copied the lists
            // kind after kind.
            let entries: Vec<&Entry> =
                kept.map(|p| p.entry.as_ref().map_err(Clone::clone)).collect::<Result<_, _>>()?;
            snap.add_entries(entries);
        }
        snap.check_duplicates()?;
        super::read::add_references_cached(client, snap, cache).await
    }
}

/// What the stores know of Jobs (pods name only theirs) and Deployments (a Job names one).
impl Lookup for Stores {
    fn job(&self, name: &str) -> Option<Reach> {
        let jobs = self.kinds.iter().find(|k| k.listed.known == KnownKind::Job)?;
        if let Some(p) = lock(&jobs.store).get(name) {
            return Some(p.reach.clone());
        }
        lock(&self.departed).get(name).cloned()
    }

    fn deployment(&self, name: &str) -> Option<Vec<String>> {
        let d = self.kinds.iter().find(|k| k.listed.known == KnownKind::Deployment)?;
        match &lock(&d.store).get(name)?.reach {
            Reach::NodeSets(v) => Some(v.clone()),
            _ => None,
        }
    }
}

/// Starts a watch for each kind (`selector` applies to the kinds that produce hosts, as
/// for a read), and the watch of their CRDs that starts and stops them (`super::crds`).
pub async fn start(
    client: &Client,
    selector: Option<&str>,
    recheck: Duration,
    events: UnboundedSender<WatchEvent>,
) -> Result<Stores, Error> {
    let ns = client.namespace().to_string();
    let mut kinds = Vec::new();
    let departed = Departed::default();
    // Each CRD-defined kind's presence, by its CRD's name, for the CRD watch to set.
    let mut presence: BTreeMap<String, Vec<watch::Sender<Presence>>> = BTreeMap::new();
    for l in listed() {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.kube(), l.namespace(client, &ns), &l.resource());
        let sel = l.selector(selector);
        let installed = installed(client, &api, l, sel.as_deref()).await?;
        let store = Arc::new(Mutex::new(Store::new()));
        // An absent kind is complete as it is: empty.
        let synced = Arc::new(AtomicBool::new(!installed));
        let (tx, crd) = watch::channel(if super::crds::defined_by_crd(l.group) {
            if installed { Presence::Installed } else { Presence::Absent }
        } else {
            Presence::Unknown
        });
        if super::crds::defined_by_crd(l.group) {
            presence.entry(l.name()).or_default().push(tx);
        }
        let w = Watch {
            client: client.clone(),
            api,
            listed: l,
            selector: sel,
            store: store.clone(),
            synced: synced.clone(),
            tx: events.clone(),
            recheck,
            departed: (l.known == KnownKind::Job).then(|| departed.clone()),
        };
        tokio::spawn(w.run(installed, crd));
        kinds.push(Watched { listed: l, store, synced });
    }
    tokio::spawn(super::crds::follow(client.clone(), presence, recheck, events));
    Ok(Stores { kinds, departed })
}

/// Whether the kind's CRD is installed: a one-item list answers (404: it is not).
async fn installed(
    client: &Client,
    api: &Api<DynamicObject>,
    l: &Listed,
    selector: Option<&str>,
) -> Result<bool, Error> {
    let mut probe = ListParams::default().limit(1);
    if let Some(s) = selector {
        probe = probe.labels(s);
    }
    match client.within_time(api.list_metadata(&probe)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(client.error(
            format!("listing {} in namespace {}", l.name(), l.namespace(client, client.namespace())),
            &e,
        )),
    }
}

/// One kind's watch and the store it keeps.
struct Watch {
    client: Client,
    api: Api<DynamicObject>,
    listed: &'static Listed,
    selector: Option<String>,
    store: Arc<Mutex<Store>>,
    synced: Arc<AtomicBool>,
    tx: UnboundedSender<WatchEvent>,
    /// How often an absent kind is asked for again.
    recheck: Duration,
    /// For Jobs: where a deleted one's NodeSet is remembered.
    departed: Option<Departed>,
}

impl Watch {
    /// The kind's life: waiting for its CRD, watching, and again after the CRD is deleted.
    async fn run(self, mut installed: bool, mut crd: watch::Receiver<Presence>) {
        let kind = self.listed.kind;
        loop {
            if !installed {
                if self.until_installed(&mut crd).await.is_none() {
                    return; // the controller is gone
                }
                tracing::info!(kind, "its CRD is installed now: watching it");
                // Not complete until listed.
                self.synced.store(false, Ordering::Release);
            }
            tokio::select! {
                () = self.watch() => return, // the controller is gone
                () = removed(&mut crd) => {}
            }
            tracing::info!(kind, "its CRD was deleted: nothing of it is held until it is installed again");
            lock(&self.store).clear();
            // Complete as it is, empty; the evaluation of everything that follows forgets it.
            self.synced.store(true, Ordering::Release);
            if self.tx.send(WatchEvent::Synced { kind }).is_err() {
                return;
            }
            installed = false;
        }
    }

    /// Waits until the kind's CRD is installed and the kind served: told by the CRD watch, or
    /// (where it is refused) asked every `--crd-recheck`. `None` when nobody listens any more.
    async fn until_installed(&self, crd: &mut watch::Receiver<Presence>) -> Option<()> {
        loop {
            let presence = *crd.borrow_and_update();
            match presence {
                Presence::Installed => {
                    self.served().await;
                    return Some(());
                }
                Presence::Absent => {
                    if crd.changed().await.is_err() || self.tx.is_closed() {
                        return None;
                    }
                }
                Presence::Unknown => {
                    tokio::time::sleep(super::jitter(self.recheck)).await;
                    if installed_now(self).await? {
                        return Some(());
                    }
                }
            }
        }
    }

    /// A CRD just created is served once the API server has established it (a condition in
    /// its `status`, which the metadata watch does not see): asked for a few times over a few
    /// seconds; then the watcher's backoff takes over, should it still not be.
    async fn served(&self) {
        let mut wait = Duration::from_millis(100);
        for _ in 0..8 {
            match installed(&self.client, &self.api, self.listed, self.selector.as_deref()).await {
                Ok(false) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
                _ => return,
            }
        }
    }

    /// The kind's watch, feeding its store, until nobody listens any more.
    async fn watch(&self) {
        let kind = self.listed.kind;
        let mut config = watcher::Config::default();
        if let Some(s) = &self.selector {
            config = config.labels(s);
        }
        let stream = watcher(self.api.clone(), config).default_backoff();
        let mut stream = std::pin::pin!(stream);
        // The objects of a listing in progress; they replace the store's when it is complete.
        let mut listing: Option<Store> = None;
        while let Some(item) = stream.next().await {
            let sent = match item {
                Ok(watcher::Event::Init) => {
                    listing = Some(Store::new());
                    Ok(())
                }
                Ok(watcher::Event::InitApply(o)) => {
                    // No event each: the listing's end touches everything.
                    let (name, mut part) = self.part(o);
                    self.observe(&name, &mut part);
                    listing.get_or_insert_with(Store::new).insert(name, part);
                    Ok(())
                }
                Ok(watcher::Event::InitDone) => {
                    *lock(&self.store) = listing.take().unwrap_or_default();
                    self.synced.store(true, Ordering::Release);
                    self.tx.send(WatchEvent::Synced { kind })
                }
                Ok(watcher::Event::Apply(o)) => {
                    let (name, mut part) = self.part(o);
                    self.observe(&name, &mut part);
                    let reach = part.reach.clone();
                    lock(&self.store).insert(name, part);
                    self.tx.send(WatchEvent::Changed { kind, reach })
                }
                Ok(watcher::Event::Delete(o)) => {
                    let (name, part) = self.part(o);
                    lock(&self.store).remove(&name);
                    if let Some(d) = &self.departed {
                        let mut d = lock(d);
                        if d.len() >= DEPARTED_MAX {
                            d.clear();
                        }
                        d.insert(name.clone(), part.reach.clone());
                    }
                    self.tx.send(WatchEvent::Changed { kind, reach: part.reach })
                }
                Err(e) => self.tx.send(WatchEvent::Failed { kind, code: code(&e), error: e.to_string() }),
            };
            if sent.is_err() {
                return; // the controller is gone
            }
        }
    }

    /// A node agent's Lease is judged by when this controller saw its `renewTime` move, by
    /// its own clock (`Lease::observe`), so a holder whose clock is wrong can neither keep a
    /// dead node alive nor cut a live one short. The previous reading is the store's (a
    /// relist keeps the times of Leases that did not move).
    fn observe(&self, name: &str, part: &mut Part) {
        let Ok(Entry::Lease(lease)) = &mut part.entry else { return };
        let now = edpm_core::condition::Time::from_unix(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
        );
        let store = lock(&self.store);
        let previous = match store.get(name).map(|p| &p.entry) {
            Some(Ok(Entry::Lease(p))) => Some(p.as_ref()),
            _ => None,
        };
        lease.observe(previous, now);
    }

    /// Decodes an object into its stored part.
    fn part(&self, mut o: DynamicObject) -> (String, Part) {
        // Only when each manager last changed the object (`Meta::changed`): the fields each
        // owns are most of an object's size, and nothing reads them.
        if let Some(entries) = o.metadata.managed_fields.as_mut() {
            for e in entries {
                e.fields_v1 = None;
                e.fields_type = None;
                e.api_version = None;
            }
        }
        if let Some(a) = o.metadata.annotations.as_mut() {
            a.remove(LAST_APPLIED);
        }
        let name = o.metadata.name.clone().unwrap_or_default();
        let empty = BTreeMap::new();
        let mut labels = std::borrow::Cow::Borrowed(o.metadata.labels.as_ref().unwrap_or(&empty));
        // A node agent's Lease names its NodeSet by label, shortened when the name is longer
        // than a label value may be; the whole name is in its annotation.
        if let Some(set) =
            o.metadata.annotations.as_ref().and_then(|a| a.get(edpm_core::readiness::api::NODESET_ANNOTATION))
        {
            labels.to_mut().insert(edpm_core::readiness::api::NODESET_LABEL.to_string(), set.clone());
        }
        let reach = touch::reach(self.listed.reach, &name, &labels, &o.data["spec"]);
        let action = format!("reading the watched {}", self.listed.name());
        let ns = self.listed.namespace(&self.client, self.client.namespace());
        let origin = Origin::Api { namespace: ns.to_string() };
        let entry = match listed_json(&action, self.listed, &o) {
            Ok(value) => {
                let doc = located(ns, value);
                Entry::decode(doc.origin, FieldLines::default(), doc.node, None)
            }
            Err(e) => Err(SnapshotError::NotAnObject { origin, reason: e.to_string() }),
        };
        (name, Part { reach, entry })
    }
}

/// Returns once the kind's CRD is deleted, as the CRD watch tells; never where it does not.
async fn removed(crd: &mut watch::Receiver<Presence>) {
    if crd.wait_for(|p| *p == Presence::Absent).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Asks whether an absent kind's CRD is installed now; `None` when nobody listens any more.
async fn installed_now(w: &Watch) -> Option<bool> {
    if w.tx.is_closed() {
        return None;
    }
    match installed(&w.client, &w.api, w.listed, w.selector.as_deref()).await {
        Ok(found) => Some(found),
        Err(e) => {
            let _ =
                w.tx.send(WatchEvent::Failed { kind: w.listed.kind, code: e.code(), error: e.to_string() });
            Some(false)
        }
    }
}

/// The `dataSources` (`kind`, name) of the services each run (`servicesOverride`, NodeSets)
/// runs, the NodeSets' own lists when it overrides none, with the run's NodeSets.
fn mounted(
    runs: &[(Vec<String>, Vec<String>)],
    nodeset_services: &BTreeMap<String, Vec<String>>,
    sources: &BTreeMap<String, Vec<edpm_core::snapshot::resource::DataSource>>,
) -> BTreeMap<(&'static str, String), BTreeSet<String>> {
    let mut out: BTreeMap<(&'static str, String), BTreeSet<String>> = BTreeMap::new();
    for (overridden, sets) in runs {
        let services: BTreeSet<&String> = if overridden.is_empty() {
            sets.iter().filter_map(|s| nodeset_services.get(s)).flatten().collect()
        } else {
            overridden.iter().collect()
        };
        for ds in services.into_iter().filter_map(|s| sources.get(s)).flatten() {
            let refs = ds
                .secret_ref
                .iter()
                .map(|r| ("Secret", &r.name))
                .chain(ds.config_map_ref.iter().map(|r| ("ConfigMap", &r.name)));
            for (kind, name) in refs.filter(|(_, n)| edpm_core::validate::is_dns1123_subdomain(n)) {
                out.entry((kind, name.clone())).or_default().extend(sets.iter().cloned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use edpm_core::snapshot::resource::{DataSource, LocalRef};

    /// A Deployment that has not completed records nothing, but what its services mount may be
    /// credited to the hosts it completed: their moves name its NodeSets.
    #[test]
    fn what_an_unfinished_deployments_services_mount_names_its_nodesets() {
        let secret = |n: &str| DataSource {
            secret_ref: Some(LocalRef { name: n.to_string(), optional: None }),
            ..Default::default()
        };
        let config_map = |n: &str| DataSource {
            config_map_ref: Some(LocalRef { name: n.to_string(), optional: None }),
            ..Default::default()
        };
        let sources = BTreeMap::from([
            ("nova".to_string(), vec![secret("nova-cfg"), config_map("nova-extra")]),
            ("ovn".to_string(), vec![config_map("ovncontroller-config")]),
            ("bad".to_string(), vec![secret("../x")]),
        ]);
        let nodeset_services =
            BTreeMap::from([("ns1".to_string(), vec!["ovn".to_string(), "nova".to_string()])]);
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let sets = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
        // An override runs only its services; a full run the NodeSet's.
        let got = super::mounted(
            &[(s(&["nova", "bad"]), s(&["ns2"])), (vec![], s(&["ns1"]))],
            &nodeset_services,
            &sources,
        );
        assert_eq!(
            got,
            BTreeMap::from([
                (("ConfigMap", "nova-extra".to_string()), sets(&["ns1", "ns2"])),
                (("ConfigMap", "ovncontroller-config".to_string()), sets(&["ns1"])),
                (("Secret", "nova-cfg".to_string()), sets(&["ns1", "ns2"])),
            ])
        );
    }
}
