//! The Kubernetes client: credentials (exec plugins, CA data), timeouts over a whole command,
//! partial and refused answers, and names the API server would refuse.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::run_within;
use crate::status_api::cluster;
use crate::util::fake_api::Fault;
use crate::util::run;

const NOW: (&str, &str) = ("EDPM_AGENT_NOW", "2026-11-23T12:00:00Z");

fn report(api: &crate::util::fake_api::FakeApi, extra: &[&str]) -> crate::util::Output {
    let kc = api.kubeconfig();
    let mut args =
        vec!["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "report", "--no-nova"];
    args.extend_from_slice(extra);
    run(&args, &[NOW])
}

/// A node whose key is a 70-character FQDN: the object name is shortened with a hash, and so
/// are its label values (the API server refuses a label value over 63 characters: 422); the
/// whole name stays in an annotation, on the status object and on the Lease.
#[test]
fn long_node_names_make_valid_labels_and_keep_the_whole_name() {
    let api = cluster();
    let mut set = api.object("OpenStackDataPlaneNodeSet", "edpm-compute-cell1").unwrap();
    let fqdn = format!("edpm-compute-{}.ctlplane.example.com", "r".repeat(35));
    assert!(fqdn.len() > 63);
    set["spec"]["nodes"][&fqdn] = json!({"hostName": fqdn, "ansible": {"ansibleHost": "192.168.122.110"}});
    api.put(set);
    let out = report(&api, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let with_node = |kind: &str| -> Vec<Value> {
        api.objects(kind)
            .into_iter()
            .filter(|o| o["metadata"]["annotations"]["agent.edpm.openstack.org/node"] == fqdn.as_str())
            .collect()
    };
    for kind in ["EDPMNodeStatus", "Lease"] {
        let objs = with_node(kind);
        assert_eq!(objs.len(), 1, "one {kind} keeps the whole name in its annotation");
        let label = objs[0]["metadata"]["labels"]["agent.edpm.openstack.org/node"].as_str().unwrap();
        assert!(label.len() <= 63 && label.starts_with("edpm-compute-r"), "{kind}: {label}");
    }
}

fn report_args(api: &crate::util::fake_api::FakeApi, timeout: &str) -> Vec<String> {
    let kc = api.kubeconfig();
    [
        "--source",
        "kube",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "status",
        "report",
        "--no-nova",
        "--timeout",
        timeout,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `status report --timeout 5` against an API server that takes 2 s per answer: the whole
/// command ends about when its --timeout does (it took 96 s: 57 requests one after another),
/// and says that the time ran out.
#[test]
fn report_timeout_bounds_the_whole_command() {
    let api = cluster();
    api.fault("/", Fault::Delay(Duration::from_secs(2)), 10_000);
    let args = report_args(&api, "5");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, took) = run_within(&args, &[NOW], Duration::from_secs(60));
    assert!(took < Duration::from_secs(12), "took {took:?}: {}", out.stderr);
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(out.stderr.contains("--timeout ran out"), "{}", out.stderr);
}

/// 503 on writes is retried for as long as --timeout allows (it gave up after four attempts,
/// 1.2 s, and exited 7 despite --timeout 20).
#[test]
fn write_retries_use_the_time_the_user_gave() {
    let api = cluster();
    // Six 503s in a row for one object's writes: more than four attempts, less than 30 s.
    api.fault("/edpmnodestatuses/edpm-compute-cell2-edpm-compute-5", Fault::Status(503), 6);
    let args = report_args(&api, "30");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _) = run_within(&args, &[NOW], Duration::from_secs(60));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(api.object("EDPMNodeStatus", "edpm-compute-cell2-edpm-compute-5").is_some());
}

/// When some writes land and others do not, the error says how many landed and which did not.
#[test]
fn a_partial_write_says_what_landed_and_what_did_not() {
    let api = cluster();
    api.fault("/edpmnodestatuses/edpm-compute-cell2-edpm-compute-5", Fault::Status(503), 100_000);
    let args = report_args(&api, "3");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _) = run_within(&args, &[NOW], Duration::from_secs(60));
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(
        out.stderr.contains("of 5 written")
            && out.stderr.contains("not written: EDPMNodeStatus edpm-compute-cell2-edpm-compute-5"),
        "{}",
        out.stderr
    );
    assert!(api.object("EDPMNodeStatus", "edpm-compute-cell1-edpm-compute-3").is_some(), "the others landed");
}

/// A cluster that serves none of the data-plane kinds (every list answers 404): "no hosts"
/// says the kinds are not served and what to check.
#[test]
fn kinds_not_served_are_named_when_nothing_is_found() {
    let api = crate::util::fake_api::FakeApi::start();
    let kc = api.kubeconfig();
    let out = run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "inventory", "--list"], &[]);
    assert_eq!(out.code, 13, "{}", out.stderr);
    assert!(
        out.stderr.contains("does not serve")
            && out.stderr.contains("openstackdataplanenodesets.dataplane.openstack.org"),
        "{}",
        out.stderr
    );
}

