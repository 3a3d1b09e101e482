//! `NovaComputeReady` with `--source kube`: the status commands ask the fake Keystone and
//! compute API (`edpm_testkit::fake_nova`) once per evaluation, with the NovaCell's service
//! user, and say for each compute whether it really serves; Nova's own failures are Unknown,
//! never False; no password reaches any output.

use serde_json::{Value, json};

use crate::util::fake_api::FakeApi;
use crate::util::run;
use edpm_testkit::fake_nova::{self, FakeNova};

pub const NOW: (&str, &str) = ("EDPM_AGENT_NOW", "2026-11-26T12:00:00Z");

/// The nodes of NodeSet `computes` and the host Nova knows each by (`None`: not registered).
pub const NODES: &[(&str, &str)] = &[
    // hostName c-ready; canonical_hostname (ansibleVars) the FQDN Nova has.
    ("c-ready", "c-ready.lab.example.com"),
    ("c-short", "c-short.lab.example.com"),
    ("c-fqdn.lab.example.com", "c-fqdn"),
    ("c-down", "c-down.lab.example.com"),
    ("c-disabled", "c-disabled.lab.example.com"),
    ("c-new", "c-new.lab.example.com"),
    ("c-lost", "c-lost.lab.example.com"),
    ("c-absent", ""),
];

/// A cluster with NodeSet `computes` (services `[nova]`, deployed), its NovaCell pointing at
/// the fake Keystone, and the cell Secret holding `password`.
pub fn cluster(nova: &FakeNova, password: &str) -> FakeApi {
    let api = FakeApi::start();
    api.add_readiness_crds();
    api.add_crd("nova.openstack.org", "v1beta1", "novacells");
    let nodes: serde_json::Map<String, Value> = NODES
        .iter()
        .enumerate()
        .map(|(i, (host, _))| {
            let key = host.split('.').next().unwrap().to_string();
            let mut node =
                json!({"hostName": host, "ansible": {"ansibleHost": format!("192.0.2.{}", 10 + i)}});
            if key == "c-ready" {
                // The operator's canonical_hostname wins over the hostName.
                node["ansible"]["ansibleVars"] = json!({"canonical_hostname": "c-ready.lab.example.com"});
            }
            (key, node)
        })
        .collect();
    api.put(json!({
        "apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
        "metadata": {"name": "computes", "namespace": "openstack", "uid": "nodeset-uid-1",
                     "annotations": {"nova.openstack.org/cell": "nova-cell1"}},
        "spec": {"preProvisioned": true, "services": ["nova"],
                 "nodeTemplate": {"ansibleSSHPrivateKeySecret": "key"}, "nodes": nodes},
        "status": {"configHash": "h1"}}));
    api.put(json!({
        "apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneDeployment",
        "metadata": {"name": "deploy", "namespace": "openstack", "creationTimestamp": "2026-11-26T10:00:00Z"},
        "spec": {"nodeSets": ["computes"]},
        "status": {"nodeSetHashes": {"computes": "h1"}, "nodeSetConditions": {"computes": [
            {"type": "NodeSetDeploymentReady", "status": "True", "reason": "Ready", "message": "Deployment completed",
             "lastTransitionTime": "2026-11-26T10:30:00Z"},
            {"type": "ServiceNovaDeploymentReady", "status": "True", "reason": "Ready",
             "message": "Deployment ready for nova service", "lastTransitionTime": "2026-11-26T10:30:00Z"}]}}}));
    api.put(json!({
        "apiVersion": "nova.openstack.org/v1beta1", "kind": "NovaCell",
        "metadata": {"name": "nova-cell1", "namespace": "openstack"},
        "spec": {"cellName": "cell1", "secret": "nova-cell1", "serviceUser": fake_nova::USER,
                 "keystoneAuthURL": nova.auth_url(), "region": fake_nova::REGION}}));
    api.put(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nova-cell1", "namespace": "openstack"},
        "type": "Opaque", "data": {
            "ServicePassword": b64(password),
            "transport_url": b64("rabbit://cell1-user:rabbit-secret-pass@rabbitmq-cell1.openstack.svc:5672/?ssl=0")}}));
    api
}

/// Nova's rows for [`NODES`]: every reason once.
pub fn program(nova: &FakeNova) {
    program_with(nova, &[]);
}

