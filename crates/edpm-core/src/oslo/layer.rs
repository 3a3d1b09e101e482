//! oslo's layering of parsed files (`cfg._Namespace._get_file_value`, oslo-ansible-crates.md
//! §1.2): files in command-line order, each `--config-dir` read as its sorted `*.conf` files;
//! a single-valued option takes the last occurrence in the newest file that has it; a
//! multi-valued option takes every occurrence of every file, oldest file first. Groups are
//! compared normalized ([`normalize_group`]); keys exactly.

use std::borrow::Cow;

use hashbrown::HashTable;

use super::{ConfigFile, normalize_group};

/// One parsed file and the name to report it by.
#[derive(Debug, Clone)]
pub struct Layer<'a> {
    pub file: String,
    pub config: ConfigFile<'a>,
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
/// key) to every occurrence in layer order, so each lookup is one hash probe that allocates
/// nothing.
///
/// The index is three flat vectors and a table of option numbers: building it allocates a
/// handful of times however many options there are (a map of maps with a vector per option
/// was most of the cost of layering 1,000 nodes' files; BENCHMARKS.md).
#[derive(Debug, Clone, Default)]
pub struct Layers<'a> {
    pub layers: Vec<Layer<'a>>,
    /// Normalized group names; an option's `group` indexes this.
    groups: Vec<Cow<'a, str>>,
    /// Options in first-seen order.
    options: Vec<Opt<'a>>,
    /// Every occurrence, chained per option in layer order.
    occurrences: Vec<Occurrence>,
    /// Option numbers, hashed by (normalized group, key).
    table: HashTable<u32>,
}

/// (layer, section, entry).
type Pos = (u32, u32, u32);

#[derive(Debug, Clone)]
struct Opt<'a> {
    hash: u64,
    group: u32,
    /// The key as its first occurrence spells it: a free copy for parsed files, whose keys
    /// borrow from the text, and one that spares lookups a walk to the entry.
    key: Cow<'a, str>,
    /// The first and last occurrences (indexes into `occurrences`).
    first: u32,
    last: u32,
}

#[derive(Debug, Clone, Copy)]
struct Occurrence {
    pos: Pos,
    /// The next occurrence of the same option, or `NONE`.
    next: u32,
}

const NONE: u32 = u32::MAX;

impl<'a> Layers<'a> {
    pub fn new(layers: Vec<Layer<'a>>) -> Self {
        let total: usize = layers.iter().flat_map(|l| &l.config.sections).map(|s| s.entries.len()).sum();
        let mut groups: Vec<Cow<'a, str>> = Vec::new();
        let mut options: Vec<Opt<'a>> = Vec::with_capacity(total);
        let mut occurrences: Vec<Occurrence> = Vec::with_capacity(total);
        let mut table: HashTable<u32> = HashTable::with_capacity(total);
        // Group numbers by name: files usually have a handful of sections, but a generated one
        // with thousands must not make building quadratic.
        let mut group_table: HashTable<(u64, u32)> = HashTable::new();
        for (li, l) in layers.iter().enumerate() {
            for (si, s) in l.config.sections.iter().enumerate() {
                let normal = normalize_group_cow(&s.name);
                let seed = hash_group(&normal);
                let group = match group_table.find(seed, |&(_, g)| groups[g as usize] == normal) {
                    Some(&(_, g)) => g,
                    None => {
                        let g = groups.len() as u32;
                        groups.push(match normal {
                            Cow::Borrowed(_) => s.name.clone(),
                            Cow::Owned(n) => Cow::Owned(n),
                        });
                        group_table.insert_unique(seed, (seed, g), |&(h, _)| h);
                        g
                    }
                };
                for (ei, e) in s.entries.iter().enumerate() {
                    let occ = occurrences.len() as u32;
                    occurrences.push(Occurrence { pos: (li as u32, si as u32, ei as u32), next: NONE });
                    let hash = hash_key(seed, &e.key);
                    let same = |&o: &u32| {
                        let o = &options[o as usize];
                        o.hash == hash && o.group == group && o.key == e.key
                    };
                    match table.find(hash, same) {
                        Some(&o) => {
                            let o = &mut options[o as usize];
                            occurrences[o.last as usize].next = occ;
                            o.last = occ;
                        }
                        None => {
                            let o = options.len() as u32;
                            options.push(Opt { hash, group, key: e.key.clone(), first: occ, last: occ });
                            table.insert_unique(hash, o, |&o| options[o as usize].hash);
                        }
                    }
                }
            }
        }
        Layers { layers, groups, options, occurrences, table }
    }

