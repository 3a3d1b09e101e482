//! Which hosts a Deployment's `ansibleLimit` selects, as Ansible reads `--limit`
//! (ansible-core's `lib/ansible/inventory/manager.py`: `split_host_pattern`, `subset`,
//! `_evaluate_patterns`, `_match_one_pattern`, `_split_subscript`, `_apply_subscript`,
//! `_enumerate_matches`), on the inventory edpm-agent builds from the same sources
//! ([`Shape`], the groups and hosts of `edpm-agent inventory --list` in the order Ansible
//! holds them). Proven against the real `ansible-inventory --limit … --list`
//! (`tests/limit_diff.rs`).
//!
//! The way there, step by step:
//! 1. upstream puts `--limit <ansibleLimit>` into `RUNNER_CMDLINE`, which ansible-runner (and
//!    `edpm-agent run`) splits with Python's `shlex.split`: one word is the limit, none is no
//!    limit, more (or a word starting with `-`) is a command line ansible-playbook refuses;
//! 2. the limit is split into patterns at `,`, else at `:` and whitespace unless the whole is
//!    one address (`host:22`, an IPv6 address);
//! 3. each pattern is a host name (taken as it is, first), or `all`, a shell glob
//!    ([`glob::Glob`]), a `~regex` (Python's `re.match`, [`pyre::PyRegex`]) or a group name,
//!    any but a regex with a subscript (`[0]`, `[1:3]`); `&` intersects, `!` excludes, in
//!    that order after the others; a glob, a regex, or a name that is no group also matches
//!    host names; a limit of only `&`/`!` patterns starts from `all`.
//!
//! What cannot be evaluated exactly (`@file`, a regex outside the common ground of Python and
//! the `regex` crate, a name Ansible could read as one address or as several patterns, a
//! subscript past the hosts, which Ansible refuses) makes the selection Unknown with the
//! reason, never "all".

pub mod glob;
pub mod pyre;
mod split;

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::model::Model;

pub use split::split_host_pattern;

/// The inventory as Ansible holds it after reading edpm-agent's `--list` (or its static JSON):
/// groups in the order Ansible created them (`all`, `ungrouped`, then `all`'s children, which
/// edpm-agent lists sorted), each group's hosts as `Group.get_hosts()` gives them, and every
/// host in the order first seen.
#[derive(Debug, Clone, Default)]
pub struct Shape {
    hosts: Vec<String>,
    index: HashMap<String, usize>,
    groups: Vec<(String, Vec<usize>)>,
}

impl Shape {
    /// The inventory of `model`'s groups: each NodeSet (or Role) and each Nova cell, holding
    /// their members' inventory hostnames (`inventory::build`'s groups).
    pub fn of(model: &Model) -> Shape {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for g in &model.groups {
            for m in &g.members {
                groups.entry(g.name.as_str()).or_default().push(m.inventory_hostname());
                if let Some(c) = m.cell(g) {
                    groups.entry(c.name.as_str()).or_default().push(m.inventory_hostname());
                }
            }
            groups.entry(g.name.as_str()).or_default();
        }
        Shape::new(groups.into_iter().map(|(name, hosts)| (name.to_string(), hosts)).collect())
    }

    /// The shape of an inventory whose `--list` holds `groups` (besides `all` and
    /// `ungrouped`), each with its hosts; both are sorted here as edpm-agent writes them.
    pub fn new(mut groups: Vec<(String, Vec<&str>)>) -> Shape {
        groups.retain(|(name, _)| name != "all" && name != "ungrouped");
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let mut shape = Shape::default();
        let mut all = Vec::new();
        let mut own = Vec::new();
        for (name, mut hosts) in groups {
            hosts.sort_unstable();
            hosts.dedup();
            let idx: Vec<usize> = hosts.into_iter().map(|h| shape.host(h)).collect();
            for &i in &idx {
                if !all.contains(&i) {
                    all.push(i);
                }
            }
            own.push((name, idx));
        }
        shape.groups.push(("all".to_string(), all));
        shape.groups.push(("ungrouped".to_string(), Vec::new()));
        shape.groups.extend(own);
        shape
    }

