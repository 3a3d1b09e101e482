//! edpm-agent's images, built from this checkout's source by `scripts/image.sh` (which
//! `scripts/real-parts.sh` runs: `packaging/Containerfile`'s builder stage on a local Debian
//! builder with the host's toolchain, the runner on a local stand-in for the upstream runner
//! image with Python, ansible-core, ansible-runner and dumb-init at the tests' versions, the
//! controller on the Debian base), and run as Kubernetes runs them: the runner with the Job's
//! command, environment and mounts, as an arbitrary UID with no passwd entry and group 0; the
//! controller as the Deployment runs it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

fn podman(env: &[(String, String)], args: &[&str]) -> (i32, String) {
    let out = Command::new("podman")
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("podman");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// Containers this test made, removed when dropped.
struct Cleanup {
    env: Vec<(String, String)>,
    containers: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = podman(&self.env, &["rm", "-f", "-t", "0", c]);
        }
    }
}

/// The image `scripts/real-parts.sh` built (its variable in the real-parts environment).
fn image(env: &[(String, String)], var: &str) -> String {
    let image = env.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone());
    let image = image
        .unwrap_or_else(|| panic!("{var} is not in target/real-parts.env: run bash scripts/real-parts.sh"));
    let (code, out) = podman(env, &["image", "exists", &image]);
    assert_eq!(code, 0, "{image} (built by scripts/real-parts.sh) is not in podman's storage: {out}");
    image
}

/// A runner directory's mounted parts, as the operator mounts them: the inventory, the SSH
/// key, the termination log, and a host directory for the artifacts (to read them back).
struct JobMounts {
    dir: tempfile::TempDir,
}

impl JobMounts {
    fn new(hosts: &[&str]) -> JobMounts {
        let dir = tempfile::tempdir().unwrap();
        let mut inv = String::from("all:\n  hosts:\n");
        for h in hosts {
            inv.push_str(&format!("    {h}: {{ansible_connection: local, ansible_python_interpreter: /opt/ansible/bin/python3}}\n"));
        }
        std::fs::create_dir_all(dir.path().join("inventory")).unwrap();
        std::fs::write(dir.path().join("inventory/hosts"), inv).unwrap();
        // The Job mounts the NodeSet's SSH key there; ansible-runner loads it into an agent.
        let key = dir.path().join("ssh_key");
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(made.success());
        Command::new("chmod").args(["0644", key.to_str().unwrap()]).status().unwrap();
        std::fs::write(dir.path().join("termination-log"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("artifacts")).unwrap();
        // The arbitrary UID writes the artifacts and the termination log.
        for p in ["artifacts", "termination-log"] {
            Command::new("chmod").args(["0777", dir.path().join(p).to_str().unwrap()]).status().unwrap();
        }
        JobMounts { dir }
    }

    fn args(&self) -> Vec<String> {
        let p = |rel: &str| self.dir.path().join(rel).display().to_string();
        vec![
            "--user".into(),
            "1000650000:0".into(),
            "-v".into(),
            format!("{}:/runner/inventory:ro", p("inventory")),
            "-v".into(),
            format!("{}:/runner/env/ssh_key:ro", p("ssh_key")),
            "-v".into(),
            format!("{}:/dev/termination-log", p("termination-log")),
            "-v".into(),
            format!("{}:/runner/artifacts", p("artifacts")),
        ]
    }

    fn summary(&self, ident: &str) -> Value {
        let p = self.dir.path().join("artifacts").join(ident).join("edpm-summary.json");
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            .unwrap()
    }

    fn termination(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.dir.path().join("termination-log")).unwrap())
            .unwrap()
    }
}

const PLAY: &str = "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: Deploy nova\n      ansible.builtin.fail:\n        msg: cannot pull image\n      when: inventory_hostname == 'bad-0'\n";
const SLOW: &str =
    "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.command: sleep 120\n";

