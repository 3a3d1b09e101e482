//! `derive novaexternalcompute`: the seed-003 CRs of the nodes with a cell annotation,
//! printed, or server-side applied to the cluster.

use std::io::Write;

use super::output::{json_text, write_out};
use super::{AppError, Context};
use crate::cli::{DeriveArgs, DeriveWhat, ExportFormat};
use crate::exit::Exit;
use edpm_core::settings::SourceSpec;

pub(super) fn run(cx: &Context, args: DeriveArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    let DeriveWhat::Novaexternalcompute { format, apply, .. } = args.what;
    let s = cx.settings;
    let super::pipeline::Pipeline { snap, model, .. } = cx.pipeline()?;
    let objects =
        edpm_core::derive::novaexternalcomputes(&snap, &model, &s.images).map_err(AppError::conflict)?;
    if apply {
        if !s.sources.contains(&SourceSpec::Kube) {
            return Err(AppError::usage("--apply needs --source kube: there is no cluster to apply to"));
        }
        let cluster = cx.cluster()?;
        let results =
            cluster.block_on(edpm_io::k8s::apply::novaexternalcomputes(cluster.client(), &objects))?;
        write_out(out, &results.iter().map(|r| format!("{r}\n")).collect::<String>())?;
        return Ok(Exit::Success);
    }
    let text = match format {
        ExportFormat::Json => json_text(&objects, true)?,
        _ => {
            let mut t = String::new();
            for o in &objects {
                t.push_str("---\n");
                t.push_str(&serde_saphyr::to_string(o).map_err(AppError::failure)?);
            }
            t
        }
    };
    write_out(out, &text)?;
    Ok(Exit::Success)
}