    fn host(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.hosts.push(name.to_string());
        self.index.insert(name.to_string(), self.hosts.len() - 1);
        self.hosts.len() - 1
    }
}

/// What a Deployment's `ansibleLimit` selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coverage {
    /// No limit (none, empty, or only empty patterns): every host.
    All,
    /// These inventory hostnames.
    Hosts(HashSet<String>),
    /// It cannot be told exactly: why.
    Unknown(String),
}

/// Whether a Deployment covered a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Covers<'a> {
    Yes,
    No,
    /// Its `ansibleLimit` cannot be evaluated: why.
    Unknown(&'a str),
}

impl Coverage {
    /// Whether the host of inventory hostname `host` is selected.
    pub fn covers(&self, host: &str) -> Covers<'_> {
        match self {
            Coverage::All => Covers::Yes,
            Coverage::Hosts(h) if h.contains(host) => Covers::Yes,
            Coverage::Hosts(_) => Covers::No,
            Coverage::Unknown(why) => Covers::Unknown(why),
        }
    }
}

/// Every Deployment's coverage, in the order of the snapshot's Deployments, computed once
/// per evaluation (a limit is matched against every host of the inventory).
#[derive(Debug, Clone, Default)]
pub struct Limits(Vec<Option<Coverage>>);

impl Limits {
    pub fn new(evidence: &crate::snapshot::evidence::Evidence, shape: &Shape) -> Limits {
        Limits(
            evidence
                .deployments
                .iter()
                .map(|d| d.spec.ansible_limit.as_deref().map(|l| coverage(l, shape)))
                .collect(),
        )
    }

    /// The coverage of the snapshot's `i`-th Deployment; `None` when it has no `ansibleLimit`.
    pub fn of(&self, i: usize) -> Option<&Coverage> {
        self.0.get(i).and_then(Option::as_ref)
    }
}

/// What `--limit <ansible_limit>` in `RUNNER_CMDLINE` selects: the limit as ansible-runner's
/// `shlex.split` passes it, then [`subset`].
pub fn coverage(ansible_limit: &str, shape: &Shape) -> Coverage {
    let words = match crate::runner::shlex::shlex_split(ansible_limit) {
        Ok(w) => w,
        Err(e) => {
            return Coverage::Unknown(format!(
                "ansible-runner cannot split it as a command line ({e}), so the Job's ansible-playbook never ran it"
            ));
        }
    };
    match words.as_slice() {
        [] => Coverage::All,
        [one] if one.starts_with('-') => Coverage::Unknown(
            "it starts with '-', which ansible-playbook takes for an option, not the limit's value".into(),
        ),
        [one] => match subset(one, shape) {
            Ok(None) => Coverage::All,
            Ok(Some(hosts)) => Coverage::Hosts(hosts.into_iter().map(|i| shape.hosts[i].clone()).collect()),
            Err(why) => Coverage::Unknown(why),
        },
        many => Coverage::Unknown(format!(
            "it is {} words to ansible-runner's shlex, and ansible-playbook takes every one after the first for a playbook",
            many.len()
        )),
    }
}

/// The hosts `ansible-inventory --limit <limit>` keeps (`InventoryManager.subset`, then
/// `get_hosts('all')`): `None` when the limit holds no pattern (every host), else their indices;
/// `Err` with why it cannot be told exactly (or why Ansible refuses it).
pub fn subset(limit: &str, shape: &Shape) -> Result<Option<HashSet<usize>>, String> {
    let patterns = split_host_pattern(limit)?;
    if let Some(file) = patterns.iter().find(|p| p.starts_with('@')) {
        return Err(format!("{file} names a file of host names, which only the Job's pod can read"));
    }
    if patterns.is_empty() {
        return Ok(None);
    }
    Ok(Some(evaluate(&patterns, shape)?.into_iter().filter(|&i| i != IMPLICIT).collect()))
}

/// The implicit `localhost`, which Ansible makes for a pattern naming it that matched nothing:
/// no host of the inventory, but a member of the list a subscript counts.
const IMPLICIT: usize = usize::MAX;

