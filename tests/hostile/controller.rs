//! `status controller`: shutdown, health and leadership when the API is slow, hangs or lies about time.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::controller::{Controller, condition, leads, retry_fails, status_patches, wait_for};
use crate::status_api::cluster;
use crate::util::fake_api::{FakeApi, Fault};

const LEADER_LEASE: &str = "edpm-agent-status-controller";

/// The leader Lease, held by a replica that is gone, with `spec` as it left it.
fn left_lease(api: &FakeApi, spec: Value) {
    api.put(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": LEADER_LEASE, "namespace": "openstack"}, "spec": spec}));
}

fn holder(api: &FakeApi) -> String {
    let lease = api.object("Lease", LEADER_LEASE).unwrap();
    lease["spec"]["holderIdentity"].as_str().unwrap_or_default().to_string()
}

/// A dead leader's Lease says it was renewed in 2099: judged by when this replica saw the
/// record move (client-go's rule), it is taken over about one lease duration (15 s) after the
/// new replica first saw it, not never, and not at once either (a live holder whose clock is
/// wrong keeps its Lease while it renews).
#[test]
fn a_dead_leader_whose_lease_says_2099_is_taken_over_a_lease_duration_after_it_was_seen() {
    let api = cluster();
    left_lease(
        &api,
        json!({"holderIdentity": "dead-replica-1", "leaseDurationSeconds": 15,
            "acquireTime": "2099-01-01T00:00:00.000000Z", "renewTime": "2099-01-01T00:00:00.000000Z",
            "leaseTransitions": 3}),
    );
    let started = Instant::now();
    let c = Controller::start(&api, &["--leader-elect"]);
    wait_for("the takeover", Duration::from_secs(30), || leads(&c) == Some(true));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(14) && took <= Duration::from_secs(24),
        "took over {took:?} after the start: one lease duration (15 s) after first seeing it, plus a retry (2 s)"
    );
    assert!(holder(&api).starts_with(&format!("{}-", hostname())), "{}", holder(&api));
    let lease = api.object("Lease", LEADER_LEASE).unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 4, "{lease}");
    // The new leader looks at everything.
    wait_for("the first writes", Duration::from_secs(20), || {
        condition(&api, "edpm-compute-cell2-edpm-compute-5", "Ready").is_some()
    });
    let (code, _, err) = c.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(holder(&api).is_empty(), "released at SIGTERM");
}

