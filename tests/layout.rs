//! The architecture's boundaries (ARCHITECTURE.md, "Invariants"). The crate boundaries hold
//! most of them for the compiler: `edpm-core` has no I/O dependency at all, which the first
//! test checks on cargo's own dependency tree. What a crate boundary cannot say is checked on
//! the source text:
//! - the core does no I/O and reads no clock with what `std` offers (`std::fs`, the clock);
//! - only `edpm-io`'s `k8s`, the controller's `k8s` and the node agent's `api` talk to the
//!   Kubernetes API server; only `edpm-io`'s `openstack` to OpenStack's APIs;
//! - only `edpm_io::process` spawns or signals processes (bounded runs: the node agent's queries,
//!   exec credential plugins; the play's supervision; the hand-over to another program);
//! - no crate's modules import each other in a cycle.
//!
//! Whole files are read; only the items marked `#[cfg(test)]` (the test module, inline or in
//! its own file) and comments are left out: tests may read fixtures.

use std::path::{Path, PathBuf};

use crate::util::repo;

/// kube's client side.
const KUBE_CLIENT: &[&str] = &[
    "kube::Client",
    "kube::Api",
    "kube::api::",
    "kube::client",
    "kube::config",
    "kube::Config",
    "kube::runtime",
];

/// What the core must not touch even though `std` offers it: I/O, processes, the network, the
/// clock, the environment, threads.
const IMPURE: &[&str] = &[
    "std::fs",
    // std::net's address types are plain data; its sockets are not.
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "ToSocketAddrs",
    "std::process",
    "std::env",
    "std::io::stdin",
    "std::io::stdout",
    "std::io::stderr",
    "std::thread",
    "SystemTime::now",
    "Instant::now",
    "Timestamp::now",
    "Zoned::now",
];

/// Crates whose presence in the core's normal dependency closure would mean I/O.
const IO_CRATES: &[&str] = &[
    "tokio",
    "mio",
    "hyper",
    "hyper-util",
    "reqwest",
    "kube-client",
    "kube-runtime",
    "kube",
    "libc",
    "sd-notify",
    "tracing-journald",
    "fs-err",
    "tempfile",
    "rustls",
    "socket2",
];

/// The crates of the workspace whose sources are checked: (folder of `src`, crate).
const CRATES: &[(&str, &str)] = &[
    ("crates/edpm-core/src", "edpm-core"),
    ("crates/edpm-io/src", "edpm-io"),
    ("crates/edpm-controller/src", "edpm-controller"),
    ("crates/edpm-runner/src", "edpm-runner"),
    ("crates/edpm-node/src", "edpm-node"),
    ("src", "edpm-agent"),
];

/// A source file of a crate: its crate, its path below the crate's `src/`, and its code
/// without test items and comments.
struct Source {
    krate: &'static str,
    rel: PathBuf,
    code: String,
}

impl Source {
    fn is_core(&self) -> bool {
        self.krate == "edpm-core"
    }

    /// The path from the repository's root, as failures name it.
    fn shown(&self) -> String {
        let dir = CRATES.iter().find(|(_, k)| *k == self.krate).map_or("src", |(d, _)| d);
        format!("{dir}/{}", self.rel.display())
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every source file of the checked crates but those that are test modules of their own
/// (`#[cfg(test)] mod x;`).
fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    for (dir, krate) in CRATES {
        let src = repo().join(dir);
        let mut files = Vec::new();
        walk(&src, &mut files);
        files.sort();
        let mut test_files = Vec::new();
        let mut these = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            let (code, test_mods) = strip(&text);
            let parent = if f.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs") {
                f.parent().unwrap().to_path_buf()
            } else {
                f.with_extension("")
            };
            for m in test_mods {
                test_files.push(parent.join(format!("{m}.rs")));
                test_files.push(parent.join(&m).join("mod.rs"));
            }
            let rel = f.strip_prefix(&src).unwrap().to_path_buf();
            these.push(Source { krate, rel, code });
        }
        these.retain(|s| !test_files.contains(&src.join(&s.rel)));
        out.extend(these);
    }
    out
}

