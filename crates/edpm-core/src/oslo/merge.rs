//! Merges layered files into one whose effective values equal the layering's for every
//! option, single- or multi-valued, without knowing option types.
//!
//! Why it works: writing, for each (normalized group, key), every value of every layer in layer
//! order gives a multi-valued option exactly the layering's accumulation (oldest first), and a
//! single-valued option its last element, which is the last occurrence in the newest file that
//! has the key: the layering's single value. The differential tests check this against oslo.
//! Unlike kolla's merge_configs and crudini, this never drops a multi-valued default.

use std::borrow::Cow;

use super::layer::Layers;
use super::{ConfigFile, Entry, Section, normalize_group};

/// The merged file borrows its names and values from `layers`.
pub fn merge<'b>(layers: &'b Layers<'_>) -> ConfigFile<'b> {
    let mut sections: Vec<Section<'b>> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (group, key) in layers.options_iter() {
        let normal = normalize_group(group);
        let i = *index.entry(normal).or_insert_with(|| {
            // Keep the first spelling seen; oslo looks groups up normalized anyway.
            sections.push(Section { name: Cow::Borrowed(group), line: 0, entries: Vec::new() });
            sections.len() - 1
        });
        sections[i].entries.extend(layers.get_multi(group, key).map(|f| Entry {
            key: Cow::Borrowed(key),
            value: Cow::Borrowed(f.value),
            line: 0,
        }));
    }
    ConfigFile { sections, comments: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oslo::layer::Layer;
    use crate::oslo::parse;

    #[test]
    fn merged_values_equal_layered_values() {
        let texts = [
            "[DEFAULT]\nm = one\nm = two\nx = 1\n[Libvirt]\nt = q\n",
            "[DEFAULT]\nm = three\n[libvirt]\nt = rbd\n",
        ];
        let l = Layers::new(
            texts.iter().map(|t| Layer { file: "f".into(), config: parse(t).unwrap() }).collect(),
        );
        let merged = merge(&l);
        let m = Layers::new(vec![Layer { file: "m".into(), config: merged }]);
        for (g, k) in l.options() {
            assert_eq!(l.get(&g, &k).map(|f| f.value), m.get(&g, &k).map(|f| f.value));
            let a: Vec<_> = l.get_multi(&g, &k).map(|f| f.value).collect();
            let b: Vec<_> = m.get_multi(&g, &k).map(|f| f.value).collect();
            assert_eq!(a, b);
        }
    }
}
