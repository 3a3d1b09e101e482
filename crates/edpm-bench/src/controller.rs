//! `edpm-bench controller`: `status controller` at scale, against the fake API server or, with
//! `--real-api`, a real kube-apiserver and etcd (`controller_real`): the first sync (the
//! controller writes every status object and node Lease), the latency from one Job change to
//! the write it causes, a churn of changes that move nothing, with `--node-secrets` the
//! rotation of one recorded Secret (a node's certificate, then one every node holds: the time
//! to the writes it causes and the requests it costs), the steady state (CPU, RSS and the
//! requests it sends per idle minute); then `status report` run once on the same cluster
//! (what running it periodically costs per run). Both servers run the same scenario over the
//! same objects; the requests are counted as each server saw them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::child::Watched;
use crate::common::*;
use crate::fake_api;
use crate::node::{cpu_ticks, status_kib};
use crate::readiness::readiness_manifests;

/// How long the controller's writes must pause for its first sync to count as done (it
/// writes without pause while it has any to send).
const QUIET: Duration = Duration::from_secs(2);
/// How long the controller is given to finish what a step set off (its debounce is 100 ms)
/// before the next step's counting starts.
const SETTLE: Duration = Duration::from_secs(1);
/// How long without a write before an idle window begins, and the longest wait for it.
const IDLE_QUIET: Duration = Duration::from_secs(5);
const IDLE_QUIET_WAIT: Duration = Duration::from_secs(120);

/// `edpm-bench controller`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Run against a real kube-apiserver and etcd (scripts/apiserver.sh) instead of the fake
    /// API server, as the controller's own ServiceAccount under the shipped RBAC.
    #[arg(long = "real-api")]
    real: bool,
    /// Nodes, in NodeSets of 100 (at least 100; the failed-Job latency needs 1,000: one
    /// NodeSet in ten has the failed Job).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub(crate) nodes: usize,
    /// Services each NodeSet's Deployment ran (at least 1).
    #[arg(long, value_name = "S", default_value_t = 15)]
    pub(crate) services: usize,
    /// Failed Jobs' new pods whose latency to the node's status write is measured (at least 1).
    #[arg(long, value_name = "N", default_value_t = 20)]
    changes: usize,
    /// How long the churn (Job changes that move no condition) runs.
    #[arg(long = "churn-seconds", value_name = "SECONDS", default_value_t = 60)]
    churn: u64,
    /// How long the idle window (nothing changing: CPU, RSS, requests) lasts (at least 1).
    #[arg(long = "idle-seconds", value_name = "SECONDS", default_value_t = 60)]
    idle: u64,
    /// Secrets every node holds, recorded by the Deployments.
    #[arg(long = "shared-secrets", value_name = "N", default_value_t = 0)]
    pub(crate) shared_secrets: usize,
    /// Certificates per node (one per service: at most --services), recorded by the
    /// Deployments; with any, certificates are rotated, then one shared Secret.
    #[arg(long = "node-secrets", value_name = "N", default_value_t = 0)]
    pub(crate) node_secrets: usize,
    /// Node certificates rotated one after another, each timed (with --node-secrets).
    #[arg(long, value_name = "N", default_value_t = 5)]
    rotations: usize,
}

impl Opts {
    /// The limits between flags, and the values the scenario cannot run with.
    pub(crate) fn check(&self) -> Result<(), String> {
        // NodeSets of 100; one in ten has the failed Job the latency is measured on: with
        // fewer than ten, the latency is not measured.
        if self.nodes < 100 {
            return Err(format!("--nodes {}: give at least 100 (NodeSets of 100)", self.nodes));
        }
        if self.node_secrets > self.services {
            return Err(format!(
                "--node-secrets {}: at most --services ({}), one certificate per service",
                self.node_secrets, self.services
            ));
        }
        if self.services == 0 || self.changes == 0 || self.idle == 0 {
            return Err("--services, --changes and --idle-seconds: give at least 1".into());
        }
        Ok(())
    }
}

/// One request the server received from the controller's user (the peer runs as the same
/// user, after the controller stops).
#[derive(Clone, Debug)]
pub(crate) struct Req {
    /// When the server received it, on the clock of [`Cluster::now`].
    pub(crate) at: Duration,
    /// Kubernetes' verb: get, list, watch, create, update, patch, delete.
    pub(crate) verb: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) name: String,
    /// Asked for metadata only (the fake knows; the audit log does not say).
    pub(crate) meta: bool,
}