/// The text with comments and every `#[cfg(test)]` item removed (strings are kept), and the
/// names of the test modules that live in files of their own.
fn strip(text: &str) -> (String, Vec<String>) {
    let b = text.as_bytes();
    let mut code = String::with_capacity(text.len());
    let mut external = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if text[i..].starts_with("#[cfg(test)]") {
            let item_start = i;
            i += "#[cfg(test)]".len();
            // The item that follows: up to its `;` or its matching `}`, whichever comes first.
            let start = i;
            let mut depth = 0usize;
            while i < b.len() {
                let (next, tok) = token(text, i);
                match tok {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            i = next;
                            break;
                        }
                    }
                    b';' if depth == 0 => {
                        let item = text[start..i].trim();
                        if let Some(name) = item.strip_prefix("mod ").or_else(|| {
                            item.strip_prefix("pub(crate) mod ").or_else(|| item.strip_prefix("pub mod "))
                        }) {
                            external.push(name.trim().to_string());
                        }
                        i = next;
                        break;
                    }
                    _ => {}
                }
                i = next;
            }
            // Keep the line breaks, so lines named in failures are the file's own.
            code.extend(text[item_start..i].chars().filter(|c| *c == '\n'));
            continue;
        }
        let (next, tok) = token(text, i);
        if tok != 0 {
            code.push_str(&text[i..next]);
        } else {
            // A comment: keep its line breaks.
            code.extend(text[i..next].chars().filter(|c| *c == '\n'));
        }
        i = next;
    }
    (code, external)
}

/// One lexical step from `i`: `(end, kind)`, where kind is the byte for `{ } ;`, 0 for a
/// comment, and 1 for anything else (a string, char or lifetime counts as one step).
fn token(text: &str, i: usize) -> (usize, u8) {
    let b = text.as_bytes();
    let rest = &text[i..];
    if rest.starts_with("//") {
        return (i + rest.find('\n').unwrap_or(rest.len()), 0);
    }
    if rest.starts_with("/*") {
        let mut depth = 0;
        let mut j = i;
        while j < b.len() {
            if text[j..].starts_with("/*") {
                depth += 1;
                j += 2;
            } else if text[j..].starts_with("*/") {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    break;
                }
            } else {
                j += 1;
            }
        }
        return (j, 0);
    }
    let raw = rest.strip_prefix("br").or_else(|| rest.strip_prefix('r'));
    if let Some(r) = raw
        && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
    {
        let hashes = r.len() - r.trim_start_matches('#').len();
        if r[hashes..].starts_with('"') {
            let open = i + (rest.len() - r.len()) + hashes + 1;
            let close = format!("\"{}", "#".repeat(hashes));
            let end = text[open..].find(&close).map_or(b.len(), |k| open + k + close.len());
            return (end, 1);
        }
    }
    match b[i] {
        b'"' => {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1, 1)
        }
        b'\'' => {
            // A char literal ('x', '\n', '\u{..}', '{') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let end = text[i + 2..].find('\'').map_or(b.len(), |k| i + 2 + k + 1);
                (end, 1)
            } else {
                let c = text[i + 1..].chars().next().map_or(0, char::len_utf8);
                if b.get(i + 1 + c) == Some(&b'\'') { (i + 2 + c, 1) } else { (i + 1, 1) }
            }
        }
        b'{' | b'}' | b';' => (i + 1, b[i]),
        _ => (i + text[i..].chars().next().map_or(1, char::len_utf8), 1),
    }
}

#[test]
fn stripping_leaves_out_only_test_items_and_comments() {
    let text = r##"use a; // std::fs here is a comment
#[cfg(test)]
fn helper() { let s = "}"; let c = '}'; }
fn kept<'a>(x: &'a str) -> &'a str { let r = r#"{"#; x }
#[cfg(test)]
mod tests { fn t() { std::fs::read("x"); } }
fn after() { /* std::fs */ }
#[cfg(test)]
mod more;
"##;
    let (code, external) = strip(text);
    assert!(!code.contains("std::fs"), "{code}");
    assert!(!code.contains("helper"), "{code}");
    assert!(code.contains("fn kept") && code.contains("fn after"), "{code}");
    assert_eq!(external, ["more"]);
}

