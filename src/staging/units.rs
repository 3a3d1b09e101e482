//! NFS and CephFS volumes that reach the node become systemd `.mount` units (seed 000: image
//! conversion space, data kept across restarts), mounted at the volume's `mountPath`.
//!
//! Pure. Unit names follow `systemd-escape --path` (systemd requires the name to match
//! `Where=`); remote mounts wait for `network-online.target`. A CephFS `secretRef` is staged as
//! a 0600 secret file the unit's `secretfile=` points at.

use serde_json::Value;

use super::Want;
use crate::mounts::Volume;
use crate::source::Snapshot;

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

/// The unit (and CephFS secret file) for one mount of a volume, or `None` when the volume is
/// neither NFS nor CephFS.
pub fn unit_for(
    snap: &Snapshot,
    vol: &Volume,
    mount: &Value,
    from: &str,
) -> Result<Option<Vec<Want>>, UnitError> {
    let err = |problem: String| UnitError { from: from.into(), volume: vol.name.clone(), problem };
    let where_ = mount.get("mountPath").and_then(Value::as_str).unwrap_or_default();
    if !where_.starts_with('/') || where_.split('/').any(|c| c == "..") {
        return Err(err(format!("mountPath {where_:?} must be an absolute path without '..'")));
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
        let vol = Volume {
            name: "conv".into(),
            source: json!({"nfs": {"server": "192.0.2.9", "path": "/export/conv"}})
                .as_object()
                .unwrap()
                .clone(),
        };
        let wants =
            unit_for(&snap, &vol, &json!({"name": "conv", "mountPath": "/var/lib/nova/instances-conv"}), "X")
                .unwrap()
                .unwrap();
        assert_eq!(wants.len(), 1);
        assert_eq!(wants[0].path, "etc/systemd/system/var-lib-nova-instances\\x2dconv.mount");
        let text = String::from_utf8(wants[0].bytes.clone()).unwrap();
        assert!(text.contains("What=192.0.2.9:/export/conv\nWhere=/var/lib/nova/instances-conv\nType=nfs\nOptions=rw,_netdev\n"), "{text}");
        assert!(text.contains("After=network-online.target"));
        let bad = unit_for(&snap, &vol, &json!({"name": "conv", "mountPath": "relative"}), "X");
        assert!(bad.is_err());
    }
}
