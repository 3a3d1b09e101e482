//! Python's `shlex.split` (POSIX mode, no comments): how ansible-runner splits `env/cmdline`
//! and `RUNNER_CMDLINE` into ansible-playbook's arguments.

/// Python's `shlex.split(s)` (POSIX mode, no comments), which ansible-runner applies to
/// `env/cmdline`.
pub fn shlex_split(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(n) => word.push(n),
                    None => return Err("no escaped character".into()),
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => word.push(n),
                        None => return Err("no closing quotation".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            // In double quotes a backslash escapes only a quote or a backslash.
                            Some(n @ ('"' | '\\')) => word.push(n),
                            Some(n) => {
                                word.push('\\');
                                word.push(n);
                            }
                            None => return Err("no closing quotation".into()),
                        },
                        Some(n) => word.push(n),
                        None => return Err("no closing quotation".into()),
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shlex_matches_python() {
        for (input, want) in [
            ("--tags a,b --limit 'h1 h2'", vec!["--tags", "a,b", "--limit", "h1 h2"]),
            ("  -e \"x=\\\"q\\\" \\$y\"  ", vec!["-e", "x=\"q\" \\$y"]),
            ("a\\ b 'c'\"d\" ''", vec!["a b", "cd", ""]),
            ("\n\n", vec![]),
        ] {
            assert_eq!(shlex_split(input).unwrap(), want, "{input}");
        }
        assert!(shlex_split("'open").is_err());
        assert!(shlex_split("trailing\\").is_err());
    }
}
