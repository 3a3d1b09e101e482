//! `render`: build the pipeline, render per node (on every core), then write atomically,
//! print redacted, or compare (`--check`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use super::output::{json_text, write_out};
use super::{AppError, Context};
use crate::cli::{RenderArgs, TextOrJson};
use crate::exit::Exit;
use edpm_core::render::{self, NodeView, RenderError, RenderedFile, Templates};
use edpm_core::services::{self, Service};

pub(super) fn load_templates(dir: Option<&Path>) -> Result<Templates, AppError> {
    let mut overrides = BTreeMap::new();
    if let Some(dir) = dir {
        if !dir.is_dir() {
            return Err(AppError::source_unreadable(format!(
                "--templates {}: not a directory",
                dir.display()
            )));
        }
        for (name, _) in render::templates::EMBEDDED {
            let p = dir.join(name);
            if p.is_file() {
                let text = super::output::read_text(&p, "template", Exit::SourceUnreadable)?;
                overrides.insert(name.to_string(), (text, p.display().to_string()));
            }
        }
    }
    Templates::new(overrides).map_err(AppError::invalid_input)
}

/// A node's rendered files for one service: (node, service, files).
type Planned = (String, &'static str, Vec<RenderedFile>);

#[allow(
    clippy::too_many_lines,
    reason = "plans every node's files before writing any, so a failure leaves nothing half-written"
)]
pub(super) fn run(cx: &Context, args: RenderArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    let templates = load_templates(args.templates.as_deref())?;
    let super::pipeline::Pipeline { snap, model, inv } = cx.pipeline()?;
    let mut nodes = Vec::new();
    if args.nodes.is_empty() {
        for (_, m) in model.members() {
            nodes.push(NodeView::new(&model, &inv, m.inventory_hostname()).expect("member of the model"));
        }
    } else {
        for n in &args.nodes {
            let view = NodeView::new(&model, &inv, n).ok_or_else(|| {
                let names = model.members().map(|(_, m)| m.key.as_str()).collect::<Vec<_>>();
                AppError::not_found(format!(
                    "node \"{n}\" is not in the data plane{}",
                    edpm_core::model::did_you_mean(n, names.into_iter())
                ))
            })?;
            nodes.push(view);
        }
    }
    for s in &args.services {
        if services::find_rendered(s).is_none() {
            let known: Vec<&str> = services::rendered().map(|k| k.name).collect();
            return Err(AppError::usage(format!(
                "unknown service \"{s}\"; edpm-agent renders {}",
                known.join(", ")
            )));
        }
    }
    // Everything is rendered before anything is written: one bad node writes nothing. Nodes
    // are independent, so they render on every core; the first error in node order is the one
    // reported.
    let render_node = |node: &NodeView| -> Result<Vec<Planned>, RenderError> {
        let wanted: Vec<&Service> = if args.services.is_empty() {
            services::rendered().filter(|k| node.group.services.value.iter().any(|s| s == k.name)).collect()
        } else {
            args.services.iter().filter_map(|s| services::find_rendered(s)).collect()
        };
        let mut out = Vec::new();
        for kind in wanted {
            let mut files = render::render(&snap, node, kind, &templates)?;
            if args.merged {
                files = vec![render::merge(&node.member.key, kind, &files)?];
            }
            out.push((node.member.key.clone(), kind.name, files));
        }
        Ok(out)
    };
    let mut plan: Vec<Planned> = Vec::new();
    for rendered in edpm_io::parallel::map(&nodes, render_node) {
        plan.extend(rendered?);
    }
    // One node: DIR/<service>/, the layout of /var/lib/openstack/configs on that node.
    let one_node = nodes.len() == 1;
    let dir_of = |base: &Path, node: &str, svc: &str| {
        if one_node { base.join(svc) } else { base.join(node).join(svc) }
    };
    if args.redact {
        let redactor = render::redactor(&snap);
        let mut text = String::new();
        for (node, svc, files) in &plan {
            for f in files {
                text.push_str(&format!(
                    "### node {node} service {svc}: {} (mode {:04o}, from {})\n",
                    f.name, f.mode, f.from
                ));
                text.push_str(&render::redact(f, &redactor));
                text.push('\n');
            }
        }
        write_out(out, &text)?;
        return Ok(Exit::Success);
    }
    let base = args.out.expect("clap requires --out unless --redact");
    if args.check {
        let mut report = String::new();
        for (node, svc, files) in &plan {
            let dir = dir_of(&base, node, svc);
            for f in files {
                report.push_str(&check_file(&dir.join(&f.name), f));
            }
        }
        if report.is_empty() {
            let files: usize = plan.iter().map(|(_, _, f)| f.len()).sum();
            report = format!("{files} file(s) under {} match what would be rendered\n", base.display());
            write_out(out, &report)?;
            return Ok(Exit::Success);
        }
        write_out(out, &report)?;
        return Ok(Exit::Drift);
    }
    let (mut changed, mut unchanged) = (Vec::new(), Vec::new());
    let mut text = String::new();
    for (node, svc, files) in &plan {
        let dir = dir_of(&base, node, svc);
        fs_err::create_dir_all(&dir)
            .map_err(|e| AppError::failure(format!("{e}; nothing more was written")))?;
        for f in files {
            let path = dir.join(&f.name);
            // An unchanged file is left alone, so re-runs report no change and keep mtimes.
            if check_file(&path, f).is_empty() {
                unchanged.push(path.display().to_string());
                continue;
            }
            edpm_io::files::write_atomic(&path, f.content.as_bytes(), f.mode)
                .map_err(|e| AppError::failure(format!("cannot write {}: {e}", path.display())))?;
            text.push_str(&format!("{} ({:04o}, from {})\n", path.display(), f.mode, f.from));
            changed.push(path.display().to_string());
        }
    }
    if args.format == TextOrJson::Json {
        text = json_text(&serde_json::json!({"changed": changed, "unchanged": unchanged}), false)?;
    }
    write_out(out, &text)?;
    Ok(Exit::Success)
}

/// One line per difference between a rendered file and the one on disk; empty when equal.
fn check_file(path: &Path, f: &RenderedFile) -> String {
    // A link, FIFO or device in the file's place differs (and `--out` refuses to replace it);
    // it is never read.
    match edpm_io::files::read_existing(path, edpm_io::files::MAX_FILE_BYTES) {
        Ok(None) => format!("missing: {}\n", path.display()),
        Err(e) => format!("differs: {} ({e})\n", path.display()),
        Ok(Some((bytes, _))) if bytes != f.content.as_bytes() => {
            format!("differs: {} (content)\n", path.display())
        }
        Ok(Some((_, mode))) if mode & 0o777 != f.mode => {
            format!("differs: {} (mode {:04o}, want {:04o})\n", path.display(), mode & 0o777, f.mode)
        }
        Ok(Some(_)) => String::new(),
    }
}
