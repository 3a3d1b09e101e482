//! Benchmarks that generate their own inputs and compare against the peer in the same run.
//!
//! `edpm-bench inventory`: R roles × N nodes as manifests (seeds' model), written as YAML and as
//! JSON, as one file per Role and as one file; the wall time and peak RSS of
//! `edpm-agent inventory --list` on each, in the same rounds; what YAML parsing alone costs on
//! the same files; and the wall time of `ansible-inventory --list` reading our script versus
//! the same inventory as a static YAML file (how upstream hands it to the runner today).
//! `edpm-bench oslo-parse`: `edpm-agent oslo parse` on one large file (10,000 and 40,000 keys in
//! one section, 100,000 sections) against oslo.config's own parser on the same file.
//! `edpm-bench readiness`: the pure readiness evaluation of N nodes × S services (in process),
//! and the write requests of `edpm-agent status report` against a fake API server, for a first
//! report and an unchanged re-report.
//! `edpm-bench nova`: what asking Nova adds to `status show` at 250 and 10,000 nodes (with and
//! without `--no-nova`, interleaved), and the Keystone and compute requests one evaluation sends.
//! `edpm-bench run`: the wall time `edpm-agent run` adds over calling ansible-runner directly,
//! for a no-op play on N local hosts, rounds interleaved.
//! `edpm-bench summarize`: `edpm-agent run --summarize-only` on a generated job_events
//! directory of N events.
//! `edpm-bench controller`: `status controller` at scale against the fake API server, or with
//! `--real-api` a real kube-apiserver and etcd, as its own ServiceAccount under the shipped
//! RBAC: first sync, change-to-write latency, churn, idle CPU, RSS and requests.
//! `edpm-bench node`: the node agent's full check over a generated node (S services, F staged
//! files) against `sha256sum -c`, and the agent as a service against the fake API server: idle
//! RSS and CPU, and requests when nothing changes.
//! One file per benchmark; `common` holds what they share, and the fake API server is the
//! integration tests' own (`edpm_testkit`).
//! Run from a release build: `cargo build --release && target/release/edpm-bench inventory`.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    reason = "a benchmark tool: it writes its generated inputs, reads its own environment and prints its tables"
)]
#![allow(
    clippy::too_many_lines,
    reason = "each benchmark is one scenario: generate, run both peers, print the table"
)]

// The fake API server of the integration tests (tests/testkit): the same server-side apply
// semantics.
use edpm_testkit::fake_api;

mod bench;
mod child;
mod common;
mod controller;
mod controller_real;
mod inventory;
mod node;
mod node_real;
mod nova;
mod oslo;
mod oslo_parse;
mod readiness;
mod run;
mod stage;
mod summarize;

use std::path::Path;

use common::{flag, generate, measure_child};
use inventory::inventory;
use node::node_bench;
use oslo::oslo_bench;
use oslo_parse::oslo_parse_bench;
use readiness::readiness_bench;
use run::run_bench;
use stage::stage_bench;
use summarize::summarize_bench;

// The same allocator as edpm-agent, so in-process measurements (oslo) match the binary.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("inventory") => inventory(&args[1..]),
        Some("oslo") => oslo_bench(&args[1..]),
        Some("oslo-parse") => oslo_parse_bench(&args[1..]),
        Some("stage") => stage_bench(&args[1..]),
        Some("readiness") => readiness_bench(&args[1..]),
        Some("controller") => controller::controller_bench(&args[1..]),
        Some("nova") => nova::nova_bench(&args[1..]),
        Some("node") if args.iter().any(|a| a == "--real") => node_real::node_real_bench(&args[1..]),
        Some("node") => node_bench(&args[1..]),
        Some("node-check") => node_real::node_check_here(&args[1..]),
        Some("run") => run_bench(&args[1..]),
        Some("summarize") => summarize_bench(&args[1..]),
        Some("measure-child") => measure_child(&args[1..]),
        Some("generate") => match args.get(1) {
            Some(dir) => flag(&args[2..], "--nodes", 10_000)
                .and_then(|n| Ok((n, flag(&args[2..], "--roles", 100)?)))
                .and_then(|(n, r)| generate(Path::new(dir), r, n)),
            None => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R]".into()),
        },
        _ => Err("usage: edpm-bench generate DIR [--nodes N] [--roles R] | edpm-bench oslo [--nodes 1000] [--runs 3] | edpm-bench oslo-parse [--runs 5] | edpm-bench stage [--files 10000] [--ansible-files 300] | edpm-bench readiness [--nodes 10000] [--services 15] [--runs 7] [--report-nodes 1000] | edpm-bench controller [--real-api] [--nodes 10000] [--services 15] [--changes 20] [--churn-seconds 60] [--idle-seconds 60] [--shared-secrets 0] [--node-secrets 0] [--rotations 5] | edpm-bench nova [--sizes 250,10000] [--runs 5] | edpm-bench node [--services 50] [--files 10000] [--runs 9] [--idle-seconds 60] | edpm-bench node --real [--services 50] [--runs 9] | edpm-bench run [--hosts 50] [--runs 5] | edpm-bench summarize [--events 100000] [--runs 5] | edpm-bench inventory [--sizes 10000,50000] [--roles 100] [--runs 5] [--ansible-runs 1] [--no-ansible] [--no-parser-floor]".into()),
    };
    if let Err(e) = result {
        eprintln!("edpm-bench: {e}");
        std::process::exit(2);
    }
}
