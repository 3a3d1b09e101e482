//! The architecture's boundaries, checked on the source text (ARCHITECTURE.md, "Invariants"):
//! - the pure core never imports a shell module, and does no I/O and reads no clock;
//! - only `k8s` talks to the Kubernetes API server, only `openstack` to OpenStack's APIs.
//!   (`kube`'s `CustomResource` derive and its resource traits describe types and are pure;
//!   its client, `Api` and configuration are not.)
//! - only `process` (and the node agent's read-only queries) spawn or signal processes.
//!
//! Test modules (`#[cfg(test)]` to the end of a file) are left out: tests may read fixtures.

use std::path::{Path, PathBuf};

use crate::util::repo;

/// The pure core: plain data in, plain data out.
const CORE: &[&str] = &[
    "yaml",
    "settings",
    "condition",
    "snapshot",
    "services",
    "model",
    "inventory",
    "validate",
    "oslo",
    "redact",
    "cell",
    "render",
    "derive",
    "echo",
    "mounts",
    "staging",
    "readiness",
    "agent",
    "aee",
    "summary",
];
/// The shell: everything that reads, writes, talks, spawns or waits.
const SHELL: &[&str] = &[
    "cli",
    "exit",
    "app",
    "source",
    "k8s",
    "hostfs",
    "openstack",
    "fsutil",
    "par",
    "nodeagent",
    "process",
    "bench",
    "main",
    "lib",
    "bin",
];

/// kube's client side: only `k8s` may use it.
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
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`src/k8s/read.rs` → `k8s`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_str().unwrap();
    first.trim_end_matches(".rs").to_string()
}

/// The file without its test module, comments and doc comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

#[test]
fn every_module_is_classified() {
    let src = repo().join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for f in &files {
        let m = module_of(&src, f);
        assert!(
            CORE.contains(&m.as_str()) || SHELL.contains(&m.as_str()),
            "{}: module {m} is neither core nor shell; add it to tests/layout.rs and ARCHITECTURE.md",
            f.display()
        );
    }
}

#[test]
fn the_core_never_imports_the_shell_and_does_no_io() {
    let src = repo().join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut problems = Vec::new();
    for f in files.iter().filter(|f| CORE.contains(&module_of(&src, f).as_str())) {
        let code = code(&std::fs::read_to_string(f).unwrap());
        for shell in SHELL {
            for pat in [format!("crate::{shell}::"), format!("crate::{shell};"), format!("crate::{shell}}}")]
            {
                if code.contains(&pat) {
                    problems.push(format!("{} uses the shell module {shell}", f.display()));
                }
            }
        }
        for word in IMPURE.iter().chain(KUBE_CLIENT) {
            if code.contains(word) {
                problems.push(format!("{} uses {word}", f.display()));
            }
        }
    }
    problems.dedup();
    assert!(problems.is_empty(), "the pure core reaches outside:\n{}", problems.join("\n"));
}

#[test]
fn only_k8s_talks_to_the_api_server_and_only_openstack_to_openstack() {
    let src = repo().join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for f in &files {
        let m = module_of(&src, f);
        let code = code(&std::fs::read_to_string(f).unwrap());
        if m != "k8s" {
            for p in KUBE_CLIENT {
                assert!(!code.contains(p), "{} uses {p}; only src/k8s talks to the API server", f.display());
            }
        }
        if m != "openstack" {
            assert!(
                !code.contains("reqwest"),
                "{} uses reqwest; only src/openstack.rs talks to OpenStack",
                f.display()
            );
        }
    }
}

#[test]
fn only_process_and_the_node_agents_collector_spawn_processes() {
    let src = repo().join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let allowed = [src.join("process.rs"), src.join("nodeagent/collect.rs")];
    for f in files.iter().filter(|f| !allowed.contains(f) && module_of(&src, f) != "bin") {
        let code = code(&std::fs::read_to_string(f).unwrap());
        for p in ["Command::new", "process::Command", "libc::kill", "libc::fork", "libc::exec"] {
            assert!(
                !code.contains(p),
                "{} uses {p}; only src/process.rs (and nodeagent::collect's queries) spawn or signal processes",
                f.display()
            );
        }
    }
}
