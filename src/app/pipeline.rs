//! The shared pipeline every command that reads the data plane runs: sources → snapshot →
//! model → inventory, each stage built once. The cluster connection, when a source or a
//! writer needs it, is made once per run and shared.

use std::cell::OnceCell;

use super::AppError;
use edpm_core::inventory::{self, Inventory};
use edpm_core::model::{self, Model};
use edpm_core::settings::{Settings, SourceSpec};
use edpm_core::snapshot::Snapshot;
use edpm_io::k8s;

/// A run's settings and its (lazily made) cluster connection.
pub(crate) struct Context<'s> {
    pub(crate) settings: &'s Settings,
    cluster: OnceCell<k8s::Cluster>,
    /// Read the evidence readiness needs from the cluster too (the `status` commands).
    pub(crate) with_evidence: bool,
    /// Running as Ansible's inventory script (`inventory --list`/`--host`): warnings go to the
    /// log (`-v`), never to stderr, which must stay empty on success.
    pub(crate) script: bool,
    /// When the whole command must be done (`status report --timeout`), set before the
    /// cluster is first used: every request ends by then.
    deadline: std::cell::Cell<Option<std::time::Instant>>,
    /// Where the node agents' Leases are (`status --lease-namespace`).
    pub(crate) lease_namespace: String,
}

/// Snapshot, model and inventory, built once.
pub(crate) struct Pipeline {
    pub(crate) snap: Snapshot,
    pub(crate) model: Model,
    pub(crate) inv: Inventory,
}

