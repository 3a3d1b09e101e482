//! `status wait`'s words, as plain data: the progress line (how many nodes remain, which, and
//! what they wait for) and the closing summary, which groups the nodes still waited for by
//! what they wait for and names the Deployment in progress on them. The shell decides where
//! they go (rewritten in place on a terminal, a line per change when piped).

use super::NodeView;
use crate::condition::Status;
use crate::condition::types::RECONCILING;
use crate::excerpt::printable;

/// How many nodes a group names before it counts the rest.
pub const NAMED_NODES: usize = 10;

/// Nodes waiting for the same thing, with the same Deployment in progress on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// What they wait for (`ServicesReady: nova Requested`, `VersionCurrent: at 18.0.3 …`).
    pub why: String,
    /// The same in a word or two, for the progress line (the condition's reason).
    pub short: String,
    /// The Deployment not finished on them (`Reconciling` True names it).
    pub deployment: Option<String>,
    pub nodes: Vec<String>,
}

/// The Deployment a node's `Reconciling` names while it is True.
pub fn deployment_in_progress(n: &NodeView) -> Option<String> {
    let c = n.conditions.get(RECONCILING).filter(|c| c.status == Status::True)?;
    let name = c.message.strip_prefix("Deployment ")?.split(' ').next()?;
    Some(printable(name).into_owned())
}

/// The nodes not yet `ty`, grouped by what they wait for and the Deployment on them, the
/// largest group first (then by first node).
pub fn groups(waiting: &[&NodeView], ty: &str) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for n in waiting {
        let why = super::show::waits(n, ty);
        let deployment = deployment_in_progress(n);
        let short = match (crate::condition::types::wait_named(ty), n.conditions.get(ty)) {
            (Some(_), Some(c)) => format!("{ty} {}", printable(&c.reason)),
            _ => why.clone(),
        };
        match out.iter_mut().find(|g| g.why == why && g.deployment == deployment) {
            Some(g) => g.nodes.push(printable(&n.node).into_owned()),
            None => out.push(Group { why, short, deployment, nodes: vec![printable(&n.node).into_owned()] }),
        }
    }
    out.sort_by(|a, b| b.nodes.len().cmp(&a.nodes.len()).then_with(|| a.nodes.cmp(&b.nodes)));
    out
}

/// `a, b, c and 7 more`: the first `named` nodes, then how many more.
fn names(nodes: &[String], named: usize) -> String {
    let mut text = nodes.iter().take(named).cloned().collect::<Vec<_>>().join(", ");
    if nodes.len() > named {
        text.push_str(&format!(" and {} more", nodes.len() - named));
    }
    text
}

/// One line of progress: `3/10 nodes not yet SecretsCurrent (SecretsCurrent SecretsStale;
/// Deployment d in progress): a, b, c`; with more than one group, the largest and how many
/// others. What they wait for comes before the names, so a terminal's cut keeps it.
pub fn progress_line(total: usize, waiting: &[&NodeView], ty: &str) -> String {
    let gs = groups(waiting, ty);
    let Some(first) = gs.first() else { return format!("{total}/{total} nodes {ty}") };
    let nodes: Vec<String> = waiting.iter().map(|n| printable(&n.node).into_owned()).collect();
    let running =
        first.deployment.as_ref().map(|d| format!("; Deployment {d} in progress")).unwrap_or_default();
    let others = match gs.len() {
        1 => String::new(),
        n => format!("; {} other reason(s)", n - 1),
    };
    format!(
        "{}/{total} nodes not yet {ty} ({}{running}{others}): {}",
        waiting.len(),
        one_line(&first.short),
        names(&nodes, 3),
    )
}

/// The closing summary, a few lines: how many nodes are not `ty`, then per group its nodes,
/// what they wait for (once) and the Deployment in progress on them.
pub fn summary(total: usize, waiting: &[&NodeView], ty: &str) -> String {
    let mut out = format!("{} of {total} node(s) not {ty}:\n", waiting.len());
    for g in groups(waiting, ty) {
        out.push_str(&format!("  {} node(s): {}\n", g.nodes.len(), names(&g.nodes, NAMED_NODES)));
        out.push_str(&format!("    {}\n", one_line(&g.why)));
        if let Some(d) = &g.deployment {
            out.push_str(&format!(
                "    in progress: Deployment {d} (not finished; `status explain NODE` says how far)\n"
            ));
        }
    }
    out
}

/// The summary as an error's one line: per group its nodes and the Deployment on them, the
/// reasons said once each (the summary on stdout says them whole).
pub fn summary_line(total: usize, waiting: &[&NodeView], ty: &str) -> String {
    let parts: Vec<String> = groups(waiting, ty)
        .iter()
        .map(|g| {
            let running =
                g.deployment.as_ref().map(|d| format!("; Deployment {d} in progress")).unwrap_or_default();
            let why: String = one_line(&g.why).chars().take(120).collect();
            format!("{} ({why}{running})", names(&g.nodes, NAMED_NODES))
        })
        .collect();
    format!("{ty} is not True for {} of {total} node(s): {}", waiting.len(), parts.join("; "))
}

/// Our own words (condition messages, already scrubbed and made printable) on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
