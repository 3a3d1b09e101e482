//! What the shell found on the node, as plain data. Every field says what it could not read
//! (`Err` with the reason) rather than guessing, so a check can tell "missing" from
//! "unreadable".

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

/// A systemd unit's state (`systemctl show`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UnitState {
    /// `active`, `inactive`, `failed`, `activating`, …; empty when the unit is not loaded.
    pub active: String,
    pub sub: String,
    /// `LoadState`: `loaded`, `not-found`, …
    pub load: String,
    /// The unit's file changed since systemd loaded it (a quadlet regenerated, no reload).
    pub need_daemon_reload: bool,
}

/// A container as podman reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ContainerState {
    /// `healthy`, `unhealthy`, `starting`; `None` when it has no health check.
    pub health: Option<String>,
    /// The `config_hash` label it was started with, when it carries one.
    pub config_hash: Option<String>,
}

/// `/var/lib/edpm-config/deployed_services.yaml`, as edpm-ansible writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct DeployedServices {
    #[serde(default)]
    pub services: BTreeMap<String, DeployedService>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct DeployedService {
    #[serde(default)]
    pub containers: Vec<String>,
    /// The code writes `updated_at`; its README says `last_updated`: both are read.
    #[serde(default, alias = "last_updated")]
    pub updated_at: Option<String>,
}

/// A staged file that no longer matches `stage`'s manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StagedDrift {
    Missing(String),
    Changed(String),
    Mode(String, u32, u32),
}

#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub hostname: Result<String, String>,
    pub addresses: Result<Vec<IpAddr>, String>,
    /// `/etc/os-release` `PRETTY_NAME`, else `ID VERSION_ID`.
    pub os: Result<String, String>,
    /// The return codes edpm_network_config left: (file, code); `None` when neither exists.
    pub network: Option<(String, Result<i32, String>)>,
    /// Where the container runtime is, when it is there.
    pub runtime: Option<String>,
    /// How many files `stage`'s manifest records, and those that drifted.
    pub staged: Result<(usize, Vec<StagedDrift>), String>,
    /// `None`: no deployed_services.yaml (nothing deployed yet).
    pub deployed: Option<Result<DeployedServices, String>>,
    /// `edpm_<container>.service` → state.
    pub units: Result<BTreeMap<String, UnitState>, String>,
    /// container → the `# config_hash=` of its quadlet file, when the file has one.
    pub quadlet_hashes: BTreeMap<String, String>,
    /// container → podman's view.
    pub containers: Result<BTreeMap<String, ContainerState>, String>,
}
