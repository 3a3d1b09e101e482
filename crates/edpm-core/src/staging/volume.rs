//! Kubernetes volume semantics for the files a Secret, ConfigMap or projected volume shows
//! in a pod (mounts-nova-edpm.md §1.3): every key as a file named after it, or only the listed
//! `items` at their `path`; `defaultMode` (0644 unless set) with per-item `mode`; a missing
//! object or key is an error unless `optional: true`. Pure: objects come from the snapshot.

use serde_json::Value;

use crate::snapshot::Snapshot;

/// One file of a volume: its path inside the volume, bytes, mode, and where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct VolumeFile {
    pub path: String,
    pub bytes: Vec<u8>,
    pub mode: u32,
    pub from: String,
    pub secret: bool,
}

impl std::fmt::Debug for VolumeFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeFile")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("from", &self.from)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("{field}: {kind} \"{name}\" does not exist; create it or set optional: true")]
    Missing { field: String, kind: &'static str, name: String },
    #[error("{field}: key \"{key}\" is not in {kind} \"{name}\"; add it or set optional: true")]
    MissingKey { field: String, kind: &'static str, name: String, key: String },
    #[error("{field}: path {} {problem}", crate::excerpt::echo(path).debug())]
    BadPath { field: String, path: String, problem: String },
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

pub const DEFAULT_MODE: u32 = 0o644;

/// A relative path inside a volume: no `..`, not absolute, no empty components. For names
/// that Kubernetes never cleans (data-source keys used as file names).
pub fn check_relative(field: &str, path: &str) -> Result<(), VolumeError> {
    let bad = |problem: &str| {
        Err(VolumeError::BadPath { field: field.into(), path: path.into(), problem: problem.into() })
    };
    if path.is_empty() {
        return bad("is empty");
    }
    if path.starts_with('/') {
        return bad("is absolute; item paths are relative to the volume");
    }
    if path.split('/').any(|c| c == "..") {
        return bad("contains '..', which would leave the volume");
    }
    if path.split('/').any(str::is_empty) || path.contains('\0') {
        return bad("has an empty component");
    }
    Ok(())
}

/// The kubelet's limits on a projected path (`pkg/volume/util/atomic_writer.go`).
const MAX_PATH_LENGTH: usize = 4096;
const MAX_FILE_NAME_LENGTH: usize = 255;

/// Where Kubernetes puts an item of a Secret, ConfigMap or projected volume: `items[].path`
/// refused exactly when the API server (`validateKeyToPath`: required, not absolute, no `..`
/// element, not starting with `..`) or the kubelet's atomic writer (length limits) refuses it,
/// and otherwise cleaned as the atomic writer does (`filepath.Clean`), so `./x`, `a/./b`,
/// `a//b` and `a/` land at `x`, `a/b`, `a/b` and `a`.
pub fn item_path(field: &str, path: &str) -> Result<String, VolumeError> {
    let bad = |problem: String| Err(VolumeError::BadPath { field: field.into(), path: path.into(), problem });
    if path.is_empty() {
        return bad("is empty, which Kubernetes refuses (Required value); set it to the file name the key should have in the volume".into());
    }
    if path.starts_with('/') {
        return bad(format!(
            "is absolute, which Kubernetes refuses (must be a relative path); write it relative to the volume, e.g. {:?}",
            path.trim_start_matches('/')
        ));
    }
    if path.split('/').any(|c| c == "..") {
        return bad("has '..' as a path element, which Kubernetes refuses (must not contain '..'); name a file inside the volume".into());
    }
    if path.starts_with("..") {
        return bad("starts with '..', which Kubernetes refuses (the kubelet keeps its own ..data links there); rename the file".into());
    }
    if path.len() > MAX_PATH_LENGTH || path.split('/').any(|c| c.len() > MAX_FILE_NAME_LENGTH) {
        return bad(format!(
            "is longer than Kubernetes' kubelet accepts ({MAX_PATH_LENGTH} bytes, {MAX_FILE_NAME_LENGTH} per name), so the pod would not start; shorten it"
        ));
    }
    let clean = clean(path);
    if clean == "." {
        return bad("names the volume itself, where Kubernetes' kubelet cannot write a file (the pod would not start); name a file inside the volume".into());
    }
    Ok(clean)
}

/// Go's `path.Clean` for a relative path without `..` elements: empty and `.` elements
/// dropped, no trailing slash; `.` when nothing is left.
pub fn clean(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    if parts.is_empty() { ".".into() } else { parts.join("/") }
}

/// Every `items[].path` problem of a Secret, ConfigMap or projected volume, without reading
/// the objects: what `validate` reports.
pub fn item_path_problems(volume: &serde_json::Map<String, Value>, field: &str) -> Vec<VolumeError> {
    let mut sources: Vec<(String, &Value)> = Vec::new();
    for kind in ["secret", "configMap"] {
        if let Some(s) = volume.get(kind) {
            sources.push((format!("{field}.{kind}"), s));
        }
    }
    if let Some(p) = volume.get("projected") {
        for (i, src) in p.get("sources").and_then(Value::as_array).into_iter().flatten().enumerate() {
            for kind in ["secret", "configMap"] {
                if let Some(s) = src.get(kind) {
                    sources.push((format!("{field}.projected.sources[{i}].{kind}"), s));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (f, src) in sources {
        for (i, item) in src.get("items").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let path = item.get("path").and_then(Value::as_str).unwrap_or_default();
            if let Err(e) = item_path(&format!("{f}.items[{i}].path"), path) {
                out.push(e);
            }
        }
    }
    out
}

fn mode_of(v: Option<&Value>, field: &str, default: u32) -> Result<u32, VolumeError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(m) => match m.as_u64() {
            Some(n) if n <= 0o777 => Ok(n as u32),
            _ => Err(VolumeError::Invalid {
                field: field.into(),
                message: format!(
                    "{m} is not a file mode: write one between 0 and 0777 in octal with its leading 0 (0640), or in decimal (416)"
                ),
            }),
        },
    }
}

/// The files of one Secret or ConfigMap source (`secret`, `configMap`, or a projected source).
fn source_files(
    snap: &Snapshot,
    src: &Value,
    secret: bool,
    field: &str,
    default_mode: u32,
    out: &mut Vec<VolumeFile>,
) -> Result<(), VolumeError> {
    let kind = if secret { "Secret" } else { "ConfigMap" };
    // A secret volume names `secretName`; a projected secret source and a configMap name `name`.
    let name = src.get("secretName").or_else(|| src.get("name")).and_then(Value::as_str).unwrap_or_default();
    let optional = src.get("optional").and_then(Value::as_bool).unwrap_or(false);
    let data = snap.object_files(secret, name);
    let Some(data) = data else {
        if optional {
            return Ok(());
        }
        return Err(VolumeError::Missing { field: field.into(), kind, name: name.into() });
    };
    let from = |k: &str| format!("{kind}/{name} key {k}");
    match src.get("items").and_then(Value::as_array) {
        None => {
            for (k, v) in data {
                out.push(VolumeFile {
                    path: k.clone(),
                    bytes: v,
                    mode: default_mode,
                    from: from(&k),
                    secret,
                });
            }
        }
        Some(items) => {
            for (i, item) in items.iter().enumerate() {
                let f = format!("{field}.items[{i}]");
                let key = item.get("key").and_then(Value::as_str).unwrap_or_default();
                // Required by the API server (validateKeyToPath), optional or not.
                if key.is_empty() {
                    return Err(VolumeError::Invalid {
                        field: format!("{f}.key"),
                        message: format!("is required: name the {kind} key to place at this item's path"),
                    });
                }
                let path = item.get("path").and_then(Value::as_str).unwrap_or_default();
                let path = item_path(&format!("{f}.path"), path)?;
                let mode = mode_of(item.get("mode"), &format!("{f}.mode"), default_mode)?;
                match data.iter().find(|(k, _)| k == key) {
                    Some((_, v)) => {
                        out.push(VolumeFile { path, bytes: v.clone(), mode, from: from(key), secret })
                    }
                    None if optional => {}
                    None => {
                        return Err(VolumeError::MissingKey {
                            field: f,
                            kind,
                            name: name.into(),
                            key: key.into(),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// The files a volume shows, or `None` for sources that are not files we can stage (hostPath,
/// nfs, cephfs, persistentVolumeClaim, emptyDir, csi, ...).
pub fn files(
    snap: &Snapshot,
    volume: &serde_json::Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<VolumeFile>>, VolumeError> {
    let mut out = Vec::new();
    if let Some(s) = volume.get("secret") {
        let mode = mode_of(s.get("defaultMode"), &format!("{field}.secret.defaultMode"), DEFAULT_MODE)?;
        source_files(snap, s, true, &format!("{field}.secret"), mode, &mut out)?;
    } else if let Some(c) = volume.get("configMap") {
        let mode = mode_of(c.get("defaultMode"), &format!("{field}.configMap.defaultMode"), DEFAULT_MODE)?;
        source_files(snap, c, false, &format!("{field}.configMap"), mode, &mut out)?;
    } else if let Some(p) = volume.get("projected") {
        let mode = mode_of(p.get("defaultMode"), &format!("{field}.projected.defaultMode"), DEFAULT_MODE)?;
        for (i, src) in p.get("sources").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let f = format!("{field}.projected.sources[{i}]");
            if let Some(s) = src.get("secret") {
                source_files(snap, s, true, &format!("{f}.secret"), mode, &mut out)?;
            } else if let Some(c) = src.get("configMap") {
                source_files(snap, c, false, &format!("{f}.configMap"), mode, &mut out)?;
            }
        }
    } else {
        return Ok(None);
    }
    // Later sources win a path, as the kubelet's projection does.
    let mut seen = std::collections::HashSet::new();
    let mut dedup: Vec<VolumeFile> = out.into_iter().rev().filter(|f| seen.insert(f.path.clone())).collect();
    dedup.reverse();
    Ok(Some(dedup))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::snapshot::Located;
    use crate::snapshot::resource::Origin;

    fn snap() -> Snapshot {
        let docs = [
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a.keyring": "k", "b.conf": "c"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}}),
        ];
        Snapshot::from_documents(
            docs.iter().map(|value| Located::from_value(Origin::File { path: "t".into(), line: 1 }, value)),
            None,
        )
        .unwrap()
    }

    fn vol(v: serde_json::Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn an_item_without_a_key_is_refused_even_when_optional() {
        let s = snap();
        for optional in [false, true] {
            let v =
                vol(json!({"secret": {"secretName": "s", "optional": optional, "items": [{"path": "p"}]}}));
            let e = files(&s, &v, "v").unwrap_err().to_string();
            assert!(e.contains("items[0].key") && e.contains("required"), "{e}");
        }
    }

    #[test]
    fn keys_items_modes_and_optional() {
        let s = snap();
        let all = files(&s, &vol(json!({"secret": {"secretName": "s"}})), "v").unwrap().unwrap();
        assert_eq!(
            all.iter().map(|f| (f.path.as_str(), f.mode)).collect::<Vec<_>>(),
            [("a.keyring", 0o644), ("b.conf", 0o644)]
        );
        let items = files(&s, &vol(json!({"secret": {"secretName": "s", "defaultMode": 384, "items": [{"key": "b.conf", "path": "etc/b.conf", "mode": 420}, {"key": "a.keyring", "path": "k"}]}})), "v").unwrap().unwrap();
        assert_eq!(
            items.iter().map(|f| (f.path.as_str(), f.mode)).collect::<Vec<_>>(),
            [("etc/b.conf", 0o644), ("k", 0o600)]
        );
        assert!(
            files(&s, &vol(json!({"configMap": {"name": "absent", "optional": true}})), "v")
                .unwrap()
                .unwrap()
                .is_empty()
        );
        let err = files(&s, &vol(json!({"configMap": {"name": "absent"}})), "v").unwrap_err().to_string();
        assert!(err.contains("v.configMap: ConfigMap \"absent\" does not exist"), "{err}");
        let err = files(
            &s,
            &vol(json!({"secret": {"secretName": "s", "items": [{"key": "nope", "path": "nope"}]}})),
            "v",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("v.secret.items[0]") && err.contains("nope"), "{err}");
        assert!(files(&s, &vol(json!({"nfs": {"server": "x", "path": "/"}})), "v").unwrap().is_none());
    }

    #[test]
    fn projected_merges_sources_and_refuses_escaping_paths() {
        let s = snap();
        let p = files(&s, &vol(json!({"projected": {"defaultMode": 416, "sources": [{"secret": {"name": "s"}}, {"configMap": {"name": "c"}}]}})), "v").unwrap().unwrap();
        assert_eq!(
            p.iter().map(|f| (f.path.as_str(), f.mode)).collect::<Vec<_>>(),
            [("a.keyring", 0o640), ("b.conf", 0o640), ("x", 0o640)]
        );
        for bad in ["../x", "/etc/x", "a/../../b"] {
            let v = vol(json!({"secret": {"secretName": "s", "items": [{"key": "b.conf", "path": bad}]}}));
            assert!(matches!(files(&s, &v, "v"), Err(VolumeError::BadPath { .. })), "{bad}");
        }
    }

    /// Every class of item path, as the API server and the kubelet treat it.
    #[test]
    fn item_paths_as_kubernetes_places_them() {
        let long = "x".repeat(256);
        let too_long = vec!["d"; 2049].join("/");
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("ceph.conf", Ok("ceph.conf")),
            ("./ceph.client.openstack.keyring", Ok("ceph.client.openstack.keyring")),
            ("././x", Ok("x")),
            ("a/./b", Ok("a/b")),
            ("a//b", Ok("a/b")),
            ("a///b//", Ok("a/b")),
            ("a/", Ok("a")),
            ("a/.", Ok("a")),
            (".hidden", Ok(".hidden")),
            ("a/..x", Ok("a/..x")),
            ("a/x..", Ok("a/x..")),
            ("...", Err("starts with '..'")),
            ("..x", Err("starts with '..'")),
            ("..data", Err("starts with '..'")),
            ("..", Err("has '..' as a path element")),
            ("../x", Err("has '..' as a path element")),
            ("a/../b", Err("has '..' as a path element")),
            ("a/..", Err("has '..' as a path element")),
            ("/abs", Err("is absolute")),
            ("//abs", Err("is absolute")),
            ("", Err("is empty")),
            (".", Err("names the volume itself")),
            ("./", Err("names the volume itself")),
            ("a/./", Ok("a")),
            (&long, Err("longer than Kubernetes' kubelet accepts")),
            (&too_long, Err("longer than Kubernetes' kubelet accepts")),
        ];
        for (path, want) in cases {
            let got = item_path("v.items[0].path", path);
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w, "{path:?}"),
                (Err(w), Err(e)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(w) && msg.starts_with("v.items[0].path: path "), "{path:?}: {msg}");
                }
                _ => panic!("{path:?}: want {want:?}, got {got:?}"),
            }
        }
        // The same paths through a volume and through validate's check.
        let s = snap();
        for (path, want) in cases {
            let v = vol(
                json!({"projected": {"sources": [{"secret": {"name": "s", "items": [{"key": "a.keyring", "path": path}]}}]}}),
            );
            let problems = item_path_problems(&v, "vol");
            match (want, files(&s, &v, "vol")) {
                (Ok(w), Ok(Some(f))) => {
                    assert_eq!(f[0].path, *w, "{path:?}");
                    assert!(problems.is_empty(), "{path:?}");
                }
                (Err(_), Err(VolumeError::BadPath { field, .. })) => {
                    assert_eq!(field, "vol.projected.sources[0].secret.items[0].path");
                    assert_eq!(problems.len(), 1, "{path:?}");
                }
                (_, got) => panic!("{path:?}: want {want:?}, got {got:?}"),
            }
        }
    }
}
