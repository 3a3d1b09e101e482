//! Errors that quote the offending input stay readable: a 10 MB line or value is cut to its
//! first characters with a marker giving the whole length, and the message still names
//! file:line and what to do.

use std::path::Path;

use crate::util::{Output, run};

const HUGE: usize = 10 * 1024 * 1024;
/// The marker for a cut 10 MB run of `x` plus the `extra` bytes of the line around it.
fn marker(extra: usize) -> String {
    format!("… ({} bytes in all)", HUGE + extra)
}

/// A short error: the cut echo and the rest of the message, never the input.
fn assert_short(out: &Output, text: &str) {
    assert!(text.len() < 1000, "{} bytes of error:\n{}", text.len(), &text[..text.len().min(2000)]);
    assert!(!text.contains(&"x".repeat(200)), "the long input is echoed: {}", &text[..text.len().min(2000)]);
    assert_ne!(out.code, 0, "{text}");
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// Every oslo parse error that quotes its line, through `oslo parse`, `oslo get`, `oslo merge`
/// and `oslo lint`.
#[test]
fn oslo_errors_cut_a_huge_line() {
    let d = tempfile::tempdir().unwrap();
    let x = "x".repeat(HUGE);
    // (file text, line, the line's bytes besides the x's, oslo's message, a piece of the hint,
    // the start of the line as oslo quotes it)
    let cases = [
        (format!("[DEFAULT]\n{x}\n"), 2, 0, "No ':' or '=' found in assignment", "`key = value`", "'xx"),
        (
            format!("[DEFAULT]\n[{x}\n"),
            2,
            1,
            "Invalid section (must end with ])",
            "end the line with ]",
            "'[x",
        ),
        (format!("[DEFAULT]\n={x}\n"), 2, 1, "Key cannot be empty", "option's name", "'=x"),
        (
            format!("[DEFAULT]\n\n\t{x}\n"),
            3,
            1,
            "Unexpected continuation line",
            "remove the indentation",
            "'\\tx",
        ),
    ];
    for (i, (text, line, extra, message, hint, start)) in cases.iter().enumerate() {
        let file = write(d.path(), &format!("huge-{i}.conf"), text);
        let at = format!("{file}:{line}");
        for args in [
            vec!["oslo", "parse", &file],
            vec!["oslo", "get", "--config-file", &file, "DEFAULT", "a"],
            vec!["oslo", "merge", "--config-file", &file],
        ] {
            let out = run(&args, &[]);
            assert_short(&out, &out.stderr);
            assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
            assert!(out.stdout.is_empty(), "{args:?}");
            for needle in [at.as_str(), message, &marker(*extra), hint] {
                assert!(out.stderr.contains(needle), "{args:?}: no {needle:?} in {}", out.stderr);
            }
            // The kept part is the line's start, in Python's repr as oslo quotes it.
            assert!(out.stderr.contains(start), "{args:?}: {}", out.stderr);
        }
        let out = run(&["oslo", "lint", &file], &[]);
        assert_short(&out, &out.stdout);
        for needle in [format!("{file}:{line}: error:").as_str(), message, &marker(*extra), hint] {
            assert!(out.stdout.contains(needle), "lint: no {needle:?} in {}", out.stdout);
        }
    }
}

/// `oslo lint` warnings quote keys and values too.
#[test]
fn oslo_lint_warnings_cut_huge_keys_and_values() {
    let d = tempfile::tempdir().unwrap();
    let x = "x".repeat(HUGE);
    let file = write(d.path(), "warn.conf", &format!("[DEFAULT]\n{x}-a = 1\n{x}-a = 2\nb = {x} # note\n"));
    let out = run(&["oslo", "lint", "--strict", &file], &[]);
    assert_eq!(out.stdout.lines().count(), 4, "{}", out.stdout);
    for line in out.stdout.lines() {
        assert_short(&out, line);
    }
    assert!(out.stdout.contains(&format!("{file}:3: warning:")), "{}", out.stdout);
    assert!(out.stdout.contains("is set again (first at line 2)"), "{}", out.stdout);
    assert!(out.stdout.contains("put the comment on its own line"), "{}", out.stdout);
}

/// The manifest reader's errors that quote a scalar or a key.
#[test]
fn manifest_errors_cut_a_huge_scalar() {
    let x = "x".repeat(HUGE);
    let cases = [
        // A plain scalar starting with `:` in a flow sequence.
        (
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: [ :{x} ]\n"),
            6,
            "quote it",
        ),
        // A key written twice (explicit keys: an implicit one is at most 1,024 characters).
        (
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  ? {x}\n  : 1\n  ? {x}\n  : 2\n"
            ),
            8,
            "remove one",
        ),
        // A tag the value does not fit.
        (
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: !!int {x}\n"),
            6,
            "fix the value",
        ),
    ];
    for (i, (text, line, hint)) in cases.iter().enumerate() {
        let d = tempfile::tempdir().unwrap();
        let file = write(d.path(), "bad.yaml", text);
        let out = run(&["--source", d.path().to_str().unwrap(), "validate"], &[]);
        assert_short(&out, &out.stderr);
        let at = format!("{file}:{line}:");
        for needle in [at.as_str(), "bytes in all)", hint] {
            assert!(out.stderr.contains(needle), "case {i}: no {needle:?} in {}", out.stderr);
        }
    }
}

/// A value of the wrong type is quoted by the decoder's message: cut too, with the field and
/// what was expected kept whole.
#[test]
fn wrong_types_cut_a_huge_value() {
    let x = "x".repeat(HUGE);
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: a\nspec:\n  nodes:\n    n0:\n      ansible:\n        ansiblePort: \"{x}\"\n"
    );
    let file = write(d.path(), "bad.yaml", &text);
    for cmd in [vec!["validate"], vec!["inventory", "--list"]] {
        let out = run(&[&["--source", d.path().to_str().unwrap()][..], &cmd[..]].concat(), &[]);
        assert_short(&out, &out.stderr);
        for needle in [file.as_str(), "ansiblePort", "bytes in all)", "expected"] {
            assert!(out.stderr.contains(needle), "{cmd:?}: no {needle:?} in {}", out.stderr);
        }
    }
}
