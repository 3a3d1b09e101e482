//! The node agent's writes: its own node's status object (server-side apply of its condition
//! types under field manager `edpm-agent-node`) and its Lease (a merge patch of the renew
//! time). Both objects exist already (`status report` creates them: RBAC `resourceNames`
//! cannot restrict create), so the agent only ever patches, by name.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;

use edpm_core::condition::{Condition, Time};
use edpm_core::identity;
use edpm_core::readiness::api;
use edpm_io::k8s::{Client, Error};

/// The node agent's field manager: it owns its condition types in the shared map-list.
pub const AGENT_FIELD_MANAGER: &str = "edpm-agent-node";

/// What the loop needs from the API; the loop takes it as an argument so tests can drive it.
pub trait AgentApi {
    /// Applies the agent's conditions to its object's status.
    fn apply_status(&self, conditions: &[Condition]) -> impl std::future::Future<Output = Result<(), Error>>;
    /// The images the cluster says were last deployed to this node: the values of its
    /// object's `spec.record.containerImages` (`status report` and the controller keep them).
    fn deployed_images(&self) -> impl std::future::Future<Output = Result<Vec<String>, Error>>;
    /// Renews its Lease at `now` for `duration`.
    fn renew_lease(
        &self,
        now: Time,
        duration: Duration,
    ) -> impl std::future::Future<Output = Result<(), Error>>;
    /// Renews the agent's own credential when it is due, and says how it stands
    /// (`AgentCredentialExpiring`); `None` when the agent holds no token it can renew.
    fn credential(&self, now: Time) -> impl std::future::Future<Output = Option<Condition>> {
        let _ = now;
        async { None }
    }
}

/// The agent's own credential: a bound ServiceAccount token in its kubeconfig, renewed by a
/// TokenRequest for its own ServiceAccount once `percent` of its lifetime has passed; the
/// kubeconfig is then replaced atomically (0600) with the new token, and the client made
/// again from it, without a restart. The token is never logged.
pub struct Credential {
    path: std::path::PathBuf,
    settings: edpm_io::k8s::Settings,
    percent: u8,
    state: tokio::sync::Mutex<Held>,
}

struct Held {
    token: String,
    claims: identity::Claims,
    /// Why the last renewal failed, until one succeeds.
    failure: Option<String>,
}

impl Credential {
    /// The credential of the kubeconfig `settings` name, when it holds a bound ServiceAccount
    /// token (an exec plugin, a client certificate or an old Secret-based token is not ours to
    /// renew: `None`).
    pub fn load(settings: &edpm_io::k8s::Settings, percent: u8) -> Option<Credential> {
        let path = settings.kubeconfig.clone()?;
        let text = read_kubeconfig(&path).ok()?;
        let token = identity::token_of(&text)?;
        let claims = identity::claims(&token)?;
        Some(Credential {
            path,
            settings: settings.clone(),
            percent,
            state: tokio::sync::Mutex::new(Held { token, claims, failure: None }),
        })
    }
}

fn read_kubeconfig(path: &std::path::Path) -> Result<String, String> {
    edpm_io::files::read_bounded(path, edpm_io::files::MAX_FILE_BYTES, false)
        .map_err(|e| format!("cannot read the kubeconfig {}: {e}", path.display()))
}

/// The API server, for one node's objects.
pub struct NodeObjects {
    /// Made again when the credential is renewed.
    pub client: std::sync::RwLock<Client>,
    pub object: String,
    pub holder: String,
    /// The namespace of its Lease (`lease_namespace` in node.yaml).
    pub lease_namespace: String,
    pub credential: Option<Credential>,
}

/// The node status objects' resource.
fn node_resource() -> ApiResource {
    edpm_io::k8s::read::resource(edpm_io::k8s::read::named(api::NODE_KIND))
}