impl Req {
    fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete")
    }

    /// A write of one of edpm-agent's status objects.
    fn is_status_write(&self) -> bool {
        self.is_write() && self.resource.starts_with("edpmnode")
    }

    fn what(&self) -> String {
        let meta = if self.meta { " (metadata)" } else { "" };
        match self.subresource.as_str() {
            "" => format!("{} {}{meta}", self.verb, self.resource),
            sub => format!("{} {}/{sub}{meta}", self.verb, self.resource),
        }
    }

    /// A whole Secret or ConfigMap got by name: what carries content.
    fn is_content_get(&self) -> bool {
        self.verb == "get" && !self.meta && matches!(self.resource.as_str(), "secrets" | "configmaps")
    }
}

/// The API server the scenario runs against.
pub(crate) trait Cluster {
    /// The kubeconfig the controller and the peer run with.
    fn kubeconfig(&self) -> &Path;
    /// The namespace of the node agents' Leases.
    fn lease_namespace(&self) -> &str;
    /// Now, on the clock of [`Req::at`].
    fn now(&self) -> Duration;
    /// The requests of the controller's user so far, as the server recorded them.
    fn requests(&mut self) -> Result<&[Req], String>;
    /// Makes `pod` (a failed Job's new attempt, with its status): when its status became
    /// visible, on the clock of [`Req::at`].
    fn fail_attempt(&mut self, pod: Value) -> Result<Duration, String>;
    /// Changes Job `job` in a way that moves no condition (an annotation, `n`).
    fn touch_job(&mut self, job: &str, n: u64) -> Result<(), String>;
    /// Gives Secret `name` new content (`string_data`): when its change was sent, on the
    /// clock of [`Req::at`].
    fn rotate_secret(&mut self, name: &str, string_data: Value) -> Result<Duration, String>;
    /// Called as an idle window begins; [`Cluster::idle_end`] may then say more about it.
    fn idle_begin(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Lines about the idle window of `seconds` that only this server can tell.
    fn idle_end(&mut self, _seconds: u64) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
    /// Lines about the whole run that only this server can tell.
    fn summary(&mut self) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// Runs the scenario; `o` has passed [`Opts::check`] (`main` refuses it otherwise).
pub(crate) fn controller_bench(o: &Opts) -> Result<(), String> {
    let mut docs = objects(o.nodes, o.services)?;
    record_secrets(&mut docs, o);
    let mut cluster: Box<dyn Cluster> = if o.real {
        Box::new(crate::controller_real::RealCluster::start(&docs)?)
    } else {
        Box::new(FakeCluster::start(docs))
    };
    scenario(o, cluster.as_mut())
}

/// The generated cluster: NodeSets of 100 nodes, a Deployment each with its status (one
/// NodeSet in ten failed on its first node), and the Job of each Deployment's last service,
/// whole (spec and status) as the Job controller leaves it.
pub(crate) fn objects(nodes: usize, services: usize) -> Result<Vec<Value>, String> {
    let mut docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&readiness_manifests(nodes, services))
        .map_err(|e| format!("the generated manifests: {e}"))?;
    let last = format!("svc-{:02}", services - 1);
    let t = "2026-11-01T10:30:00Z";
    for s in 0..nodes.div_ceil(100) {
        let ns = format!("nodeset-{s:04}");
        let job = format!("{last}-deploy-{s:04}-{ns}");
        docs.push(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job,
            "namespace": "openstack", "labels": {"app": "openstackansibleee", "openstackdataplaneservice": last,
            "openstackdataplanedeployment": format!("deploy-{s:04}"), "openstackdataplanenodeset": ns}},
            "spec": {"backoffLimit": 6, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": job, "image": "localhost/edpm-agent-runner:latest"}]}}},
            "status": {"active": 0, "succeeded": 1, "startTime": t, "completionTime": t, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": t, "lastProbeTime": t},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": t, "lastProbeTime": t}]}}));
    }
    Ok(docs)
}

/// The name of node `n`'s certificate for service `svc` (openstack-operator's
/// `cert-<service>-<cert key>-<host>`).
fn cert_name(svc: usize, node: &str) -> String {
    format!("cert-svc-{svc:02}-default-{node}")
}

/// A certificate's content, about the size of a real one.
fn cert_data(node: &str, n: u64) -> Value {
    let pem = |what: &str| {
        format!(
            "-----BEGIN {what}-----\n{}\n-----END {what}-----\n",
            format!("{node}-{n}-").repeat(1200 / (node.len() + 4))
        )
    };
    json!({"tls.crt": pem("CERTIFICATE"), "tls.key": pem("PRIVATE KEY"), "ca.crt": pem("CERTIFICATE")})
}

