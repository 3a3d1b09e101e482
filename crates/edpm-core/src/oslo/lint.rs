//! Checks for CustomServiceConfig snippets: oslo's own errors, plus the mistakes that parse
//! fine but do not do what the author meant.

use super::parse::{self, ParseError};
use super::{normalize_group, py_space};
use crate::excerpt::echo;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub line: usize,
    pub message: String,
}

#[allow(
    clippy::too_many_lines,
    reason = "one pass over the lines with a check per oslo.config pitfall, each a few lines"
)]
pub fn lint(text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let warn = |out: &mut Vec<Finding>, line, message: String| {
        out.push(Finding { severity: Severity::Warning, line, message })
    };
    let file = match parse::parse(text) {
        Ok(f) => f,
        Err(e) => {
            out.push(Finding { severity: Severity::Error, line: e.line, message: error_message(&e) });
            return out;
        }
    };
    for s in &file.sections {
        if s.name != "DEFAULT" && s.name.eq_ignore_ascii_case("default") {
            warn(
                &mut out,
                s.line,
                format!(
                    "[{}] is a group named \"{}\", not [DEFAULT]: oslo matches DEFAULT exactly; write [DEFAULT]",
                    echo(&s.name),
                    echo(&s.name.to_lowercase())
                ),
            );
        }
        if s.name.starts_with(py_space) || s.name.ends_with(py_space) {
            warn(
                &mut out,
                s.line,
                format!(
                    "[{}] names the group {} with its spaces; remove them",
                    echo(&s.name),
                    echo(&normalize_group(&s.name)).debug()
                ),
            );
        }
    }
    // Repeats within this file, per normalized group: with a single-valued option only the
    // last one counts.
    let mut seen: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    for s in &file.sections {
        for e in &s.entries {
            if let Some(first) = seen.insert((normalize_group(&s.name), e.key.to_string()), e.line) {
                warn(
                    &mut out,
                    e.line,
                    format!(
                        "{} is set again (first at line {first}): a single-valued option takes only this last value; a multi-valued one takes all of them",
                        echo(&e.key)
                    ),
                );
            }
            if e.key.contains('-') {
                warn(
                    &mut out,
                    e.line,
                    format!(
                        "{} contains '-': oslo matches option names exactly and options use '_' (did you mean {}?)",
                        echo(&e.key),
                        echo(&e.key.replace('-', "_"))
                    ),
                );
            }
            let first_line = e.value.split('\n').next().unwrap_or("");
            if let Some(i) =
                first_line.find([' ', '\t']).and_then(|i| first_line[i..].find(['#', ';']).map(|j| i + j))
            {
                let before = first_line[..i].trim_end_matches(py_space);
                if first_line[..i].ends_with(py_space) {
                    warn(
                        &mut out,
                        e.line,
                        format!(
                            "{} = {}: oslo has no inline comments, so the value includes {}; put the comment on its own line (value {})",
                            echo(&e.key),
                            echo(first_line).debug(),
                            echo(&first_line[i..]).debug(),
                            echo(before).debug()
                        ),
                    );
                }
            }
            for (n, cont) in e.value.split('\n').enumerate().skip(1) {
                if cont.starts_with('[') || cont.contains('=') {
                    warn(
                        &mut out,
                        e.line + n,
                        format!(
                            "this indented line is part of the value of {} (line {}), not its own line; remove the indentation",
                            echo(&e.key),
                            e.line
                        ),
                    );
                }
            }
            if let Some(i) = e.value.find('$') {
                let rest = &e.value[i + 1..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
                    .collect();
                if name.contains('.') && !name.ends_with('.') && !rest.starts_with('{') {
                    let var = echo(name.split('.').next().unwrap_or(""));
                    warn(
                        &mut out,
                        e.line,
                        format!(
                            "${} is read as option {} of group {var}; write ${{{var}}} if you meant option {var} followed by text",
                            echo(&name),
                            echo(name.split_once('.').map_or("", |x| x.1)),
                        ),
                    );
                }
            }
        }
    }
    out.sort_by_key(|f| (f.line, f.severity));
    out
}

/// oslo's error plus a hint for the common causes.
fn error_message(e: &ParseError) -> String {
    format!("{e}; {}", e.hint())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(text: &str) -> Vec<String> {
        lint(text).into_iter().map(|f| format!("{}:{:?}:{}", f.line, f.severity, f.message)).collect()
    }

    #[test]
    fn clean_snippet_has_no_findings() {
        assert!(lint("[DEFAULT]\ndebug = True\n[libvirt]\ncpu_mode = host-model\n").is_empty());
    }

    #[test]
    fn common_mistakes() {
        let m = messages(
            "[default]\ndebug = True # verbose\ndebug = False\nmy-opt = 1\nx = a\n  [libvirt]\nurl = $my_ip.example.com\n",
        );
        let all = m.join("\n");
        for needle in [
            "1:Warning:[default]",
            "2:Warning:debug",
            "no inline comments",
            "3:Warning:debug is set again",
            "4:Warning:my-opt",
            "6:Warning:this indented line",
            "7:Warning:$my_ip.example.com",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in\n{all}");
        }
    }

    #[test]
    fn parse_errors_are_oslos_with_a_hint() {
        let f = lint("debug = True\n");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert!(
            f[0].message.starts_with(
                "at line 1, Section must be started before assignment: ''; start the file with a section"
            ),
            "{}",
            f[0].message
        );
    }
}
