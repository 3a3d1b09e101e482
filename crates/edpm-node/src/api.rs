//! The node agent's writes: its own node's status object (server-side apply of its condition
//! types under field manager `edpm-agent-node`) and its Lease (a merge patch of the renew
//! time). Both objects exist already (`status report` creates them: RBAC `resourceNames`
//! cannot restrict create), so the agent only ever patches, by name.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;

use edpm_core::condition::{Condition, Time};
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
}

/// The API server, for one node's objects.
pub struct NodeObjects {
    pub client: Client,
    pub object: String,
    pub holder: String,
    /// The namespace of its Lease (`lease_namespace` in node.yaml).
    pub lease_namespace: String,
}

/// The node status objects' resource.
fn node_resource() -> ApiResource {
    edpm_io::k8s::read::resource(edpm_io::k8s::read::named(api::NODE_KIND))
}

impl NodeObjects {
    /// The API server's answer to a request for this node's objects, with what a refusal
    /// (403) means here: not a Role to widen, but a credential or `object` that is not this
    /// node's (each node's account may touch only its own status object and Lease).
    fn error(&self, action: String, e: &kube::Error) -> Error {
        match self.client.error(action, e) {
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
            Api::namespaced_with(self.client.kube(), self.client.namespace(), &node_resource());
        let action =
            format!("reading the images deployed to this node from {} {}", api::NODE_KIND, self.object);
        let obj = self.client.within_time(a.get(&self.object)).await.map_err(|e| self.error(action, &e))?;
        let images = obj.data["spec"]["record"]["containerImages"].as_object().into_iter().flatten();
        Ok(images.filter_map(|(_, v)| v["value"].as_str().map(String::from)).collect())
    }

    async fn apply_status(&self, conditions: &[Condition]) -> Result<(), Error> {
        let a: Api<DynamicObject> =
            Api::namespaced_with(self.client.kube(), self.client.namespace(), &node_resource());
        let body = json!({
            "apiVersion": api::API_VERSION, "kind": api::NODE_KIND,
            "metadata": {"name": self.object},
            "status": {"conditions": conditions},
        });
        // Force: the agent is the authority on its own condition types, also after the
        // reporter turned them Unknown while the agent was away.
        let params = PatchParams::apply(AGENT_FIELD_MANAGER).force();
        let action = format!("applying the node agent's conditions to {} {}", api::NODE_KIND, self.object);
        self.client
            .within_time(a.patch_status(&self.object, &params, &Patch::Apply(&body)))
            .await
            .map(drop)
            .map_err(|e| self.error(action, &e))
    }

    async fn renew_lease(&self, now: Time, duration: Duration) -> Result<(), Error> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.kube(), &self.lease_namespace);
        // A MicroTime, as the kubelet writes it.
        let renew = format!("{}.000000Z", now.to_string().trim_end_matches('Z'));
        let body = json!({"spec": {"holderIdentity": self.holder, "leaseDurationSeconds": duration.as_secs(), "renewTime": renew}});
        let action = format!("renewing Lease {} in namespace {}", self.object, self.lease_namespace);
        self.client
            .within_time(leases.patch(&self.object, &PatchParams::default(), &Patch::Merge(&body)))
            .await
            .map(drop)
            .map_err(|e| self.error(action, &e))
    }
}