impl NodeObjects {
    /// The client of the current credential.
    fn client(&self) -> Client {
        self.client.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Asks a new token for its own ServiceAccount, writes it into its kubeconfig and makes
    /// the client again from that: the new claims, or why not.
    async fn renew(&self, c: &Credential, held: &Held) -> Result<(String, identity::Claims), String> {
        let cl = &held.claims;
        let token = edpm_io::k8s::identity::token(
            &self.client(),
            &cl.namespace,
            &cl.account,
            cl.lifetime().max(identity::MIN_TOKEN_SECONDS),
        )
        .await
        .map_err(|e| e.to_string())?;
        let claims = identity::claims(&token)
            .ok_or("the API server answered with a token that is no bound ServiceAccount token")?;
        let text = read_kubeconfig(&c.path)?;
        let next = identity::with_token(&text, &held.token, &token).ok_or_else(|| {
            format!("the kubeconfig {} no longer holds the token the agent started with (replaced by hand?); restart the agent to read it", c.path.display())
        })?;
        edpm_io::files::write_atomic(&c.path, next.as_bytes(), 0o600)
            .map_err(|e| format!("cannot write the kubeconfig {}: {e}", c.path.display()))?;
        let client = edpm_io::k8s::Client::connect(&c.settings).await.map_err(|e| e.to_string())?;
        *self.client.write().unwrap_or_else(std::sync::PoisonError::into_inner) = client;
        Ok((token, claims))
    }

    /// The API server's answer to a request for this node's objects, with what a refusal
    /// (403) means here: not a Role to widen, but a credential or `object` that is not this
    /// node's (each node's account may touch only its own status object and Lease).
    fn error(&self, action: String, e: &kube::Error) -> Error {
        match self.client().error(action, e) {
            Error::Request { action, message, code: Some(403), .. } => Error::Request {
                action,
                message,
                hint: format!(
                    "; each node's credential may touch only the status object and Lease made for it (rbac-node-agent.yaml): check that `object` in node.yaml ({}) names this node and that the kubeconfig is this node's own",
                    self.object
                ),
                code: Some(403),
            },
            other => other,
        }
    }
}

impl AgentApi for NodeObjects {
    async fn deployed_images(&self) -> Result<Vec<String>, Error> {
        let a: Api<DynamicObject> =
            Api::namespaced_with(self.client().kube(), self.client().namespace(), &node_resource());
        let action =
            format!("reading the images deployed to this node from {} {}", api::NODE_KIND, self.object);
        let obj = self.client().within_time(a.get(&self.object)).await.map_err(|e| self.error(action, &e))?;
        let images = obj.data["spec"]["record"]["containerImages"].as_object().into_iter().flatten();
        Ok(images.filter_map(|(_, v)| v["value"].as_str().map(String::from)).collect())
    }

    async fn apply_status(&self, conditions: &[Condition]) -> Result<(), Error> {
        let a: Api<DynamicObject> =
            Api::namespaced_with(self.client().kube(), self.client().namespace(), &node_resource());
        let body = json!({
            "apiVersion": api::API_VERSION, "kind": api::NODE_KIND,
            "metadata": {"name": self.object},
            "status": {"conditions": conditions},
        });
        // Force: the agent is the authority on its own condition types, also after the
        // reporter turned them Unknown while the agent was away.
        let params = PatchParams::apply(AGENT_FIELD_MANAGER).force();
        let action = format!("applying the node agent's conditions to {} {}", api::NODE_KIND, self.object);
        self.client()
            .within_time(a.patch_status(&self.object, &params, &Patch::Apply(&body)))
            .await
            .map(drop)
            .map_err(|e| self.error(action, &e))
    }

    async fn renew_lease(&self, now: Time, duration: Duration) -> Result<(), Error> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client().kube(), &self.lease_namespace);
        // A MicroTime, as the kubelet writes it.
        let renew = format!("{}.000000Z", now.to_string().trim_end_matches('Z'));
        let body = json!({"spec": {"holderIdentity": self.holder, "leaseDurationSeconds": duration.as_secs(), "renewTime": renew}});
        let action = format!("renewing Lease {} in namespace {}", self.object, self.lease_namespace);
        self.client()
            .within_time(leases.patch(&self.object, &PatchParams::default(), &Patch::Merge(&body)))
            .await
            .map(drop)
            .map_err(|e| self.error(action, &e))
    }

    async fn credential(&self, now: Time) -> Option<Condition> {
        let c = self.credential.as_ref()?;
        let mut held = c.state.lock().await;
        if now.0 >= held.claims.renew_at(c.percent) {
            match self.renew(c, &held).await {
                Ok((token, claims)) => {
                    tracing::info!(expires = %Time::from_unix(claims.expires), "credential renewed");
                    *held = Held { token, claims, failure: None };
                }
                Err(why) => {
                    if held.failure.as_deref() != Some(why.as_str()) {
                        tracing::warn!(error = %why, expires = %Time::from_unix(held.claims.expires), "cannot renew the credential");
                    }
                    held.failure = Some(why);
                }
            }
        }
        Some(identity::credential_condition(&held.claims, c.percent, now.0, held.failure.as_deref()))
    }
}
