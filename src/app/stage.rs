//! `stage`: the pure staging plan for a node, then `node_root::apply` writes it under the root.
//! `compute` is shared with `mounts plan`.

use std::io::Write;
use std::path::Path;

use super::output::{json_text, write_out};
use super::{AppError, Context};
use crate::cli::StageArgs;
use crate::exit::Exit;
use edpm_core::render::NodeView;
use edpm_core::staging::{self, Step, Want};
use edpm_io::node_root;

pub(super) fn compute(
    cx: &Context,
    node: &str,
    root: &Path,
    templates: Option<&Path>,
) -> Result<(Vec<Want>, Vec<Step>), AppError> {
    let templates = super::render::load_templates(templates)?;
    let super::pipeline::Pipeline { snap, model, inv } = cx.pipeline()?;
    let s = cx.settings;
    let view = NodeView::new(&model, &inv, node).ok_or_else(|| staging::StageError::NoNode(node.into()))?;
    // Manila CSI shares are resolved through Keystone and Manila only when a volume needs it.
    let client = std::cell::OnceCell::new();
    let resolve = |share: &staging::units::CsiShare| -> Result<staging::units::ResolvedShare, String> {
        let c = match client.get() {
            Some(c) => c,
            None => {
                let made = edpm_io::openstack::Client::new(s.kube_timeout).map_err(|e| e.to_string())?;
                client.get_or_init(|| made)
            }
        };
        c.resolve(share).map_err(|e| e.to_string())
    };
    let wants = staging::wants(&snap, &view, &templates, &resolve)?;
    let manifest = node_root::read_manifest(root)?;
    let paths = wants.iter().map(|w| w.path.as_str()).chain(manifest.files.keys().map(String::as_str));
    let observed = node_root::observe(root, paths)?;
    let steps = staging::plan(&wants, &manifest, &observed);
    Ok((wants, steps))
}

pub(super) fn run(cx: &Context, args: StageArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    match std::fs::metadata(&args.root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(AppError::source_unreadable(format!(
                "--root {}: not a directory; pass the directory to stage under (/ on the node)",
                args.root.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AppError::source_unreadable(format!(
                "--root {}: does not exist; create it first, or pass / on the node",
                args.root.display()
            )));
        }
        Err(e) => {
            return Err(AppError::source_unreadable(format!("--root {}: {e}", args.root.display())));
        }
    }
    let (wants, steps) = compute(cx, &args.node, &args.root, args.templates.as_deref())?;
    let report = node_root::apply(&args.root, &wants, &steps)?;
    write_out(out, &json_text(&report, false)?)?;
    Ok(Exit::Success)
}
