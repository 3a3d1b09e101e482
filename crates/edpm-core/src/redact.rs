//! Redaction: the one way secret values are kept out of what edpm-agent prints (`render
//! --redact`, `inventory explain`, failure messages in `edpm-summary.json` and the termination
//! log, the run's own log lines; the node agent's, readiness's and the Nova client's
//! messages).
//!
//! Pure. A [`Redactor`] is built from the values known to be secret and masks, in any text:
//! - those values as literals, and the pieces of them that show up on their own (each line,
//!   each `key = value`'s value, a URL's password), in every form quoting gives them on the
//!   way to a message: JSON's and YAML's escapes (`\"`, `\\`, `\n` as two characters,
//!   `\u001b`), JSON inside JSON, Python's `repr`, shell quoting (`'\''`, `'"'"'`, `\$`),
//!   YAML's `''` and URL percent-encoding;
//! - the password of every URL (`scheme://user:********@host:port/path`): the scheme, user,
//!   host, port and path stay, because that is what an operator compares when a service
//!   cannot reach its database or message bus;
//! - the value after a secret-sounding key, and PEM private keys. Also
//!   [`Redactor::default()`], which knows no value, masks these.
//!
//! Which literals, by length. Every value of every Secret the source read is a literal of at
//! least [`MIN_SECRET_LEN`] characters: a Secret also holds user names, hosts and flags
//! (`admin`, `true`, `1`), and masking those would hide half of every message. A value of a
//! secret-named variable (an extra var or inventory variable `*password*`, `*token*`, ...:
//! [`Redactor::with_named`]) is known to be a secret whatever its length, so it is masked
//! down to [`MIN_NAMED_LEN`] characters: from [`MIN_SECRET_LEN`] on wherever it appears, and
//! shorter ones only as a whole word (between characters that are not letters or digits), so
//! a three-character password in a task's name is masked and the same letters inside other
//! words are not. Below [`MIN_NAMED_LEN`] a value is not masked as a literal (masking every
//! `a` or `1` would destroy every message, and such a password protects nothing); the key
//! forms below still mask it.
//!
//! The key forms. A key is a name (letters, digits, `_`, `-`) holding `password`, `passwd`,
//! `passphrase`, `secret`, `token`, `credential`, `private_key` or `api_key`, or with `pass`
//! as a whole part of it (`pass`, `db_pass`, `RABBIT_PASS`, `dbPass`; never `passed`,
//! `bypass`, `compass`). Its value is masked when the key is followed by:
//! - `=` or `:` (after an optional closing quote and blanks): the value up to a blank, `,`,
//!   `;` or `}`; a quoted value to its closing quote (escapes and YAML's `''` followed),
//!   also when JSON puts it on the next line (`{"password":\n "x"}`); nothing on the line
//!   (or a YAML block indicator `|`/`>`): every following line indented deeper than the
//!   key's line (`password:\n  x`); `true`/`false` stay;
//! - blanks and a word on the same line: as an option (`--password x`, unless the word is
//!   another option) or an environment variable (`OS_PASSWORD x`) always; after a bare key
//!   (`token x`) only when the word looks like a credential (six characters or more, not a
//!   path or a `dash-separated-name`, and mixing at least two of lower case after the first
//!   letter, upper case, digits and symbols, or 16 hexadecimal digits, or 32 characters),
//!   so that `unexpected token in JSON` and `password authentication failed` stay whole;
//! - `<password>x</password>`: the element's text.
//!
//! HTTP credentials: `Authorization: Bearer x` (and `Proxy-Authorization`) keeps the scheme
//! and masks the credential; a bare `Bearer x` or `Basic x` masks a word that looks like a
//! credential.
//!
//! [`Redactor::redact_config`] does the same for an oslo.config file, knowing its lines: an
//! option whose value is secret is masked to the end of the line (continuations included), and
//! a file that came whole from a Secret has every value masked.

use std::collections::BTreeSet;
use std::ops::Range;

/// The mask written in place of a secret.
pub const MASK: &str = "********";

/// Keeps secret values out of printed text; see the module documentation.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Masked wherever they appear; longest first, so a secret that contains another is
    /// masked whole.
    secrets: Vec<String>,
    /// Short values of secret-named variables, masked only as whole words; longest first.
    words: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .field("words", &self.words.len())
            .finish()
    }
}

/// Values shorter than this are not masked as literals wherever they appear: "true", "admin"
/// or "1" would mask half of every message.
pub const MIN_SECRET_LEN: usize = 6;

/// Values of secret-named variables are masked as whole words from this length on (see the
/// module documentation).
pub const MIN_NAMED_LEN: usize = 3;

/// Key fragments that mark a value as secret (compared lowercase, `-` read as `_`).
/// `transport_url` is not one: its credentials are a URL's password, masked as such, and its
/// host is what people debug.
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "private_key",
    "privatekey",
    "api_key",
    "apikey",
];

/// Key words that mark a value as secret only as a whole part of a name (`db_pass`, `dbPass`),
/// never inside another word (`passed`, `bypass`).
const SECRET_PARTS: &[&str] = &["pass"];