/// Adds `o.shared_secrets` Secrets every node holds and `o.node_secrets` certificates per
/// node (labelled as openstack-operator labels them: `osdpns`, `osdp-service`,
/// `osdp-service-cert-key`, `hostname`), each Deployment recording its NodeSet's (their
/// hashes as they are: current).
fn record_secrets(docs: &mut Vec<Value>, o: &Opts) {
    if o.shared_secrets == 0 && o.node_secrets == 0 {
        return;
    }
    let hash = |data: &Value| {
        let body = edpm_core::snapshot::SecretData {
            data: data
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").as_bytes().to_vec()))
                .collect(),
            type_: "Opaque".into(),
        };
        edpm_core::objecthash::secret(&body)
    };
    let secret = |name: &str, labels: Value, data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "openstack", "labels": labels},
            "type": "Opaque", "stringData": data})
    };
    let mut shared = serde_json::Map::new();
    for i in 0..o.shared_secrets {
        let name = format!("shared-{i:02}");
        let data = json!({"password": format!("shared {i} 0")});
        shared.insert(name.clone(), json!(hash(&data)));
        docs.push(secret(&name, json!({}), data));
    }
    let sets = o.nodes.div_ceil(100);
    let mut added = Vec::new();
    for d in docs.iter_mut().filter(|d| d["kind"] == "OpenStackDataPlaneDeployment") {
        let s: usize = d["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches("deploy-")
            .parse()
            .unwrap_or(sets);
        let ns = format!("nodeset-{s:04}");
        let mut hashes = shared.clone();
        for n in 0..(o.nodes - s * 100).min(100) {
            let node = format!("compute-{s:04}-{n:03}");
            for svc in 0..o.node_secrets {
                let name = cert_name(svc, &node);
                let data = cert_data(&node, 0);
                hashes.insert(name.clone(), json!(hash(&data)));
                let labels = json!({"osdpns": ns, "osdp-service": format!("svc-{svc:02}"), "osdp-service-cert-key": "default", "hostname": node});
                added.push(secret(&name, labels, data));
            }
        }
        d["status"]["secretHashes"] = Value::Object(hashes);
    }
    docs.extend(added);
}

/// Attempt `i` of `job`, failed on `node`, as the Job controller and the runner leave it: its
/// termination message names the node's reason.
fn failed_pod(job: &str, i: usize, node: &str) -> Value {
    let message = json!({"failedHostList": [node], "failedHosts": 1, "failurePercent": 1,
        "hostFailures": {node: format!("Deploy (x.yml:1): change {i}")}, "rc": 2, "status": "failed",
        "totalHosts": 100, "truncated": false, "unreachableHostList": [], "unreachableHosts": 0})
    .to_string();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{job}-a{i}"), "namespace": "openstack",
        "creationTimestamp": format!("2026-11-02T{:02}:{:02}:00Z", i / 60, i % 60),
        "labels": {"batch.kubernetes.io/job-name": job, "job-name": job}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": job, "image": "localhost/edpm-agent-runner:latest"}]},
        "status": {"phase": "Failed", "containerStatuses": [{"name": job, "image": "localhost/edpm-agent-runner:latest",
            "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 2, "reason": "Error",
            "startedAt": "2026-11-02T09:30:00Z", "finishedAt": "2026-11-02T09:31:00Z", "message": message}}}]}})
}

/// The controller started and followed step by step, then the peer.
fn scenario(o: &Opts, cluster: &mut dyn Cluster) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let agent = agent()?;
    let (probes, metrics) = (free_port()?, free_port()?);
    // EDPM_BENCH_WRAP=heaptrack (or another profiler taking a command) runs the controller
    // under it; the RSS figures are then the wrapper's.
    let wrap = std::env::var("EDPM_BENCH_WRAP").ok().filter(|w| !w.is_empty());
    let mut cmd = match &wrap {
        Some(w) => {
            let mut c = Command::new(w);
            c.arg(&agent);
            c
        }
        None => Command::new(&agent),
    };
    cmd.args(agent_args(cluster, "controller"))
        // The probes speak plain HTTP, so /metrics (plain too, as a development set-up serves
        // it: the bench scrapes nothing) gets a port of its own.
        .args(["--health-probe-bind-address", &format!("127.0.0.1:{probes}")])
        .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}"), "--metrics-secure=false"])
        .args(["--debounce-ms", "100"]);
    let log = dir.path().join("controller.stderr");
    let from = cluster.requests()?.len();
    let started = cluster.now();
    let wall = Instant::now();
    let mut ctl = Watched::spawn(&mut cmd, "the controller", &log)?;
    ctl.wait_for("the controller's /readyz", Duration::from_secs(1200), Duration::from_millis(50), || {
        Ok(ready(probes))
    })?;
    let synced = wall.elapsed();
    first_sync(cluster, &mut ctl, o.nodes, from, started, synced)?;
    latency(o, cluster, &mut ctl)?;
    churn(o, cluster, &mut ctl)?;
    rotation(o, cluster, &mut ctl)?;
    idle(o, cluster, &mut ctl, from)?;
    println!("controller: {}", evaluations(metrics));
    ctl.stop(wrap.is_some());
    peer(o, cluster, &agent)?;
    for line in cluster.summary()? {
        println!("{line}");
    }
    Ok(())
}

