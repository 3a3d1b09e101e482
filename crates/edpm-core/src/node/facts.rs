//! What the shell found on the node, as plain data. Every field says what it could not read
//! (`Err` with the reason) rather than guessing, so a check can tell "missing" from
//! "unreadable".

use std::collections::BTreeMap;
use std::net::IpAddr;

/// A systemd unit's state (`systemctl show`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitState {
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
pub struct ContainerState {
    /// `healthy`, `unhealthy`, `starting`; `None` when it has no health check.
    pub health: Option<String>,
    /// The `config_hash` label it was started with, when it carries one.
    pub config_hash: Option<String>,
    /// The image it runs, as podman names it (`quay.io/…/openstack-ovn-controller:18.0.4`).
    pub image: Option<String>,
}

/// `/var/lib/edpm-config/deployed_services.yaml`, as edpm-ansible writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployedServices {
    pub services: BTreeMap<String, DeployedService>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployedService {
    pub containers: Vec<String>,
    /// The code writes `updated_at`; its README says `last_updated`: both are read.
    pub updated_at: Option<String>,
}

impl DeployedServices {
    /// The file's text, checked for the shape edpm-ansible's `edpm_service_state` writes:
    /// `services:` mapping each service to its `containers` list. A file of another shape
    /// (a misspelt key, a list where a mapping goes) is an error naming the key: read leniently
    /// it would say "0 deployed service(s)" about a node that runs them. An empty file is
    /// nothing deployed, as edpm-ansible itself reads it. Errors quote no values.
    #[allow(
        clippy::too_many_lines,
        reason = "a strict reader of one file's shape, each wrong shape with its own message"
    )]
    pub fn parse(text: &str) -> Result<DeployedServices, String> {
        use serde_json::Value;
        let doc: Option<Value> = crate::yaml::ansible(text)?;
        let top = match doc {
            None | Some(Value::Null) => return Ok(DeployedServices::default()),
            Some(Value::Object(top)) => top,
            Some(other) => {
                return Err(format!(
                    "is a {}, not a mapping with a `services` key (edpm-ansible writes `services:`, each service mapping to its `containers`)",
                    kind(&other)
                ));
            }
        };
        let services = match top.get("services") {
            Some(Value::Object(s)) => s,
            Some(other) => {
                return Err(format!(
                    "`services` is a {}, not a mapping of each service to its `containers`",
                    kind(other)
                ));
            }
            None => {
                let found: Vec<String> =
                    top.keys().take(5).map(|k| format!("{:?}", crate::excerpt::echo(k).head())).collect();
                return Err(format!(
                    "has no `services` key (found {}): edpm-ansible writes `services:`, each service mapping to its `containers`; is the key misspelt?",
                    found.join(", ")
                ));
            }
        };
        let mut out = BTreeMap::new();
        for (name, svc) in services {
            if !is_name(name) {
                return Err(format!(
                    "services: {:?} is not a service name (letters, digits, `_`, `-`, `.`)",
                    crate::excerpt::echo(name).head()
                ));
            }
            let Value::Object(svc) = svc else {
                return Err(format!(
                    "services.{name} is a {}, not a mapping with a `containers` list",
                    kind(svc)
                ));
            };
            let containers = match svc.get("containers") {
                Some(Value::Array(list)) => list,
                Some(other) => {
                    return Err(format!(
                        "services.{name}.containers is a {}, not a list of container names",
                        kind(other)
                    ));
                }
                None => {
                    return Err(format!(
                        "services.{name}.containers is missing: each service lists its containers; is the key misspelt?"
                    ));
                }
            };
            let mut names = Vec::with_capacity(containers.len());
            for (i, c) in containers.iter().enumerate() {
                match c.as_str() {
                    Some(c) if is_name(c) => names.push(c.to_string()),
                    _ => {
                        return Err(format!(
                            "services.{name}.containers[{i}] is not a container name (letters, digits, `_`, `-`, `.`)"
                        ));
                    }
                }
            }
            let updated_at = ["updated_at", "last_updated"]
                .iter()
                .find_map(|k| svc.get(*k).and_then(Value::as_str))
                .map(String::from);
            out.insert(name.clone(), DeployedService { containers: names, updated_at });
        }
        Ok(DeployedServices { services: out })
    }
}

