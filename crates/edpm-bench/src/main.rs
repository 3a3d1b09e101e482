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

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use common::{GenerateOpts, MeasureChild};

// The same allocator as edpm-agent, so in-process measurements (oslo) match the binary.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Benchmarks of edpm-agent: each generates its own inputs and measures edpm-agent against its
/// peer in the same run (BENCHMARKS.md). Run from a release build.
#[derive(Parser)]
#[command(name = "edpm-bench", max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// `edpm-agent inventory --list` on generated manifests (YAML and JSON, one file and many),
    /// YAML parsing alone, and ansible-inventory reading our script against a static file.
    Inventory(inventory::Opts),
    /// Rendering, reading and layering oslo.config files, against oslo.config.
    Oslo(oslo::Opts),
    /// `edpm-agent oslo parse` on one large file, against oslo.config's parser.
    OsloParse(oslo_parse::Opts),
    /// `edpm-agent stage`: staging a node's files, first and unchanged, against Ansible's copy.
    Stage(stage::Opts),
    /// The pure readiness evaluation in process, and `status report`'s writes against the fake
    /// API server.
    Readiness(readiness::Opts),
    /// `status controller` at scale against the fake API server (or a real one, --real-api):
    /// first sync, change-to-write latency, churn, Secret rotation, idle CPU, RSS, requests.
    Controller(controller::Opts),
    /// What asking Nova adds to `status show`, and the Keystone and compute requests it sends.
    Nova(nova::Opts),
    /// The node agent's full check against `sha256sum -c`, and its idle cost as a service
    /// against the fake API server; with --real, against a real systemd and podman.
    Node(node::Opts),
    /// Internal: `node --real` runs it inside the node; the check's times as one JSON line.
    NodeCheck(node_real::CheckOpts),
    /// The wall time `edpm-agent run` adds over ansible-runner alone, for a no-op play.
    Run(run::Opts),
    /// `edpm-agent run --summarize-only` over a generated job_events directory.
    Summarize(summarize::Opts),
    /// Internal: the benchmarks time a command through it; prints its wall time (ns), peak RSS
    /// (KiB), exit status and CPU time (ns).
    MeasureChild(MeasureChild),
    /// Writes the inventory benchmark's manifests (R Roles, N Nodes) into DIR, e.g. for a profiler.
    Generate(GenerateOpts),
}

impl Bench {
    /// What clap cannot say alone: the limits between flags and the values a benchmark
    /// cannot run with.
    fn check(&self) -> Result<(), String> {
        match self {
            Bench::Controller(o) => o.check(),
            Bench::Inventory(o) => o.check(),
            Bench::Generate(o) => o.check(),
            _ => Ok(()),
        }
    }

    fn run(&self) -> Result<(), String> {
        match self {
            Bench::Inventory(o) => inventory::inventory(o),
            Bench::Oslo(o) => oslo::oslo_bench(o),
            Bench::OsloParse(o) => oslo_parse::oslo_parse_bench(o),
            Bench::Stage(o) => stage::stage_bench(o),
            Bench::Readiness(o) => readiness::readiness_bench(o),
            Bench::Controller(o) => controller::controller_bench(o),
            Bench::Nova(o) => nova::nova_bench(o),
            Bench::Node(o) if o.real => node_real::node_real_bench(o),
            Bench::Node(o) => node::node_bench(o),
            Bench::NodeCheck(o) => node_real::node_check_here(o),
            Bench::Run(o) => run::run_bench(o),
            Bench::Summarize(o) => summarize::summarize_bench(o),
            Bench::MeasureChild(o) => common::measure_child(o),
            Bench::Generate(o) => common::generate_cmd(o),
        }
    }
}

/// `--help` prints the help and runs nothing; a flag, subcommand or value it does not know is
/// refused with clap's error (exit 2) before anything starts; a benchmark that fails exits 2
/// with its error.
fn main() {
    let mut cmd = Cli::command();
    let matches = cmd.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut cmd).exit());
    if let Err(msg) = cli.bench.check() {
        // Refused as clap refuses a bad value, with the benchmark's own usage line.
        cmd.build();
        let kind = clap::error::ErrorKind::ValueValidation;
        let err = match cmd.find_subcommand_mut(matches.subcommand_name().unwrap_or_default()) {
            Some(sub) => sub.error(kind, msg),
            None => cmd.error(kind, msg),
        };
        err.exit();
    }
    // 2 is a usage error (clap's, above); a benchmark that ran and failed is 1.
    if let Err(e) = cli.bench.run() {
        eprintln!("edpm-bench: {e}");
        std::process::exit(1);
    }
}