/// The product's binary, beside this one.
fn agent() -> Result<PathBuf, String> {
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    if !agent.is_file() {
        return Err(format!(
            "{} is missing: build it beside edpm-bench (cargo build --release --workspace)",
            agent.display()
        ));
    }
    Ok(agent)
}

/// `--source kube …` for `status COMMAND` against `cluster`, Nova left out (nothing here
/// runs nova).
fn agent_args(cluster: &dyn Cluster, command: &str) -> Vec<String> {
    let kc = cluster.kubeconfig().display().to_string();
    ["--source", "kube", "--kubeconfig", &kc, "status", command, "--no-nova", "--lease-namespace"]
        .into_iter()
        .chain([cluster.lease_namespace()])
        .map(str::to_string)
        .collect()
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// Whether the probes say ready.
fn ready(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(s, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut t = String::new();
    let _ = s.take(4096).read_to_string(&mut t);
    t.starts_with("HTTP/1.1 200")
}

/// Writes (and other requests) counted by what they did: `patch edpmnodestatuses/status 10000, …`.
fn tally<'a>(reqs: impl Iterator<Item = &'a Req>) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in reqs {
        *by.entry(r.what()).or_default() += 1;
    }
    if by.is_empty() {
        return "none".into();
    }
    by.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

/// Ready, then the first sync's writes until every node's status is written and they pause for
/// [`QUIET`].
fn first_sync(
    cluster: &mut dyn Cluster,
    ctl: &mut Watched,
    nodes: usize,
    from: usize,
    started: Duration,
    synced: Duration,
) -> Result<(), String> {
    let mut last = cluster.now();
    let mut seen = from;
    // The first sync writes every node's status: it has not ended before, however long its
    // evaluations take (the first gets every recorded Secret, and pauses between batches).
    let mut written = std::collections::BTreeSet::new();
    ctl.wait_for("the end of the first sync", Duration::from_secs(1800), Duration::from_millis(200), || {
        let now = cluster.now();
        let reqs = cluster.requests()?;
        for r in reqs[seen..].iter().filter(|r| r.is_write()) {
            last = last.max(r.at);
            if r.resource == "edpmnodestatuses" && r.subresource == "status" {
                written.insert(r.name.clone());
            }
        }
        seen = reqs.len();
        Ok(written.len() >= nodes && now.saturating_sub(last) >= QUIET)
    })?;
    let reqs = &cluster.requests()?[from..seen];
    let writes: Vec<&Req> = reqs.iter().filter(|r| r.is_write()).collect();
    let last_write = writes.iter().map(|r| r.at).max().map(|w| w.saturating_sub(started));
    println!(
        "controller: ready (every kind listed) {} after start; first sync: {} writes, the last {} after start ({}); {} requests in all; RSS {:.0} MiB",
        ms(synced),
        writes.len(),
        last_write.map_or("(none)".into(), ms),
        tally(writes.iter().copied()),
        reqs.len(),
        status_kib(ctl.pid(), "VmRSS:") as f64 / 1024.0
    );
    Ok(())
}

/// A new attempt's pod of a failed Job says why its host failed (one NodeSet in ten has a Job
/// that failed on its first node): the latency to that node's status write, and what else was
/// written.
fn latency(o: &Opts, cluster: &mut dyn Cluster, ctl: &mut Watched) -> Result<(), String> {
    let sets = o.nodes.div_ceil(100);
    if sets < 10 {
        println!(
            "controller: {sets} NodeSets, fewer than the ten the failed-Job latency needs (one in ten has a failed Job): not measured"
        );
        return Ok(());
    }
    let last = format!("svc-{:02}", o.services - 1);
    let mut latencies = Vec::new();
    let mut extra_writes = 0;
    for i in 0..o.changes {
        let s = (i * 10 + 9) % (sets - sets % 10);
        let ns = format!("nodeset-{s:04}");
        let job = format!("{last}-deploy-{s:04}-{ns}");
        let node = format!("compute-{s:04}-000");
        let object = format!("{ns}-{node}");
        let from = cluster.requests()?.len();
        let t0 = cluster.fail_attempt(failed_pod(&job, i, &node))?;
        latencies.push(status_written(cluster, ctl, &object, from, t0)?);
        ctl.sleep(Duration::from_millis(300))?;
        extra_writes +=
            cluster.requests()?[from..].iter().filter(|r| r.is_status_write() && r.name != object).count();
    }
    // In order, for the reader to see where the slow ones are: the first change in a NodeSet
    // rewrites its other 99 nodes too (the new attempt ran on all of them).
    let each: Vec<String> = latencies.iter().map(|l| format!("{:.0}", l.as_secs_f64() * 1e3)).collect();
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1];
    println!(
        "controller: a failed Job's new pod naming one node's reason → that node's status write: median {}, p99 {}, max {} over {} changes (each, ms: {}); {extra_writes} writes of other objects",
        ms(p(0.5)),
        ms(p(0.99)),
        ms(latencies[latencies.len() - 1]),
        o.changes,
        each.join(" ")
    );
    Ok(())
}

