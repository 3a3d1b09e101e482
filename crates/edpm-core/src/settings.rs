//! Agent settings, resolved once from the command line, the environment and a config file.
//!
//! Pure: the caller passes the CLI values, an environment lookup function, and the config
//! file's text. Precedence: command line, then `EDPM_AGENT_*` environment variables, then the
//! config file (`--config` or `EDPM_AGENT_CONFIG`), then defaults. The environment and the file
//! exist because Ansible runs an inventory script with nothing but `--list`/`--host`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::environment::Env;
use serde::Deserialize;

use crate::snapshot::selector::{Selector, SelectorError};

use crate::snapshot::resource::Origin;

/// Where objects are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    Dir(PathBuf),
    Kube,
}

impl SourceSpec {
    fn parse(s: &str, base: Option<&Path>) -> SourceSpec {
        if s == "kube" {
            return SourceSpec::Kube;
        }
        let p = PathBuf::from(s);
        match base {
            Some(b) if p.is_relative() => SourceSpec::Dir(b.join(p)),
            _ => SourceSpec::Dir(p),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub sources: Vec<SourceSpec>,
    pub namespace: Option<String>,
    /// Parsed here, so a malformed selector is refused before any source is read.
    pub selector: Option<Selector>,
    /// An inventory with no hosts is an error unless this is set.
    pub allow_empty: bool,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub kube_timeout: Duration,
    pub ssh_key_dir: String,
    pub images: BTreeMap<String, String>,
    /// Readiness phase per service, where it differs from the catalogue's.
    pub service_phases: BTreeMap<String, crate::services::Phase>,
    /// Where each default image was set: its line in the config file, or its environment
    /// variable (for `explain`).
    pub image_origins: BTreeMap<String, Origin>,
}

/// Values given on the command line (already free of clap types).
#[derive(Debug, Clone, Default)]
pub struct CliValues {
    pub sources: Vec<String>,
    pub namespace: Option<String>,
    pub selector: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub ssh_key_dir: Option<String>,
    pub allow_empty: bool,
}

/// The config file (`EDPM_AGENT_CONFIG`), YAML.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct FileValues {
    /// `kube`, a directory, or a list of them.
    #[serde(default)]
    pub source: Option<OneOrMany>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub selector: Option<String>,
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    #[serde(default)]
    pub context: Option<String>,
    #[serde(default)]
    pub kube_timeout_seconds: Option<u64>,
    /// Accept an inventory with no hosts.
    #[serde(default)]
    pub allow_empty: Option<bool>,
    #[serde(default)]
    pub ssh_key_dir: Option<String>,
    #[serde(default)]
    pub images: BTreeMap<String, String>,
    /// The line each image is written on.
    #[serde(skip)]
    pub image_lines: BTreeMap<String, u64>,
    /// Readiness phase per service: `0`/`infrastructure` or `1`/`services`.
    #[serde(default)]
    pub service_phases: BTreeMap<String, PhaseValue>,
}

/// A phase as the config file writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseValue(pub crate::services::Phase);

impl<'de> Deserialize<'de> for PhaseValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use crate::services::Phase;
        let v = serde_json::Value::deserialize(d)?;
        match &v {
            serde_json::Value::Number(n) if n.as_i64() == Some(0) => Ok(PhaseValue(Phase::Infrastructure)),
            serde_json::Value::Number(n) if n.as_i64() == Some(1) => Ok(PhaseValue(Phase::Services)),
            serde_json::Value::String(s) if matches!(s.as_str(), "0" | "infrastructure") => {
                Ok(PhaseValue(Phase::Infrastructure))
            }
            serde_json::Value::String(s) if matches!(s.as_str(), "1" | "services") => {
                Ok(PhaseValue(Phase::Services))
            }
            _ => Err(serde::de::Error::custom(format!(
                "phase {v} is not one of 0 (infrastructure) or 1 (services); phase -1 is bare metal and has no services"
            ))),
        }
    }
}

/// `source:` as one string or a list of them.
#[derive(Debug, Clone)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

