//! `stage` and `mounts plan`: the pure staging plan, then (for `stage`) `staging::fs::apply`.

use std::io::Write;
use std::path::Path;

use super::{AppError, build_all, write_out};
use crate::cli::{StageArgs, TextOrJson};
use crate::exit::Exit;
use crate::render::NodeView;
use crate::settings::Settings;
use crate::staging::{self, Step, Want, fs::FsError};

impl From<staging::StageError> for AppError {
    fn from(e: staging::StageError) -> Self {
        let code = match &e {
            staging::StageError::NoNode(_) => Exit::NotFound,
            staging::StageError::MissingSource { .. } | staging::StageError::MissingCaBundle { .. } => {
                Exit::MissingReference
            }
            staging::StageError::Render(r) => return AppError::from(r.clone()),
            staging::StageError::Clash { .. } => Exit::Conflict,
            _ => Exit::InvalidInput,
        };
        AppError::new(code, e)
    }
}

impl From<FsError> for AppError {
    fn from(e: FsError) -> Self {
        let code = match e {
            FsError::Unsafe { .. } => Exit::Conflict,
            _ => Exit::Failure,
        };
        AppError::new(code, e)
    }
}

fn compute(
    s: &Settings,
    node: &str,
    root: &Path,
    templates: Option<&Path>,
) -> Result<(Vec<Want>, Vec<Step>), AppError> {
    let templates = super::render_cmd::load_templates(templates)?;
    let (snap, model, inv) = build_all(s)?;
    let view = NodeView::new(&model, &inv, node).ok_or_else(|| staging::StageError::NoNode(node.into()))?;
    // Manila CSI shares are resolved through Keystone and Manila only when a volume needs it.
    let client = std::cell::OnceCell::new();
    let resolve = |share: &staging::units::CsiShare| -> Result<staging::units::ResolvedShare, String> {
        let c = match client.get() {
            Some(c) => c,
            None => {
                let made = crate::openstack::Client::new(s.kube_timeout).map_err(|e| e.to_string())?;
                client.get_or_init(|| made)
            }
        };
        c.resolve(share).map_err(|e| e.to_string())
    };
    let wants = staging::wants(&snap, &view, &templates, &resolve)?;
    let manifest = staging::fs::read_manifest(root)?;
    let paths = wants.iter().map(|w| w.path.as_str()).chain(manifest.files.keys().map(String::as_str));
    let observed = staging::fs::observe(root, paths)?;
    let steps = staging::plan(&wants, &manifest, &observed);
    Ok((wants, steps))
}

pub(super) fn stage(s: &Settings, args: StageArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    if !args.root.is_dir() {
        return Err(AppError::new(
            Exit::SourceUnreadable,
            format!("--root {}: not a directory", args.root.display()),
        ));
    }
    let (wants, steps) = compute(s, &args.node, &args.root, args.templates.as_deref())?;
    let report = staging::fs::apply(&args.root, &wants, &steps)?;
    write_out(out, &(serde_json::to_string(&report).unwrap_or_default() + "\n"))?;
    Ok(Exit::Success)
}

pub(super) fn plan(
    s: &Settings,
    node: &str,
    root: &Path,
    format: TextOrJson,
    templates: Option<&Path>,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let (_, steps) = compute(s, node, root, templates)?;
    let text = match format {
        TextOrJson::Json => serde_json::to_string_pretty(&steps).unwrap_or_default() + "\n",
        TextOrJson::Text => steps
            .iter()
            .map(|st| {
                format!(
                    "{:<9} {:04o} {} {}  ({})\n",
                    format!("{:?}", st.action).to_lowercase(),
                    st.mode,
                    &st.sha256[..12],
                    st.path,
                    st.from
                )
            })
            .collect(),
    };
    write_out(out, &text)?;
    Ok(Exit::Success)
}
