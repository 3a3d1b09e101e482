//! The node agent under a real systemd: the systemd image `scripts/real-parts.sh` builds runs
//! as a podman container with systemd as PID 1 (host network, so the agent reaches the test's
//! fake API server on 127.0.0.1). The shipped unit is installed unchanged, with only the
//! drop-in the `edpm_agent_node` role writes (the binary's path), plus `WatchdogSec=6` so a
//! hung agent is caught in seconds rather than the unit's minute.
//!
//! The node runs its service containers with its own rootful podman (podman inside the
//! privileged systemd container), as an EDPM node does: systemd and podman together, so the
//! agent's `systemctl show` and `podman ps` ask the same system that runs the containers, and
//! podman's periodic health checks run as the transient systemd timers they are on a node (on a
//! host without systemd as PID 1 they never run). The alternative, the agent in the container
//! talking to the host's podman through its socket, would pair the node's systemd with another
//! system's containers, and could not test the sandbox's access to podman's own state.
//! `scripts/edpm-containers.sh` makes the containers as edpm_container_manage does.
//!
//! Without the environment (`target/real-parts.env`) these tests skip with a notice, and fail
//! in CI, as the tests that read `../shared` do.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::fake_api::FakeApi;
use crate::util::{bin, node_bin, repo, run};
use edpm_testkit::real_node::RealNode;

/// A token the agent's kubeconfig carries: it must never reach the journal.
const TOKEN: &str = "edpmRealSystemdT0ken4f9c2";
const OBJECT: &str = "edpm-compute-cell1-edpm-compute-3";

/// The environment the script wrote, or `None` (skip) outside CI.
pub(crate) fn real_parts() -> Option<Vec<(String, String)>> {
    let path = repo().join("target/real-parts.env");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(
            text.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        Err(_) if std::env::var_os("CI").is_some() => {
            panic!("{} is missing: scripts/test.sh runs scripts/real-parts.sh first", path.display())
        }
        Err(_) => {
            eprintln!("skipped: no real-parts environment (run bash scripts/real-parts.sh)");
            None
        }
    }
}

/// The node, booted with the binary under test; fails the test when it cannot boot.
struct Systemd(RealNode);

impl Systemd {
    fn boot(env: Vec<(String, String)>) -> Systemd {
        Systemd(RealNode::boot(&env, &bin(), &node_bin(), &repo()).unwrap_or_else(|e| panic!("{e}")))
    }

    fn exec(&self, script: &str) -> (bool, String) {
        self.0.exec(script)
    }

    fn write(&self, path: &str, text: &str) {
        self.0.write(path, text).unwrap_or_else(|e| panic!("{e}"));
    }

    /// One property of the agent's unit.
    fn show(&self, property: &str) -> String {
        self.0.show("edpm-agent-node", property)
    }
}

fn agent_status(api: &FakeApi, ty: &str) -> Option<Value> {
    let o = api.object("EDPMNodeStatus", OBJECT)?;
    o["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == ty).cloned()
}

fn kubeconfig(api: &FakeApi) -> String {
    let server = std::fs::read_to_string(api.kubeconfig()).unwrap();
    let server = server.lines().find_map(|l| l.trim().strip_prefix("server: ")).unwrap().to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n    token: {TOKEN}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u, namespace: openstack}}\ncurrent-context: x\n"
    )
}

