//! Python's `fnmatch` as Ansible uses it to match a host pattern against group and host names:
//! `re.compile(fnmatch.translate(pattern)).match(name)`, so case-sensitive, whole-name, over
//! code points (`*` and `?` match any character, a newline too).
//!
//! `fnmatch.translate` (CPython 3.11, the venv's) is followed step by step for classes, where
//! its rules are its own: `[!…]` negates; a `]` right after `[` or `[!` is a member; a `[`
//! with no `]` after it is a literal `[`; `a-z` is a range, other hyphens are members; a range
//! whose start is after its end is dropped, merging its neighbours (`[a--z]` is `[z]`); an
//! emptied class never matches, `[!]…]` emptied matches anything. There is no escaping: `\`
//! is a member of a class and a literal elsewhere.

/// One position of a shell pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    /// `?`, or a class left with only its negation: any one character.
    Any,
    /// `*` (runs of them are one).
    Star,
    /// `[…]`: members and inclusive ranges, negated with `!`.
    Class {
        negated: bool,
        members: Vec<char>,
        ranges: Vec<(char, char)>,
    },
    /// A class emptied by dropped ranges: nothing matches.
    Never,
}

/// A shell pattern, ready to match names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(Vec<Token>);

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        let p: Vec<char> = pattern.chars().collect();
        let mut out: Vec<Token> = Vec::new();
        let mut i = 0;
        while i < p.len() {
            let c = p[i];
            i += 1;
            match c {
                '*' => {
                    if out.last() != Some(&Token::Star) {
                        out.push(Token::Star);
                    }
                }
                '?' => out.push(Token::Any),
                '[' => match class_end(&p, i) {
                    None => out.push(Token::Char('[')),
                    Some(j) => {
                        out.push(class(&p, i, j));
                        i = j + 1;
                    }
                },
                c => out.push(Token::Char(c)),
            }
        }
        Glob(out)
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let s: Vec<char> = name.chars().collect();
        let p = &self.0;
        let (mut pi, mut si) = (0, 0);
        // The last star seen, and where in the name its match ends now: on a mismatch the
        // star takes one more character (every other token matches exactly one).
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            if pi < p.len() {
                if p[pi] == Token::Star {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                if one(&p[pi], s[si]) {
                    pi += 1;
                    si += 1;
                    continue;
                }
            }
            match star {
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            }
        }
        p[pi..].iter().all(|t| *t == Token::Star)
    }
}

/// Whether one token other than a star matches one character.
fn one(t: &Token, c: char) -> bool {
    match t {
        Token::Char(x) => *x == c,
        Token::Any => true,
        Token::Star | Token::Never => false,
        Token::Class { negated, members, ranges } => {
            let hit = members.contains(&c) || ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi);
            hit != *negated
        }
    }
}

/// Where the `]` closing a class opened just before `i` is, as `translate` finds it.
fn class_end(p: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if p.get(j) == Some(&'!') {
        j += 1;
    }
    if p.get(j) == Some(&']') {
        j += 1;
    }
    while j < p.len() && p[j] != ']' {
        j += 1;
    }
    (j < p.len()).then_some(j)
}

/// The class `p[i..j]` (between `[` and `]`), by `translate`'s chunks.
fn class(p: &[char], i: usize, j: usize) -> Token {
    let stuff = &p[i..j];
    let negated = stuff.first() == Some(&'!');
    let chunks: Vec<Vec<char>> = if !stuff.contains(&'-') { vec![stuff.to_vec()] } else { chunks(p, i, j) };
    // A class of nothing never matches; one of only `!` matches anything.
    let flat: Vec<char> = chunks.concat();
    if flat.is_empty() {
        return Token::Never;
    }
    if flat == ['!'] && chunks.len() == 1 {
        return Token::Any;
    }
    let mut members = Vec::new();
    let mut ranges = Vec::new();
    // Chunks joined by `-`: the last character of one and the first of the next are a range;
    // every other character (hyphens inside a chunk among them) is a member.
    for (k, chunk) in chunks.iter().enumerate() {
        let from = if k > 0 { 1 } else { 0 };
        let to = if k + 1 < chunks.len() { chunk.len() - 1 } else { chunk.len() };
        if k > 0 {
            ranges.push((chunks[k - 1][chunks[k - 1].len() - 1], chunk[0]));
        }
        members.extend(chunk.get(from..to).unwrap_or(&[]).iter().copied());
    }
    if negated {
        // The `!` is the first member of the first chunk, and no member.
        if let Some(pos) = members.iter().position(|c| *c == '!') {
            members.remove(pos);
        }
    }
    Token::Class { negated, members, ranges }
}

