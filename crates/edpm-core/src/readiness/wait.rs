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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::reasons::{DEPLOYING, UPDATE_PENDING};
    use crate::condition::types::VERSION_CURRENT;
    use crate::condition::{Condition, Conditions};

    fn node(name: &str, running: Option<&str>) -> NodeView {
        let mut n = NodeView {
            object: name.into(),
            node: name.into(),
            host: name.into(),
            host_name: name.into(),
            nodeset: "ns".into(),
            kind: crate::readiness::api::OwnerKind::OpenStackDataPlaneNodeSet,
            owner: crate::readiness::Owner { kind: "k".into(), name: "ns".into(), uid: None },
            namespace: None,
            conditions: Conditions::default(),
            evidence: Default::default(),
            blocking: Default::default(),
            runs: Vec::new(),
            deployed: Default::default(),
            delivered: Vec::new(),
            behind: None,
            untimed: Default::default(),
        };
        let mut conds =
            vec![Condition::because(VERSION_CURRENT, &UPDATE_PENDING, "at 18.0.3; target 18.0.4")];
        if let Some(d) = running {
            conds.push(Condition::because(
                RECONCILING,
                &DEPLOYING,
                format!("Deployment {d} is running update"),
            ));
        }
        n.conditions = Conditions(conds);
        n
    }

    #[test]
    fn nodes_are_grouped_by_what_they_wait_for_and_the_deployment_on_them() {
        let nodes = [node("c5", Some("batch-2")), node("c6", Some("batch-2")), node("c7", None)];
        let waiting: Vec<&NodeView> = nodes.iter().collect();
        let gs = groups(&waiting, VERSION_CURRENT);
        assert_eq!(gs.len(), 2);
        assert_eq!(gs[0].nodes, ["c5", "c6"]);
        assert_eq!(gs[0].deployment.as_deref(), Some("batch-2"));
        assert_eq!(gs[1].nodes, ["c7"]);
        let line = progress_line(10, &waiting, VERSION_CURRENT);
        assert_eq!(
            line,
            "3/10 nodes not yet VersionCurrent (VersionCurrent UpdatePending; Deployment batch-2 in progress; 1 other reason(s)): c5, c6, c7"
        );
        let summary = summary(10, &waiting, VERSION_CURRENT);
        // Each reason once, per group.
        assert_eq!(summary.matches("target 18.0.4").count(), 2, "{summary}");
        assert!(
            summary.starts_with("3 of 10 node(s) not VersionCurrent:\n  2 node(s): c5, c6\n"),
            "{summary}"
        );
        let one = summary_line(10, &waiting, VERSION_CURRENT);
        assert!(!one.contains('\n'), "{one}");
        assert!(
            one.contains("c5, c6 (VersionCurrent: at 18.0.3; target 18.0.4; Deployment batch-2 in progress)"),
            "{one}"
        );
    }
}
