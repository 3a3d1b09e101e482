//! The node agent against a temporary root (with `stage`'s real output), fake `systemctl` and
//! `podman` on PATH, the fake API server, and a notify socket: one check, the loop's first
//! report, nothing more while nothing changes (apart from the Lease), an outage, SIGTERM.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::fake_api::{FakeApi, Fault};
use crate::util::{bin, node_bin, run, run_program};

/// A node root as edpm-ansible and `edpm-agent stage` leave it, for edpm-compute-3.
pub(crate) fn node_root(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("etc/hostname", "edpm-compute-3\n");
    w(
        "proc/net/fib_trie",
        "Local:\n  +-- 192.168.122.0/24 2 0 2\n     |-- 192.168.122.103\n        /32 host LOCAL\n",
    );
    w("etc/os-release", "NAME=\"CentOS Stream\"\nPRETTY_NAME=\"CentOS Stream 9\"\n");
    w("var/lib/edpm-config/os-net-config.returncode", "0\n");
    // podman in its place, executable (the agent's `podman` is the fake on PATH).
    w("usr/bin/podman", "");
    std::fs::set_permissions(
        root.join("usr/bin/podman"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    w(
        "var/lib/edpm-config/deployed_services.yaml",
        "services:\n  nova:\n    containers: [nova_compute]\n    updated_at: '2026-11-01T10:00:00Z'\n  ovn:\n    containers: [ovn_controller]\n    updated_at: '2026-11-01T10:00:00Z'\n",
    );
    w(
        "etc/containers/systemd/edpm_nova_compute.container",
        "# config_hash=abc123\n[Container]\nImage=nova\n",
    );
    // The files stage writes, with its manifest.
    let out = run(
        &[
            "--config",
            "examples/edpm-agent-nodeset.yaml",
            "stage",
            "--node",
            "edpm-compute-3",
            "--root",
            root.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    root
}

/// `systemctl` and `podman` that answer from files the test controls.
pub(crate) fn fake_tools(dir: &Path) -> PathBuf {
    let bin_dir = dir.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let tool = |name: &str, body: &str| {
        let p = bin_dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    tool("systemctl", &format!("cat {}", dir.join("units.txt").display()));
    tool("podman", &format!("cat {}", dir.join("ps.json").display()));
    set_units(dir, "active", "active");
    std::fs::write(
        dir.join("ps.json"),
        r#"[{"Names":["nova_compute"],"Status":"Up 2 hours (healthy)","Labels":{"config_hash":"abc123"}},{"Names":["ovn_controller"],"Status":"Up 2 hours","Labels":{}}]"#,
    )
    .unwrap();
    bin_dir
}

fn set_units(dir: &Path, nova: &str, ovn: &str) {
    std::fs::write(
        dir.join("units.txt"),
        format!(
            "Id=edpm_nova_compute.service\nLoadState=loaded\nActiveState={nova}\nSubState=running\nNeedDaemonReload=no\n\nId=edpm_ovn_controller.service\nLoadState=loaded\nActiveState={ovn}\nSubState=running\nNeedDaemonReload=no\n"
        ),
    )
    .unwrap();
}

pub(crate) fn path_with(bin_dir: &Path) -> String {
    format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default())
}

fn once(root: &Path, bin_dir: &Path, config: Option<&Path>) -> Value {
    let path = path_with(bin_dir);
    let mut args = vec!["node", "--once", "--format", "json", "--root", root.to_str().unwrap()];
    if let Some(c) = config {
        args.extend(["--config", c.to_str().unwrap()]);
    }
    let out = run_program(&bin(), &args, &[("PATH", &path)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

fn cond<'a>(v: &'a Value, ty: &str) -> &'a Value {
    v["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {v}"))
}

fn config(dir: &Path, root: &Path, kubeconfig: Option<&Path>) -> PathBuf {
    let p = dir.join("node.yaml");
    std::fs::write(
        &p,
        config_text(root, kubeconfig, "openstack", "edpm-compute-cell1-edpm-compute-3", "edpm-node-lease"),
    )
    .unwrap();
    p
}

/// edpm-compute-3's node.yaml, as the agent of status object `object` in `namespace`, its Lease
/// in `leases`.
pub(crate) fn config_text(
    root: &Path,
    kubeconfig: Option<&Path>,
    namespace: &str,
    object: &str,
    leases: &str,
) -> String {
    let kc = kubeconfig.map(|k| format!("kubeconfig: {}\n", k.display())).unwrap_or_default();
    format!(
        "{kc}namespace: {namespace}\nlease_namespace: {leases}\nobject: {object}\nnode: edpm-compute-3\nroot: {}\nexpect:\n  hostname: edpm-compute-3.ctlplane.example.com\n  addresses: [192.168.122.103]\n  os: CentOS Stream\ncheck_interval_seconds: 1\nlease_interval_seconds: 1\nlease_duration_seconds: 4\nrequest_timeout_seconds: 2\ncommand_timeout_seconds: 1\n",
        root.display()
    )
}

#[test]
fn one_check_finds_each_problem_and_never_prints_contents() {
    let d = tempfile::tempdir().unwrap();
    let root = node_root(d.path());
    let tools = fake_tools(d.path());
    let cfg = config(d.path(), &root, None);
    let v = once(&root, &tools, Some(&cfg));
    assert_eq!(cond(&v, "NodeAgentReady")["status"], "True", "{v}");
    assert_eq!(cond(&v, "ServiceNovaRuntimeReady")["message"], "1 container(s) active and healthy");
    assert_eq!(v["ready"], true);

    // A staged Secret-derived file edited by hand: named, its content never shown.
    let staged = root.join("var/lib/openstack/configs/nova/01-nova.conf");
    let secret_text = std::fs::read_to_string(&staged).unwrap();
    std::fs::write(&staged, "[DEFAULT]\ntransport_url = rabbit://edited:hunter2@x\n").unwrap();
    let out = run_program(
        &bin(),
        &["node", "--once", "--format", "json", "--config", cfg.to_str().unwrap()],
        &[("PATH", &path_with(&tools))],
    );
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let c = cond(&v, "NodeAgentReady");
    assert_eq!(c["reason"], "StagedFileMismatch");
    assert!(
        c["message"].as_str().unwrap().contains("var/lib/openstack/configs/nova/01-nova.conf (content)"),
        "{c}"
    );
    assert!(!out.stdout.contains("hunter2") && !out.stdout.contains(&secret_text[..20]));
    std::fs::write(&staged, secret_text).unwrap();

    // One reason per runtime problem.
    set_units(d.path(), "failed", "active");
    assert_eq!(cond(&once(&root, &tools, Some(&cfg)), "ServiceNovaRuntimeReady")["reason"], "UnitInactive");
    set_units(d.path(), "active", "active");
    std::fs::write(
        d.path().join("ps.json"),
        r#"[{"Names":["nova_compute"],"Status":"Up (unhealthy)","Labels":{"config_hash":"abc123"}}]"#,
    )
    .unwrap();
    assert_eq!(
        cond(&once(&root, &tools, Some(&cfg)), "ServiceNovaRuntimeReady")["reason"],
        "HealthcheckFailing"
    );
    std::fs::write(
        d.path().join("ps.json"),
        r#"[{"Names":["nova_compute"],"Status":"Up (healthy)","Labels":{"config_hash":"old"}}]"#,
    )
    .unwrap();
    assert_eq!(
        cond(&once(&root, &tools, Some(&cfg)), "ServiceNovaRuntimeReady")["reason"],
        "ConfigHashMismatch"
    );
    std::fs::write(root.join("var/lib/edpm-config/os-net-config.returncode"), "1\n").unwrap();
    assert_eq!(cond(&once(&root, &tools, Some(&cfg)), "NodeAgentReady")["reason"], "NetworkConfigFailed");
    std::fs::write(root.join("etc/hostname"), "localhost\n").unwrap();
    assert_eq!(cond(&once(&root, &tools, Some(&cfg)), "NodeAgentReady")["reason"], "HostnameMismatch");

    // Without a config: the checks that need no expectation, on the given root.
    let v = once(&root, &tools, None);
    assert_eq!(v["node"], Value::Null);
    assert!(v["conditions"].as_array().unwrap().len() >= 3);
}

/// Collects notify datagrams as systemd does, reading continuously: a notify socket nobody
/// reads fills up and blocks the sender.
fn listen(sock: UnixDatagram) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = sock.recv(&mut buf) {
            g.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    });
    got
}

/// Waits until a notify message with the line `want` arrived.
fn wait_for(got: &std::sync::Mutex<Vec<String>>, want: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if got.lock().unwrap().iter().any(|m| m.lines().any(|l| l == want)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn agent_status(api: &FakeApi, ty: &str) -> Option<Value> {
    let o = api.object("EDPMNodeStatus", "edpm-compute-cell1-edpm-compute-3")?;
    o["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == ty).cloned()
}

#[test]
fn the_loop_reports_renews_survives_an_outage_and_stops_on_sigterm() {
    let d = tempfile::tempdir().unwrap();
    let root = node_root(d.path());
    let tools = fake_tools(d.path());
    let api = crate::status_api::cluster();
    let kc = api.kubeconfig();
    // The reporter creates the node's object and Lease first: the agent may only patch them.
    let out = run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "report"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cfg = config(d.path(), &root, Some(&kc));
    let sock_path = d.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    // As the unit runs it: the node agent's own binary.
    let mut child = Command::new(node_bin())
        .args(["--config", cfg.to_str().unwrap()])
        .env_clear()
        .env("PATH", path_with(&tools))
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "1000000")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.path().join("agent.log")).unwrap())
        .spawn()
        .unwrap();
    let got = listen(sock);
    assert!(wait_for(&got, "READY=1", Duration::from_secs(20)), "no READY=1: {got:?}");
    assert!(wait_for(&got, "WATCHDOG=1", Duration::from_secs(5)), "no WATCHDOG=1: {got:?}");

    // The first report arrives; then only the Lease moves while nothing changes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent_status(&api, "NodeAgentReady").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(agent_status(&api, "NodeAgentReady").unwrap()["status"], "True");
    assert_eq!(agent_status(&api, "ServiceNovaRuntimeReady").unwrap()["status"], "True");
    assert!(agent_status(&api, "ServicesReady").is_some(), "the reporter's conditions stay");
    let status_writes = |api: &FakeApi| api.count("PATCH", "fieldManager=edpm-agent-node");
    let lease_writes = |api: &FakeApi| api.count("PATCH", "/leases/edpm-compute-cell1-edpm-compute-3");
    let (s0, l0) = (status_writes(&api), lease_writes(&api));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(status_writes(&api), s0, "no status write while nothing changed");
    assert!(lease_writes(&api) >= l0 + 2, "the Lease is renewed every second here");
    let lease = api.object("Lease", "edpm-compute-cell1-edpm-compute-3").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "edpm-compute-3");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 4);

    // The API goes away; the node changes meanwhile; the API returns: the latest state arrives.
    api.fault("/apis/", Fault::Status(503), 100_000);
    std::thread::sleep(Duration::from_secs(2));
    set_units(d.path(), "failed", "active");
    std::thread::sleep(Duration::from_secs(3));
    api.clear_faults();
    let deadline = Instant::now() + Duration::from_secs(90);
    while agent_status(&api, "ServiceNovaRuntimeReady").unwrap()["status"] == "True"
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = || std::fs::read_to_string(d.path().join("agent.log")).unwrap_or_default();
    assert_eq!(agent_status(&api, "ServiceNovaRuntimeReady").unwrap()["reason"], "UnitInactive", "{}", log());

    // SIGTERM: STOPPING=1, and gone within a second.
    let started = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(wait_for(&got, "STOPPING=1", Duration::from_secs(2)), "no STOPPING=1: {got:?}");
    let watchdogs = got.lock().unwrap().iter().filter(|m| m.lines().any(|l| l == "WATCHDOG=1")).count();
    assert!(
        watchdogs >= 10,
        "WATCHDOG=1 every half second from the loop, also during the outage: {watchdogs}"
    );
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(2), "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert!(status.success(), "{status}");
    let err = log();
    assert!(err.contains("first check done") && !err.contains("hunter2"), "{err}");
}

