//! Python's `re.match(pattern, name)`, for Ansible's `~regex` host patterns, on the `regex`
//! crate: a pattern is parsed as CPython 3.11's `re._parser` parses it and written out in the
//! `regex` crate's syntax, construct by construct, so that each means the same in both. What
//! is outside that common ground is refused with the construct named, and the pattern is then
//! not evaluated (its hosts are Unknown), never guessed:
//!
//! - kept: literals, `.`, `^`, `$`, `|`, groups `(…)`, `(?:…)`, `(?P<name>…)`, `* + ?` and
//!   `{m}`, `{m,}`, `{,n}`, `{m,n}`, each greedy or lazy (`?`), classes `[…]` (Python's rules:
//!   a `]` first is a member, `[` is a member, a hyphen at either end is a member), the escapes
//!   `\d \D \w \W \s \S \b \B \A \Z` and `\t \n \r \f \v \a`, and a backslash before any
//!   other character that is not a letter or digit (itself);
//! - refused: flags (`(?i)`, `(?x)`, …), lookarounds, backreferences, atomic groups,
//!   possessive quantifiers, conditionals, comments, `\x \u \U \N` and octal escapes.
//!
//! A `{` that is no quantifier is a literal brace, as in Python (`\d{1` after Ansible split
//! `\d{1,2}` at its comma).
//!
//! Matching: Python's match is anchored at the start only (`^(?:…)` here). The two engines
//! agree on `.` (anything but a newline) and on literal characters everywhere; `\d \w \s \b`
//! and `$` agree on names of printable ASCII without a newline, so [`PyRegex::matches`] says
//! when a name outside that would make the answer depend on the engine.

/// A Python regular expression in the common ground of `re` and the `regex` crate.
#[derive(Debug, Clone)]
pub struct PyRegex {
    re: regex::Regex,
    /// Uses `\d \w \s \b` (or their negations), whose meaning beyond ASCII differs.
    ascii_classes: bool,
    /// Uses `$`, which Python also matches before a final newline.
    dollar: bool,
}

impl PyRegex {
    /// `pattern` as Python compiles it, or why it is not evaluated here.
    pub fn new(pattern: &str) -> Result<PyRegex, String> {
        let mut p = Parser {
            s: pattern.chars().collect(),
            i: 0,
            out: String::new(),
            ascii: false,
            dollar: false,
            names: Vec::new(),
        };
        p.out.push_str("^(?:");
        p.alternation(0)?;
        if p.i < p.s.len() {
            // Only an unbalanced `)` stops the top level.
            return Err("an unbalanced ')' (Python refuses it)".into());
        }
        p.out.push(')');
        let re = regex::RegexBuilder::new(&p.out)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("too large or not understood ({})", first_line(&e.to_string())))?;
        Ok(PyRegex { re, ascii_classes: p.ascii, dollar: p.dollar })
    }

    /// Whether Python's `re.match` finds the pattern at the start of `name`; `Err` when
    /// `name` holds characters on which the two engines may disagree for this pattern.
    pub fn matches(&self, name: &str) -> Result<bool, String> {
        if self.ascii_classes && !name.chars().all(|c| (' '..='~').contains(&c)) {
            return Err(format!(
                "it uses \\d, \\w, \\s or \\b, whose meaning differs between Python and here for {}, which holds characters beyond printable ASCII",
                crate::excerpt::echo(&crate::excerpt::printable(name)).debug()
            ));
        }
        if self.dollar && name.contains('\n') {
            return Err(format!(
                "it uses $, which Python also matches before the newline in {}",
                crate::excerpt::echo(&crate::excerpt::printable(name)).debug()
            ));
        }
        Ok(self.re.is_match(name))
    }
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| l.contains("error:")).unwrap_or_else(|| s.lines().next().unwrap_or(""))
}

/// What the last item of a sequence was, for what may follow it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Nothing yet: a quantifier has nothing to repeat.
    Nothing,
    /// An assertion (`^`, `$`, `\b`, …): Python will not repeat it.
    Assertion,
    /// A quantified item: another quantifier is Python's "multiple repeat".
    Repeat,
    Item,
}

