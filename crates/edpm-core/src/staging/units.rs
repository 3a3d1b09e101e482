//! NFS and CephFS volumes that reach the node become systemd `.mount` units (seed 000: image
//! conversion space, data kept across restarts), mounted at the volume's `mountPath`.
//!
//! Manila CSI volumes (seed 002) are resolved to their CephFS export and cephx key through the
//! OpenStack APIs by a [`Resolver`] the shell passes in, then mounted the same way.
//!
//! Pure. Unit names follow `systemd-escape --path` (systemd requires the name to match
//! `Where=`); remote mounts wait for `network-online.target`. A CephFS `secretRef` is staged as
//! a 0600 secret file the unit's `secretfile=` points at.

use serde_json::Value;

use super::Want;
use crate::mounts::Volume;
use crate::snapshot::Snapshot;

pub const UNIT_DIR: &str = "etc/systemd/system";
pub const CEPH_SECRET_DIR: &str = "etc/ceph";

/// `systemd-escape --path`: simplified path without the leading slash, `/` as `-`, and every
/// byte outside `[A-Za-z0-9:_.]` (and a leading `.`) as `\xNN`. The root is `-`.
pub fn escape_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        return "-".into();
    }
    let joined = parts.join("/");
    let mut out = String::new();
    for (i, b) in joined.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || b == b':' || b == b'_' || b == b'.' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{from} volume {volume}: {problem}")]
pub struct UnitError {
    pub from: String,
    pub volume: String,
    pub problem: String,
}

/// OpenStack credentials from a manila-csi Secret (`os-authURL`, `os-region`, and an
/// application credential or a user/password/project).
#[derive(Clone, Default)]
pub struct Credentials {
    pub auth_url: String,
    pub region: Option<String>,
    pub application_credential_id: Option<String>,
    pub application_credential_secret: Option<String>,
    pub user_name: Option<String>,
    pub password: Option<String>,
    pub domain_name: Option<String>,
    pub project_id: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("auth_url", &self.auth_url)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// A Manila CSI volume to resolve through the OpenStack APIs.
#[derive(Debug, Clone)]
pub struct CsiShare {
    pub volume: String,
    pub share_id: String,
    pub access_id: String,
    /// The Secret the credentials came from, for messages.
    pub secret: String,
    pub credentials: Credentials,
    pub read_only: bool,
}

/// What Manila says about the share: the CephFS export (`mon1,mon2:/path`) and the cephx
/// user and key of the access rule.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedShare {
    pub export: String,
    pub user: String,
    pub key: String,
}

impl std::fmt::Debug for ResolvedShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedShare")
            .field("export", &self.export)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Resolves a share (the shell passes the OpenStack client; tests pass a fake).
pub type Resolver<'a> = &'a dyn Fn(&CsiShare) -> Result<ResolvedShare, String>;

