//! `status identities`: each node agent's identity for the NodeSets named
//! (`edpm_core::identity` says what, `edpm_io::k8s::identity` makes it). Prints what it wrote,
//! never a token.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::output::{json_text, write_out};
use super::{AppError, Context};
use crate::exit::Exit;
use edpm_core::identity::{self, Access};
use edpm_core::settings::SourceSpec;

pub(super) struct Flags {
    pub(super) nodesets: Vec<String>,
    pub(super) server: Option<String>,
    pub(super) certificate_authority: Option<PathBuf>,
    pub(super) lifetime: Duration,
    pub(super) timeout: Duration,
    pub(super) json: bool,
}

pub(super) fn run(cx: &Context, f: Flags, out: &mut dyn Write) -> Result<Exit, AppError> {
    if !cx.settings.sources.contains(&SourceSpec::Kube) {
        return Err(AppError::usage(
            "status identities needs --source kube: the identities are made in the cluster",
        ));
    }
    let lifetime = identity::lifetime(f.lifetime.as_secs() as i64).map_err(AppError::usage)?;
    cx.set_deadline(f.timeout);
    let super::pipeline::Pipeline { snap, model, .. } = cx.pipeline()?;
    let cluster = cx.cluster()?;
    let client = cluster.client();
    let ca_pem = match &f.certificate_authority {
        Some(path) => Some(super::output::read_text(path, "--certificate-authority", Exit::InvalidInput)?),
        None => client.ca().map(identity::pem),
    };
    let access = Access {
        server: f.server.clone().unwrap_or_else(|| client.server().to_string()),
        ca_pem,
        namespace: client.namespace().to_string(),
    };
    let mut outcomes = Vec::new();
    for name in &f.nodesets {
        let set = identity::nodeset_of(&snap, &model, name, client.namespace(), &cx.lease_namespace).ok_or_else(|| {
            AppError::not_found(format!(
                "NodeSet {name:?} is not in namespace {} (nor a seeds' Role); check --nodeset and --namespace",
                client.namespace()
            ))
        })?;
        let now = edpm_io::clock::now().0;
        outcomes
            .push(cluster.block_on(edpm_io::k8s::identity::reconcile(client, &set, &access, lifetime, now))?);
    }
    let text = if f.json {
        json_text(&outcomes, true)?
    } else {
        outcomes
            .iter()
            .map(|o| {
                format!(
                    "NodeSet {}: {} applied, {} deleted, {} unchanged; {} token(s) minted, {} entry(ies) dropped; {} {}\n",
                    o.nodeset,
                    o.applied.len(),
                    o.deleted.len(),
                    o.unchanged,
                    o.minted.len(),
                    o.dropped.len(),
                    o.secret,
                    if o.secret_written { "written" } else { "unchanged" }
                )
            })
            .collect()
    };
    write_out(out, &text)?;
    Ok(Exit::Success)
}