/// `edpm-agent-node` (what the unit runs) and `edpm-agent node` (operators' habit) are the
/// same agent: the same check, the same output, the same exit codes.
#[test]
fn the_node_agents_own_binary_is_edpm_agent_node() {
    let d = tempfile::tempdir().unwrap();
    let root = node_root(d.path());
    let tools = fake_tools(d.path());
    let cfg = config(d.path(), &root, None);
    let path = path_with(&tools);
    let without_times = |text: &str| {
        let mut v: Value = serde_json::from_str(text).unwrap();
        for c in v["conditions"].as_array_mut().unwrap() {
            c.as_object_mut().unwrap().remove("lastTransitionTime");
        }
        v
    };
    let args = ["--once", "--format", "json", "--config", cfg.to_str().unwrap()];
    let own = run_program(&node_bin(), &args, &[("PATH", &path)]);
    let product = run_program(&bin(), &[&["node"][..], &args].concat(), &[("PATH", &path)]);
    assert_eq!((own.code, product.code), (0, 0), "{}\n{}", own.stderr, product.stderr);
    assert_eq!(without_times(&own.stdout), without_times(&product.stdout));
    assert_eq!(cond(&without_times(&own.stdout), "ServiceNovaRuntimeReady")["status"], "True");

    // A malformed config: exit 3 from both, the same message under each one's name.
    let bad = d.path().join("bad.yaml");
    std::fs::write(&bad, "namespace: [\n").unwrap();
    let own = run_program(&node_bin(), &["--once", "--config", bad.to_str().unwrap()], &[]);
    let product = run_program(&bin(), &["node", "--once", "--config", bad.to_str().unwrap()], &[]);
    assert_eq!((own.code, product.code), (3, 3), "{}\n{}", own.stderr, product.stderr);
    assert_eq!(
        own.stderr.strip_prefix("edpm-agent-node: error: "),
        product.stderr.strip_prefix("edpm-agent: error: "),
        "{}\n{}",
        own.stderr,
        product.stderr
    );
    // Bad usage: clap's exit 2.
    assert_eq!(run_program(&node_bin(), &["--no-such-flag"], &[]).code, 2);
    let version = run_program(&node_bin(), &["--version"], &[]);
    assert_eq!(version.code, 0);
    assert!(version.stdout.starts_with("edpm-agent-node "), "{}", version.stdout);
}

