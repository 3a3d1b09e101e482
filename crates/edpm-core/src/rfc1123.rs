//! The API server's name rules (RFC 1123 labels and subdomains), in a module of their own that
//! imports nothing, so that every module can use them: `snapshot` asks only for names the API
//! server could hold, and `validate` (which reads snapshots) names what breaks them.

/// RFC 1123 label: at most 63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters (an object name).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}
