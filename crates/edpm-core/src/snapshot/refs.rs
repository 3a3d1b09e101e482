//! Which ConfigMaps and Secrets the data-plane objects reference, so that a reader can fetch
//! exactly those: listing every Secret in a namespace would need wider RBAC and pull in
//! unrelated keys. Pure: a partial snapshot (the listed kinds) in, names out.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Snapshot;
use super::resource::DataSource;
use crate::rfc1123::is_dns1123_subdomain;

/// The ConfigMaps and Secrets that the listed objects name, so that only those are read:
/// listing every Secret in the namespace would need wider RBAC and pull in unrelated keys.
/// Covers what every stage reads: `ansibleVarsFrom`, SSH keys, NovaCell Secrets, each service's
/// dataSources, extra-config and CA bundle, the volumes of extraMounts, and the certificate
/// Secrets a Deployment that failed may be credited with on the hosts it completed
/// ([`more_references`] names the rest once these are got).
#[allow(
    clippy::too_many_lines,
    reason = "one list of every place a Secret or ConfigMap is named, read against the CRDs as a whole"
)]
pub fn references(s: &Snapshot) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cms = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let add = |ds: &DataSource, cms: &mut BTreeSet<String>, secrets: &mut BTreeSet<String>| {
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
            crate::services::DEFAULT_NODESET_SERVICES.iter().map(|x| x.to_string()).collect()
        }));
        volume_refs(&Value::Array(ns.body.node_template.extra_mounts.clone()), &mut cms, &mut secrets);
    }
    for r in &s.roles {
        secrets.extend(r.body.node_template.ansible_ssh_private_key_secret.clone());
        services.extend(r.body.services.clone().unwrap_or_else(|| {
            crate::services::DEFAULT_ROLE_SERVICES.iter().map(|x| x.to_string()).collect()
        }));
        volume_refs(&Value::Array(r.body.node_template.extra_mounts.clone()), &mut cms, &mut secrets);
    }
    for n in &s.nodes {
        secrets.extend(n.body.node.ansible_ssh_private_key_secret.clone());
    }
    for svc in &services {
        for ds in s.service_data_sources(svc) {
            add(&ds, &mut cms, &mut secrets);
        }
        cms.insert(format!("{svc}-extra-config"));
        secrets.insert(s.service_ca_certs(svc));
    }
    for o in &s.openstack {
        match o.id.kind.as_str() {
            "NovaCell" => {
                secrets.extend(o.body.pointer("/spec/secret").and_then(Value::as_str).map(str::to_string));
                // The CA bundle the Nova check trusts (`nova_cell::logins`).
                secrets.extend(
                    o.body
                        .pointer("/spec/tls/caBundleSecretName")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                );
            }
            "OpenStackControlPlane" => {
                volume_refs(o.body.get("spec").unwrap_or(&Value::Null), &mut cms, &mut secrets)
            }
            _ => {}
        }
    }
    // What the Deployments recorded delivering (TLS certificates among them, which no object
    // names): `SecretsCurrent` hashes each as it is now.
    for d in &s.evidence.deployments {
        secrets.extend(d.status.secret_hashes.keys().cloned());
        cms.extend(d.status.config_map_hashes.keys().cloned());
    }
    failed_runs_certificates(s, &mut secrets);
    // Only names the API server could hold are asked for: a name that is none (a Deployment's
    // `secretHashes` key `a?watch=true`, `../x`) would go into a request path. Readiness names
    // such a key as bad input on the nodes of the Deployment that recorded it; a reference
    // elsewhere reads as a missing object, which the model names with its chain.
    cms.retain(|n| is_dns1123_subdomain(n));
    secrets.retain(|n| is_dns1123_subdomain(n));
    (cms, secrets)
}

/// What a Deployment that has not completed may be credited with on the hosts its Jobs' pods
/// name in `completedHostList` though it records nothing (`readiness::inputs`, a run that
/// failed for good): for each of its services with `tlsCerts` on a NodeSet with TLS, the
/// packed Secret its install-certs Job mounted first (the others are numbered by its
/// `numberOfSecrets` label: [`more_references`]) and each such host's certificate Secret.
/// Nothing while every Deployment has completed, or no pod names a completed host.
fn failed_runs_certificates(s: &Snapshot, secrets: &mut BTreeSet<String>) {
    for (nodeset, service, key, hosts) in failed_runs_certs(s) {
        secrets.insert(packed_cert_secret(nodeset, service, &key, 0));
        secrets.extend(hosts.into_iter().map(|h| host_cert_secret(service, &key, h)));
    }
}

