//! `inventory`: `--list`/`--host` (the dynamic inventory contract), `export`, `explain`.

use std::io::Write;

use super::output::{json_text, write_out, write_output};
use super::{AppError, Context};
use crate::cli::{ExportFormat, InventoryAction, InventoryArgs, Output, TextOrJson};
use crate::exit::Exit;
use edpm_core::inventory;

pub(super) fn run(cx: &Context, args: InventoryArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    match args.action {
        None if args.list => {
            let (snap, model, inv) = cx.inventory()?;
            // The model and what is left of the snapshot are not read again: freed now, their
            // memory takes the output (BENCHMARKS.md, peak memory).
            drop((model, snap));
            let encoded = if args.pretty {
                inventory::export::list_json_string(&inv, true).map(|s| vec![s])
            } else {
                // Host variables are most of the document: serialized on every core.
                inventory::export::list_json_pieces(&inv, |hosts| {
                    let runs: Vec<_> = hosts.chunks(hosts.len().div_ceil(16).max(64)).collect();
                    edpm_io::parallel::map(&runs, |run| inventory::export::hostvars_json(run))
                        .into_iter()
                        .collect()
                })
            };
            let pieces =
                encoded.map_err(|e| AppError::failure(format!("cannot encode the inventory: {e}")))?;
            for piece in &pieces {
                write_out(out, piece)?;
            }
            // The process exits next; freeing a 10,000-host inventory node by node costs a
            // measurable share of the run (BENCHMARKS.md), and the OS reclaims it at once.
            std::mem::forget((inv, pieces));
        }
        None => {
            let Some(host) = args.host else {
                return Err(AppError::usage(
                    "inventory needs --list, --host HOST, or a subcommand (export, explain)",
                ));
            };
            let (_, _, inv) = cx.inventory()?;
            let Some(v) = inventory::export::host_json(&inv, &host) else {
                let hint = edpm_core::model::did_you_mean(&host, inv.hosts.keys().map(String::as_str));
                return Err(AppError::not_found(format!("host \"{host}\" is not in the inventory{hint}")));
            };
            write_out(out, &json_text(&v, args.pretty)?)?;
        }
        Some(InventoryAction::Export { format, output_file, .. }) => export(cx, format, output_file, out)?,
        Some(InventoryAction::Explain { host, var, format, show_secrets, .. }) => {
            let (inv, redactor) = cx.inventory_traced()?;
            let redactor = (!show_secrets).then_some(&redactor);
            let e = inventory::explain::explain(&inv, &host, var.as_deref()).map_err(AppError::not_found)?;
            let text = match format {
                TextOrJson::Text => inventory::explain::to_text(&e, redactor),
                TextOrJson::Json => json_text(&inventory::explain::to_json(&e, redactor), true)?,
            };
            write_out(out, &text)?;
        }
    }
    Ok(Exit::Success)
}

/// `inventory export`: a static inventory, to standard output or a file.
fn export(
    cx: &Context,
    format: Vec<Output<ExportFormat>>,
    output_file: Option<std::path::PathBuf>,
    out: &mut dyn Write,
) -> Result<(), AppError> {
    let (format, output) = super::output::format_and_file(format, output_file, ExportFormat::Yaml, true)?;
    let (_, _, inv) = cx.inventory()?;
    let text = match format {
        ExportFormat::Yaml => {
            inventory::export::yaml(&inv).map_err(|e| AppError::failure(format!("cannot write YAML: {e}")))?
        }
        ExportFormat::Ini => inventory::export::ini(&inv),
        ExportFormat::Json => inventory::export::static_json(&inv),
    };
    match output {
        Some(path) => write_output(out, &path, &text, 0o600),
        None => write_out(out, &text),
    }
}
