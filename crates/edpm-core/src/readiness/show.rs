//! How readiness is shown: a table of nodes × phases and NodeSets, each not-ready node's first
//! cause on its row (cut to a terminal's width; whole when piped or wide), the JSON document
//! `status show --format json` prints, the evidence chain of `status explain` (each long
//! message once), and what `status wait` still waits for.
//! Pure: text out; the clock, the terminal and its width are the caller's data.

use serde_json::{Value, json};

use std::collections::BTreeSet;

use super::{NodeSetView, NodeView, Readiness, is_agent_condition};
use crate::condition::types::{self, TYPES};
use crate::condition::{Condition, READY, Severity, Status, Time};
use crate::environment::Env;
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
    let conds = |cs: &crate::condition::Conditions, untimed: &BTreeSet<String>| -> Vec<Value> {
        cs.iter().map(|c| condition_json(c, untimed.contains(&c.type_))).collect()
    };
    json!({
        "nodes": r.nodes.iter().filter(|n| f.node(n)).map(|n| json!({
            "name": n.node,
            "nodeSet": n.nodeset,
            "object": n.object,
            "conditions": conds(&n.conditions, &n.untimed),
        })).collect::<Vec<_>>(),
        "nodeSets": r.nodesets.iter().filter(|s| f.nodeset(s)).map(|s| json!({
            "name": s.name,
            "object": s.object,
            "nodes": {"total": s.counts.total, "ready": s.counts.ready},
            "conditions": conds(&s.conditions, &s.untimed),
        })).collect::<Vec<_>>(),
    })
}