    fn found(&self, (li, si, ei): Pos) -> Found<'_> {
        let layer = &self.layers[li as usize];
        let section = &layer.config.sections[si as usize];
        let e = &section.entries[ei as usize];
        Found { value: &e.value, file: &layer.file, line: e.line, section: &section.name }
    }

    fn option(&self, group: &str, key: &str) -> Option<&Opt<'a>> {
        let group = normalize_group_cow(group);
        let hash = hash_key(hash_group(&group), key);
        let o = self.table.find(hash, |&o| {
            let o = &self.options[o as usize];
            o.hash == hash && self.groups[o.group as usize] == group && o.key == key
        })?;
        Some(&self.options[*o as usize])
    }

    /// The value of a single-valued option: the newest file containing the key wins, and within
    /// it the last occurrence. With occurrences kept in layer order, that is the last one.
    pub fn get(&self, group: &str, key: &str) -> Option<Found<'_>> {
        self.option(group, key).map(|o| self.found(self.occurrences[o.last as usize].pos))
    }

    /// The values of a multi-valued option: all occurrences, oldest file first (none when the
    /// option is not set). An iterator, so that looking a value up allocates nothing.
    pub fn get_multi(&self, group: &str, key: &str) -> Multi<'_, 'a> {
        Multi { layers: self, next: self.option(group, key).map_or(NONE, |o| o.first) }
    }

    /// Every (normalized group, key) set anywhere, in first-seen order.
    pub fn options(&self) -> Vec<(String, String)> {
        self.options_iter().map(|(g, k)| (normalize_group(g), k.to_string())).collect()
    }

    /// Like [`Layers::options`], borrowing: (group as first written, key).
    pub fn options_iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.options.iter().map(|o| {
            let pos = self.occurrences[o.first as usize].pos;
            (self.found(pos).section, key_at(&self.layers, pos))
        })
    }
}

/// The occurrences of one option, oldest first: [`Layers::get_multi`].
#[derive(Debug, Clone)]
pub struct Multi<'l, 'a> {
    layers: &'l Layers<'a>,
    next: u32,
}

impl<'l> Iterator for Multi<'l, '_> {
    type Item = Found<'l>;

    fn next(&mut self) -> Option<Found<'l>> {
        if self.next == NONE {
            return None;
        }
        let occ = self.layers.occurrences[self.next as usize];
        self.next = occ.next;
        Some(self.layers.found(occ.pos))
    }
}

fn key_at<'l>(layers: &'l [Layer<'_>], (li, si, ei): Pos) -> &'l str {
    &layers[li as usize].config.sections[si as usize].entries[ei as usize].key
}

/// Calls `f` with the bytes of `b` as little-endian words that together cover every byte,
/// with no per-byte loop: whole 8-byte words, then the last 8 bytes again (overlapping) or, for
/// short strings, two overlapping 4-byte or three single-byte reads.
#[inline(always)]
fn for_each_word(b: &[u8], mut f: impl FnMut(u64)) {
    #[inline(always)]
    fn word(b: &[u8]) -> u64 {
        u64::from_le_bytes(b[..8].try_into().unwrap_or_default())
    }
    #[inline(always)]
    fn half(b: &[u8]) -> u64 {
        u64::from(u32::from_le_bytes(b[..4].try_into().unwrap_or_default()))
    }
    let n = b.len();
    if n >= 8 {
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            f(word(c));
        }
        if !chunks.remainder().is_empty() {
            f(word(&b[n - 8..]));
        }
    } else if n >= 4 {
        f(half(b) | (half(&b[n - 4..]) << 32));
    } else if n > 0 {
        f(u64::from(b[0]) | (u64::from(b[n / 2]) << 8) | (u64::from(b[n - 1]) << 16));
    }
}

/// Option names are short and not attacker-controlled (they come from the operator's own
/// files), so a fast multiplicative hash over words does; SipHash was the largest single cost
/// of layering. The length separates strings the overlapping reads would otherwise confuse.
fn hash_bytes(h: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = (h.rotate_left(5) ^ bytes.len() as u64).wrapping_mul(K);
    for_each_word(bytes, |w| h = (h.rotate_left(5) ^ w).wrapping_mul(K));
    h
}

fn hash_group(normal: &str) -> u64 {
    hash_bytes(0, normal.as_bytes())
}

