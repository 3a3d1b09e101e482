//! Differential tests against the real oslo.config (PyPI, in the test venv): parsing and its
//! errors, layering across --config-file/--config-dir, writer round-trips, and merge
//! equivalence, on hand-written cases and thousands of generated ones.

use std::io::Write as _;
use std::process::{Command, Stdio};

use edpm_core::oslo::layer::{Layer, Layers};
use edpm_core::oslo::{self, ConfigFile, Entry, Section};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use crate::util::{python_tool, repo};

pub fn harness(request: &Value) -> Value {
    let mut child = Command::new(python_tool("python3"))
        .arg(repo().join("tests/oslo/harness.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the oslo.config harness");
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "harness failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Our parse, in the harness's shape.
/// A file in the harness's shape: `{"sections": {name: {key: [values]}}}`.
fn sections_json(f: &ConfigFile) -> Value {
    let mut sections = serde_json::Map::new();
    for (name, keys) in f.sections_merged() {
        let keys: serde_json::Map<String, Value> = keys
            .into_iter()
            .map(|(k, es)| (k.to_string(), json!(es.iter().map(|e| &*e.value).collect::<Vec<_>>())))
            .collect();
        sections.insert(name.to_string(), Value::Object(keys));
    }
    json!({ "sections": sections })
}

fn ours_parse(text: &str) -> Value {
    match oslo::parse(text) {
        Ok(f) => sections_json(&f),
        Err(e) => json!({"error": {"line": e.line, "message": e.message, "text": e.text}}),
    }
}

fn sample<S: Strategy>(strategy: S, n: usize, seed: u8) -> Vec<S::Value> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &[seed; 32]),
    );
    (0..n).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect()
}

fn value_text(dollar: bool) -> BoxedStrategy<String> {
    // \u{1c} and \u{a0} are whitespace to Python's strip but differ in other definitions.
    let alphabet = if dollar {
        "[ab \t\"'#;=:$\\[\\]é{}\u{1c}\u{a0}]{0,6}"
    } else {
        "[ab \t\"'#;=:\\[\\]é\u{1c}]{0,6}"
    };
    alphabet.boxed()
}

/// One line of an oslo-ish file: sections (valid and broken), assignments, continuations,
/// comments, blank lines and junk, weighted towards valid content.
fn line(dollar: bool) -> BoxedStrategy<String> {
    let sections = prop::sample::select(vec![
        "[DEFAULT]",
        "[default]",
        "[Database]",
        "[database]",
        "[ db ]",
        "[[x]]",
        "[y]]",
        "[libvirt]",
        "[]",
        "[x",
        "[DEFAULT] # c",
        // Titlecase 'ǅ' lower-cases to 'ǆ' without being upper-case; 'Σ' ends words as 'ς'.
        "[ǅ]",
        "[ǆ]",
        "[ΣΑΣ]",
    ])
    .prop_map(String::from);
    let keys = prop::sample::select(vec!["a", "b", "m", "Key", "x_y", "", " a", "a "]);
    let seps = prop::sample::select(vec!["=", " = ", ":", " : ", "= ", "\t=\t"]);
    prop_oneof![
        3 => sections,
        8 => (keys, seps, value_text(dollar)).prop_map(|(k, s, v)| format!("{k}{s}{v}")),
        2 => (prop::sample::select(vec![" ", "\t", "   "]), value_text(dollar)).prop_map(|(i, v)| format!("{i}{v}")),
        1 => prop::sample::select(vec!["# c", ";c", "#", "# [x] = y"]).prop_map(String::from),
        2 => prop::sample::select(vec!["", " ", "\t"]).prop_map(String::from),
        1 => prop::sample::select(vec!["junk", "=v", "[", "\u{feff}[DEFAULT]", "a\u{a0}= b\u{a0}"]).prop_map(String::from),
    ]
    .boxed()
}