/// 100 changes a second that move no condition (a Job's annotation).
fn churn(o: &Opts, cluster: &mut dyn Cluster, ctl: &mut Watched) -> Result<(), String> {
    if o.churn == 0 {
        return Ok(());
    }
    let sets = o.nodes.div_ceil(100);
    let last = format!("svc-{:02}", o.services - 1);
    ctl.sleep(SETTLE)?;
    let from = cluster.requests()?.len();
    let ticks = cpu_ticks(ctl.pid());
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(o.churn) {
        let s = (n as usize * 13) % sets;
        cluster.touch_job(&format!("{last}-deploy-{s:04}-nodeset-{s:04}"), n)?;
        n += 1;
        if n.is_multiple_of(100) {
            ctl.alive()?;
        }
        if let Some(wait) = Duration::from_millis(10 * n).checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let took = started.elapsed().as_secs_f64();
    ctl.sleep(SETTLE)?;
    let cpu = (cpu_ticks(ctl.pid()) - ticks) as f64 / hz();
    let reqs = &cluster.requests()?[from..];
    let writes = reqs.iter().filter(|r| r.is_status_write()).count();
    println!(
        "controller: {n} changes that move nothing in {took:.1} s ({:.0}/s): {writes} status writes, CPU {:.1} % of a core; its requests meanwhile: {}",
        n as f64 / took,
        cpu * 100.0 / (took + SETTLE.as_secs_f64()),
        tally(reqs.iter())
    );
    Ok(())
}

/// One node's certificate rotated, `o.rotations` times (each another node's), then one
/// Secret every node holds: the time from the change to the write of the node (of the last
/// node), and every request the controller sent meanwhile. What it should cost is what
/// rotated: one Secret got whole, the nodes that hold it written.
fn rotation(o: &Opts, cluster: &mut dyn Cluster, ctl: &mut Watched) -> Result<(), String> {
    if o.node_secrets == 0 || o.rotations == 0 {
        return Ok(());
    }
    let sets = o.nodes.div_ceil(100);
    ctl.sleep(SETTLE)?;
    let mut took = Vec::new();
    let mut reqs: Vec<Req> = Vec::new();
    for r in 0..o.rotations {
        let s = (r * 7 + 3) % sets;
        let count = (o.nodes - s * 100).min(100);
        let node = format!("compute-{s:04}-{:03}", (r * 37 + 11) % count);
        let object = format!("nodeset-{s:04}-{node}");
        let from = cluster.requests()?.len();
        let t0 =
            cluster.rotate_secret(&cert_name(r % o.node_secrets, &node), cert_data(&node, r as u64 + 1))?;
        took.push(status_written(cluster, ctl, &object, from, t0)?);
        ctl.sleep(SETTLE)?;
        reqs.extend(cluster.requests()?[from..].iter().cloned());
    }
    if std::env::var("EDPM_BENCH_DEBUG").is_ok() {
        let names: Vec<String> = reqs
            .iter()
            .filter(|q| q.is_content_get())
            .map(|q| format!("{}/{}", q.resource, q.name))
            .collect();
        eprintln!("content gets: {names:?}");
    }
    let each: Vec<String> = took.iter().map(|l| format!("{:.0}", l.as_secs_f64() * 1e3)).collect();
    took.sort();
    println!(
        "controller: one node's certificate rotated (of {} recorded Secrets) → that node's status write: median {}, max {} over {} rotations (each, ms: {}); per rotation: {:.1} whole Secrets or ConfigMaps got, {:.1} status writes; its requests in all: {}",
        o.shared_secrets + o.nodes * o.node_secrets,
        ms(took[took.len() / 2]),
        ms(took[took.len() - 1]),
        o.rotations,
        each.join(" "),
        reqs.iter().filter(|q| q.is_content_get()).count() as f64 / o.rotations as f64,
        reqs.iter().filter(|q| q.is_status_write()).count() as f64 / o.rotations as f64,
        tally(reqs.iter())
    );
    if o.shared_secrets == 0 {
        return Ok(());
    }
    // One every node holds: every node of a completed Deployment turns stale (the failed
    // ones, a NodeSet in ten, recorded no delivery).
    let expected: usize = (0..sets).filter(|s| s % 10 != 9).map(|s| (o.nodes - s * 100).min(100)).sum();
    let from = cluster.requests()?.len();
    let t0 = cluster.rotate_secret("shared-00", json!({"password": "shared 0 1"}))?;
    let mut last = t0;
    let mut seen = from;
    let mut written = std::collections::BTreeSet::new();
    ctl.wait_for("the writes of every node", Duration::from_secs(1800), Duration::from_millis(200), || {
        let reqs = cluster.requests()?;
        for q in &reqs[seen..] {
            if q.verb == "patch"
                && q.resource == "edpmnodestatuses"
                && q.subresource == "status"
                && q.at >= t0
            {
                written.insert(q.name.clone());
                last = last.max(q.at);
            }
        }
        seen = reqs.len();
        Ok(written.len() >= expected && cluster.now().saturating_sub(last) >= QUIET)
    })?;
    let reqs = &cluster.requests()?[from..seen];
    println!(
        "controller: one Secret every node holds rotated → the last of {} nodes' status writes (of {expected} whose Deployment completed) {} after; {} whole Secrets or ConfigMaps got; its requests in all: {}",
        written.len(),
        ms(last.saturating_sub(t0)),
        reqs.iter().filter(|q| q.is_content_get()).count(),
        tally(reqs.iter())
    );
    Ok(())
}

/// The evaluations' durations as the controller's histogram counts them: how many, and the
/// bucket the 99th percentile falls in.
fn evaluations(metrics: u16) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", metrics)) else { return "no /metrics".into() };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut t = String::new();
    let _ = s.take(1 << 20).read_to_string(&mut t);
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    let mut count = 0.0;
    let mut sum = 0.0;
    for line in t.lines() {
        if let Some(rest) = line.strip_prefix("edpm_reconcile_duration_seconds_bucket{le=\"") {
            if let Some((le, v)) = rest.split_once("\"} ") {
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::NAN) };
                buckets.push((le, v.trim().parse().unwrap_or(0.0)));
            }
        } else if let Some(v) = line.strip_prefix("edpm_reconcile_duration_seconds_count ") {
            count = v.trim().parse().unwrap_or(0.0);
        } else if let Some(v) = line.strip_prefix("edpm_reconcile_duration_seconds_sum ") {
            sum = v.trim().parse().unwrap_or(0.0);
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let p99 = buckets.iter().find(|(_, n)| *n >= 0.99 * count).map(|(le, _)| *le);
    format!(
        "{count:.0} evaluations over the run, mean {:.1} ms, p99 at most {} (the histogram's bucket)",
        if count > 0.0 { sum * 1e3 / count } else { 0.0 },
        p99.map_or("(none)".into(), |p| if p.is_finite() {
            format!("{:.0} ms", p * 1e3)
        } else {
            "+Inf".into()
        })
    )
}