/// A kubeconfig whose certificate-authority-data holds no certificate (garbage, or a PEM
/// block that is not one) is refused naming the field, over http too (it was accepted
/// silently over http, and over https read as "received corrupt message").
#[test]
fn a_ca_that_is_no_certificate_is_named() {
    let api = cluster();
    let kc = api.kubeconfig();
    let text = std::fs::read_to_string(&kc).unwrap();
    let fake_pem = "-----BEGIN CERTIFICATE-----\nZmFrZSBDQQ==\n-----END CERTIFICATE-----\n";
    for data in ["not a certificate", fake_pem] {
        let bad = kc.with_file_name(format!("kubeconfig-bad-{}", data.len()));
        let with_ca = text.replacen(
            "    server:",
            &format!("    certificate-authority-data: {}\n    server:", crate::nova::b64(data)),
            1,
        );
        std::fs::write(&bad, with_ca).unwrap();
        let out =
            run(&["--source", "kube", "--kubeconfig", bad.to_str().unwrap(), "inventory", "--list"], &[]);
        assert_ne!(out.code, 0, "{data:?}: {}", out.stdout);
        assert!(out.stderr.contains("certificate-authority"), "{data:?}: {}", out.stderr);
        assert!(!out.stderr.contains("corrupt message"), "{}", out.stderr);
    }
}

/// A NovaCell's CA bundle Secret that holds a placeholder instead of a certificate (the
/// examples' combined-ca-bundle) is named, Secret and key, in the nodes' Unknown
/// (it said "the HTTP client cannot be built (builder error)").
#[test]
fn a_nova_ca_bundle_that_is_no_certificate_names_its_secret_and_key() {
    let nova = edpm_testkit::fake_nova::FakeNova::start();
    crate::nova::program(&nova);
    let api = crate::nova::cluster(&nova, edpm_testkit::fake_nova::PASSWORD);
    let mut cell = api.object("NovaCell", "nova-cell1").unwrap();
    cell["spec"]["tls"] = json!({"caBundleSecretName": "combined-ca-bundle"});
    api.put_replace(cell);
    let placeholder =
        std::fs::read_to_string(crate::util::repo().join("examples/controlplane/secrets.yaml")).unwrap();
    assert!(
        placeholder.contains("ZmFrZSBDQSBidW5kbGUgZm9yIGV4YW1wbGVzIG9ubHk="),
        "the examples' placeholder"
    );
    let pem = "-----BEGIN CERTIFICATE-----\nZmFrZSBDQSBidW5kbGUgZm9yIGV4YW1wbGVzIG9ubHk=\n-----END CERTIFICATE-----\n";
    api.put(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "combined-ca-bundle", "namespace": "openstack"},
        "data": {"tls-ca-bundle.pem": crate::nova::b64(pem)}}));
    let kc = api.kubeconfig();
    let out = run(
        &["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "show", "--format", "json"],
        &[crate::nova::NOW],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let node = v["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "c-ready").unwrap();
    let c = node["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "NovaComputeReady").unwrap();
    let m = c["message"].as_str().unwrap();
    assert_eq!(c["status"], "Unknown", "{c}");
    assert!(
        m.contains("Secret combined-ca-bundle key tls-ca-bundle.pem")
            && m.contains("not an X.509 certificate"),
        "{m}"
    );
}

/// A kubeconfig for `api` whose user runs `plugin` as its exec credential plugin.
fn exec_kubeconfig(
    api: &crate::util::fake_api::FakeApi,
    dir: &std::path::Path,
    plugin: &str,
) -> std::path::PathBuf {
    let script = dir.join("plugin.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{plugin}\n")).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&script).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let text = std::fs::read_to_string(api.kubeconfig()).unwrap().replace(
        "  user: {}\n",
        &format!(
            "  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: {}\n      args: [get-token]\n",
            script.display()
        ),
    );
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, text).unwrap();
    kc
}

