//! A real Kubernetes API server for the tests and the benchmarks: kube-apiserver and etcd,
//! built from Go modules by `scripts/apiserver.sh` (the binaries' paths in
//! `target/real-api.env`), started here on free loopback ports, as controller-runtime's envtest
//! starts them. What the fake API server (`fake_api`) can only promise, this one decides: CRD
//! structure and printer columns, server-side apply's field ownership and list merging, RBAC
//! (authorization mode RBAC: a verb missing from a Role is a real 403), ServiceAccount tokens
//! (TokenRequest, TokenReview, SubjectAccessReview), `410 Gone` after etcd compacts, names and
//! labels the server refuses with 422.
//!
//! The server's certificates are made here: a CA, a serving certificate for 127.0.0.1, an
//! admin client certificate (group `system:masters`) for set-up, and the key that signs
//! ServiceAccount tokens. Every request is recorded in an audit log (level Metadata: who, what,
//! the answer's code, never a body), so a test can say which requests a ServiceAccount was
//! refused. It listens on loopback only.
//!
//! The processes die with the test process: each is started with `PR_SET_PDEATHSIG` from a
//! thread that lives as long as the process (the signal follows the thread that started a
//! child, and test threads end), and the shared server is stopped and its directory removed at
//! exit.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::Value;

/// The built programs and the Kubernetes release they are.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub apiserver: PathBuf,
    pub etcd: PathBuf,
    pub kubectl: PathBuf,
    pub version: String,
}

impl Binaries {
    /// The programs `scripts/apiserver.sh` built, named by `repo/target/real-api.env`; the
    /// same variables in the environment win. `Err` says why there are none.
    pub fn find(repo: &Path) -> Result<Binaries, String> {
        let file = repo.join("target/real-api.env");
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let get = |key: &str| -> Option<String> {
            std::env::var(key).ok().filter(|v| !v.is_empty()).or_else(|| {
                text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
            })
        };
        let (Some(apiserver), Some(etcd), Some(kubectl)) =
            (get("EDPM_REAL_KUBE_APISERVER"), get("EDPM_REAL_ETCD"), get("EDPM_REAL_KUBECTL"))
        else {
            return Err(format!(
                "{} is missing: run scripts/apiserver.sh (it builds kube-apiserver and etcd with Go)",
                file.display()
            ));
        };
        let b = Binaries {
            apiserver: apiserver.into(),
            etcd: etcd.into(),
            kubectl: kubectl.into(),
            version: get("EDPM_REAL_KUBE_VERSION").unwrap_or_default(),
        };
        for p in [&b.apiserver, &b.etcd, &b.kubectl] {
            if !p.is_file() {
                return Err(format!("{} is missing: run scripts/apiserver.sh again", p.display()));
            }
        }
        Ok(b)
    }
}

/// How a server is started.
#[derive(Clone, Debug)]
pub struct Options {
    /// kube-apiserver's watch cache (on in every real cluster). Off, a watch is served by etcd
    /// itself, so a watch resumed from a compacted revision is answered `410 Gone` at once.
    pub watch_cache: bool,
    /// The audit log (every request's user, verb, resource and answer code).
    pub audit: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { watch_cache: true, audit: true }
    }
}

/// A running kube-apiserver and its etcd, stopped (and its directory removed) when dropped.
pub struct RealApi {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The Kubernetes release, as `v1.X.Y`.
    pub version: String,
    /// How long the start took, until `/readyz` answered.
    pub started_in: Duration,
    dir: PathBuf,
    etcd_url: String,
    kubectl: PathBuf,
    children: Mutex<Vec<Child>>,
    /// The shared server outlives every test; its directory goes at exit.
    keep_dir: bool,
    namespaces: AtomicUsize,
}

static SHARED: OnceLock<Result<RealApi, String>> = OnceLock::new();
static SHARED_CLEANUP: Mutex<Option<(Vec<u32>, PathBuf)>> = Mutex::new(None);