fn file_text(dollar: bool) -> BoxedStrategy<String> {
    (
        prop::collection::vec(line(dollar), 0..12),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
        any::<bool>(),
    )
        .prop_map(|(lines, eol, trailing)| {
            let mut t = lines.join(eol);
            if trailing {
                t.push_str(eol);
            }
            t
        })
        .boxed()
}

fn report(kind: &str, mismatches: &[String], total: usize) {
    assert!(
        mismatches.is_empty(),
        "{} of {total} {kind} cases differ from oslo.config; first ones:\n{}",
        mismatches.len(),
        mismatches.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
}

const HAND_WRITTEN: &[&str] = &[
    "[DEFAULT]\na = 1\n  # not a comment\nml =\n  x\nb = 2\n  [other]\n",
    "[DEFAULT]\nurl = http://h:80/x\nk: v = w\nq = \"x\"\nqq = \"\"x\"\"\nlone = \"\nmix = \"a\" \"b\"\n",
    "[ db ]\n[[x]]\n[y]]\nk = v\n",
    "  x\n",
    "[s]\n[DEFAULT] # c\n",
    "[]\n",
    "[s]\njunk\n",
    "[s]\n= v\n",
    "a = 1\n\n",
    "a = 1",
    "\u{feff}[DEFAULT]\na = 1\n",
    "[s]\ttab\n",
    "[DEFAULT]\nx = 'it''s'\ny = \"\"\n",
    "[DEFAULT]\r\na = 1\r\n  b\r\n",
    "[s]\na = 1\n\t\n  c\n",
    "# only a comment\n; another\n",
    "",
    "[s]\nk = v\u{1c}\n",
    "[s]\u{1c}\nk = v\n  c\u{1c}\n",
    "[s]\u{a0}\nk\u{a0}= \u{a0}v\n",
];

#[test]
fn parsing_and_errors_match_oslo() {
    let mut texts: Vec<String> = HAND_WRITTEN.iter().map(|s| s.to_string()).collect();
    texts.extend(sample(file_text(true), 3000, 7));
    let answer = harness(&json!({ "parse": texts }));
    let theirs = answer["parse"].as_array().unwrap();
    let mismatches: Vec<String> = texts
        .iter()
        .zip(theirs)
        .filter_map(|(t, want)| {
            let got = ours_parse(t);
            (&got != want).then(|| format!("input {t:?}\n  oslo: {want}\n  ours: {got}"))
        })
        .collect();
    report("parse", &mismatches, texts.len());
    let errors = theirs.iter().filter(|a| a.get("error").is_some()).count();
    assert!(
        errors > 300 && errors < texts.len() - 300,
        "generator covers both valid and invalid files ({errors} errors)"
    );
}

/// A layering case: items in command-line order, each a file or a directory of files.
#[derive(Debug, Clone)]
enum Item {
    File(String),
    Dir(Vec<(String, String)>),
}

fn valid_file() -> BoxedStrategy<String> {
    file_text(false).prop_filter("oslo parses it", |t| oslo::parse(t).is_ok()).boxed()
}

fn item() -> BoxedStrategy<Item> {
    let names = prop::sample::select(vec![
        "01-a.conf",
        "02-b.conf",
        "10-c.conf",
        "Z.conf",
        "nova.conf",
        ".hidden.conf",
        "skip.txt",
    ]);
    prop_oneof![
        3 => valid_file().prop_map(Item::File),
        1 => prop::collection::vec((names, valid_file()), 0..4).prop_map(|mut v| {
            v.sort_by(|a, b| a.0.cmp(b.0));
            v.dedup_by(|a, b| a.0 == b.0);
            Item::Dir(v.into_iter().map(|(n, t)| (n.to_string(), t)).collect())
        }),
    ]
    .boxed()
}

fn our_layers(items: &[Item]) -> Layers<'_> {
    let mut layers = Vec::new();
    for (i, it) in items.iter().enumerate() {
        match it {
            Item::File(t) => layers.push(Layer { file: format!("f{i}"), config: oslo::parse(t).unwrap() }),
            Item::Dir(files) => {
                let names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
                for name in oslo::layer::config_dir_files(&names) {
                    let text = &files.iter().find(|(n, _)| *n == name).unwrap().1;
                    layers.push(Layer { file: format!("d{i}/{name}"), config: oslo::parse(text).unwrap() });
                }
            }
        }
    }
    Layers::new(layers)
}

