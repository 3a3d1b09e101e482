//! Nova's own view of the computes: is nova-compute registered and up for a node's host, and
//! does Nova know its hypervisor? (issue 20; research in `docs/design/020-nova-compute-readiness.md`).
//!
//! Pure: answers in (the compute API's JSON, live or saved, or `openstack … -f json` output),
//! a node's verdict out. The shell (`edpm_io::openstack::nova`) asks the API; this module never
//! knows how the answer arrived.
//!
//! - `answer`: the types, and the parsers of the four formats (API/CLI × services/hypervisors);
//! - `host`: how a node's host name is matched against the names Nova reports;
//! - `verdict`: the node's `NovaComputeReady` from the evidence.

pub mod answer;
pub mod host;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod verdict;

pub use answer::{ComputeService, Hypervisor, NovaAnswer, NovaEvidence, Saved};
pub use host::Index;

/// The service type (`edpmServiceType`) of the data-plane service that deploys nova-compute.
pub const SERVICE_TYPE: &str = "nova";

/// The compute API microversions asked for: 2.69 so that a compute in a cell Nova cannot reach
/// comes back as `status: UNKNOWN` instead of missing (below 2.69 it is skipped, which would
/// read as "not registered"); 2.53 for hypervisors with their service's UUID, and below 2.88,
/// whose `uptime` made one RPC per compute before nova 2025.2.
pub const SERVICES_MICROVERSION: &str = "2.69";
pub const HYPERVISORS_MICROVERSION: &str = "2.53";

/// Who the shell logs in to Keystone as, to ask Nova: the node's cell's service user (from
/// the NovaCell and its Secret). Pure data; its `Debug` never prints a secret.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Login {
    /// Keystone's URL, with or without `/v3`.
    pub auth_url: String,
    pub region: String,
    pub user: String,
    /// The user's and the project's domain (nova-operator: `Default`).
    pub domain: String,
    /// The project the token is scoped to (nova-operator: `service`).
    pub project: String,
    pub password: Option<String>,
    /// Application credential (id, secret): used instead of the password when present.
    pub application_credential: Option<(String, String)>,
    /// PEM CA bundle to trust instead of the system roots (the control plane's
    /// `combined-ca-bundle`), when there is one.
    pub ca_bundle: Option<String>,
    /// The Secret that holds the credentials, named in a 401's hint (never its values).
    pub secret: String,
    /// The Secret the CA bundle was looked for in (a NovaCell's `spec.tls.caBundleSecretName`,
    /// else the nova service's `caCerts`); the credentials' Secret for `--nova-credentials`.
    pub ca_secret: Option<String>,
    /// The cells (NovaCell names) that log in this way, for messages.
    pub cells: Vec<String>,
    /// Where the credentials came from, for the keys a message tells to check.
    pub from: LoginFrom,
}

/// Where a login's credentials came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoginFrom {
    /// A NovaCell's Secret (nova-operator's keys).
    Cell,
    /// The Secret named by `--nova-credentials` (the openstack client's `OS_*` keys).
    Explicit,
}

impl LoginFrom {
    /// The keys to check when Keystone rejects the credentials.
    pub fn credential_keys(self) -> &'static str {
        match self {
            LoginFrom::Cell => "ServicePassword (or ACID and ACSecret)",
            LoginFrom::Explicit => {
                "OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME (or OS_APPLICATION_CREDENTIAL_ID and OS_APPLICATION_CREDENTIAL_SECRET)"
            }
        }
    }

    /// Where the CA bundle the client trusts comes from.
    pub fn ca_source(self) -> String {
        match self {
            LoginFrom::Cell => format!(
                "key {} of the NovaCell's spec.tls.caBundleSecretName, else of the nova service's caCerts Secret",
                crate::services::CA_BUNDLE_KEY
            ),
            LoginFrom::Explicit => {
                "key OS_CACERT of the --nova-credentials Secret, which holds the PEM bundle itself, not a path".into()
            }
        }
    }
}

impl Login {
    /// Where the CA bundle came from, as a message names it: `Secret combined-ca-bundle key
    /// tls-ca-bundle.pem`.
    pub fn ca_where(&self) -> String {
        match (self.from, &self.ca_secret) {
            (LoginFrom::Cell, Some(s)) => format!("Secret {s} key {}", crate::services::CA_BUNDLE_KEY),
            (LoginFrom::Explicit, _) => format!("Secret {} key OS_CACERT", self.secret),
            (LoginFrom::Cell, None) => self.from.ca_source(),
        }
    }

    /// What makes two logins the same session (the cells and the hint aside).
    pub fn key(&self) -> (&str, &str, &str, &str, &str) {
        (&self.auth_url, &self.region, &self.user, &self.domain, &self.project)
    }

    /// The values that must never be printed: for redaction.
    pub fn secrets(&self) -> Vec<String> {
        let mut v: Vec<String> = self.password.iter().cloned().collect();
        v.extend(self.application_credential.iter().map(|(_, s)| s.clone()));
        v
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("auth_url", &self.auth_url)
            .field("region", &self.region)
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("project", &self.project)
            .field("secret", &self.secret)
            .field("cells", &self.cells)
            .finish_non_exhaustive()
    }
}