impl RealApi {
    /// The one server of this test process, started on first use: each test takes a namespace
    /// of its own ([`RealApi::namespace`]). `Err` when it cannot start (or cannot be found).
    pub fn shared(bins: &Binaries) -> Result<&'static RealApi, String> {
        SHARED
            .get_or_init(|| {
                let api = RealApi::start_in(bins, &Options::default(), true)?;
                let pids = api.children.lock().unwrap().iter().map(Child::id).collect();
                *SHARED_CLEANUP.lock().unwrap() = Some((pids, api.dir.clone()));
                // SAFETY: registers a plain function with no arguments, run once at exit.
                unsafe { libc::atexit(stop_shared) };
                Ok(api)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// A server of the caller's own (for what would disturb the shared one: compacting etcd,
    /// cutting connections), stopped when dropped.
    pub fn start(bins: &Binaries, opts: &Options) -> Result<RealApi, String> {
        RealApi::start_in(bins, opts, false)
    }

    fn start_in(bins: &Binaries, opts: &Options, keep_dir: bool) -> Result<RealApi, String> {
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("edpm-real-api-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory for the API server: {e}"))?
            .keep();
        make_pki(&dir)?;
        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut api = RealApi {
            url: format!("https://127.0.0.1:{api_port}"),
            version: bins.version.clone(),
            started_in: Duration::ZERO,
            dir: dir.clone(),
            etcd_url: etcd_url.clone(),
            kubectl: bins.kubectl.clone(),
            children: Mutex::new(Vec::new()),
            keep_dir,
            namespaces: AtomicUsize::new(0),
        };
        let mut etcd = Command::new(&bins.etcd);
        etcd.args([
            "--name=default",
            &format!("--data-dir={}", dir.join("etcd").display()),
            &format!("--listen-client-urls={etcd_url}"),
            &format!("--advertise-client-urls={etcd_url}"),
            &format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            &format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            &format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            // A test's etcd need not survive a power cut: fsync would only slow every write.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]);
        api.spawn(etcd, "etcd.log")?;
        wait_until(Duration::from_secs(30), || api.exited().is_none() && etcd_ready(&etcd_url))
            .map_err(|()| format!("etcd did not start in 30 s: {}", api.log_tail("etcd.log")))?;
        api.check_running("etcd.log")?;
        let mut server = Command::new(&bins.apiserver);
        server.args(api.apiserver_args(api_port, opts)?);
        api.spawn(server, "kube-apiserver.log")?;
        let admin = api.admin_kubeconfig();
        write(
            &admin,
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: real\n  context:\n    cluster: real\n    user: admin\ncurrent-context: real\n",
                api.url,
                dir.join("ca.pem").display(),
                dir.join("admin.pem").display(),
                dir.join("admin-key.pem").display()
            ),
        )?;
        wait_until(Duration::from_secs(90), || {
            api.exited().is_some() || api.kubectl(&["get", "--raw", "/readyz"], None).is_ok()
        })
        .map_err(|()| {
            format!("kube-apiserver did not become ready in 90 s: {}", api.log_tail("kube-apiserver.log"))
        })?;
        api.check_running("kube-apiserver.log")?;
        api.started_in = started.elapsed();
        let _ = writeln!(
            std::io::stderr(),
            "real-api: kube-apiserver {} and etcd ready at {} in {:.1} s",
            api.version,
            api.url,
            api.started_in.as_secs_f64()
        );
        Ok(api)
    }

    fn apiserver_args(&self, port: u16, opts: &Options) -> Result<Vec<String>, String> {
        let d = |f: &str| self.dir.join(f).display().to_string();
        let mut args = vec![
            format!("--etcd-servers={}", self.etcd_url),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", d("serving.pem")),
            format!("--tls-private-key-file={}", d("serving-key.pem")),
            format!("--client-ca-file={}", d("ca.pem")),
            // Only RBAC decides: what a Role does not grant is refused, as in a cluster.
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer={}", self.url),
            format!("--service-account-key-file={}", d("sa.pub")),
            format!("--service-account-signing-key-file={}", d("sa-key.pem")),
            "--service-cluster-ip-range=10.96.0.0/24".into(),
            "--allow-privileged=true".into(),
            format!("--cert-dir={}", d("certs")),
            format!("--watch-cache={}", opts.watch_cache),
            "--profiling=false".into(),
        ];
        if opts.audit {
            write(
                &self.dir.join("audit-policy.yaml"),
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n  - level: Metadata\n",
            )?;
            args.push(format!("--audit-policy-file={}", d("audit-policy.yaml")));
            args.push(format!("--audit-log-path={}", d("audit.log")));
            args.push("--audit-log-mode=blocking".into());
            args.push("--audit-log-maxbackup=0".into());
            // Never rotated: the log rotates at its size limit (100 MB unless given), and a
            // rotated log's requests would be missing from what `audited` reads (a
            // benchmark of 10,000 nodes writes some 45 MB, a longer run more).
            args.push("--audit-log-maxsize=1000000".into());
        }
        Ok(args)
    }

    /// Starts `cmd` with its output in `log`, from the keeper thread, so it dies with this
    /// process.
    fn spawn(&self, mut cmd: Command, log: &str) -> Result<(), String> {
        let out = std::fs::File::create(self.dir.join(log)).map_err(|e| format!("{log}: {e}"))?;
        let err = out.try_clone().map_err(|e| format!("{log}: {e}"))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = keep(cmd).map_err(|e| format!("cannot start {log}: {e}"))?;
        self.children.lock().unwrap().push(child);
        Ok(())
    }

    /// A started process that has exited already: its exit status.
    fn exited(&self) -> Option<std::process::ExitStatus> {
        self.children.lock().unwrap().iter_mut().find_map(|c| c.try_wait().ok().flatten())
    }

    fn check_running(&self, log: &str) -> Result<(), String> {
        match self.exited() {
            Some(status) => {
                Err(format!("{} exited ({status}): {}", log.trim_end_matches(".log"), self.log_tail(log)))
            }
            None => Ok(()),
        }
    }

    fn log_tail(&self, log: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(log)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    /// The directory holding the certificates, kubeconfigs, logs and etcd's data.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA that signed the serving certificate (PEM file).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A kubeconfig for the cluster's administrator (group `system:masters`), for set-up.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// The kubectl of the server's release.
    pub fn kubectl_path(&self) -> &Path {
        &self.kubectl
    }

    /// kubectl as the administrator: its stdout, or its stderr (and exit) when it fails.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        self.kubectl_as(&self.admin_kubeconfig(), args, stdin)
    }

    /// kubectl with another kubeconfig.
    pub fn kubectl_as(
        &self,
        kubeconfig: &Path,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<String, String> {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("cannot run kubectl: {e}"))?;
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            let text = text.to_string();
            // Written from a thread: a large input would otherwise fill the pipe while kubectl
            // waits for us to read its output.
            std::thread::spawn(move || {
                let _ = pipe.write_all(text.as_bytes());
            });
        }
        let out = child.wait_with_output().map_err(|e| format!("kubectl: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "kubectl {} ({}): {}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ))
        }
    }