/// `translate`'s split of a class holding `-` into chunks, with its empty ranges dropped.
fn chunks(p: &[char], mut i: usize, j: usize) -> Vec<Vec<char>> {
    let find = |from: usize| (from..j).find(|&k| p[k] == '-');
    let mut chunks: Vec<Vec<char>> = Vec::new();
    let mut k = if p[i] == '!' { i + 2 } else { i + 1 };
    while let Some(at) = find(k) {
        chunks.push(p[i..at].to_vec());
        i = at + 1;
        k = at + 3;
    }
    let last = p[i..j].to_vec();
    if last.is_empty() {
        if let Some(c) = chunks.last_mut() {
            c.push('-');
        }
    } else {
        chunks.push(last);
    }
    // Drop empty ranges (their start after their end), merging the chunks around them.
    let mut k = chunks.len().saturating_sub(1);
    while k > 0 {
        let (before, after) = (chunks[k - 1][chunks[k - 1].len() - 1], chunks[k][0]);
        if before > after {
            let mut merged = chunks[k - 1][..chunks[k - 1].len() - 1].to_vec();
            merged.extend_from_slice(&chunks[k][1..]);
            chunks[k - 1] = merged;
            chunks.remove(k);
        }
        k -= 1;
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Glob::new(p).matches(s)
    }

    #[test]
    fn stars_and_questions_match_whole_names() {
        assert!(m("edpm-*", "edpm-compute-3"));
        assert!(m("*", ""));
        assert!(m("*-3", "edpm-compute-3"));
        assert!(!m("*-3", "edpm-compute-30"));
        assert!(m("edpm-compute-?", "edpm-compute-3"));
        assert!(!m("edpm-compute-?", "edpm-compute-30"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(!m("a*b*c", "axxbyy"));
        assert!(m("é?", "éü"), "characters, not bytes");
        assert!(m("a*", "a\nb"), "a star matches a newline");
        assert!(m("a.b", "a.b") && !m("a.b", "axb"), "a dot is itself");
    }

    #[test]
    fn classes_follow_translate() {
        assert!(m("c[0-6]", "c3") && !m("c[0-6]", "c7"));
        assert!(m("c[!0-6]", "c7") && !m("c[!0-6]", "c3"));
        assert!(m("c[]]", "c]"), "a ] first is a member");
        assert!(m("c[!]]", "cx") && !m("c[!]]", "c]"));
        assert!(m("c[", "c[") && m("c[x", "c[x"), "a [ with no ] is itself");
        assert!(m("c[a-]", "c-") && m("c[-a]", "c-"));
        assert!(!m("c[z-a]x", "c[z-a]x") && !m("c[z-a]", "cz"), "an emptied class never matches");
        assert!(m("c[!z-a]", "cq"), "a negated emptied class matches anything");
        assert!(m("c[a--z]", "cz") && !m("c[a--z]", "ca") && !m("c[a--z]", "c-"));
        assert!(m("c[\\]", "c\\"), "no escaping: a backslash is a member");
        assert!(m("c[*]", "c*") && !m("c[*]", "cx"), "a class holds a star literally");
        assert!(m("c[a-cx-z]", "cy") && !m("c[a-cx-z]", "cm"));
        assert!(m("c[ab-yz]", "cm") && m("c[ab-yz]", "ca") && m("c[ab-yz]", "cz"));
        assert!(m("c[a-m-z]", "c-") && m("c[a-m-z]", "cz") && !m("c[a-m-z]", "cq"));
        assert!(m("c[^a]", "c^") && !m("c[^a]", "cb"), "^ is no negation in a shell class");
    }
}