fn hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// How long after `t0` the controller patched `object`'s status (its requests from `from`).
fn status_written(
    cluster: &mut dyn Cluster,
    ctl: &mut Watched,
    object: &str,
    from: usize,
    t0: Duration,
) -> Result<Duration, String> {
    let mut landed = None;
    ctl.wait_for(
        // Long: a change waits behind the evaluation in progress (at 10,000 nodes, the first
        // sync's second pass over every NodeSet).
        &format!("the write of {object}"),
        Duration::from_secs(300),
        Duration::from_millis(5),
        || {
            landed = cluster.requests()?[from..]
                .iter()
                .find(|r| r.verb == "patch" && r.name == object && r.subresource == "status" && r.at >= t0)
                .map(|r| r.at);
            Ok(landed.is_some())
        },
    )?;
    Ok(landed.unwrap_or(t0).saturating_sub(t0))
}

/// Nothing changing: the controller's CPU, RSS and requests (`since`: the index of its first
/// request).
fn idle(o: &Opts, cluster: &mut dyn Cluster, ctl: &mut Watched, since: usize) -> Result<(), String> {
    // The window begins once the steps before are done with: no write for IDLE_QUIET and the
    // controller's last second under 2 % of a core (at 10,000 nodes the shared rotation's last
    // NodeSets are still being evaluated, on a loaded machine for more than IDLE_QUIET, and then
    // written), so that what it measures is idleness, not their tail; at most IDLE_QUIET_WAIT.
    let waited = cluster.now();
    loop {
        let before = cpu_ticks(ctl.pid());
        ctl.sleep(SETTLE)?;
        let busy = cpu_ticks(ctl.pid()).saturating_sub(before) as f64 / hz() > 0.02 * SETTLE.as_secs_f64();
        let now = cluster.now();
        let recent =
            cluster.requests()?.iter().rev().take_while(|r| r.at + IDLE_QUIET > now).any(Req::is_write);
        if !(recent || busy) || now.saturating_sub(waited) > IDLE_QUIET_WAIT {
            break;
        }
    }
    cluster.idle_begin()?;
    let (from, begin) = (cluster.requests()?.len(), cluster.now());
    let ticks = cpu_ticks(ctl.pid());
    ctl.sleep(Duration::from_secs(o.idle))?;
    let cpu = (cpu_ticks(ctl.pid()) - ticks) as f64 / hz();
    let end = cluster.now();
    let reqs: Vec<&Req> =
        cluster.requests()?[from..].iter().filter(|r| r.at >= begin && r.at < end).collect();
    let per_minute = reqs.len() as f64 * 60.0 / o.idle as f64;
    println!(
        "controller: nothing changing for {} s (begun {:.0} s after the step before, once quiet): {} writes, CPU {:.2} % of a core, RSS {:.0} MiB (peak {:.0} MiB); {per_minute:.1} requests per minute ({})",
        o.idle,
        begin.saturating_sub(waited).as_secs_f64(),
        reqs.iter().filter(|r| r.is_write()).count(),
        cpu * 100.0 / o.idle as f64,
        status_kib(ctl.pid(), "VmRSS:") as f64 / 1024.0,
        status_kib(ctl.pid(), "VmHWM:") as f64 / 1024.0,
        tally(reqs.iter().copied())
    );
    // Which objects an idle minute wrote, and when: a write while nothing changes is either
    // time passing (a node Lease expiring) or a cost to find.
    let writes: Vec<String> = reqs
        .iter()
        .filter(|r| r.is_write())
        .take(10)
        .map(|r| {
            format!(
                "{} {}/{} at +{:.1} s",
                r.verb,
                r.resource,
                r.name,
                r.at.saturating_sub(begin).as_secs_f64()
            )
        })
        .collect();
    if !writes.is_empty() {
        println!("controller: idle writes: {}", writes.join(", "));
    }
    for line in cluster.idle_end(o.idle)? {
        println!("{line}");
    }
    println!("controller: {}", watches(&cluster.requests()?[since..]));
    Ok(())
}