/// A service or container name: what edpm-ansible and podman use (`[A-Za-z0-9_.-]`). Both end
/// up in unit names, file names and condition types.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && !s.starts_with(['.', '-'])
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// The OS name `/etc/os-release` gives: `PRETTY_NAME`, else `ID VERSION_ID` (os-release(5)'s
/// fallbacks), values unquoted; blank ones count as unset. An error when none says anything.
pub fn os_name(text: &str) -> Result<String, String> {
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(k)?.strip_prefix('='))
            .map(|v| {
                let v = v.trim();
                let unquoted = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                    .unwrap_or(v);
                unquoted.trim().to_string()
            })
            .filter(|v| !v.is_empty())
    };
    if let Some(pretty) = field("PRETTY_NAME") {
        return Ok(pretty);
    }
    let id_version: Vec<String> = [field("ID"), field("VERSION_ID")].into_iter().flatten().collect();
    if id_version.is_empty() {
        return Err("sets none of PRETTY_NAME, ID and VERSION_ID".into());
    }
    Ok(id_version.join(" "))
}

/// A staged file that no longer matches `stage`'s manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagedDrift {
    Missing(String),
    Changed(String),
    Mode(String, u32, u32),
}

#[derive(Debug, Clone)]
pub struct Facts {
    pub hostname: Result<String, String>,
    pub addresses: Result<Vec<IpAddr>, String>,
    /// `/etc/os-release` `PRETTY_NAME`, else `ID VERSION_ID`.
    pub os: Result<String, String>,
    /// The return codes edpm_network_config left: (file, code); `None` when neither exists.
    pub network: Option<(String, Result<i32, String>)>,
    /// Where the container runtime is, when it is there and can be run; else why not (no
    /// program in its place, one that is not executable, or one that could not be started).
    pub runtime: Result<String, String>,
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
    /// The images the cluster says were last deployed to this node (its `EDPMNodeStatus`
    /// `spec.record.containerImages`); `None` when not known (not asked, or not answered).
    pub deployed_images: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployed_services_as_edpm_ansible_writes_them() {
        let d = DeployedServices::parse(
            "services:\n  nova:\n    containers:\n    - nova_compute\n    - nova_compute_init\n    last_updated: '2026-11-01T10:00:00Z'\n  ovn:\n    containers: [ovn_controller]\n",
        )
        .unwrap();
        assert_eq!(d.services["nova"].containers, ["nova_compute", "nova_compute_init"]);
        assert_eq!(d.services["nova"].updated_at.as_deref(), Some("2026-11-01T10:00:00Z"));
        assert_eq!(d.services["ovn"].updated_at, None);
        for empty in ["", "services: {}\n", "---\n", "~\n"] {
            assert_eq!(DeployedServices::parse(empty).unwrap(), DeployedServices::default(), "{empty:?}");
        }
        let d = DeployedServices::parse("services:\n  nova:\n    containers: []\n").unwrap();
        assert!(d.services["nova"].containers.is_empty());
    }

    #[test]
    fn deployed_services_of_another_shape_name_the_key() {
        for (text, want) in [
            ("servics:\n  nova:\n    containers: [a]\n", "has no `services` key (found \"servics\")"),
            ("services:\n  nova:\n    container: [a]\n", "services.nova.containers is missing"),
            ("services: [nova]\n", "`services` is a list"),
            ("services:\n", "`services` is a null"),
            ("services:\n  nova: [a]\n", "services.nova is a list"),
            ("services:\n  nova:\n    containers: a\n", "services.nova.containers is a string"),
            (
                "services:\n  nova:\n    containers: [a, {b: c}]\n",
                "services.nova.containers[1] is not a container name",
            ),
            (
                "services:\n  nova:\n    containers: ['../../etc/x']\n",
                "services.nova.containers[0] is not a container name",
            ),
            ("services:\n  'a b':\n    containers: []\n", "\"a b\" is not a service name"),
            ("- nova\n", "is a list, not a mapping with a `services` key"),
            ("services: {nova: {containers: [a]}\n", "line"),
        ] {
            let e = DeployedServices::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn os_name_falls_back_to_id_and_version() {
        assert_eq!(os_name("NAME=x\nPRETTY_NAME=\"CentOS Stream 9\"\n").unwrap(), "CentOS Stream 9");
        assert_eq!(os_name("PRETTY_NAME=\" \"\nID=centos\nVERSION_ID=\"9\"\n").unwrap(), "centos 9");
        assert_eq!(os_name("PRETTY_NAME=''\nID='rhel'\nVERSION_ID=9.4\n").unwrap(), "rhel 9.4");
        assert_eq!(os_name("ID=debian\n").unwrap(), "debian");
        assert_eq!(os_name("PRETTY_NAME_X=a\nID=fedora\n").unwrap(), "fedora");
        assert!(os_name("PRETTY_NAME=\"\"\n").unwrap_err().contains("PRETTY_NAME, ID and VERSION_ID"));
        assert!(os_name("").is_err());
    }
}
