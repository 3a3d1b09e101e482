//! One evaluation of the touched NodeSets ([`reconcile`], controller-rs's word): the stores'
//! snapshot of what they need, the same model, readiness and `report::plan` as `status
//! report`, and, when leading, only what changed written (server-side apply,
//! `edpm_io::k8s::status`), the missing Leases made, and Events sent. Many NodeSets are
//! evaluated [`BATCH`] at a time. What it returns says when to come back: each NodeSet's next
//! node agent Lease expiry, and whether it failed (the loop's error policy then says when).

use std::collections::BTreeMap;
use std::time::Duration;

use super::nova::Poller;
use super::probes::Metrics;
use crate::Error;
use crate::k8s::{self, Client, watch};
use edpm_core::condition::Time;
use edpm_core::controller::touch::{self, Touch};
use edpm_core::readiness::{self, PhaseMap};

/// Events sent per evaluation at most: a data plane failing at once is one story, not 10,000
/// Events (the status objects hold every node's conditions).
const EVENTS_PER_EVALUATION: usize = 50;

/// What every evaluation works with.
pub(super) struct Cx<'a> {
    pub(super) client: &'a Client,
    pub(super) events: &'a k8s::events::Events,
    pub(super) stores: &'a watch::Stores,
    pub(super) phases: &'a PhaseMap,
    pub(super) metrics: &'a Metrics,
    /// Checked before every write: a replica that may have lost the Lease stops at once.
    pub(super) leadership: &'a k8s::leader::Leadership,
    pub(super) nova: Option<&'a Poller>,
    /// `--node-identities`: the node agents' identities, kept by the leader.
    pub(super) identities: Option<&'a crate::identities::Identities>,
    /// The delivered inputs' versions (watched) and hashes (kept): content got only when moved.
    pub(super) inputs: &'a crate::inputs::Inputs,
}

/// NodeSets evaluated at once, when many are touched (the first sync, a relist, a new leader,
/// a second of changes all over the data plane): an evaluation's memory grows with its nodes,
/// and at 10,000 nodes one evaluation of all more than doubled the process's resident memory,
/// which the allocator then keeps.
const BATCH: usize = 10;

/// An evaluation's end.
pub(super) struct Reconciled {
    /// Each batch evaluated, with when (from the batch's end) each of its NodeSets' first node
    /// agent Lease expires, and when it ended.
    pub(super) batches: Vec<(Touch, BTreeMap<String, Duration>, tokio::time::Instant)>,
    /// Ok, or the first batch's failure (the batches after it were not evaluated).
    pub(super) result: Result<(), Error>,
    /// Some writes were left out for want of leadership.
    pub(super) writes_skipped: bool,
}

/// Evaluates the touched NodeSets, [`BATCH`] at a time; stops at the first batch that fails.
pub(super) async fn reconcile(cx: &Cx<'_>, touched: Touch) -> Reconciled {
    let mut done = Reconciled { batches: Vec::new(), result: Ok(()), writes_skipped: false };
    done.result = in_batches(cx, &touched, &mut done).await;
    done
}

async fn in_batches(cx: &Cx<'_>, touched: &Touch, done: &mut Reconciled) -> Result<(), Error> {
    let names: Vec<String> = match touched {
        Touch::All => {
            let names = cx.stores.group_names();
            let ns = cx.client.namespace();
            cx.metrics.forget_nodesets(ns, |set| names.binary_search_by(|n| n.as_str().cmp(set)).is_err());
            // A NodeSet deleted while the watch was down has no event of its own.
            if let Some(p) = cx.nova {
                p.retain(&names);
            }
            names
        }
        Touch::NodeSets(sets) => sets.iter().cloned().collect(),
    };
    for chunk in names.chunks(BATCH) {
        let batch = Touch::NodeSets(chunk.iter().cloned().collect());
        let (next, wrote) = evaluate(cx, &batch).await?;
        done.writes_skipped |= !wrote;
        cx.metrics.tick();
        done.batches.push((batch, next, tokio::time::Instant::now()));
    }
    Ok(())
}

/// One evaluation of the touched NodeSets (timed and counted); writes when leading.
async fn evaluate(cx: &Cx<'_>, touched: &Touch) -> Result<(BTreeMap<String, Duration>, bool), Error> {
    let started = std::time::Instant::now();
    let result = evaluate_once(cx, touched).await;
    cx.metrics.reconciled(result.is_ok(), started.elapsed().as_secs_f64());
    result
}