struct Parser {
    s: Vec<char>,
    i: usize,
    out: String,
    ascii: bool,
    dollar: bool,
    names: Vec<String>,
}

/// How deep groups may nest: Python's own limit is far above what a host pattern needs, and
/// the parser recurses per group.
const MAX_DEPTH: usize = 64;

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// `seq ('|' seq)*`, up to a `)` or the end.
    fn alternation(&mut self, depth: usize) -> Result<(), String> {
        loop {
            self.sequence(depth)?;
            if self.eat('|') {
                self.out.push('|');
            } else {
                return Ok(());
            }
        }
    }

    fn sequence(&mut self, depth: usize) -> Result<(), String> {
        let mut last = Last::Nothing;
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                return Ok(());
            }
            self.i += 1;
            last = match c {
                '*' | '+' | '?' => self.quantifier(c, last)?,
                '{' => self.brace(last)?,
                '\\' => self.escape()?,
                '[' => {
                    self.class()?;
                    Last::Item
                }
                '(' => {
                    self.group(depth)?;
                    Last::Item
                }
                '.' => {
                    self.out.push('.');
                    Last::Item
                }
                '^' => {
                    self.out.push('^');
                    Last::Assertion
                }
                '$' => {
                    self.dollar = true;
                    self.out.push('$');
                    Last::Assertion
                }
                c => {
                    self.literal(c);
                    Last::Item
                }
            };
        }
        Ok(())
    }

    fn literal(&mut self, c: char) {
        self.out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
    }

    /// `*`, `+` or `?` after `last`, greedy or lazy.
    fn quantifier(&mut self, q: char, last: Last) -> Result<Last, String> {
        repeatable(last)?;
        self.out.push(q);
        self.lazy_or_possessive()
    }

    /// A `{`: a quantifier `{m}`, `{m,}`, `{,n}`, `{m,n}` (`{,}` is `*`); anything else is
    /// a literal `{` and what follows it is read on its own, as Python reads it.
    fn brace(&mut self, last: Last) -> Result<Last, String> {
        let here = self.i;
        let digits = |p: &mut Parser| {
            let from = p.i;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            p.s[from..p.i].iter().collect::<String>()
        };
        let lo = digits(self);
        let hi = if self.eat(',') { Some(digits(self)) } else { None };
        if (lo.is_empty() && hi.is_none()) || !self.eat('}') {
            self.i = here;
            self.literal('{');
            return Ok(Last::Item);
        }
        repeatable(last)?;
        let number = |d: &str| d.parse::<u32>().map_err(|_| format!("a repetition count {d} too large"));
        let min = if lo.is_empty() { 0 } else { number(&lo)? };
        match hi.as_deref() {
            None => self.out.push_str(&format!("{{{min}}}")),
            Some("") => self.out.push_str(&format!("{{{min},}}")),
            Some(h) => {
                let max = number(h)?;
                if max < min {
                    return Err(format!(
                        "{{{lo},{h}}}: min repeat greater than max repeat (Python refuses it)"
                    ));
                }
                self.out.push_str(&format!("{{{min},{max}}}"));
            }
        }
        self.lazy_or_possessive()
    }

    fn lazy_or_possessive(&mut self) -> Result<Last, String> {
        if self.eat('?') {
            self.out.push('?');
        } else if self.peek() == Some('+') {
            return Err("a possessive quantifier".into());
        }
        Ok(Last::Repeat)
    }

    /// `(…)`, `(?:…)` or `(?P<name>…)`; any other `(?` is refused.
    fn group(&mut self, depth: usize) -> Result<(), String> {
        if depth >= MAX_DEPTH {
            return Err(format!("groups nested deeper than {MAX_DEPTH}"));
        }
        if self.eat('?') {
            if self.eat(':') {
                self.out.push_str("(?:");
            } else if self.eat('P') && self.eat('<') {
                let from = self.i;
                while self.peek().is_some_and(|c| c != '>') {
                    self.i += 1;
                }
                let name: String = self.s[from..self.i].iter().collect();
                let ident = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !self.eat('>') || !ident || self.names.contains(&name) {
                    return Err(format!(
                        "a group name {name:?} Python refuses or that is no ASCII identifier"
                    ));
                }
                self.out.push_str(&format!("(?P<{name}>"));
                self.names.push(name);
            } else {
                let what = self.peek().map_or(String::new(), |c| c.to_string());
                return Err(format!(
                    "(?{what}…): flags, lookarounds, backreferences, atomic groups, conditionals and comments are not evaluated"
                ));
            }
        } else {
            self.out.push('(');
        }
        self.alternation(depth + 1)?;
        if !self.eat(')') {
            return Err("a '(' that is never closed (Python refuses it)".into());
        }
        self.out.push(')');
        Ok(())
    }

    /// An escape outside a class (the backslash eaten).
    fn escape(&mut self) -> Result<Last, String> {
        let Some(c) = self.peek() else { return Err("a pattern ending in a backslash".into()) };
        self.i += 1;
        Ok(match c {
            'd' | 'D' | 'w' | 'W' | 's' | 'S' => {
                self.ascii = true;
                self.out.push('\\');
                self.out.push(c);
                Last::Item
            }
            'b' | 'B' => {
                self.ascii = true;
                self.out.push('\\');
                self.out.push(c);
                Last::Assertion
            }
            'A' => {
                self.out.push_str("\\A");
                Last::Assertion
            }
            'Z' => {
                self.out.push_str("\\z");
                Last::Assertion
            }
            _ => {
                let literal = simple_escape(c)?;
                self.literal(literal);
                Last::Item
            }
        })
    }

    /// A class, `[` eaten: Python's members, written out escaped.
    fn class(&mut self) -> Result<(), String> {
        self.out.push('[');
        if self.eat('^') {
            self.out.push('^');
        }
        let mut empty = true;
        loop {
            let Some(c) = self.peek() else {
                return Err("a '[' that is never closed (Python refuses it)".into());
            };
            self.i += 1;
            if c == ']' && !empty {
                break;
            }
            empty = false;
            let first = self.class_item(c)?;
            if self.peek() == Some('-') {
                self.i += 1;
                match self.peek() {
                    None => return Err("a '[' that is never closed (Python refuses it)".into()),
                    Some(']') => {
                        self.i += 1;
                        self.class_member(first);
                        self.out.push_str("\\-");
                        break;
                    }
                    Some(n) => {
                        self.i += 1;
                        let second = self.class_item(n)?;
                        let (Member::Char(lo), Member::Char(hi)) = (&first, &second) else {
                            return Err("a range with a class at one end (Python refuses it)".into());
                        };
                        if hi < lo {
                            return Err(format!("a range {lo}-{hi} backwards (Python refuses it)"));
                        }
                        let (lo, hi) = (*lo, *hi);
                        self.literal(lo);
                        self.out.push('-');
                        self.literal(hi);
                    }
                }
            } else {
                self.class_member(first);
            }
        }
        self.out.push(']');
        Ok(())
    }

    /// One member of a class, `c` its first character (eaten).
    fn class_item(&mut self, c: char) -> Result<Member, String> {
        if c != '\\' {
            return Ok(Member::Char(c));
        }
        let Some(e) = self.peek() else { return Err("a pattern ending in a backslash".into()) };
        self.i += 1;
        match e {
            'd' | 'D' | 'w' | 'W' | 's' | 'S' => {
                self.ascii = true;
                Ok(Member::Class(e))
            }
            'b' => Err("\\b in a class (a backspace to Python)".into()),
            _ => simple_escape(e).map(Member::Char),
        }
    }

    fn class_member(&mut self, m: Member) {
        match m {
            Member::Char(c) => self.literal(c),
            Member::Class(e) => {
                self.out.push('\\');
                self.out.push(e);
            }
        }
    }
}