fn pids(file: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    // Zombies are gone for our purpose: they hold nothing and run nothing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"))
}

fn gone_within(pids: &[i32], limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A hanging credential plugin (with a child of its own): the inventory script and `status
/// report` end within their timeouts, say which plugin did not answer, and leave neither it
/// nor its child running (they blocked past EDPM_AGENT_KUBE_TIMEOUT/--timeout, and the plugin
/// outlived edpm-agent).
#[test]
fn a_hanging_credential_plugin_is_bounded_and_killed_with_its_group() {
    let api = cluster();
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("pids");
    let kc =
        exec_kubeconfig(&api, d.path(), &format!("sleep 1000 & echo $! $$ > {}\nwait", pidfile.display()));
    let kc = kc.to_str().unwrap();
    let (out, took) = run_within(
        &["--source", "kube", "--kubeconfig", kc, "inventory", "--list"],
        &[("EDPM_AGENT_KUBE_TIMEOUT", "2")],
        Duration::from_secs(60),
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("credential plugin") && out.stderr.contains("did not finish within"),
        "{}",
        out.stderr
    );
    let started = pids(&pidfile);
    assert_eq!(started.len(), 2, "the plugin and its child started");
    assert!(gone_within(&started, Duration::from_secs(5)), "left running: {started:?}");

    std::fs::remove_file(&pidfile).unwrap();
    let (out, took) = run_within(
        &["--source", "kube", "--kubeconfig", kc, "status", "report", "--no-nova", "--timeout", "3"],
        &[NOW],
        Duration::from_secs(60),
    );
    assert!(took < Duration::from_secs(12), "took {took:?}: {}", out.stderr);
    assert_ne!(out.code, 0);
    assert!(gone_within(&pids(&pidfile), Duration::from_secs(5)));
}

/// A failing plugin's token and stderr secrets never reach edpm-agent's output (kube printed
/// its whole `Output { … }`); the message names the plugin and how it ended. A working plugin
/// keeps stderr empty.
#[test]
fn a_failing_credential_plugin_is_reported_without_its_secrets() {
    let api = cluster();
    let d = tempfile::tempdir().unwrap();
    let kc = exec_kubeconfig(
        &api,
        d.path(),
        "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-SECRET-4242\"}}'\necho 'error: login failed password=hunter2-secret' >&2\nexit 3",
    );
    let out = run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "inventory", "--list"], &[]);
    assert_ne!(out.code, 0);
    for secret in ["tok-SECRET-4242", "hunter2-secret", "Output {"] {
        assert!(!out.stderr.contains(secret), "{secret}: {}", out.stderr);
    }
    assert!(out.stderr.contains("credential plugin") && out.stderr.contains("code 3"), "{}", out.stderr);

    let kc = exec_kubeconfig(
        &api,
        d.path(),
        "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-OK\"}}'",
    );
    let out = run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "inventory", "--list"], &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{}", out.stdout);
}

/// The node agent stopped (SIGTERM) while its kubeconfig's credential plugin hangs: it exits
/// 0 within the plugin's time limit and the plugin and its child are gone (it died by SIGTERM
/// and left the plugin running with PPID 1).
#[test]
fn the_node_agent_stops_cleanly_while_a_credential_plugin_hangs() {
    stops_cleanly_while_a_credential_plugin_hangs(crate::util::bin(), &["node"]);
}

/// The same with `edpm-agent-node`, as the unit runs it: kube runs the plugin through the
/// binary itself (`edpm-agent-node __exec-credential …`), which the node agent's own main
/// must answer (it once went to clap, so no plugin ever ran).
#[test]
fn the_node_agent_binary_runs_credential_plugins_and_stops_cleanly_while_one_hangs() {
    stops_cleanly_while_a_credential_plugin_hangs(crate::util::node_bin(), &[]);
}

