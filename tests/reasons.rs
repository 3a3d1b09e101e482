//! The guides' reason tables are `edpm_core::condition::reasons`, word for word: each table
//! between `<!-- reasons:begin WRITERS -->` and `<!-- reasons:end -->` is what
//! `reasons::table` makes of the writers named. `EDPM_BLESS_DOCS=1` rewrites them.

use edpm_core::condition::reasons::{self, ALL, Writer};

use crate::util::repo;

/// The guides that hold reason tables, and whose reasons each holds.
const GUIDES: &[(&str, &[Writer])] = &[
    ("docs/kubernetes.md", &[Writer::Upstream, Writer::Readiness]),
    ("docs/node-agent.md", &[Writer::NodeAgent]),
];

const BEGIN: &str = "<!-- reasons:begin -->\n";
const END: &str = "<!-- reasons:end -->";

/// `text` with the table between its markers replaced by `table`; None without markers.
fn with_table(text: &str, table: &str) -> Option<String> {
    let start = text.find(BEGIN)? + BEGIN.len();
    let end = start + text[start..].find(END)?;
    Some(format!("{}{}{}", &text[..start], table, &text[end..]))
}

#[test]
fn the_guides_reason_tables_are_the_vocabulary() {
    let bless = std::env::var_os("EDPM_BLESS_DOCS").is_some();
    for (guide, writers) in GUIDES {
        let path = repo().join(guide);
        let text = std::fs::read_to_string(&path).unwrap();
        let want = with_table(&text, &reasons::table(writers))
            .unwrap_or_else(|| panic!("{guide} has no `{}` … `{END}` markers", BEGIN.trim()));
        if bless {
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        assert!(
            text == want,
            "{guide}'s reason table differs from condition::reasons; run \
             `EDPM_BLESS_DOCS=1 cargo test --test integration reasons` and review the diff"
        );
    }
}

#[test]
fn every_reason_is_in_one_guide() {
    for r in ALL {
        let guides: Vec<_> = GUIDES.iter().filter(|(_, ws)| ws.contains(&r.writer)).collect();
        assert_eq!(guides.len(), 1, "{} is in {} guides", r.name, guides.len());
    }
}

#[test]
fn the_guides_name_no_reason_the_vocabulary_lacks() {
    // A reason named in a guide's prose tables (`| ... | `Name` |`) is one edpm-agent writes.
    for (guide, _) in GUIDES {
        let text = std::fs::read_to_string(repo().join(guide)).unwrap();
        for line in text.lines().filter(|l| l.starts_with("| False") || l.starts_with("| Unknown")) {
            let name = line.split('|').nth(2).unwrap_or("").trim().trim_matches('`');
            assert!(reasons::find(name).is_some(), "{guide}: `{name}` is no reason of condition::reasons");
        }
    }
}

#[test]
fn a_table_is_replaced_between_its_markers_only() {
    let text = format!("before\n{BEGIN}old\n{END}\nafter\n");
    assert_eq!(with_table(&text, "new\n").unwrap(), format!("before\n{BEGIN}new\n{END}\nafter\n"));
    assert_eq!(with_table("no markers", "new"), None);
}