/// [`program`], with some nodes' service (state, status) changed.
pub fn program_with(nova: &FakeNova, changed: &[(&str, &str, &str)]) {
    let mut services = Vec::new();
    let mut hypervisors = Vec::new();
    for (i, (_, in_nova)) in NODES.iter().enumerate() {
        if in_nova.is_empty() {
            continue;
        }
        let id = format!("svc-{i}");
        let key = in_nova.split('.').next().unwrap();
        let (state, status) = match (key, changed.iter().find(|c| c.0 == key)) {
            (_, Some((_, state, status))) => (*state, *status),
            ("c-down", None) => ("down", "enabled"),
            ("c-disabled", None) => ("up", "disabled"),
            _ => ("up", "enabled"),
        };
        let mut s = fake_nova::service(&id, in_nova, state, status);
        if key == "c-disabled" {
            s["disabled_reason"] = json!("AUTO: Connection to libvirt lost: 1");
        }
        if key == "c-lost" {
            s = json!({"binary": "nova-compute", "host": in_nova, "status": "UNKNOWN"});
        }
        services.push(s);
        if !matches!(key, "c-new" | "c-lost") {
            hypervisors.push(fake_nova::hypervisor(&format!("hv-{i}"), in_nova, &id, in_nova));
        }
    }
    // Another binary, which the check never reads.
    services.push(json!({"id": "sched", "binary": "nova-scheduler", "host": "nova-scheduler-0", "state": "up", "status": "enabled"}));
    nova.set_services(services);
    nova.set_hypervisors(hypervisors);
}

