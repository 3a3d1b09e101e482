//! The Kubernetes API as a source: lists the data-plane CRs and fetches the ConfigMaps and
//! Secrets they reference.
//!
//! Only this module talks to the API server for reading. Every object is turned back into
//! plain JSON and goes through the same [`Snapshot`] decoding as a manifest, so both sources
//! yield identical models. Requests are retried on 429 and 5xx (bounded, with backoff), since
//! an inventory script that fails on one throttled request fails a whole Ansible run.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

use crate::resource::Origin;
use crate::source::manifest::Document;
use crate::source::snapshot::{Located, Snapshot};
use crate::source::{Source, SourceError};

/// How to reach the cluster and which objects to read.
#[derive(Debug, Clone)]
pub struct KubeSource {
    /// Namespace to read; `None` means the kubeconfig context's (or the pod's) namespace.
    pub namespace: Option<String>,
    /// Label selector applied to the data-plane kinds that produce hosts.
    pub selector: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Attempts per request, including the first.
    pub attempts: u32,
}

/// A kind to list: (group, version, kind, plural, whether the label selector applies).
struct Listed {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    selected: bool,
}

const LISTED: &[Listed] = &[
    Listed {
        group: "dataplane.openstack.org",
        version: "v1beta1",
        kind: "OpenStackDataPlane",
        plural: "openstackdataplanes",
        selected: true,
    },
    Listed {
        group: "dataplane.openstack.org",
        version: "v1beta1",
        kind: "OpenStackDataPlaneRole",
        plural: "openstackdataplaneroles",
        selected: true,
    },
    Listed {
        group: "dataplane.openstack.org",
        version: "v1beta1",
        kind: "OpenStackDataPlaneNode",
        plural: "openstackdataplanenodes",
        selected: true,
    },
    Listed {
        group: "dataplane.openstack.org",
        version: "v1beta1",
        kind: "OpenStackDataPlaneNodeSet",
        plural: "openstackdataplanenodesets",
        selected: true,
    },
    Listed {
        group: "dataplane.openstack.org",
        version: "v1beta1",
        kind: "OpenStackDataPlaneService",
        plural: "openstackdataplaneservices",
        selected: false,
    },
    Listed {
        group: "network.openstack.org",
        version: "v1beta1",
        kind: "IPSet",
        plural: "ipsets",
        selected: false,
    },
    Listed {
        group: "network.openstack.org",
        version: "v1beta1",
        kind: "NetConfig",
        plural: "netconfigs",
        selected: false,
    },
    Listed {
        group: "network.openstack.org",
        version: "v1beta1",
        kind: "DNSMasq",
        plural: "dnsmasqs",
        selected: false,
    },
    Listed {
        group: "nova.openstack.org",
        version: "v1beta1",
        kind: "NovaCell",
        plural: "novacells",
        selected: false,
    },
    Listed {
        group: "nova.openstack.org",
        version: "v1beta1",
        kind: "NovaExternalCompute",
        plural: "novaexternalcomputes",
        selected: false,
    },
    Listed {
        group: "core.openstack.org",
        version: "v1beta1",
        kind: "OpenStackControlPlane",
        plural: "openstackcontrolplanes",
        selected: false,
    },
];

impl Source for KubeSource {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("Kubernetes API (namespace {ns})"),
            None => "Kubernetes API".to_string(),
        }
    }

    fn load(&self) -> Result<Snapshot, SourceError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            SourceError::ClusterConfig { message: format!("cannot start the async runtime: {e}") }
        })?;
        rt.block_on(self.load_async())
    }
}