/// The Manila CSI request of a volume (`csi.driver` ending in `manila.csi.openstack.org`), or
/// `None` for other volumes.
pub fn csi_share(snap: &Snapshot, vol: &Volume, from: &str) -> Result<Option<CsiShare>, UnitError> {
    let err = |problem: String| UnitError { from: from.into(), volume: vol.name.clone(), problem };
    let Some(csi) = vol.source.get("csi") else { return Ok(None) };
    let driver = csi.get("driver").and_then(Value::as_str).unwrap_or_default();
    if !driver.ends_with("manila.csi.openstack.org") {
        return Ok(None);
    }
    let attr = |k: &str| {
        csi.pointer(&format!("/volumeAttributes/{k}"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let share_id = attr("shareID").ok_or_else(|| err("csi.volumeAttributes.shareID is not set".into()))?;
    let access_id =
        attr("shareAccessID").ok_or_else(|| err("csi.volumeAttributes.shareAccessID is not set".into()))?;
    let secret_name = csi.pointer("/nodePublishSecretRef/name").and_then(Value::as_str).ok_or_else(|| {
        err("csi.nodePublishSecretRef.name is not set; it names the Secret with the OpenStack credentials".into())
    })?;
    let secret = snap.secret(secret_name).ok_or_else(|| {
        err(format!("csi.nodePublishSecretRef names Secret \"{secret_name}\", which does not exist"))
    })?;
    let get = |k: &str| {
        secret.body.data.get(k).map(|v| String::from_utf8_lossy(v).into_owned()).filter(|v| !v.is_empty())
    };
    let credentials = Credentials {
        auth_url: get("os-authURL").ok_or_else(|| err(format!("Secret {secret_name} has no os-authURL")))?,
        region: get("os-region"),
        application_credential_id: get("os-applicationCredentialID"),
        application_credential_secret: get("os-applicationCredentialSecret"),
        user_name: get("os-userName"),
        password: get("os-password"),
        domain_name: get("os-domainName"),
        project_id: get("os-projectID"),
    };
    let has_app = credentials.application_credential_id.is_some()
        && credentials.application_credential_secret.is_some();
    let has_user =
        credentials.user_name.is_some() && credentials.password.is_some() && credentials.project_id.is_some();
    if !has_app && !has_user {
        return Err(err(format!(
            "Secret {secret_name} has neither os-applicationCredentialID/Secret nor os-userName/os-password/os-projectID"
        )));
    }
    Ok(Some(CsiShare {
        volume: vol.name.clone(),
        share_id,
        access_id,
        secret: secret_name.into(),
        credentials,
        read_only: csi.get("readOnly").and_then(Value::as_bool).unwrap_or(false),
    }))
}

/// The unit (and CephFS secret file) for one mount of a volume, or `None` when the volume is
/// neither NFS, CephFS nor a Manila CSI share.
#[allow(
    clippy::too_many_lines,
    reason = "one mount unit per volume type (NFS, CephFS, Manila CSI), as systemd.mount names the options"
)]
pub fn unit_for(
    snap: &Snapshot,
    vol: &Volume,
    mount: &Value,
    from: &str,
    resolve: Resolver,
) -> Result<Option<Vec<Want>>, UnitError> {
    let err = |problem: String| UnitError { from: from.into(), volume: vol.name.clone(), problem };
    let where_ = mount.get("mountPath").and_then(Value::as_str).unwrap_or_default();
    if !where_.starts_with('/') || where_.split('/').any(|c| c == "..") {
        return Err(err(format!(
            "mountPath {} must be an absolute path without '..'",
            crate::excerpt::echo(where_).debug()
        )));
    }
    let sub = mount.get("subPath").and_then(Value::as_str).filter(|s| !s.is_empty());
    let mount_ro = mount.get("readOnly").and_then(Value::as_bool).unwrap_or(false);
    let mut extra = Vec::new();
    let (kind, what, mut options) = if let Some(nfs) = vol.source.get("nfs") {
        let server = nfs
            .get("server")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| err("nfs.server is empty".into()))?;
        let path = nfs.get("path").and_then(Value::as_str).unwrap_or("/");
        let ro = nfs.get("readOnly").and_then(Value::as_bool).unwrap_or(false);
        (
            "nfs",
            format!("{server}:{}", join(path, sub)),
            vec![if ro || mount_ro { "ro" } else { "rw" }.to_string()],
        )
    } else if let Some(c) = vol.source.get("cephfs") {
        let monitors: Vec<&str> = c
            .get("monitors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if monitors.is_empty() {
            return Err(err("cephfs.monitors is empty".into()));
        }
        let path = c.get("path").and_then(Value::as_str).unwrap_or("/");
        let user = c.get("user").and_then(Value::as_str).unwrap_or("admin");
        let ro = c.get("readOnly").and_then(Value::as_bool).unwrap_or(false);
        let secret_file = match c.pointer("/secretRef/name").and_then(Value::as_str) {
            Some(name) => {
                let secret = snap.secret(name).ok_or_else(|| {
                    err(format!("cephfs.secretRef names Secret \"{name}\", which does not exist"))
                })?;
                let key =
                    secret.body.data.get("key").ok_or_else(|| {
                        err(format!("Secret \"{name}\" has no key \"key\" (the cephx key)"))
                    })?;
                let file = format!("{CEPH_SECRET_DIR}/edpm-agent-{}.secret", vol.name);
                extra.push(Want {
                    path: file.clone(),
                    bytes: key.clone(),
                    mode: 0o600,
                    from: format!("Secret/{name} key key"),
                    secret: true,
                });
                format!("/{file}")
            }
            None => c
                .get("secretFile")
                .and_then(Value::as_str)
                .map_or_else(|| format!("/etc/ceph/{user}.secret"), str::to_string),
        };
        let mut o = vec![format!("name={user}"), format!("secretfile={secret_file}")];
        if ro || mount_ro {
            o.push("ro".into());
        }
        ("ceph", format!("{}:{}", monitors.join(","), join(path, sub)), o)
    } else if let Some(share) = csi_share(snap, vol, from)? {
        let r = resolve(&share).map_err(err)?;
        let file = format!("{CEPH_SECRET_DIR}/edpm-agent-{}.secret", vol.name);
        extra.push(Want {
            path: file.clone(),
            bytes: r.key.clone().into_bytes(),
            mode: 0o600,
            from: format!("Manila access rule {}", share.access_id),
            secret: true,
        });
        let mut o = vec![format!("name={}", r.user), format!("secretfile=/{file}")];
        if share.read_only || mount_ro {
            o.push("ro".into());
        }
        ("ceph", join_export(&r.export, sub), o)
    } else {
        return Ok(None);
    };
    options.push("_netdev".into());
    let name = format!("{}.mount", escape_path(where_));
    let content = format!(
        "# Written by edpm-agent from {from} volume {vol}; edits are overwritten.\n[Unit]\nDescription={kind} {what} at {where_}\nWants=network-online.target\nAfter=network-online.target\n\n[Mount]\nWhat={what}\nWhere={where_}\nType={kind}\nOptions={}\n\n[Install]\nWantedBy=remote-fs.target\n",
        options.join(","),
        vol = vol.name,
    );
    extra.push(Want {
        path: format!("{UNIT_DIR}/{name}"),
        bytes: content.into_bytes(),
        mode: 0o644,
        from: format!("{from} volume {}", vol.name),
        secret: false,
    });
    Ok(Some(extra))
}

