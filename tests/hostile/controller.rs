//! `status controller`: shutdown, health and leadership when the API is slow, hangs or lies about time.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::controller::{Controller, condition, leads, status_patches, wait_for};
use crate::status_api::cluster;
use crate::util::fake_api::FakeApi;

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