/// `text` with every secret the key forms, URLs and PEM blocks show masked (what
/// [`Redactor::default()`] masks), borrowed when it cannot hold one: the check for the
/// messages everything builds (readiness's conditions, by the hundred thousand), most of
/// which name no key and no URL.
pub fn scrub(text: &str) -> std::borrow::Cow<'_, str> {
    if may_hold_secret(text) {
        std::borrow::Cow::Owned(Redactor::default().redact(text))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Every key [`SECRET_KEYS`] and [`SECRET_PARTS`] name, and every HTTP scheme the key forms
/// know, holds one of these (compared without case; a unit test keeps them in step): `pass`
/// covers password, passwd, passphrase; `key` private_key and api_key; `auth` authorization.
const STEMS: &[&[u8]] = &[b"pass", b"secret", b"token", b"credential", b"key", b"auth", b"bearer", b"basic"];

/// Whether [`Redactor::default()`] could mask anything in `text`: a URL, a PEM block, or a
/// word a key form starts with. A cheap test (one pass over the bytes, no copy), never wrong
/// the other way.
pub fn may_hold_secret(text: &str) -> bool {
    if text.contains("://") || text.contains("-----BEGIN") {
        return true;
    }
    let b = text.as_bytes();
    // Readiness asks this of every condition message (hundreds of thousands an evaluation):
    // one match on each byte's letter (`| 0x20` lowers ASCII letters) picks the few positions
    // worth comparing.
    (0..b.len()).any(|i| match b[i] | 0x20 {
        b'p' | b's' | b't' | b'c' | b'k' | b'a' | b'b' => {
            let rest = &b[i..];
            STEMS.iter().any(|stem| rest.len() >= stem.len() && rest[..stem.len()].eq_ignore_ascii_case(stem))
        }
        _ => false,
    })
}

impl Redactor {
    /// A redactor for these secret values (every value of the Secrets read): literals of at
    /// least [`MIN_SECRET_LEN`] characters.
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets = BTreeSet::new();
        for v in values {
            literals_of(&v, &mut secrets);
        }
        let mut r = Redactor { secrets: with_quoted_forms(secrets), words: Vec::new() };
        r.sort();
        r
    }

    /// Adds the values of secret-named variables (extra vars, inventory variables): each is a
    /// secret whatever its length, masked down to [`MIN_NAMED_LEN`] characters (shorter than
    /// [`MIN_SECRET_LEN`]: as a whole word), and its pieces as [`Redactor::new`]'s.
    pub fn with_named(mut self, values: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets = BTreeSet::new();
        let mut words = BTreeSet::new();
        for v in values {
            literals_of(&v, &mut secrets);
            let whole = v.trim();
            match whole.chars().count() {
                n if n >= MIN_SECRET_LEN => {
                    secrets.insert(whole.to_string());
                }
                n if n >= MIN_NAMED_LEN => {
                    words.insert(whole.to_string());
                }
                _ => {}
            }
        }
        self.secrets.extend(with_quoted_forms(secrets));
        self.words.extend(with_quoted_forms(words));
        self.sort();
        self
    }

    fn sort(&mut self) {
        for list in [&mut self.secrets, &mut self.words] {
            list.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
            list.dedup();
        }
    }

    /// Whether a variable with this name holds a secret, by its name.
    pub fn is_secret_name(name: &str) -> bool {
        let l = name.to_ascii_lowercase().replace('-', "_");
        SECRET_KEYS.iter().any(|k| l.contains(k))
            || name_parts(name).any(|p| SECRET_PARTS.contains(&p.as_str()))
    }

    /// Masks every secret in free text.
    pub fn redact(&self, text: &str) -> String {
        let mut s = text.to_string();
        for secret in &self.secrets {
            if s.contains(secret.as_str()) {
                s = s.replace(secret.as_str(), MASK);
            }
        }
        for word in &self.words {
            if s.contains(word.as_str()) {
                s = replace_words(&s, word);
            }
        }
        let s = mask_pem(&s);
        let s = mask_url_userinfo(&s);
        mask_keyed_values(&s)
    }

    /// Masks every secret in an oslo.config (INI) file. `whole` says the file came from a
    /// Secret: every option value and comment is masked, sections and keys stay. `exact` are
    /// values known to be secret whatever their length (a template's password): an option
    /// whose value is one of them is masked.
    #[allow(
        clippy::too_many_lines,
        reason = "one pass over the lines; whether a continuation line is masked carries from line to line"
    )]
    pub fn redact_config(&self, text: &str, whole: bool, exact: &[String]) -> String {
        let mut out = String::with_capacity(text.len());
        // Whether the option whose continuation lines follow is being masked.
        let mut masking = false;
        for line in text.split_inclusive('\n') {
            let body = line.trim_end_matches(['\n', '\r']);
            let eol = &line[body.len()..];
            let trimmed = body.trim();
            if trimmed.is_empty() || trimmed.starts_with('[') {
                masking = false;
                out.push_str(line);
                continue;
            }
            if trimmed.starts_with(['#', ';']) {
                if whole && trimmed.len() > 1 {
                    out.push_str(&body[..body.len() - body.trim_start().len() + 1]);
                    out.push(' ');
                    out.push_str(MASK);
                    out.push_str(eol);
                } else {
                    out.push_str(line);
                }
                continue;
            }
            if body.starts_with([' ', '\t']) {
                // A continuation line belongs to the option above.
                if masking {
                    out.push_str(&body[..body.len() - body.trim_start().len()]);
                    out.push_str(MASK);
                    out.push_str(eol);
                } else {
                    out.push_str(line);
                }
                continue;
            }
            // oslo splits at the first ':' or '='.
            match body.find([':', '=']) {
                Some(i) => {
                    let (key, value) = (&body[..i], body[i + 1..].trim());
                    masking = whole
                        || (Redactor::is_secret_name(key.trim()) && !is_flag(value))
                        || (exact.iter().any(|s| s.trim() == value && !value.is_empty())
                            // A URL keeps its host: its password is masked below.
                            && url_passwords(value).is_empty());
                    if masking && !value.is_empty() {
                        let lead = &body[i + 1..body.len() - body[i + 1..].trim_start().len()];
                        out.push_str(&body[..=i]);
                        out.push_str(lead);
                        out.push_str(MASK);
                        out.push_str(eol);
                    } else {
                        out.push_str(line);
                    }
                }
                // Not an option (oslo would refuse the file): the whole line may be a value.
                None if whole => {
                    masking = false;
                    out.push_str(MASK);
                    out.push_str(eol);
                }
                None => {
                    masking = false;
                    out.push_str(line);
                }
            }
        }
        self.redact(&out)
    }

    /// Masks every string inside a JSON value (explain's values).
    pub fn redact_json(&self, v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(self.redact(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.redact_json(x)).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, x)| (k.clone(), self.redact_json(x))).collect())
            }
            other => other.clone(),
        }
    }
}

/// A boolean is no credential, whatever its key says (`send_service_user_token = true`).
fn is_flag(value: &str) -> bool {
    ["true", "false"].iter().any(|f| value.trim().eq_ignore_ascii_case(f))
}

/// The literals to mask for one secret value: the value, each of its lines, each line's value
/// after `=` or `: ` (a Secret holding a config file or YAML), and its URLs' passwords. A piece
/// that is a URL with a password gives only the password, so the host stays readable.
fn literals_of(value: &str, out: &mut BTreeSet<String>) {
    let mut add = |piece: &str| {
        let piece = piece.trim().trim_matches(['"', '\'']).trim();
        if piece.chars().count() < MIN_SECRET_LEN || piece.starts_with("-----") {
            return;
        }
        if url_passwords(piece).is_empty() || piece.contains(char::is_whitespace) {
            out.insert(piece.to_string());
        }
    };
    add(value);
    for line in value.lines() {
        let t = line.trim();
        // Section headers and comments are structure, not secrets: `[DEFAULT]` must stay
        // readable everywhere else.
        if t.starts_with(['[', '#', ';']) {
            continue;
        }
        add(t);
        // `key = value` or `key: value`; a URL's own `=` and `:` (query, port) are not that.
        let key_end = t.find("://").unwrap_or(t.len());
        match (t[..key_end].find('='), t[..key_end].find(": ")) {
            (Some(i), _) => add(&t[i + 1..]),
            (None, Some(i)) => add(&t[i + 2..]),
            (None, None) => {}
        }
    }
    for p in url_passwords(value) {
        if p.chars().count() >= MIN_SECRET_LEN {
            out.insert(p.to_string());
        }
    }
}

