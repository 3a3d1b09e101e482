//! oslo's layering of parsed files (`cfg._Namespace._get_file_value`, oslo-ansible-crates.md
//! §1.2): files in command-line order, each `--config-dir` read as its sorted `*.conf` files;
//! a single-valued option takes the last occurrence in the newest file that has it; a
//! multi-valued option takes every occurrence of every file, oldest file first. Groups are
//! compared normalized ([`normalize_group`]); keys exactly.

use super::{ConfigFile, normalize_group};

/// One parsed file and the name to report it by.
#[derive(Debug, Clone)]
pub struct Layer {
    pub file: String,
    pub config: ConfigFile,
}

/// Where a value was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found<'a> {
    pub value: &'a str,
    pub file: &'a str,
    pub line: usize,
    /// The section name as written.
    pub section: &'a str,
}

/// Layers, oldest first (the order files were given).
#[derive(Debug, Clone, Default)]
pub struct Layers {
    pub layers: Vec<Layer>,
}

impl Layers {
    pub fn new(layers: Vec<Layer>) -> Self {
        Layers { layers }
    }

    fn in_layer<'a>(layer: &'a Layer, group: &str, key: &str) -> impl Iterator<Item = Found<'a>> {
        let group = group.to_string();
        let key = key.to_string();
        layer.config.sections.iter().filter(move |s| normalize_group(&s.name) == group).flat_map(move |s| {
            let key = key.clone();
            s.entries.iter().filter(move |e| e.key == key).map(move |e| Found {
                value: &e.value,
                file: &layer.file,
                line: e.line,
                section: &s.name,
            })
        })
    }

    /// The value of a single-valued option: the newest file containing the key wins, and within
    /// it the last occurrence.
    pub fn get(&self, group: &str, key: &str) -> Option<Found<'_>> {
        let group = normalize_group(group);
        self.layers.iter().rev().find_map(|l| Self::in_layer(l, &group, key).last())
    }

    /// The values of a multi-valued option: all occurrences, oldest file first.
    pub fn get_multi(&self, group: &str, key: &str) -> Vec<Found<'_>> {
        let group = normalize_group(group);
        self.layers.iter().flat_map(|l| Self::in_layer(l, &group, key)).collect()
    }

    /// Every (normalized group, key) set anywhere, in first-seen order.
    pub fn options(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for l in &self.layers {
            for s in &l.config.sections {
                let g = normalize_group(&s.name);
                for e in &s.entries {
                    if seen.insert((g.clone(), e.key.clone())) {
                        out.push((g.clone(), e.key.clone()));
                    }
                }
            }
        }
        out
    }
}

/// The files a `--config-dir` contributes, given the names in it: `*.conf`, no dot-files,
/// sorted by code point (Python's `sorted(glob(dir/*.conf))`).
pub fn config_dir_files(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> =
        names.iter().filter(|n| n.ends_with(".conf") && !n.starts_with('.')).cloned().collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oslo::parse;

    fn layers(files: &[&str]) -> Layers {
        Layers::new(
            files
                .iter()
                .enumerate()
                .map(|(i, t)| Layer { file: format!("f{i}"), config: parse(t).unwrap() })
                .collect(),
        )
    }

    #[test]
    fn reference_config_dir_example() {
        let l = layers(&[
            "[DEFAULT]\ndebug=true\n[libvirt]\nimages_type=qcow2\n",
            "[DEFAULT]\nmy_ip=10.0.0.5\n",
            "[libvirt]\nimages_type=rbd\n",
            "[DEFAULT]\ndebug=false\n",
        ]);
        assert_eq!(l.get("DEFAULT", "debug").unwrap().value, "false");
        assert_eq!(l.get("DEFAULT", "my_ip").unwrap().value, "10.0.0.5");
        let it = l.get("Libvirt", "images_type").unwrap();
        assert_eq!((it.value, it.file, it.line), ("rbd", "f2", 2));
    }

    #[test]
    fn single_takes_last_in_newest_multi_accumulates() {
        let l = layers(&["[s]\nm = one\nm = two\n", "[S]\nm = three\n", "[t]\nm = x\n"]);
        assert_eq!(l.get("s", "m").unwrap().value, "three");
        let all: Vec<_> = l.get_multi("s", "m").iter().map(|f| f.value).collect();
        assert_eq!(all, ["one", "two", "three"]);
    }

    #[test]
    fn default_is_not_lowercase_default_and_keys_are_exact() {
        let l = layers(&["[default]\na = 1\n[DEFAULT]\nA = 2\n"]);
        assert!(l.get("DEFAULT", "a").is_none());
        assert_eq!(l.get("default", "a").unwrap().value, "1");
        assert_eq!(l.get("DEFAULT", "A").unwrap().value, "2");
    }

    #[test]
    fn config_dir_selection() {
        let names: Vec<String> = [
            "25-nova-extra.conf",
            "01-nova.conf",
            ".hidden.conf",
            "99-override.txt",
            "Z.conf",
            "nova-blank.conf",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            config_dir_files(&names),
            ["01-nova.conf", "25-nova-extra.conf", "Z.conf", "nova-blank.conf"]
        );
    }
}
