//! The node agent's config file (`/etc/edpm-agent/node.yaml`), which the `edpm_agent_node`
//! role writes from the inventory: where the API is, which objects are the node's own, and
//! what the node was given. Pure: text in, settings out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct Expect {
    /// The host name the node should have (`canonical_hostname`, or its short form).
    #[serde(default)]
    pub hostname: Option<String>,
    /// Addresses the node should hold (`ansible_host`, `ctlplane_ip`, …).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// A substring of `/etc/os-release`'s `PRETTY_NAME` (or `ID VERSION_ID`) the node should boot.
    #[serde(default)]
    pub os: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// The kubeconfig the agent authenticates with (0600, from a Secret).
    pub kubeconfig: Option<PathBuf>,
    pub namespace: String,
    /// Where the node's Lease is (`lease_namespace`; `edpm-node-lease` when not
    /// set): a namespace of the node agents' Leases alone lets RBAC keep the controller's Lease
    /// writes away from other operators' Leases, as kubelet's `kube-node-lease` does.
    pub lease_namespace: String,
    /// The node's `EDPMNodeStatus` and its Lease (the same name).
    pub object: String,
    /// The node's key (for messages and the Lease's holder).
    pub node: String,
    /// The root the checks read (`/` on the node).
    pub root: PathBuf,
    pub expect: Expect,
    pub check_interval: Duration,
    pub lease_interval: Duration,
    pub lease_duration: Duration,
    pub heartbeat: Duration,
    pub request_timeout: Duration,
    /// The limit on each `systemctl` and `podman` query.
    pub command_timeout: Duration,
    /// When the agent renews its own ServiceAccount token: once this share of the token's
    /// lifetime has passed (`credential_renew_percent`, 1-90, default 80, as kubelet renews
    /// its projected tokens).
    pub credential_renew_percent: u8,
}

