//! extraMounts: which volumes reach which service (seeds 000 and 001; lib-common
//! `modules/storage`, mounts-nova-edpm.md §1–2).
//!
//! Pure. [`propagate`] is lib-common's `VolMounts.Propagate` exactly, duplicates included;
//! [`collect`] combines a service's local list and the global list the way openstack-operator
//! does today (local first, then global) and reports the duplicates upstream would emit as
//! warnings naming both entries.

use serde::Deserialize;
use serde_json::Value;

use crate::model::HostGroup;
use crate::snapshot::Snapshot;
use crate::snapshot::resource::{self, DecodeError};

/// `PropagationType` "All": matches every caller.
pub const ALL: &str = "All";
/// The caller identity of the EDPM Ansible job.
pub const COMPUTE: &str = "Compute";

/// lib-common `storage.VolMounts`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolMounts {
    #[serde(default)]
    pub propagation: Option<Vec<String>>,
    #[serde(default)]
    pub extra_vol_type: Option<String>,
    #[serde(default)]
    pub volumes: Vec<Volume>,
    #[serde(default)]
    pub mounts: Vec<Value>,
}

/// A volume: its name and its (slim corev1) source, kept as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Volume {
    pub name: String,
    #[serde(flatten)]
    pub source: serde_json::Map<String, Value>,
}

/// The service-operator wrapper `{name, region, extraVol}`. `name` and `region` never filter.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtraVolMounts {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub extra_vol: Vec<VolMounts>,
}

/// One copy `Propagate` returns: only volumes and mounts (propagation and type dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct Propagated {
    pub volumes: Vec<Volume>,
    pub mounts: Vec<Value>,
}

/// `VolMounts.Propagate(svc)`: one copy if `propagation` is empty, plus one copy per entry
/// that is `All` or equals (case-sensitively) one of the caller's identities.
pub fn propagate(vm: &VolMounts, svc: &[&str]) -> Vec<Propagated> {
    let copy = || Propagated { volumes: vm.volumes.clone(), mounts: vm.mounts.clone() };
    let props = vm.propagation.as_deref().unwrap_or(&[]);
    let mut out = Vec::new();
    if props.is_empty() {
        out.push(copy());
    }
    for p in props {
        if p == ALL || svc.contains(&p.as_str()) {
            out.push(copy());
        }
    }
    out
}

/// Where an extraMounts entry was written, for people.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    pub object: String,
    pub path: String,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.object, self.path)
    }
}

/// A volume or mount that reached the caller, and the entry it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    pub volumes: Vec<Volume>,
    pub mounts: Vec<Value>,
    pub from: Place,
    pub extra_vol_type: Option<String>,
}

/// The result for one caller: everything that reaches it, in pod order, and warnings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Collected {
    pub reached: Vec<Reached>,
    pub warnings: Vec<String>,
}

/// Entries come local lists first, then global ones (openstack-operator since 5882ae32), each
/// with the place it was written; every entry's copies are kept in order. Duplicate volume names and mount paths, which the API server would reject in a
/// pod, are reported naming both entries.
pub fn collect(entries: &[(Place, VolMounts)], svc: &[&str]) -> Collected {
    let mut c = Collected::default();
    for (place, vm) in entries {
        for p in propagate(vm, svc) {
            c.reached.push(Reached {
                volumes: p.volumes,
                mounts: p.mounts,
                from: place.clone(),
                extra_vol_type: vm.extra_vol_type.clone(),
            });
        }
    }
    let mut volumes: Vec<(&str, &Place)> = Vec::new();
    let mut paths: Vec<(&str, &Place)> = Vec::new();
    for r in &c.reached {
        for v in &r.volumes {
            if let Some((_, first)) = volumes.iter().find(|(n, _)| *n == v.name) {
                c.warnings.push(format!(
                    "volume name \"{}\" is used twice, by {first} and by {}; upstream would emit both and the API server rejects the pod: give one a different name or narrow its propagation",
                    v.name, r.from
                ));
            } else {
                volumes.push((&v.name, &r.from));
            }
        }
        for m in &r.mounts {
            let Some(path) = m.get("mountPath").and_then(Value::as_str) else { continue };
            if let Some((_, first)) = paths.iter().find(|(p, _)| *p == path) {
                c.warnings.push(format!(
                    "mountPath {path} is mounted twice, by {first} and by {}; the API server rejects duplicate mount paths",
                    r.from
                ));
            } else {
                paths.push((path, &r.from));
            }
        }
    }
    c
}