/// Of [`failed_runs_certificates`]: each (NodeSet, service, cert key) and the host names of
/// the NodeSet's hosts the run completed.
fn failed_runs_certs(s: &Snapshot) -> Vec<(&str, &str, String, Vec<&str>)> {
    let mut out = Vec::new();
    for d in s.evidence.deployments.iter().filter(|d| !d.status.deployed) {
        let jobs: BTreeSet<&str> = s
            .evidence
            .jobs
            .iter()
            .filter(|j| j.meta.labels.get("openstackdataplanedeployment") == Some(&d.id.name))
            .map(|j| j.id.name.as_str())
            .collect();
        let completed: BTreeSet<String> = s
            .evidence
            .pods
            .iter()
            .filter(|p| p.job().is_some_and(|j| jobs.contains(j)))
            .filter_map(|p| p.summary())
            .flat_map(|(summary, _)| summary.completed_host_list)
            .collect();
        if completed.is_empty() {
            continue;
        }
        for ns in s.nodesets.iter().filter(|n| d.spec.node_sets.contains(&n.id.name)) {
            if ns.body.tls_enabled != Some(true) {
                continue;
            }
            let hosts: Vec<&str> = ns
                .body
                .nodes
                .iter()
                .map(|(name, node)| (name.as_str(), node.host_name.as_deref().unwrap_or(name)))
                .filter(|(name, host)| {
                    let short = host.split('.').next().unwrap_or(host);
                    [name, host, &short].iter().any(|n| completed.contains(**n))
                })
                .map(|(_, host)| host)
                .collect();
            let services: Vec<&str> = if d.spec.services_override.is_empty() {
                match &ns.body.services {
                    Some(list) => list.iter().map(String::as_str).collect(),
                    None => crate::services::DEFAULT_NODESET_SERVICES.to_vec(),
                }
            } else {
                d.spec.services_override.iter().map(String::as_str).collect()
            };
            for svc in services {
                for key in tls_cert_keys(s, svc).unwrap_or_default() {
                    out.push((ns.id.name.as_str(), svc, key, hosts.clone()));
                }
            }
        }
    }
    out
}