// By hand rather than `#[serde(untagged)]`, whose error ("did not match any variant of
// untagged enum OneOrMany") names our type instead of what to write.
impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wrong = || {
            serde::de::Error::custom(
                "expected a directory or `kube`, or a list of them (e.g. `source: [manifests, kube]`)",
            )
        };
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => Ok(OneOrMany::One(s)),
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => Ok(s),
                    _ => Err(wrong()),
                })
                .collect::<Result<_, _>>()
                .map(OneOrMany::Many),
            _ => Err(wrong()),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SettingsError {
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
    #[error("environment variable {name}={}: {message}", crate::excerpt::echo(value).debug())]
    Env { name: String, value: String, message: String },
    #[error("{origin}: {error}")]
    Selector { origin: String, error: SelectorError },
    #[error(
        "no source given: pass --source DIR (or --source kube), set EDPM_AGENT_SOURCE, or name a config file with source: in EDPM_AGENT_CONFIG"
    )]
    NoSource,
}

pub const DEFAULT_SSH_KEY_DIR: &str = "/runner/env/ssh_key";
pub const DEFAULT_KUBE_TIMEOUT: Duration = Duration::from_secs(15);
/// The Kubernetes timeouts accepted, in seconds.
pub const KUBE_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;
/// Prefix of environment variables that set default images, e.g.
/// `EDPM_AGENT_IMAGE_EDPM_NOVA_COMPUTE_IMAGE=...` sets `edpm_nova_compute_image`.
pub const IMAGE_ENV_PREFIX: &str = "EDPM_AGENT_IMAGE_";

/// Parses the config file text, with the manifests' YAML rules.
pub fn parse_file(path: &Path, text: &str) -> Result<FileValues, SettingsError> {
    let error = |line: u64, message: String| SettingsError::File {
        path: format!("{}:{line}", path.display()),
        message,
    };
    let docs = crate::yaml::documents(text).map_err(|e| error(e.line, e.message))?;
    let Some(node) = docs.first().filter(|n| !n.is_null()) else { return Ok(FileValues::default()) };
    if let Some(extra) = docs.get(1) {
        return Err(error(u64::from(extra.line), "a second document; the config file is one mapping".into()));
    }
    let mut values: FileValues = crate::yaml::decode(node)
        .map_err(|f| error(u64::from(f.line), format!("field {}: {}", f.path, f.message)))?;
    if let Some(crate::yaml::Data::Map(entries)) = node.get("images").map(|n| &n.data) {
        values.image_lines = entries.iter().map(|e| (e.key.to_string(), u64::from(e.line))).collect();
    }
    Ok(values)
}