/// Where each URL's authority is: after `://`, up to the first `/`, `?`, `#`, whitespace,
/// quote or angle bracket (RFC 3986; the quotes and brackets end a URL inside other text).
/// A password may hold `/`, `?` or `#` unencoded (SQLAlchemy's URL pattern takes anything up
/// to the last `@`): when the authority so far holds a `:` and an `@` follows before the URL
/// ends, the authority runs past that last `@`. This may over-mask a URL with an `@` in its
/// query, never under-mask a password.
fn authority_end(tail: &str) -> usize {
    let hard =
        tail.find(|c: char| matches!(c, '"' | '\'' | '<' | '>') || c.is_whitespace()).unwrap_or(tail.len());
    let span = &tail[..hard];
    let plain = span.find(['/', '?', '#']).unwrap_or(span.len());
    let from = match span.rfind('@') {
        Some(at) if at > plain && span[..plain].contains(':') => at + 1,
        _ => 0,
    };
    from + span[from..].find(['/', '?', '#']).unwrap_or(span.len() - from)
}

/// Whether a password-less URL user name looks like a token rather than an account name.
fn looks_like_token(user: &str) -> bool {
    !user.is_empty()
        && !user.starts_with('%')
        && (user.len() >= 12 || user.bytes().any(|b| b.is_ascii_digit()))
}

/// The password of every URL in `s`, including each host of a multi-host URL
/// (`rabbit://u:p1@h1,u:p2@h2/`, as oslo.messaging writes them).
fn url_passwords(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let tail = &rest[i + 3..];
        let end = authority_end(tail);
        for part in tail[..end].split(',') {
            if let Some(at) = part.rfind('@')
                && let Some(colon) = part[..at].find(':')
                && colon + 1 < at
            {
                out.push(&part[colon + 1..at]);
            }
        }
        rest = &tail[end..];
    }
    out
}

/// `scheme://user:password@host` → `scheme://user:********@host`, for each host of a
/// multi-host URL. A URL without a password is left as it is.
fn mask_url_userinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = authority_end(tail);
        for (n, part) in tail[..end].split(',').enumerate() {
            if n > 0 {
                out.push(',');
            }
            let at = part.rfind('@');
            match at.and_then(|at| part[..at].find(':').map(|colon| (colon, at))) {
                Some((colon, at)) if colon + 1 < at => {
                    out.push_str(&part[..=colon]);
                    out.push_str(MASK);
                    out.push_str(&part[at..]);
                }
                // Userinfo without a password is sometimes a token standing in for one
                // (`redis://TOKEN@host`): masked whole when it looks like one (a digit, or 12
                // characters and more), so that `qemu+ssh://nova@…` keeps its user name.
                None if at.is_some_and(|at| looks_like_token(&part[..at])) => {
                    out.push_str(MASK);
                    out.push_str(&part[at.unwrap_or(0)..]);
                }
                _ => out.push_str(part),
            }
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Collects the values of secret-named keys anywhere in `v` (an inventory, extra vars): every
/// string (and number) under such a key, however deeply nested.
pub fn secret_values(v: &serde_json::Value, out: &mut Vec<String>) {
    fn all_strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            // `db_password: 12345678` is a password too (a boolean is not).
            serde_json::Value::Number(n) => out.push(n.to_string()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| all_strings(x, out)),
            serde_json::Value::Object(m) => m.values().for_each(|x| all_strings(x, out)),
            _ => {}
        }
    }
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if Redactor::is_secret_name(k) {
                    all_strings(x, out);
                } else {
                    secret_values(x, out);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| secret_values(x, out)),
        _ => {}
    }
}