pub fn b64(s: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in s.as_bytes().chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn show(api: &FakeApi, extra: &[&str]) -> crate::util::Output {
    let kc = api.kubeconfig();
    let mut args =
        vec!["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "show", "--format", "json"];
    args.extend_from_slice(extra);
    run(&args, &[NOW])
}

/// Node → its NovaComputeReady (status, reason, severity, message), from `status show`'s JSON.
fn verdicts(
    out: &crate::util::Output,
) -> std::collections::BTreeMap<String, (String, String, String, String)> {
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let mut m = std::collections::BTreeMap::new();
    for n in v["nodes"].as_array().unwrap() {
        let Some(c) = n["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "NovaComputeReady")
        else {
            continue;
        };
        let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
        m.insert(
            n["name"].as_str().unwrap().to_string(),
            (s("status"), s("reason"), s("severity"), s("message")),
        );
    }
    m
}

#[test]
fn status_asks_nova_once_and_says_for_each_compute_whether_it_serves() {
    let nova = FakeNova::start();
    program(&nova);
    let api = cluster(&nova, fake_nova::PASSWORD);
    let out = show(&api, &[]);
    let v = verdicts(&out);
    let reason = |n: &str| (v[n].0.as_str(), v[n].1.as_str());
    assert_eq!(reason("c-ready"), ("True", "Ready"));
    assert!(!v["c-ready"].3.contains("short name"), "matched by canonical_hostname: {}", v["c-ready"].3);
    assert_eq!(reason("c-short"), ("True", "Ready"), "short hostName, FQDN in Nova: {:?}", v["c-short"]);
    assert!(v["c-short"].3.contains("matched by short name"), "{}", v["c-short"].3);
    assert_eq!(reason("c-fqdn"), ("True", "Ready"), "FQDN hostName, short in Nova: {:?}", v["c-fqdn"]);
    assert_eq!(reason("c-down"), ("False", "ComputeServiceDown"));
    assert_eq!(v["c-down"].2, "Warning");
    assert_eq!(reason("c-disabled"), ("False", "ComputeServiceDisabled"));
    assert!(v["c-disabled"].3.contains("AUTO: Connection to libvirt lost: 1"), "{}", v["c-disabled"].3);
    assert_eq!(reason("c-new"), ("False", "HypervisorMissing"));
    assert_eq!(reason("c-lost"), ("Unknown", "NovaAPIUnavailable"));
    assert_eq!(reason("c-absent"), ("False", "ComputeServiceNotRegistered"));
    // One login and one listing of each, not one per node; the microversions asked for.
    assert_eq!((nova.keystone_requests(), nova.compute_requests()), (1, 2), "{:#?}", nova.requests());
    let log = nova.requests().join("\n");
    assert!(log.contains("os-services?binary=nova-compute compute=2.69"), "{log}");
    assert!(log.contains("os-hypervisors/detail") && log.contains("compute=2.53"), "{log}");
    // ServicesReady and Ready follow it.
    let all: Value = serde_json::from_str(&out.stdout).unwrap();
    let down = all["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "c-down").unwrap();
    let services =
        down["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "ServicesReady").unwrap();
    assert_eq!(services["reason"], "ComputeServiceDown");
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains(fake_nova::PASSWORD), "the password leaked");
    }

    // `--no-nova` asks nothing and claims nothing.
    let before = nova.requests().len();
    let v = verdicts(&show(&api, &["--no-nova"]));
    assert!(v.is_empty(), "{v:?}");
    assert_eq!(nova.requests().len(), before);
}

#[test]
fn a_nova_that_cannot_be_asked_is_unknown_never_false_and_no_secret_is_told() {
    let nova = FakeNova::start();
    program(&nova);
    // Server errors on the compute API.
    nova.fail_next("/compute", 503, 100);
    let api = cluster(&nova, fake_nova::PASSWORD);
    let out = show(&api, &["--nova-timeout", "2"]);
    let v = verdicts(&out);
    assert_eq!(v.len(), NODES.len());
    for (node, (status, reason, _, message)) in &v {
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("Unknown", "NovaAPIUnavailable"),
            "{node}: {message}"
        );
        assert!(message.contains("503"), "{message}");
    }
    // A wrong password: Keystone says 401, the message names the Secret, not the value.
    let nova = FakeNova::start();
    program(&nova);
    let api = cluster(&nova, "not-the-password-123");
    let out = show(&api, &[]);
    let v = verdicts(&out);
    let (status, reason, _, message) = &v["c-ready"];
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "NovaAPIUnavailable"));
    assert!(message.contains("nova-cell1"), "names the Secret: {message}");
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains("not-the-password-123"), "the password leaked: {text}");
    }
    // `status explain` shows the evidence, and no secret either.
    let nova = FakeNova::start();
    program(&nova);
    let api = cluster(&nova, fake_nova::PASSWORD);
    let kc = api.kubeconfig();
    let out = run(
        &["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "explain", "c-disabled"],
        &[NOW],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("expected host: c-disabled (hostName)"), "{}", out.stdout);
    assert!(
        out.stdout.contains("service svc-4: host c-disabled.lab.example.com (matched by short name), state up, status disabled (AUTO: Connection to libvirt lost: 1)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("hypervisor hv-4: c-disabled.lab.example.com, state up, status enabled"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(fake_nova::PASSWORD) && !out.stdout.contains("rabbit-secret-pass"));
}

#[test]
fn a_broken_saved_answer_is_refused_and_names_its_file() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["examples/nodeset/nodesets.yaml", "examples/controlplane/novacells.yaml"] {
        std::fs::copy(crate::util::repo().join(f), dir.path().join(f.rsplit('/').next().unwrap())).unwrap();
    }
    std::fs::write(dir.path().join("hypervisors.json"), r#"{"hypervisors": []}"#).unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run(&["--source", d, "status", "show"], &[NOW]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("hypervisors.json:1: a saved hypervisor list without a service list"),
        "{}",
        out.stderr
    );
    std::fs::write(
        dir.path().join("services.json"),
        r#"{"services": [{"binary": "nova-compute", "host": 7}]}"#,
    )
    .unwrap();
    let out = run(&["--source", d, "status", "show"], &[NOW]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("services.json:1: this looks like a saved Nova answer, but services[0].host: expected text, found 7"),
        "{}",
        out.stderr
    );
}

#[test]
fn without_a_cell_annotation_any_novacell_user_asks_and_without_any_novacell_it_is_unknown() {
    let nova = FakeNova::start();
    program(&nova);
    let api = cluster(&nova, fake_nova::PASSWORD);
    // Today's NodeSets rarely carry nova.openstack.org/cell: Nova answers for every cell, and
    // every cell has the same service user.
    let mut set = api.object("OpenStackDataPlaneNodeSet", "computes").unwrap();
    set["metadata"]["annotations"] = json!({});
    set.as_object_mut().unwrap().remove("status");
    api.put_replace(set);
    let v = verdicts(&show(&api, &[]));
    assert_eq!((v["c-ready"].0.as_str(), v["c-down"].1.as_str()), ("True", "ComputeServiceDown"), "{v:?}");
    // No NovaCell at all: nothing to ask with, so Unknown, saying what to do.
    let api2 = FakeApi::start();
    api2.add_readiness_crds();
    api2.add_crd("nova.openstack.org", "v1beta1", "novacells");
    for kind in ["OpenStackDataPlaneNodeSet", "OpenStackDataPlaneDeployment"] {
        let name = if kind.ends_with("NodeSet") { "computes" } else { "deploy" };
        api2.put(api.object(kind, name).unwrap());
    }
    let v = verdicts(&show(&api2, &[]));
    let (status, reason, _, message) = &v["c-ready"];
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "NovaAPIUnavailable"));
    assert!(message.contains("no NovaCell in the namespace"), "{message}");
    // One command asks once: no "(since …)" that is only its own moment.
    assert!(!message.contains("(since "), "{message}");
    assert_eq!(nova.requests().len(), 3, "the second cluster asked nothing");
}

