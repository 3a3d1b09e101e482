//! Redaction: the one way secret values are kept out of what edpm-agent prints (`render
//! --redact`, `inventory explain`, failure messages in `edpm-summary.json` and the termination
//! log).
//!
//! Pure. A [`Redactor`] is built from the values known to be secret (every value of every
//! Secret the source read, secret-named variables) and masks, in any text:
//! - those values as literals (at least [`MIN_SECRET_LEN`] characters), and the pieces of them
//!   that show up on their own: each line, each `key = value`'s value, a URL's password;
//! - the password of every URL (`scheme://user:********@host:port/path`): the scheme, user,
//!   host, port and path stay, because that is what an operator compares when a service
//!   cannot reach its database or message bus;
//! - the value after a secret-sounding key (`password=…`, `"token": "…"`), and PEM private
//!   keys.
//!
//! [`Redactor::redact_config`] does the same for an oslo.config file, knowing its lines: an
//! option whose value is secret is masked to the end of the line (continuations included), and
//! a file that came whole from a Secret has every value masked.

use std::collections::BTreeSet;

/// The mask written in place of a secret.
pub const MASK: &str = "********";

/// Keeps secret values out of printed text; see the module documentation.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("secrets", &self.secrets.len()).finish()
    }
}

/// Values shorter than this are not masked as literals: "true", "admin" or "1" would mask
/// half of every message.
pub const MIN_SECRET_LEN: usize = 6;

/// Key fragments that mark a value as secret (compared lowercase). `transport_url` is not one:
/// its credentials are a URL's password, masked as such, and its host is what people debug.
const SECRET_KEYS: &[&str] =
    &["password", "passwd", "secret", "token", "credential", "private_key", "api_key", "apikey"];

impl Redactor {
    /// A redactor for these secret values (whole Secret values, secret-named variables).
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets = BTreeSet::new();
        for v in values {
            literals_of(&v, &mut secrets);
        }
        let mut secrets: Vec<String> = secrets.into_iter().collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        Redactor { secrets }
    }

    /// Whether a variable with this name holds a secret, by its name.
    pub fn is_secret_name(name: &str) -> bool {
        let l = name.to_ascii_lowercase();
        SECRET_KEYS.iter().any(|k| l.contains(k))
    }

    /// Masks every secret in free text.
    pub fn redact(&self, text: &str) -> String {
        let mut s = text.to_string();
        for secret in &self.secrets {
            if s.contains(secret.as_str()) {
                s = s.replace(secret.as_str(), MASK);
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
/// string under such a key, however deeply nested.
pub fn secret_values(v: &serde_json::Value, out: &mut Vec<String>) {
    fn all_strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
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

/// `password=…`, `password: …`, `"password": "…"`, `--password …` → value masked.
fn mask_keyed_values(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    'scan: while pos < s.len() {
        // The earliest secret-sounding key from `pos`.
        let Some((at, key_len)) = SECRET_KEYS
            .iter()
            .filter_map(|k| lower[pos..].find(k).map(|i| (pos + i, k.len())))
            .min_by_key(|(i, _)| *i)
        else {
            break;
        };
        // Extend over the rest of the identifier (`db_password_file`).
        let mut key_end = at + key_len;
        while let Some(c) = s[key_end..].chars().next() {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                key_end += c.len_utf8();
            } else {
                break;
            }
        }
        // Then a separator: optional closing quote, spaces, one of = : and spaces, optional
        // opening quote.
        let mut v = key_end;
        let bytes = s.as_bytes();
        if v < s.len() && (bytes[v] == b'"' || bytes[v] == b'\'') {
            v += 1;
        }
        while v < s.len() && bytes[v] == b' ' {
            v += 1;
        }
        if v < s.len() && (bytes[v] == b'=' || bytes[v] == b':') {
            v += 1;
        } else {
            out.push_str(&s[pos..key_end]);
            pos = key_end;
            continue 'scan;
        }
        while v < s.len() && bytes[v] == b' ' {
            v += 1;
        }
        let quote = (v < s.len() && (bytes[v] == b'"' || bytes[v] == b'\'')).then(|| bytes[v]);
        if quote.is_some() {
            v += 1;
        }
        let value_end = match quote {
            Some(q) => s[v..].find(q as char).map_or(s.len(), |i| v + i),
            None => s[v..]
                .find(|c: char| c.is_whitespace() || c == ',' || c == '}' || c == ';')
                .map_or(s.len(), |i| v + i),
        };
        out.push_str(&s[pos..v]);
        if value_end > v && !is_flag(&s[v..value_end]) {
            out.push_str(MASK);
        } else {
            out.push_str(&s[v..value_end]);
        }
        pos = value_end;
    }
    if pos < s.len() {
        out.push_str(&s[pos..]);
    }
    out
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
}