/// `_evaluate_patterns`: the plain patterns, then the `&`, then the `!` ones.
fn evaluate(patterns: &[String], shape: &Shape) -> Result<Vec<usize>, String> {
    let mut ordered: Vec<&str> = patterns.iter().map(String::as_str).filter(|p| !p.is_empty()).collect();
    ordered.sort_by_key(|p| match p.as_bytes()[0] {
        b'&' => 1,
        b'!' => 2,
        _ => 0,
    });
    if ordered.first().is_none_or(|p| p.starts_with(['&', '!'])) {
        ordered.insert(0, "all");
    }
    let mut hosts: Vec<usize> = Vec::new();
    for p in ordered {
        // A pattern that is a host's name is that host, whatever it holds (Ansible checks it
        // before anything else, with its `&` or `!`).
        if let Some(&i) = shape.index.get(p) {
            hosts.push(i);
            continue;
        }
        let that = match_one(p, shape)?;
        match p.as_bytes()[0] {
            b'!' => hosts.retain(|h| !that.contains(h)),
            b'&' => hosts.retain(|h| that.contains(h)),
            _ => {
                let have: HashSet<usize> = hosts.iter().copied().collect();
                hosts.extend(that.into_iter().filter(|h| !have.contains(h)));
            }
        }
    }
    Ok(hosts)
}

/// `_match_one_pattern`: one pattern without its `&`/`!`, with its subscript applied.
fn match_one(pattern: &str, shape: &Shape) -> Result<Vec<usize>, String> {
    let bare = pattern.strip_prefix(['&', '!']).unwrap_or(pattern);
    if bare.is_empty() {
        return Err(format!("the pattern {pattern:?} is empty after its sign (Ansible fails on it)"));
    }
    let (expr, subscript) = if bare.starts_with('~') { (bare, None) } else { split::subscript(bare) };
    let hosts = enumerate(expr, shape)?;
    match subscript {
        None => Ok(hosts),
        Some(s) => s.apply(hosts).ok_or_else(|| {
            format!("No hosts matched the subscripted pattern '{bare}': Ansible refuses the subscript past its hosts")
        }),
    }
}

/// `_enumerate_matches`: the hosts of every group the pattern matches; and, when it matched no
/// group or is a glob or a regex, the hosts it matches by name.
fn enumerate(expr: &str, shape: &Shape) -> Result<Vec<usize>, String> {
    let matcher = Matcher::new(expr)?;
    let mut results = Vec::new();
    let mut any_group = false;
    for (name, hosts) in &shape.groups {
        if matcher.matches(name)? {
            any_group = true;
            results.extend(hosts.iter().copied());
        }
    }
    if !any_group || expr.starts_with('~') || expr.contains(['.', '?', '*', '[']) {
        for (i, name) in shape.hosts.iter().enumerate() {
            if matcher.matches(name)? {
                results.push(i);
            }
        }
    }
    if results.is_empty() && ["127.0.0.1", "localhost", "::1"].contains(&expr) {
        results.push(IMPLICIT);
    }
    Ok(results)
}

/// `_match_list`'s compiled pattern: a regex after `~`, else a shell glob.
enum Matcher {
    Glob(glob::Glob),
    Regex(pyre::PyRegex),
}

impl Matcher {
    fn new(expr: &str) -> Result<Matcher, String> {
        match expr.strip_prefix('~') {
            Some(re) => pyre::PyRegex::new(re)
                .map(Matcher::Regex)
                .map_err(|why| format!("the regular expression {expr:?} is not evaluated: {why}")),
            None => Ok(Matcher::Glob(glob::Glob::new(expr))),
        }
    }

    fn matches(&self, name: &str) -> Result<bool, String> {
        match self {
            Matcher::Glob(g) => Ok(g.matches(name)),
            Matcher::Regex(r) => {
                r.matches(name).map_err(|why| format!("the regular expression is not evaluated: {why}"))
            }
        }
    }
}

#[cfg(test)]
mod tests;
