//! `edpm-bench controller --real-api`: the controller's scenario against a real kube-apiserver
//! and etcd (`edpm_testkit::real_api`, built by `scripts/apiserver.sh`), the controller running
//! as its own ServiceAccount under the shipped RBAC with a TokenRequest token. The server's
//! audit log (every request: user, verb, object, when received and answered) is the record
//! the scenario reads, filtered to the controller's user: the change-to-write latency is
//! between two of its timestamps (the bench's write that makes the failed pod visible, answered;
//! the controller's write of the node, received), on the server's own clock. Set-up (the server, CRDs, RBAC, the objects and
//! their statuses) is timed and printed apart.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use edpm_testkit::real_api::{Binaries, Options, RealApi};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::{ms, repo};
use crate::controller::{Cluster, Req};

/// The field manager the generated objects are made with, as their operators' would be.
const OPERATOR: &str = "openstack-operator";
/// Requests in flight while the objects are made.
const CONCURRENCY: usize = 16;
/// The administrator's user (the CN of its client certificate): the bench itself.
const ADMIN: &str = "edpm-testkit-admin";

/// One request in the audit log, at one stage.
struct Event {
    stage: String,
    user: String,
    verb: String,
    resource: String,
    subresource: String,
    name: String,
    /// The answer's status code.
    code: u16,
    /// When the server received the request, and when this stage was reached.
    received: Duration,
    at: Duration,
}

pub(crate) struct RealCluster {
    api: RealApi,
    _dir: tempfile::TempDir,
    ns: String,
    leases: String,
    kubeconfig: PathBuf,
    /// `system:serviceaccount:NS:edpm-agent-controller`.
    user: String,
    /// The bench's own client, as the administrator.
    kube: edpm_io::k8s::Cluster,
    audit_offset: u64,
    partial: String,
    events: Vec<Event>,
    reqs: Vec<Req>,
    idle_from: Option<(Duration, BTreeMap<String, f64>)>,
}

impl RealCluster {
    /// Starts the server, installs the CRDs, deploys the controller's RBAC and makes `docs`
    /// (their statuses through the status subresource), each step timed.
    pub(crate) fn start(docs: &[Value]) -> Result<RealCluster, String> {
        let repo = repo();
        let bins = Binaries::find(&repo)?;
        let t = Instant::now();
        let api = RealApi::start(&bins, &Options::default())?;
        println!("set-up: kube-apiserver {} and etcd started in {}", api.version, ms(t.elapsed()));
        let t = Instant::now();
        let upstream = repo.join("../shared/reference/upstream");
        let have_upstream = upstream.is_dir();
        api.install_crds(&repo, have_upstream.then_some(upstream.as_path()))?;
        println!(
            "set-up: CRDs ({}) in {}",
            if have_upstream {
                "upstream's NodeSet, Deployment and Service from ../shared, ours, minimal ones for the rest"
            } else {
                "../shared is not beside the checkout: minimal CRDs for the kinds read, ours"
            },
            ms(t.elapsed())
        );
        let t = Instant::now();
        let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
        let (ns, leases) = (api.namespace("bench")?, api.namespace("bench-leases")?);
        let kubeconfig = dir.path().join("controller.kubeconfig");
        // A token that outlives the longest run (10,000 nodes, an hour's idle).
        api.deploy_controller(&repo, &ns, &leases, &kubeconfig, 4 * 3600)?;
        println!(
            "set-up: namespaces {ns} and {leases}, the controller's shipped RBAC and its TokenRequest kubeconfig in {}",
            ms(t.elapsed())
        );
        let settings = edpm_io::k8s::Settings {
            namespace: Some(ns.clone()),
            kubeconfig: Some(api.admin_kubeconfig()),
            context: None,
            timeout: Duration::from_secs(60),
            attempts: 3,
            lease_namespace: leases.clone(),
            deadline: None,
        };
        let kube = edpm_io::k8s::Cluster::connect(&settings).map_err(|e| e.to_string())?;
        let user = format!("system:serviceaccount:{ns}:edpm-agent-controller");
        let c = RealCluster {
            api,
            _dir: dir,
            ns,
            leases,
            kubeconfig,
            user,
            kube,
            audit_offset: 0,
            partial: String::new(),
            events: Vec::new(),
            reqs: Vec::new(),
            idle_from: None,
        };
        let t = Instant::now();
        let requests = c.make(docs.to_vec())?;
        println!(
            "set-up: {} objects (NodeSets, Deployments, Jobs) made with their statuses in {} ({requests} requests, {CONCURRENCY} at a time)",
            docs.len(),
            ms(t.elapsed())
        );
        Ok(c)
    }

