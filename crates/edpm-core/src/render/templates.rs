//! Template sources: embedded in the binary, or read from a directory by the shell and handed
//! in as text (same relative paths), so rendering stays pure.

use std::collections::BTreeMap;

use minijinja::{Environment, UndefinedBehavior, Value};

/// The templates shipped in `templates/`.
pub const EMBEDDED: &[(&str, &str)] = &[
    ("nova/01-nova.conf.j2", include_str!("../../../../templates/nova/01-nova.conf.j2")),
    (
        "nova/02-nova-host-specific.conf.j2",
        include_str!("../../../../templates/nova/02-nova-host-specific.conf.j2"),
    ),
    (
        "neutron-metadata/01-neutron-ovn-metadata-agent.conf.j2",
        include_str!("../../../../templates/neutron-metadata/01-neutron-ovn-metadata-agent.conf.j2"),
    ),
    (
        "neutron-ovn/01-neutron-ovn.conf.j2",
        include_str!("../../../../templates/neutron-ovn/01-neutron-ovn.conf.j2"),
    ),
    (
        "neutron-sriov/01-neutron-sriov.conf.j2",
        include_str!("../../../../templates/neutron-sriov/01-neutron-sriov.conf.j2"),
    ),
    (
        "neutron-dhcp/01-neutron-dhcp.conf.j2",
        include_str!("../../../../templates/neutron-dhcp/01-neutron-dhcp.conf.j2"),
    ),
];

pub struct Templates {
    env: Environment<'static>,
    /// Where each template came from, for messages.
    origin: BTreeMap<String, String>,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("template {name} ({origin}): {message}")]
pub struct TemplateError {
    pub name: String,
    pub origin: String,
    pub message: String,
}

impl Templates {
    /// The embedded templates, each replaced by `overrides` (name → text) when given there.
    pub fn new(overrides: BTreeMap<String, (String, String)>) -> Result<Templates, TemplateError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .expect("valid syntax"),
        );
        env.add_filter("bool", ansible_bool);
        let mut origin = BTreeMap::new();
        for (name, text) in EMBEDDED {
            let (text, from) = match overrides.get(*name) {
                Some((t, from)) => (t.clone(), from.clone()),
                None => (text.to_string(), "embedded".to_string()),
            };
            env.add_template_owned(name.to_string(), text).map_err(|e| TemplateError {
                name: name.to_string(),
                origin: from.clone(),
                message: describe(&e),
            })?;
            origin.insert(name.to_string(), from);
        }
        Ok(Templates { env, origin })
    }

    pub fn embedded() -> Templates {
        Templates::new(BTreeMap::new()).expect("embedded templates compile (tested)")
    }

    pub fn render(&self, name: &str, context: &serde_json::Value) -> Result<String, String> {
        let t = self.env.get_template(name).map_err(|e| describe(&e))?;
        t.render(Value::from(minijinja::value::Serde(context))).map_err(|e| {
            let from = self.origin.get(name).map_or("", String::as_str);
            format!("{} ({from})", describe(&e))
        })
    }
}

/// One line: the error and its line, plus the undefined name when that is the cause.
fn describe(e: &minijinja::Error) -> String {
    let mut s = e.detail().map_or_else(|| e.kind().to_string(), |d| format!("{}: {d}", e.kind()));
    if let Some(line) = e.line() {
        s = format!("line {line}: {s}");
    }
    s
}

/// Ansible's `bool` filter.
fn ansible_bool(v: Value) -> bool {
    match v.as_str() {
        Some(s) => matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "yes" | "on" | "1" | "y"),
        None => v.is_true(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_templates_compile() {
        let _ = Templates::embedded();
    }

    #[test]
    fn strict_undefined_names_the_variable() {
        let t = Templates::embedded();
        let err =
            t.render("nova/02-nova-host-specific.conf.j2", &serde_json::json!({"vars": {}})).unwrap_err();
        assert!(err.contains("line") && err.contains("undefined"), "{err}");
    }

    #[test]
    fn host_specific_matches_edpm_ansible() {
        let t = Templates::embedded();
        let out = t
            .render(
                "nova/02-nova-host-specific.conf.j2",
                &serde_json::json!({"vars": {"ctlplane_ip": "192.0.2.5", "canonical_hostname": "c0.example.com", "edpm_tls_certs_enabled": true}}),
            )
            .unwrap();
        let out = crate::render::normalize_sections(&out);
        assert_eq!(
            out,
            "[DEFAULT]\nmy_ip = 192.0.2.5\nhost = c0.example.com\n\n[libvirt]\nlive_migration_with_native_tls = True\nlive_migration_uri = qemu+tls://%s/system\n"
        );
    }
}
