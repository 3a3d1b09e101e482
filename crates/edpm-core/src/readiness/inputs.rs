//! Which credentials and configuration each node holds: for every Secret and ConfigMap a
//! completed Deployment recorded in `status.secretHashes` / `status.configMapHashes`, the hash
//! last delivered to each node it covered; and `SecretsCurrent`, each of them against the
//! object as it is now (hashed as lib-common hashes it, [`crate::objecthash`]).
//!
//! Upstream keeps one map per NodeSet and (since openstack-operator #1781) leaves it alone
//! when a Deployment has an `ansibleLimit`, so after a rotation delivered in batches nothing
//! says which nodes still hold the old credential. Here every completed Deployment that covered
//! a node moves that node's record, and the record is kept in the node's status object so it
//! outlives the Deployments. Only names and hashes are kept or printed, never contents.

use super::*;
use crate::condition::reasons::{INVALID_EVIDENCE, NO_INPUTS_DELIVERED, SECRETS_STALE};
use crate::condition::types::{NODESET_SECRETS_CURRENT, SECRETS_CURRENT};
use crate::snapshot::SecretData;
use crate::snapshot::evidence::Delivery;
use crate::snapshot::resource::Object;

/// What a run that failed for good mounted alike for every host it completed
/// (`GroupContext::failed_run`).
pub(super) struct FailedRun {
    /// Its services' `dataSources`, with their hashes now.
    shared: Vec<(&'static str, String, String)>,
    /// Each certificate of its services with `tlsCerts`, as its install-certs Job mounted it.
    certs: Vec<CertMount>,
}

/// One certificate (`service`, `key`) as the packed Secrets mounted it: by the first label of
/// each host name in them, each entry's hash as a certificate Secret holding it (`None`: an
/// entry without all three keys).
pub(super) struct CertMount {
    service: String,
    key: String,
    by_short: HashMap<String, Vec<Option<String>>>,
}

/// What a node's delivered inputs are, compared with the objects now.
#[derive(Debug, Clone, PartialEq, Eq)]
enum InputState {
    Current,
    /// The object's hash differs from the one delivered.
    Stale,
    /// The object does not exist (any more).
    Gone,
}

/// The hashes of every Secret and ConfigMap a run of this NodeSet (or the NodeSet's own
/// status) recorded, as the objects are now: computed once per NodeSet, not per node.
pub(super) fn hashes_now(
    snap: &Snapshot,
    runs: &[super::deploy::Run<'_>],
    status: Option<&crate::snapshot::evidence::NodeSetStatus>,
) -> BTreeMap<(String, String), Option<String>> {
    let mut out = BTreeMap::new();
    let recorded = runs
        .iter()
        .filter_map(|r| r.deployment)
        .map(|d| (&d.status.secret_hashes, &d.status.config_map_hashes))
        .chain(status.map(|s| (&s.secret_hashes, &s.config_map_hashes)));
    for (secrets, config_maps) in recorded {
        let names = secrets.keys().map(|n| ("Secret", n)).chain(config_maps.keys().map(|n| ("ConfigMap", n)));
        for (kind, name) in names {
            out.entry((kind.to_string(), name.clone())).or_insert_with(|| hash_now(snap, kind, name));
        }
    }
    out
}

/// Whether the snapshot has the object.
pub(super) fn exists(snap: &Snapshot, kind: &str, name: &str) -> bool {
    match kind {
        "Secret" => snap.secrets.iter().any(|s| s.id.name == name),
        _ => snap.config_maps.iter().any(|c| c.id.name == name),
    }
}

/// The object `kind`/`name` as it is now, hashed as lib-common does; `None` when the
/// snapshot does not have it.
fn hash_now(snap: &Snapshot, kind: &str, name: &str) -> Option<String> {
    if let Some(h) = snap.hashed.get(&(kind.to_string(), name.to_string()))
        && exists(snap, kind, name)
    {
        return Some(h.clone());
    }
    match kind {
        "Secret" => {
            snap.secrets.iter().find(|s| s.id.name == name).map(|s| crate::objecthash::secret(&s.body))
        }
        _ => snap
            .config_maps
            .iter()
            .find(|c| c.id.name == name)
            .map(|c| crate::objecthash::config_map(&c.body)),
    }
}

/// A node's part of a Secret a Deployment recorded, as upstream's TLS code makes them
/// (openstack-operator `internal/dataplane/cert.go` at 84322c77, `EnsureTLSCerts`):
/// - each node's certificate of a service is a Secret of its own, labelled `osdpns` (the
///   NodeSet), `osdp-service`, `osdp-service-cert-key` and `hostname` (the node's `hostName`),
///   and `internal/dataplane/hashes.go` records every such Secret of the NodeSet, selected by
///   those labels: one labelled for another host is not this node's at all, and its renewal
///   leaves this node current;
/// - the certificates are mounted packed into `<nodeset>-<service>-<cert>-certs-<n>` (labels
///   `numberOfSecrets`, `secretNumber`; keys `<ctlplane host name>-tls.crt`, `-tls.key`,
///   `-ca.crt`), which older upstream recorded instead: a node's share is its own keys, those
///   whose host name's first label is its `hostName`'s (upstream's common name is that label).
///
/// What this relies on: those four labels as upstream writes them (not the name form, which
/// is `cert-<hash>` when too long), and the packed keys' `<host>-tls.crt|tls.key|ca.crt` form.
/// A Secret that is not in the snapshot (deleted, unreadable) is the node's whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Share {
    /// Every key is the node's (any other Secret or ConfigMap).
    Whole,
    /// Not delivered to this node: a certificate labelled for another host, or a packed
    /// Secret holding none of its keys.
    None,
    /// These keys of a packed Secret.
    Keys(Vec<String>),
}

const CERT_LABELS: [&str; 4] = ["osdpns", "osdp-service", "osdp-service-cert-key", "hostname"];
const CERT_KEY_SUFFIXES: [&str; 3] = ["-tls.crt", "-tls.key", "-ca.crt"];

/// The first label of a host name, lower case: what upstream's common name is.
fn short(host: &str) -> String {
    host.split('.').next().unwrap_or(host).to_ascii_lowercase()
}

/// Node `host_name`'s share of Secret `secret` (see [`Share`]; `None`: not in the snapshot).
fn share_of(secret: Option<&Object<SecretData>>, host_name: &str) -> Share {
    let Some(secret) = secret else { return Share::Whole };
    let labels = &secret.meta.labels;
    if CERT_LABELS.iter().all(|l| labels.contains_key(*l)) {
        let theirs = labels.get("hostname").map(String::as_str).unwrap_or("");
        return if theirs.eq_ignore_ascii_case(host_name) { Share::Whole } else { Share::None };
    }
    let packed = labels.contains_key("numberOfSecrets")
        && !secret.body.data.is_empty()
        && secret.body.data.keys().all(|k| CERT_KEY_SUFFIXES.iter().any(|x| k.ends_with(x)));
    if !packed {
        return Share::Whole;
    }
    let mine = short(host_name);
    let keys: Vec<String> = secret
        .body
        .data
        .keys()
        .filter(|k| {
            CERT_KEY_SUFFIXES.iter().any(|x| k.strip_suffix(x).is_some_and(|base| short(base) == mine))
        })
        .cloned()
        .collect();
    if keys.is_empty() { Share::None } else { Share::Keys(keys) }
}

/// The hash of `keys` of Secret `name` as it is now (lib-common's hash of a Secret holding
/// only them); `None` when the snapshot does not have it.
fn share_hash(secret: Option<&Object<SecretData>>, keys: &[String]) -> Option<String> {
    let s = secret?;
    let data: BTreeMap<String, Vec<u8>> =
        s.body.data.iter().filter(|(k, _)| keys.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    Some(crate::objecthash::secret_parts(&data, &BTreeMap::new(), &s.body.type_))
}

/// Whether `candidate` replaces the kept delivery of the same object (`version::replaces`).
fn replaces(candidate: &Delivery, kept: &Delivery) -> bool {
    super::version::replaces(
        (&candidate.deployment, candidate.created.as_deref()),
        (&kept.deployment, kept.created.as_deref()),
    )
}

/// `SecretsCurrent` among what a node runs and holds (`super::HOLDINGS`); the NodeSet's
/// evidence is what upstream recorded delivering.
pub(super) const HOLDING: Holding = Holding {
    ty: SECRETS_CURRENT,
    node: |cx, m, held| cx.secrets_current(m, held.delivered),
    nodeset: |cx, nodes| (cx.nodeset_secrets_current(nodes), cx.upstream_inputs(nodes)),
};

impl<'a> GroupContext<'a> {
    /// Secret `name` of the snapshot, when `kind` is Secret.
    fn secret(&self, kind: &str, name: &str) -> Option<&'a Object<SecretData>> {
        if kind != "Secret" {
            return None;
        }
        self.secrets_by_name.get(name).copied()
    }

    /// Node `host_name`'s share of `kind` `name` ([`share_of`], the Secret found by name).
    fn share(&self, kind: &str, name: &str, host_name: &str) -> Share {
        if kind != "Secret" {
            return Share::Whole;
        }
        share_of(self.secret(kind, name), host_name)
    }

    /// An object's hash now: from the NodeSet's table (`hashes_now`), else computed (a
    /// delivery kept from a Deployment since deleted).
    fn hash_now(&self, kind: &str, name: &str) -> Option<String> {
        match self.hashes_now.get(&(kind.to_string(), name.to_string())) {
            Some(h) => h.clone(),
            None => hash_now(self.snap, kind, name),
        }
    }

    /// The node's deliveries: what the completed Deployments that covered it recorded, over
    /// what its status object kept; each marked with when it was first seen to differ (`now`
    /// for a difference not recorded before).
    pub(super) fn delivered(&self, m: &Member, kept: &[Delivery], now: Time) -> Vec<Delivery> {
        // What was kept is evidence only where it can be (`version::admissible`): not a
        // delivery dated in the future, nor one naming a real Deployment with another date.
        let deployments = &self.snap.evidence.deployments;
        let mut out: BTreeMap<(String, String), Delivery> = kept
            .iter()
            .filter(|d| super::version::admissible(deployments, &d.deployment, d.created.as_deref(), now))
            .map(|d| ((d.kind.clone(), d.name.clone()), d.clone()))
            .collect();
        for (i, d) in self.completed_on(m.inventory_hostname()) {
            // What the run delivered: what it recorded; for one that failed for good (it
            // records nothing) what it mounted, when that is exact (`failed_run_inputs`).
            let failed = self.states[i] != RunState::Done;
            let mounted = if failed { self.failed_run_inputs(i, d, &m.host_name.value) } else { None };
            if failed && mounted.is_none() {
                continue;
            }
            let recorded: Vec<(&str, &String, &String)> = match &mounted {
                Some(list) => list.iter().map(|(k, n, h)| (*k, n, h)).collect(),
                None => d
                    .status
                    .secret_hashes
                    .iter()
                    .map(|(n, h)| ("Secret", n, h))
                    .chain(d.status.config_map_hashes.iter().map(|(n, h)| ("ConfigMap", n, h)))
                    .collect(),
            };
            // A full Deployment delivers every input of the NodeSet (upstream replaces its
            // NodeSet-wide map then): what it did not record, and an older Deployment did, is
            // no longer an input of this node.
            if d.spec.services_override.is_empty() {
                let this = (self.runs[i].name, d.meta.creation_timestamp.as_deref());
                out.retain(|(kind, name), k| {
                    recorded.iter().any(|(rk, rn, _)| rk == kind && *rn == name)
                        || !super::version::replaces(this, (&k.deployment, k.created.as_deref()))
                });
            }
            for (kind, name, hash) in recorded {
                if self.share(kind, name, &m.host_name.value) == Share::None {
                    continue;
                }
                let candidate = Delivery {
                    kind: kind.to_string(),
                    name: name.clone(),
                    hash: hash.clone(),
                    deployment: self.runs[i].name.to_string(),
                    created: d.meta.creation_timestamp.clone(),
                    stale_since: None,
                    share: None,
                };
                let key = (kind.to_string(), name.clone());
                match out.get(&key) {
                    Some(k) if !replaces(&candidate, k) => {}
                    // The same delivery seen again keeps what was noted of it.
                    Some(k) if k.deployment == candidate.deployment && k.hash == candidate.hash => {}
                    _ => {
                        out.insert(key, candidate);
                    }
                }
            }
        }
        let mut list: Vec<Delivery> = out.into_values().collect();
        // Kept ones too: a certificate of another host is not this node's.
        list.retain(|d| self.share(&d.kind, &d.name, &m.host_name.value) != Share::None);
        self.mark(m, &mut list, now);
        list
    }

    /// The inputs run `i`, which failed for good, delivered to the host `host_name` it
    /// completed on (`version::failed_but_done_on`), with their hashes; upstream records none
    /// for a failed Deployment (its `setHashes` runs on completion only). They are what a
    /// completed run records (openstack-operator `internal/dataplane/hashes.go` at 84322c77):
    /// each of its services' `dataSources`, and of each service with `tlsCerts` the
    /// certificate Secrets labelled for the NodeSet, service and key, of which a host's share
    /// is the one labelled with its host name ([`Share`]). `None` when that is not exact.
    ///
    /// The `dataSources` ([`Self::failed_run`]), which its Jobs' pods mount (`deployment.go`
    /// `addServiceExtraMounts`, each key by `subPath`: read when the container starts): the
    /// content is the object's now. Exact only when nothing of it can have changed since the
    /// Deployment was created, before any of its Jobs and pods were, so what each pod mounted
    /// is what exists now: the Deployment's `creationTimestamp` and each Service's, the
    /// NodeSet's and every input's last change (`Meta::changed`, from `managedFields`) are
    /// readable, and every change is earlier (by a whole second: the API server's times drop
    /// fractions). Otherwise none: an input missing now (deleted, or optional and never made:
    /// nobody can tell which), a service whose definition is not in the snapshot, a NodeSet
    /// with `ansibleVarsFrom` (those reach the host through the inventory Secret upstream's
    /// NodeSet controller builds, at a time nothing here reads), a Role's group.
    ///
    /// The certificates ([`Self::cert_credit`]; openstack-operator `cert.go`, `deployment.go`
    /// and the Deployment controller at 84322c77, lib-common's `certmanager.EnsureCert`,
    /// edpm-ansible's `copy_certs_and_keys.yaml`): the Deployment makes them while it runs
    /// (`EnsureTLSCerts`, each reconcile before its Jobs: cert-manager's Secret
    /// `cert-<service>-<key>-<hostName>` per host, copied into the NodeSet's packed Secrets
    /// `<nodeset>-<service>-<key>-certs-<n>`, keys `<canonical_hostname>-tls.crt|tls.key|ca.crt`),
    /// so a rotation changes them after the Deployment was created; only its install-certs Job
    /// (a service with `addCertMounts`) mounts the packed Secrets (`deployment.go`
    /// `addCertMounts`, a projected volume), and edpm-ansible's `edpm_install_certs` copies
    /// the host's own three files (by its `canonical_hostname`) onto it. A host holds its
    /// certificate Secret as it is now when: every packed Secret the Job mounted (as many as the
    /// first's `numberOfSecrets` label says) last changed before each such Job of the run was
    /// created (before the Deployment when the Job is gone), so its pods saw them as they are
    /// now (kubelet's copy follows the API server's, as for the `dataSources`; upstream ends the
    /// reconcile that packs, requeued for 5 s, and makes the Job in a later one); exactly one
    /// entry of them is the host's (its first label is the host name's, as the canonical host
    /// name's is); and that entry, as a `kubernetes.io/tls` Secret, hashes as the
    /// host's certificate Secret does now (one labelled for the NodeSet, service, key and host):
    /// content, not the certificate Secret's time, which a rotation moves before the packing.
    /// Otherwise none for that host: a certificate renewed and not yet packed, or packed after
    /// the Job began, a Secret missing (a second packed Secret a reader did not get), a NodeSet
    /// without `tlsEnabled: true`, one whose `ansibleVars` set `canonical_hostname`, a service
    /// with `tlsCerts` that upstream may have deduplicated away (`deployOnAllNodeSets`, another
    /// service of the same `edpmServiceType` in the run), a run without an install-certs
    /// service or with a global one.
    pub(super) fn failed_run_inputs(
        &self,
        i: usize,
        d: &crate::snapshot::evidence::Deployment,
        host_name: &str,
    ) -> Option<Vec<(&'static str, String, String)>> {
        let run = self.failed_runs[i].get_or_init(|| self.failed_run(i, d)).as_ref()?;
        let mut out = run.shared.clone();
        for c in &run.certs {
            out.push(self.cert_credit(c, host_name)?);
        }
        Some(out)
    }

    /// What run `i`, which failed for good, mounted alike for every host it completed
    /// ([`Self::failed_run_inputs`]): computed once per run.
    fn failed_run(&self, i: usize, d: &crate::snapshot::evidence::Deployment) -> Option<FailedRun> {
        let created = d.meta.creation_timestamp.as_deref().and_then(Time::parse)?;
        let before = |meta: &crate::snapshot::resource::Meta| {
            meta.changed.as_deref().and_then(Time::parse).is_some_and(|c| c < created)
        };
        if self.group.kind != crate::model::GroupKind::NodeSet {
            return None;
        }
        let nodeset = self.snap.nodesets.iter().find(|n| n.id.name == self.group.name)?;
        if !before(&nodeset.meta) {
            return None;
        }
        let vars_from = !nodeset.body.node_template.ansible.ansible_vars_from.is_empty()
            || nodeset.body.nodes.values().any(|n| !n.ansible.ansible_vars_from.is_empty());
        if vars_from {
            return None;
        }
        let mut sources: Vec<&crate::snapshot::resource::DataSource> = Vec::new();
        // (service, cert key) of each certificate its services have.
        let mut certs: Vec<(&str, String)> = Vec::new();
        let mut mounters: Vec<&str> = Vec::new();
        for name in &self.runs[i].services {
            // A default service's definition is not in the snapshot: what it was then is unknown.
            let svc = self.snap.services.iter().find(|s| s.id.name == *name)?;
            if !before(&svc.meta) {
                return None;
            }
            certs.extend(self.tls_certs(i, name)?.into_iter().map(|k| (*name, k)));
            if svc.body.unknown.get("addCertMounts").and_then(serde_json::Value::as_bool) == Some(true) {
                // Deduplicated onto another NodeSet, it mounts that one's certificates.
                if self.snap.service_is_global(name) {
                    return None;
                }
                mounters.push(name);
            }
            sources.extend(svc.body.data_sources.iter());
        }
        let mut out = BTreeMap::new();
        for ds in sources {
            let refs = ds
                .secret_ref
                .as_ref()
                .map(|r| ("Secret", &r.name))
                .into_iter()
                .chain(ds.config_map_ref.as_ref().map(|r| ("ConfigMap", &r.name)));
            for (kind, name) in refs {
                let meta = match kind {
                    // By the NodeSet's index, as the deliveries are found.
                    "Secret" => &self.secret(kind, name)?.meta,
                    _ => &self.snap.config_maps.iter().find(|c| c.id.name == *name)?.meta,
                };
                if !before(meta) {
                    return None;
                }
                let hash = self.hash_now(kind, name)?;
                out.insert((kind, name.clone()), hash);
            }
        }
        let shared = out.into_iter().map(|((k, n), h)| (k, n, h)).collect();
        if certs.is_empty() {
            return Some(FailedRun { shared, certs: Vec::new() });
        }
        let certs = self.cert_mounts(i, created, nodeset, certs, &mounters)?;
        Some(FailedRun { shared, certs })
    }

    /// The keys of service `name`'s `tlsCerts` in run `i`; `None` when upstream may have
    /// deduplicated it away (`DedupeServices`: a global one onto another NodeSet, or another
    /// service of the run with the same `edpmServiceType`), so its install-certs Job would not
    /// mount them, or when `tlsCerts` is no mapping.
    fn tls_certs(&self, i: usize, name: &str) -> Option<Vec<String>> {
        let keys = crate::snapshot::refs::tls_cert_keys(self.snap, name)?;
        if keys.is_empty() {
            return Some(keys);
        }
        let ty = self.snap.service_type(name);
        let same_type = self.runs[i].services.iter().filter(|s| self.snap.service_type(s) == ty).count();
        (!self.snap.service_is_global(name) && same_type == 1).then_some(keys)
    }

    /// The certificates `certs` (service, key) of run `i` (its Deployment created at
    /// `created`), as the install-certs services `mounters` mounted them; `None` when what
    /// they mounted cannot be told ([`Self::failed_run_inputs`]).
    fn cert_mounts(
        &self,
        i: usize,
        created: Time,
        nodeset: &Object<crate::snapshot::resource::NodeSetSpec>,
        certs: Vec<(&str, String)>,
        mounters: &[&str],
    ) -> Option<Vec<CertMount>> {
        // Certificates: a NodeSet with TLS, whose hosts' canonical names are upstream's.
        if nodeset.body.tls_enabled != Some(true) || mounters.is_empty() {
            return None;
        }
        let sets_canonical = |v: &Option<crate::snapshot::resource::AnsibleVars>| match v {
            None => false,
            Some(crate::snapshot::resource::AnsibleVars::Map(m)) => {
                m.iter().any(|(k, _)| k == "canonical_hostname")
            }
            Some(crate::snapshot::resource::AnsibleVars::Other(_)) => true,
        };
        if sets_canonical(&nodeset.body.node_template.ansible.ansible_vars)
            || nodeset.body.nodes.values().any(|n| sets_canonical(&n.ansible.ansible_vars))
        {
            return None;
        }
        // Every install-certs Job of the run mounted the packed Secrets as they were when it
        // was created: the earliest of those times bounds their last change.
        let mounted_at = mounters
            .iter()
            .map(|m| {
                self.jobs
                    .job(m, self.runs[i].name, &self.group.name)
                    .map_or(Some(created), |j| j.meta.creation_timestamp.as_deref().and_then(Time::parse))
            })
            .collect::<Option<Vec<Time>>>()?
            .into_iter()
            .min()?;
        certs.into_iter().map(|(service, key)| self.cert_mount(service, key, mounted_at)).collect()
    }

    /// Certificate `key` of `service` as the packed Secrets hold it, each of them last changed
    /// before `mounted_at`; `None` when one is missing or changed since.
    fn cert_mount(&self, service: &str, key: String, mounted_at: Time) -> Option<CertMount> {
        let first = crate::snapshot::refs::packed_cert_secret(&self.group.name, service, &key, 0);
        let count: usize = self.secret("Secret", &first)?.meta.labels.get("numberOfSecrets")?.parse().ok()?;
        let mut entries: BTreeMap<&str, [Option<&Vec<u8>>; 3]> = BTreeMap::new();
        for n in 0..count {
            let name = crate::snapshot::refs::packed_cert_secret(&self.group.name, service, &key, n);
            let packed = self.secret("Secret", &name)?;
            if packed.meta.changed.as_deref().and_then(Time::parse).is_none_or(|c| c >= mounted_at) {
                return None;
            }
            for (k, v) in &packed.body.data {
                for (slot, suffix) in CERT_KEY_SUFFIXES.iter().enumerate() {
                    if let Some(base) = k.strip_suffix(suffix) {
                        entries.entry(base).or_default()[slot] = Some(v);
                    }
                }
            }
        }
        let mut by_short: HashMap<String, Vec<Option<String>>> = HashMap::new();
        for (base, [crt, tls_key, ca]) in entries {
            // As cert-manager's Secret holding them would hash.
            let hash = match (crt, tls_key, ca) {
                (Some(crt), Some(tls_key), Some(ca)) => {
                    let data = BTreeMap::from([
                        ("ca.crt".to_string(), ca.clone()),
                        ("tls.crt".to_string(), crt.clone()),
                        ("tls.key".to_string(), tls_key.clone()),
                    ]);
                    Some(crate::objecthash::secret_parts(&data, &BTreeMap::new(), "kubernetes.io/tls"))
                }
                _ => None,
            };
            by_short.entry(short(base)).or_default().push(hash);
        }
        Some(CertMount { service: service.to_string(), key, by_short })
    }

    /// Host `host_name`'s certificate Secret of `c`, with its hash now, when the host holds it
    /// as it is now ([`Self::failed_run_inputs`]).
    fn cert_credit(&self, c: &CertMount, host_name: &str) -> Option<(&'static str, String, String)> {
        let name = crate::snapshot::refs::host_cert_secret(&c.service, &c.key, host_name);
        let secret = self.secret("Secret", &name)?;
        let labels = [
            ("osdpns", self.group.name.as_str()),
            ("osdp-service", c.service.as_str()),
            ("osdp-service-cert-key", c.key.as_str()),
            ("hostname", host_name),
        ];
        if !labels.iter().all(|(k, v)| secret.meta.labels.get(*k).map(String::as_str) == Some(*v)) {
            return None;
        }
        let [Some(delivered)] = c.by_short.get(&short(host_name))?.as_slice() else { return None };
        // Kept by the controller (content not got again), else hashed here.
        let now = match self.snap.hashed.get(&("Secret".to_string(), name.clone())) {
            Some(h) => h.clone(),
            None => crate::objecthash::secret(&secret.body),
        };
        (now == *delivered).then_some(("Secret", name, now))
    }

    /// Notes on each of node `m`'s deliveries its share (a packed Secret) and since when it
    /// differs (`now` for a difference not recorded before).
    fn mark(&self, m: &Member, list: &mut [Delivery], now: Time) {
        for d in list {
            let whole_current = self.hash_now(&d.kind, &d.name).is_some_and(|h| h == d.hash);
            // A packed Secret: the node's own keys as delivered, noted while the whole is what
            // was delivered; kept after.
            if let Share::Keys(keys) = self.share(&d.kind, &d.name, &m.host_name.value) {
                if whole_current {
                    d.share = share_hash(self.secret(&d.kind, &d.name), &keys);
                }
            } else {
                d.share = None;
            }
            let differs = self.state(m, d) != InputState::Current;
            // Kept for the status object: the evidence's time, else the time first noted.
            d.stale_since = match (differs, d.stale_since.take()) {
                (false, _) => None,
                (true, kept) => {
                    self.differs_since(d).map(|(t, _)| t).or(kept).or_else(|| Some(now.to_string()))
                }
            };
        }
    }

    /// When the evidence says the object changed after it was delivered: the creation of the
    /// first later Deployment of this NodeSet that recorded another hash of it (a rotation
    /// delivered elsewhere), with that Deployment's name.
    fn differs_since(&self, d: &Delivery) -> Option<(String, String)> {
        self.runs
            .iter()
            .filter_map(|r| r.deployment.map(|dep| (r.name, dep)))
            .filter(|(name, dep)| {
                *name != d.deployment
                    && super::version::replaces(
                        (name, dep.meta.creation_timestamp.as_deref()),
                        (&d.deployment, d.created.as_deref()),
                    )
            })
            .filter(|(_, dep)| {
                let hashes = if d.kind == "Secret" {
                    &dep.status.secret_hashes
                } else {
                    &dep.status.config_map_hashes
                };
                hashes.get(&d.name).is_some_and(|h| *h != d.hash)
            })
            .filter_map(|(name, dep)| dep.meta.creation_timestamp.clone().map(|t| (t, name.to_string())))
            .min_by_key(|(t, _)| Time::parse(t))
    }

    /// A delivery's state on node `m`: the object now against the hash delivered; for a
    /// packed certificate Secret, the node's own keys against their hash when delivered.
    fn state(&self, m: &Member, d: &Delivery) -> InputState {
        match self.hash_now(&d.kind, &d.name) {
            None => InputState::Gone,
            Some(h) if h == d.hash => InputState::Current,
            Some(_) => match (self.share(&d.kind, &d.name, &m.host_name.value), &d.share) {
                (Share::Keys(keys), Some(kept))
                    if share_hash(self.secret(&d.kind, &d.name), &keys).as_ref() == Some(kept) =>
                {
                    InputState::Current
                }
                _ => InputState::Stale,
            },
        }
    }

    /// `SecretsCurrent`: every delivered input as it is now (not a member of `Ready`: a node
    /// holding a rotated credential may still work until the old one is revoked).
    pub(super) fn secrets_current(&self, m: &Member, delivered: &[Delivery]) -> (Condition, Vec<String>) {
        let mut ev = Vec::new();
        let mut stale = Vec::new();
        // Since when the first of them differs, as the evidence says (none: unknown).
        let mut since: Option<Time> = None;
        let mut bad = Vec::new();
        for d in delivered {
            // A recorded key that is no object name was never asked for (it would go into a
            // request path): bad input of the Deployment that recorded it, on its nodes only.
            if !crate::validate::is_dns1123_subdomain(&d.name) {
                let line = bad_key(d);
                ev.push(line.clone());
                bad.push(line);
                continue;
            }
            let state = self.state(m, d);
            // No `name: value` shape: the redactor would read a Secret named `…-secret` as a key.
            let mut line =
                format!("{} {}, delivered by Deployment {}, {}", d.kind, d.name, d.deployment, state.words());
            if let (InputState::Stale, Some(t)) = (&state, d.stale_since.as_deref()) {
                line.push_str(&format!(" since {t}"));
            }
            ev.push(line);
            if state != InputState::Current {
                let differs = self.differs_since(d);
                let when = d.stale_since.as_deref().or(differs.as_ref().map(|(t, _)| t.as_str()));
                if let Some(t) = when.and_then(Time::parse) {
                    since = Some(since.map_or(t, |s: Time| s.min(t)));
                }
                stale.push(stale_words(d, &state, differs));
            }
        }
        if delivered.is_empty() {
            let c = Condition::because(
                SECRETS_CURRENT,
                &NO_INPUTS_DELIVERED,
                "no completed Deployment that covered this node recorded the Secrets and ConfigMaps it delivered",
            );
            return (c, ev);
        }
        if stale.is_empty() && !bad.is_empty() {
            let why = format!(
                "cannot tell whether this node holds every current input: {}; fix that Deployment's record (or delete the Deployment) and deploy again",
                bad.join("; ")
            );
            return (Condition::because(SECRETS_CURRENT, &INVALID_EVIDENCE, why), ev);
        }
        if stale.is_empty() {
            return (self.all_current(delivered), ev);
        }
        let shown: Vec<&str> = stale.iter().map(String::as_str).collect();
        let c = Condition::because(
            SECRETS_CURRENT,
            &SECRETS_STALE,
            format!("stale: {}", super::version::names_cut(&shown)),
        );
        (Condition { last_transition_time: since.unwrap_or_default(), ..c }, ev)
    }

    /// `SecretsCurrent` True over `delivered`, since the newest delivery completed: from then
    /// on the node held each as it is now (unknown when a delivery's Deployment says no time).
    fn all_current(&self, delivered: &[Delivery]) -> Condition {
        let (s, c) = counts(delivered);
        let times: Vec<Time> =
            delivered.iter().map(|d| self.completed_at(&d.deployment, d.created.as_deref())).collect();
        let since =
            if times.contains(&Time(0)) { Time(0) } else { times.into_iter().max().unwrap_or_default() };
        let c = Condition::true_(
            SECRETS_CURRENT,
            format!("every delivered input current ({s} Secrets, {c} ConfigMaps)"),
        );
        Condition { last_transition_time: since, ..c }
    }

    /// `NodeSetSecretsCurrent`: how many nodes hold every current input, and which objects
    /// are stale on which nodes.
    pub(super) fn nodeset_secrets_current(&self, nodes: &[NodeView]) -> Condition {
        let total = nodes.len();
        let mut by_object: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        let mut current = 0;
        let mut known = 0;
        for n in nodes {
            match n.conditions.get(SECRETS_CURRENT) {
                Some(c) if c.is_true() => {
                    current += 1;
                    known += 1;
                }
                Some(c) if c.status == crate::condition::Status::False => {
                    known += 1;
                    for d in n.delivered.iter().filter(|d| d.stale_since.is_some()) {
                        by_object.entry(d.name.clone()).or_default().push(n.node.as_str());
                    }
                }
                _ => {}
            }
        }
        if known == 0 {
            return Condition::because(
                NODESET_SECRETS_CURRENT,
                &NO_INPUTS_DELIVERED,
                "no completed Deployment recorded the Secrets and ConfigMaps it delivered to these nodes",
            );
        }
        if by_object.is_empty() && current == total {
            return Condition::true_(
                NODESET_SECRETS_CURRENT,
                format!("{current}/{total} nodes have every current input"),
            );
        }
        let stale: Vec<String> = by_object
            .iter()
            .map(|(object, on)| format!("{object} on {}", super::version::names_cut(on)))
            .collect();
        let unknown = total - known;
        let unknown = if unknown > 0 { format!("; {unknown} with nothing recorded") } else { String::new() };
        Condition::because(
            NODESET_SECRETS_CURRENT,
            &SECRETS_STALE,
            format!("{current}/{total} nodes have every current input{unknown}; stale: {}", stale.join("; ")),
        )
    }
}

/// A delivery whose name is no object name, as the message says it.
fn bad_key(d: &Delivery) -> String {
    format!(
        "Deployment {}'s status.{} key {} is no {} name (a lowercase RFC 1123 subdomain): not read",
        d.deployment,
        if d.kind == "Secret" { "secretHashes" } else { "configMapHashes" },
        crate::excerpt::echo(&crate::excerpt::printable(&d.name)).debug(),
        d.kind
    )
}

impl InputState {
    fn words(&self) -> &'static str {
        match self {
            InputState::Current => "current",
            InputState::Stale => "changed",
            InputState::Gone => "does not exist now",
        }
    }
}

