//! The kube source against an in-test fake API server. The server answers list and get
//! requests from a fixed set of objects and injects faults (404, 403, 429, 5xx, slowness) to
//! check retries, timeouts and error messages.

use std::time::Duration;

use serde_json::json;

use crate::util::fake_api::{FakeApi, Fault};
use crate::util::run;

fn nodeset() -> serde_json::Value {
    json!({
        "apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
        "metadata": {"name": "edpm", "namespace": "openstack", "labels": {"tier": "compute"},
                     "annotations": {"nova.openstack.org/cell": "nova-cell1"}},
        "spec": {"nodeTemplate": {"ansibleSSHPrivateKeySecret": "ssh-key",
                                  "ansible": {"ansibleUser": "cloud-admin",
                                              "ansibleVarsFrom": [{"prefix": "edpm_", "configMapRef": {"name": "net-vars"}},
                                                                  {"secretRef": {"name": "creds"}},
                                                                  {"configMapRef": {"name": "absent", "optional": true}}]}},
                 "nodes": {"edpm-compute-0": {"ansible": {"ansibleHost": "192.0.2.10"}}}}
    })
}

fn other_nodeset() -> serde_json::Value {
    json!({
        "apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
        "metadata": {"name": "networkers", "namespace": "openstack", "labels": {"tier": "network"}},
        "spec": {"nodeTemplate": {"ansibleSSHPrivateKeySecret": "ssh-key"}, "nodes": {"net-0": {}}}
    })
}

fn server() -> FakeApi {
    let api = FakeApi::start();
    api.add_crd("dataplane.openstack.org", "v1beta1", "openstackdataplanenodesets");
    api.add_crd("dataplane.openstack.org", "v1beta1", "openstackdataplaneservices");
    api.put(nodeset());
    api.put(other_nodeset());
    api.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "net-vars", "namespace": "openstack"},
                   "data": {"mtu": "1500", "bridge": "br-ex"}}));
    api.put(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "openstack"},
                   "data": {"registry_password": "c2VjcmV0"}}),
    );
    api
}

fn list(api: &FakeApi, extra: &[&str], env: &[(&str, &str)]) -> crate::util::Output {
    let kc = api.kubeconfig();
    let mut args = vec!["--source", "kube", "--kubeconfig", kc.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["inventory", "--list"]);
    run(&args, env)
}