/// The packed certificate Secrets after the first that [`references`] could not name before
/// the first was got: as many as its `numberOfSecrets` label says (at most 1,000: a label is
/// anyone's to write), those not got yet. A reader gets these once the first round is in.
pub fn more_references(s: &Snapshot) -> BTreeSet<String> {
    let have: BTreeSet<&str> = s.secrets.iter().map(|x| x.id.name.as_str()).collect();
    let mut out = BTreeSet::new();
    for (nodeset, service, key, _) in failed_runs_certs(s) {
        let first = packed_cert_secret(nodeset, service, &key, 0);
        let Some(packed) = s.secrets.iter().find(|x| x.id.name == first) else { continue };
        let count: usize =
            packed.meta.labels.get("numberOfSecrets").and_then(|n| n.parse().ok()).unwrap_or(0);
        for n in 1..count.min(1_000) {
            let name = packed_cert_secret(nodeset, service, &key, n);
            if !have.contains(name.as_str()) {
                out.insert(name);
            }
        }
    }
    out.retain(|n| is_dns1123_subdomain(n));
    out
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

/// The name of a NodeSet's Secret that packs the certificates of `service`'s `cert_key` for
/// its install-certs Jobs to mount, number `index`, as openstack-operator names it
/// (`internal/dataplane/cert.go` `GetServiceCertsSecretName`):
/// `<nodeset>-<service>-<cert_key>-certs-<index>`, or, past 253 characters, `cert-` and the
/// hex SHA-224 of that.
pub fn packed_cert_secret(nodeset: &str, service: &str, cert_key: &str, index: usize) -> String {
    use sha2::{Digest, Sha224};
    let name = format!("{nodeset}-{service}-{cert_key}-certs-{index}");
    if name.len() <= 253 {
        return name;
    }
    let digest = Sha224::digest(name.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("cert-{hex}")
}

/// The name of the Secret cert-manager keeps one host's certificate of `service`'s
/// `cert_key` in, as openstack-operator asks for it (`cert.go` `EnsureTLSCerts`: certificate
/// `<service>-<cert_key>-<hostName>`; lib-common's `EnsureCert`: its Secret `cert-` and that).
pub fn host_cert_secret(service: &str, cert_key: &str, host_name: &str) -> String {
    format!("cert-{service}-{cert_key}-{host_name}")
}

/// The certificate keys of service `name`'s `tlsCerts`, sorted; empty when it has none or the
/// snapshot lacks its definition. `None` when `tlsCerts` is set but no mapping.
pub fn tls_cert_keys(s: &Snapshot, name: &str) -> Option<Vec<String>> {
    let Some(svc) = s.services.iter().find(|x| x.id.name == name) else { return Some(Vec::new()) };
    match svc.body.unknown.get("tlsCerts") {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Object(m)) => {
            let mut keys: Vec<String> = m.keys().cloned().collect();
            keys.sort();
            Some(keys)
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NodeSet `ns1` with TLS (c0, c1, c2 as `c2.example.com`) and Deployment `d1`, not
    /// completed, whose nova Job's pod says its playbook ran to the end for c1 and c2.
    fn failed(tls: &str, deployed: bool) -> Snapshot {
        let message = serde_json::to_string(
            r#"{"completedHostList":["c1","c2"],"failedHostList":["c0"],"failedHosts":1,"rc":2,"status":"failed","totalHosts":3}"#,
        )
        .unwrap();
        let text = format!(
            r#"apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNodeSet
metadata: {{name: ns1, namespace: openstack}}
spec:
  preProvisioned: true
{tls}
  services: [install-certs, nova]
  nodeTemplate: {{ansibleSSHPrivateKeySecret: key}}
  nodes:
    c0: {{hostName: c0}}
    c1: {{hostName: c1}}
    c2: {{hostName: c2.example.com}}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneService
metadata: {{name: nova, namespace: openstack}}
spec: {{tlsCerts: {{default: {{contents: [dnsnames]}}}}}}
---
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneDeployment
metadata: {{name: d1, namespace: openstack, creationTimestamp: "2026-11-01T10:00:00Z"}}
spec: {{nodeSets: [ns1]}}
status: {{deployed: {deployed}}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: nova-d1-ns1, namespace: openstack, labels: {{openstackdataplaneservice: nova, openstackdataplanedeployment: d1, openstackdataplanenodeset: ns1}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: nova-d1-ns1-a, namespace: openstack, creationTimestamp: "2026-11-01T10:05:00Z", labels: {{batch.kubernetes.io/job-name: nova-d1-ns1}}}}
status:
  phase: Failed
  containerStatuses:
  - name: nova-d1-ns1
    state: {{terminated: {{exitCode: 2, finishedAt: "2026-11-01T10:06:00Z", message: {message}}}}}
"#
        );
        crate::snapshot::from_file_text("t.yaml", &text, None).unwrap()
    }

    /// What a failed run's completed hosts may be credited with is got: the packed Secret and
    /// those hosts' certificate Secrets, no other host's.
    #[test]
    fn a_failed_runs_certificates_are_asked_for_on_the_hosts_it_completed() {
        let (_, secrets) = references(&failed("  tlsEnabled: true", false));
        for name in ["ns1-nova-default-certs-0", "cert-nova-default-c1", "cert-nova-default-c2.example.com"] {
            assert!(secrets.contains(name), "{name}: {secrets:?}");
        }
        assert!(!secrets.contains("cert-nova-default-c0"), "c0 failed: {secrets:?}");
        // Without TLS, or once completed (its record names what it delivered), none.
        for snap in [failed("", false), failed("  tlsEnabled: true", true)] {
            let (_, secrets) = references(&snap);
            assert!(!secrets.iter().any(|s| s.contains("nova-default")), "{secrets:?}");
        }
    }

    /// The packed Secrets after the first are asked for once the first says how many.
    #[test]
    fn a_failed_runs_further_packed_secrets_are_asked_for_once_the_first_is_in() {
        let mut snap = failed("  tlsEnabled: true", false);
        assert!(more_references(&snap).is_empty(), "the first is not in yet");
        let got = "apiVersion: v1\nkind: Secret\nmetadata: {name: ns1-nova-default-certs-0, namespace: openstack, labels: {numberOfSecrets: \"3\"}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: ns1-nova-default-certs-1, namespace: openstack}\n";
        snap.merge(crate::snapshot::from_file_text("s.yaml", got, None).unwrap()).unwrap();
        assert_eq!(more_references(&snap), BTreeSet::from(["ns1-nova-default-certs-2".to_string()]));
    }

    /// Upstream's names; past 253 characters `cert-` and the SHA-224 (as Python's hashlib
    /// computes it).
    #[test]
    fn certificate_secrets_are_named_as_upstream_names_them() {
        assert_eq!(packed_cert_secret("ns1", "nova", "default", 2), "ns1-nova-default-certs-2");
        assert_eq!(host_cert_secret("nova", "default", "c2.example.com"), "cert-nova-default-c2.example.com");
        let long = "a".repeat(232);
        assert_eq!(packed_cert_secret(&long, "nova", "default", 0).len(), 253, "253 is kept");
        assert_eq!(
            packed_cert_secret(&"a".repeat(240), "nova", "default", 0),
            "cert-a929474413792e82b92ca71759f5a9b34cf21aae31cf0fb9e942857f"
        );
    }
}
