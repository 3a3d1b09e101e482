//! Control characters and secrets in every human output: tables, explanations, logs, errors.

use serde_json::json;

use super::readiness::Fixture;
use crate::util::run;

/// What a hostile name or message holds: clear the screen, go back to the start of the line
/// and write a fake table row, ring the bell.
const HOSTILE: &str = "\u{1b}[2J\rFAKE-ROW ok ok ok ok\u{7}";

fn assert_no_controls(what: &str, text: &str) {
    let bad: Vec<char> = text.chars().filter(|c| c.is_control() && *c != '\n').collect();
    assert!(bad.is_empty(), "{what} printed control characters {bad:?}:\n{text}");
}

/// A node key, a Nova disabled reason and a pod's hostFailures holding ESC, CR and BEL are
/// shown escaped by `status show` and `status explain`; `validate` flags the key as an error
/// (it used to exit 0 echoing it raw).
#[test]
fn hostile_text_is_escaped_in_status_and_flagged_by_validate() {
    let f = Fixture::new();
    let key = format!("edpm-compute-9{HOSTILE}");
    f.edit("nodeset/nodesets.yaml", |docs| {
        let set = docs.iter_mut().find(|d| d["metadata"]["name"] == "edpm-compute-cell1").unwrap();
        set["spec"]["nodes"][&key] =
            json!({"hostName": "edpm-compute-9", "ansible": {"ansibleHost": "192.168.122.109"}});
    });
    f.edit("status/pods.yaml", |pods| {
        for p in pods.iter_mut() {
            let c = &mut p["status"]["containerStatuses"][0]["state"]["terminated"];
            if let Some(m) = c["message"].as_str() {
                // Inside the termination message's JSON the characters are JSON escapes.
                let escaped = serde_json::to_string(HOSTILE).unwrap();
                c["message"] =
                    json!(m.replace("Deploy nova", &format!("Deploy nova{}", escaped.trim_matches('"'))));
            }
        }
    });
    f.add(
        "status/nova-compute-services.json",
        &json!({"services": [
            {"id": "1", "binary": "nova-compute", "host": "edpm-compute-3.ctlplane.example.com", "state": "up",
                "status": "disabled", "disabled_reason": format!("maintenance{HOSTILE}")},
            {"id": "2", "binary": "nova-compute", "host": "edpm-compute-4.lab.example.com", "state": "up", "status": "enabled"}]}),
    );
    let out = f.status(&["show"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_no_controls("status show", &out.stdout);
    assert!(out.stdout.contains("edpm-compute-9\\e[2J"), "{}", out.stdout);
    for node in ["edpm-compute-3", "edpm-compute-5", key.as_str()] {
        let out = f.status(&["explain", node]);
        assert_eq!(out.code, 0, "{node}: {}", out.stderr);
        assert_no_controls("status explain", &out.stdout);
        assert!(out.stdout.contains("\\e[2J\\rFAKE-ROW"), "{node}: {}", out.stdout);
    }
    let src = f.src.to_str().unwrap();
    let out = run(&["--source", src, "validate"], &[]);
    assert_eq!(out.code, 9, "validate fails: {}\n{}", out.stdout, out.stderr);
    assert_no_controls("validate", &out.stdout);
    assert!(
        out.stdout.contains("control character") && out.stdout.contains("edpm-compute-9\\e"),
        "{}",
        out.stdout
    );
}

/// A pod's `hostFailures` holding secrets (an older runner's, anyone's) reaches neither the
/// conditions (`status show`/`explain`, the status objects `report` writes) nor stdout:
/// they pass the one redactor.
#[test]
fn secrets_in_a_pods_host_failures_never_reach_conditions() {
    let f = Fixture::new();
    f.edit("status/pods.yaml", |pods| {
        for p in pods.iter_mut() {
            let c = &mut p["status"]["containerStatuses"][0]["state"]["terminated"];
            if let Some(m) = c["message"].as_str() {
                let leak = "Deploy nova: connect mysql+pymysql://nova:dbpass-4242@openstack.svc/nova failed, password=hunter2-4242";
                c["message"] = json!(m.replace("Deploy nova", leak));
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["show", "--format", "json"],
        vec!["explain", "edpm-compute-5"],
        vec!["report", "--status-dir", dir.path().to_str().unwrap()],
    ] {
        let out = f.status(&args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        for secret in ["dbpass-4242", "hunter2-4242"] {
            assert!(
                !out.stdout.contains(secret) && !out.stderr.contains(secret),
                "{args:?} showed {secret}: {}",
                out.stdout
            );
        }
    }
    let explained = f.status(&["explain", "edpm-compute-5"]).stdout;
    assert!(explained.contains("mysql+pymysql://nova:********@openstack.svc/nova"), "{explained}");
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(!text.contains("dbpass-4242") && !text.contains("hunter2-4242"), "{text}");
    }
}

/// An OS_AUTH_URL with a password in it (`--nova-credentials`) is masked in the conditions
/// `status show` prints, in the status objects `status report` writes and in the log.
#[test]
fn a_password_in_os_auth_url_never_reaches_conditions_or_logs() {
    use crate::nova::{NOW, b64, cluster, program};
    use edpm_testkit::fake_nova::{self, FakeNova};
    let nova = FakeNova::start();
    program(&nova);
    let api = cluster(&nova, fake_nova::PASSWORD);
    // Port 9 on loopback: nobody answers, so the message quotes the URL.
    api.put(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nova-check", "namespace": "openstack"},
        "type": "Opaque", "data": {
            "OS_AUTH_URL": b64("http://admin:urlpass-4242@127.0.0.1:9/v3"), "OS_USERNAME": b64(fake_nova::USER),
            "OS_PASSWORD": b64(fake_nova::PASSWORD), "OS_PROJECT_NAME": b64(fake_nova::PROJECT)}}));
    let kc = api.kubeconfig();
    let kc = kc.to_str().unwrap();
    for action in ["show", "report"] {
        let out = run(
            &[
                "-vv",
                "--source",
                "kube",
                "--kubeconfig",
                kc,
                "status",
                action,
                "--nova-credentials",
                "nova-check",
                "--nova-timeout",
                "2",
            ],
            &[NOW],
        );
        assert_eq!(out.code, 0, "{action}: {}", out.stderr);
        assert!(
            !out.stdout.contains("urlpass-4242") && !out.stderr.contains("urlpass-4242"),
            "{action}: {}\n{}",
            out.stdout,
            out.stderr
        );
    }
    let written = serde_json::to_string(&api.objects("EDPMNodeStatus")).unwrap();
    assert!(written.contains("NovaAPIUnavailable"), "{written}");
    assert!(!written.contains("urlpass-4242"), "{written}");
}
