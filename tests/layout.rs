//! The architecture's boundaries, checked on the source text (ARCHITECTURE.md, "Invariants"):
//! - a module is shell exactly when a folder named `shell` is on its path (plus `main.rs` and
//!   `bin/`); everything else under `src/` is the pure core;
//! - the pure core never names a shell module, and does no I/O and reads no clock;
//! - only `shell::k8s` talks to the Kubernetes API server, only `shell::openstack` to
//!   OpenStack's APIs. (`kube`'s `CustomResource` derive and its resource traits describe
//!   types and are pure; its client, `Api` and configuration are not.)
//! - only `runner::shell::supervise` (the play) and `shell::process` (every other program,
//!   bounded: the node agent's queries, exec credential plugins) spawn or signal processes.
//!
//! Whole files are read; only the items marked `#[cfg(test)]` (the test module, inline or in
//! its own file) and comments are left out: tests may read fixtures.

use std::path::{Path, PathBuf};

use crate::util::repo;

/// kube's client side: only `shell::k8s` may use it.
const KUBE_CLIENT: &[&str] = &[
    "kube::Client",
    "kube::Api",
    "kube::api::",
    "kube::client",
    "kube::config",
    "kube::Config",
    "kube::runtime",
];

/// What the core must not touch: I/O, processes, the network, the clock, the environment.
const IMPURE: &[&str] = &[
    "std::fs",
    "fs_err",
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
    "std::thread::sleep",
    "SystemTime::now",
    "Instant::now",
    "Utc::now",
    "Timestamp::now",
    "Zoned::now",
    "tokio",
    "reqwest",
    "tempfile",
    "libc::",
];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Layer {
    Core,
    Shell,
    /// `lib.rs`: module declarations only.
    Root,
}

/// A source file of the library or a binary: its path below `src/`, its layer, and its code
/// without test items and comments.
struct Source {
    rel: PathBuf,
    layer: Layer,
    code: String,
}

fn layer_of(rel: &Path) -> Layer {
    let parts: Vec<&str> = rel.components().map(|c| c.as_os_str().to_str().unwrap()).collect();
    if parts == ["lib.rs"] {
        Layer::Root
    } else if parts[0] == "main.rs" || parts[0] == "bin" || parts.contains(&"shell") {
        Layer::Shell
    } else {
        Layer::Core
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

/// Every source file but those that are test modules of their own (`#[cfg(test)] mod x;`).
fn sources() -> Vec<Source> {
    let src = repo().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    let mut test_files = Vec::new();
    let mut out = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let (code, test_mods) = strip(&text);
        let dir = if f.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs") {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for m in test_mods {
            test_files.push(dir.join(format!("{m}.rs")));
            test_files.push(dir.join(&m).join("mod.rs"));
        }
        let rel = f.strip_prefix(&src).unwrap().to_path_buf();
        out.push(Source { layer: layer_of(&rel), rel, code });
    }
    out.retain(|s| !test_files.contains(&src.join(&s.rel)));
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
    let resolve = all.iter().find(|s| s.rel == Path::new("yaml/resolve.rs")).unwrap();
    let lines = resolve.code.lines().count();
    let total = std::fs::read_to_string(repo().join("src/yaml/resolve.rs")).unwrap().lines().count();
    assert!(lines > total / 2, "yaml/resolve.rs: only {lines} of {total} lines read");
    assert!(all.iter().any(|s| s.layer == Layer::Core) && all.iter().any(|s| s.layer == Layer::Shell));
    assert!(
        !all.iter().any(|s| s.rel == Path::new("readiness/tests.rs")),
        "a test module's own file is left out"
    );
}

#[test]
fn the_core_never_names_the_shell_and_does_no_io() {
    let mut problems = Vec::new();
    for s in sources().iter().filter(|s| s.layer == Layer::Core) {
        // A core module may declare its shell half (`mod shell;`), never use it.
        for pat in ["shell::", "shell}", "shell;", "shell,"] {
            for (n, line) in s.code.lines().enumerate() {
                let declares = line.trim_start().starts_with("pub(crate) mod shell;")
                    || line.trim_start().starts_with("mod shell;")
                    || line.trim_start().starts_with("pub mod shell;");
                if line.contains(pat) && !declares {
                    problems.push(format!(
                        "src/{}:{}: names a shell module: {}",
                        s.rel.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
        for word in IMPURE.iter().chain(KUBE_CLIENT) {
            if let Some(n) = s.code.lines().position(|l| l.contains(word)) {
                problems.push(format!("src/{}:{}: uses {word}", s.rel.display(), n + 1));
            }
        }
    }
    problems.dedup();
    assert!(problems.is_empty(), "the pure core reaches outside:\n{}", problems.join("\n"));
}

#[test]
fn only_k8s_talks_to_the_api_server_and_only_openstack_to_openstack() {
    for s in sources() {
        let k8s = s.rel.starts_with("shell/k8s");
        let openstack = s.rel == Path::new("shell/openstack.rs") || s.rel.starts_with("shell/openstack/");
        if !k8s {
            for p in KUBE_CLIENT {
                assert!(
                    !s.code.contains(p),
                    "src/{} uses {p}; only src/shell/k8s talks to the API server",
                    s.rel.display()
                );
            }
        }
        if !openstack {
            assert!(
                !s.code.contains("reqwest"),
                "src/{} uses reqwest; only src/shell/openstack talks to OpenStack",
                s.rel.display()
            );
        }
    }
}

#[test]
fn only_the_supervisor_and_shell_process_spawn_processes() {
    let allowed = [Path::new("runner/shell/supervise.rs"), Path::new("shell/process.rs")];
    for s in sources().iter().filter(|s| !allowed.contains(&s.rel.as_path()) && !s.rel.starts_with("bin")) {
        for p in [
            "Command::new",
            "process::Command",
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
                "src/{} uses {p}; only src/runner/shell/supervise.rs (the play) and src/shell/process.rs (every other program: shell::process::run) spawn, signal or reap processes",
                s.rel.display()
            );
        }
    }
}

/// The module a file belongs to, for the dependency graph: its first folder or file under
/// `src/` (`snapshot/refs.rs` → `snapshot`), or `shell::<next>` under `src/shell/`.
fn graph_module(rel: &Path) -> String {
    let parts: Vec<&str> =
        rel.components().map(|c| c.as_os_str().to_str().unwrap().trim_end_matches(".rs")).collect();
    match parts.as_slice() {
        ["shell", next, ..] => format!("shell::{next}"),
        [first, ..] => first.to_string(),
        [] => unreachable!(),
    }
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
        if first == "shell" {
            let next = word(rest.strip_prefix("shell::").unwrap_or(""));
            if !next.is_empty() {
                out.insert(format!("shell::{next}"));
            }
        } else if !first.is_empty() {
            out.insert(first);
        }
    }
    out
}

#[test]
fn the_module_graph_has_no_cycle() {
    use std::collections::{BTreeMap, BTreeSet};
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in sources()
        .iter()
        .filter(|s| s.layer != Layer::Root && !s.rel.starts_with("bin") && s.rel != Path::new("main.rs"))
    {
        let m = graph_module(&s.rel);
        let deps = graph.entry(m.clone()).or_default();
        deps.extend(named_modules(&s.code).into_iter().filter(|d| *d != m));
    }
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
    let mut state = BTreeMap::new();
    let mut cycles = Vec::new();
    for m in graph.keys() {
        if !state.contains_key(m.as_str()) {
            visit(m, &graph, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
    assert!(graph["snapshot"].contains("services") && !graph["services"].contains("snapshot"));
}