fn item_json(it: &Item) -> Value {
    match it {
        Item::File(t) => json!({ "file": t }),
        Item::Dir(files) => json!({ "dir": files }),
    }
}

/// Options worth asking about: every one set anywhere, plus a few never set.
fn queries(items: &[Item]) -> Vec<(String, String)> {
    let mut q: Vec<(String, String)> = Vec::new();
    for it in items {
        let texts: Vec<&String> = match it {
            Item::File(t) => vec![t],
            Item::Dir(f) => f.iter().map(|(_, t)| t).collect(),
        };
        for t in texts {
            let l = Layers::new(vec![Layer { file: String::new(), config: oslo::parse(t).unwrap() }]);
            for o in l.options() {
                if !q.contains(&o) {
                    q.push(o);
                }
            }
        }
    }
    for extra in [("DEFAULT", "never_set"), ("database", "a")] {
        let extra = (extra.0.to_string(), extra.1.to_string());
        if !q.contains(&extra) {
            q.push(extra);
        }
    }
    q
}

#[test]
fn layering_and_merge_match_oslo() {
    let cases: Vec<Vec<Item>> = sample(prop::collection::vec(item(), 1..5), 300, 11);
    let mut request = Vec::new();
    let mut ours = Vec::new();
    for items in &cases {
        let layers = our_layers(items);
        let q = queries(items);
        let single: Vec<Value> = q.iter().map(|(g, k)| json!(layers.get(g, k).map(|f| f.value))).collect();
        let multi: Vec<Value> = q
            .iter()
            .map(|(g, k)| json!(layers.get_multi(g, k).map(|f| f.value).collect::<Vec<_>>()))
            .collect();
        let merged =
            oslo::write::write(&oslo::merge::merge(&layers), &[]).expect("merged files are always writable");
        let qj: Vec<Value> = q.iter().map(|(g, k)| json!([g, k])).collect();
        request.push(json!({ "items": items.iter().map(item_json).collect::<Vec<_>>(), "queries": qj }));
        request.push(json!({ "items": [{ "file": merged }], "queries": qj }));
        ours.push(json!({ "single": single, "multi": multi }));
    }
    let answer = harness(&json!({ "layer": request }));
    let answers = answer["layer"].as_array().unwrap();
    let mut layer_mismatch = Vec::new();
    let mut merge_mismatch = Vec::new();
    for (i, items) in cases.iter().enumerate() {
        let (layered, merged) = (&answers[2 * i], &answers[2 * i + 1]);
        if layered != &ours[i] {
            layer_mismatch.push(format!("items {items:?}\n  oslo: {layered}\n  ours: {}", ours[i]));
        }
        if layered != merged {
            merge_mismatch.push(format!("items {items:?}\n  layered: {layered}\n  merged: {merged}"));
        }
    }
    report("layering", &layer_mismatch, cases.len());
    report("merge", &merge_mismatch, cases.len());
}

fn model() -> BoxedStrategy<ConfigFile<'static>> {
    let name = "[ab \\]\\[é#;=]{1,4}";
    let key = "[a-zA-Z_][a-zA-Z0-9_ .-]{0,5}";
    let value = "[ab \t\"'#;=:\\[\\]é\n]{0,10}";
    let entry = (key, value).prop_map(|(key, value)| Entry { key: key.into(), value: value.into(), line: 0 });
    let section = (name, prop::collection::vec(entry, 0..5)).prop_map(|(name, entries)| Section {
        name: name.into(),
        line: 0,
        entries,
    });
    prop::collection::vec(section, 0..4)
        .prop_map(|sections| ConfigFile { sections, comments: vec![] })
        .boxed()
}