/// Resolves the settings from the command line, the environment and `file`, the parsed
/// config file and its path.
#[allow(
    clippy::too_many_lines,
    reason = "each setting's precedence (flag, environment, file, default) side by side"
)]
pub fn resolve(
    cli: CliValues,
    env: &Env,
    file: Option<(PathBuf, FileValues)>,
) -> Result<Settings, SettingsError> {
    let (file_path, file) = match file {
        Some((p, f)) => (Some(p), f),
        None => (None, FileValues::default()),
    };
    let file_base = file_path.as_deref().and_then(Path::parent);
    let non_empty = |name: &str| env.string(name);

    let sources = if !cli.sources.is_empty() {
        cli.sources.iter().map(|s| SourceSpec::parse(s, None)).collect()
    } else if let Some(v) = non_empty("EDPM_AGENT_SOURCE") {
        v.split(':').filter(|s| !s.is_empty()).map(|s| SourceSpec::parse(s, None)).collect()
    } else {
        match &file.source {
            Some(OneOrMany::One(s)) => vec![SourceSpec::parse(s, file_base)],
            Some(OneOrMany::Many(v)) => v.iter().map(|s| SourceSpec::parse(s, file_base)).collect(),
            None => Vec::new(),
        }
    };
    if sources.is_empty() {
        return Err(SettingsError::NoSource);
    }
    // 0 would fail every request; hours would leave a hung API server hanging the command.
    let kube_timeout = match non_empty("EDPM_AGENT_KUBE_TIMEOUT") {
        Some(v) => Duration::from_secs(
            v.parse().ok().filter(|n| KUBE_TIMEOUT_RANGE.contains(n)).ok_or_else(|| SettingsError::Env {
                name: "EDPM_AGENT_KUBE_TIMEOUT".into(),
                value: v.clone(),
                message: format!(
                    "expected a whole number of seconds from {} to {}",
                    KUBE_TIMEOUT_RANGE.start(),
                    KUBE_TIMEOUT_RANGE.end()
                ),
            })?,
        ),
        None => match file.kube_timeout_seconds {
            Some(n) if !KUBE_TIMEOUT_RANGE.contains(&n) => {
                return Err(SettingsError::File {
                    path: file_path.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
                    message: format!(
                        "kube_timeout_seconds {n} is outside {}-{} seconds",
                        KUBE_TIMEOUT_RANGE.start(),
                        KUBE_TIMEOUT_RANGE.end()
                    ),
                });
            }
            Some(n) => Duration::from_secs(n),
            None => DEFAULT_KUBE_TIMEOUT,
        },
    };
    let mut images = file.images.clone();
    let mut image_origins: BTreeMap<String, Origin> = images
        .keys()
        .map(|k| {
            let path = file_path.as_deref().map(|p| p.display().to_string()).unwrap_or_default();
            (k.clone(), Origin::File { path, line: file.image_lines.get(k).copied().unwrap_or(0) })
        })
        .collect();
    for (k, v) in env.vars() {
        if let Some(var) = k.strip_prefix(IMAGE_ENV_PREFIX)
            && !var.is_empty()
            && !v.is_empty()
        {
            images.insert(var.to_lowercase(), v.clone());
            image_origins.insert(var.to_lowercase(), Origin::Environment { variable: k.clone() });
        }
    }
    // Where the selector came from, for the error that names it.
    let selector = match (cli.selector, non_empty("EDPM_AGENT_SELECTOR"), file.selector) {
        (Some(s), _, _) => Some(("--selector".to_string(), s)),
        (None, Some(s), _) => Some(("EDPM_AGENT_SELECTOR".to_string(), s)),
        (None, None, Some(s)) => {
            let path = file_path.as_deref().map(|p| p.display().to_string()).unwrap_or_default();
            Some((format!("config file {path}: selector"), s))
        }
        (None, None, None) => None,
    };
    let selector = match selector {
        Some((origin, text)) => {
            Some(Selector::parse(&text).map_err(|error| SettingsError::Selector { origin, error })?)
        }
        None => None,
    };
    let allow_empty = match non_empty("EDPM_AGENT_ALLOW_EMPTY") {
        _ if cli.allow_empty => true,
        Some(v) => match v.as_str() {
            "1" | "true" | "yes" => true,
            "0" | "false" | "no" => false,
            _ => {
                return Err(SettingsError::Env {
                    name: "EDPM_AGENT_ALLOW_EMPTY".into(),
                    value: v.clone(),
                    message: "expected true or false (or 1 or 0)".into(),
                });
            }
        },
        None => file.allow_empty.unwrap_or(false),
    };
    Ok(Settings {
        sources,
        namespace: cli.namespace.or_else(|| non_empty("EDPM_AGENT_NAMESPACE")).or(file.namespace),
        selector,
        allow_empty,
        kubeconfig: cli
            .kubeconfig
            .or_else(|| non_empty("EDPM_AGENT_KUBECONFIG").map(PathBuf::from))
            .or_else(|| file.kubeconfig.map(|k| file_base.map_or(k.clone(), |b| b.join(&k)))),
        context: cli.context.or_else(|| non_empty("EDPM_AGENT_CONTEXT")).or(file.context),
        kube_timeout,
        ssh_key_dir: cli
            .ssh_key_dir
            .or_else(|| non_empty("EDPM_AGENT_SSH_KEY_DIR"))
            .or(file.ssh_key_dir)
            .unwrap_or_else(|| DEFAULT_SSH_KEY_DIR.into()),
        images,
        service_phases: file.service_phases.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        image_origins,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> Env {
        Env::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn cli_beats_env_beats_file() {
        let file = parse_file(
            Path::new("/etc/edpm/agent.yaml"),
            "source: [manifests, kube]\nnamespace: fromfile\nssh_key_dir: /f\n",
        )
        .unwrap();
        let env = env_of(&[("EDPM_AGENT_NAMESPACE", "fromenv")]);
        let s =
            resolve(CliValues::default(), &env, Some(("/etc/edpm/agent.yaml".into(), file.clone()))).unwrap();
        assert_eq!(s.sources, [SourceSpec::Dir("/etc/edpm/manifests".into()), SourceSpec::Kube]);
        assert_eq!(s.namespace.as_deref(), Some("fromenv"));
        assert_eq!(s.ssh_key_dir, "/f");
        let cli =
            CliValues { sources: vec!["d".into()], namespace: Some("fromcli".into()), ..Default::default() };
        let s = resolve(cli, &env, Some(("/x/a.yaml".into(), file))).unwrap();
        assert_eq!((s.sources, s.namespace.as_deref()), (vec![SourceSpec::Dir("d".into())], Some("fromcli")));
    }

    #[test]
    fn env_source_is_a_path_list() {
        let env = env_of(&[("EDPM_AGENT_SOURCE", "a:b::kube")]);
        let s = resolve(CliValues::default(), &env, None).unwrap();
        assert_eq!(s.sources, [SourceSpec::Dir("a".into()), SourceSpec::Dir("b".into()), SourceSpec::Kube]);
        assert_eq!(s.ssh_key_dir, DEFAULT_SSH_KEY_DIR);
    }

    #[test]
    fn no_source_is_an_error_that_says_how_to_fix_it() {
        let err = resolve(CliValues::default(), &env_of(&[]), None).unwrap_err().to_string();
        assert!(err.contains("EDPM_AGENT_SOURCE") && err.contains("--source"), "{err}");
    }

    #[test]
    fn images_from_env_prefix() {
        let env = env_of(&[
            ("EDPM_AGENT_SOURCE", "d"),
            ("EDPM_AGENT_IMAGE_EDPM_NOVA_COMPUTE_IMAGE", "quay.io/x/nova:1"),
        ]);
        let s = resolve(CliValues::default(), &env, None).unwrap();
        assert_eq!(s.images["edpm_nova_compute_image"], "quay.io/x/nova:1");
        assert_eq!(
            s.image_origins["edpm_nova_compute_image"].to_string(),
            "environment variable EDPM_AGENT_IMAGE_EDPM_NOVA_COMPUTE_IMAGE"
        );
    }

    #[test]
    fn image_origins_name_their_line() {
        let path = Path::new("/etc/edpm/agent.yaml");
        let file = parse_file(path, "source: d\nimages:\n  # nova\n  edpm_nova_compute_image: quay.io/n:1\n  edpm_ovn_controller_agent_image: quay.io/o:1\n").unwrap();
        let env = env_of(&[("EDPM_AGENT_IMAGE_EDPM_OVN_CONTROLLER_AGENT_IMAGE", "quay.io/o:2")]);
        let s = resolve(CliValues::default(), &env, Some((path.into(), file))).unwrap();
        assert_eq!(s.image_origins["edpm_nova_compute_image"].to_string(), "/etc/edpm/agent.yaml:4");
        assert!(
            s.image_origins["edpm_ovn_controller_agent_image"]
                .to_string()
                .starts_with("environment variable")
        );
    }

    #[test]
    fn config_file_errors_name_the_line() {
        let err = parse_file(Path::new("c.yaml"), "source: d\nkube_timeout_seconds: soon\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("config file c.yaml:2: field kube_timeout_seconds"), "{err}");
        let err = parse_file(Path::new("c.yaml"), "source: [d\n").unwrap_err().to_string();
        assert!(err.starts_with("config file c.yaml:"), "{err}");
    }

    #[test]
    fn service_phases_from_the_file() {
        use crate::services::Phase;
        let f = parse_file(
            Path::new("c.yaml"),
            "source: d\nservice_phases:\n  my-firewall: 0\n  ceph-client: infrastructure\n  custom: services\n",
        )
        .unwrap();
        let s = resolve(CliValues::default(), &env_of(&[]), Some(("c.yaml".into(), f))).unwrap();
        assert_eq!(s.service_phases["my-firewall"], Phase::Infrastructure);
        assert_eq!(s.service_phases["ceph-client"], Phase::Infrastructure);
        assert_eq!(s.service_phases["custom"], Phase::Services);
        let err = parse_file(Path::new("c.yaml"), "service_phases:\n  x: -1\n").unwrap_err().to_string();
        assert!(err.contains("phase -1 is bare metal"), "{err}");
    }

    #[test]
    fn unknown_config_keys_are_rejected() {
        let err = parse_file(Path::new("c.yaml"), "sauce: kube\n").unwrap_err().to_string();
        assert!(err.starts_with("config file c.yaml:") && err.contains("sauce"), "{err}");
    }

    #[test]
    fn bad_timeout_names_the_variable() {
        let env = env_of(&[("EDPM_AGENT_SOURCE", "d"), ("EDPM_AGENT_KUBE_TIMEOUT", "soon")]);
        let err = resolve(CliValues::default(), &env, None).unwrap_err().to_string();
        assert!(err.contains("EDPM_AGENT_KUBE_TIMEOUT"), "{err}");
    }
}
