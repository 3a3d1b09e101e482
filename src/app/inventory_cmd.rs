//! `inventory` and `validate`.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::{AppError, build_inventory, inventory_options, load, write_out};
use crate::cli::{ExportFormat, InventoryAction, InventoryArgs, TextOrJson, ValidateArgs};
use crate::exit::Exit;
use crate::inventory;
use crate::settings::Settings;

pub(super) fn to_json(v: &Value, pretty: bool) -> String {
    let mut s =
        if pretty { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) }.unwrap_or_default();
    s.push('\n');
    s
}

pub(super) fn run_inventory(
    s: &Settings,
    args: InventoryArgs,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    match args.action {
        None if args.list => {
            let (snap, inv) = build_inventory(s)?;
            write_out(out, &inventory::export::list_json_string(&inv, args.pretty))?;
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
            let (_, inv) = build_inventory(s)?;
            let Some(v) = inventory::export::host_json(&inv, &host) else {
                let hint = crate::model::did_you_mean(&host, inv.hosts.keys().map(String::as_str));
                return Err(AppError::new(
                    Exit::NotFound,
                    format!("host \"{host}\" is not in the inventory{hint}"),
                ));
            };
            write_out(out, &to_json(&v, args.pretty))?;
        }
        Some(InventoryAction::Export { format, output }) => {
            let (_, inv) = build_inventory(s)?;
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
        Some(InventoryAction::Explain { host, var, format, show_secrets }) => {
            let inv = super::build_inventory_traced(s)?;
            let e = inventory::explain::explain(&inv, &host, var.as_deref())
                .map_err(|e| AppError::new(Exit::NotFound, e))?;
            let text = match format {
                TextOrJson::Text => inventory::explain::to_text(&e, show_secrets),
                TextOrJson::Json => to_json(&inventory::explain::to_json(&e, show_secrets), true),
            };
            write_out(out, &text)?;
        }
    }
    Ok(Exit::Success)
}

/// Inventories may hold values from Secrets, hence mode 0600 for exported files.
pub(super) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AppError> {
    crate::fsutil::write_atomic(path, bytes, mode).map_err(|e| {
        AppError::new(Exit::Failure, format!("cannot write {}: {e}; nothing was written", path.display()))
    })
}

pub(super) fn run_validate(s: &Settings, args: ValidateArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    let snap = load(s)?;
    let diags = crate::validate::validate(&snap, &inventory_options(s));
    let (errors, warnings) = crate::validate::summary(&diags);
    let text = match args.format {
        TextOrJson::Json => to_json(&crate::validate::to_json(&diags), true),
        TextOrJson::Text => {
            let mut t: String = diags.iter().map(|d| format!("{d}\n")).collect();
            t.push_str(&format!(
                "{errors} error(s), {warnings} warning(s) in {} data-plane object(s)\n",
                snap.host_sources()
            ));
            t
        }
    };
    write_out(out, &text)?;
    Ok(if errors > 0 { Exit::ValidationFailed } else { Exit::Success })
}