#[test]
fn the_whole_of_every_file_is_read() {
    // The files where the first `#[cfg(test)]` used to stop the reading are read to the end.
    let all = sources();
    let resolve = all.iter().find(|s| s.is_core() && s.rel == Path::new("yaml/resolve.rs")).unwrap();
    let lines = resolve.code.lines().count();
    let total =
        std::fs::read_to_string(repo().join("crates/edpm-core/src/yaml/resolve.rs")).unwrap().lines().count();
    assert!(lines > total / 2, "yaml/resolve.rs: only {lines} of {total} lines read");
    assert!(all.iter().any(Source::is_core) && all.iter().any(|s| !s.is_core()));
    assert!(
        !all.iter().any(|s| s.is_core() && s.rel == Path::new("readiness/tests.rs")),
        "a test module's own file is left out"
    );
}

/// cargo's own answer: the crates `package` is built with, test-only ones left out, and the
/// tree as cargo printed it.
fn normal_closure(package: &str) -> (std::collections::BTreeSet<String>, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(repo())
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none", "--offline", "--locked"])
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    let names = tree.lines().filter_map(|l| l.split_whitespace().next()).map(String::from).collect();
    (names, tree)
}

/// The crates of the programs: what each links of the workspace is the core, the shared I/O
/// and, for the CLI only, the programs it runs as its commands (`status controller`, `run`);
/// never the node agent, a program of its own (`edpm-agent node` hands its process over to it).
const PROGRAMS: &[(&str, &[&str])] = &[
    ("edpm-agent", &["edpm-core", "edpm-io", "edpm-controller", "edpm-runner"]),
    ("edpm-controller", &["edpm-core", "edpm-io"]),
    ("edpm-runner", &["edpm-core", "edpm-io"]),
    ("edpm-node", &["edpm-core", "edpm-io"]),
];

#[test]
fn no_programs_crate_depends_on_another_programs() {
    let ours =
        ["edpm-agent", "edpm-core", "edpm-io", "edpm-controller", "edpm-runner", "edpm-node", "edpm-bench"];
    for (program, may) in PROGRAMS {
        let (names, tree) = normal_closure(program);
        let linked: Vec<&String> = names
            .iter()
            .filter(|n| ours.contains(&n.as_str()) && n != program && !may.contains(&n.as_str()))
            .collect();
        assert!(linked.is_empty(), "{program} links {linked:?}, another program's crate:\n{tree}");
    }
}

#[test]
fn the_core_crate_has_no_io_dependency() {
    let (names, tree) = normal_closure("edpm-core");
    let names: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
    assert!(names.contains("edpm-core") && names.contains("serde"), "{tree}");
    let io: Vec<&&str> = IO_CRATES.iter().filter(|c| names.contains(**c)).collect();
    assert!(io.is_empty(), "edpm-core depends on I/O crates {io:?}:\n{tree}");
}

#[test]
fn the_core_does_no_io_through_std() {
    let mut problems = Vec::new();
    for s in sources().iter().filter(|s| s.is_core()) {
        for word in IMPURE.iter().chain(KUBE_CLIENT) {
            if let Some(n) = s.code.lines().position(|l| l.contains(word)) {
                problems.push(format!("{}:{}: uses {word}", s.shown(), n + 1));
            }
        }
    }
    assert!(problems.is_empty(), "the pure core reaches outside:\n{}", problems.join("\n"));
}

#[test]
fn only_k8s_talks_to_the_api_server_and_only_openstack_to_openstack() {
    for s in sources() {
        let k8s = match s.krate {
            "edpm-io" | "edpm-controller" => s.rel.starts_with("k8s"),
            "edpm-node" => s.rel == Path::new("api.rs"),
            _ => false,
        };
        let openstack = s.krate == "edpm-io" && s.rel.starts_with("openstack");
        if !k8s {
            for p in KUBE_CLIENT {
                assert!(
                    !s.code.contains(p),
                    "{} uses {p}; only crates/edpm-io/src/k8s, crates/edpm-controller/src/k8s and crates/edpm-node/src/api.rs talk to the API server",
                    s.shown()
                );
            }
        }
        if !openstack {
            assert!(
                !s.code.contains("reqwest"),
                "{} uses reqwest; only crates/edpm-io/src/openstack talks to OpenStack",
                s.shown()
            );
        }
    }
}