fn mask_pem(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("-----BEGIN") {
        let header_end = rest[start + 10..].find("-----").map(|i| start + 10 + i + 5);
        let Some(header_end) = header_end else { break };
        if !rest[start..header_end].contains("PRIVATE KEY") {
            out.push_str(&rest[..header_end]);
            rest = &rest[header_end..];
            continue;
        }
        out.push_str(&rest[..header_end]);
        out.push_str(MASK);
        match rest[header_end..].find("-----END") {
            Some(end) => rest = &rest[header_end + end..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The parts of a name, lowercase: split at every character that is not a letter or digit
/// and where a lower-case letter meets an upper-case one (`dbPass` → `db`, `pass`).
fn name_parts(name: &str) -> impl Iterator<Item = String> + '_ {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            parts.push(std::mem::take(&mut cur));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            parts.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    parts.push(cur);
    parts.into_iter().filter(|p| !p.is_empty())
}

/// `word` masked where it stands as a whole word: the characters around it are not letters
/// or digits (or it starts or ends with one that is not).
fn replace_words(s: &str, word: &str) -> String {
    let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let first_alnum = alnum(word.chars().next());
    let last_alnum = alnum(word.chars().next_back());
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut before: Option<char> = None;
    while let Some(i) = rest.find(word) {
        let prev = if i == 0 { before } else { rest[..i].chars().next_back() };
        let next = rest[i + word.len()..].chars().next();
        out.push_str(&rest[..i]);
        if (first_alnum && alnum(prev)) || (last_alnum && alnum(next)) {
            // Part of a longer word: keep its first character and look again after it.
            let c = rest[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&rest[i..i + c]);
            before = rest[i..i + c].chars().next_back();
            rest = &rest[i + c..];
        } else {
            out.push_str(MASK);
            before = MASK.chars().next_back();
            rest = &rest[i + word.len()..];
        }
    }
    out.push_str(rest);
    out
}

/// Each literal, and the forms quoting gives it on its way into a message: JSON's (and YAML's
/// double-quoted) escapes, once and twice (JSON in a JSON string), Python's `repr`, YAML's
/// single quotes, shell quoting, URL percent-encoding. Only forms that differ are added.
fn with_quoted_forms(literals: BTreeSet<String>) -> Vec<String> {
    let mut out = BTreeSet::new();
    for l in literals {
        let json = |s: &str| {
            let q = serde_json::to_string(s).unwrap_or_default();
            q[1..q.len().saturating_sub(1).max(1)].to_string()
        };
        let once = json(&l);
        let twice = json(&once);
        let python = |escape_single: bool| {
            let mut o = String::with_capacity(l.len() + 8);
            for c in l.chars() {
                match c {
                    '\\' => o.push_str("\\\\"),
                    '\'' if escape_single => o.push_str("\\'"),
                    '\n' => o.push_str("\\n"),
                    '\r' => o.push_str("\\r"),
                    '\t' => o.push_str("\\t"),
                    c if (c as u32) < 0x20 || c == '\u{7f}' => o.push_str(&format!("\\x{:02x}", c as u32)),
                    c => o.push(c),
                }
            }
            o
        };
        let shell_double: String = l
            .chars()
            .flat_map(|c| match c {
                '\\' | '"' | '$' | '`' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let percent: String = l
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                b => format!("%{b:02X}"),
            })
            .collect();
        for form in [
            once,
            twice,
            python(true),
            python(false),
            l.replace('\'', "''"),
            l.replace('\'', "'\"'\"'"),
            l.replace('\'', "'\\''"),
            shell_double,
            percent,
        ] {
            if form != l && !form.is_empty() {
                out.insert(form);
            }
        }
        out.insert(l);
    }
    out.into_iter().collect()
}

/// What a name found in free text is, for masking the value after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// A secret-sounding name: `option` when written `--name`/`-name`, `env` when an
    /// environment variable's (`OS_PASSWORD`).
    Secret { option: bool, env: bool },
    /// `Authorization`, `Proxy-Authorization`: a scheme, then the credential.
    Authorization,
    /// `Bearer`, `Basic` on their own: a credential may follow.
    Scheme,
}

fn key_kind(name: &str) -> Option<Key> {
    let bare = name.trim_start_matches('-');
    let lower = bare.to_ascii_lowercase().replace('-', "_");
    if lower == "authorization" || lower.ends_with("_authorization") {
        return Some(Key::Authorization);
    }
    if Redactor::is_secret_name(bare) {
        let env = bare.starts_with(|c: char| c.is_ascii_uppercase())
            && bare.contains('_')
            && bare.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        return Some(Key::Secret { option: name.starts_with('-'), env });
    }
    (bare == name && (lower == "bearer" || lower == "basic")).then_some(Key::Scheme)
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether a word after a bare key (`token x`) looks like a credential rather than a word of
/// a sentence: see the module documentation.
fn looks_like_credential(word: &str) -> bool {
    let w = word.trim_matches(|c: char| "'\"`([{<>)]}.,;:!?".contains(c));
    let n = w.chars().count();
    if n < MIN_SECRET_LEN || w.starts_with('/') || w.contains("://") {
        return false;
    }
    let name_like = w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && w.contains(['-', '.']);
    if name_like {
        return false;
    }
    let mut chars = w.chars();
    let first = chars.next().unwrap_or(' ');
    let rest: Vec<char> = chars.collect();
    // A capitalised word ("Unauthorized") is a word.
    let capitalised = first.is_ascii_uppercase() && rest.iter().all(|c| c.is_ascii_lowercase());
    let lower = w.chars().any(|c| c.is_ascii_lowercase());
    let upper = rest.iter().any(|c| c.is_ascii_uppercase()) || (first.is_ascii_uppercase() && !capitalised);
    let digit = w.chars().any(|c| c.is_ascii_digit());
    let symbol = w.chars().any(|c| !c.is_alphanumeric() && !matches!(c, '-' | '_' | '.'));
    let classes = [lower, upper, digit, symbol].iter().filter(|x| **x).count();
    !capitalised && (classes >= 2 || (n >= 16 && w.chars().all(|c| c.is_ascii_hexdigit())) || n >= 32)
}

/// Whether `value`, after a key's `:` or `=`, is an HTTP status with its reason phrase after it
/// (`the credential: 401 Unauthorized`): prose about a request, not a credential. Only a
/// status code (100–599) followed on the same line by the first word of a standard reason
/// phrase qualifies, so that `password: 401` alone, or `password=401 x`, is still masked.
fn is_http_status(value: &str, rest: &str) -> bool {
    const REASONS: &[&str] = &[
        "Continue",
        "Switching",
        "OK",
        "Created",
        "Accepted",
        "Non-Authoritative",
        "No",
        "Reset",
        "Partial",
        "Multiple",
        "Moved",
        "Found",
        "See",
        "Not",
        "Use",
        "Temporary",
        "Permanent",
        "Bad",
        "Unauthorized",
        "Payment",
        "Forbidden",
        "Method",
        "Proxy",
        "Request",
        "Conflict",
        "Gone",
        "Length",
        "Precondition",
        "Content",
        "Payload",
        "URI",
        "Unsupported",
        "Range",
        "Expectation",
        "Misdirected",
        "Unprocessable",
        "Locked",
        "Failed",
        "Too",
        "Upgrade",
        "Unavailable",
        "Internal",
        "Service",
        "Gateway",
        "HTTP",
        "Insufficient",
        "Loop",
        "Network",
    ];
    let status = value.len() == 3
        && value.bytes().all(|b| b.is_ascii_digit())
        && value.parse::<u16>().is_ok_and(|c| (100..600).contains(&c));
    let Some(after) = rest.strip_prefix([' ', '\t']) else { return false };
    let word: &str = after.split(|c: char| !c.is_ascii_alphanumeric() && c != '-').next().unwrap_or("");
    status && REASONS.contains(&word)
}

/// The indentation (spaces and tabs) of the line `at` is on.
fn line_indent(s: &str, at: usize) -> usize {
    let start = s[..at].rfind('\n').map_or(0, |i| i + 1);
    s[start..].bytes().take_while(|b| *b == b' ' || *b == b'\t').count()
}

/// The content of a quoted value starting at its quote `q`: up to the closing quote, a
/// backslash escaping the next character in `"…"`, `''` standing for `'` in `'…'` (YAML);
/// without a closing quote, to the end of the text.
fn quoted_span(s: &str, q: usize) -> Range<usize> {
    let b = s.as_bytes();
    let quote = b[q];
    let mut i = q + 1;
    while i < b.len() {
        match b[i] {
            b'\\' if quote == b'"' => i += 2,
            c if c == quote => {
                if quote == b'\'' && b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                    continue;
                }
                return q + 1..i;
            }
            _ => i += 1,
        }
    }
    q + 1..s.len()
}

/// The lines after the one `from` is on that are indented deeper than `indent` (blank lines
/// among them included): each line's content, without its indentation.
fn block_spans(s: &str, from: usize, indent: usize) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let Some(nl) = s[from..].find('\n') else { return spans };
    let mut line = from + nl + 1;
    while line < s.len() {
        let end = s[line..].find('\n').map_or(s.len(), |i| line + i);
        let body = s[line..end].trim_end_matches('\r');
        let lead = body.len() - body.trim_start_matches([' ', '\t']).len();
        if body.trim().is_empty() {
            line = end + 1;
            continue;
        }
        if lead <= indent {
            break;
        }
        spans.push(line + lead..line + body.len());
        line = end + 1;
    }
    spans
}

/// The lines after the one `from` is on that are YAML list items at `indent` (`- x`): each
/// item's content.
fn list_spans(s: &str, from: usize, indent: usize) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let Some(nl) = s[from..].find('\n') else { return spans };
    let mut line = from + nl + 1;
    while line < s.len() {
        let end = s[line..].find('\n').map_or(s.len(), |i| line + i);
        let body = s[line..end].trim_end_matches('\r');
        let lead = body.len() - body.trim_start_matches([' ', '\t']).len();
        let item = body[lead..]
            .strip_prefix("- ")
            .or_else(|| body[lead..].strip_prefix('-').filter(|r| r.is_empty()));
        match item {
            Some(rest) if lead == indent => {
                let content_start = line + body.len() - rest.len();
                spans.push(content_start..line + body.len());
                line = end + 1;
            }
            _ => break,
        }
    }
    spans
}