#[test]
fn the_node_agent_runs_under_a_real_systemd() {
    let Some(env) = real_parts() else { return };
    let api = crate::status_api::cluster();
    let kc = api.kubeconfig();
    // The reporter creates the node's object and Lease first: the agent may only patch them.
    let out = run(&["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "report"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    let sd = Systemd::boot(env);
    let unit = std::fs::read_to_string(repo().join("packaging/systemd/edpm-agent-node.service")).unwrap();
    sd.write("/etc/systemd/system/edpm-agent-node.service", &unit);
    sd.write(
        "/etc/systemd/system/edpm-agent-node.service.d/edpm-agent.conf",
        "[Service]\nExecStart=\nExecStart=/usr/local/bin/edpm-agent-node --config /etc/edpm-agent/node.yaml\nWatchdogSec=6\n",
    );
    sd.write("/etc/edpm-agent/kubeconfig", &kubeconfig(&api));
    sd.write(
        "/etc/edpm-agent/node.yaml",
        &format!(
            "kubeconfig: /etc/edpm-agent/kubeconfig\nnamespace: openstack\nobject: {OBJECT}\nnode: edpm-compute-3\ncheck_interval_seconds: 2\nlease_interval_seconds: 1\nlease_duration_seconds: 8\nrequest_timeout_seconds: 2\ncommand_timeout_seconds: 5\n"
        ),
    );
    assert!(sd.exec("chmod 0600 /etc/edpm-agent/kubeconfig && systemctl daemon-reload").0);
    // A deployed service whose container the sandboxed agent must see through rootful podman.
    let (ok, out) = sd.exec("edpm-containers nova_compute:pass");
    assert!(ok, "edpm-containers: {out}");
    sd.write(
        "/var/lib/edpm-config/deployed_services.yaml",
        "services:\n  nova:\n    containers: [nova_compute]\n",
    );

    // Type=notify: `systemctl start` returns once READY=1 came, after the first check.
    let (ok, out) = sd.exec("systemctl start edpm-agent-node");
    assert!(ok, "systemctl start: {out}\n{}", sd.exec("journalctl -u edpm-agent-node --no-pager").1);
    assert_eq!((sd.show("ActiveState"), sd.show("SubState")), ("active".into(), "running".into()));
    let journal = sd.exec("journalctl -u edpm-agent-node --no-pager -o cat").1;
    assert!(journal.contains("first check done"), "READY=1 only after the first check: {journal}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while agent_status(&api, "NodeAgentReady").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(agent_status(&api, "NodeAgentReady").is_some(), "the agent reported from inside the sandbox");
    // From inside the sandbox it reads systemd's units and podman's containers with their
    // health (the first check may still see the health check starting).
    let deadline = Instant::now() + Duration::from_secs(20);
    let runtime = loop {
        let c = agent_status(&api, "ServiceNovaRuntimeReady");
        if c.as_ref().is_some_and(|c| c["status"] == "True") || Instant::now() > deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let runtime = runtime.unwrap_or_default();
    assert_eq!(
        runtime["status"],
        "True",
        "{runtime}\n{}",
        sd.exec("journalctl -u edpm-agent-node --no-pager").1
    );
    assert_eq!(runtime["message"], "1 container(s) active and healthy", "{runtime}");

    // The watchdog is fed: no restart over two WatchdogSec periods.
    std::thread::sleep(Duration::from_secs(13));
    assert_eq!((sd.show("ActiveState"), sd.show("NRestarts")), ("active".into(), "0".into()));

    // A hung main loop (SIGSTOP) is killed by the watchdog and restarted.
    let pid = sd.show("MainPID");
    assert!(sd.exec(&format!("kill -STOP {pid}")).0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while sd.show("NRestarts") == "0" || sd.show("ActiveState") != "active" {
        assert!(
            Instant::now() < deadline,
            "not restarted: {}",
            sd.exec("journalctl -u edpm-agent-node --no-pager").1
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let journal = sd.exec("journalctl -u edpm-agent-node --no-pager").1;
    assert!(journal.contains("Watchdog timeout"), "{journal}");

    // Its lines reach the journal with their fields, and no secret.
    let json = sd.exec("journalctl -u edpm-agent-node -o json --no-pager").1;
    let ours: Vec<Value> = json
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["SYSLOG_IDENTIFIER"] == "edpm-agent-node")
        .collect();
    assert!(
        ours.iter().any(|v| v["MESSAGE"].as_str().is_some_and(|m| m.contains("first check done"))),
        "{json}"
    );
    assert!(ours.iter().all(|v| v.get("PRIORITY").is_some()), "{json}");
    assert!(!json.contains(TOKEN), "the token reached the journal");

    // `systemctl stop`: STOPPING=1, gone within a second, exit 0, and its Lease left alone.
    let started = Instant::now();
    let (ok, out) = sd.exec("systemctl stop edpm-agent-node");
    let took = started.elapsed();
    assert!(ok, "{out}");
    assert!(took < Duration::from_millis(1500), "systemctl stop took {took:?}");
    assert_eq!((sd.show("ExecMainStatus"), sd.show("Result")), ("0".into(), "success".into()));
    let renewals = |api: &FakeApi| api.count("PATCH", &format!("/leases/{OBJECT}"));
    let before = renewals(&api);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(renewals(&api), before, "the Lease was renewed after the agent stopped");

    // The sandbox, rated by the real service manager on the installed unit.
    let (_, rating) = sd.exec("systemd-analyze security edpm-agent-node.service --no-pager | tail -1");
    let readme = std::fs::read_to_string(repo().join("docs/node-agent.md")).unwrap();
    let level = rating.split_whitespace().find(|w| w.parse::<f32>().is_ok()).unwrap_or("?").to_string();
    assert!(
        readme.contains(&format!("exposure level {level}")),
        "docs/node-agent.md's rating differs: {rating}"
    );
}

/// Each runtime problem the README names, from real containers: the agent as an operator runs
/// it on the node (`node --once`), and the reason and message it gives.
#[test]
fn the_node_agent_reports_real_containers_as_they_are() {
    let Some(env) = real_parts() else { return };
    let sd = Systemd::boot(env);
    let (ok, out) = sd.exec(
        "edpm-containers nova_compute:pass nova_virtlogd:none ovn_controller:fail \
         ovn_metadata_agent:starting ceilometer_agent_compute:pass:h-running:h-wanted iscsid:none",
    );
    assert!(ok, "edpm-containers: {out}");
    sd.write(
        "/var/lib/edpm-config/deployed_services.yaml",
        "services:\n  nova:\n    containers: [nova_compute, nova_virtlogd]\n  ovn:\n    containers: [ovn_controller]\n  neutron-metadata:\n    containers: [ovn_metadata_agent]\n  telemetry:\n    containers: [ceilometer_agent_compute]\n  iscsid:\n    containers: [iscsid]\n",
    );
    // One unit stopped, as an operator or a crash leaves it.
    assert!(sd.exec("systemctl stop edpm_nova_virtlogd.service").0);
    // podman's own timers run the health checks: wait for their verdicts rather than run them.
    let deadline = Instant::now() + Duration::from_secs(30);
    let health = |c: &str| {
        sd.exec(&format!("podman inspect -f '{{{{.State.Health.Status}}}}' {c}")).1.trim().to_string()
    };
    while (health("ovn_controller") != "unhealthy" || health("ceilometer_agent_compute") != "healthy")
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(300));
    }
    let (ok, out) = sd.exec("edpm-agent-node --once --format json");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e} (ok {ok}): {out}"));
    let cond = |ty: &str| -> (String, String, String) {
        let c = v["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty}: {out}"));
        let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
        (s("status"), s("reason"), s("message"))
    };
    assert_eq!(
        cond("ServiceNovaRuntimeReady"),
        ("False".into(), "UnitInactive".into(), "edpm_nova_virtlogd.service is inactive (dead)".into())
    );
    assert_eq!(
        cond("ServiceOvnRuntimeReady"),
        ("False".into(), "HealthcheckFailing".into(), "container ovn_controller is unhealthy".into())
    );
    assert_eq!(
        cond("ServiceNeutronMetadataRuntimeReady"),
        (
            "False".into(),
            "HealthcheckStarting".into(),
            "container ovn_metadata_agent health check is starting".into()
        )
    );
    assert_eq!(
        cond("ServiceTelemetryRuntimeReady"),
        (
            "False".into(),
            "ConfigHashMismatch".into(),
            "edpm_ceilometer_agent_compute.container has config_hash h-wanted, the container runs with h-running: restart edpm_ceilometer_agent_compute.service".into()
        )
    );
    let iscsid = cond("ServiceIscsidRuntimeReady");
    assert_eq!(
        (iscsid.0.as_str(), iscsid.2.as_str()),
        ("True", "1 container(s) active"),
        "no health check: active is enough"
    );
    assert_eq!(cond("NodeAgentReady").0, "True", "{out}");
    assert!(ok && v["ready"] == false, "--once prints the verdict and succeeds: {out}");

    // Restarting the unit brings the service back, as the message says.
    assert!(sd.exec("systemctl start edpm_nova_virtlogd.service").0);
    let (_, out) = sd.exec("edpm-agent node --once --format json");
    let v: Value = serde_json::from_str(&out).unwrap();
    let nova =
        v["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "ServiceNovaRuntimeReady").unwrap();
    assert_eq!(nova["status"], "True", "{out}");
}

#[test]
fn the_rpms_install_where_systemd_and_ansible_find_them() {
    let Some(env) = real_parts() else { return };
    let Some(top) = crate::packaging::build_rpms() else { return };
    let sd = Systemd::boot(env);
    let arch = std::env::consts::ARCH;
    let rpms = top.path().join("RPMS");
    let main = rpms.join(format!("{arch}/edpm-agent-0.1.0-1.{arch}.rpm"));
    let node = rpms.join(format!("{arch}/edpm-agent-node-0.1.0-1.{arch}.rpm"));
    for (f, to) in [(&main, "/tmp/edpm-agent.rpm"), (&node, "/tmp/edpm-agent-node.rpm")] {
        sd.0.copy_in(f, to).unwrap_or_else(|e| panic!("{e}"));
    }
    // --nodeps: Debian's rpm database knows none of the RPM dependencies (glibc, systemd),
    // which dpkg provides here.
    let (ok, out) =
        sd.exec("rpm -i --nodeps /tmp/edpm-agent.rpm /tmp/edpm-agent-node.rpm && systemctl daemon-reload");
    assert!(ok, "rpm -i: {out}");
    // The package's path; systemd names it by its first unit directory, `/lib/systemd/system`
    // on a merged-/usr Debian (the same directory), `/usr/lib/systemd/system` on RHEL.
    let fragment = sd.show("FragmentPath");
    assert!(
        ["/usr/lib/systemd/system/edpm-agent-node.service", "/lib/systemd/system/edpm-agent-node.service"]
            .contains(&fragment.as_str()),
        "{fragment}"
    );
    assert!(sd.exec("test -f /usr/lib/systemd/system/edpm-agent-node.service").0);
    assert_eq!(sd.show("LoadState"), "loaded");
    let (ok, out) = sd.exec("systemctl cat edpm-agent-node | grep -x 'ExecStart=/usr/bin/edpm-agent-node --config /etc/edpm-agent/node.yaml'");
    assert!(ok, "{out}");
    // Without node.yaml the unit's condition keeps it from starting, as the spec promises.
    let (_, out) =
        sd.exec("systemctl start edpm-agent-node; systemctl show -p ConditionResult --value edpm-agent-node");
    assert_eq!(out.trim(), "no", "{out}");

    // The inventory script, as Ansible runs it, from the installed package.
    sd.0.copy_in(&repo().join("examples"), "/tmp/examples").unwrap_or_else(|e| panic!("{e}"));
    let (ok, out) =
        sd.exec("EDPM_AGENT_CONFIG= EDPM_AGENT_SOURCE=/tmp/examples /usr/bin/edpm-inventory --list");
    assert!(ok, "edpm-inventory --list: {out}");
    let inv: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(inv["_meta"]["hostvars"].as_object().is_some_and(|h| !h.is_empty()), "{out}");
}