/// A leader Lease whose `renewTime` is not a time is a record like any other (taken over
/// after a lease duration unchanged), told as such in a warning naming the field; never an
/// exit with an RBAC hint.
#[test]
fn a_garbage_renew_time_is_an_unreadable_record_not_an_rbac_problem() {
    let api = cluster();
    left_lease(
        &api,
        json!({"holderIdentity": "dead-replica-2", "leaseDurationSeconds": 15, "renewTime": "last tuesday"}),
    );
    let mut c = Controller::start(&api, &["--leader-elect"]);
    std::thread::sleep(Duration::from_secs(3));
    assert!(c.child.try_wait().unwrap().is_none(), "the controller exited: {:?}", c.child.try_wait());
    assert_eq!(leads(&c), Some(false), "not at once: the record was only just seen");
    assert!(status_patches(&api).is_empty(), "a replica that does not lead writes nothing");
    wait_for("the takeover", Duration::from_secs(30), || leads(&c) == Some(true));
    let (code, _, err) = c.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(r#"spec.renewTime "last tuesday" is not a time"#), "{err}");
    assert!(!err.contains("RBAC"), "{err}");
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// SIGTERM while an evaluation waits on a write the API server does not answer: with
/// `--grace-period 2` the process exits 0 within the grace period and a second for the Lease's
/// release (plus start-up of the signal's handling), releasing its leader Lease; it used to
/// wait for the request's own timeout (27 s).
#[test]
fn sigterm_with_the_api_hanging_mid_evaluation_ends_within_the_grace_period() {
    let api = cluster();
    let c = Controller::start(&api, &["--leader-elect", "--grace-period", "2"]);
    wait_for("leading and the first writes", Duration::from_secs(30), || {
        leads(&c) == Some(true) && condition(&api, "edpm-compute-cell2-edpm-compute-5", "Ready").is_some()
    });
    let mut last = status_patches(&api).len();
    wait_for("writes to settle", Duration::from_secs(10), || {
        std::thread::sleep(Duration::from_millis(500));
        let now = status_patches(&api).len();
        std::mem::replace(&mut last, now) == now
    });
    // Every status write now hangs for a minute; a change makes one.
    api.fault("/edpmnodestatuses/", Fault::Delay(Duration::from_secs(60)), 1000);
    let before = api.count("PATCH", "/edpmnodestatuses/");
    retry_fails(&api, 2);
    wait_for("a write to hang", Duration::from_secs(10), || {
        api.count("PATCH", "/edpmnodestatuses/") > before
    });
    std::thread::sleep(Duration::from_millis(300));
    let (code, took, err) = c.stop();
    assert_eq!(code, Some(0), "exit 0 within 15 s of SIGTERM ({took:?}): {err}");
    assert!(took < Duration::from_millis(4500), "SIGTERM with --grace-period 2 took {took:?}: {err}");
    assert!(holder(&api).is_empty(), "the leader Lease was released: {err}");
    assert!(err.contains("abandoned"), "{err}");
}

/// A first sync that is long because the API is slow (every status write takes 1.2 s, the
/// request timeout is 2 s, so `/healthz`'s limit is 8 s) but keeps making progress keeps
/// `/healthz` at 200 throughout, and what it says is how long ago the loop last made progress,
/// which stays short; it used to count from the last idle tick of the loop, so a long
/// evaluation looked like a stuck loop (and the liveness probe restarted it mid-sync).
#[test]
fn a_long_but_progressing_first_sync_keeps_healthz_up() {
    let api = cluster();
    let mut set = api.object("OpenStackDataPlaneNodeSet", "edpm-compute-cell1").unwrap();
    for i in 0..24 {
        let name = format!("edpm-extra-{i}");
        set["spec"]["nodes"][&name] =
            json!({"hostName": name, "ansible": {"ansibleHost": format!("192.168.122.{}", 150 + i)}});
    }
    api.put_replace(set);
    api.fault("/edpmnodestatuses/", Fault::Delay(Duration::from_millis(1200)), 100_000);
    let c = Controller::start_with(&api, &[], &[("EDPM_AGENT_KUBE_TIMEOUT", "2")]);
    wait_for("the first write", Duration::from_secs(20), || api.count("PATCH", "/edpmnodestatuses/") > 0);
    let written =
        |i: usize| condition(&api, &format!("edpm-compute-cell1-edpm-extra-{i}"), "Ready").is_some();
    let started = Instant::now();
    let mut answers = Vec::new();
    while !(0..24).all(written) {
        assert!(started.elapsed() < Duration::from_secs(60), "the first sync did not end: {answers:?}");
        answers.push(c.get("/healthz"));
        std::thread::sleep(Duration::from_millis(300));
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(5), "the sync was meant to be long: {took:?}");
    for (code, body) in &answers {
        assert_eq!(*code, 200, "{body}");
        let age: u64 = body
            .strip_prefix("ok: the loop made progress ")
            .and_then(|b| b.split(' ').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("/healthz says: {body:?}"));
        assert!(age <= 3, "no progress for {age} s in a sync that writes every 1.2 s: {body}");
    }
    assert!(answers.iter().all(|(_, b)| b.ends_with("(limit 8 s)\n")), "{answers:?}");
    drop(c);
}

/// `--nova-interval` of 2^64-1 seconds: refused when read (at most a week), never a poller
/// that panics on its first wait and never asks Nova again while the controller runs on (its
/// arithmetic saturates and a poller that panics is started again: unit tests in
/// `edpm-controller`'s `nova`).
#[test]
fn a_nova_interval_past_any_clock_is_refused_not_a_dead_poller() {
    let api = cluster();
    let kc = api.kubeconfig();
    let out = crate::hostile::run_bounded(&[
        "--source",
        "kube",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "status",
        "controller",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
        "--nova-interval",
        "18446744073709551615",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--nova-interval"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

/// Where a report creates the node agents' Leases is their own namespace; when it does not
/// exist the error says so and what to do (an apply there answers 404).
#[test]
fn the_node_agents_leases_go_to_their_own_namespace_and_a_missing_one_is_named() {
    let api = crate::status_api::cluster();
    let kc = api.kubeconfig();
    let kc = kc.to_str().unwrap();
    let report = |extra: &[&str]| {
        let mut args =
            vec!["--source", "kube", "--kubeconfig", kc, "status", "report", "--no-nova", "--timeout", "20"];
        args.extend_from_slice(extra);
        crate::util::run(&args, &[("EDPM_AGENT_NOW", "2026-11-23T12:00:00Z")])
    };
    let out = report(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let leases: Vec<Value> = api.objects("Lease");
    assert!(!leases.is_empty());
    assert!(leases.iter().all(|l| l["metadata"]["namespace"] == "edpm-node-lease"), "{leases:?}");
    // No write to any Lease of the data plane's namespace.
    assert!(
        !api.requests().iter().any(|r| !r.starts_with("GET") && r.contains("/namespaces/openstack/leases")),
        "{:?}",
        api.requests()
    );
    // Another namespace that does not exist: the apply there answers 404.
    api.fault("/namespaces/node-leases/leases/", Fault::Status(404), 1000);
    let out = report(&["--lease-namespace", "node-leases"]);
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(
        out.stderr.contains("namespace node-leases does not exist")
            && out.stderr.contains("kubectl create namespace"),
        "{}",
        out.stderr
    );
}

/// A node agent's Lease dated ahead (by less than it lasts, so no clock skew is called) whose
/// `renewTime` then stops moving: the controller turns its word Unknown a lease duration after
/// it last saw the record move, by its own clock, not a duration after the (future) time the
/// node wrote.
#[test]
fn a_node_agents_lease_ends_a_duration_after_the_controller_saw_it_move() {
    let api = cluster();
    let c = crate::controller::synced(&api);
    let object = "edpm-compute-cell1-edpm-compute-3";
    crate::controller::agent_reports(&api, object);
    wait_for("the agent's Lease", Duration::from_secs(10), || api.object("Lease", object).is_some());
    // Written by a node whose clock is 9 s ahead: renewed "in 9 s", for 10 s.
    let ahead = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(9))
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let mut lease = api.object("Lease", object).unwrap();
    lease["spec"] =
        json!({"holderIdentity": "edpm-compute-3", "leaseDurationSeconds": 10, "renewTime": ahead});
    api.put_replace(lease);
    let seen = Instant::now();
    wait_for("the agent's condition", Duration::from_secs(5), || {
        condition(&api, object, "NodeAgentReady").is_some_and(|c| c["status"] == "True")
    });
    wait_for("Unknown", Duration::from_secs(30), || {
        condition(&api, object, "NodeAgentReady").is_some_and(|c| c["status"] == "Unknown")
    });
    let took = seen.elapsed();
    // By the node's clock it would last until 19 s from now; by what the controller saw, 10 s.
    assert!(took >= Duration::from_secs(9) && took < Duration::from_secs(16), "Unknown after {took:?}");
    assert_eq!(condition(&api, object, "NodeAgentReady").unwrap()["reason"], "AgentHeartbeatExpired");
    drop(c);
}

/// One EDPMNodeStatus that does not decode: the controller writes every other node, counts it
/// (`edpm_skipped_objects`), says so in an Event and its log, and leaves it as it is (no write
/// loop on an object it cannot read back).
#[test]
fn one_unreadable_status_object_is_reported_and_the_rest_written() {
    let api = cluster();
    let broken = "edpm-compute-cell1-edpm-compute-3";
    api.put(json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus",
        "metadata": {"name": broken, "namespace": "openstack"},
        "spec": {"nodeSet": "edpm-compute-cell1", "nodeSetKind": "OpenStackDataPlaneNodeSet", "node": "edpm-compute-3"},
        "status": {"conditions": [{"type": "NodeAgentReady", "status": "Maybe", "reason": "Ready", "message": "?",
            "lastTransitionTime": "2026-11-23T12:00:00Z"}]}}));
    let c = crate::controller::Controller::start(&api, &[]);
    wait_for("the other nodes written", Duration::from_secs(20), || {
        condition(&api, "edpm-compute-cell2-edpm-compute-5", "Ready").is_some()
            && condition(&api, "edpm-compute-cell1-edpm-compute-4", "Ready").is_some()
    });
    wait_for("the Unreadable Event", Duration::from_secs(10), || {
        api.bodies("/events").iter().any(|e| e["reason"] == "Unreadable" && e["regarding"]["name"] == broken)
    });
    let (code, metrics) = c.get("/metrics");
    assert_eq!(code, 200);
    assert!(metrics.contains("edpm_skipped_objects_total{kind=\"EDPMNodeStatus\"}"), "{metrics}");
    // Something else changes: still no write of the broken object.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(api.count("PATCH", &format!("/edpmnodestatuses/{broken}")), 0, "left as it is");
    let (code, _, err) = c.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(broken) && err.contains("cannot be read"), "{err}");
}

/// The controller with a Deployment whose `secretHashes` keys are no object names: it writes
/// every NodeSet's status objects (it wrote none, retrying forever), never asks for such a
/// name, and the Deployment's nodes read `SecretsCurrent` Unknown.
#[test]
fn a_hash_key_that_is_no_object_name_stops_no_write() {
    let api = cluster();
    super::kube::bad_hash_keys(&api);
    let c = crate::controller::Controller::start(&api, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline
        && condition(&api, "edpm-compute-cell2-edpm-compute-5", "SecretsCurrent").is_none()
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    if condition(&api, "edpm-compute-cell2-edpm-compute-5", "SecretsCurrent").is_none() {
        let (_, _, err) = c.stop();
        panic!("nothing written: {err}");
    }
    wait_for("both NodeSets written", Duration::from_secs(30), || {
        condition(&api, "edpm-compute-cell1-edpm-compute-3", "Ready").is_some()
            && condition(&api, "edpm-compute-cell2-edpm-compute-5", "SecretsCurrent")
                .is_some_and(|c| c["reason"] == "InvalidEvidence")
    });
    assert!(api.object("EDPMNodeSetStatus", "edpm-compute-cell1").is_some());
    assert!(api.object("EDPMNodeSetStatus", "edpm-compute-cell2").is_some());
    super::kube::no_bad_name_asked(&api);
    let (code, _, err) = c.stop();
    assert_eq!(code, Some(0), "{err}");
}

/// A node whose clock is two minutes behind, its agent renewing its Lease every second: the
/// controller and `status show` judge the Lease by one rule (a duration after the earlier of
/// its renewTime and when the controller saw it move) and agree: NodeAgentReady Unknown,
/// AgentHeartbeatExpired, naming the clock. (The controller read it True, `status show`
/// Unknown.)
#[test]
fn a_node_whose_clock_is_behind_reads_the_same_to_the_controller_and_status_show() {
    let api = cluster();
    let c = crate::controller::synced(&api);
    let object = "edpm-compute-cell1-edpm-compute-3";
    crate::controller::agent_reports(&api, object);
    wait_for("the agent's Lease", Duration::from_secs(10), || api.object("Lease", object).is_some());
    let renew = |api: &FakeApi| {
        let behind = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(120))
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let mut lease = api.object("Lease", object).unwrap();
        lease["spec"] =
            json!({"holderIdentity": "edpm-compute-3", "leaseDurationSeconds": 40, "renewTime": behind});
        api.put_replace(lease);
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = None;
    while Instant::now() < deadline {
        renew(&api);
        let c = condition(&api, object, "NodeAgentReady");
        if c.as_ref().is_some_and(|c| c["status"] != "True") {
            seen = c;
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    // Renewed all along, and still not True to the controller.
    for _ in 0..3 {
        renew(&api);
        std::thread::sleep(Duration::from_secs(1));
    }
    let controller = condition(&api, object, "NodeAgentReady").unwrap();
    assert!(seen.is_some(), "the controller reads it True: {controller}");
    assert_eq!(
        (controller["status"].as_str(), controller["reason"].as_str()),
        (Some("Unknown"), Some("AgentHeartbeatExpired")),
        "{controller}"
    );
    assert!(controller["message"].as_str().unwrap().contains("clock is behind"), "{controller}");
    let kc = api.kubeconfig();
    let out = crate::util::run(
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
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let n = v["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "edpm-compute-3").unwrap();
    let show = n["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "NodeAgentReady").unwrap();
    assert_eq!((&show["status"], &show["reason"]), (&controller["status"], &controller["reason"]), "{show}");
    drop(c);
}

/// SIGTERM while the controller starts and the API server does not answer yet (every request
/// hangs for 20 s): it stops as documented, exit 0 within the grace period and a second,
/// saying why; it used to be ended by the signal's default action (no exit code), as the
/// handler was installed only once the watches had started.
#[test]
fn sigterm_while_starting_with_the_api_not_answering_ends_with_exit_0() {
    let api = cluster();
    api.fault("/", Fault::Delay(Duration::from_secs(20)), 100_000);
    let c = Controller::start(&api, &["--leader-elect", "--grace-period", "2"]);
    wait_for("the first request", Duration::from_secs(20), || !api.requests().is_empty());
    std::thread::sleep(Duration::from_millis(500));
    let (code, took, err) = c.stop();
    assert_eq!(code, Some(0), "ended by SIGTERM's default action, or not within 15 s ({took:?}): {err}");
    assert!(took < Duration::from_secs(5), "SIGTERM while starting took {took:?}: {err}");
    assert!(err.contains("SIGTERM"), "says why it stopped: {err}");
}

/// The controller with `/metrics` over HTTPS on a port of its own (the test CA's certificate),
/// the probes on `c.port`; with `nofile`, its limit of open files (soft, hard) set before it
/// starts. Returns it and the metrics port.
fn secure_controller(api: &FakeApi, nofile: Option<(u64, u64)>) -> (Controller, u16) {
    use std::os::unix::process::CommandExt;
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (port, metrics_port) = (free(), free());
    let kc = api.kubeconfig();
    let certs = crate::util::repo().join("tests/fixtures/tls");
    let mut cmd = std::process::Command::new(crate::util::bin());
    cmd.args(["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "controller", "--no-nova"])
        .args(["--health-probe-bind-address", &format!("127.0.0.1:{port}")])
        .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics_port}"), "--metrics-secure"])
        .args(["--metrics-cert-path", certs.to_str().unwrap()])
        .args(["--metrics-cert-name", "server.pem", "--metrics-cert-key", "server.key"])
        .env("EDPM_AGENT_LOG", "edpm_agent=info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    if let Some((soft, hard)) = nofile {
        // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit { rlim_cur: soft, rlim_max: hard };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let c = Controller { child: cmd.spawn().unwrap(), port };
    wait_for("the metrics port", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", metrics_port)).is_ok()
    });
    (c, metrics_port)
}

/// A scrape of `/metrics` with `token`: (status, body), or the client's error.
fn scrape(http: &reqwest::blocking::Client, port: u16, token: &str) -> Result<(u16, String), String> {
    let resp = http
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .bearer_auth(token)
        .send()
        .map_err(|e| format!("{e:?}"))?;
    Ok((resp.status().as_u16(), resp.text().unwrap_or_default()))
}

fn https_client(timeout: Duration) -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = std::fs::read(crate::util::repo().join("tests/fixtures/tls/ca.pem")).unwrap();
    reqwest::blocking::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&ca).unwrap())
        .timeout(timeout)
        .build()
        .unwrap()
}

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// A TokenReview that hangs: `/metrics` answers 500 within Prometheus's default scrape
/// timeout (10 s), saying the token cannot be checked now; it used to answer only after 30 s
/// (the review retried at the 15 s request timeout).
#[test]
fn a_hanging_token_review_is_a_500_within_the_scrape_timeout() {
    let api = cluster();
    api.add_token("prom-token", "prometheus", &[]);
    api.grant_non_resource("prometheus", "/metrics", "get");
    api.fault(TOKEN_REVIEWS, Fault::Delay(Duration::from_secs(40)), 1000);
    let (c, port) = secure_controller(&api, None);
    let http = https_client(Duration::from_secs(60));
    let started = Instant::now();
    let answer = scrape(&http, port, "prom-token");
    let took = started.elapsed();
    let (code, body) = answer.unwrap();
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("cannot be checked now"), "{body}");
    assert!(took < Duration::from_millis(9500), "answered after {took:?}, past a 10 s scrape timeout");
    let (code, _, err) = c.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("prom-token"), "{err}");
    assert_eq!(err.matches("did not answer the token's review").count(), 1, "told once: {err}");
}

/// One made-up token from 200 connections at once costs one TokenReview (it cost 200); then
/// 300 different made-up tokens cost a bounded burst and a few a second, the rest answered 429;
/// the answers are 401 or 429 (with `Retry-After`), never a 500 or a dropped connection.
#[test]
fn a_flood_of_made_up_tokens_costs_the_api_server_a_few_reviews() {
    let api = cluster();
    // Each review takes a second, so that the requests overlap it.
    api.fault(TOKEN_REVIEWS, Fault::Delay(Duration::from_secs(1)), 100_000);
    let (c, port) = secure_controller(&api, None);
    let http = https_client(Duration::from_secs(60));
    let reviews = || api.count("POST", TOKEN_REVIEWS);
    // Each answer's code and its Retry-After header.
    let flood = |tokens: Vec<String>| -> Vec<Result<(u16, Option<String>), String>> {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(tokens.len()));
        let threads: Vec<_> = tokens
            .into_iter()
            .map(|t| {
                let (http, barrier) = (http.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let resp = http
                        .get(format!("https://127.0.0.1:{port}/metrics"))
                        .bearer_auth(&t)
                        .send()
                        .map_err(|e| format!("{e:?}"))?;
                    let code = resp.status().as_u16();
                    let retry =
                        resp.headers().get("retry-after").map(|v| v.to_str().unwrap_or("?").to_string());
                    Ok((code, retry))
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    };
    let answers = flood(vec!["made-up".to_string(); 200]);
    assert!(answers.iter().all(|a| matches!(a, Ok((401, _)))), "{:?}", &answers[..3]);
    assert_eq!(reviews(), 1, "one TokenReview for one token from 200 connections at once");
    let started = Instant::now();
    let answers = flood((0..300).map(|i| format!("made-up-{i}")).collect());
    let secs = started.elapsed().as_secs_f64();
    let asked = reviews() - 1;
    let codes: std::collections::BTreeMap<u16, usize> =
        answers.iter().fold(Default::default(), |mut m, a| {
            *m.entry(a.as_ref().map_or(0, |(code, _)| *code)).or_default() += 1;
            m
        });
    assert!(codes.keys().all(|c| [401, 429].contains(c)), "{codes:?}");
    // A burst of 10, then 2 a second.
    let most = 10.0 + 2.0 * secs + 1.0;
    assert!((asked as f64) <= most, "{asked} TokenReviews for 300 made-up tokens in {secs:.1} s: {codes:?}");
    assert!(codes.get(&429).copied().unwrap_or(0) > 0, "{codes:?}");
    // A 429 says when to come back; nothing else does.
    for (code, retry) in answers.iter().flatten() {
        let want = (*code == 429).then(|| "1".to_string());
        assert_eq!(retry, &want, "{code}");
    }
    drop(c);
}

/// With a limit of 256 open files it cannot raise, 400 idle connections to `/metrics` neither
/// make the accept loop spin (it backs off, and holds a bounded number of connections) nor stop
/// `/healthz` from answering; a soft limit below the hard one is raised to it at start.
#[test]
fn idle_connections_neither_spin_the_controller_nor_silence_healthz() {
    let api = cluster();
    let (c, port) = secure_controller(&api, Some((256, 256)));
    wait_for("/healthz", Duration::from_secs(30), || c.get("/healthz").0 == 200);
    let idle: Vec<std::net::TcpStream> =
        (0..400).filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok()).collect();
    assert!(idle.len() > 300, "{} connections made", idle.len());
    std::thread::sleep(Duration::from_millis(500));
    let cpu = |pid: u32| -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
        // utime and stime, in clock ticks (fields 14 and 15 of the whole line).
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
    };
    let pid = c.child.id();
    let before = cpu(pid);
    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(c.get("/healthz"));
        std::thread::sleep(Duration::from_millis(500));
    }
    let used = cpu(pid) - before;
    assert!(answers.iter().all(|(code, _)| *code == 200), "{answers:?}");
    // A loop spinning on EMFILE uses a whole core (about 3 s of these 3 s).
    assert!(used < 1.5, "{used:.2} s of CPU in 3 s with idle connections open");
    drop(idle);
    drop(c);
    let (c, _) = secure_controller(&api, Some((256, 4096)));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", c.child.id())).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap().to_string();
    assert_eq!(line.split_whitespace().nth(3), Some("4096"), "the soft limit raised to the hard one: {line}");
    drop(c);
}
