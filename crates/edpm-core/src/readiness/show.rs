//! How readiness is shown: an 80-column table of nodes × phases and NodeSets, the JSON
//! document `status show --format json` prints, and the evidence chain of `status explain`.
//! Pure: text out; colour only when the caller says the output is a terminal.

use serde_json::{Value, json};

use super::{
    BAREMETAL, INFRASTRUCTURE, NODESET_BAREMETAL, NODESET_INFRASTRUCTURE, NODESET_SERVICES, NodeSetView,
    NodeView, Readiness, SERVICES,
};
use crate::condition::{Condition, READY, Severity, Status};
use crate::excerpt::{printable, printable_lines};

/// What to show of a readiness computation.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub nodes: Vec<String>,
    pub nodesets: Vec<String>,
}

impl Filter {
    fn node(&self, n: &NodeView) -> bool {
        (self.nodes.is_empty()
            || self.nodes.iter().any(|x| x == &n.node || x == &n.host || x == &n.host_name))
            && (self.nodesets.is_empty() || self.nodesets.contains(&n.nodeset))
    }

    fn nodeset(&self, s: &NodeSetView) -> bool {
        (self.nodesets.is_empty() || self.nodesets.contains(&s.name))
            && (self.nodes.is_empty() || self.nodesets.contains(&s.name))
    }
}

/// The JSON document: `{"nodes": [{"name", "nodeSet", "conditions": […]}], "nodeSets": [{"name", "conditions": […]}]}`.
pub fn to_json(r: &Readiness, f: &Filter) -> Value {
    let conds = |cs: &crate::condition::Conditions| -> Vec<Value> { cs.iter().map(condition_json).collect() };
    json!({
        "nodes": r.nodes.iter().filter(|n| f.node(n)).map(|n| json!({
            "name": n.node,
            "nodeSet": n.nodeset,
            "object": n.object,
            "conditions": conds(&n.conditions),
        })).collect::<Vec<_>>(),
        "nodeSets": r.nodesets.iter().filter(|s| f.nodeset(s)).map(|s| json!({
            "name": s.name,
            "object": s.object,
            "nodes": {"total": s.counts.total, "ready": s.counts.ready},
            "conditions": conds(&s.conditions),
        })).collect::<Vec<_>>(),
    })
}

/// Every key always present, severity `""` when there is none.
fn condition_json(c: &Condition) -> Value {
    json!({
        "type": c.type_,
        "status": c.status_word(),
        "severity": severity_word(c.severity),
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": c.last_transition_time.to_string(),
    })
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "Error",
        Severity::Warning => "Warning",
        Severity::Info => "Info",
        Severity::None => "",
    }
}

/// A phase cell: `ok`, `wait` (in progress or not deployed), `warn`, `FAIL`, `?`.
fn cell(c: Option<&Condition>) -> &'static str {
    match c {
        None => "-",
        Some(c) => match (c.status, c.severity) {
            (Status::True, _) => "ok",
            (Status::False, Severity::Error) => "FAIL",
            (Status::False, Severity::Warning) => "warn",
            (Status::False, _) => "wait",
            (Status::Unknown, _) => "?",
        },
    }
}

