//! Staging: the files a node needs, decided purely, then written by `edpm_io::node_root` (the only code that
//! writes host files).
//!
//! What a node gets:
//! - Ceph client files: every Secret/ConfigMap/projected volume that reaches the EDPM job
//!   (propagation `[Compute]`) and is mounted at `/etc/ceph` (edpm-ansible's
//!   `edpm_ceph_client_files_source`) lands in `var/lib/openstack/config/ceph/`, top-level
//!   non-dot files only, `*.keyring` 0600 and the rest 0644, as `edpm_ceph_client_files` does;
//! - mount units: NFS and CephFS volumes that reach the job become systemd `.mount` units in
//!   `etc/systemd/system/` ([`units`]);
//! - service config: for each service the node runs, `var/lib/openstack/configs/<type>/<key>`
//!   for every key of its dataSources (0600 from Secrets, 0644 from ConfigMaps); for the
//!   services `render` knows, the rendered files take the place of the config keys.
//!
//! - with TLS enabled, each service's CA bundle (`caCerts`, default `combined-ca-bundle`) in
//!   `var/lib/openstack/cacerts/<type>/tls-ca-bundle.pem` (0644), where edpm_install_certs looks.
//!
//! A manifest of what was staged (path, sha256, mode) decides ownership: files staged earlier
//! and no longer wanted are removed, files never staged are never touched.

pub mod units;
pub mod volume;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::HostGroup;
use crate::mounts;
use crate::render::{self, NodeView, Templates};
use crate::snapshot::Snapshot;

pub const CEPH_DIR: &str = "var/lib/openstack/config/ceph";
pub const CEPH_SOURCE: &str = "/etc/ceph";
pub const CONFIGS_DIR: &str = "var/lib/openstack/configs";
pub const CACERTS_DIR: &str = "var/lib/openstack/cacerts";
pub use crate::services::CA_BUNDLE_KEY;
pub const MANIFEST: &str = "var/lib/edpm-agent/staged.json";

/// A file the node should have.
#[derive(Clone)]
pub struct Want {
    /// Relative to the root, e.g. `var/lib/openstack/config/ceph/ceph.conf`.
    pub path: String,
    pub bytes: Vec<u8>,
    pub mode: u32,
    pub from: String,
    /// The content came from a Secret: plans show no digest of it.
    pub secret: bool,
}

