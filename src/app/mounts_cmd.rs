//! `mounts propagate`: the lists that apply to a caller, from the snapshot, through the pure
//! `mounts::collect`.

use std::io::Write;

use serde_json::{Value, json};

use super::{AppError, build_all, write_out};
use crate::cli::{MountsAction, MountsArgs};
use crate::exit::Exit;
use crate::mounts::{self, Place, VolMounts};
use crate::settings::Settings;

/// The service template whose local extraMounts apply to a caller, by its service identity.
const LOCAL_LISTS: &[(&str, &str)] =
    &[("Cinder", "cinder"), ("Glance", "glance"), ("Manila", "manila"), ("Neutron", "neutron")];

pub(super) fn run(s: &Settings, args: MountsArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    let MountsAction::Propagate { identity, node } = args.action else {
        unreachable!("mounts plan is dispatched to stage_cmd");
    };
    let (snap, model, _) = build_all(s)?;
    let invalid = |e: crate::resource::DecodeError, object: &str| {
        AppError::new(Exit::InvalidInput, format!("{object}: {e}"))
    };
    // (place, entries) in the order they combine: local lists, then global.
    let mut lists: Vec<(Place, VolMounts)> = Vec::new();
    let cps: Vec<_> = snap.openstack.iter().filter(|o| o.id.kind == "OpenStackControlPlane").collect();
    let service = identity.first().map(String::as_str).unwrap_or_default();
    if let Some((_, field)) = LOCAL_LISTS.iter().find(|(svc, _)| *svc == service) {
        for cp in &cps {
            let path = format!("spec.{field}.template.extraMounts");
            if let Some(Value::Array(v)) = cp.body.pointer(&format!("/spec/{field}/template/extraMounts")) {
                let entries =
                    mounts::decode_wrappers(&path, v).map_err(|e| invalid(e, &cp.id.to_string()))?;
                for (p, vm) in entries {
                    lists.push((Place { object: cp.id.short(), path: p }, vm));
                }
            }
        }
    }
    if service == mounts::COMPUTE {
        if let Some(n) = &node {
            let (g, _) = model.find_member(n).ok_or_else(|| {
                AppError::new(Exit::NotFound, format!("node \"{n}\" is not in the data plane"))
            })?;
            let entries = mounts::decode_list(&g.extra_mounts.path, &g.extra_mounts.value)
                .map_err(|e| invalid(e, &g.id.to_string()))?;
            for (i, vm) in entries.into_iter().enumerate() {
                lists.push((
                    Place { object: g.id.short(), path: format!("{}[{i}]", g.extra_mounts.path) },
                    vm,
                ));
            }
        }
    } else if node.is_some() {
        return Err(AppError::new(Exit::Usage, "--node applies only to --as Compute (the EDPM job)"));
    }
    for cp in &cps {
        if let Some(Value::Array(v)) = cp.body.pointer("/spec/extraMounts") {
            let entries =
                mounts::decode_wrappers("spec.extraMounts", v).map_err(|e| invalid(e, &cp.id.to_string()))?;
            for (p, vm) in entries {
                lists.push((Place { object: cp.id.short(), path: p }, vm));
            }
        }
    }
    let svc: Vec<&str> = identity.iter().map(String::as_str).collect();
    let collected = mounts::collect(&lists, &svc);
    let mut volumes = Vec::new();
    let mut mounts_out = Vec::new();
    let mut from = Vec::new();
    for r in &collected.reached {
        let place = r.from.to_string();
        for v in &r.volumes {
            let mut obj = v.source.clone();
            obj.insert("name".into(), json!(v.name));
            volumes.push(Value::Object(obj));
        }
        mounts_out.extend(r.mounts.iter().cloned());
        from.push(json!({"from": place, "extraVolType": r.extra_vol_type, "volumes": r.volumes.iter().map(|v| &v.name).collect::<Vec<_>>()}));
    }
    let doc = json!({"identity": identity, "volumes": volumes, "mounts": mounts_out, "sources": from, "warnings": collected.warnings});
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    write_out(out, &text)?;
    Ok(Exit::Success)
}