fn paint(text: &str, cell: &str, colour: bool) -> String {
    if !colour {
        return text.to_string();
    }
    let code = match cell {
        "ok" => "32",
        "FAIL" => "31",
        "warn" | "wait" => "33",
        "?" => "35",
        _ => return text.to_string(),
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Cuts `s` to `width` characters, marking the cut.
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The table: for each NodeSet (or Role), a header line with its rollup, then its nodes ×
/// phases with the reason for anything not ready, within `width` columns.
pub fn table(r: &Readiness, f: &Filter, width: usize, colour: bool) -> String {
    let mut out = String::new();
    let nodes: Vec<&NodeView> = r.nodes.iter().filter(|n| f.node(n)).collect();
    let nw = nodes.iter().map(|n| n.node.chars().count()).max().unwrap_or(4).clamp(4, 24);
    let mut shown = 0;
    for set in &r.nodesets {
        let members: Vec<&NodeView> = nodes.iter().copied().filter(|n| n.nodeset == set.name).collect();
        if members.is_empty() && !f.nodeset(set) {
            continue;
        }
        shown += 1;
        if !out.is_empty() {
            out.push('\n');
        }
        nodeset_head(&mut out, set, width, colour);
        if members.is_empty() {
            continue;
        }
        let mut line = format!("  {:<nw$} ", "NODE");
        cells(&mut line, ["-1", "0", "1", "READY"], colour);
        line.push_str("REASON");
        out.push_str(&strip_paint(&line, colour));
        out.push('\n');
        for n in members {
            out.push_str(&node_line(n, nw, width, colour));
        }
    }
    if shown == 0 {
        out.push_str("no nodes or NodeSets match\n");
    } else {
        out.push_str("\nphases: -1 bare metal, 0 infrastructure, 1 OpenStack services\n");
        out.push_str("ok ready · wait in progress or not deployed · warn · FAIL · ? unknown\n");
    }
    out
}

/// Header cells are never coloured.
fn strip_paint(s: &str, colour: bool) -> String {
    if !colour {
        return s.to_string();
    }
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The evidence chain for one node: each condition, why, and what it was read from.
pub fn explain(n: &NodeView) -> String {
    let mut out = format!(
        "node {} (host {}, {} {}, status object {})\n",
        printable(&n.node),
        printable(&n.host_name),
        match n.kind {
            super::api::OwnerKind::OpenStackDataPlaneNodeSet => "NodeSet",
            super::api::OwnerKind::OpenStackDataPlaneRole => "Role",
        },
        printable(&n.nodeset),
        printable(&n.object)
    );
    for ty in [READY, BAREMETAL, INFRASTRUCTURE, SERVICES] {
        if let Some(c) = n.conditions.get(ty) {
            out.push_str(&condition_line(c));
            for e in n.evidence.get(ty).into_iter().flatten() {
                out.push_str(&evidence_line(e));
            }
        }
    }
    for c in n
        .conditions
        .iter()
        .filter(|c| !matches!(c.type_.as_str(), READY | BAREMETAL | INFRASTRUCTURE | SERVICES))
    {
        if c.type_.ends_with("DeploymentReady") {
            continue;
        }
        out.push_str(&condition_line(c));
        for e in n.evidence.get(&c.type_).into_iter().flatten() {
            out.push_str(&evidence_line(e));
        }
    }
    out.push_str(&runs_lines(&n.runs));
    // Text from the cluster (names, messages, a task's output) never reaches the terminal raw:
    // its control characters are escaped; the line breaks are this text's own.
    printable_lines(&out).into_owned()
}

/// A condition in `explain`: type, status, severity, reason and time, then its message.
fn condition_line(c: &Condition) -> String {
    let sev = match c.severity {
        Severity::None => String::new(),
        s => format!("/{}", severity_word(s)),
    };
    format!(
        "{}: {}{sev} {} since {}\n    {}\n",
        printable(&c.type_),
        c.status_word(),
        printable(&c.reason),
        c.last_transition_time,
        printable(&c.message)
    )
}

/// The node's run history in `explain`, oldest first; nothing without runs.
fn runs_lines(runs: &[crate::snapshot::evidence::NodeRun]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut out = format!("Runs ({}, oldest first):\n", runs.len());
    for r in runs {
        let why = r.failed_task.as_deref().map(|t| format!(": {t}")).unwrap_or_default();
        // One line per run, whatever the task's message held.
        out.push_str(&format!(
            "    - {}\n",
            printable(&crate::redact::scrub(&format!(
                "{} Deployment {} {} (job {}, attempt {}): {}{why}",
                r.finished.as_deref().unwrap_or("(running)"),
                r.deployment,
                r.service,
                r.job,
                r.attempt,
                r.result
            )))
        ));
    }
    out
}

/// A line of evidence; an indented one is where the line above was read from.
fn evidence_line(e: &str) -> String {
    let e = crate::redact::scrub(e);
    match e.strip_prefix("  ") {
        Some(from) => format!("        {}\n", printable(from)),
        None => format!("    - {}\n", printable(&e)),
    }
}

/// The evidence chain for one NodeSet or Role: its rollups and `DeploymentReady`.
pub fn explain_nodeset(s: &NodeSetView) -> String {
    let mut out = format!(
        "{} {} (status object {}): {} nodes ready\n",
        match s.kind {
            super::api::OwnerKind::OpenStackDataPlaneNodeSet => "NodeSet",
            super::api::OwnerKind::OpenStackDataPlaneRole => "Role",
        },
        printable(&s.name),
        printable(&s.object),
        printable(&s.counts.summary)
    );
    for c in s.conditions.iter() {
        let sev = match c.severity {
            Severity::None => String::new(),
            x => format!("/{}", severity_word(x)),
        };
        out.push_str(&format!(
            "{}: {}{sev} {} since {}\n    {}\n",
            printable(&c.type_),
            c.status_word(),
            printable(&c.reason),
            c.last_transition_time,
            printable(&c.message)
        ));
        for e in s.evidence.get(&c.type_).into_iter().flatten() {
            out.push_str(&format!("    - {}\n", printable(&crate::redact::scrub(e))));
        }
    }
    printable_lines(&out).into_owned()
}

/// Cells of the phase columns, padded and painted.
fn cells(out: &mut String, cs: [&str; 4], colour: bool) {
    for (i, c) in cs.iter().enumerate() {
        let w = if i == 3 { 6 } else { 5 };
        let padded = format!("{c:<w$}");
        out.push_str(&paint(&padded, c, colour));
    }
}

/// A NodeSet's header line, and its Ready reason when it is not ready.
fn nodeset_head(out: &mut String, set: &NodeSetView, width: usize, colour: bool) {
    let kind = match set.kind {
        super::api::OwnerKind::OpenStackDataPlaneNodeSet => "NodeSet",
        super::api::OwnerKind::OpenStackDataPlaneRole => "Role",
    };
    let mut head = format!("{kind} {}: {} nodes ready  ", printable(&set.name), set.counts.summary);
    for (label, ty) in [("-1", NODESET_BAREMETAL), ("0", NODESET_INFRASTRUCTURE), ("1", NODESET_SERVICES)] {
        let c = cell(set.conditions.get(ty));
        head.push_str(&format!("{label} "));
        head.push_str(&paint(&format!("{c:<5}"), c, colour));
    }
    out.push_str(head.trim_end());
    out.push('\n');
    if let Some(ready) = set.conditions.get(READY).filter(|c| !c.is_true()) {
        // The phase that explains it, chosen as each node's row chooses (`most_important`), so
        // the header and the rows name the same service; Ready's own words when no phase is
        // behind it (upstream's DeploymentReady, say).
        let phases = [NODESET_BAREMETAL, NODESET_INFRASTRUCTURE, NODESET_SERVICES];
        let c = most_important(phases.iter().filter_map(|t| set.conditions.get(t))).unwrap_or(ready);
        out.push_str(&fit(&printable(&format!("  {}: {}", c.reason, c.message)), width));
        out.push('\n');
    }
}

/// Of conditions listed in phase order, the one not True that matters most: the most
/// important as Ready mirrors them (lib-common's order), the earliest phase of those alike.
fn most_important<'c>(phases: impl Iterator<Item = &'c Condition>) -> Option<&'c Condition> {
    // min_by_key keeps the first of equals: the earliest phase.
    phases.filter(|c| !c.is_true()).min_by_key(|c| c.level())
}

/// One node's line: its phases, Ready, and what blocks it.
fn node_line(n: &NodeView, nw: usize, width: usize, colour: bool) -> String {
    let ready = n.conditions.get(READY);
    let why = if ready.is_some_and(Condition::is_true) {
        String::new()
    } else {
        // The phase that matters most, as the NodeSet's header chooses (`most_important`).
        let phase = most_important(
            [BAREMETAL, INFRASTRUCTURE, SERVICES]
                .into_iter()
                .filter(|p| n.blocking.contains_key(p))
                .filter_map(|p| n.conditions.get(p)),
        );
        match (phase.and_then(|c| n.blocking.get(c.type_.as_str())), ready) {
            (Some(b), _) => b.clone(),
            (None, Some(r)) => format!("{}: {}", r.reason, r.message),
            (None, None) => String::new(),
        }
    };
    let mut line = format!("  {:<nw$} ", fit(&printable(&n.node), nw));
    let phases = [
        cell(n.conditions.get(BAREMETAL)),
        cell(n.conditions.get(INFRASTRUCTURE)),
        cell(n.conditions.get(SERVICES)),
        cell(ready),
    ];
    cells(&mut line, phases, colour);
    let used = 2 + nw + 1 + 3 * 5 + 6;
    line.push_str(&fit(&printable(&why), width.saturating_sub(used)));
    let mut line = line.trim_end().to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::condition::{Conditions, Time};
    use crate::readiness::api::{NodeCounts, OwnerKind};
    use crate::readiness::{NodeSetView, NodeView, Owner};
    use crate::snapshot::evidence::NodeRun;

    #[test]
    fn the_phase_that_explains_is_the_worst_and_the_earliest_of_equals() {
        use crate::condition::reasons::{HOST_FAILED, NOT_DEPLOYED, RETRYING};
        let infra = Condition::because(INFRASTRUCTURE, &NOT_DEPLOYED, "run-os");
        let services = Condition::because(SERVICES, &NOT_DEPLOYED, "nova");
        let ok = Condition::true_(BAREMETAL, "");
        // Alike: the earliest phase (as a node's row said, and now the NodeSet's header too).
        let pick = |cs: &[&Condition]| most_important(cs.iter().copied()).map(|c| c.message.clone());
        assert_eq!(pick(&[&ok, &infra, &services]).as_deref(), Some("run-os"));
        // Worse beats earlier: a failure is what an operator must see.
        let failed = Condition::because(SERVICES, &HOST_FAILED, "nova failed");
        assert_eq!(pick(&[&ok, &infra, &failed]).as_deref(), Some("nova failed"));
        let retrying = Condition::because(SERVICES, &RETRYING, "retrying");
        assert_eq!(pick(&[&infra, &retrying]).as_deref(), Some("retrying"));
        assert_eq!(pick(&[&ok]), None);
    }

    /// A node and its NodeSet whose every piece of text is `t` (hostile input).
    fn hostile(t: &str) -> Readiness {
        let cond = |ty: &str| {
            let failed = Condition::because(ty, &crate::condition::reasons::ERROR, t);
            Condition { reason: t.into(), last_transition_time: Time(1), ..failed }
        };
        let conditions =
            Conditions([READY, BAREMETAL, INFRASTRUCTURE, SERVICES, "NodeAgentReady"].map(cond).to_vec());
        let evidence: BTreeMap<String, Vec<String>> =
            [(READY.to_string(), vec![t.to_string(), format!("  {t}")])].into_iter().collect();
        let owner = Owner { kind: t.into(), name: t.into(), uid: None };
        let node = NodeView {
            object: t.into(),
            node: t.into(),
            host: t.into(),
            host_name: t.into(),
            nodeset: t.into(),
            kind: OwnerKind::OpenStackDataPlaneNodeSet,
            owner: owner.clone(),
            namespace: None,
            conditions: conditions.clone(),
            evidence: evidence.clone(),
            blocking: [(SERVICES, t.to_string())].into_iter().collect(),
            runs: vec![NodeRun {
                deployment: t.into(),
                service: t.into(),
                job: t.into(),
                attempt: 1,
                result: t.into(),
                finished: Some(t.into()),
                failed_task: Some(t.into()),
                pod: Some(t.into()),
            }],
        };
        let set = NodeSetView {
            object: t.into(),
            name: t.into(),
            kind: OwnerKind::OpenStackDataPlaneNodeSet,
            owner,
            namespace: None,
            conditions: Conditions(
                [READY, NODESET_BAREMETAL, NODESET_INFRASTRUCTURE, NODESET_SERVICES].map(cond).to_vec(),
            ),
            counts: NodeCounts::default(),
            evidence,
        };
        Readiness { nodes: vec![node], nodesets: vec![set] }
    }

    proptest::proptest! {
        /// Whatever the cluster's text holds, the table and the explanations print no control
        /// character but their own line breaks (and the table's own colour codes on a terminal).
        #[test]
        fn human_output_never_carries_inputs_control_characters(
            chars in proptest::collection::vec(proptest::char::any(), 0..40)
        ) {
            let t: String = chars.into_iter().collect();
            let r = hostile(&t);
            let f = Filter::default();
            let outputs = [table(&r, &f, 80, false), explain(&r.nodes[0]), explain_nodeset(&r.nodesets[0])];
            for out in outputs {
                proptest::prop_assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{:?}", out);
            }
            // Coloured, the only escapes are the colour codes themselves.
            let coloured = table(&r, &f, 80, true);
            let stripped = strip_paint(&coloured, true);
            proptest::prop_assert!(!stripped.chars().any(|c| c.is_control() && c != '\n'), "{:?}", stripped);
        }
    }
}
