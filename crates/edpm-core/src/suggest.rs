//! "Did you mean": the one edit distance, and the closest known name to a typo.
//!
//! Two callers with two tolerances, named here so they are chosen, not copied: a reference to
//! an object by name (`NAMES`: three edits, exact case, as people misspell hosts and Roles)
//! and a Kubernetes kind (`KINDS`: two edits, any case, as the API server's kinds differ by
//! case only in typos).

/// How far a typo may be from what was meant.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub max_edits: usize,
    pub ignore_case: bool,
}

/// Object names: hosts, Roles, NodeSets, cells, variables.
pub const NAMES: Tolerance = Tolerance { max_edits: 3, ignore_case: false };
/// Kinds in an API group we read.
pub const KINDS: Tolerance = Tolerance { max_edits: 2, ignore_case: true };

/// Levenshtein distance over characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The known name closest to `wanted` within `tolerance` (the smallest distance; among equals,
/// the smallest name, so the answer never depends on the order names come in).
pub fn closest<'a>(
    wanted: &str,
    names: impl Iterator<Item = &'a str>,
    tolerance: Tolerance,
) -> Option<&'a str> {
    let fold = |s: &str| if tolerance.ignore_case { s.to_ascii_lowercase() } else { s.to_string() };
    let wanted = fold(wanted);
    names
        .map(|n| (edit_distance(&wanted, &fold(n)), n))
        .filter(|(d, _)| *d <= tolerance.max_edits)
        .min()
        .map(|(_, n)| n)
}

/// `; did you mean "name"?` for the closest object name, or nothing.
pub fn did_you_mean<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> String {
    match closest(wanted, names, NAMES) {
        Some(n) => format!("; did you mean \"{n}\"?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("é", "e"), 1);
    }

    #[test]
    fn tolerances() {
        let kinds = ["OpenStackDataPlaneNodeSet", "OpenStackDataPlaneService"];
        assert_eq!(closest("openstackdataplanenodeset", kinds.into_iter(), KINDS), Some(kinds[0]));
        assert_eq!(closest("openstackdataplanenodeset", kinds.into_iter(), NAMES), None);
        assert_eq!(
            did_you_mean("edpm-cmpute", ["edpm-compute", "edpm-networker"].into_iter()),
            "; did you mean \"edpm-compute\"?"
        );
        assert_eq!(did_you_mean("zzzz", ["edpm-compute"].into_iter()), "");
    }
}