/// Every key always present, severity `""` when there is none; `lastTransitionTime` null when
/// no evidence said when the condition changed (the clock's time would be a guess).
fn condition_json(c: &Condition, untimed: bool) -> Value {
    json!({
        "type": c.type_,
        "status": c.status_word(),
        "severity": severity_word(c.severity),
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": if untimed { Value::Null } else { c.last_transition_time.to_string().into() },
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
        "warn" | "wait" | "todo" => "33",
        "?" => "35",
        _ => return text.to_string(),
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Cuts `s` to `width` visible characters, marking the cut; `None` keeps it whole.
fn fit(s: &str, width: Option<usize>) -> String {
    fit_visible(s, width)
}

/// Cuts `s` to `width` columns as a terminal shows them: colour codes (`paint`'s) take none and
/// are kept; a cut ends the colour and is marked `…`. `None` keeps it whole.
pub fn fit_visible(s: &str, width: Option<usize>) -> String {
    let Some(width) = width else { return s.to_string() };
    if visible_width(s) <= width {
        return s.to_string();
    }
    let (mut out, mut n, mut in_code, mut painted) = (String::new(), 0, false, false);
    for c in s.chars() {
        if in_code || c == '\x1b' {
            in_code = !(in_code && c == 'm');
            painted = true;
            out.push(c);
            continue;
        }
        if n + 1 >= width {
            break;
        }
        out.push(c);
        n += 1;
    }
    if painted {
        out.push_str("\x1b[0m");
    }
    out.push('…');
    out
}

/// How the table is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// The columns lines are cut to; `None`: whole lines.
    pub width: Option<usize>,
    pub colour: bool,
    /// Every column and whole messages (`--format wide`).
    pub wide: bool,
}

/// The narrowest a terminal's table is cut to: its fixed columns and some of the reason.
pub const MIN_WIDTH: usize = 60;

/// A terminal's width when neither `COLUMNS` nor the terminal says one.
pub const DEFAULT_WIDTH: usize = 80;

impl Look {
    /// How the table looks on stdout. On a terminal (`terminal`; `EDPM_AGENT_TERMINAL=1`
    /// stands for one, so tests can drive this without a TTY): cut to `COLUMNS`, else the
    /// terminal's own width (`terminal_columns`), else 80, never below [`MIN_WIDTH`]; coloured
    /// unless `NO_COLOR` is set. Piped into a file, grep or a pager: whole lines, no colour.
    /// Wide: whole lines everywhere, coloured as the rest.
    pub fn of(env: &Env, terminal: bool, terminal_columns: Option<usize>, wide: bool) -> Look {
        let terminal = terminal || env.get("EDPM_AGENT_TERMINAL") == Some("1");
        let columns = env.get("COLUMNS").and_then(|c| c.trim().parse::<usize>().ok()).filter(|c| *c > 0);
        let width = columns.or(terminal_columns.filter(|c| *c > 0)).unwrap_or(DEFAULT_WIDTH).max(MIN_WIDTH);
        Look {
            width: (terminal && !wide).then_some(width),
            colour: terminal && env.get("NO_COLOR").is_none(),
            wide,
        }
    }
}

/// How long ago `t` was, in kubectl's way of saying ages: `45s`, `5m30s`, `3h`, `4d5h`, `40d`.
pub fn age(now: Time, t: Time) -> String {
    let s = now.seconds().saturating_sub(t.seconds()).max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if s < 600 => format!("{m}m{}s", s % 60),
        _ if s < 3 * 3600 => format!("{m}m"),
        _ if s < 8 * 3600 => format!("{h}h{}m", m % 60),
        _ if s < 2 * 86400 => format!("{h}h"),
        _ if s < 8 * 86400 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

/// Since when a condition holds, as an age; `-` when it is missing or no evidence said when
/// it changed (never the moment of the command).
fn since(c: Option<&Condition>, untimed: &BTreeSet<String>, now: Time) -> String {
    match c {
        Some(c) if !untimed.contains(&c.type_) => age(now, c.last_transition_time),
        _ => "-".to_string(),
    }
}

/// The table: for each NodeSet (or Role), a header line with its rollup, then its nodes ×
/// phases with each not-ready node's first cause, laid out as `look` says; `now` dates the
/// wide table's SINCE column.
pub fn table(r: &Readiness, f: &Filter, look: Look, now: Time) -> String {
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
        // `wait` while a Deployment is on one of its nodes, else `todo` (as the rows say).
        let running = r.nodes.iter().any(|n| n.nodeset == set.name && in_progress(n));
        nodeset_head(&mut out, set, look, running);
        if members.is_empty() {
            continue;
        }
        out.push_str(&column_heads(nw, look.wide));
        for n in members {
            out.push_str(&node_line(n, nw, look, now));
        }
    }
    if shown == 0 {
        out.push_str("no nodes or NodeSets match\n");
    } else {
        out.push('\n');
        let cut = look.width.is_some() && out.lines().any(|l| l.ends_with('…'));
        for line in LEGEND {
            out.push_str(&fit(line, look.width));
            out.push('\n');
        }
        if cut {
            out.push_str("lines cut to the terminal's width: -o wide shows them whole\n");
        }
        if let Some(next) = next_step(&nodes) {
            out.push_str(&fit(&next, look.width));
            out.push('\n');
        }
        if look.wide {
            out.push_str(
                "NOVA NovaComputeReady · AGENT NodeAgentReady · SINCE Ready's last change (- unknown)\n",
            );
        }
    }
    out
}

/// The legend under the table, each line within 80 columns.
const LEGEND: [&str; 3] = [
    "phases: -1 bare metal, 0 infrastructure, 1 OpenStack services",
    "ok ready · wait a Deployment runs · todo not deployed, nothing runs · ? unknown",
    "warn degraded, retrying, behind or stale · FAIL failed for good (see explain)",
];

/// What closes the gaps the table shows, when there are any: nodes behind the target version,
/// holding a stale input, or failed for good (what `status plan` plans for).
pub fn next_step(nodes: &[&NodeView]) -> Option<String> {
    let gap = |n: &&NodeView| {
        let held = TYPES
            .iter()
            .filter_map(|t| t.wait_for.and(t.node))
            .any(|ty| n.conditions.get(ty).is_some_and(|c| c.status == Status::False));
        let stalled = n.conditions.get(types::STALLED).is_some_and(|c| c.status == Status::True);
        held || stalled
    };
    let count = nodes.iter().copied().filter(gap).count();
    (count > 0).then(|| {
        format!("next: {count} node(s) behind, stale or failed: `status plan` prints what closes it")
    })
}

/// Whether a Deployment not finished works on the node (its `Reconciling` is True).
fn in_progress(n: &NodeView) -> bool {
    n.conditions.get(types::RECONCILING).is_some_and(|c| c.status == Status::True)
}

/// A cell as a node's row says it: `wait` only while a Deployment works on the node; else,
/// not deployed and nothing running, `todo`.
fn node_cell(n: &NodeView, c: Option<&Condition>) -> &'static str {
    match cell(c) {
        "wait" if !in_progress(n) => "todo",
        other => other,
    }
}

/// The node's condition columns (the types table's `shown`, `-o wide`'s too when `wide`):
/// each head and the node's condition type.
fn columns(wide: bool) -> impl Iterator<Item = (&'static str, &'static str)> {
    TYPES
        .iter()
        .filter_map(move |t| t.shown.filter(|s| wide || !s.wide).and_then(|s| Some((s.head, t.node?))))
}

/// The node columns' heads.
fn column_heads(nw: usize, wide: bool) -> String {
    let mut line = format!("  {:<nw$} ", "NODE");
    let heads: Vec<&str> = columns(wide).map(|(head, _)| head).collect();
    cells(&mut line, &heads, false);
    if wide {
        line.push_str(&format!("{:<SINCE_WIDTH$}", "SINCE"));
    }
    line.push_str("REASON");
    line.push('\n');
    line
}

/// The wide table's SINCE column: `10d23h` and a space.
const SINCE_WIDTH: usize = 7;

/// The evidence chain for one node: each condition, why, and what it was read from. Each
/// message is said once: a condition whose message an earlier one said points to it, and a
/// long text found more than once (a failed task's message, in the conditions, the evidence
/// and every run) is printed at the top as `[1]` and named so where it recurs.
pub fn explain(n: &NodeView) -> String {
    explain_with(n, None)
}

/// [`explain`], each time followed by its age at `now` (`since 2026-11-25T10:00:00Z, 2d2h ago`).
pub fn explain_at(n: &NodeView, now: Time) -> String {
    explain_with(n, Some(now))
}

fn explain_with(n: &NodeView, now: Option<Time>) -> String {
    let head = format!(
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
    let mut said = Said { now, ..Said::default() };
    let mut out = String::new();
    // Ready and its phases first, then the rest but the services' deployment conditions.
    let is_phase = |ty: &str| ty == READY || types::phases().any(|p| p.is(ty));
    let first = std::iter::once(READY)
        .chain(types::phases().filter_map(|p| p.node))
        .filter_map(|ty| n.conditions.get(ty));
    let rest = n.conditions.iter().filter(|c| !is_phase(&c.type_) && !types::is_service_deployment(&c.type_));
    for c in first.chain(rest) {
        out.push_str(&said.condition(c, n.untimed.contains(&c.type_)));
        for e in n.evidence.get(&c.type_).into_iter().flatten() {
            out.push_str(&evidence_line(e));
        }
    }
    out.push_str(&runs_lines(&n.runs));
    let long = n
        .blocking
        .values()
        .filter_map(|b| b.cause.as_deref())
        .chain(n.runs.iter().filter_map(|r| r.failed_task.as_deref()));
    out.push_str(&explain_next(n));
    let out = head + &refer_once(&out, long);
    // Text from the cluster (names, messages, a task's output) never reaches the terminal raw:
    // its control characters are escaped; the line breaks are this text's own.
    printable_lines(&out).into_owned()
}

/// `explain`'s last line: what a person does next, when there is something to do.
fn explain_next(n: &NodeView) -> String {
    if let Some(c) = n.conditions.get(types::RECONCILING).filter(|c| c.status == Status::True) {
        // What to wait for: what the node holds when that is behind, else its readiness.
        let held = TYPES
            .iter()
            .filter_map(|t| t.wait_for.and(t.node))
            .find(|ty| n.conditions.get(ty).is_some_and(|c| c.status == Status::False));
        let what = held.map_or_else(|| "--phase ready".to_string(), |ty| format!("--for {ty}"));
        return format!("next: wait for it ({}): `status wait --node {} {what}`\n", c.message, n.node);
    }
    match next_step(&[n]) {
        Some(_) => "next: `status plan` prints the Deployment that closes what is missing here\n".to_string(),
        None => String::new(),
    }
}

/// The condition messages `explain` has printed, so that one said again points back.
#[derive(Default)]
struct Said {
    messages: Vec<(String, String)>,
    /// The command's time, for ages beside the times.
    now: Option<Time>,
}

impl Said {
    /// A condition in `explain`: type, status, severity, reason and time, then its message
    /// (or which condition above said it).
    fn condition(&mut self, c: &Condition, untimed: bool) -> String {
        let sev = match c.severity {
            Severity::None => String::new(),
            s => format!("/{}", severity_word(s)),
        };
        let when = match (untimed, self.now) {
            (true, _) => "unknown".to_string(),
            (false, Some(now)) => {
                format!("{}, {} ago", c.last_transition_time, age(now, c.last_transition_time))
            }
            (false, None) => c.last_transition_time.to_string(),
        };
        let long = c.message.chars().count() >= LONG_TEXT;
        let message = match self.messages.iter().find(|(m, _)| long && *m == c.message) {
            Some((_, ty)) => format!("(as {ty} above)"),
            None => {
                self.messages.push((c.message.clone(), printable(&c.type_).into_owned()));
                printable(&c.message).into_owned()
            }
        };
        format!(
            "{}: {}{sev} {} since {when}\n    {message}\n",
            printable(&c.type_),
            c.status_word(),
            printable(&c.reason)
        )
    }
}

/// A text worth a reference instead of a repetition: shorter ones read better in place.
const LONG_TEXT: usize = 40;

/// `body` with each long text of `texts` that it holds more than once said once: listed first
/// as `[k] text`, and `[k]` wherever it stood.
fn refer_once<'t>(body: &str, texts: impl Iterator<Item = &'t str>) -> String {
    let mut forms: Vec<String> = Vec::new();
    for t in texts {
        // As the body holds it: masked (evidence and runs are) and escaped.
        for form in [printable(t).into_owned(), printable(&crate::redact::scrub(t)).into_owned()] {
            if form.chars().count() >= LONG_TEXT
                && !forms.contains(&form)
                && body.matches(form.as_str()).count() > 1
            {
                forms.push(form);
            }
        }
    }
    // The longest replaced first, so that one inside another stays whole; each by a mark no
    // text holds (a NUL: input's control characters are escaped by now), numbered after.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let mut out = body.to_string();
    let mut marked = Vec::new();
    for (i, form) in forms.iter().enumerate() {
        if out.matches(form.as_str()).count() > 1 {
            let mark = format!("\0{i}\0");
            out = out.replace(form.as_str(), &mark);
            marked.push((out.find(&mark).unwrap_or(0), mark, form));
        }
    }
    // Numbered as they first appear.
    marked.sort_by_key(|(at, _, _)| *at);
    let mut listed = Vec::new();
    for (k, (_, mark, form)) in marked.iter().enumerate() {
        out = out.replace(mark.as_str(), &format!("[{}]", k + 1));
        listed.push((k + 1, *form));
    }
    if listed.is_empty() {
        return out;
    }
    let mut head = String::from("Messages (named below by number):\n");
    for (k, form) in listed {
        head.push_str(&format!("    [{k}] {form}\n"));
    }
    head + &out
}

/// The node's run history in `explain`, oldest first; nothing without runs.
fn runs_lines(runs: &[crate::snapshot::evidence::NodeRun]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut out = format!("Runs ({}, oldest first):\n", runs.len());
    for r in runs {
        let why = r.failed_task.as_deref().map(|t| format!(": {t}")).unwrap_or_default();
        let attempt =
            if r.attempt == 0 { "attempt unknown".to_string() } else { format!("attempt {}", r.attempt) };
        let note = r.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        // One line per run, whatever the task's message held.
        out.push_str(&format!(
            "    - {}\n",
            printable(&crate::redact::scrub(&format!(
                "{} Deployment {} {} (job {}, {attempt}): {}{why}{note}",
                r.finished.as_deref().unwrap_or("(running)"),
                r.deployment,
                r.service,
                r.job,
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
    explain_nodeset_with(s, None)
}

/// [`explain_nodeset`], each time followed by its age at `now`.
pub fn explain_nodeset_at(s: &NodeSetView, now: Time) -> String {
    explain_nodeset_with(s, Some(now))
}

fn explain_nodeset_with(s: &NodeSetView, now: Option<Time>) -> String {
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
    let mut said = Said { now, ..Said::default() };
    for c in s.conditions.iter() {
        out.push_str(&said.condition(c, s.untimed.contains(&c.type_)));
        for e in s.evidence.get(&c.type_).into_iter().flatten() {
            out.push_str(&format!("    - {}\n", printable(&crate::redact::scrub(e))));
        }
    }
    printable_lines(&out).into_owned()
}

/// Cells of the condition columns, padded and painted: the last (READY) one wider.
fn cells(out: &mut String, cs: &[&str], colour: bool) {
    for (i, c) in cs.iter().enumerate() {
        // Room for `READY` and a space in the last; for every head and a space in all.
        let w = if i + 1 == cs.len() { 6 } else { 5 }.max(c.chars().count() + 1);
        // The word painted, the padding not: a line's end trims as it does uncoloured.
        out.push_str(&paint(c, c, colour));
        out.push_str(&" ".repeat(w.saturating_sub(c.chars().count())));
    }
}

/// A NodeSet's header line, and its Ready reason when it is not ready.
fn nodeset_head(out: &mut String, set: &NodeSetView, look: Look, running: bool) {
    let colour = look.colour;
    let kind = match set.kind {
        super::api::OwnerKind::OpenStackDataPlaneNodeSet => "NodeSet",
        super::api::OwnerKind::OpenStackDataPlaneRole => "Role",
    };
    let rest = format!(": {} nodes ready  -1 {:<5}0 {:<5}1 {:<5}", set.counts.summary, "", "", "");
    // A long name is cut so that the line fits; the counts and cells always show.
    let room = look.width.map(|w| w.saturating_sub(kind.len() + 1 + rest.trim_end().chars().count()).max(8));
    let mut head =
        format!("{kind} {}: {} nodes ready  ", fit(&printable(&set.name), room), set.counts.summary);
    for (label, ty) in types::phases().filter_map(|p| Some((p.phase?.label, p.nodeset?))) {
        let c = match cell(set.conditions.get(ty)) {
            "wait" if !running => "todo",
            c => c,
        };
        head.push_str(&format!("{label} "));
        head.push_str(&paint(c, c, colour));
        head.push_str(&" ".repeat(5usize.saturating_sub(c.chars().count())));
    }
    out.push_str(head.trim_end());
    out.push('\n');
    if let Some(ready) = set.conditions.get(READY).filter(|c| !c.is_true()) {
        // The phase that explains it, chosen as each node's row chooses (`most_important`), so
        // the header and the rows name the same service; Ready's own words when no phase is
        // behind it (upstream's DeploymentReady, say).
        let phases = types::phases().filter_map(|p| set.conditions.get(p.nodeset?));
        let c = most_important(phases).unwrap_or(ready);
        out.push_str(&fit(&format!("  {}", one_line(&format!("{}: {}", c.reason, c.message))), look.width));
        out.push('\n');
    }
    // What the nodes run and hold, once there is something to say (Unknown: no OpenStackVersion,
    // nothing delivered recorded) and whatever Ready says: a node behind still serves.
    for (label, ty) in TYPES.iter().filter_map(|t| Some((t.wait_for?, t.nodeset?))) {
        if let Some(c) = set.conditions.get(ty).filter(|c| c.status != crate::condition::Status::Unknown) {
            let state = if c.is_true() { "ok".to_string() } else { c.reason.clone() };
            let line =
                format!("  {label} {}: {}", paint(&state, cell(Some(c)), colour), one_line(&c.message));
            out.push_str(&fit(&line, look.width));
            out.push('\n');
        }
    }
}

/// Of conditions listed in phase order, the one not True that matters most: the most
/// important as Ready mirrors them (lib-common's order), the earliest phase of those alike.
fn most_important<'c>(phases: impl Iterator<Item = &'c Condition>) -> Option<&'c Condition> {
    // min_by_key keeps the first of equals: the earliest phase.
    phases.filter(|c| !c.is_true()).min_by_key(|c| c.level())
}

/// One node's line: its phases, Ready (wide: Nova, the agent, since when), and its first cause.
fn node_line(n: &NodeView, nw: usize, look: Look, now: Time) -> String {
    let ready = n.conditions.get(READY);
    let mut line = format!("  {:<nw$} ", fit(&printable(&n.node), Some(nw)));
    let shown: Vec<&str> = columns(look.wide).map(|(_, ty)| node_cell(n, n.conditions.get(ty))).collect();
    cells(&mut line, &shown, look.colour);
    if look.wide {
        line.push_str(&format!("{:<SINCE_WIDTH$}", since(ready, &n.untimed, now)));
    }
    let used = visible_width(&line);
    line.push_str(&fit(&first_cause(n, look.wide), look.width.map(|w| w.saturating_sub(used))));
    let mut line = line.trim_end().to_string();
    line.push('\n');
    line
}

/// The columns `line` takes on a terminal: its characters but the colour codes (`paint`'s).
fn visible_width(line: &str) -> usize {
    let mut n = 0;
    let mut in_code = false;
    for c in line.chars() {
        match c {
            '\x1b' => in_code = true,
            'm' if in_code => in_code = false,
            _ if in_code => {}
            _ => n += 1,
        }
    }
    n
}

/// A not-ready node's first cause, on one line: the blocking service, its reason and why in
/// short (the failed task's message when a run gave one, else the condition's); wide, the
/// condition's whole message. The phase is the one the NodeSet's header names
/// (`most_important`), so header and row agree. Nothing for a ready node.
pub fn first_cause(n: &NodeView, wide: bool) -> String {
    let cause = phase_cause(n, wide);
    // A warning the table says is named on any node, ready or not (the agent's credential
    // about to expire: the Lease it can no longer renew turns the agent's word Unknown next).
    let warnings = TYPES.iter().filter(|t| t.warns).filter_map(|t| t.node).filter_map(|ty| {
        let c = n.conditions.get(ty).filter(|c| c.is_true())?;
        // The name apart from the scrubbed message: "…Credential…: value" reads to the
        // redactor as a credential's value.
        Some(format!("{ty}: {}", one_line(&c.message)))
    });
    std::iter::once(cause).chain(warnings).filter(|s| !s.is_empty()).collect::<Vec<_>>().join("; ")
}

/// A not-ready node's first cause in its phases (`first_cause` without the credential).
fn phase_cause(n: &NodeView, wide: bool) -> String {
    let ready = n.conditions.get(READY);
    if ready.is_some_and(Condition::is_true) {
        // Ready, and still behind or holding a stale input: that is what the row says.
        let held = TYPES.iter().filter_map(|t| t.wait_for.and(t.node)).filter_map(|ty| n.conditions.get(ty));
        return held
            .filter(|c| c.status == Status::False)
            .map(|c| {
                // Our own words (names and hashes, never content): printable, on one line.
                let text = c.message.clone();
                printable(&text.split_whitespace().collect::<Vec<_>>().join(" ")).into_owned()
            })
            .next()
            .unwrap_or_default();
    }
    let phase = most_important(
        types::phases()
            .filter_map(|p| p.node)
            .filter(|p| n.blocking.contains_key(p))
            .filter_map(|p| n.conditions.get(p)),
    );
    match (phase.and_then(|c| n.blocking.get(c.type_.as_str())), ready) {
        (Some(b), _) => {
            let why = if wide { b.message.as_str() } else { b.why() };
            if why.trim().is_empty() { one_line(&b.to_string()) } else { one_line(&format!("{b} — {why}")) }
        }
        (None, Some(r)) => one_line(&format!("{}: {}", r.reason, r.message)),
        (None, None) => String::new(),
    }
}

/// Text others wrote, for one line of a terminal: secrets masked, runs of white space (line
/// breaks too) one space, other control characters escaped.
fn one_line(text: &str) -> String {
    let scrubbed = crate::redact::scrub(text);
    let joined = scrubbed.split_whitespace().collect::<Vec<_>>().join(" ");
    printable(&joined).into_owned()
}

/// How many conditions a waited-for node names before it counts the rest.
const NAMED_CONDITIONS: usize = 3;

/// A node `status wait` still waits for, with the conditions not yet True: for a phase, the
/// phase and what blocks it (`edpm-compute-4 (ServicesReady: nova Retrying)`); for `Ready`,
/// each phase and node agent condition that keeps it from being True, at most three.
pub fn waiting_for(n: &NodeView, ty: &str) -> String {
    format!("{} ({})", printable(&n.node), waits(n, ty))
}

/// What a node `status wait` still waits for, without its name (`waiting_for`'s parentheses).
pub fn waits(n: &NodeView, ty: &str) -> String {
    // What a node holds or runs: its own message says which objects or versions.
    if types::wait_named(ty).is_some() {
        let said = n.conditions.get(ty).map_or_else(|| "not evaluated".to_string(), |c| c.message.clone());
        return format!("{ty}: {}", printable(&said));
    }
    let parts: Vec<&str> =
        if ty == READY { types::phases().filter_map(|p| p.node).collect() } else { vec![ty] };
    let agent =
        n.conditions.iter().filter(|c| ty == READY && is_agent_condition(&c.type_)).map(|c| c.type_.as_str());
    let mut not_true: Vec<String> = parts
        .into_iter()
        .chain(agent)
        .filter(|t| !n.conditions.get(t).is_some_and(Condition::is_true))
        .map(|t| match (n.conditions.get(t), n.blocking.get(t)) {
            (_, Some(b)) if !b.service.is_empty() => format!("{t}: {} {}", b.service, b.reason),
            (Some(c), _) => format!("{t}: {}", c.reason),
            (None, _) => format!("{t}: not evaluated"),
        })
        .map(|s| printable(&s).into_owned())
        .collect();
    if not_true.is_empty() {
        // Ready itself, as the node's own Ready says (its phases all True, say, but not yet Ready).
        not_true.push(match n.conditions.get(ty) {
            Some(c) => printable(&format!("{ty}: {}", c.reason)).into_owned(),
            None => format!("{ty}: not evaluated"),
        });
    }
    let more = not_true.len().saturating_sub(NAMED_CONDITIONS);
    not_true.truncate(NAMED_CONDITIONS);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{}{more}", not_true.join(", "))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::condition::types::{
        BAREMETAL, INFRASTRUCTURE, NODE_AGENT, NODESET_BAREMETAL, NODESET_INFRASTRUCTURE, NODESET_SERVICES,
        SERVICES,
    };
    use crate::condition::{Conditions, Time};
    use crate::readiness::api::{NodeCounts, OwnerKind};
    use crate::readiness::{Block, NodeSetView, NodeView, Owner};
    use crate::snapshot::evidence::NodeRun;

    fn env(vars: &[(&str, &str)]) -> Env {
        Env::new(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn a_terminal_is_cut_to_its_width_and_coloured_and_a_pipe_is_whole_and_plain() {
        let look =
            |vars: &[(&str, &str)], terminal, columns, wide| Look::of(&env(vars), terminal, columns, wide);
        // Piped: whole and plain, whatever COLUMNS says (a shell exports it to every child).
        assert_eq!(
            look(&[("COLUMNS", "100")], false, None, false),
            Look { width: None, colour: false, wide: false }
        );
        // A terminal: COLUMNS, else its own width, else 80; never narrower than the columns.
        assert_eq!(look(&[("COLUMNS", "100")], true, Some(150), false).width, Some(100));
        assert_eq!(look(&[], true, Some(150), false).width, Some(150));
        assert_eq!(look(&[], true, None, false).width, Some(DEFAULT_WIDTH));
        assert_eq!(look(&[("COLUMNS", "20")], true, None, false).width, Some(MIN_WIDTH));
        assert_eq!(look(&[("COLUMNS", "wide")], true, None, false).width, Some(DEFAULT_WIDTH));
        assert!(look(&[], true, None, false).colour);
        // NO_COLOR, set to anything, turns colour off; an empty one is unset.
        assert!(!look(&[("NO_COLOR", "1")], true, None, false).colour);
        assert!(look(&[("NO_COLOR", "")], true, None, false).colour);
        // Tests stand for a terminal without one.
        assert_eq!(
            look(&[("EDPM_AGENT_TERMINAL", "1"), ("COLUMNS", "80")], false, None, false),
            Look { width: Some(80), colour: true, wide: false }
        );
        // Wide is whole, on a terminal too.
        assert_eq!(
            look(&[("COLUMNS", "80")], true, None, true),
            Look { width: None, colour: true, wide: true }
        );
    }

    #[test]
    fn ages_read_as_kubectl_says_them() {
        let at = |s: i64| age(Time(1_000_000), Time(1_000_000 - s));
        assert_eq!(
            [at(0), at(59), at(119), at(125), at(599), at(600)],
            ["0s", "59s", "119s", "2m5s", "9m59s", "10m"]
        );
        assert_eq!([at(3 * 3600), at(5 * 3600 + 60), at(30 * 3600)], ["3h0m", "5h1m", "30h"]);
        assert_eq!([at(3 * 86400 + 7200), at(22 * 86400)], ["3d2h", "22d"]);
        // A time ahead of the clock (skew) is no negative age.
        assert_eq!(age(Time(10), Time(20)), "0s");
    }

    /// A node of NodeSet `ns` whose services phase `c` blocks with `b`.
    fn blocked(c: Condition, b: Option<Block>) -> NodeView {
        let mut n = hostile("x").nodes.remove(0);
        n.node = "edpm-compute-5".into();
        n.nodeset = "ns".into();
        let ready = Condition { type_: READY.into(), ..c.clone() };
        n.conditions =
            Conditions(vec![ready, Condition::true_(BAREMETAL, ""), Condition::true_(INFRASTRUCTURE, ""), c]);
        n.blocking = b.into_iter().map(|b| (SERVICES, b)).collect();
        n.untimed = BTreeSet::new();
        n
    }

    /// `n` and its NodeSet.
    fn one(n: NodeView) -> Readiness {
        let mut set = hostile("x").nodesets.remove(0);
        set.name = n.nodeset.clone();
        Readiness { nodes: vec![n], nodesets: vec![set] }
    }

    #[test]
    fn colour_codes_take_no_width_and_a_cut_ends_the_colour() {
        let painted = format!("  inputs {}: 7/10 nodes", paint("SecretsStale", "warn", true));
        assert_eq!(visible_width(&painted), "  inputs SecretsStale: 7/10 nodes".chars().count());
        // Fits as it is: kept whole, codes and all.
        assert_eq!(fit_visible(&painted, Some(40)), painted);
        let cut = fit_visible(&painted, Some(14));
        assert_eq!(visible_width(&cut), 14, "{cut:?}");
        assert!(cut.ends_with("\x1b[0m…"), "{cut:?}");
        assert_eq!(fit_visible("plain text", Some(6)), "plain…");
    }

    #[test]
    fn a_row_says_wait_only_while_a_deployment_is_on_the_node() {
        let c = Condition::because(SERVICES, &crate::condition::reasons::NOT_DEPLOYED, "0/5");
        let mut n = blocked(c.clone(), None);
        assert_eq!(node_cell(&n, Some(&c)), "todo");
        n.conditions.set(
            Condition::because(
                types::RECONCILING,
                &crate::condition::reasons::DEPLOYING,
                "Deployment d is running nova",
            ),
            Time(0),
        );
        assert_eq!(node_cell(&n, Some(&c)), "wait");
        assert!(
            explain(&n).ends_with("`status wait --node edpm-compute-5 --phase ready`\n"),
            "{}",
            explain(&n)
        );
    }

    fn host_failed() -> NodeView {
        let c = Condition::because(
            SERVICES,
            &crate::condition::reasons::HOST_FAILED,
            "4/5 OpenStack services deployed; nova: …",
        );
        let b = Block {
            service: "nova".into(),
            reason: "HostFailed".into(),
            message: "nova failed on this host in job nova-d (Deployment d): Deploy nova (main.yml:1): rc 125\nline two password=hunter2".into(),
            cause: Some("Deploy nova (main.yml:1): rc 125\nline two password=hunter2".into()),
        };
        blocked(c, Some(b))
    }

    #[test]
    fn a_not_ready_nodes_row_says_its_first_cause_on_one_line_without_secrets() {
        let n = host_failed();
        let short = first_cause(&n, false);
        assert!(
            short.starts_with("nova: HostFailed — Deploy nova (main.yml:1): rc 125 line two password="),
            "{short}"
        );
        assert!(!short.contains("hunter2") && !short.contains('\n'), "{short}");
        // Wide: the condition's whole message.
        let wide = first_cause(&n, true);
        assert!(
            wide.starts_with(
                "nova: HostFailed — nova failed on this host in job nova-d (Deployment d): Deploy"
            ),
            "{wide}"
        );
        // No failed task: the condition's message is the cause.
        let mut plain = n.clone();
        plain.blocking.get_mut(SERVICES).unwrap().cause = None;
        assert!(first_cause(&plain, false).starts_with("nova: HostFailed — nova failed on this host"));
        // A ready node has none.
        let ok = blocked(Condition::true_(SERVICES, ""), None);
        assert_eq!(first_cause(&ok, false), "");
    }

    #[test]
    fn rows_fit_the_width_on_a_terminal_and_are_whole_otherwise() {
        let r = one(host_failed());
        let f = Filter::default();
        for width in [60, 80, 200] {
            let look = Look { width: Some(width), colour: true, wide: false };
            let out = table(&r, &f, look, Time(0));
            for line in out.lines() {
                assert!(visible_width(line) <= width, "{width}: {line}");
            }
            assert!(out.contains("nova: HostFailed — De"), "{out}");
        }
        let whole = table(&r, &f, Look { width: None, colour: false, wide: false }, Time(0));
        assert!(!whole.contains('…') && whole.contains("rc 125 line two password="), "{whole}");
    }

    #[test]
    fn since_is_the_conditions_own_time_or_unknown_never_the_clock() {
        let mut n = host_failed();
        n.conditions.0[0].last_transition_time = Time(1_000_000 - 3 * 86400);
        let r = one(n.clone());
        let wide = Look { width: None, colour: false, wide: true };
        let out = table(&r, &Filter::default(), wide, Time(1_000_000));
        assert!(out.contains(" 3d0h "), "{out}");
        n.untimed.insert(READY.to_string());
        let r = one(n.clone());
        let out = table(&r, &Filter::default(), wide, Time(1_000_000));
        // SINCE unknown: `-` before the reason (after the VERSION and INPUTS cells).
        assert!(out.contains(" -      nova"), "{out}");
        assert!(explain(&n).contains("Ready: False/Error HostFailed since unknown\n"), "{}", explain(&n));
        let json = to_json(&r, &Filter::default());
        assert_eq!(json["nodes"][0]["conditions"][0]["lastTransitionTime"], Value::Null);
        assert!(json["nodes"][0]["conditions"][1]["lastTransitionTime"].is_string());
    }

    #[test]
    fn a_long_text_said_again_is_named_by_number() {
        let long = "Deploy nova (edpm_nova/tasks/install.yml:31): non-zero return code (rc 125)";
        let body = format!("a: {long}\nb: x {long} y\nc: short\nc: short\n");
        let out = refer_once(&body, [long, "short", long].into_iter());
        assert_eq!(
            out,
            format!(
                "Messages (named below by number):\n    [1] {long}\na: [1]\nb: x [1] y\nc: short\nc: short\n"
            )
        );
        // Said once, it stays in place.
        assert_eq!(
            refer_once(
                "a: once and long enough to be worth a number\n",
                ["once and long enough to be worth a number"].into_iter()
            ),
            "a: once and long enough to be worth a number\n"
        );
    }

    #[test]
    fn a_wait_names_the_conditions_it_waits_for() {
        let n = host_failed();
        assert_eq!(waiting_for(&n, SERVICES), "edpm-compute-5 (ServicesReady: nova HostFailed)");
        assert_eq!(waiting_for(&n, READY), "edpm-compute-5 (ServicesReady: nova HostFailed)");
        let mut agent = n.clone();
        agent.conditions.0.push(Condition::because(
            NODE_AGENT,
            &crate::condition::reasons::AGENT_LEASE_MISSING,
            "",
        ));
        assert_eq!(
            waiting_for(&agent, READY),
            "edpm-compute-5 (ServicesReady: nova HostFailed, NodeAgentReady: AgentLeaseMissing)"
        );
        // Bounded: three, then how many more.
        let mut many = agent.clone();
        for c in &mut many.conditions.0 {
            if c.type_ == BAREMETAL || c.type_ == INFRASTRUCTURE {
                *c = Condition::because(&c.type_, &crate::condition::reasons::NOT_DEPLOYED, "");
            }
        }
        assert_eq!(
            waiting_for(&many, READY),
            "edpm-compute-5 (BaremetalProvisionReady: NotDeployed, InfrastructureReady: NotDeployed, ServicesReady: nova HostFailed and 1 more)"
        );
    }

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
            blocking: [(
                SERVICES,
                Block { service: t.into(), reason: t.into(), message: t.into(), cause: Some(t.into()) },
            )]
            .into_iter()
            .collect(),
            runs: vec![NodeRun {
                deployment: t.into(),
                service: t.into(),
                job: t.into(),
                attempt: 1,
                result: t.into(),
                finished: Some(t.into()),
                failed_task: Some(t.into()),
                pod: Some(t.into()),
                note: Some(t.into()),
            }],
            deployed: Default::default(),
            delivered: Vec::new(),
            behind: None,
            untimed: BTreeSet::new(),
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
            untimed: [READY.to_string()].into_iter().collect(),
        };
        Readiness { nodes: vec![node], nodesets: vec![set] }
    }

    /// The text without its colour codes.
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
            let plain = Look { width: Some(80), colour: false, wide: false };
            let wide = Look { width: None, colour: false, wide: true };
            let outputs = [
                table(&r, &f, plain, Time(9)),
                table(&r, &f, wide, Time(9)),
                explain(&r.nodes[0]),
                explain_nodeset(&r.nodesets[0]),
                waiting_for(&r.nodes[0], READY),
            ];
            for out in outputs {
                proptest::prop_assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{:?}", out);
            }
            // Coloured, the only escapes are the colour codes themselves.
            let coloured = table(&r, &f, Look { colour: true, ..plain }, Time(9));
            let stripped = strip_paint(&coloured, true);
            proptest::prop_assert!(!stripped.chars().any(|c| c.is_control() && c != '\n'), "{:?}", stripped);
        }
    }
}