/// The service templates whose local extraMounts apply to a caller, by its service identity:
/// (identity, `OpenStackControlPlane.spec` field).
const LOCAL_LISTS: &[(&str, &str)] =
    &[("Cinder", "cinder"), ("Glance", "glance"), ("Manila", "manila"), ("Neutron", "neutron")];

/// An extraMounts list that does not decode, and the object it is in.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{object}: {error}")]
pub struct MountsError {
    pub object: String,
    pub error: DecodeError,
}

/// Every extraMounts entry that can reach a caller whose identity starts with `service`, in
/// the order the pods combine them: the local lists first (the control plane's
/// `spec.<service>.template.extraMounts`; for [`COMPUTE`], the `group`'s
/// `nodeTemplate.extraMounts`), then the control plane's global `spec.extraMounts`.
/// [`collect`] then keeps what actually propagates to the caller.
pub fn entries(
    snap: &Snapshot,
    service: &str,
    group: Option<&HostGroup>,
) -> Result<Vec<(Place, VolMounts)>, MountsError> {
    let mut out = Vec::new();
    let cps: Vec<_> = snap.openstack.iter().filter(|o| o.id.kind == "OpenStackControlPlane").collect();
    let invalid = |object: String| move |error| MountsError { object, error };
    if let Some((_, field)) = LOCAL_LISTS.iter().find(|(svc, _)| *svc == service) {
        for cp in &cps {
            let path = format!("spec.{field}.template.extraMounts");
            if let Some(Value::Array(v)) = cp.body.pointer(&format!("/spec/{field}/template/extraMounts")) {
                for (p, vm) in decode_wrappers(&path, v).map_err(invalid(cp.id.to_string()))? {
                    out.push((Place { object: cp.id.short(), path: p }, vm));
                }
            }
        }
    }
    if service == COMPUTE
        && let Some(g) = group
    {
        let list =
            decode_list(&g.extra_mounts.path, &g.extra_mounts.value).map_err(invalid(g.id.to_string()))?;
        for (i, vm) in list.into_iter().enumerate() {
            out.push((Place { object: g.id.short(), path: format!("{}[{i}]", g.extra_mounts.path) }, vm));
        }
    }
    for cp in &cps {
        if let Some(Value::Array(v)) = cp.body.pointer("/spec/extraMounts") {
            for (p, vm) in decode_wrappers("spec.extraMounts", v).map_err(invalid(cp.id.to_string()))? {
                out.push((Place { object: cp.id.short(), path: p }, vm));
            }
        }
    }
    Ok(out)
}

/// Decodes a list of `VolMounts` (a NodeSet's or Role's `nodeTemplate.extraMounts`).
pub fn decode_list(base: &str, v: &[Value]) -> Result<Vec<VolMounts>, DecodeError> {
    v.iter().enumerate().map(|(i, x)| resource::decode(&format!("{base}[{i}]"), x)).collect()
}