impl KubeSource {
    async fn client(&self) -> Result<(kube::Client, String), SourceError> {
        let config_error = |message: String| SourceError::ClusterConfig { message };
        let options = KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let mut config = match &self.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| config_error(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| config_error(e.to_string()))?
            }
            None if self.context.is_some() => {
                kube::Config::from_kubeconfig(&options).await.map_err(|e| config_error(e.to_string()))?
            }
            None => kube::Config::infer().await.map_err(|e| config_error(e.to_string()))?,
        };
        config.connect_timeout = Some(self.timeout);
        config.read_timeout = Some(self.timeout);
        config.write_timeout = Some(self.timeout);
        let namespace = self.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let url = config.cluster_url.to_string();
        let client = kube::Client::try_from(config)
            .map_err(|e| config_error(format!("cannot build a client for {url}: {e}")))?;
        Ok((client, namespace))
    }

    async fn load_async(&self) -> Result<Snapshot, SourceError> {
        let (client, ns) = self.client().await?;
        let mut docs = Vec::new();
        for l in LISTED {
            let ar = ApiResource {
                group: l.group.into(),
                version: l.version.into(),
                api_version: format!("{}/{}", l.group, l.version),
                kind: l.kind.into(),
                plural: l.plural.into(),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
            let mut lp = ListParams::default();
            if l.selected
                && let Some(sel) = &self.selector
            {
                lp = lp.labels(sel);
            }
            let action = format!("listing {}.{} in namespace {ns}", l.plural, l.group);
            let list = match self.retry(&action, || api.list(&lp)).await {
                Ok(list) => list,
                // The CRD is not installed: that operator is not deployed, so there is
                // nothing of this kind to read.
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(cluster_error(action, &e)),
            };
            for item in list.items {
                let mut value = serde_json::to_value(&item).map_err(|e| SourceError::Cluster {
                    action: action.clone(),
                    message: e.to_string(),
                    hint: String::new(),
                })?;
                // List items may omit their type; we know what we asked for.
                value["apiVersion"] = Value::String(ar.api_version.clone());
                value["kind"] = Value::String(l.kind.into());
                docs.push(located(&ns, value));
            }
        }
        let partial = Snapshot::from_documents(docs.clone(), None)?;
        let (config_maps, secrets) = references(&partial);
        for name in config_maps {
            let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
            if let Some(cm) = self.get(&api, "configmap", &name, &ns).await? {
                let mut value = serde_json::to_value(&cm).unwrap_or(Value::Null);
                value["apiVersion"] = "v1".into();
                value["kind"] = "ConfigMap".into();
                docs.push(located(&ns, value));
            }
        }
        for name in secrets {
            let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
            if let Some(s) = self.get(&api, "secret", &name, &ns).await? {
                let mut value = serde_json::to_value(&s).unwrap_or(Value::Null);
                value["apiVersion"] = "v1".into();
                value["kind"] = "Secret".into();
                docs.push(located(&ns, value));
            }
        }
        Ok(Snapshot::from_documents(docs, None)?)
    }

    /// Fetches one object; a missing one is `None`, so that the model can report the whole
    /// reference chain that needed it.
    async fn get<K>(&self, api: &Api<K>, what: &str, name: &str, ns: &str) -> Result<Option<K>, SourceError>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let action = format!("reading {what} {name} in namespace {ns}");
        match self.retry(&action, || api.get(name)).await {
            Ok(obj) => Ok(Some(obj)),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(cluster_error(action, &e)),
        }
    }

    async fn retry<T, F, Fut>(&self, action: &str, mut f: F) -> Result<T, kube::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let mut delay = Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            // The client's read timeout does not bound a server that trickles; this does.
            let result = match tokio::time::timeout(self.timeout, f()).await {
                Ok(r) => r,
                Err(_) => Err(kube::Error::Service(format!("no response within {:?}", self.timeout).into())),
            };
            match result {
                Err(e) if attempt < self.attempts && retryable(&e) => {
                    tracing::debug!(action, attempt, error = %e, "retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(3));
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

impl KubeSource {
    /// Server-side applies NovaExternalComputes (field manager `edpm-agent`). Each apply carries
    /// the `resourceVersion` read just before, so the cell-move check and the write see the
    /// same object: if it changed in between, the API server answers 409 and we read, check
    /// and apply again (bounded).
    pub fn apply_novaexternalcomputes(&self, objects: &[Value]) -> Result<Vec<String>, SourceError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            SourceError::ClusterConfig { message: format!("cannot start the async runtime: {e}") }
        })?;
        rt.block_on(async {
            let (client, ns) = self.client().await?;
            let ar = ApiResource {
                group: "nova.openstack.org".into(),
                version: "v1beta1".into(),
                api_version: crate::derive::NEC_API_VERSION.into(),
                kind: "NovaExternalCompute".into(),
                plural: "novaexternalcomputes".into(),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &ar);
            let mut results = Vec::new();
            for obj in objects {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                results.push(self.apply_one(&api, &ns, &name, obj).await?);
            }
            Ok(results)
        })
    }

    async fn apply_one(
        &self,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
        desired: &Value,
    ) -> Result<String, SourceError> {
        use kube::api::{Patch, PatchParams};
        let params = PatchParams::apply("edpm-agent");
        for _ in 0..3 {
            let action = format!("reading novaexternalcompute {name} in namespace {ns}");
            let live = match self.retry(&action, || api.get(name)).await {
                Ok(o) => Some(o),
                Err(kube::Error::Api(s)) if s.code == 404 => None,
                Err(e) => return Err(cluster_error(action, &e)),
            };
            let mut patch = desired.clone();
            patch["metadata"]["namespace"] = Value::String(ns.to_string());
            // customServiceConfig belongs to the operator who wrote it: never part of our apply.
            if let Some(spec) = patch["spec"].as_object_mut() {
                spec.remove("customServiceConfig");
            }
            if let Some(live) = &live {
                let have = live.data.pointer("/spec/cellName").and_then(Value::as_str).unwrap_or_default();
                let want = desired["spec"]["cellName"].as_str().unwrap_or_default();
                if !have.is_empty() && have != want {
                    return Err(SourceError::Cluster {
                        action: format!("applying novaexternalcompute {name}"),
                        message: format!("it is in cell \"{have}\" and the annotation now says \"{want}\""),
                        hint: "; nova cannot move a compute between cells: restore the annotation".into(),
                    });
                }
                if let Some(rv) = &live.metadata.resource_version {
                    patch["metadata"]["resourceVersion"] = Value::String(rv.clone());
                }
            }
            let action = format!("applying novaexternalcompute {name} in namespace {ns}");
            let body = Patch::Apply(&patch);
            match self.retry(&action, || api.patch(name, &params, &body)).await {
                Ok(_) => {
                    return Ok(format!(
                        "novaexternalcompute/{name} {}",
                        if live.is_some() { "configured" } else { "created" }
                    ));
                }
                // Changed since we read it: read, check and apply again.
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(cluster_error(action, &e)),
            }
        }
        Err(SourceError::Cluster {
            action: format!("applying novaexternalcompute {name} in namespace {ns}"),
            message: "the object kept changing (409 Conflict three times)".into(),
            hint: "; another client is writing it: try again".into(),
        })
    }
}

