//! `edpm-bench readiness`: the pure evaluation in process, and `status report`'s writes against the fake API server.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Instant;

use crate::common::*;
use crate::fake_api;

/// NodeSets of 100 nodes, each with a completed Deployment over `services` services, except
/// one NodeSet in ten whose last service failed on one host (with the Job's summary).
pub(crate) fn readiness_manifests(nodes: usize, services: usize) -> String {
    let svc: Vec<String> = (0..services).map(|i| format!("svc-{i:02}")).collect();
    let mut out = String::new();
    let sets = nodes.div_ceil(100);
    for s in 0..sets {
        let ns = format!("nodeset-{s:04}");
        let _ = write!(
            out,
            "---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata: {{name: {ns}, namespace: openstack}}\nspec:\n  preProvisioned: true\n  services: [{}]\n  nodeTemplate: {{ansibleSSHPrivateKeySecret: key}}\n  nodes:\n",
            svc.join(", ")
        );
        let count = (nodes - s * 100).min(100);
        for n in 0..count {
            let _ = writeln!(
                out,
                "    compute-{s:04}-{n:03}: {{ansible: {{ansibleHost: 10.{}.{}.{}}}}}",
                s / 250,
                s % 250,
                n + 1
            );
        }
        let failed = s % 10 == 9;
        let _ = write!(
            out,
            "status: {{configHash: h{s}}}\n---\napiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneDeployment\nmetadata: {{name: deploy-{s:04}, namespace: openstack, creationTimestamp: \"2026-11-01T10:00:00Z\"}}\nspec: {{nodeSets: [{ns}]}}\nstatus:\n  nodeSetHashes: {{{ns}: h{s}}}\n"
        );
        let job = format!("{}-deploy-{s:04}-{ns}", svc[services - 1]);
        if failed {
            let _ = write!(
                out,
                "  ansibleExecutionSummaries:\n    {job}: {{totalHosts: {count}, failedHosts: 1, failedHostList: [compute-{s:04}-000], unreachableHostList: []}}\n"
            );
        }
        out.push_str("  nodeSetConditions:\n    ");
        out.push_str(&ns);
        out.push_str(":\n");
        let (st, reason, sev) = if failed {
            ("False", "BackoffLimitExceeded", ", severity: Error")
        } else {
            ("True", "Ready", "")
        };
        let _ = writeln!(
            out,
            "      - {{type: NodeSetDeploymentReady, status: \"{st}\", reason: {reason}{sev}, message: m, lastTransitionTime: \"2026-11-01T11:00:00Z\"}}"
        );
        for (i, name) in svc.iter().enumerate() {
            let camel: String = name.split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect();
            let last = i == services - 1;
            let (st, reason, sev) = if failed && last {
                ("False", "BackoffLimitExceeded", ", severity: Error")
            } else {
                ("True", "Ready", "")
            };
            let _ = writeln!(
                out,
                "      - {{type: Service{camel}DeploymentReady, status: \"{st}\", reason: {reason}{sev}, message: m, lastTransitionTime: \"2026-11-01T11:00:00Z\"}}"
            );
        }
    }
    out
}

/// `edpm-bench readiness`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Nodes the evaluation judges, in NodeSets of 100.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    nodes: usize,
    /// Services each NodeSet's Deployment ran.
    #[arg(long, value_name = "S", default_value_t = 15)]
    services: usize,
    /// Timed runs of the evaluation.
    #[arg(long, value_name = "N", default_value_t = 7, value_parser = crate::common::count)]
    runs: usize,
    /// Nodes `status report` writes the status of, against the fake API server.
    #[arg(long = "report-nodes", value_name = "N", default_value_t = 1_000)]
    report_nodes: usize,
}

pub(crate) fn readiness_bench(o: &Opts) -> Result<(), String> {
    let (nodes, services, runs, report_nodes) = (o.nodes, o.services, o.runs, o.report_nodes);
    let text = readiness_manifests(nodes, services);
    let t = crate::bench::readiness(&text, runs)?;
    let mut times = t.evaluate.clone();
    times.sort();
    println!(
        "readiness evaluate: {} nodes × {services} services ({} conditions): min {}, median {} over {} runs (parse + model, once: {})",
        t.nodes,
        t.conditions,
        ms(times[0]),
        ms(times[times.len() / 2]),
        times.len(),
        ms(t.load)
    );

    // status report against the fake API server.
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    let api = fake_api::FakeApi::start();
    api.add_readiness_crds();
    let small = readiness_manifests(report_nodes, services);
    for d in serde_saphyr::from_multiple::<serde_json::Value>(&small).map_err(|e| e.to_string())? {
        api.put(d);
    }
    let kc = api.kubeconfig();
    let objects = report_nodes + report_nodes.div_ceil(100);
    for pass in ["first report", "unchanged re-report"] {
        let before = api.count("PATCH", "/apis/agent.edpm.openstack.org/");
        let started = Instant::now();
        let out = Command::new(&agent)
            .args(["--source", "kube", "--kubeconfig", kc.to_str().unwrap_or_default(), "status", "report"])
            .env("EDPM_AGENT_NOW", "2026-11-23T12:00:00Z")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", agent.display()))?;
        let wall = started.elapsed();
        if !out.status.success() {
            return Err(format!("status report failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let writes = api.count("PATCH", "/apis/agent.edpm.openstack.org/") - before;
        println!(
            "status report, {pass}: {objects} objects, {writes} write requests ({:.2} per object), {} wall at concurrency 8: {}",
            writes as f64 / objects as f64,
            ms(wall),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    Ok(())
}