/// Decodes a list of wrappers (`OpenStackControlPlane.spec.extraMounts`, service templates)
/// and flattens it into `VolMounts` with their paths, since `name`/`region` do not filter.
pub fn decode_wrappers(base: &str, v: &[Value]) -> Result<Vec<(String, VolMounts)>, DecodeError> {
    let mut out = Vec::new();
    for (i, x) in v.iter().enumerate() {
        let w: ExtraVolMounts = resource::decode(&format!("{base}[{i}]"), x)?;
        for (j, vm) in w.extra_vol.into_iter().enumerate() {
            out.push((format!("{base}[{i}].extraVol[{j}]"), vm));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vm(prop: Option<&[&str]>) -> VolMounts {
        VolMounts {
            propagation: prop.map(|p| p.iter().map(|s| s.to_string()).collect()),
            extra_vol_type: Some("Ceph".into()),
            volumes: vec![Volume {
                name: "ceph".into(),
                source: json!({"secret": {"secretName": "ceph-conf-files"}}).as_object().unwrap().clone(),
            }],
            mounts: vec![json!({"name": "ceph", "mountPath": "/etc/ceph", "readOnly": true})],
        }
    }

    const CV: &[&str] = &["Cinder", "CinderVolume", "ceph"];
    const CAPI: &[&str] = &["Cinder", "CinderAPI"];
    const GAPI: &[&str] = &["Glance", "GlanceAPI", "default"];
    const MS: &[&str] = &["Manila", "ManilaShare", "share1"];
    const EDPM: &[&str] = &["Compute"];
    const DBS: &[&str] = &["DBSync"];

    /// The 15-case table of mounts-nova-edpm.md §1.4: (propagation, caller, copies).
    #[test]
    fn reference_table() {
        type Case<'a> = (Option<&'a [&'a str]>, &'a [&'a str], usize);
        let cases: &[Case] = &[
            (None, CV, 1),
            (Some(&[]), &[], 1),
            (Some(&["All"]), &[], 1),
            (Some(&["All"]), GAPI, 1),
            (Some(&["CinderVolume"]), CV, 1),
            (Some(&["CinderVolume"]), CAPI, 0),
            (Some(&["CinderVolume"]), EDPM, 0),
            (Some(&["CinderVolume"]), &[], 0),
            (Some(&["ceph"]), CV, 1),
            (Some(&["ceph"]), &["Cinder", "CinderVolume", "lvm"], 0),
            (Some(&["CinderVolume", "GlanceAPI", "ManilaShare"]), CV, 1),
            (Some(&["CinderVolume", "GlanceAPI", "ManilaShare"]), GAPI, 1),
            (Some(&["CinderVolume", "GlanceAPI", "ManilaShare"]), MS, 1),
            (Some(&["CinderVolume", "GlanceAPI"]), EDPM, 0),
            (Some(&["Compute"]), EDPM, 1),
            (Some(&["Cinder", "CinderVolume"]), CV, 2),
            (Some(&["All", "Compute"]), EDPM, 2),
            (Some(&["all"]), CV, 0),
            (Some(&["compute"]), EDPM, 0),
            (Some(&["default"]), GAPI, 1),
            (Some(&["default"]), &["Cinder", "CinderVolume", "default"], 1),
            (Some(&["DBSync"]), DBS, 1),
            (Some(&["DBSync"]), CV, 0),
            (Some(&["Glance"]), &["Glance", "GlanceAPI", "x"], 1),
        ];
        for (prop, svc, want) in cases {
            let got = propagate(&vm(*prop), svc);
            assert_eq!(got.len(), *want, "propagation {prop:?} caller {svc:?}");
            // (a) copies carry only volumes and mounts.
            for p in &got {
                assert_eq!(p.volumes[0].name, "ceph");
            }
        }
    }

    #[test]
    fn wrapper_concatenates_in_order_and_ignores_name_and_region() {
        let w = json!([{"name": "x", "region": "nowhere", "extraVol": [
            {"volumes": [{"name": "ceph"}], "mounts": []},
            {"propagation": ["Compute"], "volumes": [{"name": "b"}], "mounts": []},
        ]}]);
        let entries = decode_wrappers("spec.extraMounts", w.as_array().unwrap()).unwrap();
        let paths: Vec<&str> = entries.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["spec.extraMounts[0].extraVol[0]", "spec.extraMounts[0].extraVol[1]"]);
        let names: Vec<String> = entries
            .iter()
            .flat_map(|(_, vm)| propagate(vm, EDPM))
            .map(|p| p.volumes[0].name.clone())
            .collect();
        assert_eq!(names, ["ceph", "b"]);
    }

    #[test]
    fn local_first_then_global_and_duplicates_warned() {
        let entries = [
            (
                Place { object: "Cinder".into(), path: "spec.cinder.template.extraMounts[0]".into() },
                vm(Some(&["ceph"])),
            ),
            (
                Place {
                    object: "OpenStackControlPlane/openstack".into(),
                    path: "spec.extraMounts[0]".into(),
                },
                vm(Some(&["CinderVolume", "GlanceAPI"])),
            ),
        ];
        let c = collect(&entries, CV);
        assert_eq!(c.reached.len(), 2);
        assert!(c.reached[0].from.path.starts_with("spec.cinder.template.extraMounts[0]"));
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("\"ceph\"")
                && c.warnings[0].contains("spec.cinder.template.extraMounts[0]")
                && c.warnings[0].contains("spec.extraMounts[0]")
        );
    }
}