/// A container restarted on a stale image after a failed update: the agent reads the images
/// last deployed to its node (its object's `spec.record.containerImages`, a GET of its own object,
/// which its RBAC grants) and says `ImageMismatch` for the container of that repository.
#[test]
fn a_container_on_another_image_than_deployed_is_an_image_mismatch() {
    let d = tempfile::tempdir().unwrap();
    let root = node_root(d.path());
    let tools = fake_tools(d.path());
    std::fs::write(
        d.path().join("ps.json"),
        r#"[{"Names":["nova_compute"],"Status":"Up 2 hours (healthy)","Labels":{"config_hash":"abc123"},"Image":"quay.io/podified/openstack-nova-compute:18.0.3"},{"Names":["ovn_controller"],"Status":"Up 2 hours","Labels":{},"Image":"quay.io/podified/openstack-ovn-controller:18.0.4"}]"#,
    )
    .unwrap();
    let api = crate::status_api::cluster();
    let kc = api.kubeconfig();
    let out = run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "report"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let object = "edpm-compute-cell1-edpm-compute-3";
    let (code, body) = api.patch(
        &format!("/apis/agent.edpm.openstack.org/v1alpha1/namespaces/openstack/edpmnodestatuses/{object}?fieldManager=edpm-agent&force=true"),
        &serde_json::json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus", "metadata": {"name": object},
            "spec": {"record": {"containerImages": {
                "NovaComputeImage": {"value": "quay.io/podified/openstack-nova-compute:18.0.4", "deployment": "update-1"},
                "OvnControllerImage": {"value": "quay.io/podified/openstack-ovn-controller:18.0.4", "deployment": "ovn-1"}}}}}),
    );
    assert_eq!(code, 200, "{body}");
    let cfg = config(d.path(), &root, Some(&kc));
    let mut child = Command::new(node_bin())
        .args(["--config", cfg.to_str().unwrap()])
        .env_clear()
        .env("PATH", path_with(&tools))
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mismatch = loop {
        if let Some(c) = agent_status(&api, "ServiceNovaRuntimeReady")
            && c["reason"] == "ImageMismatch"
        {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "no ImageMismatch: {:?}",
            agent_status(&api, "ServiceNovaRuntimeReady")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (mismatch["status"].as_str(), mismatch["severity"].as_str()),
        (Some("False"), Some("Warning"))
    );
    let m = mismatch["message"].as_str().unwrap();
    assert!(m.contains("container nova_compute runs quay.io/podified/openstack-nova-compute:18.0.3; quay.io/podified/openstack-nova-compute:18.0.4 was deployed"), "{m}");
    // The ovn container runs what was deployed.
    let ovn = agent_status(&api, "ServiceOvnRuntimeReady");
    assert!(ovn.as_ref().is_none_or(|c| c["reason"] != "ImageMismatch"), "{ovn:?}");
    assert!(api.count("GET", &format!("/edpmnodestatuses/{object}")) >= 1, "the agent read its own object");
}