    /// Makes `docs` in the namespace, as their operators would: the object (server-side
    /// apply), then its status (merge patch of the status subresource). The requests sent.
    fn make(&self, docs: Vec<Value>) -> Result<usize, String> {
        let client = self.kube.client().kube();
        let ns = self.ns.clone();
        self.kube.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            let mut sent = 0;
            for doc in docs {
                while set.len() >= CONCURRENCY {
                    sent += joined(set.join_next().await)?;
                }
                let api = api_for(client.clone(), &ns, &doc)?;
                set.spawn(make_one(api, doc));
            }
            while let Some(r) = set.join_next().await {
                sent += joined(Some(r))?;
            }
            Ok(sent)
        })
    }

    /// Reads what the audit log gained since the last call.
    fn refresh(&mut self) -> Result<(), String> {
        let path = self.api.dir().join("audit.log");
        let mut f = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        f.seek(SeekFrom::Start(self.audit_offset)).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut text = String::new();
        // At most 256 MiB a call; the rest is read by the next.
        let read =
            f.take(256 << 20).read_to_string(&mut text).map_err(|e| format!("{}: {e}", path.display()))?;
        self.audit_offset += read as u64;
        let text = std::mem::take(&mut self.partial) + &text;
        let (complete, rest) = match text.rfind('\n') {
            Some(i) => text.split_at(i + 1),
            None => ("", text.as_str()),
        };
        self.partial = rest.to_string();
        for line in complete.lines() {
            let Some(e) = event(line) else { continue };
            // A request counted once: a watch when it starts, anything else when answered.
            let counted =
                if e.verb == "watch" { e.stage == "ResponseStarted" } else { e.stage == "ResponseComplete" };
            if counted && e.user == self.user {
                self.reqs.push(Req {
                    at: e.received,
                    verb: e.verb.clone(),
                    resource: e.resource.clone(),
                    subresource: e.subresource.clone(),
                    name: e.name.clone(),
                    meta: false,
                });
            }
            self.events.push(e);
        }
        Ok(())
    }

    /// Requests per minute, by user (who they are) and verb, received in `from..to`.
    fn audited_per_minute(&self, from: Duration, to: Duration, seconds: u64) -> String {
        let mut by: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for e in self.events.iter().filter(|e| e.received >= from && e.received < to) {
            let counted =
                if e.verb == "watch" { e.stage == "ResponseStarted" } else { e.stage == "ResponseComplete" };
            if !counted {
                continue;
            }
            let who = match e.user.as_str() {
                u if u == self.user => "the controller".to_string(),
                ADMIN => "the bench (its /metrics reads)".to_string(),
                "system:apiserver" => "kube-apiserver's own loops".to_string(),
                u => u.to_string(),
            };
            *by.entry(who).or_default().entry(e.verb.clone()).or_default() += 1;
        }
        let per = |n: usize| n as f64 * 60.0 / seconds as f64;
        by.iter()
            .map(|(who, verbs)| {
                let v: Vec<String> = verbs.iter().map(|(verb, n)| format!("{verb} {:.1}", per(*n))).collect();
                format!("{who}: {}", v.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A task's answer: the requests it sent, or why it failed.
fn joined(r: Option<Result<Result<usize, String>, tokio::task::JoinError>>) -> Result<usize, String> {
    match r {
        Some(Ok(r)) => r,
        Some(Err(e)) => Err(format!("a set-up task: {e}")),
        None => Ok(0),
    }
}

/// The API of `doc`'s kind in `ns`. The four kinds made here are plural by an `s`.
fn api_for(client: kube::Client, ns: &str, doc: &Value) -> Result<Api<DynamicObject>, String> {
    let (api_version, kind) = (doc["apiVersion"].as_str().unwrap_or(""), doc["kind"].as_str().unwrap_or(""));
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if kind.is_empty() || version.is_empty() {
        return Err(format!("a generated object without apiVersion or kind: {doc}"));
    }
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
    Ok(Api::namespaced_with(client, ns, &ar))
}

/// `doc` as an object to send: what the server sets itself dropped, its status apart.
fn split_status(mut doc: Value) -> (String, Value, Option<Value>) {
    let status = doc.as_object_mut().and_then(|o| o.remove("status")).filter(|s| !s.is_null());
    if let Some(meta) = doc["metadata"].as_object_mut() {
        for k in ["namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"] {
            meta.remove(k);
        }
    }
    (doc["metadata"]["name"].as_str().unwrap_or("").to_string(), doc, status)
}

async fn make_one(api: Api<DynamicObject>, doc: Value) -> Result<usize, String> {
    let kind = doc["kind"].as_str().unwrap_or("").to_string();
    let (name, doc, status) = split_status(doc);
    api.patch(&name, &PatchParams::apply(OPERATOR).force(), &Patch::Apply(&doc))
        .await
        .map_err(|e| format!("making {kind} {name}: {e}"))?;
    let Some(status) = status else { return Ok(1) };
    patch_status(&api, &kind, &name, status).await?;
    Ok(2)
}

async fn patch_status(api: &Api<DynamicObject>, kind: &str, name: &str, status: Value) -> Result<(), String> {
    let pp = PatchParams { field_manager: Some(OPERATOR.into()), ..PatchParams::default() };
    api.patch_status(name, &pp, &Patch::Merge(json!({ "status": status })))
        .await
        .map(drop)
        .map_err(|e| format!("the status of {kind} {name}: {e}"))
}

/// An audit log line, if it is one.
fn event(line: &str) -> Option<Event> {
    let v: Value = serde_json::from_str(line).ok()?;
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let time = |v: &Value| -> Option<Duration> {
        let t: jiff::Timestamp = v.as_str()?.parse().ok()?;
        Some(Duration::from_nanos(u64::try_from(t.as_nanosecond()).ok()?))
    };
    Some(Event {
        stage: s(&v["stage"]),
        user: s(&v["user"]["username"]),
        verb: s(&v["verb"]),
        resource: s(&v["objectRef"]["resource"]),
        subresource: s(&v["objectRef"]["subresource"]),
        name: s(&v["objectRef"]["name"]),
        code: v["responseStatus"]["code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
        received: time(&v["requestReceivedTimestamp"])?,
        at: time(&v["stageTimestamp"])?,
    })
}

impl Cluster for RealCluster {
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn lease_namespace(&self) -> &str {
        &self.leases
    }

    fn now(&self) -> Duration {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
    }

    fn requests(&mut self) -> Result<&[Req], String> {
        self.refresh()?;
        Ok(&self.reqs)
    }

    /// The server makes a pod without its status, so the pod is made without its labels
    /// first (the controller watches pods by the label `batch.kubernetes.io/job-name`: it does
    /// not see it), then given its status, then its labels: the controller sees it at once
    /// with the status naming the reason, as on the fake server. (Made bare and labelled, the
    /// pod's first evaluation was still under way, getting its references, when the status
    /// came, and the bench took that evaluation's write for the change's.)
    fn fail_attempt(&mut self, pod: Value) -> Result<Duration, String> {
        let api = api_for(self.kube.client().kube(), &self.ns, &pod)?;
        let (name, mut doc, status) = split_status(pod);
        let labels = doc["metadata"].as_object_mut().and_then(|m| m.remove("labels")).unwrap_or_default();
        let status = status.ok_or("a failed pod without a status")?;
        self.kube.block_on(async {
            api.patch(&name, &PatchParams::apply(OPERATOR).force(), &Patch::Apply(&doc))
                .await
                .map_err(|e| format!("making pod {name}: {e}"))?;
            patch_status(&api, "Pod", &name, status).await?;
            let pp = PatchParams { field_manager: Some(OPERATOR.into()), ..PatchParams::default() };
            api.patch(&name, &pp, &Patch::Merge(json!({"metadata": {"labels": labels}})))
                .await
                .map_err(|e| format!("labelling pod {name}: {e}"))
        })?;
        // When the server had it: the label write's answer, in the audit log.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.refresh()?;
            let done = self.events.iter().rev().find(|e| {
                e.stage == "ResponseComplete"
                    && e.user == ADMIN
                    && e.verb == "patch"
                    && e.resource == "pods"
                    && e.subresource.is_empty()
                    && e.name == name
            });
            if let Some(e) = done {
                return Ok(e.at);
            }
            if Instant::now() > deadline {
                return Err(format!("the label write of pod {name} is not in the API server's audit log"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The change sent as a merge patch, timed from when it was sent (the server's clock is
    /// this machine's).
    fn rotate_secret(&mut self, name: &str, string_data: Value) -> Result<Duration, String> {
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets");
        let api: Api<DynamicObject> = Api::namespaced_with(self.kube.client().kube(), &self.ns, &ar);
        let pp = PatchParams { field_manager: Some(OPERATOR.into()), ..PatchParams::default() };
        let at = self.now();
        self.kube
            .block_on(api.patch(name, &pp, &Patch::Merge(json!({ "stringData": string_data }))))
            .map(drop)
            .map_err(|e| format!("rotating Secret {name}: {e}"))?;
        Ok(at)
    }

    fn touch_job(&mut self, job: &str, n: u64) -> Result<(), String> {
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs");
        let api: Api<DynamicObject> = Api::namespaced_with(self.kube.client().kube(), &self.ns, &ar);
        let pp = PatchParams { field_manager: Some("edpm-bench".into()), ..PatchParams::default() };
        let patch = json!({"metadata": {"annotations": {"bench/churn": n.to_string()}}});
        self.kube
            .block_on(api.patch(job, &pp, &Patch::Merge(&patch)))
            .map(drop)
            .map_err(|e| format!("annotating Job {job}: {e}"))
    }

    /// The controller's and the peer's requests the server refused or failed, over the whole
    /// run: under the shipped RBAC, none should be.
    fn summary(&mut self) -> Result<Vec<String>, String> {
        self.refresh()?;
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        let done = self.events.iter().filter(|e| e.stage == "ResponseComplete" && e.user == self.user);
        let total = done.clone().count();
        let mut names: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for e in done.filter(|e| e.code >= 400) {
            let what = format!("{} {} {}", e.code, e.verb, e.resource);
            *by.entry(what.clone()).or_default() += 1;
            names.entry(what).or_default().insert(&e.name);
        }
        let refused: Vec<String> = by
            .iter()
            .map(|(k, n)| {
                let of: Vec<&str> = names.get(k).into_iter().flatten().copied().take(3).collect();
                format!("{k} ×{n} ({})", of.join(", "))
            })
            .collect();
        Ok(vec![format!(
            "real server: of the {total} requests of {} (the controller, then the peer), answered 4xx or 5xx: {}",
            self.user,
            if refused.is_empty() { "none".to_string() } else { refused.join(", ") }
        )])
    }

    fn idle_begin(&mut self) -> Result<(), String> {
        let counted = self.api.requests_by_verb(|_| true)?;
        self.idle_from = Some((self.now(), counted));
        Ok(())
    }

    /// The whole server's count (`apiserver_request_total`: every client's requests, the
    /// server's own loops included, each counted when it ends, a watch too), and the audit
    /// log's by user (each request counted when received; the controller's alone is its own).
    fn idle_end(&mut self, seconds: u64) -> Result<Vec<String>, String> {
        let Some((from, before)) = self.idle_from.take() else { return Ok(Vec::new()) };
        let to = self.now();
        let after = self.api.requests_by_verb(|_| true)?;
        self.refresh()?;
        let per = |n: f64| n * 60.0 / seconds as f64;
        let grown: Vec<String> = after
            .iter()
            .map(|(verb, n)| (verb, n - before.get(verb).copied().unwrap_or(0.0)))
            .filter(|(_, d)| *d > 0.0)
            .map(|(verb, d)| format!("{verb} {:.1}", per(d)))
            .collect();
        let or_none = |s: String| if s.is_empty() { "none".to_string() } else { s };
        Ok(vec![
            format!(
                "real server, idle, per minute: apiserver_request_total grew by {}",
                or_none(grown.join(", "))
            ),
            format!(
                "real server, idle, per minute, audit log by user: {}",
                or_none(self.audited_per_minute(from, to, seconds))
            ),
        ])
    }
}