fn located(ns: &str, value: Value) -> Located {
    Located { origin: Origin::Api { namespace: ns.to_string() }, doc: Document { line: 0, value } }
}

fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

fn cluster_error(action: String, e: &kube::Error) -> SourceError {
    let (message, hint) = match e {
        kube::Error::Api(s) => {
            let hint = match s.code {
                401 => "; the credentials were rejected: refresh the kubeconfig token",
                403 => "; the account lacks RBAC permission: grant get/list on this resource",
                429 | 500..=599 => "; the API server kept failing after retries: try again later",
                _ => "",
            };
            (format!("API server answered {} {}: {}", s.code, s.reason, s.message), hint)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            (error_chain(e), "; check that the API server is reachable and the kubeconfig points at it")
        }
        _ => (error_chain(e), ""),
    };
    SourceError::Cluster { action, message, hint: hint.to_string() }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

/// The ConfigMaps and Secrets that the listed objects name, so that only those are read:
/// listing every Secret in the namespace would need wider RBAC and pull in unrelated keys.
/// Covers what every stage reads: `ansibleVarsFrom`, SSH keys, NovaCell Secrets, each service's
/// dataSources, extra-config and CA bundle, and the volumes of extraMounts.
pub fn references(s: &Snapshot) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cms = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let add =
        |ds: &crate::resource::DataSource, cms: &mut BTreeSet<String>, secrets: &mut BTreeSet<String>| {
            cms.extend(ds.config_map_ref.as_ref().map(|r| r.name.clone()));
            secrets.extend(ds.secret_ref.as_ref().map(|r| r.name.clone()));
        };
    let mut services: BTreeSet<String> = BTreeSet::new();
    for ns in &s.nodesets {
        let sources = ns
            .body
            .node_template
            .ansible
            .ansible_vars_from
            .iter()
            .chain(ns.body.nodes.values().flat_map(|n| n.ansible.ansible_vars_from.iter()));
        for ds in sources {
            add(ds, &mut cms, &mut secrets);
        }
        secrets.extend(ns.body.node_template.ansible_ssh_private_key_secret.clone());
        services.extend(ns.body.services.clone().unwrap_or_else(|| {
            crate::model::DEFAULT_NODESET_SERVICES.iter().map(|x| x.to_string()).collect()
        }));
        volume_refs(&Value::Array(ns.body.node_template.extra_mounts.clone()), &mut cms, &mut secrets);
    }
    for r in &s.roles {
        secrets.extend(r.body.node_template.ansible_ssh_private_key_secret.clone());
        services.extend(
            r.body.services.clone().unwrap_or_else(|| {
                crate::model::DEFAULT_ROLE_SERVICES.iter().map(|x| x.to_string()).collect()
            }),
        );
        volume_refs(&Value::Array(r.body.node_template.extra_mounts.clone()), &mut cms, &mut secrets);
    }
    for n in &s.nodes {
        secrets.extend(n.body.node.ansible_ssh_private_key_secret.clone());
    }
    for svc in &services {
        for ds in crate::staging::service_data_sources(s, svc) {
            add(&ds, &mut cms, &mut secrets);
        }
        cms.insert(format!("{svc}-extra-config"));
        secrets.insert(crate::staging::service_ca_certs(s, svc));
    }
    for o in &s.openstack {
        match o.id.kind.as_str() {
            "NovaCell" => {
                secrets.extend(o.body.pointer("/spec/secret").and_then(Value::as_str).map(str::to_string))
            }
            "OpenStackControlPlane" => {
                volume_refs(o.body.get("spec").unwrap_or(&Value::Null), &mut cms, &mut secrets)
            }
            _ => {}
        }
    }
    cms.retain(|n| !n.is_empty());
    secrets.retain(|n| !n.is_empty());
    (cms, secrets)
}

/// Secret and ConfigMap names inside extraMounts volumes, wherever they sit: `secret.secretName`,
/// `configMap.name`, projected sources, `csi.nodePublishSecretRef`, `cephfs.secretRef`.
fn volume_refs(v: &Value, cms: &mut BTreeSet<String>, secrets: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let name = child.get("name").and_then(Value::as_str);
                match k.as_str() {
                    "secretName" => secrets.extend(child.as_str().map(str::to_string)),
                    "secret" | "nodePublishSecretRef" | "secretRef" => {
                        secrets.extend(name.map(str::to_string))
                    }
                    "configMap" => cms.extend(name.map(str::to_string)),
                    _ => {}
                }
                volume_refs(child, cms, secrets);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| volume_refs(i, cms, secrets)),
        _ => {}
    }
}