/// `secret: nova-cell1-compute-config`, `secretName: ceph-conf-files`: a key that names a
/// Kubernetes Secret (not one of its values) followed by an object name. Operators need that
/// name to find what is wrong; a password does not look like one (lower case, `-` or `.` in
/// it, at most 253 characters).
fn names_an_object(key: &str, value: &str) -> bool {
    let k: String = key.chars().filter(|c| *c != '-' && *c != '_').collect::<String>().to_ascii_lowercase();
    matches!(k.as_str(), "secret" | "secrets" | "secretname" | "secretref")
        && value.len() <= 253
        && value.contains(['-', '.'])
        && value.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// The word at `at` on its line (up to a blank), without the quotes and punctuation that end
/// a sentence or close a quote around it.
fn word_at(s: &str, at: usize) -> Range<usize> {
    let end = s[at..].find(char::is_whitespace).map_or(s.len(), |i| at + i);
    let core = s[at..end].trim_end_matches(|c: char| "'\"`)]}>,;.!?".contains(c));
    let lead = core.len() - core.trim_start_matches(['\'', '"', '`', '(', '[', '<']).len();
    at + lead..at + core.len()
}

/// A span to mask, unless it is empty.
fn one(r: Range<usize>) -> Vec<Range<usize>> {
    if r.is_empty() { Vec::new() } else { std::iter::once(r).collect() }
}

/// What to mask after the key at `key` (`start..end`), and where scanning goes on.
#[allow(
    clippy::too_many_lines,
    reason = "a byte scanner over one value's forms (quoted, flow, block); its states share the position"
)]
fn keyed_spans(s: &str, start: usize, end: usize, key: Key) -> (Vec<Range<usize>>, usize) {
    let b = s.as_bytes();
    let blank = |i: usize| i < b.len() && (b[i] == b' ' || b[i] == b'\t');
    let mut p = end;
    let quoted_key = p < b.len() && (b[p] == b'"' || b[p] == b'\'');
    if quoted_key {
        p += 1;
    }
    let after_key = p;
    while blank(p) {
        p += 1;
    }
    let none = (Vec::new(), end);
    let Some(&c) = b.get(p) else { return none };
    if (c == b'=' || c == b':') && key != Key::Scheme {
        if s[p..].starts_with("://") || s[p..].starts_with("::") {
            return none;
        }
        p += 1;
        while blank(p) {
            p += 1;
        }
        let Some(&v) = b.get(p) else { return none };
        let indent = line_indent(s, start);
        if v == b'\n' || v == b'\r' {
            // The value is on the next lines: a JSON value after blank lines, or a YAML block.
            let next = s[p..].find(|c: char| !c.is_whitespace()).map(|i| p + i);
            if let Some(q) = next
                && (b[q] == b'"' || b[q] == b'\'')
                && (quoted_key || line_indent(s, q) > indent)
            {
                let span = quoted_span(s, q);
                let resume = (span.end + 1).min(s.len());
                return (one(span), resume);
            }
            let mut spans = block_spans(s, p, indent);
            if spans.is_empty() {
                // YAML lets a list stand at the key's own indentation: `password:\n- x`.
                spans = list_spans(s, p, indent);
            }
            let resume = spans.last().map_or(p, |r| r.end);
            return (spans, resume);
        }
        if v == b'[' {
            // A flow list, `passwords: [a, b]`: all of it.
            let close = s[p..].find(']').map_or(s.len(), |i| p + i);
            return (one(p + 1..close), (close + 1).min(s.len()));
        }
        if v == b'"' || v == b'\'' {
            let span = quoted_span(s, p);
            let resume = (span.end + 1).min(s.len());
            if span.is_empty() || is_flag(&s[span.clone()]) {
                return (Vec::new(), resume);
            }
            return (one(span), resume);
        }
        let value_end = s[p..]
            .find(|c: char| c.is_whitespace() || c == ',' || c == '}' || c == ';')
            .map_or(s.len(), |i| p + i);
        let value = &s[p..value_end];
        // A YAML block scalar: `password: |` then the indented lines.
        if (value.starts_with('|') || value.starts_with('>'))
            && value[1..].chars().all(|c| c == '-' || c == '+' || c.is_ascii_digit())
            && s[value_end..].trim_start_matches([' ', '\t']).starts_with(['\n', '\r'])
        {
            let spans = block_spans(s, value_end, indent);
            let resume = spans.last().map_or(value_end, |r| r.end);
            return (spans, resume);
        }
        if key == Key::Authorization {
            // `Authorization: Bearer x`: the scheme stays, the credential goes.
            let mut q = value_end;
            while blank(q) {
                q += 1;
            }
            if value.chars().all(|c| c.is_ascii_alphabetic()) && q > value_end && q < b.len() && b[q] != b'\n'
            {
                let w = word_at(s, q);
                let resume = w.end;
                return (one(w), resume);
            }
        }
        if value.is_empty()
            || is_flag(value)
            || names_an_object(&s[start..end], value)
            || is_http_status(value, &s[value_end..])
        {
            return (Vec::new(), value_end);
        }
        return (one(p..value_end), value_end);
    }
    if c == b'>' && !quoted_key && start > 0 && b[start - 1] == b'<' && matches!(key, Key::Secret { .. }) {
        // `<password>x</password>`.
        let from = p + 1;
        let to = s[from..].find('<').map_or(s.len(), |i| from + i);
        return (one(from..to), to);
    }
    if p > after_key && c != b'\n' && c != b'\r' {
        // `--password x`, `OS_PASSWORD x`, `token x`, `Bearer x`.
        let w = word_at(s, p);
        let word = &s[w.clone()];
        let mask = match key {
            Key::Secret { option: true, .. } => !word.is_empty() && !word.starts_with('-'),
            Key::Secret { env: true, .. } => !word.is_empty(),
            Key::Secret { .. } | Key::Scheme => looks_like_credential(word),
            Key::Authorization => false,
        };
        if mask {
            return (one(w.clone()), w.end);
        }
    }
    none
}