#[test]
fn writer_output_reads_back_identically_in_oslo() {
    let models: Vec<ConfigFile<'static>> = sample(model(), 3000, 23);
    let mut written = Vec::new();
    let mut refused = 0;
    for m in &models {
        match oslo::write::write(m, &["written by edpm-agent"]) {
            Ok(t) => written.push((m, t)),
            Err(_) => refused += 1,
        }
    }
    let answer = harness(&json!({ "parse": written.iter().map(|(_, t)| t).collect::<Vec<_>>() }));
    let mismatches: Vec<String> = written
        .iter()
        .zip(answer["parse"].as_array().unwrap())
        .filter_map(|((m, text), theirs)| {
            let want = sections_json(m);
            (&want != theirs).then(|| format!("written {text:?}\n  model: {want}\n  oslo:  {theirs}"))
        })
        .collect();
    report("writer round-trip", &mismatches, written.len());
    assert!(
        written.len() > 1000 && refused > 100,
        "both writable and refused values are exercised ({} / {refused})",
        written.len()
    );
}

/// `edpm-agent oslo parse --format json` prints exactly what oslo's parser builds, errors
/// included.
#[test]
fn cli_parse_json_matches_oslo() {
    let dir = tempfile::tempdir().unwrap();
    let texts: Vec<String> =
        HAND_WRITTEN.iter().map(|s| s.to_string()).chain(sample(file_text(true), 40, 31)).collect();
    let answer = harness(&json!({ "parse": texts }));
    for (i, (text, want)) in texts.iter().zip(answer["parse"].as_array().unwrap()).enumerate() {
        let path = dir.path().join(format!("c{i}.conf"));
        std::fs::write(&path, text).unwrap();
        let out = crate::util::run(&["oslo", "parse", "--format", "json", path.to_str().unwrap()], &[]);
        let mut got: Value =
            serde_json::from_str(&out.stdout).unwrap_or_else(|_| panic!("not JSON: {}", out.stdout));
        if let Some(e) = got.get_mut("error") {
            assert_eq!(out.code, 1, "malformed input exits 1");
            assert_eq!(e["file"], json!(path.to_str().unwrap()));
            e.as_object_mut().unwrap().remove("file");
        } else {
            assert_eq!(out.code, 0);
        }
        assert_eq!(&got, want, "input {text:?}");
    }
}

#[test]
fn cli_get_follows_config_dir_and_argument_order() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("nova.conf.d");
    std::fs::create_dir(&dir).unwrap();
    for (name, text) in [
        ("01-nova.conf", "[DEFAULT]\ndebug=true\n[libvirt]\nimages_type=qcow2\n"),
        ("02-nova-host-specific.conf", "[DEFAULT]\nmy_ip=10.0.0.5\n"),
        ("03-ceph-nova.conf", "[libvirt]\nimages_type=rbd\n"),
        ("25-nova-extra.conf", "[DEFAULT]\ndebug=false\n"),
        ("99-override.txt", "[DEFAULT]\ndebug=ignored\n"),
        (".hidden.conf", "[DEFAULT]\ndebug=ignored\n"),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let late = d.path().join("late.conf");
    std::fs::write(&late, "[DEFAULT]\ndebug=late\n").unwrap();
    let get = |extra: &[&str], group: &str, key: &str| {
        let mut args = vec!["oslo", "get", "--format", "json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[group, key]);
        crate::util::run(&args, &[])
    };
    let dir_s = dir.to_str().unwrap();
    let out = get(&["--config-dir", dir_s], "Libvirt", "images_type");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!((v["value"].as_str(), v["line"].as_u64()), (Some("rbd"), Some(2)));
    assert!(v["file"].as_str().unwrap().ends_with("03-ceph-nova.conf"));
    let v: Value = serde_json::from_str(
        &get(&["--config-dir", dir_s, "--config-file", late.to_str().unwrap()], "DEFAULT", "debug").stdout,
    )
    .unwrap();
    assert_eq!(v["value"], "late");
    let v: Value = serde_json::from_str(
        &get(&["--config-file", late.to_str().unwrap(), "--config-dir", dir_s], "DEFAULT", "debug").stdout,
    )
    .unwrap();
    assert_eq!(v["value"], "false", "the later argument wins");
    let v: Value =
        serde_json::from_str(&get(&["--config-dir", dir_s, "--multi"], "DEFAULT", "debug").stdout).unwrap();
    let values: Vec<&str> =
        v["values"].as_array().unwrap().iter().map(|x| x["value"].as_str().unwrap()).collect();
    assert_eq!(values, ["true", "false"]);
    let unset = get(&["--config-dir", dir_s], "DEFAULT", "host");
    assert_eq!((unset.code, unset.stdout.as_str()), (1, ""));
    let missing = get(&["--config-file", "/nonexistent/a.conf"], "DEFAULT", "x");
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("Failed to find some config files: /nonexistent/a.conf"),
        "{}",
        missing.stderr
    );
}

