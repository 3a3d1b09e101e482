//! `validate`: every problem the pipeline's stages find, by object and field, instead of
//! stopping at the first.

use std::io::Write;

use super::output::{json_text, write_out};
use super::{AppError, Context};
use crate::cli::{TextOrJson, ValidateArgs};
use crate::exit::Exit;

pub(super) fn run(cx: &Context, args: ValidateArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    // Unknown kinds are diagnostics here, not warnings on stderr.
    let snap = cx.snapshot_quiet(false)?;
    let found = super::pipeline::Found::of(&snap);
    let diags = edpm_core::validate::validate(&snap, &cx.inventory_options());
    let (errors, warnings) = edpm_core::validate::summary(&diags);

    let text = match args.format {
        TextOrJson::Json => json_text(&edpm_core::validate::to_json(&diags), true)?,
        TextOrJson::Text => {
            let mut t: String = diags.iter().map(|d| format!("{d}\n")).collect();
            // The hosts Ansible would see, when the objects resolve into a model.
            let hosts = edpm_core::model::resolve(&snap)
                .map(|m| format!(", {} host(s)", m.members().count()))
                .unwrap_or_default();
            t.push_str(&format!(
                "{errors} error(s), {warnings} warning(s) in {} data-plane object(s){hosts}\n",
                snap.host_sources()
            ));
            t
        }
    };
    write_out(out, &text)?;
    // Sources with no data-plane object must not pass as "0 errors" (nor be hidden behind
    // other errors). Counted on the snapshot: `validate` has resolved the model once already.
    cx.check_not_empty(snap.host_sources(), &found)?;
    Ok(if errors > 0 { Exit::ValidationFailed } else { Exit::Success })
}
