//! The catalogue of EDPM services: one entry per data-plane service edpm-agent knows, with
//! upstream's default dataSources (openstack-operator `config/services/*.yaml`), the files
//! `render` produces for it and the globs edpm-ansible's role copies (mounts-nova-edpm.md §4.2),
//! and the readiness phase it belongs to (dataplane.md §4.1).
//!
//! Pure data. A service's own `OpenStackDataPlaneService` wins over the catalogue's defaults;
//! those lookups are `Snapshot` methods (`service_data_sources`, `service_type`,
//! `service_ca_certs`), so that this module sits below the snapshot. Services not in the
//! catalogue (custom ones) have no defaults, render nothing and belong to phase 1.

/// A readiness phase a service belongs to. Phase -1 (bare metal) has no services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Phase 0: the operating system, network and certificates.
    Infrastructure,
    /// Phase 1: the OpenStack services.
    Services,
}

/// Whether a default data source is a Secret or a ConfigMap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Secret,
    ConfigMap,
}

/// One of upstream's default dataSources.
#[derive(Debug)]
pub struct DefaultSource {
    pub kind: SourceKind,
    pub name: &'static str,
    pub optional: bool,
}

const fn secret(name: &'static str, optional: bool) -> DefaultSource {
    DefaultSource { kind: SourceKind::Secret, name, optional }
}

const fn config_map(name: &'static str, optional: bool) -> DefaultSource {
    DefaultSource { kind: SourceKind::ConfigMap, name, optional }
}

/// A file `render` generates from a template.
#[derive(Debug)]
pub struct TemplateFile {
    pub template: &'static str,
    pub file: &'static str,
}

/// The oslo.config files of a service `render` knows.
#[derive(Debug)]
pub struct ConfigFiles {
    /// File-name patterns the role copies into the container (`*` only).
    pub globs: &'static [&'static str],
    pub templates: &'static [TemplateFile],
    /// nova needs the node's cell (transport URL, credentials).
    pub needs_cell: bool,
    /// Where a NovaExternalCompute's customServiceConfig goes: sorts after every generated file.
    pub custom_name: &'static str,
    /// The single file `--merged` writes.
    pub merged_name: &'static str,
    /// A data-source Secret whose config the templates generate for this node instead
    /// (nova's `nova-cell1-compute-config` names one cell for every node).
    pub replaced_secret_suffix: Option<&'static str>,
}

/// A data-plane service.
#[derive(Debug)]
pub struct Service {
    /// The OpenStackDataPlaneService name; upstream's default `edpmServiceType` is the same.
    pub name: &'static str,
    pub phase: Phase,
    /// Upstream's default dataSources.
    pub default_sources: &'static [DefaultSource],
    /// Runs once for all NodeSets of a Deployment (upstream dedupes it onto the first).
    pub deploy_on_all_nodesets: bool,
    /// The config files `render` produces, for the services it renders.
    pub config: Option<ConfigFiles>,
    /// Its `*.conf` data-source keys are oslo.config files the service reads (besides the
    /// services `render` knows, whose globs say which keys those are).
    pub oslo_conf: bool,
}

impl Service {
    /// Whether `render` produces this service's config files.
    pub fn renders(&self) -> bool {
        self.config.is_some()
    }

    /// Whether the data-source key `key` is an oslo.config file this service reads: a key
    /// `render` copies (its glob), or a `*.conf` key of a service that reads oslo.config.
    pub fn reads_oslo_key(&self, key: &str) -> bool {
        if self.renders() { self.matches(key) } else { self.oslo_conf && key.ends_with(".conf") }
    }

    /// A config file name the role would copy into the container.
    pub fn matches(&self, file: &str) -> bool {
        self.config.as_ref().is_some_and(|c| c.globs.iter().any(|g| glob_match(g, file)))
    }

    /// A data-source Secret `render` generates the content of instead.
    pub fn replaces_secret(&self, name: &str) -> bool {
        self.config.as_ref().and_then(|c| c.replaced_secret_suffix).is_some_and(|s| name.ends_with(s))
    }

    /// The user's extra-config ConfigMap, as upstream names it.
    pub fn extra_config_map(&self) -> String {
        format!("{}-extra-config", self.name)
    }
}

const fn infra(name: &'static str) -> Service {
    Service {
        name,
        phase: Phase::Infrastructure,
        default_sources: &[],
        deploy_on_all_nodesets: false,
        config: None,
        oslo_conf: false,
    }
}