fn stops_cleanly_while_a_credential_plugin_hangs(program: std::path::PathBuf, args: &[&str]) {
    let api = cluster();
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("pids");
    let kc =
        exec_kubeconfig(&api, d.path(), &format!("sleep 1000 & echo $! $$ > {}\nwait", pidfile.display()));
    let root = d.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let config = d.path().join("node.yaml");
    std::fs::write(
        &config,
        format!(
            "kubeconfig: {}\nnamespace: openstack\nobject: edpm-compute-cell1-edpm-compute-3\nnode: edpm-compute-3\nroot: {}\nrequest_timeout_seconds: 3\n",
            kc.display(),
            root.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(program)
        .args(args)
        .args(["--config", config.to_str().unwrap()])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while pids(&pidfile).len() < 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = pids(&pidfile);
    assert_eq!(started.len(), 2, "the plugin started");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let until = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the node agent did not stop within 15 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(gone_within(&started, Duration::from_secs(5)), "left running: {started:?}");
}

/// `status report --timeout 4` with a Keystone that accepts but never answers: Nova gets half
/// of the time, its nodes read Unknown saying so, and the writes land within the --timeout
/// (Nova took 10 s, past the command's time, and the error blamed the API server).
#[test]
fn report_timeout_bounds_asking_nova_too() {
    use edpm_testkit::fake_nova::{self, FakeNova};
    let nova = FakeNova::start();
    crate::nova::program(&nova);
    nova.delay_next("/", Duration::from_secs(30), 100);
    let api = crate::nova::cluster(&nova, fake_nova::PASSWORD);
    let kc = api.kubeconfig();
    let (out, took) = run_within(
        &[
            "--source",
            "kube",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "status",
            "report",
            "--timeout",
            "4",
            "--nova-timeout",
            "20",
        ],
        &[crate::nova::NOW],
        Duration::from_secs(60),
    );
    assert!(took < Duration::from_secs(7), "took {took:?}: {}", out.stderr);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let written = serde_json::to_string(&api.objects("EDPMNodeStatus")).unwrap();
    assert!(written.contains("Nova did not answer within"), "{written}");
}

/// edpm-agent as PID 1 (a container whose entrypoint it is) still runs its kubeconfig's
/// credential plugin: the plugin's runner knows its parent by process id, not by "not 1".
#[test]
fn a_credential_plugin_works_when_edpm_agent_is_pid_1() {
    let api = cluster();
    let d = tempfile::tempdir().unwrap();
    let kc = exec_kubeconfig(
        &api,
        d.path(),
        "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-OK\"}}'",
    );
    // A new PID namespace needs root (or user namespaces); CI runs as root.
    let probe = Command::new("unshare").args(["--pid", "--fork", "true"]).status();
    if !probe.is_ok_and(|s| s.success()) {
        assert!(std::env::var_os("CI").is_none(), "CI: unshare --pid --fork must work");
        eprintln!(
            "SKIPPED a_credential_plugin_works_when_edpm_agent_is_pid_1: cannot make a PID namespace here"
        );
        return;
    }
    let out = Command::new("unshare")
        .args(["--pid", "--fork"])
        .arg(crate::util::bin())
        .args(["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "inventory", "--list"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

/// A reporter whose RBAC predates the Leases' namespace (403 on listing them there) still
/// shows every node: the node agents' conditions read Unknown, saying what to grant, and a
/// warning says so (the whole command failed, exit 7).
#[test]
fn leases_that_cannot_be_listed_make_the_agents_word_unknown_not_the_command_fail() {
    let api = cluster();
    let kc = api.kubeconfig();
    let kc = kc.to_str().unwrap();
    let object = "edpm-compute-cell1-edpm-compute-3";
    assert_eq!(report(&api, &[]).code, 0);
    crate::controller::agent_reports(&api, object);
    api.fault("/namespaces/edpm-node-lease/leases?", Fault::Status(403), 100);
    let out = run(
        &["--source", "kube", "--kubeconfig", kc, "status", "show", "--format", "json", "--no-nova"],
        &[NOW],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot be listed") && out.stderr.contains("grant list on leases"),
        "{}",
        out.stderr
    );
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let node = v["nodes"].as_array().unwrap().iter().find(|n| n["object"] == object).unwrap();
    let agent =
        node["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "NodeAgentReady").unwrap();
    assert_eq!(
        (agent["status"].as_str(), agent["reason"].as_str()),
        (Some("Unknown"), Some("AgentLeaseMissing")),
        "{agent}"
    );
    assert!(agent["message"].as_str().unwrap().contains("edpm-node-lease"), "{agent}");
}

/// A completed Deployment of edpm-compute-cell2 alone whose `status.secretHashes` and
/// `configMapHashes` hold keys that are no object names, beside one that is.
pub fn bad_hash_keys(api: &crate::util::fake_api::FakeApi) {
    api.put(json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneDeployment",
        "metadata": {"name": "edpm-deployment-bad-keys", "namespace": "openstack",
            "creationTimestamp": "2026-11-03T10:00:00Z"},
        "spec": {"nodeSets": ["edpm-compute-cell2"], "servicesOverride": ["ovn"]},
        "status": {
            "secretHashes": {"has space": "h1", "../x": "h2", "a?watch=true": "h3"},
            "configMapHashes": {"a/../../b": "h5"},
            "nodeSetConditions": {"edpm-compute-cell2": [
                {"type": "NodeSetDeploymentReady", "status": "True", "reason": "Ready",
                    "message": "Deployment completed", "lastTransitionTime": "2026-11-03T10:30:00Z"},
                {"type": "ServiceOvnDeploymentReady", "status": "True", "reason": "Ready",
                    "message": "ready", "lastTransitionTime": "2026-11-03T10:30:00Z"}]},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "Setup complete",
                "lastTransitionTime": "2026-11-03T10:30:00Z"}]}}));
}

/// No request path holds a name that is no object name, escaped or not; a watch (the
/// controller's metadata watch of Secrets and ConfigMaps) is of the whole collection only, so
/// `a?watch=true` cannot have become one.
pub fn no_bad_name_asked(api: &crate::util::fake_api::FakeApi) {
    for r in api.requests().iter().filter(|r| r.contains("/secrets") || r.contains("/configmaps")) {
        let (path, query) = r.split_once('?').unwrap_or((r.as_str(), ""));
        for bad in ["has space", "has%20space", "..", "%2F", "watch", "%3F", "/b "] {
            assert!(!path.contains(bad) && !path.ends_with("/b"), "asked {r}");
        }
        if query.contains("watch=true") {
            assert!(path.ends_with("/secrets") || path.ends_with("/configmaps"), "asked {r}");
        }
    }
}

/// A Deployment's `secretHashes`/`configMapHashes` key that is no object name (`has space`,
/// `../x`, `a?watch=true`) is never put into a request path: `status show --source kube`
/// answers for the whole data plane, the nodes of that Deployment read `SecretsCurrent`
/// Unknown naming the key, and the other NodeSet is untouched. (It failed with exit 7,
/// "invalid uri character", for everything.)
#[test]
fn a_hash_key_that_is_no_object_name_is_bad_input_of_its_deployments_nodes_only() {
    let api = cluster();
    bad_hash_keys(&api);
    let kc = api.kubeconfig();
    let out = run(
        &[
            "--source",
            "kube",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "status",
            "show",
            "--format",
            "json",
            "--no-nova",
        ],
        &[NOW],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let secrets = |node: &str| {
        let n = v["nodes"].as_array().unwrap().iter().find(|n| n["name"] == node).unwrap().clone();
        n["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "SecretsCurrent").unwrap().clone()
    };
    let c = secrets("edpm-compute-5");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("Unknown"), Some("InvalidEvidence")),
        "{c}"
    );
    let m = c["message"].as_str().unwrap();
    for key in ["\"has space\"", "\"../x\"", "\"a?watch=true\"", "\"a/../../b\"", "edpm-deployment-bad-keys"]
    {
        assert!(m.contains(key), "{key}: {m}");
    }
    assert_ne!(secrets("edpm-compute-3")["reason"], "InvalidEvidence");
    // The names that are names were read.
    assert!(api.requests().iter().any(|r| r.contains("/secrets/")), "{:?}", api.requests());
    no_bad_name_asked(&api);
}