/// The value after every secret-sounding key in free text, masked: see the module
/// documentation for the forms.
fn mask_keyed_values(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if !is_name_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_name_byte(b[i]) {
            i += 1;
        }
        // A URL's path segment (`/v3/auth/tokens: 401`) names no value.
        if start > 0 && b[start - 1] == b'/' {
            continue;
        }
        let Some(key) = key_kind(&s[start..i]) else { continue };
        let (spans, resume) = keyed_spans(s, start, i, key);
        for r in spans {
            if r.start < copied || r.is_empty() {
                continue;
            }
            out.push_str(&s[copied..r.start]);
            out.push_str(MASK);
            copied = r.end;
        }
        i = resume.max(i);
    }
    out.push_str(&s[copied..]);
    out
}

#[cfg(test)]
mod scrub_tests {
    use super::*;

    #[test]
    fn lists_and_object_names() {
        let r = Redactor::default();
        assert_eq!(r.redact("passwords: [a1b2c3d4, e5f6g7h8] ok"), "passwords: [********] ok");
        assert_eq!(
            r.redact("password:\n- hunter2x\n- other9x\nnext: 1"),
            "password:\n- ********\n- ********\nnext: 1"
        );
        // Operators need the Secret's name; its values stay masked.
        assert_eq!(
            r.redact("missing secret: nova-cell1-compute-config"),
            "missing secret: nova-cell1-compute-config"
        );
        assert_eq!(r.redact("secretName: ceph-conf-files"), "secretName: ceph-conf-files");
        assert_eq!(r.redact("secret: Hunter2Pass!"), "secret: ********");
        assert_eq!(r.redact("client_secret: a-b-c"), "client_secret: ********");
    }

    #[test]
    fn every_secret_key_holds_a_stem() {
        for k in SECRET_KEYS.iter().chain(SECRET_PARTS).chain(&["authorization", "bearer", "basic"]) {
            assert!(STEMS.iter().any(|s| k.as_bytes().windows(s.len()).any(|w| w == *s)), "{k}");
        }
        assert!(!may_hold_secret("4/5 OpenStack services deployed; nova: Deployment ready for nova service"));
        assert!(may_hold_secret("OS_PASSWORD=x") && may_hold_secret("Authorization: x"));
    }

