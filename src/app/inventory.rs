//! `inventory`: `--list`/`--host` (the dynamic inventory contract), `export`, `explain`.

use std::io::Write;

use super::output::{json_text, write_file, write_out};
use super::{AppError, Context};
use crate::cli::{ExportFormat, InventoryAction, InventoryArgs, TextOrJson};
use crate::exit::Exit;
use crate::inventory;

pub(super) fn run(cx: &Context, args: InventoryArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    match args.action {
        None if args.list => {
            let (snap, inv) = cx.inventory()?;
            let text = inventory::export::list_json_string(&inv, args.pretty)
                .map_err(|e| AppError::new(Exit::Failure, format!("cannot encode the inventory: {e}")))?;
            write_out(out, &text)?;
            // The process exits next; freeing a 10,000-host inventory node by node costs a
            // measurable share of the run (BENCHMARKS.md), and the OS reclaims it at once.
            std::mem::forget((snap, inv));
        }
        None => {
            let Some(host) = args.host else {
                return Err(AppError::new(
                    Exit::Usage,
                    "inventory needs --list, --host HOST, or a subcommand (export, explain)",
                ));
            };
            let (_, inv) = cx.inventory()?;
            let Some(v) = inventory::export::host_json(&inv, &host) else {
                let hint = crate::model::did_you_mean(&host, inv.hosts.keys().map(String::as_str));
                return Err(AppError::new(
                    Exit::NotFound,
                    format!("host \"{host}\" is not in the inventory{hint}"),
                ));
            };
            write_out(out, &json_text(&v, args.pretty)?)?;
        }
        Some(InventoryAction::Export { format, output, .. }) => {
            let (_, inv) = cx.inventory()?;
            let text = match format {
                ExportFormat::Yaml => inventory::export::yaml(&inv)
                    .map_err(|e| AppError::new(Exit::Failure, format!("cannot write YAML: {e}")))?,
                ExportFormat::Ini => inventory::export::ini(&inv),
                ExportFormat::Json => inventory::export::static_json(&inv),
            };
            match output {
                Some(path) => write_file(&path, text.as_bytes(), 0o600)?,
                None => write_out(out, &text)?,
            }
        }
        Some(InventoryAction::Explain { host, var, format, show_secrets, .. }) => {
            let inv = cx.inventory_traced()?;
            let e = inventory::explain::explain(&inv, &host, var.as_deref())
                .map_err(|e| AppError::new(Exit::NotFound, e))?;
            let text = match format {
                TextOrJson::Text => inventory::explain::to_text(&e, show_secrets),
                TextOrJson::Json => json_text(&inventory::explain::to_json(&e, show_secrets), true)?,
            };
            write_out(out, &text)?;
        }
    }
    Ok(Exit::Success)
}