#[test]
fn only_io_process_spawns_processes() {
    for s in sources().iter().filter(|s| !(s.krate == "edpm-io" && s.rel.starts_with("process"))) {
        for p in [
            "Command::new",
            "process::Command",
            ".exec()",
            "CommandExt",
            "libc::kill",
            "libc::fork",
            "libc::exec",
            "libc::posix_spawn",
            "libc::waitpid",
            "libc::waitid",
        ] {
            assert!(
                !s.code.contains(p),
                "{} uses {p}; only crates/edpm-io/src/process/ (edpm_io::process: bounded runs, the play's supervision, the hand-over) spawns, signals or reaps processes",
                s.shown()
            );
        }
    }
}

#[test]
fn a_kinds_plural_is_spelled_in_the_kinds_table_only() {
    // A kind is added once (`edpm_core::kinds`): a plural spelled elsewhere in product code
    // (an RBAC rule, a resource path) goes stale when the table changes.
    let mut spelled_elsewhere = Vec::new();
    for s in sources().iter().filter(|s| !(s.is_core() && s.rel == Path::new("kinds.rs"))) {
        for k in edpm_core::kinds::KINDS {
            for spelled in [format!("\"{}\"", k.plural), format!("\"{}/", k.plural)] {
                // The redactor's words are key names in a user's data (`secrets:`), not a
                // resource.
                let word = s.shown() == "crates/edpm-core/src/redact.rs" && spelled == "\"secrets\"";
                if s.code.contains(&spelled) && !word {
                    spelled_elsewhere.push(format!("{} spells {}'s plural {spelled}", s.shown(), k.kind));
                }
            }
        }
    }
    assert!(
        spelled_elsewhere.is_empty(),
        "take these from edpm_core::kinds::KINDS:\n{}",
        spelled_elsewhere.join("\n")
    );
}

/// The module a file belongs to, for its crate's dependency graph: its first folder or file
/// under `src/` (`snapshot/refs.rs` → `snapshot`).
fn graph_module(rel: &Path) -> String {
    rel.components()
        .next()
        .map(|c| c.as_os_str().to_str().unwrap().trim_end_matches(".rs").to_string())
        .unwrap_or_default()
}

/// The modules a file's code names through `crate::`, at `graph_module`'s granularity.
fn named_modules(code: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && (code.as_bytes()[i - 1].is_ascii_alphanumeric() || code.as_bytes()[i - 1] == b'_') {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        let word =
            |s: &str| s.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("").to_string();
        let first = word(rest);
        if !first.is_empty() {
            out.insert(first);
        }
    }
    out
}