    proptest::proptest! {
        /// The cheap test never lets through what the redactor would have masked.
        #[test]
        fn scrub_masks_what_the_redactor_masks(
            words in proptest::collection::vec(
                proptest::sample::select(vec!["password", "Token", "x", "=", ": ", "\n  ", "://", "u:p@h",
                    "db_pass", "Bearer", "abcDEF123456", "--password", "OS_PASSWORD", "-----BEGIN", "key", "private_key",
                    "Authorization", "secret", "é", "\u{1b}", " "]), 0..12)
        ) {
            let text: String = words.concat();
            proptest::prop_assert_eq!(scrub(&text).into_owned(), Redactor::default().redact(&text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let r = Redactor::new(["-----BEGIN KEY\nAAAAlinekeydata\n".to_string(), "abc".to_string()]);
        let cases = [
            ("db_password: 'p w'", "db_password: '********'"),
            ("--os-password=x1 next", "--os-password=******** next"),
            (
                "{\"transport_url\": \"rabbit://u:p@h:5672/\"}",
                "{\"transport_url\": \"rabbit://u:********@h:5672/\"}",
            ),
            ("user=admin", "user=admin"),
            ("send_service_user_token = True, token: false", "send_service_user_token = True, token: false"),
            ("abc is short", "abc is short"),
            ("got AAAAlinekeydata", "got ********"),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
                "-----BEGIN RSA PRIVATE KEY-----********-----END RSA PRIVATE KEY-----",
            ),
            ("https://example.com:443/path", "https://example.com:443/path"),
            ("no secret here: password", "no secret here: password"),
        ];
        for (input, want) in cases {
            assert_eq!(r.redact(input), want, "{input}");
        }
    }

    #[test]
    fn every_key_form_masks_its_value_with_no_value_known() {
        let r = Redactor::default();
        let cases = [
            // A YAML value on the next, deeper line (also a block scalar), then the next key.
            (
                "config:\n  password:\n    LeakNext1\n  user: nova",
                "config:\n  password:\n    ********\n  user: nova",
            ),
            ("password: |\n  line one\n  line two\nnext: x", "password: |\n  ********\n  ********\nnext: x"),
            ("password:\nuser: nova", "password:\nuser: nova"),
            ("password:\tLeakTab2 next", "password:\t******** next"),
            // JSON, with blanks and newlines between the key and its value, escapes followed.
            ("{\"password\":\n \"LeakJson3\"}", "{\"password\":\n \"********\"}"),
            (
                "{\"db_password\": \"a\\\"b c\", \"user\": \"nova\"}",
                "{\"db_password\": \"********\", \"user\": \"nova\"}",
            ),
            ("{'password': 'it''s x', 'user': 'nova'}", "{'password': '********', 'user': 'nova'}"),
            // Options and environment variables.
            (
                "openstack --os-cloud edpm --password LeakOpt4 server list",
                "openstack --os-cloud edpm --password ******** server list",
            ),
            ("--password --debug", "--password --debug"),
            ("export OS_PASSWORD LeakEnv5", "export OS_PASSWORD ********"),
            ("OS_PASSWORD=LeakEnv5 openstack", "OS_PASSWORD=******** openstack"),
            // A bare key, when what follows looks like a credential.
            ("keystone said: token LeakToken6", "keystone said: token ********"),
            ("token 0123456789abcdef0123", "token ********"),
            // HTTP credentials.
            (
                "curl -H 'Authorization: Bearer LeakBearer7' https://k",
                "curl -H 'Authorization: Bearer ********' https://k",
            ),
            ("Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: Basic ********"),
            ("authorization=LeakRaw9x", "authorization=********"),
            ("sent Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "sent Bearer ********"),
            // `pass` as a whole part of a name.
            ("rabbitmqctl add_user nova pass=LeakPass8", "rabbitmqctl add_user nova pass=********"),
            ("RABBIT_PASS: x1 dbPass=y2", "RABBIT_PASS: ******** dbPass=********"),
            ("<password>Leak10</password>", "<password>********</password>"),
        ];
        for (input, want) in cases {
            assert_eq!(r.redact(input), want, "{input:?}");
        }
    }

    #[test]
    fn ordinary_messages_keep_their_words() {
        let r = Redactor::default();
        for text in [
            "SyntaxError: unexpected token in JSON at position 3",
            "unexpected token '}' at line 2",
            "unexpected token <EOF>",
            "token expired; log in again",
            "Invalid token Unauthorized",
            "password authentication failed for user \"nova\"",
            "Permission denied (publickey,password).",
            "all 3 tests passed: ok=3",
            "bypass=yes compass=north passed=4 passthrough: on",
            "failed to load secret nova-cell1-compute-config",
            "the secret /etc/ceph/ceph.client.openstack.keyring is missing",
            "Basic authentication is disabled",
            "auth_type = password\nauth_url = https://keystone:5000",
            "[keystone_authtoken]\nmemcached_servers = a:11211",
            "missing required arguments: password, username",
            "token_url is https://x",
            "see http://u@host:5000/token?x=1",
            "POST https://keystone:5000/v3/auth/tokens: 401 Unauthorized",
            // An HTTP status after a secret-sounding key is the answer, not the credential.
            "the credential: 401 Unauthorized",
            "keystone rejected the token: 401 Unauthorized (request id req-1)",
            "api_key=503 Service Unavailable",
            "credential: 404 Not Found",
        ] {
            assert_eq!(r.redact(text), text, "{text:?}");
        }
        // A number alone, or one followed by anything else, is still a value.
        for (text, want) in [
            ("password: 401", "password: ********"),
            ("password: 401 x", "password: ******** x"),
            ("password=999 Unauthorized", "password=******** Unauthorized"),
            ("token: 4011 Unauthorized", "token: ******** Unauthorized"),
        ] {
            assert_eq!(r.redact(text), want, "{text:?}");
        }
    }

    #[test]
    fn named_values_are_masked_at_any_length_from_three_and_in_every_quoted_form() {
        let r = Redactor::default().with_named([
            "Qu'ot\"e\\dPw9".to_string(),
            "Zq7".to_string(),
            "ab".to_string(),
            "two\nlines".to_string(),
        ]);
        let cases = [
            ("deploy Qu'ot\"e\\dPw9 as Zq7", "deploy ******** as ********"),
            // Three characters: only as a whole word.
            ("Zq7 and xZq7 and Zq7x and Zq7.", "******** and xZq7 and Zq7x and ********."),
            // Two: not a literal.
            ("ab abc", "ab abc"),
            // JSON (once and twice), Python's repr, shell and YAML quoting, percent-encoding.
            ("{\"cfg\": \"Qu'ot\\\"e\\\\dPw9\"}", "{\"cfg\": \"********\"}"),
            ("\"{\\\"cfg\\\": \\\"Qu'ot\\\\\\\"e\\\\\\\\dPw9\\\"}\"", "\"{\\\"cfg\\\": \\\"********\\\"}\""),
            ("['Qu\\'ot\"e\\\\dPw9']", "['********']"),
            ("mysql -p'Qu'\"'\"'ot\"e\\dPw9'", "mysql -p'********'"),
            ("mysql -p'Qu'\\''ot\"e\\dPw9'", "mysql -p'********'"),
            ("x: 'Qu''ot\"e\\dPw9'", "x: '********'"),
            ("db://u:Qu%27ot%22e%5CdPw9@h/", "db://u:********@h/"),
            ("\"two\\nlines\"", "\"********\""),
        ];
        for (input, want) in cases {
            assert_eq!(r.redact(input), want, "{input:?}");
        }
        assert!(!format!("{r:?}").contains("Zq7"), "Debug never prints secrets");
    }

    #[test]
    fn secret_names_by_part() {
        for name in [
            "db_password",
            "OS_PASSWORD",
            "api-token",
            "pass",
            "db_pass",
            "RABBIT_PASS",
            "dbPass",
            "ssh-private-key",
            "passphrase",
        ] {
            assert!(Redactor::is_secret_name(name), "{name}");
        }
        for name in ["passed", "bypass", "compass", "passthrough", "user", "transport_url"] {
            assert!(!Redactor::is_secret_name(name), "{name}");
        }
        let mut found = Vec::new();
        secret_values(
            &serde_json::json!({"db_pass": 123456, "flag_password": true, "x": {"token": ["t1"]}}),
            &mut found,
        );
        assert_eq!(found, ["123456", "t1"]);
    }

    #[test]
    fn url_userinfo_keeps_scheme_user_host_port_and_path() {
        let r = Redactor::default();
        let cases = [
            ("https://user:pass@host", "https://user:********@host"),
            ("redis://:s3cr3t@redis.svc:6379/0", "redis://:********@redis.svc:6379/0"),
            (
                "mysql+pymysql://nova:pw@db.svc/nova?read_default_file=x",
                "mysql+pymysql://nova:********@db.svc/nova?read_default_file=x",
            ),
            (
                "rabbit://u:p1@h1:5672,v:p2@h2:5672/vhost",
                "rabbit://u:********@h1:5672,v:********@h2:5672/vhost",
            ),
            ("x = 'amqp://u:p@h'", "x = 'amqp://u:********@h'"),
            ("see <http://a:b@c>", "see <http://a:********@c>"),
            ("p@ss in user:p@ss@host", "p@ss in user:p@ss@host"),
            ("http://u:p@ss@host/x", "http://u:********@host/x"),
            ("qemu+ssh://nova@%s/system", "qemu+ssh://nova@%s/system"),
            ("mysql+pymysql://nova:Pa/ss#word9@db.svc/nova", "mysql+pymysql://nova:********@db.svc/nova"),
            (
                "mysql+pymysql://nova:a?b@db/nova?charset=utf8",
                "mysql+pymysql://nova:********@db/nova?charset=utf8",
            ),
            ("redis://TokenOnlyUser123@redis.svc", "redis://********@redis.svc"),
            ("https://ghp_abcdefghijklmnop@github.com/x", "https://********@github.com/x"),
            ("ssh://root@host/path", "ssh://root@host/path"),
            ("http://host/a@b:c", "http://host/a@b:c"),
            ("http://user:@host", "http://user:@host"),
            ("two http://a:b@c and ftp://d:e@f", "two http://a:********@c and ftp://d:********@f"),
        ];
        for (input, want) in cases {
            assert_eq!(r.redact(input), want, "{input}");
        }
    }

    #[test]
    fn literals_cover_pieces_of_secret_values() {
        let r = Redactor::new([
            "[DEFAULT]\nmetadata_proxy_shared_secret = Zeta-shared-42\n# comment line here\n".to_string(),
            "rabbit://cell-user:RabbitPass99@rabbit.svc:5672/?ssl=1".to_string(),
            "ZmFrZS1rZXktZm9yLWV4YW1wbGVz==".to_string(),
            "db_user: nova\ndb_pass: \"Quoted-Value-7\"\n".to_string(),
        ]);
        let text = "[DEFAULT]\nuses Zeta-shared-42 and RabbitPass99 and ZmFrZS1rZXktZm9yLWV4YW1wbGVz== and Quoted-Value-7\nhost rabbit.svc # comment line here";
        let got = r.redact(text);
        assert_eq!(
            got,
            "[DEFAULT]\nuses ******** and ******** and ******** and ********\nhost rabbit.svc # comment line here"
        );
        // The URL from the Secret keeps its host: only the password is a literal.
        assert_eq!(
            r.redact("transport_url = rabbit://cell-user:RabbitPass99@rabbit.svc:5672/?ssl=1"),
            "transport_url = rabbit://cell-user:********@rabbit.svc:5672/?ssl=1"
        );
        assert!(!format!("{r:?}").contains("Zeta"), "Debug never prints secrets");
    }

    #[test]
    fn config_files_mask_to_the_end_of_the_line() {
        let r = Redactor::default();
        let text = "[DEFAULT]\n# a comment\npassword = two words\ndebug = true\nmy_secret_key:\n  cont1\n  cont2\nplain = x\n  cont3\n\n[db]\nconnection = mysql://n:pw@db/nova\nname = s3cret\n";
        assert_eq!(
            r.redact_config(text, false, &["s3cret".to_string()]),
            "[DEFAULT]\n# a comment\npassword = ********\ndebug = true\nmy_secret_key:\n  ********\n  ********\nplain = x\n  cont3\n\n[db]\nconnection = mysql://n:********@db/nova\nname = ********\n"
        );
        assert_eq!(
            r.redact_config(text, true, &[]),
            "[DEFAULT]\n# ********\npassword = ********\ndebug = ********\nmy_secret_key:\n  ********\n  ********\nplain = ********\n  ********\n\n[db]\nconnection = ********\nname = ********\n"
        );
        assert_eq!(r.redact_config("[a]\nbroken LEAKME\n", true, &[]), "[a]\n********\n");
    }

    fn controls(s: &str) -> usize {
        s.chars().filter(|c| c.is_control()).count()
    }

    /// The key forms of the module documentation, each with the secret `s` as its value.
    fn key_forms(s: &str) -> Vec<String> {
        vec![
            format!("password:\n  {s}"),
            format!("  db_password: |\n    {s}\n  user: nova"),
            format!("password:\t{s}"),
            format!("{{\"password\":\n \"{s}\"}}"),
            format!("{{\"token\": \"{s}\"}}"),
            format!("--password {s}"),
            format!("--os-password={s}"),
            format!("OS_PASSWORD {s}"),
            format!("OS_PASSWORD={s}"),
            format!("token {s}"),
            format!("Authorization: Bearer {s}"),
            format!("X-Auth-Token: {s}"),
            format!("pass={s}"),
            format!("<password>{s}</password>"),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Random bytes and control characters: no panic, and masking never adds a control
        /// character (a mask is printable text).
        #[test]
        fn any_text_is_redacted_without_panic_or_new_control_characters(
            text in "(password|token|pass|OS_PASSWORD|--password|Authorization: Bearer |Bearer |://|@|[\\x00-\\x1f\\x7f\\u{85}\\u{9b}\"'\\\\:=|> \n\t,;{}<]|[a-zA-Z0-9]|.){0,120}",
            named in "[ -~\n]{0,12}",
        ) {
            for r in [Redactor::default(), Redactor::new([named.clone()]), Redactor::default().with_named([named.clone()])] {
                let out = r.redact(&text);
                proptest::prop_assert!(controls(&out) <= controls(&text), "{:?} -> {:?}", text, out);
                let out = r.redact_config(&text, false, std::slice::from_ref(&named));
                proptest::prop_assert!(controls(&out) <= controls(&text), "{:?} -> {:?}", text, out);
                let _ = r.redact_config(&text, true, &[]);
            }
        }

        /// Random bytes, read as a message would be (lossily): no panic, no control character
        /// added.
        #[test]
        fn random_bytes_are_redacted_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let text = String::from_utf8_lossy(&bytes);
            let r = Redactor::new(["s3cr3t-value".to_string()]).with_named(["abc".to_string()]);
            let out = r.redact(&text);
            proptest::prop_assert!(controls(&out) <= controls(&text), "{:?} -> {:?}", text, out);
        }

        /// A credential in any key form, with no value known, between random words.
        #[test]
        fn no_secret_survives_a_key_form(
            secret in "[A-Z][a-z]{4,8}[0-9]{1,3}[A-Za-z0-9]{0,8}",
            pre in "[a-z ,.()]{0,30}",
            post in "[a-z ,.()]{0,30}",
        ) {
            for form in key_forms(&secret) {
                // A YAML key starts its line; the other forms stand in a sentence.
                let sep = if form.contains('\n') { "\n" } else { " " };
                let text = format!("{pre}{sep}{form} {post}");
                let out = Redactor::default().redact(&text);
                proptest::prop_assert!(!out.contains(&secret), "{:?} -> {:?}", text, out);
            }
        }

        /// A secret-named value with quotes, backslashes and line breaks, in every form
        /// quoting gives it.
        #[test]
        fn no_named_value_survives_quoting(
            secret in "[!-)+-~][ -)+-~\n]{4,22}[!-)+-~]",
            pre in "[ .,;:()<>]{0,20}",
            post in "[ .,;:()<>]{0,20}",
        ) {
            let r = Redactor::default().with_named([secret.clone()]);
            let mut forms = with_quoted_forms(BTreeSet::from([secret.clone()]));
            forms.push(secret.clone());
            for form in forms {
                let text = format!("{pre}{form}{post}");
                let out = r.redact(&text);
                proptest::prop_assert!(!out.contains(&form) && !out.contains(&secret), "{:?} -> {:?}", text, out);
            }
        }
    }
}