#[test]
fn the_runner_image_runs_the_job_as_kubernetes_does() {
    let Some(env) = crate::real_systemd::real_parts() else { return };
    let tag = image(&env, "EDPM_REAL_RUNNER_IMAGE");
    let mut cleanup = Cleanup { env: env.clone(), containers: Vec::new() };

    // A passing and a failing host: the play's exit code is the container's.
    let job = JobMounts::new(&["ok-0", "bad-0"]);
    let name = format!("edpm-runner-test-{}-a", std::process::id());
    cleanup.containers.push(name.clone());
    let mut args: Vec<String> = vec!["run".into(), "--name".into(), name.clone()];
    args.extend(job.args());
    args.extend(["-e".into(), format!("RUNNER_PLAYBOOK={PLAY}")]);
    args.extend(
        [&tag, "ansible-runner", "run", "/runner", "-p", "playbook.yaml", "-i", "deploy-nova-edpm"]
            .map(String::from),
    );
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out) = podman(&env, &argv);
    assert_eq!(code, 2, "{out}");
    let s = job.summary("deploy-nova-edpm");
    assert_eq!(s["status"], "failed", "{s}");
    assert_eq!(s["hosts"]["ok-0"]["status"], "ok", "{s}");
    assert_eq!(s["hosts"]["bad-0"]["status"], "failed", "{s}");
    assert_eq!(s["hosts"]["bad-0"]["failedTask"]["message"], "cannot pull image", "{s}");
    let t = job.termination();
    assert_eq!((t["failedHosts"].as_u64(), t["totalHosts"].as_u64()), (Some(1), Some(2)), "{t}");
    assert_eq!(t["failedHostList"], serde_json::json!(["bad-0"]), "{t}");

    // SIGTERM (`podman stop`, as the kubelet stops a pod): canceled within the grace period,
    // and the container exits with the play's status.
    let job = JobMounts::new(&["ok-0"]);
    let name = format!("edpm-runner-test-{}-b", std::process::id());
    cleanup.containers.push(name.clone());
    let mut args: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), name.clone()];
    args.extend(job.args());
    args.extend([
        "-e".into(),
        format!("RUNNER_PLAYBOOK={SLOW}"),
        "-e".into(),
        "EDPM_AGENT_GRACE_PERIOD=5".into(),
    ]);
    args.extend(
        [&tag, "ansible-runner", "run", "/runner", "-p", "playbook.yaml", "-i", "slow"].map(String::from),
    );
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out) = podman(&env, &argv);
    assert_eq!(code, 0, "{out}");
    let events = job.dir.path().join("artifacts/slow/job_events");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_dir(&events).is_ok_and(|d| d.count() >= 3) {
        assert!(Instant::now() < deadline, "the play did not start: {}", podman(&env, &["logs", &name]).1);
        std::thread::sleep(Duration::from_millis(200));
    }
    let started = Instant::now();
    let (code, out) = podman(&env, &["stop", "-t", "20", &name]);
    assert_eq!(code, 0, "{out}");
    assert!(started.elapsed() < Duration::from_secs(15), "stop took {:?}", started.elapsed());
    let (_, exit) = podman(&env, &["inspect", "-f", "{{.State.ExitCode}}", &name]);
    let s = job.summary("slow");
    assert_eq!(s["status"], "canceled", "{s}");
    assert_eq!(exit.trim(), (s["rc"].as_i64().unwrap() & 0xff).to_string(), "{s}");
    assert!(Path::new(&job.dir.path().join("termination-log")).exists());
    assert_eq!(job.termination()["status"], "canceled");

    // A read-only root. openstack-operator's Job sets no securityContext (its root is
    // writable); a site that adds `readOnlyRootFilesystem` must give the play writable
    // emptyDirs. Without /tmp, the job says which path it could not write, in its termination
    // message too; with /tmp, /runner/project (RUNNER_PLAYBOOK is written there) and
    // /runner/.ansible (Ansible's home), the play runs.
    let read_only = |job: &JobMounts, ident: &str, writable: &[&str]| {
        let mut args: Vec<String> =
            ["run", "--rm", "--read-only", "--read-only-tmpfs=false"].map(String::from).to_vec();
        for w in writable {
            args.extend(["--tmpfs".into(), format!("{w}:mode=1777")]);
        }
        args.extend(job.args());
        args.extend(["-e".into(), format!("RUNNER_PLAYBOOK={PLAY}")]);
        args.extend(
            [&tag, "ansible-runner", "run", "/runner", "-p", "playbook.yaml", "-i", ident].map(String::from),
        );
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        podman(&env, &argv)
    };
    let job = JobMounts::new(&["ok-0"]);
    let (code, out) = read_only(&job, "ro-a", &[]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("Read-only file system") && out.contains("/tmp"), "{out}");
    assert_eq!(job.termination()["status"], "invalid");
    let job = JobMounts::new(&["ok-0", "bad-0"]);
    let (code, out) = read_only(&job, "ro-b", &["/tmp", "/runner/project", "/runner/.ansible"]);
    assert_eq!(code, 2, "{out}");
    let s = job.summary("ro-b");
    assert_eq!(
        (&s["hosts"]["ok-0"]["status"], &s["hosts"]["bad-0"]["status"]),
        (&"ok".into(), &"failed".into()),
        "{s}"
    );
    assert_eq!(job.termination()["failedHostList"], serde_json::json!(["bad-0"]));
}

