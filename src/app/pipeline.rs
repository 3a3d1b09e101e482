//! The shared pipeline every command that reads the data plane runs: sources → snapshot →
//! model → inventory, each stage built once. The cluster connection, when a source or a
//! writer needs it, is made once per run and shared.

use std::cell::OnceCell;

use super::AppError;
use crate::inventory::{self, Inventory};
use crate::k8s;
use crate::model::{self, Model};
use crate::settings::Settings;
use crate::snapshot::Snapshot;

/// A run's settings and its (lazily made) cluster connection.
pub(crate) struct Context<'s> {
    pub(crate) settings: &'s Settings,
    cluster: OnceCell<k8s::Cluster>,
    /// Read the evidence readiness needs from the cluster too (the `status` commands).
    pub(crate) with_evidence: bool,
}

/// Snapshot, model and inventory, built once.
pub(crate) struct Pipeline {
    pub(crate) snap: Snapshot,
    pub(crate) model: Model,
    pub(crate) inv: Inventory,
}

impl<'s> Context<'s> {
    pub(crate) fn new(settings: &'s Settings) -> Context<'s> {
        Context { settings, cluster: OnceCell::new(), with_evidence: false }
    }

    /// The cluster connection, made on first use.
    pub(crate) fn cluster(&self) -> Result<&k8s::Cluster, k8s::Error> {
        if let Some(c) = self.cluster.get() {
            return Ok(c);
        }
        let s = self.settings;
        let made = k8s::Cluster::connect(&k8s::Settings {
            namespace: s.namespace.clone(),
            kubeconfig: s.kubeconfig.clone(),
            context: s.context.clone(),
            timeout: s.kube_timeout,
            attempts: 4,
        })?;
        Ok(self.cluster.get_or_init(|| made))
    }

    pub(crate) fn snapshot(&self) -> Result<Snapshot, AppError> {
        self.snapshot_read(false)
    }

    /// The snapshot; `lines` keeps where each field was written, for `explain`.
    fn snapshot_read(&self, lines: bool) -> Result<Snapshot, AppError> {
        let snap = crate::source::load(self.settings, self.with_evidence, &|| self.cluster(), lines)?;
        tracing::info!(objects = snap.host_sources(), ignored = snap.ignored, "sources loaded");
        Ok(snap)
    }

    pub(crate) fn inventory_options(&self) -> inventory::Options {
        inventory::Options {
            ssh_key_dir: self.settings.ssh_key_dir.clone(),
            images: self.settings.images.clone(),
            image_origins: self.settings.image_origins.clone(),
            provenance: false,
        }
    }

    /// The inventory's values only: what Ansible and export need. The model takes the
    /// snapshot's Roles, Nodes and NodeSets instead of copying them (nothing here reads them
    /// again), so a 10,000-host run holds one copy of each node (BENCHMARKS.md).
    pub(crate) fn inventory(&self) -> Result<(Snapshot, Model, Inventory), AppError> {
        let mut snap = self.snapshot()?;
        let model = model::take(&mut snap)?;
        let inv = inventory::build_spread(&model, &snap, &self.inventory_options(), &spread)?;
        Ok((snap, model, inv))
    }

    /// The inventory with every variable's provenance, for `explain`.
    /// With it, the redactor for every value the source's Secrets hold: `explain` masks them
    /// wherever they show up, not only in the variables that came straight from a Secret.
    pub(crate) fn inventory_traced(&self) -> Result<(Inventory, crate::redact::Redactor), AppError> {
        let snap = self.snapshot_read(true)?;
        let model = model::resolve(&snap)?;
        let opts = inventory::Options { provenance: true, ..self.inventory_options() };
        let inv = inventory::build_spread(&model, &snap, &opts, &spread)?;
        Ok((inv, crate::redact::Redactor::new(snap.secret_values())))
    }

    /// Snapshot, model and inventory: what render, derive, mounts and stage work from.
    pub(crate) fn pipeline(&self) -> Result<Pipeline, AppError> {
        let snap = self.snapshot()?;
        let model = model::resolve(&snap)?;
        let inv = inventory::build_spread(&model, &snap, &self.inventory_options(), &spread)?;
        Ok(Pipeline { snap, model, inv })
    }
}

/// Each group's variables on every core (`inventory::build_spread`).
fn spread(
    n: usize,
    work: &(dyn Fn(usize) -> inventory::build::GroupVars + Sync),
) -> Vec<inventory::build::GroupVars> {
    let groups: Vec<usize> = (0..n).collect();
    crate::par::map(&groups, |i| work(*i))
}