    /// `kubectl get -o json` as the administrator, parsed.
    pub fn get_json(&self, args: &[&str]) -> Result<Value, String> {
        let mut a = vec!["get", "-o", "json"];
        a.extend_from_slice(args);
        let text = self.kubectl(&a, None)?;
        serde_json::from_str(&text).map_err(|e| format!("kubectl get {}: {e}", args.join(" ")))
    }

    /// Server-side apply of `docs` as field manager `manager` (as the administrator), sent as a
    /// YAML stream: given a `kind: List`, kubectl validates on the client against the published
    /// schema and refuses what the server would default (upstream's `deploymentRequeueTime`).
    pub fn apply(&self, manager: &str, docs: &[Value]) -> Result<String, String> {
        let stream: String = docs.iter().map(|d| format!("---\n{d}\n")).collect();
        self.kubectl(
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                &format!("--field-manager={manager}"),
                "-f",
                "-",
            ],
            Some(&stream),
        )
    }

    /// The CRDs of every kind edpm-agent reads: upstream's own from `upstream` (the
    /// `reference/upstream` directory of `../shared`: openstack-operator's NodeSet, Deployment
    /// and Service, the seeds' model from dataplane-operator, nova-operator's
    /// NovaExternalCompute), ours from `repo`, and a minimal one (any fields, a status
    /// subresource) for every kind no upstream CRD is at hand for; all of them minimal
    /// without `upstream`. Returns once every CRD is established.
    pub fn install_crds(&self, repo: &Path, upstream: Option<&Path>) -> Result<(), String> {
        let mut docs = Vec::new();
        let mut upstream_kinds = Vec::new();
        if let Some(up) = upstream {
            let op =
                up.join("openstack/openstack-k8s-operators__openstack-operator@84322c77/config/crd/bases");
            let seeds =
                up.join("openstack/openstack-k8s-operators__dataplane-operator@605f1a16/config/crd/bases");
            for (dir, file) in [
                (&op, "dataplane.openstack.org_openstackdataplanenodesets.yaml"),
                (&op, "dataplane.openstack.org_openstackdataplanedeployments.yaml"),
                (&op, "dataplane.openstack.org_openstackdataplaneservices.yaml"),
                (&seeds, "dataplane.openstack.org_openstackdataplanes.yaml"),
                (&seeds, "dataplane.openstack.org_openstackdataplaneroles.yaml"),
                (&seeds, "dataplane.openstack.org_openstackdataplanenodes.yaml"),
                (&up.join("files"), "novaexternalcompute_crd.yaml"),
            ] {
                let mut crds = yaml_file(&dir.join(file))?;
                // The seeds' model and today's never shared a cluster: their short names
                // collide (OpenStackDataPlane's `osdps` is today's NodeSet's), and a CRD whose
                // names are refused is never established. The seeds' CRDs lose theirs.
                if *dir == seeds {
                    for c in &mut crds {
                        if let Some(names) = c["spec"]["names"].as_object_mut() {
                            names.remove("shortNames");
                        }
                    }
                }
                upstream_kinds.extend(
                    crds.iter().filter_map(|c| c["spec"]["names"]["kind"].as_str().map(str::to_string)),
                );
                docs.extend(crds);
            }
        }
        docs.extend(yaml_file(&repo.join("packaging/kubernetes/crds.yaml"))?);
        for (group, kind, plural) in READ_KINDS {
            if !upstream_kinds.iter().any(|k| k == kind) {
                docs.push(minimal_crd(group, kind, plural));
            }
        }
        self.apply("edpm-testkit", &docs)?;
        if let Err(e) =
            self.kubectl(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"], None)
        {
            // Which CRD, and why: the server says it in the CRD's conditions.
            let crds = self.get_json(&["crd"])?;
            let why: Vec<String> = crds["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| {
                    !c["status"]["conditions"].as_array().is_some_and(|cs| {
                        cs.iter().any(|x| x["type"] == "Established" && x["status"] == "True")
                    })
                })
                .map(|c| format!("{}: {}", c["metadata"]["name"], c["status"]["conditions"]))
                .collect();
            return Err(format!("{e}\n{}", why.join("\n")));
        }
        Ok(())
    }

    /// Makes `docs` in `namespace` as their operators would: each object first (field manager
    /// `openstack-operator`), then its status through the status subresource. What the API
    /// server sets itself (uid, resourceVersion, creation time) is dropped; objects whose
    /// files say they were made at different times are made a second apart, in that order (the
    /// server dates what it creates), so that the newest Deployment and the last attempt are
    /// the same here as in the files. The objects as sent.
    pub fn create_as_operator(&self, namespace: &str, docs: Vec<Value>) -> Result<Vec<Value>, String> {
        let mut docs = docs;
        docs.sort_by_key(created);
        let mut batches: Vec<(String, Vec<Value>)> = Vec::new();
        let mut statuses = Vec::new();
        for mut d in docs {
            let when = created(&d);
            let meta = d["metadata"].as_object_mut().ok_or("an object without metadata")?;
            meta.insert("namespace".into(), Value::String(namespace.into()));
            for k in ["uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"] {
                meta.remove(k);
            }
            let status = d.as_object_mut().and_then(|o| o.remove("status"));
            if let Some(s) = status.filter(|s| !s.is_null()) {
                statuses.push((resource(&d), d["metadata"]["name"].as_str().unwrap_or("").to_string(), s));
            }
            match batches.last_mut() {
                Some((w, batch)) if *w == when => batch.push(d),
                _ => batches.push((when, vec![d])),
            }
        }
        let mut objects = Vec::new();
        for (i, (_, batch)) in batches.into_iter().enumerate() {
            if i > 0 {
                next_second();
            }
            self.apply("openstack-operator", &batch).map_err(|e| format!("creating the objects: {e}"))?;
            objects.extend(batch);
        }
        for (res, name, status) in statuses {
            self.patch_status(namespace, &format!("{res}/{name}"), &status)?;
        }
        Ok(objects)
    }

    /// A merge patch of `object`'s (`resource/name`) status, as field manager
    /// `openstack-operator`.
    pub fn patch_status(&self, namespace: &str, object: &str, status: &Value) -> Result<(), String> {
        let body = serde_json::json!({ "status": status }).to_string();
        self.kubectl(
            &[
                "patch",
                object,
                "-n",
                namespace,
                "--subresource=status",
                "--type=merge",
                "--field-manager=openstack-operator",
                "-p",
                &body,
            ],
            None,
        )
        .map(drop)
        .map_err(|e| format!("the status of {object}: {e}"))
    }

    /// A new namespace `<hint>-<n>`, unique on this server (with its `default`
    /// ServiceAccount, which kube-controller-manager would make and no one runs here).
    pub fn namespace(&self, hint: &str) -> Result<String, String> {
        let n = self.namespaces.fetch_add(1, Ordering::SeqCst);
        let name = format!("{hint}-{n}");
        self.create_namespace(&name)?;
        Ok(name)
    }

    /// Makes namespace `name` (and its `default` ServiceAccount); one that exists is kept.
    pub fn create_namespace(&self, name: &str) -> Result<(), String> {
        let yaml = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: default\n  namespace: {name}\n"
        );
        self.kubectl(&["apply", "--server-side", "--field-manager=edpm-testkit", "-f", "-"], Some(&yaml))
            .map(drop)
    }

    /// The controller as the manifests deploy it, for one data-plane namespace and one of
    /// the node agents' Leases: its shipped RBAC (`rbac-controller.yaml`, `rbac-metrics.yaml`
    /// from `repo`, rendered by [`shipped`], cluster-wide names made unique with `namespace`)
    /// applied, and a kubeconfig for its ServiceAccount with a TokenRequest token valid for
    /// `seconds`, written to `kubeconfig`.
    pub fn deploy_controller(
        &self,
        repo: &Path,
        namespace: &str,
        leases: &str,
        kubeconfig: &Path,
        seconds: u64,
    ) -> Result<(), String> {
        let mut docs = shipped(repo, "rbac-controller.yaml", namespace, leases)?;
        docs.extend(shipped(repo, "rbac-metrics.yaml", namespace, leases)?);
        uniquely(&mut docs, namespace);
        self.apply("edpm-testkit", &docs).map_err(|e| format!("the controller's RBAC: {e}"))?;
        self.service_account_kubeconfig(kubeconfig, namespace, "edpm-agent-controller", seconds)
    }

    /// A bound token of ServiceAccount `namespace/name` (made if missing) from TokenRequest,
    /// valid for `seconds` (the server's minimum is 600).
    pub fn token(&self, namespace: &str, name: &str, seconds: u64) -> Result<String, String> {
        let yaml = format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        );
        self.kubectl(&["apply", "--server-side", "--field-manager=edpm-testkit", "-f", "-"], Some(&yaml))?;
        let token = self
            .kubectl(&["create", "token", name, "-n", namespace, &format!("--duration={seconds}s")], None)?;
        Ok(token.trim().to_string())
    }

    /// A kubeconfig (written to `path`) that authenticates with `token`, in `namespace`.
    pub fn token_kubeconfig(&self, path: &Path, token: &str, namespace: &str) -> Result<(), String> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: real\n  context:\n    cluster: real\n    user: user\n    namespace: {namespace}\ncurrent-context: real\n",
            self.url,
            self.ca_file().display()
        );
        write(path, &text)?;
        restrict(path)
    }

    /// A kubeconfig for ServiceAccount `namespace/name` with a fresh token of `seconds`,
    /// written to `path`, its default namespace `namespace`.
    pub fn service_account_kubeconfig(
        &self,
        path: &Path,
        namespace: &str,
        name: &str,
        seconds: u64,
    ) -> Result<(), String> {
        let token = self.token(namespace, name, seconds)?;
        self.token_kubeconfig(path, &token, namespace)
    }

    /// The audited requests of `user` (e.g. `system:serviceaccount:NS:NAME`) that the server
    /// answered with `code`: `VERB URI` each.
    pub fn audited(&self, user: &str, code: u16) -> Vec<String> {
        self.audit_events()
            .into_iter()
            .filter(|e| e["user"]["username"] == user && e["responseStatus"]["code"] == code)
            .map(|e| {
                format!("{} {}", e["verb"].as_str().unwrap_or(""), e["requestURI"].as_str().unwrap_or(""))
            })
            .collect()
    }

    /// Every request of `user` the audit log holds, as `(verb, URI, code)`.
    pub fn audited_requests(&self, user: &str) -> Vec<(String, String, u16)> {
        self.audit_events()
            .into_iter()
            .filter(|e| e["user"]["username"] == user)
            .map(|e| {
                (
                    e["verb"].as_str().unwrap_or("").to_string(),
                    e["requestURI"].as_str().unwrap_or("").to_string(),
                    e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
                )
            })
            .collect()
    }

    fn audit_events(&self) -> Vec<Value> {
        let Ok(f) = std::fs::File::open(self.dir.join("audit.log")) else { return Vec::new() };
        BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .filter(|e| e["stage"] == "ResponseComplete" || e["stage"] == "Panic")
            .collect()
    }

    /// The API server's own metrics (Prometheus text).
    pub fn metrics(&self) -> Result<String, String> {
        self.kubectl(&["get", "--raw", "/metrics"], None)
    }

    /// `apiserver_request_total`, summed by verb (over every resource and code), with
    /// `filter` applied to each series' labels first.
    pub fn requests_by_verb(&self, filter: impl Fn(&str) -> bool) -> Result<BTreeMap<String, f64>, String> {
        let text = self.metrics()?;
        let mut by: BTreeMap<String, f64> = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
            let Some((labels, value)) = line.rsplit_once(' ') else { continue };
            if !filter(labels) {
                continue;
            }
            let verb = labels.split("verb=\"").nth(1).and_then(|v| v.split('"').next()).unwrap_or("");
            *by.entry(verb.to_string()).or_default() += value.parse::<f64>().unwrap_or(0.0);
        }
        Ok(by)
    }

    /// Compacts etcd up to its current revision (and defragments nothing): every watch that
    /// resumes from an older `resourceVersion` is answered `410 Gone`. The revision.
    pub fn compact(&self) -> Result<i64, String> {
        let head = etcd_post(&self.etcd_url, "/v3/kv/range", r#"{"key":"AA=="}"#)?;
        let rev: i64 = head["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| format!("etcd's revision not in {head}"))?;
        etcd_post(
            &self.etcd_url,
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{rev}","physical":true}}"#),
        )?;
        Ok(rev)
    }

    /// The API server's log so far (its last lines), for a failing test's message.
    pub fn log(&self) -> String {
        self.log_tail("kube-apiserver.log")
    }
}

impl Drop for RealApi {
    fn drop(&mut self) {
        for c in self.children.lock().unwrap().iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The kinds edpm-agent reads that need a CRD (`edpm_core::kinds::KINDS` but Kubernetes' own
/// and ours): group, kind, plural.
const READ_KINDS: &[(&str, &str, &str)] = &[
    ("dataplane.openstack.org", "OpenStackDataPlane", "openstackdataplanes"),
    ("dataplane.openstack.org", "OpenStackDataPlaneRole", "openstackdataplaneroles"),
    ("dataplane.openstack.org", "OpenStackDataPlaneNode", "openstackdataplanenodes"),
    ("dataplane.openstack.org", "OpenStackDataPlaneNodeSet", "openstackdataplanenodesets"),
    ("dataplane.openstack.org", "OpenStackDataPlaneService", "openstackdataplaneservices"),
    ("dataplane.openstack.org", "OpenStackDataPlaneDeployment", "openstackdataplanedeployments"),
    ("network.openstack.org", "IPSet", "ipsets"),
    ("network.openstack.org", "NetConfig", "netconfigs"),
    ("network.openstack.org", "DNSMasq", "dnsmasqs"),
    ("nova.openstack.org", "NovaCell", "novacells"),
    ("nova.openstack.org", "NovaExternalCompute", "novaexternalcomputes"),
    ("core.openstack.org", "OpenStackControlPlane", "openstackcontrolplanes"),
    ("core.openstack.org", "OpenStackVersion", "openstackversions"),
    ("baremetal.openstack.org", "OpenStackBaremetalSet", "openstackbaremetalsets"),
];

/// A CRD that takes any fields, with a status subresource.
fn minimal_crd(group: &str, kind: &str, plural: &str) -> Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural, "singular": kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1beta1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

/// The shipped manifests in `file` (under `repo`'s packaging/kubernetes), rendered for a
/// namespace of the caller's own: `openstack` → `namespace`, `edpm-node-lease` → `leases`.
pub fn shipped(repo: &Path, file: &str, namespace: &str, leases: &str) -> Result<Vec<Value>, String> {
    let mut docs = yaml_file(&repo.join("packaging/kubernetes").join(file))?;
    for d in &mut docs {
        rename_namespaces(d, namespace, leases);
    }
    Ok(docs)
}

fn rename_namespaces(v: &mut Value, namespace: &str, leases: &str) {
    match v {
        Value::String(s) if s == "openstack" => *s = namespace.to_string(),
        Value::String(s) if s == "edpm-node-lease" => *s = leases.to_string(),
        Value::Array(a) => a.iter_mut().for_each(|x| rename_namespaces(x, namespace, leases)),
        Value::Object(o) => o.values_mut().for_each(|x| rename_namespaces(x, namespace, leases)),
        _ => {}
    }
}

/// Cluster-wide objects (ClusterRoles and their bindings) named with `suffix`: each
/// namespace's copy of the manifests its own.
pub fn uniquely(docs: &mut [Value], suffix: &str) {
    for d in docs.iter_mut() {
        let cluster_wide = matches!(d["kind"].as_str(), Some("ClusterRole" | "ClusterRoleBinding"));
        if let (true, Some(name)) = (cluster_wide, d["metadata"]["name"].as_str()) {
            d["metadata"]["name"] = Value::String(format!("{name}-{suffix}"));
        }
        if let (true, Some(role)) = (d["kind"] == "ClusterRoleBinding", d["roleRef"]["name"].as_str()) {
            d["roleRef"]["name"] = Value::String(format!("{role}-{suffix}"));
        }
    }
}

/// The documents of a YAML stream, a `kind: List`'s items in its place.
pub fn yaml_docs(text: &str) -> Result<Vec<Value>, String> {
    let docs = serde_saphyr::from_multiple::<Value>(text).map_err(|e| e.to_string())?;
    Ok(docs
        .into_iter()
        .filter(|d| !d.is_null())
        .flat_map(|d| match d["items"].as_array() {
            Some(items) if d["kind"] == "List" => items.clone(),
            _ => vec![d],
        })
        .collect())
}

fn yaml_file(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    yaml_docs(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// kubectl's name for an object's resource: `kind.group` (the core group's kinds bare).
fn resource(doc: &Value) -> String {
    let kind = doc["kind"].as_str().unwrap_or("").to_lowercase();
    match doc["apiVersion"].as_str().unwrap_or("").split_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind,
    }
}

/// An object's creation time as its file says, or "" when it says none.
fn created(d: &Value) -> String {
    d["metadata"]["creationTimestamp"].as_str().unwrap_or("").to_string()
}

/// Sleeps into the next whole second of the wall clock (the resolution of creationTimestamp).
pub fn next_second() {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    std::thread::sleep(
        Duration::from_nanos(1_000_000_000 - u64::from(now.subsec_nanos())) + Duration::from_millis(20),
    );
}

extern "C" fn stop_shared() {
    if let Ok(mut g) = SHARED_CLEANUP.lock()
        && let Some((pids, dir)) = g.take()
    {
        for pid in pids.iter().rev() {
            // SAFETY: kill(2) on processes this test process started.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A TCP relay in front of a server that a test can cut: every connection through it is
/// closed and new ones refused until it is let through again, as when a network partition
/// drops a client's watches.
pub struct Relay {
    pub port: u16,
    state: std::sync::Arc<RelayState>,
}

#[derive(Default)]
struct RelayState {
    cut: std::sync::atomic::AtomicBool,
    generation: AtomicUsize,
    stop: std::sync::atomic::AtomicBool,
}

impl Relay {
    /// Relays 127.0.0.1:port to `target` (`host:port`).
    pub fn start(target: &str) -> Result<Relay, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let state = std::sync::Arc::new(RelayState::default());
        let (s, target) = (state.clone(), target.to_string());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(down) = conn else { continue };
                if s.cut.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(up) = TcpStream::connect(&target) else { continue };
                let generation = s.generation.load(Ordering::SeqCst);
                for (mut from, mut to) in
                    [(down.try_clone(), up.try_clone()), (up.try_clone(), down.try_clone())]
                        .into_iter()
                        .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        let _ = from.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut buf = [0u8; 16384];
                        loop {
                            if s.generation.load(Ordering::SeqCst) != generation {
                                break;
                            }
                            match from.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                        let _ = from.shutdown(std::net::Shutdown::Both);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Ok(Relay { port, state })
    }

    /// Closes every relayed connection and refuses new ones.
    pub fn cut(&self) {
        self.state.cut.store(true, Ordering::SeqCst);
        self.state.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Relays again.
    pub fn restore(&self) {
        self.state.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.cut();
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// The certificates and keys of one server, written into its directory.
fn make_pki(dir: &Path) -> Result<(), String> {
    let e = |what: &'static str| move |err: rcgen::Error| format!("cannot make the {what}: {err}");
    let ca_key = KeyPair::generate().map_err(e("CA key"))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e("CA"))?;
    ca.distinguished_name.push(DnType::CommonName, "edpm-testkit-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).map_err(e("CA certificate"))?;
    let issuer = Issuer::new(ca, ca_key);

    let serving_key = KeyPair::generate().map_err(e("serving key"))?;
    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "kubernetes.default.svc".to_string(),
    ])
    .map_err(e("serving certificate"))?;
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer).map_err(e("serving certificate"))?;

    let admin_key = KeyPair::generate().map_err(e("admin key"))?;
    let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(e("admin certificate"))?;
    admin.distinguished_name.push(DnType::CommonName, "edpm-testkit-admin");
    admin.distinguished_name.push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer).map_err(e("admin certificate"))?;

    let sa_key = KeyPair::generate().map_err(e("ServiceAccount signing key"))?;
    for (file, text) in [
        ("ca.pem", ca_cert.pem()),
        ("serving.pem", serving_cert.pem()),
        ("serving-key.pem", serving_key.serialize_pem()),
        ("admin.pem", admin_cert.pem()),
        ("admin-key.pem", admin_key.serialize_pem()),
        ("sa-key.pem", sa_key.serialize_pem()),
        ("sa.pub", sa_key.public_key_pem()),
    ] {
        write(&dir.join(file), &text)?;
        restrict(&dir.join(file))?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn restrict(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))
}

/// A port free on loopback now (bound, then let go for the server to take).
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let deadline = Instant::now() + limit;
    while !ready() {
        if Instant::now() > deadline {
            return Err(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn etcd_ready(url: &str) -> bool {
    etcd_get(url, "/health").is_ok_and(|v| v["health"] == "true")
}

/// etcd's JSON gateway (plain HTTP on its client port): one request per connection.
fn etcd_post(url: &str, path: &str, body: &str) -> Result<Value, String> {
    etcd_http(url, "POST", path, body)
}

fn etcd_get(url: &str, path: &str) -> Result<Value, String> {
    etcd_http(url, "GET", path, "")
}

fn etcd_http(url: &str, method: &str, path: &str, body: &str) -> Result<Value, String> {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).map_err(|e| format!("etcd {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("etcd {path}: {e}"))?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| format!("etcd {path}: {e}"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("etcd {path}: no answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("etcd {path}: {head}: {body}"));
    }
    // A chunked answer: the JSON is the one chunk's body.
    let json = body.find('{').map_or(body, |i| &body[i..]);
    let json = json.rfind('}').map_or(json, |i| &json[..=i]);
    serde_json::from_str(json).map_err(|e| format!("etcd {path}: {e}: {body}"))
}

/// Starts `cmd` from the keeper thread, with `PR_SET_PDEATHSIG`: the child is killed when
/// that thread ends, which is when the process ends.
fn keep(cmd: Command) -> std::io::Result<Child> {
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for (mut cmd, answer) in rx {
                // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
                unsafe {
                    cmd.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    });
                }
                let _ = answer.send(cmd.spawn());
            }
        });
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    keeper.lock().unwrap().send((cmd, tx)).map_err(|_| std::io::Error::other("the keeper thread is gone"))?;
    rx.recv().map_err(|_| std::io::Error::other("the keeper thread is gone"))?
}