impl std::fmt::Debug for Want {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Want")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("from", &self.from)
            .finish()
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StageError {
    #[error("node \"{0}\" is not in the data plane")]
    NoNode(String),
    #[error("{object}: {error}")]
    Volume { object: String, error: volume::VolumeError },
    #[error("{0}")]
    Decode(String),
    #[error("{0}")]
    Render(#[from] render::RenderError),
    #[error(
        "service {service}: dataSources[{index}] names {kind} \"{name}\", which does not exist; create it or mark it optional: true"
    )]
    MissingSource { service: String, index: usize, kind: &'static str, name: String },
    #[error(
        "service {service}: TLS is enabled and its caCerts Secret \"{name}\" (key tls-ca-bundle.pem) does not exist; create it, or set tlsEnabled: false on the NodeSet"
    )]
    MissingCaBundle { service: String, name: String },
    #[error("Ceph files for node {node} are inconsistent: {}", problems.join("; "))]
    Ceph { node: String, problems: Vec<String> },
    #[error("{0}")]
    Unit(#[from] units::UnitError),
    #[error("{0}")]
    SourceConfig(#[from] render::SourceConfigError),
    #[error("{path} is wanted twice: from {first} and from {second}")]
    Clash { path: String, first: String, second: String },
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    sha256(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of `bytes`, as bytes: what a long-lived holder of many hashes keeps (the node
/// agent keeps one per staged file).
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A sha256 written as [`sha256_hex`] writes it (64 lower-case hex digits), as bytes; `None`
/// for anything else, upper case included: the manifest's hashes were compared as text, and an
/// upper-case one never matched.
pub fn parse_sha256_hex(hex: &str) -> Option<[u8; 32]> {
    let b = hex.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(b[2 * i])? << 4 | digit(b[2 * i + 1])?;
    }
    Some(out)
}

/// Everything the node should have, sorted by path.
#[allow(
    clippy::too_many_lines,
    reason = "every kind of file a node should have, one after another, into one sorted list"
)]
pub fn wants(
    snap: &Snapshot,
    view: &NodeView,
    templates: &Templates,
    resolve: units::Resolver,
) -> Result<Vec<Want>, StageError> {
    let mut out: BTreeMap<String, Want> = BTreeMap::new();
    fn add(out: &mut BTreeMap<String, Want>, w: Want) -> Result<(), StageError> {
        if let Some(first) = out.get(&w.path) {
            return Err(StageError::Clash {
                path: w.path.clone(),
                first: first.from.clone(),
                second: w.from,
            });
        }
        out.insert(w.path.clone(), w);
        Ok(())
    }
    for w in ceph_wants(snap, view.group, resolve)? {
        add(&mut out, w)?;
    }
    check_ceph(&view.member.key, &out)?;
    for svc in &view.group.services.value {
        let svc_type = snap.service_type(svc);
        let dir = format!("{CONFIGS_DIR}/{svc_type}");
        let kind = crate::services::find_rendered(svc);
        let sources = snap.service_data_sources(svc);
        // With TLS on (NodeSet tlsEnabled, default true), the runner mounts the service's CA
        // bundle and edpm_install_certs expects it at cacerts/<type>/tls-ca-bundle.pem.
        if view.group.tls_enabled.as_ref().is_some_and(|t| t.value) {
            let ca = snap.service_ca_certs(svc);
            let bundle = snap.secret(&ca).and_then(|s| s.body.data.get(CA_BUNDLE_KEY));
            let Some(bundle) = bundle else {
                return Err(StageError::MissingCaBundle { service: svc.clone(), name: ca });
            };
            add(
                &mut out,
                Want {
                    path: format!("{CACERTS_DIR}/{svc_type}/{CA_BUNDLE_KEY}"),
                    bytes: bundle.clone(),
                    mode: 0o644,
                    from: format!("Secret/{ca} key {CA_BUNDLE_KEY}"),
                    secret: false,
                },
            )?;
        }
        if let Some(k) = kind {
            for f in render::render(snap, view, k, templates)? {
                add(
                    &mut out,
                    Want {
                        path: format!("{dir}/{}", f.name),
                        bytes: f.content.into_bytes(),
                        mode: f.mode,
                        from: f.from,
                        secret: f.mode == 0o600,
                    },
                )?;
            }
        }
        for (index, ds) in sources.iter().enumerate() {
            for (secret, r) in [(false, &ds.config_map_ref), (true, &ds.secret_ref)] {
                let Some(r) = r else { continue };
                let data = snap.object_files(secret, &r.name);
                let Some(data) = data else {
                    if r.optional == Some(true) || kind.is_some_and(|k| secret && k.replaces_secret(&r.name))
                    {
                        continue;
                    }
                    return Err(StageError::MissingSource {
                        service: svc.clone(),
                        index,
                        kind: if secret { "Secret" } else { "ConfigMap" },
                        name: r.name.clone(),
                    });
                };
                for (key, bytes) in data {
                    // Config files of rendered services come from render, which already chose
                    // between generated, data-source and user files (and checked them).
                    if kind.is_some_and(|k| k.matches(&key)) {
                        continue;
                    }
                    let object = format!("{}/{}", if secret { "Secret" } else { "ConfigMap" }, r.name);
                    volume::check_relative("key", &key)
                        .map_err(|error| StageError::Volume { object: object.clone(), error })?;
                    // An oslo.config file the service reads must parse, or the service fails
                    // on the node: refused here, before anything is written.
                    if let Some(service) = crate::services::find(svc)
                        && service.reads_oslo_key(&key)
                        && let Some(id) = snap.object_ref(secret, &r.name)
                    {
                        render::check_source_conf(svc, id, &key, &String::from_utf8_lossy(&bytes), secret)?;
                    }
                    let from = format!("{object} key {key}");
                    add(
                        &mut out,
                        Want {
                            path: format!("{dir}/{key}"),
                            bytes,
                            mode: if secret { 0o600 } else { 0o644 },
                            from,
                            secret,
                        },
                    )?;
                }
            }
        }
    }
    Ok(out.into_values().collect())
}

/// The volumes reaching `[Compute]` (the node's nodeTemplate, then the control plane's global
/// list): Ceph files from those mounted at `/etc/ceph`, mount units for NFS and CephFS ones.
fn ceph_wants(snap: &Snapshot, group: &HostGroup, resolve: units::Resolver) -> Result<Vec<Want>, StageError> {
    let entries =
        mounts::entries(snap, mounts::COMPUTE, Some(group)).map_err(|e| StageError::Decode(e.to_string()))?;
    let collected = mounts::collect(&entries, &[mounts::COMPUTE]);
    let mut out: Vec<Want> = Vec::new();
    for r in &collected.reached {
        for m in &r.mounts {
            let vol_name = m.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
            if let Some(vol) = r.volumes.iter().find(|v| v.name == vol_name)
                && let Some(unit) = units::unit_for(snap, vol, m, &r.from.to_string(), resolve)?
            {
                out.extend(unit);
                continue;
            }
            let path = m
                .get("mountPath")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .trim_end_matches('/');
            let sub = m.get("subPath").and_then(serde_json::Value::as_str).filter(|s| !s.is_empty());
            // A whole volume at /etc/ceph, or one file of it at /etc/ceph/<name> via subPath.
            let target_name = match (path == CEPH_SOURCE, sub, path.strip_prefix("/etc/ceph/")) {
                (true, None, _) => None,
                (false, Some(_), Some(name)) if !name.contains('/') => Some(name.to_string()),
                _ => continue,
            };
            let vol_name = m.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
            let Some(vol) = r.volumes.iter().find(|v| v.name == vol_name) else { continue };
            // The object is named once, by the error; the field says where in it.
            let field = format!("{} volume {vol_name}", r.from.path);
            let files = volume::files(snap, &vol.source, &field)
                .map_err(|error| StageError::Volume { object: r.from.object.clone(), error })?;
            for f in files.into_iter().flatten() {
                let name = match (&target_name, sub) {
                    // The kubelet joins subPath onto the volume, which cleans it.
                    (Some(n), Some(s)) if f.path == volume::clean(s) => n.clone(),
                    (Some(_), _) => continue,
                    // fileglob(src/*): top-level, non-dot files only.
                    (None, _) if f.path.contains('/') || f.path.starts_with('.') => continue,
                    (None, _) => f.path.clone(),
                };
                let mode = if name.ends_with(".keyring") { 0o600 } else { 0o644 };
                out.push(Want {
                    path: format!("{CEPH_DIR}/{name}"),
                    bytes: f.bytes,
                    mode,
                    from: format!("{} via {}", f.from, r.from),
                    secret: f.secret,
                });
            }
        }
    }
    // The same file reaching twice (duplicate propagation) is one file.
    let mut seen = std::collections::HashSet::new();
    out.retain(|w| seen.insert((w.path.clone(), sha256_hex(&w.bytes))));
    Ok(out)
}

/// Each `<cluster>.conf` needs `fsid` and `mon_host`; each `<cluster>.client.<user>.keyring`
/// needs its `<cluster>.conf` (libvirt derives the secret's UUID and user from these names).
fn check_ceph(node: &str, wants: &BTreeMap<String, Want>) -> Result<(), StageError> {
    let prefix = format!("{CEPH_DIR}/");
    let names: Vec<(&str, &Want)> =
        wants.iter().filter_map(|(p, w)| p.strip_prefix(&prefix).map(|n| (n, w))).collect();
    let mut problems = Vec::new();
    for (name, w) in &names {
        if let Some(cluster) = name.strip_suffix(".conf") {
            let text = String::from_utf8_lossy(&w.bytes);
            let keys: Vec<String> = text
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().replace(' ', "_").to_lowercase()))
                .collect();
            for need in ["fsid", "mon_host"] {
                if !keys.iter().any(|k| k == need) {
                    problems.push(format!("{name} ({}) has no {need}", w.from));
                }
            }
            let _ = cluster;
        } else if let Some(rest) = name.strip_suffix(".keyring") {
            match rest.split_once(".client.") {
                Some((cluster, user)) if !user.is_empty() => {
                    if !names.iter().any(|(n, _)| *n == format!("{cluster}.conf")) {
                        problems.push(format!("{name} ({}) has no {cluster}.conf beside it", w.from));
                    }
                }
                _ => {
                    problems.push(format!("{name} ({}) is not named <cluster>.client.<user>.keyring", w.from))
                }
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(StageError::Ceph { node: node.into(), problems }) }
}

/// What the manifest records of a staged file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub sha256: String,
    pub mode: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub files: BTreeMap<String, Record>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Unchanged,
    Remove,
}

