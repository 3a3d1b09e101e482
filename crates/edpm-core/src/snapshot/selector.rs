//! Kubernetes label selectors (`-l`/`--selector`), parsed and matched as the API server does
//! (`k8s.io/apimachinery/pkg/labels`): requirements separated by commas, all of which must
//! hold: `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`
//! (exists) and `!key` (does not exist). Keys are an optional DNS-subdomain prefix and `/`
//! plus a name of at most 63 characters; values are empty or at most 63 characters, both of
//! `[A-Za-z0-9._-]` beginning and ending with an alphanumeric.
//!
//! One parser for both sources: a selector the API server would refuse is refused before any
//! source is read, and a directory source keeps exactly the objects a cluster list would.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    text: String,
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// `key>N`, `key<N`: the label must be present and an integer (as apimachinery's).
    Gt,
    Lt,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "label selector {text:?}: {problem}; write requirements such as `app=edpm`, `tier!=test`, `env in (prod,stage)` or `!legacy`, separated by commas"
)]
pub struct SelectorError {
    text: String,
    problem: String,
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let fail = |problem: String| SelectorError { text: text.to_string(), problem };
        let mut requirements = Vec::new();
        for part in split_top(text).map_err(fail)? {
            requirements.push(requirement(part.trim()).map_err(fail)?);
        }
        Ok(Selector { text: text.to_string(), requirements })
    }

    /// Whether `labels` satisfy every requirement (an empty selector matches everything).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| {
            let have = labels.get(&r.key);
            match r.op {
                Op::In => have.is_some_and(|v| r.values.contains(v)),
                // As upstream: a missing key satisfies `!=` and `notin`.
                Op::NotIn => have.is_none_or(|v| !r.values.contains(v)),
                Op::Exists => have.is_some(),
                Op::DoesNotExist => have.is_none(),
                Op::Gt | Op::Lt => {
                    let (Some(have), Ok(want)) =
                        (have.and_then(|v| v.parse::<i64>().ok()), r.values[0].parse::<i64>())
                    else {
                        return false;
                    };
                    if r.op == Op::Gt { have > want } else { have < want }
                }
            }
        })
    }

    /// The selector as given: what is sent to the API server.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Splits on the commas outside parentheses.
fn split_top(text: &str) -> Result<Vec<&str>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0u32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err("nested parentheses".into()),
            ')' if depth == 1 => depth = 0,
            ')' => return Err("a `)` without its `(`".into()),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a `(` without its `)`".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn requirement(part: &str) -> Result<Requirement, String> {
    if part.is_empty() {
        return Err("an empty requirement (two commas, or a comma at either end)".into());
    }
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        check_key(key)?;
        return Ok(Requirement { key: key.into(), op: Op::DoesNotExist, values: Vec::new() });
    }
    // The operator is the first of `!=`, `==`, `=` in the text; then ` in `/` notin `.
    let ops: [(&str, Op); 5] =
        [("!=", Op::NotIn), ("==", Op::In), ("=", Op::In), (">", Op::Gt), ("<", Op::Lt)];
    let first = ops
        .iter()
        .filter_map(|(s, op)| part.find(s).map(|i| (i, *s, *op)))
        .min_by_key(|(i, s, _)| (*i, std::cmp::Reverse(s.len())));
    if let Some((i, s, op)) = first {
        let key = part[..i].trim();
        let value = part[i + s.len()..].trim();
        check_key(key)?;
        check_value(value)?;
        if matches!(op, Op::Gt | Op::Lt) && value.parse::<i64>().is_err() {
            return Err(format!("{part:?}: `>` and `<` compare with an integer"));
        }
        return Ok(Requirement { key: key.into(), op, values: vec![value.into()] });
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim_start();
        let (op, list) = if let Some(l) = rest.strip_prefix("notin") {
            (Op::NotIn, l)
        } else if let Some(l) = rest.strip_prefix("in") {
            (Op::In, l)
        } else {
            return Err(format!("{part:?} has no operator (=, ==, !=, in, notin)"));
        };
        let list = list.trim();
        let Some(inner) = list.strip_prefix('(').and_then(|l| l.strip_suffix(')')) else {
            return Err(format!("{part:?}: `in` and `notin` take a parenthesized list, e.g. (a,b)"));
        };
        check_key(key)?;
        // As apimachinery: `()` and `(,)` are the set of the empty value.
        let mut values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
        values.sort();
        values.dedup();
        for v in &values {
            check_value(v)?;
        }
        return Ok(Requirement { key: key.into(), op, values });
    }
    check_key(part)?;
    Ok(Requirement { key: part.into(), op: Op::Exists, values: Vec::new() })
}

fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !ok {
            return Err(format!(
                "key {key:?}: the prefix {p:?} must be a DNS subdomain (lowercase letters, digits, '-' and '.')"
            ));
        }
    }
    if name.is_empty() {
        return Err(format!("key {key:?} has no name"));
    }
    if !label_text(name) {
        return Err(format!(
            "key {key:?}: the name must be at most 63 characters of letters, digits, '-', '_' and '.', beginning and ending with a letter or digit"
        ));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || label_text(value) {
        return Ok(());
    }
    Err(format!(
        "value {value:?} must be empty or at most 63 characters of letters, digits, '-', '_' and '.', beginning and ending with a letter or digit"
    ))
}

fn label_text(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn matches_every_operator_as_the_api_server_does() {
        let l = labels(&[
            ("app", "edpm"),
            ("env", "prod"),
            ("example.com/tier", "compute"),
            ("count", "3"),
            ("empty", ""),
        ]);
        let cases = [
            ("", true),
            ("app=edpm", true),
            ("app==edpm", true),
            ("app = edpm", true),
            ("app=other", false),
            ("app!=other", true),
            ("missing!=x", true),
            ("app!=edpm", false),
            ("env in (prod, stage)", true),
            ("env in (stage)", false),
            ("env notin (stage)", true),
            ("missing notin (a)", true),
            ("env notin (prod)", false),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=edpm,env=prod", true),
            ("app=edpm,env=stage", false),
            ("example.com/tier=compute", true),
            ("app=", false),
            ("missing=", false),
            ("count>2", true),
            ("count>3", false),
            ("count<4", true),
            ("app>1", false),
            ("missing<9", false),
            ("empty in ()", true),
            ("app in ()", false),
            ("app notin (,)", true),
        ];
        for (text, want) in cases {
            let s = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.matches(&l), want, "{text}");
        }
        assert!(Selector::parse("app=").unwrap().matches(&labels(&[("app", "")])));
    }

    #[test]
    fn refuses_what_the_api_server_refuses_and_says_how_to_write_it() {
        for bad in [
            "app=edpm,",
            ",app",
            "=edpm",
            "app in prod",
            "count>x",
            "app in (a",
            "app)",
            "app in ((a))",
            "app=-bad",
            "app=has space",
            "-app=x",
            "a/b/c=x",
            "Example.com/app=x",
            "/app=x",
            "app=x!",
            "app gt 3",
            &format!("{}=x", "k".repeat(64)),
            &format!("app={}", "v".repeat(64)),
        ] {
            let e = Selector::parse(bad).err().unwrap_or_else(|| panic!("{bad:?} was accepted"));
            let text = e.to_string();
            assert!(text.contains("label selector") && text.contains("app=edpm"), "{bad}: {text}");
        }
    }

    #[test]
    fn keeps_the_text_for_the_api_server() {
        assert_eq!(Selector::parse("env in (a,b),!x").unwrap().as_str(), "env in (a,b),!x");
    }
}
