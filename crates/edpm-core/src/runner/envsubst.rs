//! GNU `envsubst`, which upstream's entrypoint runs over `env/settings`.

/// GNU `envsubst` without a variable list: `$NAME` and `${NAME}` become the variable's value,
/// or nothing when unset; anything else is kept.
pub fn envsubst(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(braced) = after.strip_prefix('{')
            && let Some(end) = braced.find('}')
            && braced[..end].starts_with(is_start)
            && braced[..end].chars().all(is_name)
        {
            out.push_str(&lookup(&braced[..end]).unwrap_or_default());
            rest = &braced[end + 1..];
        } else if after.starts_with(is_start) {
            let end = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
            out.push_str(&lookup(&after[..end]).unwrap_or_default());
            rest = &after[end..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tests::env_of;

    #[test]
    fn envsubst_like_gnu() {
        let env = env_of(&[("A", "1"), ("B_2", "two")]);
        assert_eq!(envsubst("$A ${B_2} $ $1 ${A-x} $UNSET. $$A", &env), "1 two $ $1 ${A-x} . $1");
    }
}
