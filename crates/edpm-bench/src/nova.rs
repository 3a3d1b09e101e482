//! `edpm-bench nova`: what asking Nova adds to an evaluation. For each size, NodeSets of 100
//! nodes that run nova (one cell), every compute registered, up and with its hypervisor in
//! the fake Nova (`edpm_testkit::fake_nova`, pages of 1,000 hypervisors as Nova's default
//! `max_limit`); `status show --source kube` against the fake API server with Nova asked and
//! with `--no-nova`, rounds interleaved; the requests one evaluation sends to Keystone and to
//! the compute API.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::fake_api;
use crate::readiness::readiness_manifests;
use edpm_testkit::fake_nova::{self, FakeNova};

/// `edpm-bench nova`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Node counts, comma-separated: the benchmark runs once per size.
    #[arg(long, value_name = "N,N,...", default_value = "250,10000")]
    sizes: crate::common::Sizes,
    /// Rounds, each running `status show` with Nova and with --no-nova.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::common::count)]
    runs: usize,
}

pub(crate) fn nova_bench(o: &Opts) -> Result<(), String> {
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    for &nodes in &o.sizes.0 {
        one_size(&agent, nodes, o.runs)?;
    }
    Ok(())
}

fn one_size(agent: &std::path::Path, nodes: usize, runs: usize) -> Result<(), String> {
    let nova = FakeNova::start();
    let api = fake_api::FakeApi::start();
    api.add_readiness_crds();
    api.add_crd("nova.openstack.org", "v1beta1", "novacells");
    // 15 services, the last one nova; every NodeSet in cell1.
    let text = readiness_manifests(nodes, 15).replace("svc-14", "nova").replace(
        "namespace: openstack}\nspec:\n  preProvisioned",
        "namespace: openstack, annotations: {nova.openstack.org/cell: nova-cell1}}\nspec:\n  preProvisioned",
    );
    let mut services = Vec::with_capacity(nodes);
    let mut hypervisors = Vec::with_capacity(nodes);
    for d in serde_saphyr::from_multiple::<serde_json::Value>(&text).map_err(|e| e.to_string())? {
        if d["kind"] == "OpenStackDataPlaneNodeSet"
            && let Some(members) = d["spec"]["nodes"].as_object()
        {
            for key in members.keys() {
                let id = format!("svc-{}", services.len());
                services.push(fake_nova::service(&id, key, "up", "enabled"));
                hypervisors.push(fake_nova::hypervisor(&format!("hv-{}", hypervisors.len()), key, &id, key));
            }
        }
        api.put(d);
    }
    // The evaluation alone, in process: the same answer as saved files.
    let saved_services = json!({"services": services}).to_string();
    let saved_hypervisors = json!({"hypervisors": hypervisors}).to_string();
    let (without, with, judged) = crate::bench::readiness_nova(
        &text,
        &[("services.json", &saved_services), ("hypervisors.json", &saved_hypervisors)],
        runs,
    )?;
    let med = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    println!(
        "{nodes} nodes: readiness::evaluate in process, median of {runs}: {} without Nova evidence, {} with it ({judged} nodes judged by Nova)",
        ms(med(without)),
        ms(med(with))
    );
    nova.set_services(services);
    nova.set_hypervisors(hypervisors);
    api.put(json!({"apiVersion": "nova.openstack.org/v1beta1", "kind": "NovaCell",
        "metadata": {"name": "nova-cell1", "namespace": "openstack"},
        "spec": {"cellName": "cell1", "secret": "nova-cell1", "serviceUser": fake_nova::USER,
                 "keystoneAuthURL": nova.auth_url(), "region": fake_nova::REGION}}));
    api.put(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nova-cell1", "namespace": "openstack"},
        "type": "Opaque", "stringData": {"ServicePassword": fake_nova::PASSWORD, "transport_url": "rabbit://u:p@rabbit:5672/"}}));
    let kc = api.kubeconfig();
    let show = |nova_on: bool| -> Result<Measured, String> {
        let mut cmd = Command::new(agent);
        cmd.args(["--source", "kube", "--kubeconfig", kc.to_str().unwrap_or_default(), "status", "show"])
            .args(["--format", "json"]);
        if !nova_on {
            cmd.arg("--no-nova");
        }
        let m = measure(&mut cmd)?;
        if m.status != 0 {
            return Err(format!("status show exited {}", m.status));
        }
        Ok(m)
    };
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let mut requests = (0, 0);
    for _ in 0..runs {
        without.push(show(false)?);
        let before = (nova.keystone_requests(), nova.compute_requests());
        with.push(show(true)?);
        requests = (nova.keystone_requests() - before.0, nova.compute_requests() - before.1);
    }
    let median = |v: &mut Vec<Measured>, f: fn(&Measured) -> Duration| {
        let mut d: Vec<Duration> = v.iter().map(f).collect();
        d.sort();
        d[d.len() / 2]
    };
    let (w_wall, w_cpu) = (median(&mut with, |m| m.wall), median(&mut with, |m| m.cpu));
    let (o_wall, o_cpu) = (median(&mut without, |m| m.wall), median(&mut without, |m| m.cpu));
    let pages = nodes.div_ceil(1000) + usize::from(nodes.is_multiple_of(1000));
    println!(
        "{nodes} nodes: status show with Nova {} wall / {} CPU, with --no-nova {} wall / {} CPU (median of {runs}, interleaved): Nova adds {} wall, {} CPU; requests per evaluation: Keystone {}, compute {} (1 os-services + {pages} os-hypervisors/detail page(s) of ≤ 1000)",
        ms(w_wall),
        ms(w_cpu),
        ms(o_wall),
        ms(o_cpu),
        ms(w_wall.saturating_sub(o_wall)),
        ms(w_cpu.saturating_sub(o_cpu)),
        requests.0,
        requests.1,
    );
    if requests.0 != 1 || requests.1 != 1 + pages as u64 {
        return Err(format!("expected 1 Keystone and {} compute requests, saw {requests:?}", 1 + pages));
    }
    Ok(())
}
