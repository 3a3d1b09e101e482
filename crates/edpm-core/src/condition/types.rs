//! The condition types edpm-agent writes and reads: one vocabulary, each name defined once.
//! Operators grep these names, and upstream's own types are spelled as upstream spells them:
//! change nothing here without a CHANGELOG entry.

/// Every object's summary condition (lib-common's `ReadyCondition`).
pub const READY: &str = "Ready";

// A node's phases (EDPMNodeStatus).
/// Phase -1: the node's operating system is installed.
pub const BAREMETAL: &str = "BaremetalProvisionReady";
/// Phase 0: every infrastructure service deployed.
pub const INFRASTRUCTURE: &str = "InfrastructureReady";
/// Phase 1: every OpenStack service deployed.
pub const SERVICES: &str = "ServicesReady";
/// kstatus: a Deployment is working on the node.
pub const RECONCILING: &str = "Reconciling";
/// kstatus: a terminal failure no running Deployment will retry.
pub const STALLED: &str = "Stalled";
/// Phase 1, Nova's own view: nova-compute registered, up and enabled, its hypervisor known
/// (nova-operator's `Nova<Thing>Ready` style; a member of `ServicesReady`).
pub const NOVA_COMPUTE: &str = "NovaComputeReady";
/// The node agent's own phase -1 and 0 checks, on the node.
pub const NODE_AGENT: &str = "NodeAgentReady";
/// The node's deployed OpenStack version is the OpenStackVersion's `spec.targetVersion` (not a
/// member of `Ready`: a node on the previous version still serves).
pub const VERSION_CURRENT: &str = "VersionCurrent";
/// Every Secret and ConfigMap last delivered to the node is as it is now (not a member of
/// `Ready`).
pub const SECRETS_CURRENT: &str = "SecretsCurrent";

// A NodeSet's (EDPMNodeSetStatus), and upstream's on its NodeSet and Deployment.
pub const NODESET_BAREMETAL: &str = "NodeSetBaremetalProvisionReady";
pub const NODESET_INFRASTRUCTURE: &str = "NodeSetInfrastructureReady";
pub const NODESET_SERVICES: &str = "NodeSetServicesReady";
/// Every node of the NodeSet at the target version.
pub const NODESET_VERSION_CURRENT: &str = "NodeSetVersionCurrent";
/// Every node of the NodeSet holds every current input.
pub const NODESET_SECRETS_CURRENT: &str = "NodeSetSecretsCurrent";
/// The seeds' Role's provisioning condition (dataplane-operator's `RoleBaremetalProvisionReady`).
pub const ROLE_BAREMETAL: &str = "RoleBaremetalProvisionReady";
/// The node agent's stand-in when it cannot tell which services were deployed.
pub const SERVICES_RUNTIME: &str = "ServiceRuntimeReady";
/// upstream's NodeSet condition.
pub const DEPLOYMENT_READY: &str = "DeploymentReady";
/// upstream's Deployment condition, per NodeSet.
pub const NODESET_DEPLOYMENT_READY: &str = "NodeSetDeploymentReady";

/// upstream `strcase.ToCamel` (iancoleman/strcase v0.3.0, byte by byte), as the service
/// condition types use it: `configure-network` → `ConfigureNetwork`, `install-os` →
/// `InstallOs`. A letter after `-`, `_`, `.`, a space or a digit is upper-cased, an upper-case
/// letter after another is lower-cased, and every other byte is dropped.
pub fn to_camel(s: &str) -> String {
    let s = s.trim();
    let mut out = String::with_capacity(s.len());
    let mut cap_next = true;
    let mut prev_cap = false;
    for &b in s.as_bytes() {
        let (is_cap, is_low) = (b.is_ascii_uppercase(), b.is_ascii_lowercase());
        let mut v = b;
        if cap_next {
            v = v.to_ascii_uppercase();
        } else if prev_cap && is_cap {
            v = v.to_ascii_lowercase();
        }
        prev_cap = is_cap;
        if is_cap || is_low {
            out.push(v as char);
            cap_next = false;
        } else if b.is_ascii_digit() {
            out.push(v as char);
            cap_next = true;
        } else {
            cap_next = matches!(b, b'_' | b' ' | b'-' | b'.');
        }
    }
    out
}

/// `Service<Camel>DeploymentReady`: upstream's per-service condition (a node's, from the
/// newest Deployment that ran the service there).
pub fn service_deployment(service: &str) -> String {
    format!("Service{}DeploymentReady", to_camel(service))
}

/// `Service<Camel>RuntimeReady`: the node agent's per-service condition (the service's
/// containers on the node, as it runs them now).
pub fn service_runtime(service: &str) -> String {
    format!("Service{}RuntimeReady", to_camel(service))
}

/// Whether a condition type is the node agent's to write (`status report` never writes them).
pub fn is_agent_condition(type_: &str) -> bool {
    type_ == NODE_AGENT || (type_.starts_with("Service") && type_.ends_with("RuntimeReady"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_as_strcase() {
        for (s, want) in [
            ("configure-network", "ConfigureNetwork"),
            ("install-os", "InstallOs"),
            ("ssh-known-hosts", "SshKnownHosts"),
            ("neutron-metadata", "NeutronMetadata"),
            ("nova", "Nova"),
            ("failed-service", "FailedService"),
            ("nova-cell1", "NovaCell1"),
            ("this-service-does-not-exist", "ThisServiceDoesNotExist"),
            ("custom_svc", "CustomSvc"),
            ("ovs-DPDK", "OvsDpdk"),
            ("a/b", "Ab"),
            ("2nd-svc", "2NdSvc"),
        ] {
            assert_eq!(to_camel(s), want, "{s}");
        }
        assert_eq!(service_deployment("install-certs"), "ServiceInstallCertsDeploymentReady");
        assert_eq!(service_runtime("neutron-metadata"), "ServiceNeutronMetadataRuntimeReady");
        assert!(is_agent_condition("ServiceNovaRuntimeReady") && is_agent_condition(NODE_AGENT));
        assert!(!is_agent_condition("ServiceNovaDeploymentReady"));
    }
}