/// The splitmix finish spreads the bits hashbrown reads from the top.
fn hash_key(group_hash: u64, key: &str) -> u64 {
    let mut h = hash_bytes(group_hash, key.as_bytes());
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Whether `name` is ASCII with no upper-case letter, a word at a time: for ASCII bytes,
/// adding 0x80-'A' sets the high bit exactly when the byte is >= 'A', and adding 0x80-'Z'-1
/// exactly when it is > 'Z', with no carry into the next byte.
fn is_ascii_lower(name: &str) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut ok = true;
    for_each_word(name.as_bytes(), |w| {
        let from_a = w.wrapping_add(ONES * u64::from(0x80 - b'A'));
        let past_z = w.wrapping_add(ONES * u64::from(0x80 - b'Z' - 1));
        ok &= w & HIGH == 0 && from_a & !past_z & HIGH == 0;
    });
    ok
}

/// [`normalize_group`] without allocating when the name is already normal.
fn normalize_group_cow(name: &str) -> Cow<'_, str> {
    // ASCII lower-case names (nearly all) in a few word tests; anything else takes Unicode's
    // rules in full: titlecase letters such as 'ǅ' are not upper-case yet lower-case to
    // another letter, so only a comparison with the lowered name tells.
    if is_ascii_lower(name) || name == "DEFAULT" {
        return Cow::Borrowed(name);
    }
    let lower = name.to_lowercase();
    if lower == name { Cow::Borrowed(name) } else { Cow::Owned(lower) }
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

    fn layers<'a>(files: &[&'a str]) -> Layers<'a> {
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
        let all: Vec<_> = l.get_multi("s", "m").map(|f| f.value).collect();
        assert_eq!(all, ["one", "two", "three"]);
    }

    #[test]
    fn many_groups_each_find_their_own_options() {
        let text: String = (0..3000).map(|i| format!("[G{i}]\nk = {i}\n[g{i}]\nk = again-{i}\n")).collect();
        let l = layers(&[&text]);
        assert_eq!(l.options().len(), 3000);
        for i in (0..3000).step_by(7) {
            let multi: Vec<_> = l.get_multi(&format!("g{i}"), "k").map(|f| f.value).collect();
            assert_eq!(multi, [i.to_string(), format!("again-{i}")]);
        }
    }

    #[test]
    fn titlecase_groups_merge_as_in_python() {
        // Python: 'ǅ'.lower() == 'ǆ', though 'ǅ' is not upper-case.
        let l = layers(&["[ǅ]\na = 1\n", "[ǆ]\na = 2\n"]);
        assert_eq!(l.get_multi("ǆ", "a").map(|f| f.value).collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(l.get("ǅ", "a").unwrap().value, "2");
        assert_eq!(l.options().len(), 1);
        for name in ["ǅ", "ǆ", "Ǆ", "ΣΑΣ", "İx", "DEFAULT", "default", "Libvirt", "é"] {
            assert_eq!(normalize_group_cow(name), normalize_group(name), "{name}");
        }
    }

    #[test]
    fn default_is_not_lowercase_default_and_keys_are_exact() {
        let l = layers(&["[default]\na = 1\n[DEFAULT]\nA = 2\n"]);
        assert!(l.get("DEFAULT", "a").is_none());
        assert_eq!(l.get("default", "a").unwrap().value, "1");
        assert_eq!(l.get("DEFAULT", "A").unwrap().value, "2");
    }

    proptest::proptest! {
        #[test]
        fn word_tests_equal_byte_tests(s in "[a-zA-Z_@\\[\\]`{é0-9]{0,20}") {
            let lower = s.is_ascii() && !s.bytes().any(|b| b.is_ascii_uppercase());
            proptest::prop_assert_eq!(is_ascii_lower(&s), lower);
            let mut seen = vec![false; s.len()];
            // Every byte is part of some word read (coverage), so equal hashes need equal bytes
            // only up to collisions.
            let covered = |b: &[u8]| {
                let mut words = Vec::new();
                for_each_word(b, |w| words.push(w));
                words
            };
            let words = covered(s.as_bytes());
            for (i, byte) in s.bytes().enumerate() {
                seen[i] = words.iter().any(|w| w.to_le_bytes().contains(&byte));
            }
            proptest::prop_assert!(seen.iter().all(|&x| x));
        }

        #[test]
        fn lookups_find_exactly_what_was_set(keys in proptest::collection::vec("[a-zA-Z_]{1,20}", 1..30)) {
            let text: String = keys.iter().map(|k| format!("[Grp]\n{k} = v-{k}\n")).collect();
            let l = layers(&[&text]);
            for k in &keys {
                proptest::prop_assert_eq!(l.get("grp", k).map(|f| f.value.to_string()), Some(format!("v-{k}")));
                let upper = k.to_uppercase();
                if !keys.contains(&upper) {
                    proptest::prop_assert!(l.get("grp", &upper).is_none());
                }
            }
        }
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