/// One step of a plan; never carries content. A file's SHA-256 is shown only when the file did
/// not come from a Secret: for a low-entropy password the plain digest is as good as the
/// password (one offline guess per candidate). Nor its size: a one-line password's size is
/// its length. A Secret-derived file shows the action, which already says whether it differs
/// from what is on the node (compared there with the full digest, which never leaves the plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub path: String,
    pub action: Action,
    pub mode: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Bytes to write (none for a removal or a Secret-derived file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// The content came from a Secret (or a file is removed, whose origin is no longer known):
    /// no digest is shown.
    pub secret: bool,
    pub from: String,
}

/// Compares the wanted files with what is on disk (`observed`: path → (sha256, mode), for the
/// wanted and the manifest's paths) and with the manifest. A file on disk that differs is
/// updated, staged or not before; a manifest entry no longer wanted is removed.
pub fn plan(wants: &[Want], manifest: &Manifest, observed: &BTreeMap<String, (String, u32)>) -> Vec<Step> {
    let mut steps = Vec::new();
    for w in wants {
        let sha = sha256_hex(&w.bytes);
        let action = match observed.get(&w.path) {
            None => Action::Create,
            Some((s, m)) if *s == sha && *m == w.mode => Action::Unchanged,
            Some(_) => Action::Update,
        };
        steps.push(Step {
            path: w.path.clone(),
            action,
            mode: w.mode,
            sha256: (!w.secret).then_some(sha),
            size: (!w.secret).then_some(w.bytes.len()),
            secret: w.secret,
            from: w.from.clone(),
        });
    }
    for (path, rec) in &manifest.files {
        if !wants.iter().any(|w| &w.path == path) && observed.contains_key(path) {
            steps.push(Step {
                path: path.clone(),
                action: Action::Remove,
                mode: rec.mode,
                sha256: None,
                size: None,
                secret: true,
                from: "no longer wanted".into(),
            });
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(path: &str, body: &str, mode: u32) -> Want {
        Want { path: path.into(), bytes: body.as_bytes().to_vec(), mode, from: "t".into(), secret: false }
    }

    #[test]
    fn a_hash_reads_back_from_its_hex_and_nothing_else_does() {
        for body in [&b""[..], b"x", b"[DEFAULT]\ndebug = true\n"] {
            let hex = sha256_hex(body);
            assert_eq!(parse_sha256_hex(&hex), Some(sha256(body)));
            // Upper case is another text: it never matched, and still does not.
            assert_eq!(parse_sha256_hex(&hex.to_uppercase()), None);
        }
        let good = sha256_hex(b"x");
        for bad in
            ["", &good[1..], &format!("{good}0"), &format!("g{}", &good[1..]), &format!("+{}", &good[1..])]
        {
            assert_eq!(parse_sha256_hex(bad), None, "{bad}");
        }
        // Multibyte text of the right byte length is not hex either.
        assert_eq!(parse_sha256_hex(&"é".repeat(32)), None);
    }

    #[test]
    fn plan_creates_updates_keeps_and_removes_only_owned_files() {
        let wants = vec![want("a", "1", 0o644), want("b", "2", 0o600), want("c", "3", 0o644)];
        let mut observed = BTreeMap::new();
        observed.insert("b".to_string(), (sha256_hex(b"2"), 0o600));
        observed.insert("c".to_string(), (sha256_hex(b"3"), 0o600));
        observed.insert("old".to_string(), (sha256_hex(b"x"), 0o644));
        let mut manifest = Manifest::default();
        manifest.files.insert("old".into(), Record { sha256: sha256_hex(b"x"), mode: 0o644 });
        manifest.files.insert("gone-already".into(), Record { sha256: sha256_hex(b"y"), mode: 0o644 });
        let steps = plan(&wants, &manifest, &observed);
        let got: Vec<(&str, Action)> = steps.iter().map(|s| (s.path.as_str(), s.action)).collect();
        assert_eq!(
            got,
            [("a", Action::Create), ("b", Action::Unchanged), ("c", Action::Update), ("old", Action::Remove)]
        );
    }

    /// A Secret-derived file's digest never leaves the plan, yet a change of it is still seen.
    #[test]
    fn plans_show_no_digest_of_secret_files_but_see_their_changes() {
        let secret = |body: &str| Want { secret: true, ..want("s", body, 0o600) };
        let mut observed = BTreeMap::new();
        observed.insert("s".to_string(), (sha256_hex(b"hunter2"), 0o600));
        observed.insert("p".to_string(), (sha256_hex(b"x"), 0o644));
        let wants = [secret("hunter2"), want("p", "x", 0o644)];
        let steps = plan(&wants, &Manifest::default(), &observed);
        assert_eq!(
            (steps[0].action, steps[0].sha256.as_deref(), steps[0].size),
            (Action::Unchanged, None, None)
        );
        assert_eq!(steps[1].sha256.as_deref(), Some(sha256_hex(b"x").as_str()));
        let json = serde_json::to_string(&steps).unwrap();
        assert!(
            !json.contains(&sha256_hex(b"hunter2")) && !json.contains(&sha256_hex(b"hunter2")[..12]),
            "{json}"
        );
        let changed = plan(&[secret("hunter3")], &Manifest::default(), &observed);
        assert_eq!((changed[0].action, changed[0].sha256.as_deref()), (Action::Update, None));
    }

    #[test]
    fn ceph_sanity_names_problems() {
        let mut w = BTreeMap::new();
        for (name, body) in [
            ("ceph.conf", "[global]\nfsid = x\nmon host = 1.2.3.4\n"),
            ("ceph2.conf", "[global]\nfsid = y\n"),
            ("ceph.client.openstack.keyring", "k"),
            ("ceph3.client.x.keyring", "k"),
            ("bad.keyring", "k"),
        ] {
            let p = format!("{CEPH_DIR}/{name}");
            w.insert(p.clone(), want(&p, body, 0o644));
        }
        let err = check_ceph("n", &w).unwrap_err().to_string();
        assert!(err.contains("ceph2.conf (t) has no mon_host"), "{err}");
        assert!(err.contains("ceph3.client.x.keyring (t) has no ceph3.conf beside it"), "{err}");
        assert!(err.contains("bad.keyring (t) is not named <cluster>.client.<user>.keyring"), "{err}");
        assert!(!err.contains("ceph.conf (t)"), "{err}");
    }
}
