//! Names: upstream's AnsibleEE Job names (to find a Job's summary), and the names of
//! edpm-agent's status objects, shortened the same way.
//!
//! openstack-operator (`GetAnsibleExecutionNameAndLabels`, PR #1819): a name longer than 63
//! characters (a DNS-1123 label) becomes its first 54 characters, with trailing `-` and `.`
//! removed, then `-` and the first 8 hex digits of the SHA-256 of the whole name. Stable,
//! and distinct for distinct long names.

use sha2::{Digest, Sha256};

/// The longest DNS-1123 label.
pub const MAX_LABEL: usize = 63;

/// upstream's shortening: names up to 63 characters are unchanged.
pub fn shorten(name: &str) -> String {
    if name.len() <= MAX_LABEL {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let mut cut = MAX_LABEL - 9;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let prefix = name[..cut].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}")
}

/// The Job (and ansible-runner ident) upstream creates for a service of a Deployment on a
/// NodeSet; a `deployOnAllNodeSets` service has no NodeSet part.
pub fn job_name(service: &str, deployment: &str, nodeset: &str, global: bool) -> String {
    if global {
        shorten(&format!("{service}-{deployment}"))
    } else {
        shorten(&format!("{service}-{deployment}-{nodeset}"))
    }
}

/// A name made DNS-1123 (lower case, `[a-z0-9-]`, alphanumeric at both ends): NodeSet names
/// are already, node keys and host names may hold dots or upper case.
fn dns_label_chars(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    mapped.trim_matches('-').to_string()
}

/// The `EDPMNodeStatus` of a node: `<nodeset>-<node>`, DNS-1123, shortened with a hash suffix
/// when longer than 63. When making the name DNS-1123 changed it (a node key `Compute.0`),
/// the hash of the original keeps two such nodes apart.
pub fn node_object(nodeset: &str, node: &str) -> String {
    let raw = format!("{nodeset}-{node}");
    let clean = dns_label_chars(&raw);
    if clean == raw {
        return shorten(&clean);
    }
    let digest = Sha256::digest(raw.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let mut base = clean;
    base.truncate(MAX_LABEL - 9);
    format!("{}-{hash}", base.trim_end_matches('-'))
}

/// A label value for `s`: `s` itself when it is one (at most 63 characters of
/// `[A-Za-z0-9-_.]`, alphanumeric at both ends), else shortened as object names are (unlike
/// characters made `-`, cut, and the hash of the whole), so a 70-character node FQDN labels its
/// objects instead of making the API server refuse them (422). Whoever shortens also keeps the
/// whole name in an annotation ([`super::api::NODE_ANNOTATION`]).
pub fn label_value(s: &str) -> String {
    if is_label_value(s) {
        return s.to_string();
    }
    let digest = Sha256::digest(s.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let mapped: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .take(MAX_LABEL - 9)
        .collect();
    let base = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if base.is_empty() { hash } else { format!("{base}-{hash}") }
}

/// apimachinery's `IsValidLabelValue`.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    s.is_empty()
        || (b.len() <= MAX_LABEL
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// The `EDPMNodeSetStatus` of a NodeSet or Role: its own name (already DNS-1123).
pub fn nodeset_object(nodeset: &str) -> String {
    let clean = dns_label_chars(nodeset);
    if clean == nodeset { shorten(&clean) } else { node_object(nodeset, "") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_follow_upstream() {
        // Examples computed with upstream's rule (PR #1819) and checked in its tests.
        assert_eq!(
            job_name("failed-service", "edpm-compute-no-nodes", "edpm-compute-no-nodes", false),
            "failed-service-edpm-compute-no-nodes-edpm-compute-no-nodes"
        );
        assert_eq!(
            job_name("custom-global-service", "edpm-compute-global", "x", true),
            "custom-global-service-edpm-compute-global"
        );
        assert_eq!(
            job_name("neutron-metadata", "openstack-edpm-deployment-2", "openstack-edpm-ipam", false),
            "neutron-metadata-openstack-edpm-deployment-2-openstack-dc768df3"
        );
        assert_eq!(
            job_name("configure-network", "edpm-deployment-20260801", "compute-rack-a-nodeset", false),
            "configure-network-edpm-deployment-20260801-compute-rac-9640dc69"
        );
    }

    #[test]
    fn label_values_are_valid_stable_and_distinct() {
        assert_eq!(label_value("edpm-compute-3"), "edpm-compute-3");
        assert_eq!(label_value("Compute_0.example"), "Compute_0.example");
        let fqdn = format!("edpm-compute-{}.ctlplane.example.com", "x".repeat(40));
        assert!(fqdn.len() > MAX_LABEL);
        let v = label_value(&fqdn);
        assert!(is_label_value(&v) && v.len() <= MAX_LABEL, "{v}");
        assert_eq!(v, label_value(&fqdn));
        assert_ne!(v, label_value(&fqdn.replace("com", "org")));
        for odd in ["-x-", "a b", "é", "", "x".repeat(200).as_str(), "..."] {
            assert!(is_label_value(&label_value(odd)), "{odd:?}: {}", label_value(odd));
        }
    }

    #[test]
    fn object_names_are_dns_labels_stable_and_distinct() {
        assert_eq!(node_object("edpm-compute-cell1", "edpm-compute-3"), "edpm-compute-cell1-edpm-compute-3");
        let long = node_object("a-very-long-nodeset-name-for-a-rack-of-computes", "edpm-compute-rack-a-0017");
        assert!(long.len() <= MAX_LABEL, "{long}");
        assert_eq!(
            long,
            node_object("a-very-long-nodeset-name-for-a-rack-of-computes", "edpm-compute-rack-a-0017")
        );
        assert_ne!(
            long,
            node_object("a-very-long-nodeset-name-for-a-rack-of-computes", "edpm-compute-rack-a-0018")
        );
        let dotted = node_object("ns", "Compute.0");
        assert!(dotted.starts_with("ns-compute-0-") && dotted.len() <= MAX_LABEL, "{dotted}");
        assert_ne!(dotted, node_object("ns", "compute-0"));
        assert_ne!(dotted, node_object("ns", "Compute_0"));
        for name in [long, dotted] {
            assert!(crate::validate::is_dns1123_label(&name), "{name}");
        }
        assert_eq!(nodeset_object("edpm-compute-cell1"), "edpm-compute-cell1");
    }
}