/// Returns when, from now, each touched NodeSet's first node agent Lease expires, and whether
/// it wrote (false: it did not lead).
async fn evaluate_once(cx: &Cx<'_>, touched: &Touch) -> Result<(BTreeMap<String, Duration>, bool), Error> {
    let Cx { client, stores, phases, metrics, leadership, nova, inputs, .. } = *cx;
    // Only what the touched NodeSets need: their objects, and the kinds any NodeSet needs.
    let mut snap = stores.snapshot(client, touched, inputs).await.map_err(Error::failure)?;
    for u in &snap.evidence.unreadable {
        tracing::warn!("{}", u.warning());
        metrics.skipped(&u.id.kind);
    }
    let mut model = edpm_core::model::resolve(&snap)?;
    model.groups.retain(|g| touched.includes(&g.name));
    if let Some(poller) = nova {
        snap.evidence.nova = poller.for_evaluation(client, &snap, &model, touched).await?;
    }
    let now = edpm_io::clock::now();
    let r = readiness::evaluate_spread(
        &snap,
        &model,
        phases,
        readiness::Options { evidence: false },
        now,
        &edpm_io::parallel::spread,
    );
    let ns = client.namespace().to_string();
    for set in &r.nodesets {
        let nodes: Vec<&readiness::NodeView> = r.nodes.iter().filter(|n| n.nodeset == set.name).collect();
        metrics.set_nodeset(&ns, &set.name, &nodes);
    }
    metrics.forget_nodesets(&ns, |set| touched.includes(set) && !r.nodesets.iter().any(|s| s.name == set));
    let leads = leadership.leads();
    if leads {
        write(cx, &r, &snap.evidence, &ns).await?;
        if let Some(ids) = cx.identities
            && leadership.leads()
        {
            ids.keep(client, &snap, &model).await;
        }
    }
    let after = |t: Time| {
        // One second after: the evaluation must see the Lease as expired.
        Duration::from_secs(u64::try_from(t.0 - now.0).unwrap_or(0) + 1)
    };
    Ok((
        touch::next_expiries(&snap.evidence, now).into_iter().map(|(set, t)| (set, after(t))).collect(),
        leads,
    ))
}

/// The leader's writes for one evaluation: the status objects that changed, the node agents'
/// missing Leases, the Events of what moved and of what could not be read.
async fn write(
    cx: &Cx<'_>,
    r: &readiness::Readiness,
    evidence: &edpm_core::snapshot::evidence::Evidence,
    ns: &str,
) -> Result<(), Error> {
    let Cx { client, events, metrics, leadership, .. } = *cx;
    let writes = readiness::report::plan(r, evidence, ns);
    let may_write = || {
        // Each write begun is progress (a first sync of thousands of nodes is many writes).
        metrics.tick();
        leadership.leads()
    };
    let outcome =
        k8s::status::apply(client, writes, Duration::from_secs(60), &may_write).await.inspect_err(|e| {
            metrics.api_error("patch", e.code());
        })?;
    let missing = readiness::report::missing_leases(r, evidence);
    if !missing.is_empty() && may_write() {
        k8s::status::ensure_leases(client, missing, Duration::from_secs(60)).await.inspect_err(|e| {
            metrics.api_error("patch", e.code());
        })?;
    }
    let (told, dropped) = readiness::report::transitions(r, evidence, EVENTS_PER_EVALUATION);
    if dropped > 0 {
        tracing::info!(dropped, "more transitions than Events sent at once; the status objects say them all");
    }
    if !evidence.unreadable.is_empty() && may_write() {
        let failed = events.unreadable(client, &evidence.unreadable).await;
        for _ in 0..failed {
            metrics.api_error("create", None);
        }
    }
    if !told.is_empty() && may_write() {
        let failed = events.publish(client, &told).await;
        for _ in 0..failed {
            metrics.api_error("create", None);
        }
    }
    if !outcome.created.is_empty() || !outcome.updated.is_empty() {
        tracing::info!(
            nodesets = r.nodesets.len(),
            created = outcome.created.len(),
            updated = outcome.updated.len(),
            requests = outcome.requests,
            "wrote"
        );
    }
    Ok(())
}