/// kubelet renews a projected token at 80% of its lifetime.
pub const CREDENTIAL_RENEW_PERCENT: u8 = 80;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
struct File {
    #[serde(default)]
    kubeconfig: Option<PathBuf>,
    namespace: String,
    #[serde(default)]
    lease_namespace: Option<String>,
    /// The status object's name; or, in its place, `nodeset`, from which it is derived as
    /// `status report` names it.
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    nodeset: Option<String>,
    node: String,
    #[serde(default)]
    root: Option<PathBuf>,
    #[serde(default)]
    expect: Expect,
    #[serde(default)]
    check_interval_seconds: Option<u64>,
    #[serde(default)]
    lease_interval_seconds: Option<u64>,
    #[serde(default)]
    lease_duration_seconds: Option<u64>,
    #[serde(default)]
    heartbeat_seconds: Option<u64>,
    #[serde(default)]
    request_timeout_seconds: Option<u64>,
    #[serde(default)]
    command_timeout_seconds: Option<u64>,
    #[serde(default)]
    credential_renew_percent: Option<u64>,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("node agent config {path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// kubelet's defaults: renew every 10 s for 40 s; full status on a change or every 5 min.
pub const LEASE_INTERVAL: Duration = Duration::from_secs(10);
pub const LEASE_DURATION: Duration = Duration::from_secs(40);
pub const HEARTBEAT: Duration = Duration::from_secs(300);
pub const CHECK_INTERVAL: Duration = Duration::from_secs(10);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// Each duration setting: its key, default and accepted range in seconds. Zero would spin or
/// never answer; past the range, timers overflow or never fire (a Lease of a hundred years is
/// a Lease that never expires), so both are refused at start rather than met later.
const DURATIONS: [(&str, Duration, u64, u64); 6] = [
    ("check_interval_seconds", CHECK_INTERVAL, 1, 86_400),
    ("lease_interval_seconds", LEASE_INTERVAL, 1, 3_600),
    ("lease_duration_seconds", LEASE_DURATION, 2, 86_400),
    ("heartbeat_seconds", HEARTBEAT, 1, 86_400),
    ("request_timeout_seconds", REQUEST_TIMEOUT, 1, 600),
    ("command_timeout_seconds", COMMAND_TIMEOUT, 1, 600),
];

#[allow(clippy::too_many_lines, reason = "reads node.yaml key by key, each with its range and message")]
pub fn parse(path: &Path, text: &str) -> Result<AgentConfig, ConfigError> {
    let err = |message: String| ConfigError { path: path.display().to_string(), message };
    // The manifests' YAML reader: its errors name the line and say what to do, in our words.
    let at = |line: u32, message: String| match line {
        0 => err(message),
        _ => ConfigError { path: format!("{}:{line}", path.display()), message },
    };
    let docs = crate::yaml::documents(text).map_err(|e| at(e.line as u32, e.message))?;
    if let Some(extra) = docs.get(1) {
        return Err(at(extra.line, "a second document; the node agent config is one mapping".into()));
    }
    let empty = crate::yaml::Node::new(1, crate::yaml::Data::Map(Vec::new()));
    let node = docs.first().filter(|n| !n.is_null()).unwrap_or(&empty);
    let f: File = crate::yaml::decode(node).map_err(|f| {
        let field =
            if f.path.is_empty() || f.path == "." { String::new() } else { format!("field {}: ", f.path) };
        at(f.line, format!("{field}{}", f.message))
    })?;
    for (name, v) in [("namespace", &f.namespace), ("node", &f.node)] {
        if v.is_empty() {
            return Err(err(format!("{name} is empty")));
        }
    }
    let lease_namespace = match f.lease_namespace {
        None => crate::readiness::api::DEFAULT_LEASE_NAMESPACE.to_string(),
        Some(ns) if is_namespace_name(&ns) => ns,
        Some(ns) => {
            return Err(at(
                node.get("lease_namespace").map_or(0, |n| n.line),
                format!(
                    "lease_namespace {:?} is not a namespace name (lower-case letters, digits and '-', at most 63); give the namespace of the node agents' Leases, or leave it out for edpm-node-lease",
                    crate::excerpt::printable(&ns)
                ),
            ));
        }
    };
    let object = match (f.object.filter(|o| !o.is_empty()), f.nodeset.filter(|n| !n.is_empty())) {
        (Some(o), _) => o,
        (None, Some(nodeset)) => crate::readiness::names::node_object(&nodeset, &f.node),
        (None, None) => {
            return Err(err("neither object nor nodeset is set: name the node's EDPMNodeStatus (`edpm-agent status show --format json` prints it as \"object\"), or its NodeSet (or Role) to derive it".into()));
        }
    };
    // A value out of range names its line, key and the range.
    let secs = |key: &str, v: Option<u64>| -> Result<Duration, ConfigError> {
        let Some((_, default, min, max)) = DURATIONS.iter().find(|d| d.0 == key) else {
            return Err(err(format!("{key}: no such setting")));
        };
        match v {
            None => Ok(*default),
            Some(v) if (*min..=*max).contains(&v) => Ok(Duration::from_secs(v)),
            Some(v) => Err(at(
                node.get(key).map_or(0, |n| n.line),
                format!(
                    "{key} is {v}; give a whole number of seconds from {min} to {max} (default {})",
                    default.as_secs()
                ),
            )),
        }
    };
    let expect = check_expect(f.expect, node, &at)?;
    let credential_renew_percent = match f.credential_renew_percent {
        None => CREDENTIAL_RENEW_PERCENT,
        Some(p @ 1..=90) => p as u8,
        Some(p) => {
            return Err(at(
                node.get("credential_renew_percent").map_or(0, |n| n.line),
                format!(
                    "credential_renew_percent is {p}; give a whole number from 1 to 90 (default {CREDENTIAL_RENEW_PERCENT}): the share of its token's lifetime after which the agent renews it"
                ),
            ));
        }
    };
    let c = AgentConfig {
        kubeconfig: f
            .kubeconfig
            .map(|k| if k.is_relative() { path.parent().unwrap_or(Path::new(".")).join(k) } else { k }),
        namespace: f.namespace,
        lease_namespace,
        object,
        node: f.node,
        root: f.root.unwrap_or_else(|| PathBuf::from("/")),
        expect,
        check_interval: secs("check_interval_seconds", f.check_interval_seconds)?,
        lease_interval: secs("lease_interval_seconds", f.lease_interval_seconds)?,
        lease_duration: secs("lease_duration_seconds", f.lease_duration_seconds)?,
        heartbeat: secs("heartbeat_seconds", f.heartbeat_seconds)?,
        request_timeout: secs("request_timeout_seconds", f.request_timeout_seconds)?,
        command_timeout: secs("command_timeout_seconds", f.command_timeout_seconds)?,
        credential_renew_percent,
    };
    if c.lease_interval >= c.lease_duration {
        return Err(err(format!(
            "lease_interval_seconds ({}) must be shorter than lease_duration_seconds ({}), or the Lease expires between renewals",
            c.lease_interval.as_secs(),
            c.lease_duration.as_secs()
        )));
    }
    // The loop checks, then reports, then renews: a check that runs its commands to their
    // limit and a report that takes its whole request time must still leave the Lease alive.
    if c.command_timeout + c.request_timeout >= c.lease_duration {
        return Err(err(format!(
            "command_timeout_seconds ({}) and request_timeout_seconds ({}) together must be shorter than lease_duration_seconds ({}): a slow check and report would let the Lease expire before it is renewed",
            c.command_timeout.as_secs(),
            c.request_timeout.as_secs(),
            c.lease_duration.as_secs()
        )));
    }
    Ok(c)
}

/// A namespace's name as the API server takes it (an RFC 1123 label).
fn is_namespace_name(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// What the node should be, checked: a blank expectation would match any node (`os: ""` is a
/// substring of every OS name) or none, so it is refused; leave the key out to not check it.
fn check_expect(
    e: Expect,
    node: &crate::yaml::Node<'_>,
    at: &dyn Fn(u32, String) -> ConfigError,
) -> Result<Expect, ConfigError> {
    let line = |key: &str| node.get("expect").and_then(|x| x.get(key)).map_or(0, |n| n.line);
    if e.os.as_deref().is_some_and(|o| o.trim().is_empty()) {
        return Err(at(
            line("os"),
            "expect.os is empty, which every OS name contains; give a part of the node's PRETTY_NAME (\"CentOS Stream 9\"), or leave expect.os out".into(),
        ));
    }
    // A host name among the addresses is never held by any interface: the node would read
    // AddressMissing for ever. Checked once, here, naming it.
    if let Some(bad) = e.addresses.iter().find(|a| a.parse::<std::net::IpAddr>().is_err()) {
        return Err(at(
            line("addresses"),
            format!(
                "expect.addresses: {:?} is not an IP address; list the addresses the node holds (its ctlplane IP, as the inventory's ansible_host), and give its name as expect.hostname",
                crate::excerpt::printable(bad)
            ),
        ));
    }
    if e.hostname.as_deref().is_some_and(|h| h.trim().is_empty()) {
        return Err(at(
            line("hostname"),
            "expect.hostname is empty; give the node's host name, or leave expect.hostname out".into(),
        ));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_namespace_is_its_own_unless_set() {
        let base = "namespace: openstack\nobject: ns1-c0\nnode: c0\n";
        let c = parse(Path::new("n.yaml"), base).unwrap();
        assert_eq!(c.lease_namespace, "edpm-node-lease");
        let c = parse(Path::new("n.yaml"), &format!("{base}lease_namespace: node-leases\n")).unwrap();
        assert_eq!((c.namespace.as_str(), c.lease_namespace.as_str()), ("openstack", "node-leases"));
        for bad in ["\"\"", "Edpm", "a_b", "-a"] {
            let e = parse(Path::new("n.yaml"), &format!("{base}lease_namespace: {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("node agent config n.yaml:4: lease_namespace"), "{bad}: {e}");
            assert!(e.contains("leave it out for edpm-node-lease"), "{e}");
        }
    }

    #[test]
    fn defaults_and_relative_kubeconfig() {
        let c = parse(
            Path::new("/etc/edpm-agent/node.yaml"),
            "namespace: openstack\nobject: ns1-c0\nnode: c0\nkubeconfig: kubeconfig\n",
        )
        .unwrap();
        assert_eq!(c.kubeconfig.as_deref(), Some(Path::new("/etc/edpm-agent/kubeconfig")));
        assert_eq!(
            (c.lease_interval, c.lease_duration, c.heartbeat),
            (LEASE_INTERVAL, LEASE_DURATION, HEARTBEAT)
        );
        assert_eq!(c.root, Path::new("/"));
    }

    #[test]
    fn bad_files_name_the_problem() {
        let e = parse(Path::new("n.yaml"), "namespace: o\nobject: x\nnode: c\nlease_interval_seconds: 40\n")
            .unwrap_err();
        assert!(e.to_string().contains("must be shorter"), "{e}");
        let e = parse(Path::new("n.yaml"), "namespace: o\nobject: x\nnode: c\ncolour: red\n").unwrap_err();
        assert!(
            e.to_string().starts_with("node agent config n.yaml:") && e.to_string().contains("colour"),
            "{e}"
        );
        let e = parse(Path::new("n.yaml"), "namespace: o\nnode: c\n").unwrap_err();
        assert!(e.to_string().contains("neither object nor nodeset"), "{e}");
    }

    #[test]
    fn durations_out_of_range_are_refused_naming_line_key_and_range() {
        let base = "namespace: o\nobject: x\nnode: c\n";
        for (key, _, min, max) in DURATIONS {
            for v in [0, max + 1, i64::MAX as u64, u64::MAX] {
                if v >= min && v <= max {
                    continue;
                }
                let e = parse(Path::new("n.yaml"), &format!("{base}{key}: {v}\n")).unwrap_err().to_string();
                assert_eq!(
                    e,
                    format!(
                        "node agent config n.yaml:4: {key} is {v}; give a whole number of seconds from {min} to {max} (default {})",
                        DURATIONS.iter().find(|d| d.0 == key).unwrap().1.as_secs()
                    )
                );
            }
        }
        let e =
            parse(Path::new("n.yaml"), &format!("{base}heartbeat_seconds: -1\n")).unwrap_err().to_string();
        assert!(e.starts_with("node agent config n.yaml:4: field heartbeat_seconds:"), "{e}");
        let c = parse(
            Path::new("n.yaml"),
            &format!("{base}check_interval_seconds: 86400\nrequest_timeout_seconds: 1\ncommand_timeout_seconds: 600\nlease_duration_seconds: 700\n"),
        )
        .unwrap();
        assert_eq!(
            (c.check_interval, c.request_timeout, c.command_timeout),
            (Duration::from_secs(86_400), Duration::from_secs(1), Duration::from_secs(600))
        );
        let c = parse(Path::new("n.yaml"), base).unwrap();
        assert_eq!((c.request_timeout, c.command_timeout), (REQUEST_TIMEOUT, COMMAND_TIMEOUT));
        // A check and a report at their limits must not outlast the Lease.
        let e = parse(Path::new("n.yaml"), &format!("{base}command_timeout_seconds: 35\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("command_timeout_seconds (35) and request_timeout_seconds (10) together must be shorter than lease_duration_seconds (40)"), "{e}");
    }

    #[test]
    fn blank_expectations_are_refused() {
        let base = "namespace: o\nobject: x\nnode: c\nexpect:\n";
        let e = parse(Path::new("n.yaml"), &format!("{base}  os: ''\n")).unwrap_err().to_string();
        assert!(e.starts_with("node agent config n.yaml:5: expect.os is empty"), "{e}");
        let e = parse(Path::new("n.yaml"), &format!("{base}  addresses: []\n  hostname: ' '\n")).unwrap_err();
        assert!(e.to_string().starts_with("node agent config n.yaml:6: expect.hostname is empty"), "{e}");
        let e =
            parse(Path::new("n.yaml"), &format!("{base}  addresses: [10.0.0.1, compute-0.example.com]\n"))
                .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "node agent config n.yaml:5: expect.addresses: \"compute-0.example.com\" is not an IP address"
            ),
            "{e}"
        );
        let c = parse(Path::new("n.yaml"), &format!("{base}  addresses: [10.0.0.1, 'fd00::1']\n")).unwrap();
        assert_eq!(c.expect.addresses, ["10.0.0.1", "fd00::1"]);
        let c = parse(Path::new("n.yaml"), &format!("{base}  os: CentOS\n")).unwrap();
        assert_eq!(c.expect.os.as_deref(), Some("CentOS"));
    }

    #[test]
    fn the_object_is_derived_from_the_nodeset_as_status_report_names_it() {
        let c =
            parse(Path::new("n.yaml"), "namespace: o\nnodeset: edpm-compute-cell1\nnode: edpm-compute-3\n")
                .unwrap();
        assert_eq!(c.object, "edpm-compute-cell1-edpm-compute-3");
        let c = parse(Path::new("n.yaml"), "namespace: o\nnodeset: ns\nnode: Compute.0\n").unwrap();
        assert_eq!(c.object, crate::readiness::names::node_object("ns", "Compute.0"));
        let c = parse(Path::new("n.yaml"), "namespace: o\nobject: mine\nnodeset: ns\nnode: c\n").unwrap();
        assert_eq!(c.object, "mine", "an explicit object wins");
    }
}