impl<'s> Context<'s> {
    pub(crate) fn new(settings: &'s Settings) -> Context<'s> {
        Context {
            settings,
            cluster: OnceCell::new(),
            with_evidence: false,
            script: false,
            deadline: std::cell::Cell::new(None),
            lease_namespace: edpm_core::readiness::api::DEFAULT_LEASE_NAMESPACE.to_string(),
        }
    }

    /// The cluster connection, made on first use.
    pub(crate) fn cluster(&self) -> Result<&k8s::Cluster, k8s::Error> {
        if let Some(c) = self.cluster.get() {
            return Ok(c);
        }
        let made = k8s::Cluster::connect(&self.k8s_settings())?;
        Ok(self.cluster.get_or_init(|| made))
    }

    /// Bounds everything the command asks of the cluster from now on by `time`.
    pub(crate) fn set_deadline(&self, time: std::time::Duration) {
        self.deadline.set(Some(std::time::Instant::now() + time));
    }

    /// The Kubernetes client's settings, from the run's.
    pub(crate) fn k8s_settings(&self) -> k8s::Settings {
        let s = self.settings;
        k8s::Settings {
            namespace: s.namespace.clone(),
            kubeconfig: s.kubeconfig.clone(),
            context: s.context.clone(),
            timeout: s.kube_timeout,
            attempts: 4,
            deadline: self.deadline.get(),
            lease_namespace: self.lease_namespace.clone(),
        }
    }

    pub(crate) fn snapshot(&self) -> Result<Snapshot, AppError> {
        self.snapshot_read(false)
    }

    /// The snapshot; `lines` keeps where each field was written, for `explain`. Documents of
    /// unknown kinds in the groups we read are warned about on stderr (`validate` lists them
    /// instead, through [`Context::snapshot_quiet`]).
    fn snapshot_read(&self, lines: bool) -> Result<Snapshot, AppError> {
        let snap = self.snapshot_quiet(lines)?;
        let unreadable =
            snap.evidence.unreadable.iter().map(edpm_core::snapshot::evidence::Unreadable::warning);
        let leases = snap
            .evidence
            .leases_unread
            .iter()
            .map(|why| format!("{why}: the node agents' conditions read Unknown"));
        for u in snap.unknown_kinds.iter().map(ToString::to_string).chain(unreadable).chain(leases) {
            if self.script {
                tracing::warn!("{u}");
            } else {
                super::output::warn(&u);
            }
        }
        Ok(snap)
    }

    pub(crate) fn snapshot_quiet(&self, lines: bool) -> Result<Snapshot, AppError> {
        let snap = crate::source::load(self.settings, self.with_evidence, &|| self.cluster(), lines)?;
        tracing::info!(objects = snap.host_sources(), ignored = snap.ignored, "sources loaded");
        Ok(snap)
    }

    /// Fails with [`Exit::Empty`] when `hosts` (hosts plus NodeSets and Roles: a NodeSet without
    /// nodes is a data-plane object upstream deploys, as its kuttl tests do) is zero and an empty
    /// inventory was not allowed, naming what was searched and what was found there instead.
    pub(crate) fn check_not_empty(&self, hosts: usize, found: &Found) -> Result<(), AppError> {
        if hosts > 0 || self.settings.allow_empty {
            return Ok(());
        }
        Err(AppError::empty(format!(
            "no hosts: {} hold no data-plane node ({found}); check --source, --namespace and --selector, or pass --allow-empty (EDPM_AGENT_ALLOW_EMPTY=1) if an empty inventory is what you want",
            self.searched()
        )))
    }

    /// The sources in words: directories, and the cluster's namespace, with the filters.
    pub(crate) fn searched(&self) -> String {
        let s = self.settings;
        let mut parts: Vec<String> = s
            .sources
            .iter()
            .map(|src| match src {
                SourceSpec::Dir(p) => match &s.namespace {
                    Some(ns) => format!("directory {} (namespace {ns} only)", p.display()),
                    None => format!("directory {}", p.display()),
                },
                SourceSpec::Kube => match self.cluster.get() {
                    Some(c) => format!("the cluster's namespace {}", c.client().namespace()),
                    None => "the cluster".to_string(),
                },
            })
            .collect();
        if let Some(sel) = &s.selector {
            parts.push(format!("keeping only what the selector {:?} matches", sel.as_str()));
        }
        format!("the sources searched ({})", parts.join(", "))
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
        let found = Found::of(&snap);
        let model = model::take(&mut snap)?;
        let inv =
            inventory::build_spread(&model, &snap, &self.inventory_options(), &edpm_io::parallel::spread)?;
        self.check_not_empty(inv.hosts.len() + model.groups.len(), &found)?;
        Ok((snap, model, inv))
    }

    /// The inventory with every variable's provenance, for `explain`.
    /// With it, the redactor for every value the source's Secrets hold: `explain` masks them
    /// wherever they show up, not only in the variables that came straight from a Secret.
    pub(crate) fn inventory_traced(&self) -> Result<(Inventory, edpm_core::redact::Redactor), AppError> {
        let snap = self.snapshot_read(true)?;
        let model = model::resolve(&snap)?;
        let opts = inventory::Options { provenance: true, ..self.inventory_options() };
        let inv = inventory::build_spread(&model, &snap, &opts, &edpm_io::parallel::spread)?;
        self.check_not_empty(inv.hosts.len() + model.groups.len(), &Found::of(&snap))?;
        Ok((inv, edpm_core::redact::Redactor::new(snap.secret_values())))
    }

    /// Snapshot, model and inventory: what render, derive, mounts and stage work from.
    pub(crate) fn pipeline(&self) -> Result<Pipeline, AppError> {
        let snap = self.snapshot()?;
        let model = model::resolve(&snap)?;
        let inv =
            inventory::build_spread(&model, &snap, &self.inventory_options(), &edpm_io::parallel::spread)?;
        // No empty check: mounts and derive work from the control plane alone, and render
        // and stage name the host they did not find.
        Ok(Pipeline { snap, model, inv })
    }
}

/// What a snapshot held instead of hosts, for the empty-inventory error.
#[derive(Debug, Clone, Default)]
pub(crate) struct Found {
    nodesets: usize,
    nodes: usize,
    roles: usize,
    other: usize,
    deselected: usize,
    unknown: usize,
    not_manifests: usize,
    /// Data-plane kinds the API server does not serve.
    not_served: Vec<String>,
}

impl Found {
    pub(crate) fn of(snap: &Snapshot) -> Found {
        Found {
            nodesets: snap.nodesets.len(),
            nodes: snap.nodes.len(),
            roles: snap.roles.len(),
            other: snap.ignored
                + snap.config_maps.len()
                + snap.secrets.len()
                + snap.services.len()
                + snap.openstack.len()
                + snap.ipsets.len()
                + snap.netconfigs.len()
                + snap.dnsmasqs.len(),
            deselected: snap.deselected,
            unknown: snap.unknown_kinds.len(),
            not_manifests: snap.not_manifests.len(),
            not_served: snap
                .not_served
                .iter()
                .filter(|k| k.ends_with(".dataplane.openstack.org"))
                .cloned()
                .collect(),
        }
    }
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "found {} NodeSet(s), {} Node(s) and {} Role(s) without hosts, {} object(s) of other kinds",
            self.nodesets, self.nodes, self.roles, self.other
        )?;
        if self.deselected > 0 {
            write!(f, ", {} data-plane object(s) the selector left out", self.deselected)?;
        }
        if self.unknown > 0 {
            write!(f, ", {} object(s) of unknown kinds (warned about above)", self.unknown)?;
        }
        if self.not_manifests > 0 {
            write!(f, ", {} file(s) holding no Kubernetes object", self.not_manifests)?;
        }
        if !self.not_served.is_empty() {
            write!(
                f,
                "; the API server does not serve {} (404: are openstack-operator's CRDs installed, and is this the right cluster and context?)",
                self.not_served.join(", ")
            )?;
        }
        Ok(())
    }
}