/// An export `mon1,mon2:/path` with a subPath appended to its path.
fn join_export(export: &str, sub: Option<&str>) -> String {
    match sub {
        Some(_) => match export.rsplit_once(":/") {
            Some((mons, path)) => format!("{mons}:{}", join(&format!("/{path}"), sub)),
            None => export.to_string(),
        },
        None => export.to_string(),
    }
}

fn join(path: &str, sub: Option<&str>) -> String {
    match sub {
        Some(s) => format!("{}/{}", path.trim_end_matches('/'), s.trim_start_matches('/')),
        None => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn escapes_like_systemd() {
        assert_eq!(escape_path("/var/lib/nova/images"), "var-lib-nova-images");
        assert_eq!(escape_path("/var/lib/cinder-conversion/"), "var-lib-cinder\\x2dconversion");
        assert_eq!(escape_path("//mnt//a b"), "mnt-a\\x20b");
        assert_eq!(escape_path("/.hidden/x"), "\\x2ehidden-x");
        assert_eq!(escape_path("/"), "-");
        assert_eq!(escape_path("/mnt/é"), "mnt-\\xc3\\xa9");
    }

    #[test]
    fn nfs_unit() {
        let snap = Snapshot::default();
        let no = |_: &CsiShare| -> Result<ResolvedShare, String> { Err("unused".into()) };
        let vol = Volume {
            name: "conv".into(),
            source: json!({"nfs": {"server": "192.0.2.9", "path": "/export/conv"}})
                .as_object()
                .unwrap()
                .clone(),
        };
        let wants = unit_for(
            &snap,
            &vol,
            &json!({"name": "conv", "mountPath": "/var/lib/nova/instances-conv"}),
            "X",
            &no,
        )
        .unwrap()
        .unwrap();
        assert_eq!(wants.len(), 1);
        assert_eq!(wants[0].path, "etc/systemd/system/var-lib-nova-instances\\x2dconv.mount");
        let text = String::from_utf8(wants[0].bytes.clone()).unwrap();
        assert!(text.contains("What=192.0.2.9:/export/conv\nWhere=/var/lib/nova/instances-conv\nType=nfs\nOptions=rw,_netdev\n"), "{text}");
        assert!(text.contains("After=network-online.target"));
        let bad = unit_for(&snap, &vol, &json!({"name": "conv", "mountPath": "relative"}), "X", &no);
        assert!(bad.is_err());
    }
}