const fn openstack(name: &'static str, default_sources: &'static [DefaultSource]) -> Service {
    Service {
        name,
        phase: Phase::Services,
        default_sources,
        deploy_on_all_nodesets: false,
        config: None,
        oslo_conf: false,
    }
}

pub const CATALOGUE: &[Service] = &[
    infra("redhat"),
    infra("download-cache"),
    infra("bootstrap"),
    infra("configure-network"),
    infra("validate-network"),
    infra("install-os"),
    infra("configure-os"),
    Service { deploy_on_all_nodesets: true, ..infra("ssh-known-hosts") },
    infra("run-os"),
    infra("reboot-os"),
    infra("install-certs"),
    openstack("ovn", &[config_map("ovncontroller-config", false)]),
    openstack("libvirt", &[secret("libvirt-secret", false)]),
    Service {
        config: Some(ConfigFiles {
            globs: &["*nova*.conf"],
            templates: &[
                TemplateFile { template: "nova/01-nova.conf.j2", file: "01-nova.conf" },
                TemplateFile {
                    template: "nova/02-nova-host-specific.conf.j2",
                    file: "02-nova-host-specific.conf",
                },
            ],
            needs_cell: true,
            custom_name: "99-nova-custom.conf",
            merged_name: "99-merged-nova.conf",
            replaced_secret_suffix: Some("-compute-config"),
        }),
        ..openstack(
            "nova",
            &[
                secret("nova-cell1-compute-config", false),
                secret("nova-migration-ssh-key", false),
                config_map("nova-extra-config", true),
            ],
        )
    },
    Service {
        config: Some(ConfigFiles {
            globs: &["*metadata*conf"],
            templates: &[TemplateFile {
                template: "neutron-metadata/01-neutron-ovn-metadata-agent.conf.j2",
                file: "01-neutron-ovn-metadata-agent.conf",
            }],
            needs_cell: false,
            custom_name: "99-neutron-metadata-custom.conf",
            merged_name: "99-merged-neutron-metadata.conf",
            replaced_secret_suffix: None,
        }),
        ..openstack(
            "neutron-metadata",
            &[
                secret("neutron-ovn-metadata-agent-neutron-config", false),
                secret("nova-metadata-neutron-config", false),
                config_map("neutron-metadata-extra-config", true),
            ],
        )
    },
    Service {
        config: Some(ConfigFiles {
            globs: &["*ovn.conf", "*metadata*conf"],
            templates: &[TemplateFile {
                template: "neutron-ovn/01-neutron-ovn.conf.j2",
                file: "01-neutron-ovn.conf",
            }],
            needs_cell: false,
            custom_name: "99-neutron-custom-ovn.conf",
            merged_name: "99-merged-neutron-ovn.conf",
            replaced_secret_suffix: None,
        }),
        ..openstack(
            "neutron-ovn",
            &[
                secret("neutron-ovn-agent-neutron-config", false),
                secret("nova-metadata-neutron-config", true),
                config_map("neutron-ovn-extra-config", true),
            ],
        )
    },
    Service {
        config: Some(ConfigFiles {
            globs: &["*sriov*conf"],
            templates: &[TemplateFile {
                template: "neutron-sriov/01-neutron-sriov.conf.j2",
                file: "01-neutron-sriov.conf",
            }],
            needs_cell: false,
            custom_name: "99-neutron-sriov-custom.conf",
            merged_name: "99-merged-neutron-sriov.conf",
            replaced_secret_suffix: None,
        }),
        ..openstack(
            "neutron-sriov",
            &[
                secret("neutron-sriov-agent-neutron-config", false),
                config_map("neutron-sriov-extra-config", true),
            ],
        )
    },
    Service {
        config: Some(ConfigFiles {
            globs: &["*dhcp*conf"],
            templates: &[TemplateFile {
                template: "neutron-dhcp/01-neutron-dhcp.conf.j2",
                file: "01-neutron-dhcp.conf",
            }],
            needs_cell: false,
            custom_name: "99-neutron-dhcp-custom.conf",
            merged_name: "99-merged-neutron-dhcp.conf",
            replaced_secret_suffix: None,
        }),
        ..openstack(
            "neutron-dhcp",
            &[
                secret("neutron-dhcp-agent-neutron-config", false),
                config_map("neutron-dhcp-extra-config", true),
            ],
        )
    },
    // ceilometer-compute reads its ceilometer.conf with oslo.config.
    Service { oslo_conf: true, ..openstack("telemetry", &[secret("ceilometer-compute-config-data", false)]) },
    openstack("ceph-client", &[]),
    // Upstream's swift service has dataSources (swift-conf, swift-storage-config-data,
    // swift-ring-files); staging has never copied them, so they are not listed yet.
    openstack("swift", &[]),
];