#[test]
fn cli_merge_and_lint() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("01.conf");
    let b = d.path().join("02.conf");
    std::fs::write(&a, "[DEFAULT]\nm = one\n[libvirt]\nx = \" padded \"\n").unwrap();
    std::fs::write(&b, "[DEFAULT]\nm = two\n").unwrap();
    let merged = d.path().join("merged.conf");
    let out = crate::util::run(
        &[
            "oslo",
            "merge",
            "--config-file",
            a.to_str().unwrap(),
            "--config-file",
            b.to_str().unwrap(),
            "-o",
            merged.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&merged).unwrap().permissions().mode() & 0o777, 0o600);
    let answer = harness(&json!({"layer": [
        {"items": [{"file": std::fs::read_to_string(&merged).unwrap()}], "queries": [["DEFAULT", "m"], ["libvirt", "x"]]},
    ]}));
    assert_eq!(answer["layer"][0]["single"], json!(["two", " padded "]));
    assert_eq!(answer["layer"][0]["multi"], json!([["one", "two"], [" padded "]]));

    let snippet = d.path().join("snippet.conf");
    std::fs::write(&snippet, "[default]\ndebug = True  # verbose\n").unwrap();
    let out = crate::util::run(&["oslo", "lint", snippet.to_str().unwrap()], &[]);
    assert_eq!(out.code, 0, "warnings alone pass");
    assert!(
        out.stdout.contains("snippet.conf:1: warning: [default]")
            && out.stdout.contains("no inline comments"),
        "{}",
        out.stdout
    );
    assert_eq!(crate::util::run(&["oslo", "lint", "--strict", snippet.to_str().unwrap()], &[]).code, 1);
    std::fs::write(&snippet, "debug = True\n").unwrap();
    let out = crate::util::run(&["oslo", "lint", "--format", "json", snippet.to_str().unwrap()], &[]);
    assert_eq!(out.code, 1);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["findings"][0]["severity"], "error");
}

/// Two bad files: oslo reads and parses file by file, so the first file's parse error wins over
/// the second file's undecodable bytes; so must ours, though it reads before parsing.
#[test]
fn the_first_bad_file_is_the_one_reported() {
    let d = tempfile::tempdir().unwrap();
    let (malformed, binary) = (d.path().join("malformed.conf"), d.path().join("binary.conf"));
    std::fs::write(&malformed, "garbage\n").unwrap();
    std::fs::write(&binary, b"[DEFAULT]\na = \xff\n").unwrap();
    let get = |first: &std::path::Path, second: &std::path::Path| {
        let (a, b) = (first.to_str().unwrap(), second.to_str().unwrap());
        crate::util::run(
            &["oslo", "--format", "json", "get", "--config-file", a, "--config-file", b, "DEFAULT", "a"],
            &[],
        )
    };
    let out = get(&malformed, &binary);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stderr));
    assert_eq!(v["error"]["line"], 1);
    assert!(v["error"]["file"].as_str().unwrap().ends_with("malformed.conf"), "{v}");
    let out = get(&binary, &malformed);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("binary.conf: not UTF-8 text"), "{}", out.stderr);
}