enum Member {
    Char(char),
    Class(char),
}

/// Whether a quantifier may follow `last`, as Python's parser decides.
fn repeatable(last: Last) -> Result<(), String> {
    match last {
        Last::Item => Ok(()),
        Last::Repeat => Err("a quantifier after a quantifier (Python's \"multiple repeat\")".into()),
        Last::Nothing | Last::Assertion => {
            Err("a quantifier with nothing to repeat (Python refuses it)".into())
        }
    }
}

/// The character `\c` stands for, for the escapes both engines read alike.
fn simple_escape(c: char) -> Result<char, String> {
    match c {
        't' => Ok('\t'),
        'n' => Ok('\n'),
        'r' => Ok('\r'),
        'f' => Ok('\x0c'),
        'v' => Ok('\x0b'),
        'a' => Ok('\x07'),
        c if c.is_ascii_alphanumeric() => Err(format!(
            "the escape \\{c} (octal, backreferences, \\x, \\u, \\N and letters Python does not know are not evaluated)"
        )),
        // Any other character escaped is itself, to Python and here.
        c => Ok(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        PyRegex::new(p).unwrap_or_else(|e| panic!("{p:?}: {e}")).matches(s).unwrap()
    }

    fn refused(p: &str) -> String {
        PyRegex::new(p).err().unwrap_or_else(|| panic!("{p:?} was accepted"))
    }

    #[test]
    fn match_is_anchored_at_the_start_only() {
        assert!(m("edpm-compute-[0-6]$", "edpm-compute-3"));
        assert!(!m("edpm-compute-[0-6]$", "edpm-compute-7"));
        assert!(!m("edpm-compute-[0-6]$", "edpm-compute-30"));
        assert!(m("edpm-compute-[0-6]", "edpm-compute-30"), "no end anchor: a prefix matches");
        assert!(!m("compute", "edpm-compute-3"), "anchored at the start");
        assert!(m("a|edpm", "edpm-compute-3"));
        assert!(m("(edpm|x)-compute-\\d+\\Z", "edpm-compute-12"));
        assert!(m("(?P<n>e)dpm", "edpm") && m("(?:e)*dpm", "dpm"));
        assert!(m("e.{3}-c", "edpm-c") && m("e.{,3}-c", "edpm-c") && !m("e.{4,}-c", "edpm-c"));
        assert!(m("e{,}d", "eeed"), "{{,}} is *");
        assert!(m("x*?e", "e") && m("[]a]", "]") && m("[^]a]", "b") && m("[a-]", "-"));
        assert!(m("[[]", "[") && m("[a&&b]", "&"), "members, not nested sets");
        assert!(m("\\.\\-", ".-") && m("[\\d.]", "7") && m("a}b]", "a}b]"));
        assert!(m("a{", "a{") && m("a{x}", "a{x}") && m("\\d{1$", "7{1") && m("a{}", "a{}") && m("{", "{"));
        assert!(m("a{1", "a{1") && !m("a{1$", "a"), "no closing brace: literal");
    }

    #[test]
    fn what_the_engines_read_apart_is_refused() {
        for p in [
            "(?i)edpm",
            "(?=e)",
            "(?<=e)",
            "(?!e)",
            "(a)\\1",
            "(?P=n)",
            "(?>a)",
            "a*+",
            "a**",
            "a{2}{3}",
            "*a",
            "^*",
            "\\b+",
            "{2}",
            "\\x41",
            "\\u0041",
            "\\N{DASH}",
            "\\0",
            "\\e",
            "[\\b]",
            "[z-a]",
            "[\\d-z]",
            "(a",
            "a)",
            "[a",
            "\\",
            "(?#c)",
            "(?(1)a|b)",
            "e{3,2}",
            "a{99999999999}",
        ] {
            let why = refused(p);
            assert!(!why.is_empty(), "{p:?}");
        }
    }

    #[test]
    fn names_beyond_printable_ascii_make_class_escapes_unknown() {
        let r = PyRegex::new("\\w+$").unwrap();
        assert!(r.matches("edpm-compute-3").is_ok());
        assert!(r.matches("édpm").is_err());
        let plain = PyRegex::new("é.").unwrap();
        assert_eq!(plain.matches("éx"), Ok(true), "literals and dots agree everywhere");
        assert!(PyRegex::new("a$").unwrap().matches("a\n").is_err());
    }
}