/// How often the controller opens its watches again over the whole run (a server ends each
/// watch at its timeout, and the controller opens it again): its watch requests per minute
/// whichever minute the idle window happens to be, which a minute's count is not (the
/// watches, opened together, end together).
fn watches(reqs: &[Req]) -> String {
    let mut by: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for r in reqs.iter().filter(|r| r.verb == "watch") {
        by.entry(&r.resource).or_default().push(r.at);
    }
    let mut gaps: Vec<Duration> = by
        .values_mut()
        .flat_map(|at| {
            at.sort();
            at.windows(2).map(|w| w[1].saturating_sub(w[0])).collect::<Vec<_>>()
        })
        .collect();
    if gaps.is_empty() {
        return format!("{} watches, none opened again during the run (each outlasted it)", by.len());
    }
    gaps.sort();
    let median = gaps[gaps.len() / 2].as_secs_f64();
    format!(
        "{} watches, each opened again every {median:.0} s (median of {} gaps): {:.1} watch requests per minute",
        by.len(),
        gaps.len(),
        by.len() as f64 * 60.0 / median
    )
}

/// The peer on the same cluster, the controller stopped: `status report` with nothing
/// changed, what each run of a periodic report costs.
fn peer(o: &Opts, cluster: &mut dyn Cluster, agent: &Path) -> Result<(), String> {
    let from = cluster.requests()?.len();
    let m = measure(Command::new(agent).args(agent_args(cluster, "report")))?;
    if m.status != 0 {
        return Err(format!("status report exited with {} (run it by hand for its message)", m.status));
    }
    let reqs = &cluster.requests()?[from..];
    println!(
        "peer: status report, nothing changed (each periodic run), {} objects: {} wall, {} CPU, peak RSS {:.0} MiB, {} write requests, {} requests in all",
        o.nodes + o.nodes.div_ceil(100),
        ms(m.wall),
        ms(m.cpu),
        m.max_rss_kib as f64 / 1024.0,
        reqs.iter().filter(|r| r.is_write()).count(),
        reqs.len()
    );
    Ok(())
}

