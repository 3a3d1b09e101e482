//! Extra vars as Ansible reads them, for redaction: the values of secret-named variables a
//! play gets through `env/extravars` and the command line's `-e`/`--extra-vars`.

use serde_json::Value;

use super::shlex::shlex_split;

/// The values of secret-named extra vars a play gets besides `RUNNER_EXTRA_VARS` (whose
/// values [`prepare`](super::entrypoint::prepare) returns): `extravars`, the text of an `env/extravars` file, and the
/// command line's `-e`/`--extra-vars` (`key=value` words, YAML/JSON, or `@FILE`, whose text
/// `read_file` gives: the caller resolves the path as ansible-playbook does, and `None` when
/// it cannot be read). Text that does not read as Ansible reads it gives nothing: Ansible
/// would refuse it too.
pub fn extra_var_secrets(
    extravars: Option<&str>,
    cmdline: Option<&str>,
    read_file: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut found = Vec::new();
    let add = |text: &str, found: &mut Vec<String>| {
        if let Ok(v) = crate::yaml::ansible::<Value>(text) {
            crate::redact::secret_values(&v, found);
        }
    };
    if let Some(text) = extravars {
        add(text, &mut found);
    }
    let words = cmdline.and_then(|c| shlex_split(c).ok()).unwrap_or_default();
    let mut values = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "-e" || w == "--extra-vars" {
            values.extend(words.get(i).cloned());
            i += 1;
        } else if let Some(v) = w.strip_prefix("--extra-vars=") {
            values.push(v.to_string());
        } else if let Some(v) = w.strip_prefix("-e").filter(|v| !v.is_empty() && !w.starts_with("--")) {
            values.push(v.to_string());
        }
    }
    for v in values {
        let t = v.trim_start();
        if let Some(path) = t.strip_prefix('@') {
            // Ansible reads the file as YAML (JSON included): a variables file, often of secrets.
            if let Some(text) = read_file(path) {
                add(&text, &mut found);
            }
            continue;
        }
        if t.starts_with(['{', '[']) {
            add(t, &mut found);
            continue;
        }
        // Ansible's key=value form: quoted values keep their spaces.
        let mut m = serde_json::Map::new();
        for kv in shlex_split(&v).unwrap_or_default() {
            if let Some((k, val)) = kv.split_once('=') {
                m.insert(k.to_string(), Value::String(val.to_string()));
            }
        }
        crate::redact::secret_values(&Value::Object(m), &mut found);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_named_extra_vars_are_found_wherever_they_are_given() {
        let cmdline = "--tags a -e 'db_password=\"two words\" user=nova' -eapi_token=t0k3n --extra-vars='{\"x\": {\"secret\": 9}}' --extra-vars @/f -e '[1]'";
        let files =
            |p: &str| (p == "/f").then(|| "---\nvault_password: FromFile1\nregion: one\n".to_string());
        let found = extra_var_secrets(Some("---\nrabbit_pass: Zq7\nuser: nova\n"), Some(cmdline), &files);
        assert_eq!(found, ["Zq7", "two words", "t0k3n", "9", "FromFile1"]);
        assert!(extra_var_secrets(Some("[broken"), Some("'open"), &files).is_empty());
        // `-e@FILE` and `--extra-vars=@FILE` too; a file that cannot be read gives nothing.
        let found = extra_var_secrets(None, Some("-e@/f --extra-vars=@/f -e @/missing"), &files);
        assert_eq!(found, ["FromFile1", "FromFile1"]);
    }
}
