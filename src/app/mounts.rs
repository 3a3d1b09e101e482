//! `mounts propagate` (the lists that reach a caller, through the pure `mounts::entries` and
//! `mounts::collect`) and `mounts plan` (what `stage` would do).

use std::io::Write;

use serde_json::{Value, json};

use super::output::{json_text, write_out};
use super::{AppError, Context};
use crate::cli::{MountsAction, MountsArgs, TextOrJson};
use crate::exit::Exit;
use edpm_core::mounts;
use edpm_core::staging;

pub(super) fn run(cx: &Context, args: MountsArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    match args.action {
        MountsAction::Propagate { identity, node, .. } => propagate(cx, &identity, node.as_deref(), out),
        MountsAction::Plan { node, root, format, templates, .. } => {
            plan(cx, &node, &root, format, templates.as_deref(), out)
        }
    }
}

fn propagate(
    cx: &Context,
    identity: &[String],
    node: Option<&str>,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let p = cx.pipeline()?;
    let service = identity.first().map(String::as_str).unwrap_or_default();
    let group = match node {
        Some(n) if service == mounts::COMPUTE => {
            let (g, _) = p
                .model
                .find_member(n)
                .ok_or_else(|| AppError::not_found(format!("node \"{n}\" is not in the data plane")))?;
            Some(g)
        }
        Some(_) => {
            return Err(AppError::usage("--node applies only to --as Compute (the EDPM job)"));
        }
        None => None,
    };
    let lists = mounts::entries(&p.snap, service, group).map_err(AppError::invalid_input)?;
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
    write_out(out, &json_text(&doc, true)?)?;
    Ok(Exit::Success)
}

fn plan(
    cx: &Context,
    node: &str,
    root: &std::path::Path,
    format: TextOrJson,
    templates: Option<&std::path::Path>,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let (_, steps) = super::stage::compute(cx, node, root, templates)?;
    let text = match format {
        TextOrJson::Json => json_text(&steps, true)?,
        TextOrJson::Text => steps
            .iter()
            .map(|st| {
                // The same facts as the JSON: a digest only for files not from a Secret.
                let digest = match &st.sha256 {
                    Some(sha) => sha[..12].to_string(),
                    None if st.action == staging::Action::Remove => "-".into(),
                    None => "(secret)".into(),
                };
                let size = st.size.map_or_else(|| "-".to_string(), |n| n.to_string());
                format!(
                    "{:<9} {:04o} {:<12} {:>7} {}  ({})\n",
                    format!("{:?}", st.action).to_lowercase(),
                    st.mode,
                    digest,
                    size,
                    st.path,
                    st.from
                )
            })
            .collect(),
    };
    write_out(out, &text)?;
    Ok(Exit::Success)
}