#[test]
fn no_crate_has_a_module_cycle() {
    use std::collections::{BTreeMap, BTreeSet};
    // Depth-first search; a back edge is a cycle, reported with its path.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
        cycles: &mut Vec<String>,
    ) {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for d in graph.get(m).into_iter().flatten() {
            match state.get(d.as_str()) {
                Some(1) => {
                    let from = path.iter().position(|p| p == d).unwrap();
                    cycles.push(format!("{} → {d}", path[from..].join(" → ")));
                }
                Some(_) => {}
                None => visit(d, graph, state, path, cycles),
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
    }
    let all = sources();
    let mut cycles = Vec::new();
    let mut graphs = BTreeMap::new();
    for (_, krate) in CRATES {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let roots = [Path::new("lib.rs"), Path::new("main.rs")];
        for s in all.iter().filter(|s| s.krate == *krate && !roots.contains(&s.rel.as_path())) {
            let m = graph_module(&s.rel);
            let deps = graph.entry(m.clone()).or_default();
            deps.extend(named_modules(&s.code).into_iter().filter(|d| *d != m));
        }
        let mut state = BTreeMap::new();
        for m in graph.keys() {
            if !state.contains_key(m.as_str()) {
                let mut found = Vec::new();
                visit(m, &graph, &mut state, &mut Vec::new(), &mut found);
                cycles.extend(found.into_iter().map(|c| format!("{krate}: {c}")));
            }
        }
        graphs.insert(*krate, graph);
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
    let core = &graphs["edpm-core"];
    assert!(core["snapshot"].contains("services") && !core["services"].contains("snapshot"));
}

/// The sibling files a file of a folder module names (`super::entry::Entry`, `use super::{a,
/// b::X}`, `crate::snapshot::entry::…`): the stems among `siblings` that a path segment names.
fn named_siblings(code: &str, folder: &str, siblings: &[String]) -> std::collections::BTreeSet<String> {
    let word =
        |s: &str| s.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("").to_string();
    let mut out = std::collections::BTreeSet::new();
    let mut take = |rest: &str| {
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // A use group: every word of it followed by `::` at the group's top level.
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for part in group.split(',') {
                let w = word(part.trim());
                if part.trim().starts_with(&format!("{w}::")) {
                    out.insert(w);
                }
            }
        } else {
            let w = word(rest);
            if rest.starts_with(&format!("{w}::")) {
                out.insert(w);
            }
        }
    };
    for (i, _) in code.match_indices("super::") {
        if i > 0 && code.as_bytes()[i - 1] == b':' {
            continue; // super::super::, a parent's sibling
        }
        take(&code[i + "super::".len()..]);
    }
    let own = format!("crate::{folder}::");
    for (i, _) in code.match_indices(&own) {
        take(&code[i + own.len()..]);
    }
    out.retain(|w| siblings.contains(w));
    out
}

/// Within one folder module, no two files import each other, directly or round a circle: a
/// module's files are layered as its modules are (a circle is one file split in two).
#[test]
fn no_module_has_a_file_circle() {
    use std::collections::{BTreeMap, BTreeSet};
    let all = sources();
    let mut circles = Vec::new();
    // Folder modules: (crate, folder) → the stems of its files but mod.rs.
    let mut folders: BTreeMap<(&str, PathBuf), Vec<&Source>> = BTreeMap::new();
    for s in &all {
        let Some(parent) = s.rel.parent().filter(|p| !p.as_os_str().is_empty()) else { continue };
        if s.rel.file_name().is_some_and(|n| n != "mod.rs") {
            folders.entry((s.krate, parent.to_path_buf())).or_default().push(s);
        }
    }
    for ((krate, folder), files) in &folders {
        let stem = |s: &Source| s.rel.file_stem().unwrap().to_str().unwrap().to_string();
        let siblings: Vec<String> = files.iter().map(|s| stem(s)).collect();
        let module = folder.to_str().unwrap().replace('/', "::");
        let graph: BTreeMap<String, BTreeSet<String>> = files
            .iter()
            .map(|s| {
                let mut deps = named_siblings(&s.code, &module, &siblings);
                deps.remove(&stem(s));
                (stem(s), deps)
            })
            .collect();
        // A circle exists when a file reaches itself.
        for start in graph.keys() {
            let (mut seen, mut todo) = (BTreeSet::new(), vec![start.clone()]);
            while let Some(f) = todo.pop() {
                for d in graph.get(&f).into_iter().flatten() {
                    if d == start {
                        circles.push(format!(
                            "{krate}: {}/{start}.rs reaches itself (through {f}.rs)",
                            folder.display()
                        ));
                    } else if seen.insert(d.clone()) {
                        todo.push(d.clone());
                    }
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "file circles (move what both need into one of them, or a third file):\n{}",
        circles.join("\n")
    );
}

#[test]
fn named_siblings_reads_paths_and_use_groups() {
    let sib = |code: &str| {
        named_siblings(code, "snapshot", &["entry".into(), "classify".into(), "refs".into()])
            .into_iter()
            .collect::<Vec<_>>()
    };
    assert_eq!(sib("use super::entry::Entry;"), ["entry"]);
    assert_eq!(
        sib("use super::{SnapshotError, classify::UnknownKind, entry::Entry};"),
        ["classify", "entry"]
    );
    assert_eq!(sib("let x = crate::snapshot::refs::references(s);"), ["refs"]);
    // A name of the parent, a parent's sibling and an unknown file are no sibling.
    assert!(sib("use super::SnapshotError; use super::super::entry::X; use super::other::Y;").is_empty());
}