#[test]
fn an_explicit_credentials_secret_is_read_by_name_and_used_for_every_compute() {
    let nova = FakeNova::start();
    program(&nova);
    // The cells' own password is wrong: only the named Secret can log in.
    let api = cluster(&nova, "the-cells-wrong-password");
    api.put(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nova-check", "namespace": "openstack"},
        "type": "Opaque", "data": {
            "OS_AUTH_URL": b64(&nova.auth_url()), "OS_USERNAME": b64(fake_nova::USER),
            "OS_PASSWORD": b64(fake_nova::PASSWORD), "OS_PROJECT_NAME": b64(fake_nova::PROJECT)}}));
    let v = verdicts(&show(&api, &["--nova-credentials", "nova-check"]));
    assert_eq!((v["c-ready"].0.as_str(), v["c-down"].1.as_str()), ("True", "ComputeServiceDown"), "{v:?}");
    let secrets: Vec<String> = api.requests().into_iter().filter(|r| r.contains("/secrets")).collect();
    assert!(
        secrets.iter().all(|r| r.starts_with("GET") && !r.ends_with("/secrets") && !r.contains("/secrets?")),
        "got by name, never listed: {secrets:?}"
    );
    // Absent: Unknown, naming the Secret and what to do.
    let out = show(&api, &["--nova-credentials", "nope"]);
    let v = verdicts(&out);
    assert_eq!(v["c-ready"].1, "NovaAPIUnavailable");
    assert!(v["c-ready"].3.contains("Secret nope (--nova-credentials) not found"), "{}", v["c-ready"].3);
    assert!(!out.stdout.contains("the-cells-wrong-password") && !out.stdout.contains(fake_nova::PASSWORD));
}

#[test]
fn over_https_the_novacells_ca_bundle_is_trusted() {
    let fixture = |name: &str| {
        std::fs::read_to_string(crate::util::repo().join("tests/fixtures/tls").join(name)).unwrap()
    };
    let nova = FakeNova::start_tls(&fixture("server.pem"), &fixture("server.key"));
    program(&nova);
    let api = cluster(&nova, fake_nova::PASSWORD);
    // Without the bundle the system roots are asked, and they do not know the test CA.
    let v = verdicts(&show(&api, &[]));
    assert_eq!(v["c-ready"].1, "NovaAPIUnavailable", "{:?}", v["c-ready"]);
    assert!(v["c-ready"].3.contains("certificate"), "{}", v["c-ready"].3);
    // nova-operator's NovaCell names the control plane's bundle, read by name.
    let mut cell = api.object("NovaCell", "nova-cell1").unwrap();
    cell["spec"]["tls"] = json!({"caBundleSecretName": "combined-ca-bundle"});
    api.put_replace(cell);
    api.put(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "combined-ca-bundle", "namespace": "openstack"},
        "data": {"tls-ca-bundle.pem": b64(&fixture("ca.pem"))}}));
    let v = verdicts(&show(&api, &[]));
    assert_eq!((v["c-ready"].0.as_str(), v["c-down"].1.as_str()), ("True", "ComputeServiceDown"), "{v:?}");
}
