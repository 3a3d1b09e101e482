//! The EDPM services edpm-agent renders config for: file names, the globs edpm-ansible's roles
//! copy (mounts-nova-edpm.md §4.2), and their default data sources (openstack-operator
//! `config/services/*.yaml`).

use crate::resource::{DataSource, LocalRef};
use crate::source::Snapshot;

/// A default data source: (is a Secret, name, optional).
pub type DefaultSource = (bool, &'static str, bool);

pub struct TemplateFile {
    pub template: &'static str,
    pub file: &'static str,
}

pub struct ServiceKind {
    /// The data-plane service name (`edpmServiceType`), also the config directory name.
    pub name: &'static str,
    /// File-name patterns the role copies into the container (`*` only).
    pub globs: &'static [&'static str],
    pub templates: &'static [TemplateFile],
    /// nova needs the node's cell (transport URL, credentials).
    pub needs_cell: bool,
    /// Where a NovaExternalCompute's customServiceConfig goes: sorts after every generated file.
    pub custom_name: &'static str,
    /// The single file `--merged` writes.
    pub merged_name: &'static str,
    /// Upstream's default dataSources: (Secret?, name, optional).
    pub default_sources: &'static [DefaultSource],
    /// A data-source Secret whose config the templates generate for this node instead
    /// (nova's `nova-cell1-compute-config` names one cell for every node).
    pub replaced_secret_suffix: Option<&'static str>,
}

pub const SERVICES: &[ServiceKind] = &[
    ServiceKind {
        name: "nova",
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
        default_sources: &[
            (true, "nova-cell1-compute-config", false),
            (true, "nova-migration-ssh-key", false),
            (false, "nova-extra-config", true),
        ],
        replaced_secret_suffix: Some("-compute-config"),
    },
    ServiceKind {
        name: "neutron-metadata",
        globs: &["*metadata*conf"],
        templates: &[TemplateFile {
            template: "neutron-metadata/01-neutron-ovn-metadata-agent.conf.j2",
            file: "01-neutron-ovn-metadata-agent.conf",
        }],
        needs_cell: false,
        custom_name: "99-neutron-metadata-custom.conf",
        merged_name: "99-merged-neutron-metadata.conf",
        default_sources: &[
            (true, "neutron-ovn-metadata-agent-neutron-config", false),
            (true, "nova-metadata-neutron-config", false),
            (false, "neutron-metadata-extra-config", true),
        ],
        replaced_secret_suffix: None,
    },
    ServiceKind {
        name: "neutron-ovn",
        globs: &["*ovn.conf", "*metadata*conf"],
        templates: &[TemplateFile {
            template: "neutron-ovn/01-neutron-ovn.conf.j2",
            file: "01-neutron-ovn.conf",
        }],
        needs_cell: false,
        custom_name: "99-neutron-custom-ovn.conf",
        merged_name: "99-merged-neutron-ovn.conf",
        default_sources: &[
            (true, "neutron-ovn-agent-neutron-config", false),
            (true, "nova-metadata-neutron-config", true),
            (false, "neutron-ovn-extra-config", true),
        ],
        replaced_secret_suffix: None,
    },
    ServiceKind {
        name: "neutron-sriov",
        globs: &["*sriov*conf"],
        templates: &[TemplateFile {
            template: "neutron-sriov/01-neutron-sriov.conf.j2",
            file: "01-neutron-sriov.conf",
        }],
        needs_cell: false,
        custom_name: "99-neutron-sriov-custom.conf",
        merged_name: "99-merged-neutron-sriov.conf",
        default_sources: &[
            (true, "neutron-sriov-agent-neutron-config", false),
            (false, "neutron-sriov-extra-config", true),
        ],
        replaced_secret_suffix: None,
    },
    ServiceKind {
        name: "neutron-dhcp",
        globs: &["*dhcp*conf"],
        templates: &[TemplateFile {
            template: "neutron-dhcp/01-neutron-dhcp.conf.j2",
            file: "01-neutron-dhcp.conf",
        }],
        needs_cell: false,
        custom_name: "99-neutron-dhcp-custom.conf",
        merged_name: "99-merged-neutron-dhcp.conf",
        default_sources: &[
            (true, "neutron-dhcp-agent-neutron-config", false),
            (false, "neutron-dhcp-extra-config", true),
        ],
        replaced_secret_suffix: None,
    },
];

pub fn find(name: &str) -> Option<&'static ServiceKind> {
    SERVICES.iter().find(|s| s.name == name)
}

impl ServiceKind {
    pub fn matches(&self, file: &str) -> bool {
        self.globs.iter().any(|g| glob_match(g, file))
    }

    pub fn replaces_secret(&self, name: &str) -> bool {
        self.replaced_secret_suffix.is_some_and(|s| name.ends_with(s))
    }
}

/// The user's extra-config ConfigMap for a service, as upstream names it.
pub fn extra_config_map(kind: &ServiceKind) -> String {
    format!("{}-extra-config", kind.name)
}

/// The service's dataSources: its OpenStackDataPlaneService object's when the source has one,
/// else upstream's defaults.
pub fn data_sources(snap: &Snapshot, kind: &ServiceKind) -> Vec<DataSource> {
    if let Some(svc) = snap.services.iter().find(|s| s.id.name == kind.name) {
        return svc.body.data_sources.clone();
    }
    kind.default_sources
        .iter()
        .map(|(secret, name, optional)| {
            let r = LocalRef { name: name.to_string(), optional: Some(*optional) };
            if *secret {
                DataSource { secret_ref: Some(r), ..Default::default() }
            } else {
                DataSource { config_map_ref: Some(r), ..Default::default() }
            }
        })
        .collect()
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
        for s in SERVICES {
            for t in s.templates {
                assert!(s.matches(t.file), "{} {}", s.name, t.file);
                assert!(s.custom_name > t.file, "{}", s.name);
            }
            assert!(s.matches(s.custom_name) && s.matches(s.merged_name), "{}", s.name);
        }
    }
}