/// The fake API server of the integration tests, in this process: every request it receives
/// is the controller's (or the peer's).
struct FakeCluster {
    api: fake_api::FakeApi,
    kubeconfig: PathBuf,
    origin: Instant,
    seen: usize,
    reqs: Vec<Req>,
}

impl FakeCluster {
    fn start(docs: Vec<Value>) -> FakeCluster {
        let started = Instant::now();
        let api = fake_api::FakeApi::start();
        api.add_readiness_crds();
        // Bookmarks at the real server's cadence (its watch cache sends one about every
        // minute), so that idle measures the controller, not the fake's 500-ms bookmarks.
        api.set_bookmark_interval(std::time::Duration::from_secs(60));
        let n = docs.len();
        for d in docs {
            api.put(d);
        }
        println!(
            "set-up: the fake API server holds {n} objects (NodeSets of 100 nodes, a Deployment and a Job each), made in {}",
            ms(started.elapsed())
        );
        let kubeconfig = api.kubeconfig();
        FakeCluster { api, kubeconfig, origin: started, seen: 0, reqs: Vec::new() }
    }
}

impl Cluster for FakeCluster {
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn lease_namespace(&self) -> &str {
        "edpm-node-lease"
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn requests(&mut self) -> Result<&[Req], String> {
        let new = self.api.requests_timed(self.seen);
        let meta = self.api.requests_with_accept(self.seen);
        let new: Vec<_> = new.into_iter().zip(meta).map(|((t, r), (_, m))| (t, r, m)).collect();
        self.seen += new.len();
        let origin = self.origin;
        self.reqs.extend(new.into_iter().map(|(t, r, m)| {
            let mut q = fake_request(t.saturating_duration_since(origin), &r);
            q.meta = m;
            q
        }));
        Ok(&self.reqs)
    }

    fn fail_attempt(&mut self, pod: Value) -> Result<Duration, String> {
        let at = self.now();
        self.api.put(pod);
        Ok(at)
    }

    fn rotate_secret(&mut self, name: &str, string_data: Value) -> Result<Duration, String> {
        let mut o = self
            .api
            .object("Secret", name)
            .ok_or_else(|| format!("Secret {name} is not in the fake API server"))?;
        o["stringData"] = string_data;
        let at = self.now();
        self.api.put_replace(o);
        Ok(at)
    }

    fn touch_job(&mut self, job: &str, n: u64) -> Result<(), String> {
        let mut j =
            self.api.object("Job", job).ok_or_else(|| format!("Job {job} is not in the fake API server"))?;
        j["metadata"]["annotations"] = json!({"bench/churn": n.to_string()});
        self.api.put_replace(j);
        Ok(())
    }
}

/// `METHOD /apis/GROUP/VERSION/namespaces/NS/RESOURCE/NAME/SUB?QUERY` as the verb and object
/// Kubernetes would name.
fn fake_request(at: Duration, line: &str) -> Req {
    let (method, target) = line.split_once(' ').unwrap_or((line, ""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // Past /api/v1 or /apis/GROUP/VERSION, and the namespace.
    let skip = if parts.first() == Some(&"api") { 2 } else { 3 };
    parts.drain(..skip.min(parts.len()));
    if parts.first() == Some(&"namespaces") && parts.len() > 2 {
        parts.drain(..2);
    }
    let part = |i: usize| parts.get(i).copied().unwrap_or("").to_string();
    let watch = query.split('&').any(|q| q == "watch=true" || q == "watch=1");
    let verb = match (method, parts.len()) {
        ("GET", _) if watch => "watch",
        ("GET", 1) => "list",
        ("GET", _) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        (m, _) => m,
    };
    Req { at, verb: verb.to_string(), resource: part(0), name: part(1), subresource: part(2), meta: false }
}
