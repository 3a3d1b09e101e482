//! oslo's layering of parsed files (`cfg._Namespace._get_file_value`, oslo-ansible-crates.md
//! §1.2): files in command-line order, each `--config-dir` read as its sorted `*.conf` files;
//! a single-valued option takes the last occurrence in the newest file that has it; a
//! multi-valued option takes every occurrence of every file, oldest file first. Groups are
//! compared normalized ([`normalize_group`]); keys exactly.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// Layers, oldest first (the order files were given), with an index from (normalized group,
/// key) to every occurrence in layer order, so each lookup is a hash probe that allocates
/// nothing.
#[derive(Debug, Clone, Default)]
pub struct Layers {
    pub layers: Vec<Layer>,
    /// group → key → (layer, section, entry) positions, oldest first.
    index: Index,
    /// Options in first-seen order, as positions of their first occurrence.
    order: Vec<Pos>,
}

impl Layers {
    pub fn new(layers: Vec<Layer>) -> Self {
        let mut index = Index::default();
        let mut order = Vec::new();
        for (li, l) in layers.iter().enumerate() {
            for (si, s) in l.config.sections.iter().enumerate() {
                let g = normalize_group_cow(&s.name);
                let keys = match index.get_mut(g.as_ref()) {
                    Some(k) => k,
                    None => index.entry(g.into_owned()).or_default(),
                };
                for (ei, e) in s.entries.iter().enumerate() {
                    let pos: Pos = (li as u32, si as u32, ei as u32);
                    match keys.get_mut(e.key.as_str()) {
                        Some(v) => v.rest.push(pos),
                        None => {
                            keys.insert(e.key.clone(), Positions { first: pos, rest: Vec::new() });
                            order.push(pos);
                        }
                    }
                }
            }
        }
        Layers { layers, index, order }
    }

    fn found(&self, (li, si, ei): Pos) -> Found<'_> {
        let layer = &self.layers[li as usize];
        let section = &layer.config.sections[si as usize];
        let e = &section.entries[ei as usize];
        Found { value: &e.value, file: &layer.file, line: e.line, section: &section.name }
    }

    fn positions(&self, group: &str, key: &str) -> Option<&Positions> {
        self.index.get(normalize_group_cow(group).as_ref()).and_then(|k| k.get(key))
    }

    /// The value of a single-valued option: the newest file containing the key wins, and within
    /// it the last occurrence. With occurrences kept in layer order, that is the last one.
    pub fn get(&self, group: &str, key: &str) -> Option<Found<'_>> {
        self.positions(group, key).map(|p| self.found(p.last()))
    }

    /// The values of a multi-valued option: all occurrences, oldest file first.
    pub fn get_multi(&self, group: &str, key: &str) -> Vec<Found<'_>> {
        self.positions(group, key).map_or_else(Vec::new, |p| p.iter().map(|pos| self.found(pos)).collect())
    }

    /// Every (normalized group, key) set anywhere, in first-seen order.
    pub fn options(&self) -> Vec<(String, String)> {
        self.options_iter().map(|(g, k)| (normalize_group(g), k.to_string())).collect()
    }

    /// Like [`Layers::options`], borrowing: (group as first written, key).
    pub fn options_iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.order.iter().map(|p| {
            let f = self.found(*p);
            let key = &self.layers[p.0 as usize].config.sections[p.1 as usize].entries[p.2 as usize].key;
            (f.section, key.as_str())
        })
    }
}

/// FNV-1a: option names are short and not attacker-controlled, and SipHash was the largest
/// single cost of layering (BENCHMARKS.md).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
        self.0 = h;
    }
}

type FastMap<V> = HashMap<String, V, BuildHasherDefault<Fnv>>;
type Pos = (u32, u32, u32);
type Index = FastMap<FastMap<Positions>>;

/// An option's occurrences. Most options are set once, so the first one is kept inline and
/// only repeats allocate.
#[derive(Debug, Clone)]
struct Positions {
    first: Pos,
    rest: Vec<Pos>,
}

impl Positions {
    fn last(&self) -> Pos {
        *self.rest.last().unwrap_or(&self.first)
    }

    fn iter(&self) -> impl Iterator<Item = Pos> + '_ {
        std::iter::once(self.first).chain(self.rest.iter().copied())
    }
}

/// [`normalize_group`] without allocating when the name is already normal.
fn normalize_group_cow(name: &str) -> std::borrow::Cow<'_, str> {
    let normal = if name.is_ascii() {
        !name.bytes().any(|b| b.is_ascii_uppercase())
    } else {
        !name.chars().any(char::is_uppercase)
    };
    if name == "DEFAULT" || normal {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(name.to_lowercase())
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