/// A stale or gone delivery, for the message: names only, and since when the object differs
/// when the evidence says (a later Deployment recorded another hash of it). A time noted by an
/// earlier evaluation stays in the status object (`staleSince`) and in `status explain`, not in
/// the message: the message would otherwise change from one evaluation to the next, and a time
/// first noted by a one-off command would be that command's clock.
fn stale_words(d: &Delivery, state: &InputState, since: Option<(String, String)>) -> String {
    let since = since
        .map(|(t, by)| format!(", differs since {t}: Deployment {by} recorded another"))
        .unwrap_or_default();
    match state {
        InputState::Gone => format!(
            "{} {} (does not exist: deleted, or never made; delivered by {})",
            d.kind, d.name, d.deployment
        ),
        _ => format!("{} {} (delivered by {}{since})", d.kind, d.name, d.deployment),
    }
}

impl GroupContext<'_> {
    /// Upstream's own record beside ours, for `status explain` of the NodeSet: its
    /// `status.secretHashes`/`configMapHashes` (one per NodeSet, left alone by an
    /// `ansibleLimit`-scoped Deployment), each against the object now, and where it and the
    /// nodes' records disagree.
    pub(super) fn upstream_inputs(&self, nodes: &[NodeView]) -> Vec<String> {
        let Some(status) = self.status else { return Vec::new() };
        let recorded = status
            .secret_hashes
            .iter()
            .map(|(n, h)| ("Secret", n, h))
            .chain(status.config_map_hashes.iter().map(|(n, h)| ("ConfigMap", n, h)));
        let mut lines = Vec::new();
        for (kind, name, hash) in recorded {
            let now = self.hash_now(kind, name);
            let upstream_current = now.as_deref() == Some(hash.as_str());
            let state = match &now {
                None => "does not exist now",
                Some(_) if upstream_current => "matches the object now",
                Some(_) => "differs from the object now",
            };
            let stale_on: Vec<&str> = nodes
                .iter()
                .filter(|n| {
                    n.delivered.iter().any(|d| d.kind == kind && d.name == *name && d.stale_since.is_some())
                })
                .map(|n| n.node.as_str())
                .collect();
            let mut line =
                format!("upstream: NodeSet {} status.{}[{name}] {state}", self.group.name, hash_field(kind));
            if upstream_current && !stale_on.is_empty() {
                line.push_str(&format!(
                    "; disagrees: {} node(s) still hold an older delivery: {}",
                    stale_on.len(),
                    super::version::names_cut(&stale_on)
                ));
            } else if !upstream_current && now.is_some() {
                let current_on: Vec<&str> = nodes
                    .iter()
                    .filter(|n| {
                        n.delivered
                            .iter()
                            .any(|d| d.kind == kind && d.name == *name && d.stale_since.is_none())
                    })
                    .map(|n| n.node.as_str())
                    .collect();
                if !current_on.is_empty() {
                    line.push_str(&format!(
                        "; disagrees: {} node(s) hold it as it is now (delivered by a Deployment upstream does not record, an ansibleLimit-scoped one): {}",
                        current_on.len(),
                        super::version::names_cut(&current_on)
                    ));
                }
            }
            lines.push(line);
        }
        lines
    }
}

fn hash_field(kind: &str) -> &'static str {
    if kind == "Secret" { "secretHashes" } else { "configMapHashes" }
}

fn counts(delivered: &[Delivery]) -> (usize, usize) {
    let s = delivered.iter().filter(|d| d.kind == "Secret").count();
    (s, delivered.len() - s)
}