/// Default `spec.services` of an OpenStackDataPlaneNodeSet (openstack-operator HEAD).
pub const DEFAULT_NODESET_SERVICES: &[&str] = &[
    "redhat",
    "download-cache",
    "bootstrap",
    "configure-network",
    "validate-network",
    "install-os",
    "configure-os",
    "ssh-known-hosts",
    "run-os",
    "reboot-os",
    "install-certs",
    "ovn",
    "neutron-metadata",
    "libvirt",
    "nova",
    "telemetry",
];

/// Default `spec.services` of an OpenStackDataPlaneRole (dataplane-operator `605f1a16`).
pub const DEFAULT_ROLE_SERVICES: &[&str] = &[
    "configure-network",
    "validate-network",
    "install-os",
    "configure-os",
    "run-os",
    "ovn",
    "libvirt",
    "nova",
];

/// The CRD default of `OpenStackDataPlaneService.spec.caCerts`.
pub const DEFAULT_CA_CERTS: &str = "combined-ca-bundle";
/// The key of the CA bundle Secret that holds the PEM bundle (edpm_install_certs reads it;
/// the Nova client trusts it).
pub const CA_BUNDLE_KEY: &str = "tls-ca-bundle.pem";

pub fn find(name: &str) -> Option<&'static Service> {
    CATALOGUE.iter().find(|s| s.name == name)
}

/// The services `render` produces config files for.
pub fn rendered() -> impl Iterator<Item = &'static Service> {
    CATALOGUE.iter().filter(|s| s.renders())
}

/// The services `render` knows, looked up by name.
pub fn find_rendered(name: &str) -> Option<&'static Service> {
    find(name).filter(|s| s.renders())
}

/// Upstream's default dataSources of a catalogued service (none for others). `snapshot`
/// turns them into the CR field's shape: the catalogue sits below `snapshot` and names no
/// resource type, so the module graph has no cycle.
pub fn default_sources(name: &str) -> &'static [DefaultSource] {
    find(name).map_or(&[][..], |s| s.default_sources)
}

/// Shell-style matching with `*` only, as the roles' `find` patterns use.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == name;
    }
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_as_the_roles_use_them() {
        assert!(glob_match("*nova*.conf", "25-nova-extra.conf"));
        assert!(glob_match("*nova*.conf", "nova-blank.conf"));
        assert!(!glob_match("*nova*.conf", "zz-override.conf"));
        assert!(glob_match("*metadata*conf", "05-nova-metadata.conf"));
        assert!(glob_match("*ovn.conf", "10-neutron-ovn.conf"));
        assert!(!glob_match("*ovn.conf", "01-neutron-ovn-agent.conf"));
        assert!(glob_match("*sriov*conf", "01-neutron-sriov.conf"));
    }

    #[test]
    fn every_generated_and_custom_name_matches_its_glob_and_sorts_last() {
        for s in rendered() {
            let c = s.config.as_ref().unwrap();
            for t in c.templates {
                assert!(s.matches(t.file), "{} {}", s.name, t.file);
                assert!(c.custom_name > t.file, "{}", s.name);
            }
            assert!(s.matches(c.custom_name) && s.matches(c.merged_name), "{}", s.name);
        }
    }

    #[test]
    fn names_are_unique_and_default_lists_are_catalogued() {
        let mut names: Vec<&str> = CATALOGUE.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len());
        for s in DEFAULT_NODESET_SERVICES.iter().chain(DEFAULT_ROLE_SERVICES) {
            assert!(find(s).is_some(), "{s} is a default service but not catalogued");
        }
    }

    #[test]
    fn upstream_infrastructure_services_are_phase_0() {
        // dataplane.md §4.1: the Service...DeploymentReady conditions of phase 0.
        let infra: Vec<&str> =
            CATALOGUE.iter().filter(|s| s.phase == Phase::Infrastructure).map(|s| s.name).collect();
        assert_eq!(
            infra,
            [
                "redhat",
                "download-cache",
                "bootstrap",
                "configure-network",
                "validate-network",
                "install-os",
                "configure-os",
                "ssh-known-hosts",
                "run-os",
                "reboot-os",
                "install-certs"
            ]
        );
    }
}