#[test]
fn reads_nodesets_and_only_the_objects_they_reference() {
    let api = server();
    let out = list(&api, &["--selector", "tier=compute"], &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "stderr: {}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["edpm"]["hosts"], json!(["edpm-compute-0"]));
    assert!(v.get("networkers").is_none(), "label selector applied");
    assert_eq!(v["nova-cell1"]["hosts"], json!(["edpm-compute-0"]));
    assert_eq!(v["edpm"]["vars"]["edpm_mtu"], json!(1500));
    assert_eq!(v["edpm"]["vars"]["edpm_bridge"], json!("br-ex"));
    assert_eq!(v["edpm"]["vars"]["registry_password"], json!("secret"));
    let reqs = api.requests();
    assert!(reqs.iter().any(|r| r.contains("labelSelector=tier%3Dcompute")), "{reqs:?}");
    assert!(reqs.iter().any(|r| r == "GET /api/v1/namespaces/openstack/configmaps/net-vars"));
    assert!(
        !reqs
            .iter()
            .any(|r| r.starts_with("GET /api/v1/namespaces/openstack/secrets?") || r.ends_with("/secrets")),
        "never lists all Secrets: {reqs:?}"
    );
}

#[test]
fn missing_crds_are_empty_and_missing_references_name_the_chain() {
    let api = FakeApi::start();
    api.add_crd("dataplane.openstack.org", "v1beta1", "openstackdataplanenodesets");
    api.put(nodeset());
    let out = list(&api, &[], &[]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("OpenStackDataPlaneNodeSet/edpm (namespace openstack on the API server)"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("ConfigMap \"net-vars\", which does not exist"), "{}", out.stderr);
}

#[test]
fn throttling_and_server_errors_are_retried() {
    let api = server();
    api.fault("/openstackdataplanenodesets", Fault::Status(429), 1);
    api.fault("/configmaps/net-vars", Fault::Status(503), 2);
    let out = list(&api, &[], &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let hits = api.requests().iter().filter(|r| r.contains("/configmaps/net-vars")).count();
    assert_eq!(hits, 3, "two failures then a success");
}

/// 503 and 429 are retried by one layer only, `Retry-After` is honoured, the whole request
/// stays within the configured timeout, and the error reports what the server said (its status
/// and message), never a timeout it did not cause.
#[test]
fn unavailable_and_throttled_answers_are_retried_in_one_place_within_the_timeout() {
    for (fault, code, message) in [
        (Fault::Status(503), "503", "injected fault"),
        (Fault::Status(429), "429", "injected fault"),
        (Fault::RetryAfter(429, 1), "429", "come back later"),
        (Fault::RetryAfter(503, 1), "503", "come back later"),
    ] {
        let api = server();
        api.fault("/openstackdataplanenodesets", fault, 1000);
        let started = std::time::Instant::now();
        let out = list(&api, &[], &[("EDPM_AGENT_KUBE_TIMEOUT", "4")]);
        let elapsed = started.elapsed();
        assert_eq!(out.code, 7, "{code}: {}", out.stderr);
        assert_eq!(out.stdout, "");
        let hits = api.requests().iter().filter(|r| r.contains("/openstackdataplanenodesets")).count();
        // One retry layer: at most the 4 attempts it allows (two layers gave 44 requests).
        assert!((2..=4).contains(&hits), "{code}: {hits} requests");
        // Bounded by the timeout (4 s), with slack for process start on a loaded machine; two
        // layers took 61 s.
        assert!(elapsed < Duration::from_secs(9), "{code}: took {elapsed:?}");
        assert!(out.stderr.contains(code) && out.stderr.contains(message), "{code}: {}", out.stderr);
        assert!(!out.stderr.contains("no response within"), "{code}: blames a timeout: {}", out.stderr);
        assert!(out.stderr.contains("after retries"), "{code}: {}", out.stderr);
    }
}

#[test]
fn persistent_server_errors_fail_with_the_request_named() {
    let api = server();
    api.fault("/openstackdataplanenodesets", Fault::Status(500), 100);
    let out = list(&api, &[], &[]);
    assert_eq!(out.code, 7);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .contains("listing openstackdataplanenodesets.dataplane.openstack.org in namespace openstack"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("500") && out.stderr.contains("after retries"), "{}", out.stderr);
    assert_eq!(
        api.requests().iter().filter(|r| r.contains("/openstackdataplanenodesets")).count(),
        4,
        "bounded attempts"
    );
}

#[test]
fn forbidden_gets_an_rbac_hint() {
    let api = server();
    api.fault("/secrets/creds", Fault::Status(403), 100);
    let out = list(&api, &[], &[]);
    assert_eq!(out.code, 7);
    assert!(out.stderr.contains("reading secret creds") && out.stderr.contains("RBAC"), "{}", out.stderr);
    assert_eq!(
        api.requests().iter().filter(|r| r.contains("/secrets/creds")).count(),
        1,
        "403 is not retried"
    );
}

#[test]
fn slow_responses_time_out() {
    let api = server();
    api.fault("/openstackdataplanenodesets", Fault::Delay(Duration::from_secs(5)), 100);
    let started = std::time::Instant::now();
    let out = list(&api, &[], &[("EDPM_AGENT_KUBE_TIMEOUT", "1")]);
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(out.stderr.contains("listing openstackdataplanenodesets"), "{}", out.stderr);
    assert!(started.elapsed() < Duration::from_secs(20), "gave up in bounded time");
}

#[test]
fn namespace_comes_from_the_kubeconfig_context_unless_given() {
    let api = server();
    // Nothing there: an error naming where it looked, unless an empty inventory is allowed.
    let out = list(&api, &["--namespace", "elsewhere"], &[]);
    assert_eq!(out.code, 13, "{}", out.stderr);
    assert!(out.stderr.contains("the cluster's namespace elsewhere"), "{}", out.stderr);
    // No CRD installed: every kind answers 404, which is "nothing there", not success.
    let bare = FakeApi::start();
    let out = list(&bare, &[], &[]);
    assert_eq!(out.code, 13, "{}", out.stderr);
    assert!(
        out.stderr.contains("no hosts") && out.stderr.contains("the cluster's namespace"),
        "{}",
        out.stderr
    );
    let out = list(&api, &["--namespace", "elsewhere", "--allow-empty"], &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v.get("edpm").is_none());
    assert!(api.requests().iter().any(|r| r.contains("/namespaces/elsewhere/")));
}

#[test]
#[ignore = "needs a cluster"]
fn live_cluster_inventory() {
    let kubeconfig = std::env::var("KUBECONFIG").expect("set KUBECONFIG to run cluster tests");
    let out = run(&["--source", "kube", "--kubeconfig", &kubeconfig, "inventory", "--list"], &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v["_meta"]["hostvars"].is_object());
}

/// render and stage read more than the inventory: the cell's Secret, the services' data
/// sources, extra-config and CA bundle, and extraMounts volumes; the kube source fetches each by
/// name.
#[test]
fn render_and_stage_work_from_the_api_and_fetch_only_named_objects() {
    let api = FakeApi::start();
    api.add_crd("dataplane.openstack.org", "v1beta1", "openstackdataplanenodesets");
    api.add_crd("nova.openstack.org", "v1beta1", "novacells");
    api.put(json!({
        "apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
        "metadata": {"name": "cmp", "namespace": "openstack", "annotations": {"nova.openstack.org/cell": "nova-cell1"}},
        "spec": {"services": ["nova"], "tlsEnabled": false,
                 "nodeTemplate": {"ansibleSSHPrivateKeySecret": "ssh",
                                  "extraMounts": [{"volumes": [{"name": "ceph", "secret": {"secretName": "ceph-conf-files"}}],
                                                   "mounts": [{"name": "ceph", "mountPath": "/etc/ceph"}]}]},
                 "nodes": {"c0": {"ansible": {"ansibleHost": "192.0.2.5"},
                                  "networks": [{"name": "ctlplane", "subnetName": "s", "fixedIP": "192.0.2.5"}]}}}
    }));
    api.put(json!({"apiVersion": "nova.openstack.org/v1beta1", "kind": "NovaCell", "metadata": {"name": "nova-cell1", "namespace": "openstack"},
                   "spec": {"cellName": "cell1", "secret": "nova-cell1", "keystoneAuthURL": "https://keystone:5000"}}));
    for (name, data) in [
        ("nova-cell1", json!({"transport_url": "cmFiYml0Oi8vdTpwQGg6NTY3Mg==", "ServicePassword": "cHc="})),
        ("nova-migration-ssh-key", json!({"ssh-privatekey": "a2V5"})),
        ("ceph-conf-files", json!({"ceph.conf": "W2dsb2JhbF0KZnNpZCA9IHgKbW9uX2hvc3QgPSAxLjIuMy40Cg=="})),
        ("unrelated", json!({"x": "eQ=="})),
    ] {
        api.put(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "openstack"}, "data": data}));
    }
    api.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nova-extra-config", "namespace": "openstack"},
                   "data": {"25-nova-extra.conf": "[DEFAULT]\ncpu_allocation_ratio = 2.0\n"}}));
    let kc = api.kubeconfig();
    let kc = kc.to_str().unwrap();
    let out = run(
        &["--source", "kube", "--kubeconfig", kc, "render", "--redact", "--node", "c0", "--service", "nova"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("transport_url=rabbit://u:********@h:5672")
            && out.stdout.contains("cpu_allocation_ratio = 2.0"),
        "{}",
        out.stdout
    );
    let root = tempfile::tempdir().unwrap();
    let out = run(
        &[
            "--source",
            "kube",
            "--kubeconfig",
            kc,
            "stage",
            "--node",
            "c0",
            "--root",
            root.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(root.path().join("var/lib/openstack/config/ceph/ceph.conf").is_file());
    assert!(root.path().join("var/lib/openstack/configs/nova/ssh-privatekey").is_file());
    let reqs = api.requests();
    for wanted in [
        "/secrets/nova-cell1",
        "/secrets/nova-migration-ssh-key",
        "/secrets/ceph-conf-files",
        "/configmaps/nova-extra-config",
    ] {
        assert!(reqs.iter().any(|r| r.ends_with(wanted)), "{wanted} not fetched: {reqs:?}");
    }
    assert!(!reqs.iter().any(|r| r.contains("unrelated")), "only named objects are read");
}

/// A host without the system's CA certificates (a minimal Debian, found when running the node
/// agent under a real systemd): rustls-native-certs reads exactly these variables.
fn without_system_cas(empty: &std::path::Path) -> [(&'static str, String); 2] {
    [
        ("SSL_CERT_FILE", empty.join("none.pem").display().to_string()),
        ("SSL_CERT_DIR", empty.display().to_string()),
    ]
}

#[test]
fn a_plain_http_server_needs_no_system_ca_certificates() {
    let api = server();
    let empty = tempfile::tempdir().unwrap();
    let vars = without_system_cas(empty.path());
    let env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = list(&api, &[], &env);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "stderr: {}", out.stderr);
}

#[test]
fn an_https_server_without_any_ca_says_what_is_missing() {
    // No certificate-authority in the kubeconfig, none on the system: the error names that,
    // not the kubeconfig that was given.
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\nusers:\n- name: u\n  user: {token: abc}\ncontexts:\n- name: x\n  context: {cluster: c, user: u, namespace: openstack}\ncurrent-context: x\n",
    )
    .unwrap();
    let vars = without_system_cas(dir.path());
    let env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "inventory", "--list"], &env);
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(
        out.stderr.contains("certificate-authority-data") && out.stderr.contains("ca-certificates"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("set KUBECONFIG"), "{}", out.stderr);
}
