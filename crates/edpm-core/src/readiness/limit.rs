//! Which hosts an `ansibleLimit` covers, as Ansible reads `--limit`: patterns separated by `,`
//! (or `:`), each a host or group name, `all`/`*`, a shell glob (`*`, `?`, `[…]`), or `~regex`
//! (not evaluated here: a host then counts as covered, since we cannot tell); `&pattern`
//! intersects and `!pattern` excludes. A host matches a pattern by its inventory hostname or by
//! any of its groups (its NodeSet or Role, its cell group, `all`).

/// A parsed limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    include: Vec<String>,
    intersect: Vec<String>,
    exclude: Vec<String>,
}

impl Limit {
    /// `None` for an empty limit or `*`/`all` (everything); upstream treats `""` and `"*"` so.
    pub fn parse(text: &str) -> Option<Limit> {
        let text = text.trim();
        if text.is_empty() || text == "*" || text == "all" {
            return None;
        }
        // `:` separates patterns in old Ansible; it also appears in IPv6 and ranges, which host
        // names here never use, so commas win when present.
        let parts: Vec<&str> =
            if text.contains(',') { text.split(',').collect() } else { text.split(':').collect() };
        let mut l = Limit { include: Vec::new(), intersect: Vec::new(), exclude: Vec::new() };
        for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            if let Some(x) = p.strip_prefix('!') {
                l.exclude.push(x.to_string());
            } else if let Some(x) = p.strip_prefix('&') {
                l.intersect.push(x.to_string());
            } else {
                l.include.push(p.to_string());
            }
        }
        Some(l)
    }

    /// Whether the host (`names`: its inventory hostname first, then its groups) is covered.
    pub fn covers(&self, names: &[&str]) -> bool {
        let hit = |pattern: &str| names.iter().any(|n| pattern_matches(pattern, n));
        let included = if self.include.is_empty() { true } else { self.include.iter().any(|p| hit(p)) };
        included && self.intersect.iter().all(|p| hit(p)) && !self.exclude.iter().any(|p| hit(p))
    }
}

fn pattern_matches(pattern: &str, name: &str) -> bool {
    if pattern == "all" || pattern == "*" {
        return true;
    }
    if pattern.starts_with('~') {
        // A regex: assume covered rather than report a node as left out on a guess.
        return true;
    }
    glob(pattern.as_bytes(), name.as_bytes())
}

/// Shell glob: `*`, `?`, and `[…]` classes (with `!`/`^` negation and ranges).
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some(pi);
                    mark = si;
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(&p[pi..], s[si])
                        && matched
                    {
                        pi += next;
                        si += 1;
                        continue;
                    }
                }
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some(st) => {
                pi = st + 1;
                mark += 1;
                si = mark;
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Matches one byte against a `[…]` class at the start of `p`: (matched, class length).
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let end = p.iter().skip(2).position(|&b| b == b']')? + 2;
    let body = &p[1..end];
    let (negate, body) = match body.first() {
        Some(b'!') | Some(b'^') => (true, &body[1..]),
        _ => (false, body),
    };
    let mut i = 0;
    let mut hit = false;
    while i < body.len() {
        if i + 2 < body.len() && body[i + 1] == b'-' {
            hit |= body[i] <= c && c <= body[i + 2];
            i += 3;
        } else {
            hit |= body[i] == c;
            i += 1;
        }
    }
    Some((hit != negate, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(limit: &str, host: &str, groups: &[&str]) -> bool {
        let mut names = vec![host];
        names.extend_from_slice(groups);
        Limit::parse(limit).is_none_or(|l| l.covers(&names))
    }

    #[test]
    fn everything_when_empty_star_or_all() {
        for l in ["", " ", "*", "all"] {
            assert!(Limit::parse(l).is_none(), "{l:?}");
        }
    }

    #[test]
    fn hosts_groups_globs_intersections_and_exclusions() {
        let g = &["edpm-compute-cell1", "nova-cell1", "all"];
        assert!(covered("edpm-compute-3", "edpm-compute-3", g));
        assert!(!covered("edpm-compute-4", "edpm-compute-3", g));
        assert!(covered("edpm-compute-4,edpm-compute-3", "edpm-compute-3", g));
        assert!(covered("edpm-compute-4:edpm-compute-3", "edpm-compute-3", g));
        assert!(covered("nova-cell1", "edpm-compute-3", g));
        assert!(covered("edpm-compute-[3-5]", "edpm-compute-3", g));
        assert!(!covered("edpm-compute-[4-5]", "edpm-compute-3", g));
        assert!(covered("edpm-*", "edpm-compute-3", g));
        assert!(covered("edpm-compute-?", "edpm-compute-3", g));
        assert!(!covered("all,!edpm-compute-3", "edpm-compute-3", g));
        assert!(covered("edpm-compute-cell1,&nova-cell1", "edpm-compute-3", g));
        assert!(!covered("edpm-compute-cell1,&nova-cell2", "edpm-compute-3", g));
        assert!(!covered("!edpm-compute-3", "edpm-compute-3", g), "only exclusions: everything else");
        assert!(covered("!edpm-compute-4", "edpm-compute-3", g));
        assert!(covered("~edpm-compute-\\d+", "edpm-compute-3", g), "a regex is not judged");
    }
}