/// The status controller's image (`packaging/Containerfile`'s `controller` stage, on the local
/// Debian base), run as the Deployment runs it: a non-root user, a read-only root, no
/// capabilities; it starts, answers `/healthz` and `/readyz` over HTTP and `/metrics` over
/// HTTPS (its self-signed certificate, no certificate mounted) to an authorized token only,
/// writes the status objects, and stops on SIGTERM with exit 0.
#[test]
fn the_controller_image_runs_as_the_deployment_runs_it() {
    let Some(env) = crate::real_systemd::real_parts() else { return };
    let tag = image(&env, "EDPM_REAL_CONTROLLER_IMAGE");
    let name = format!("edpm-controller-test-{}", std::process::id());
    let _cleanup = Cleanup { env: env.clone(), containers: vec![name.clone()] };
    let ctx = tempfile::tempdir().unwrap();

    let api = crate::status_api::cluster();
    api.add_token("scraper", "system:serviceaccount:monitoring:prometheus", &[]);
    api.grant_non_resource("system:serviceaccount:monitoring:prometheus", "/metrics", "get");
    // The kubeconfig, readable by the image's user (as a mounted Secret would be).
    let kc = ctx.path().join("kubeconfig");
    std::fs::copy(api.kubeconfig(), &kc).unwrap();
    Command::new("chmod").args(["0644", kc.to_str().unwrap()]).status().unwrap();
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (port, metrics_port) = (free(), free());
    let (code, out) = podman(
        &env,
        &[
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            "host",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "-v",
            &format!("{}:/kubeconfig:ro", kc.display()),
            &tag,
            "--kubeconfig",
            "/kubeconfig",
            "status",
            "controller",
            "--source=kube",
            &format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
            &format!("--health-probe-bind-address=127.0.0.1:{port}"),
        ],
    );
    assert_eq!(code, 0, "podman run: {out}");
    let (_, user) = podman(&env, &["inspect", "-f", "{{.Config.User}}", &name]);
    assert_eq!(user.trim(), "65532:65532");
    let get = |path: &str| -> u16 {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return 0 };
        use std::io::{Read, Write};
        let _ = write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while get("/readyz") != 200 || api.object("EDPMNodeStatus", "edpm-compute-cell2-edpm-compute-5").is_none()
    {
        assert!(Instant::now() < deadline, "not ready: {}", podman(&env, &["logs", &name]).1);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(get("/healthz"), 200);
    // /metrics over HTTPS with the self-signed certificate: refused without a token, served
    // to one the API server authorizes.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let https = reqwest::blocking::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{metrics_port}/metrics");
    let refused = https.get(&url).send().unwrap_or_else(|e| panic!("{url}: {e:?}"));
    assert_eq!(refused.status().as_u16(), 401);
    let served = https.get(&url).bearer_auth("scraper").send().unwrap();
    assert_eq!(served.status().as_u16(), 200);
    assert!(served.text().unwrap().contains("edpm_leader"));
    let started = Instant::now();
    let (code, out) = podman(&env, &["stop", "-t", "20", &name]);
    assert_eq!(code, 0, "{out}");
    assert!(started.elapsed() < Duration::from_secs(10), "stop took {:?}", started.elapsed());
    let (_, exit) = podman(&env, &["inspect", "-f", "{{.State.ExitCode}}", &name]);
    assert_eq!(exit.trim(), "0", "{}", podman(&env, &["logs", &name]).1);
}
