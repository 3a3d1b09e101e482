//! An EDPM node in small, for real: the systemd image `scripts/real-parts.sh` builds, booted as
//! a podman container with systemd as PID 1, running its service containers with its own
//! rootful podman (podman inside the privileged container), as an EDPM node does. Shared by
//! the real-parts tests and `edpm-bench node --real`.
//!
//! Why podman inside rather than the host's podman through its socket: then `systemctl show`
//! and `podman ps` answer about the same system, podman's periodic health checks run as the
//! transient systemd timers they are on a node (on a host without systemd as PID 1 they never
//! run), and the agent's sandbox is tested against podman's own state.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A booted node container, removed when dropped (also when a test fails).
pub struct RealNode {
    pub name: String,
    env: Vec<(String, String)>,
}

impl RealNode {
    /// Boots the systemd image named in `env` (`target/real-parts.env`'s settings), with
    /// `agent` at `/usr/local/bin/edpm-agent`, `node_agent` at `/usr/local/bin/edpm-agent-node`
    /// and `scripts/edpm-containers.sh` at `/usr/local/bin/edpm-containers`; returns once
    /// systemd is running.
    pub fn boot(
        env: &[(String, String)],
        agent: &Path,
        node_agent: &Path,
        repo: &Path,
    ) -> Result<RealNode, String> {
        let get = |key: &str| {
            env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).ok_or_else(|| {
                format!("{key} is missing from target/real-parts.env: run scripts/real-parts.sh")
            })
        };
        let image = get("EDPM_REAL_SYSTEMD_IMAGE")?;
        static BOOTED: AtomicUsize = AtomicUsize::new(0);
        let n = BOOTED.fetch_add(1, Ordering::SeqCst);
        let node =
            RealNode { name: format!("edpm-agent-test-{}-{n}", std::process::id()), env: env.to_vec() };
        let agent = format!("{}:/usr/local/bin/edpm-agent:ro", agent.display());
        let node_agent = format!("{}:/usr/local/bin/edpm-agent-node:ro", node_agent.display());
        let containers = format!(
            "{}:/usr/local/bin/edpm-containers:ro",
            repo.join("scripts/edpm-containers.sh").display()
        );
        // The node's podman: the host's settings (runc, ulimits within the hard limits), its
        // storage on a tmpfs (overlay cannot sit on the container's own overlay root), and a
        // private cgroup namespace so runc finds its cgroups where they are mounted (cgroup v1).
        let conf = format!("{}:/etc/containers/containers.conf:ro", get("CONTAINERS_CONF")?);
        let (ok, out) = node.podman(&[
            "run",
            "-d",
            "--name",
            &node.name,
            "--systemd=always",
            "--privileged",
            "--cgroupns=private",
            "--network",
            "host",
            "--mount",
            "type=tmpfs,destination=/var/lib/containers",
            "-v",
            &conf,
            "-v",
            &agent,
            "-v",
            &node_agent,
            "-v",
            &containers,
            &image,
        ]);
        if !ok {
            return Err(format!("podman run {image}: {out}"));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let state = node.exec("systemctl is-system-running").1;
            if state.starts_with("running") || state.starts_with("degraded") {
                return Ok(node);
            }
            if Instant::now() > deadline {
                return Err(format!("systemd did not come up in {}: {state}", node.name));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// podman on the host, with the real-parts settings: success and its output.
    pub fn podman(&self, args: &[&str]) -> (bool, String) {
        match Command::new("podman")
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
        {
            Ok(out) => (
                out.status.success(),
                format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
            ),
            Err(e) => (false, format!("cannot run podman: {e}")),
        }
    }

    /// A shell command inside the node: success and its output.
    pub fn exec(&self, script: &str) -> (bool, String) {
        self.podman(&["exec", &self.name, "sh", "-c", script])
    }

    /// Copies a host path into the node.
    pub fn copy_in(&self, from: &Path, to: &str) -> Result<(), String> {
        let (ok, out) = self.podman(&["cp", &from.display().to_string(), &format!("{}:{to}", self.name)]);
        if ok { Ok(()) } else { Err(format!("podman cp {} {to}: {out}", from.display())) }
    }

    /// Writes a file inside the node, creating its directory.
    pub fn write(&self, path: &str, text: &str) -> Result<(), String> {
        let d = tempfile::tempdir().map_err(|e| e.to_string())?;
        let f = d.path().join("f");
        std::fs::write(&f, text).map_err(|e| e.to_string())?;
        let dir = Path::new(path).parent().map(|p| p.display().to_string()).unwrap_or_else(|| "/".into());
        let (ok, out) = self.exec(&format!("mkdir -p '{dir}'"));
        if !ok {
            return Err(format!("mkdir {dir}: {out}"));
        }
        self.copy_in(&f, path)
    }

    /// One property of a unit.
    pub fn show(&self, unit: &str, property: &str) -> String {
        self.exec(&format!("systemctl show -p {property} --value {unit}")).1.trim().to_string()
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        let _ = self.podman(&["rm", "-f", "-t", "0", &self.name]);
    }
}
