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
/// dataSources, extra-config and CA bundle, and the volumes of extraMounts.
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
    // Only names the API server could hold are asked for: a name that is none (a Deployment's
    // `secretHashes` key `a?watch=true`, `../x`) would go into a request path. Readiness names
    // such a key as bad input on the nodes of the Deployment that recorded it; a reference
    // elsewhere reads as a missing object, which the model names with its chain.
    cms.retain(|n| is_dns1123_subdomain(n));
    secrets.retain(|n| is_dns1123_subdomain(n));
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
