//! Differential tests of the YAML reader against a real YAML 1.1 implementation, PyYAML's
//! `SafeLoader` (PyPI, in the test venv), through `tests/yaml/harness.py`.
//!
//! Kubernetes reads YAML with go-yaml v2, which differs from PyYAML in known ways. Those are the
//! [`KNOWN_DIFFERENCES`] table: every row is checked in both directions (PyYAML really does
//! what the row says, and so do we), and a generated case on which the two readers disagree
//! must fall under one of the rows, or the test fails. Everything else must agree exactly,
//! after Kubernetes' JSON conversion (sigs.k8s.io/yaml) is applied to PyYAML's result, written
//! out here again from its rules.

use std::io::Write as _;
use std::process::{Command, Stdio};

use edpm_core::yaml;
use serde_json::{Map, Value, json};

use crate::util::{python_tool, repo};

/// Every text through PyYAML, in one Python run.
fn pyyaml(texts: &[String]) -> Vec<Py> {
    let mut child = Command::new(python_tool("python3"))
        .arg(repo().join("tests/yaml/harness.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the PyYAML harness");
    child.stdin.take().unwrap().write_all(json!({ "docs": texts }).to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "harness failed: {}", String::from_utf8_lossy(&out.stderr));
    let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    answers
        .into_iter()
        .map(|a| match a.get("docs") {
            Some(Value::Array(docs)) => Py::Docs(docs.clone()),
            _ => Py::Error(a["error"]["kind"].as_str().unwrap_or("?").to_string()),
        })
        .collect()
}

/// What PyYAML made of a text: its documents as typed trees, or the kind of error.
#[derive(Debug, Clone)]
enum Py {
    Docs(Vec<Value>),
    Error(String),
}

/// Why a PyYAML result has no JSON form under Kubernetes' rules.
#[derive(Debug, Clone, PartialEq)]
enum NoJson {
    Timestamp,
    NonFinite,
    NullKey,
    Recursive,
    Set,
    DuplicateKey(String),
}

/// sigs.k8s.io/yaml's conversion of a PyYAML tree: integral floats become integers (json.Marshal
/// writes them without a fraction), keys become strings (ints in decimal, bools as true/false,
/// floats in Go's shortest float32 form), bytes become a string with U+FFFD for invalid UTF-8.
fn py_json(tree: &Value) -> Result<Value, NoJson> {
    let (tag, v) = tree.as_object().and_then(|m| m.iter().next()).expect("a tagged tree");
    Ok(match tag.as_str() {
        "null" => Value::Null,
        "bool" => v.clone(),
        "int" => serde_json::from_str(v.as_str().unwrap()).unwrap(),
        "float" => {
            let f: f64 = v.as_str().unwrap().parse().map_err(|_| NoJson::NonFinite)?;
            if !f.is_finite() {
                return Err(NoJson::NonFinite);
            }
            if f.fract() == 0.0 && f.abs() < 1e21 {
                serde_json::from_str(&format!("{f:.0}")).unwrap()
            } else {
                json!(f)
            }
        }
        "str" => v.clone(),
        "bytes" => {
            let bytes: Vec<u8> = v.as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect();
            let mut s = String::new();
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                match std::str::from_utf8(rest) {
                    Ok(ok) => {
                        s.push_str(ok);
                        rest = &[];
                    }
                    Err(e) => {
                        s.push_str(std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap());
                        s.push('\u{FFFD}');
                        rest = &rest[e.valid_up_to() + 1..];
                    }
                }
            }
            Value::String(s)
        }
        "timestamp" => return Err(NoJson::Timestamp),
        "recursive" => return Err(NoJson::Recursive),
        "set" => return Err(NoJson::Set),
        "seq" => Value::Array(v.as_array().unwrap().iter().map(py_json).collect::<Result<_, _>>()?),
        "map" => {
            let mut m = Map::new();
            for pair in v.as_array().unwrap() {
                let key = py_key(&pair[0])?;
                if m.contains_key(&key) {
                    return Err(NoJson::DuplicateKey(key));
                }
                m.insert(key, py_json(&pair[1])?);
            }
            Value::Object(m)
        }
        other => panic!("unknown tree tag {other}"),
    })
}

fn py_key(tree: &Value) -> Result<String, NoJson> {
    let (tag, v) = tree.as_object().and_then(|m| m.iter().next()).unwrap();
    Ok(match tag.as_str() {
        "str" => v.as_str().unwrap().to_string(),
        "int" => v.as_str().unwrap().to_string(),
        "bool" => v.as_bool().unwrap().to_string(),
        "null" => return Err(NoJson::NullKey),
        "float" => go_float32_text(v.as_str().unwrap()),
        "timestamp" => return Err(NoJson::Timestamp),
        _ => return Err(NoJson::Set),
    })
}

/// Go's `FormatFloat(f, 'g', -1, 32)` (with go-yaml's `.inf`), written independently of the
/// reader: the fewest significant digits that read back as the same float32.
fn go_float32_text(text: &str) -> String {
    let f: f64 = text.parse().unwrap();
    if f.is_nan() {
        return ".nan".into();
    }
    let x = f as f32;
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let (digits, exp) = (1..=9)
        .map(|p| format!("{:.*e}", p - 1, x))
        .find(|s| s.parse::<f32>().unwrap() == x)
        .map(|s| {
            let (m, e) = s.split_once('e').unwrap();
            (m.replace(['.', '-'], ""), e.parse::<i32>().unwrap())
        })
        .unwrap();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let frac = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        format!("{sign}{}{frac}e{}{:02}", &digits[..1], if exp < 0 { '-' } else { '+' }, exp.abs())
    } else if exp < 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
    } else if digits.len() as i32 <= exp + 1 {
        format!("{sign}{digits}{}", "0".repeat((exp + 1) as usize - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..=exp as usize], &digits[exp as usize + 1..])
    }
}

/// Our documents as JSON values, or our error.
fn ours(text: &str) -> Result<Vec<Value>, yaml::Error> {
    yaml::documents(text).map(|docs| docs.iter().map(yaml::Node::to_value).collect())
}

/// How the two readers compare on one text.
#[derive(Debug)]
enum Outcome {
    Agree,
    /// They differ: what we gave and what PyYAML gave (converted, or why not).
    Differ {
        ours: Result<Vec<Value>, String>,
        py: Result<Vec<Value>, String>,
    },
}

fn compare(text: &str, py: &Py) -> Outcome {
    let mine = ours(text).map_err(|e| format!("{:?}: {}", e.kind, e.message));
    let theirs = match py {
        Py::Error(kind) => Err(format!("PyYAML {kind} error")),
        Py::Docs(docs) => docs
            .iter()
            .map(py_json)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| format!("no JSON form: {why:?}")),
    };
    match (&mine, &theirs) {
        (Ok(a), Ok(b)) if a == b => Outcome::Agree,
        (Err(_), Err(_)) => Outcome::Agree,
        _ => Outcome::Differ { ours: mine, py: theirs },
    }
}

// ---------------------------------------------------------------------------------------------
// The known differences between go-yaml v2 (Kubernetes) and PyYAML, each with examples.

/// One known difference: what it is, examples in document form, and what each side gives for
/// them (ours as JSON or "error"; PyYAML's typed tree or its error kind).
struct Difference {
    what: &'static str,
    cases: &'static [(&'static str, &'static str, &'static str)],
}

const KNOWN_DIFFERENCES: &[Difference] = &[
    Difference {
        what: "y, Y, n and N are booleans in go-yaml v2 (so in Kubernetes); YAML 1.1's list and PyYAML make them strings",
        cases: &[
            ("v: y\n", r#"{"v": true}"#, r#"{"str": "y"}"#),
            ("v: N\n", r#"{"v": false}"#, r#"{"str": "N"}"#),
            ("y: 1\n", r#"{"true": 1}"#, r#"{"map": [[{"str": "y"}, {"int": "1"}]]}"#),
        ],
    },
    Difference {
        what: "Go's integer prefixes 0o/0O, and the upper-case 0X and 0B, are integers in go-yaml; PyYAML knows only 0b, 0x and a leading 0",
        cases: &[
            ("v: 0o640\n", r#"{"v": 416}"#, r#"{"str": "0o640"}"#),
            ("v: 0X1F\n", r#"{"v": 31}"#, r#"{"str": "0X1F"}"#),
            ("v: -0B11\n", r#"{"v": -3}"#, r#"{"str": "-0B11"}"#),
        ],
    },
    Difference {
        what: "sexagesimal numbers (1:30) are text in go-yaml, which never supported them; PyYAML reads base 60",
        cases: &[
            ("v: 1:30\n", r#"{"v": "1:30"}"#, r#"{"int": "90"}"#),
            ("v: 1:30.5\n", r#"{"v": "1:30.5"}"#, r#"{"float": "90.5"}"#),
        ],
    },
    Difference {
        what: "go-yaml reads decimal floats YAML 1.1's pattern leaves as text: no dot (1e3, 08), an exponent without a sign (1.5e3), a sign before a leading dot (+.5)",
        cases: &[
            ("v: 1e3\n", r#"{"v": 1000}"#, r#"{"str": "1e3"}"#),
            ("v: 08\n", r#"{"v": 8}"#, r#"{"str": "08"}"#),
            ("v: 1.5e3\n", r#"{"v": 1500}"#, r#"{"str": "1.5e3"}"#),
            ("v: +.5\n", r#"{"v": 0.5}"#, r#"{"str": "+.5"}"#),
        ],
    },
    Difference {
        what: "integers beyond 64 bits: go-yaml gives up (a hexadecimal one stays text, octal digits are read as a decimal float), and a key above 2^63-1 (a uint64 to go-yaml) is refused by sigs.k8s.io/yaml; PyYAML keeps the exact integer",
        cases: &[
            (
                "v: 0x1FFFFFFFFFFFFFFFF\n",
                r#"{"v": "0x1FFFFFFFFFFFFFFFF"}"#,
                r#"{"int": "36893488147419103231"}"#,
            ),
            (
                "v: 07777777777777777777777\n",
                r#"{"v": 7.777777777777777e21}"#,
                r#"{"int": "73786976294838206463"}"#,
            ),
            (
                "0xFFFFFFFFFFFFFFFF: v\n",
                "error",
                r#"{"map": [[{"int": "18446744073709551615"}, {"str": "v"}]]}"#,
            ),
        ],
    },
    Difference {
        what: "= and << as values are text in go-yaml; PyYAML resolves them to tags it cannot construct",
        cases: &[("v: =\n", r#"{"v": "="}"#, "construct"), ("v: <<\n", r#"{"v": "<<"}"#, "construct")],
    },
    Difference {
        what: "timestamps stay text in go-yaml (it keeps the source text when decoding into interface{}); PyYAML makes dates",
        cases: &[
            ("v: 2001-12-14\n", r#"{"v": "2001-12-14"}"#, r#"{"timestamp": "2001-12-14"}"#),
            (
                "v: 2001-12-14 21:59:43.10 -5\n",
                r#"{"v": "2001-12-14 21:59:43.10 -5"}"#,
                r#"{"timestamp": "2001-12-14T21:59:43.100000-05:00"}"#,
            ),
        ],
    },
    Difference {
        what: ".inf and .nan are floats JSON cannot hold: kubectl and the API server fail on them, and so do we; PyYAML reads them",
        cases: &[
            ("v: .inf\n", "error", r#"{"float": "inf"}"#),
            ("v: -.NaN\n", r#"{"v": "-.NaN"}"#, r#"{"str": "-.NaN"}"#),
            ("v: .NaN\n", "error", r#"{"float": "nan"}"#),
        ],
    },
    Difference {
        what: "underscores: Go wants them between digits in a float that starts with a dot (.5_ is text); PyYAML takes them anywhere after the first digit, and crashes on a prefix followed only by underscores (0x_)",
        cases: &[
            ("v: .5_\n", r#"{"v": ".5_"}"#, r#"{"float": "0.5"}"#),
            ("v: 0x_\n", r#"{"v": "0x_"}"#, "crash"),
        ],
    },
    Difference {
        what: "a merge key after explicit keys: go-yaml v2 lets the merged values replace them; PyYAML keeps the explicit keys",
        cases: &[(
            "b: &b {k: merged}\nv:\n  k: explicit\n  <<: *b\n",
            r#"{"b": {"k": "merged"}, "v": {"k": "merged"}}"#,
            r#"{"map": [[{"str": "b"}, {"map": [[{"str": "k"}, {"str": "merged"}]]}], [{"str": "v"}, {"map": [[{"str": "k"}, {"str": "explicit"}]]}]]}"#,
        )],
    },
    Difference {
        what: "explicit tags: go-yaml resolves the text as it would untagged, then checks it against the tag (!!float 0640 is 416, a mismatch is refused); PyYAML's constructors parse the text their own way (!!float 0640 is 640, !!null x is null)",
        cases: &[
            ("v: !!float 0640\n", r#"{"v": 416}"#, r#"{"float": "640.0"}"#),
            ("v: !!null x\n", "error", r#"{"map": [[{"str": "v"}, {"null": null}]]}"#),
            ("v: !!bool yEs\n", "error", r#"{"map": [[{"str": "v"}, {"bool": true}]]}"#),
            ("v: !!float inf\n", "error", r#"{"map": [[{"str": "v"}, {"float": "inf"}]]}"#),
        ],
    },
    Difference {
        what: "tags on collections (!!set, !!omap) mean nothing to go-yaml; custom tags keep the text in go-yaml and fail PyYAML's SafeLoader",
        cases: &[
            (
                "v: !!set {a, b}\n",
                r#"{"v": {"a": null, "b": null}}"#,
                r#"{"map": [[{"str": "v"}, {"set": [{"str": "a"}, {"str": "b"}]}]]}"#,
            ),
            (
                "v: !!omap [{a: 1}]\n",
                r#"{"v": [{"a": 1}]}"#,
                r#"{"map": [[{"str": "v"}, {"seq": [{"seq": [{"str": "a"}, {"int": "1"}]}]}]]}"#,
            ),
            ("v: !Ref x\n", r#"{"v": "x"}"#, "construct"),
        ],
    },
    Difference {
        what: "a key written twice: both keep the last; edpm-agent refuses it on purpose",
        cases: &[("a: 1\na: 2\n", "error", r#"{"map": [[{"str": "a"}, {"int": "2"}]]}"#)],
    },
    Difference {
        what: "a collection containing an alias to itself: go-yaml refuses it; PyYAML builds a recursive structure",
        cases: &[("a: &a [*a]\n", "error", r#"{"map": [[{"str": "a"}, {"seq": [{"recursive": null}]}]]}"#)],
    },
];

#[test]
fn known_differences_are_exactly_these() {
    let texts: Vec<String> =
        KNOWN_DIFFERENCES.iter().flat_map(|d| d.cases.iter().map(|c| c.0.to_string())).collect();
    let answers = pyyaml(&texts);
    let mut answers = answers.iter();
    for d in KNOWN_DIFFERENCES {
        for (text, want_ours, want_py) in d.cases {
            let py = answers.next().unwrap();
            match (ours(text), *want_ours) {
                (Err(_), "error") => {}
                (Ok(docs), want) if want != "error" => {
                    assert_eq!(docs, [serde_json::from_str::<Value>(want).unwrap()], "{}: {text:?}", d.what)
                }
                (got, _) => panic!("{}: {text:?}: we gave {got:?}, the table says {want_ours}", d.what),
            }
            match py {
                Py::Error(kind) => assert_eq!(kind, want_py, "{}: {text:?}", d.what),
                Py::Docs(docs) => {
                    let want: Value = serde_json::from_str(want_py).unwrap_or_else(|_| {
                        panic!("{}: {text:?}: PyYAML read it, the table says {want_py}", d.what)
                    });
                    // A row gives either the whole document or the value of its first key.
                    let got = if want.get("map").is_some() { &docs[0] } else { &docs[0]["map"][0][1] };
                    assert_eq!(got, &want, "{}: {text:?}", d.what);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Generated scalars, in every position a scalar can take.

/// PyYAML's YAML 1.1 float pattern (resolver.py), by hand.
fn py_float_pattern(t: &str) -> bool {
    let s = t.strip_prefix(['-', '+']).unwrap_or(t);
    let digits_us = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    let exp_ok = |e: &str| {
        e.is_empty()
            || (e.len() >= 3
                && matches!(e.as_bytes()[0], b'e' | b'E')
                && matches!(e.as_bytes()[1], b'+' | b'-')
                && e[2..].bytes().all(|b| b.is_ascii_digit()))
    };
    fn split_exp(s: &str) -> (&str, &str) {
        s.find(['e', 'E']).map_or((s, ""), |i| s.split_at(i))
    }
    if let Some((int, frac)) = s.split_once('.')
        && int.starts_with(|c: char| c.is_ascii_digit())
        && !int.contains(':')
    {
        let (frac, exp) = split_exp(frac);
        return digits_us(int) && digits_us(frac) && exp_ok(exp);
    }
    if let Some(rest) = t.strip_prefix('.') {
        let (frac, exp) = split_exp(rest);
        return frac.starts_with(|c: char| c.is_ascii_digit()) && digits_us(frac) && exp_ok(exp);
    }
    if let Some((sexa, frac)) = s.split_once('.')
        && sexa.contains(':')
    {
        return py_sexagesimal_int(sexa) && digits_us(frac);
    }
    matches!(s, ".inf" | ".Inf" | ".INF") || matches!(t, ".nan" | ".NaN" | ".NAN")
}

/// `[1-9][0-9_]*(:[0-5]?[0-9])+` without the sign; `0` may lead in the float form.
fn py_sexagesimal_int(s: &str) -> bool {
    let mut parts = s.split(':');
    let first = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    !rest.is_empty()
        && first.starts_with(|c: char| c.is_ascii_digit())
        && first.bytes().all(|b| b.is_ascii_digit() || b == b'_')
        && rest.iter().all(|p| {
            matches!(p.len(), 1 | 2)
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || p.as_bytes()[0] <= b'5')
        })
}

/// The named difference a disagreement on scalar `t` (in `position`) falls under, if any.
fn explained(
    t: &str,
    position: &str,
    ours: &Result<Vec<Value>, String>,
    py: &Result<Vec<Value>, String>,
) -> Option<&'static str> {
    let unsigned = t.strip_prefix(['-', '+']).unwrap_or(t);
    let py_text = matches!(py, Ok(docs) if docs.iter().any(|d| d.to_string().contains(&format!("\"{t}\""))));
    if matches!(t, "y" | "Y" | "n" | "N") {
        return Some("y/n");
    }
    if ["0o", "0O", "0X", "0B"].iter().any(|p| unsigned.starts_with(p)) {
        return Some("prefixes");
    }
    if t.contains(':') && (py_sexagesimal_int(unsigned) || py_float_pattern(t)) {
        return Some("sexagesimal");
    }
    if t.contains('_') {
        return Some("underscores");
    }
    if matches!(t, "=" | "<<") && position != "key" {
        return Some("= and <<");
    }
    if let Err(why) = py {
        if why.contains("Timestamp") {
            return Some("timestamps");
        }
        if why.contains("NonFinite") && ours.is_err() {
            return Some(".inf/.nan");
        }
    }
    // go-yaml reads a number PyYAML keeps as text: floats YAML 1.1's pattern misses, or
    // integers beyond 64 bits read as floats.
    if py_text && !py_float_pattern(t) {
        return Some("go-only floats");
    }
    if unsigned.len() > 18 && unsigned.bytes().all(|b| b.is_ascii_hexdigit() || b == b'x' || b == b'b') {
        return Some("beyond 64 bits");
    }
    if position.starts_with("!!") {
        return Some("explicit tags");
    }
    if position == "key" && unsigned.len() >= 16 && ours.is_err() {
        return Some("beyond 64 bits");
    }
    None
}

/// The scalar texts to try: every class, in the spellings that matter, plus generated ones.
fn scalars() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in ["true", "false", "yes", "no", "on", "off", "y", "n", "null", "nil", "none"] {
        let upper = word.to_uppercase();
        let title = format!("{}{}", &upper[..1], &word[1..]);
        let odd: String = word
            .chars()
            .enumerate()
            .map(|(i, c)| if i % 2 == 1 { c.to_ascii_uppercase() } else { c })
            .collect();
        out.extend([word.to_string(), upper, title, odd]);
    }
    out.extend(
        [
            "",
            "~",
            "0",
            "-0",
            "+0",
            "00",
            "007",
            "0640",
            "0400",
            "0777",
            "0800",
            "08",
            "09",
            "0_640",
            "12",
            "-12",
            "+12",
            "1_000",
            "1__0",
            "0x1F",
            "0x1f",
            "0X1F",
            "-0x10",
            "0x_1F",
            "0x",
            "0x_",
            "0b101",
            "0B101",
            "-0b1",
            "0b",
            "0b_",
            "0o17",
            "0O17",
            "0o",
            "0o8",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "0x1FFFFFFFFFFFFFFFF",
            "0xFFFFFFFFFFFFFFFF",
            "1.5",
            "-1.5",
            "+1.5",
            "1.",
            "-1.",
            ".5",
            "-.5",
            "+.5",
            "1e3",
            "1E3",
            "1e+3",
            "1.5e3",
            "1.5e+3",
            "1.5E-3",
            "1_000.5",
            ".5_5",
            ".5_",
            "._5",
            "6.02e23",
            "1e999",
            "1.0e999",
            "1e-400",
            "0.1",
            "3.141592653589793",
            ".inf",
            ".Inf",
            ".INF",
            "+.inf",
            "-.inf",
            "-.Inf",
            ".nan",
            ".NaN",
            ".NAN",
            "-.nan",
            "inf",
            "nan",
            ".infinity",
            "1:30",
            "-1:30",
            "190:20:30",
            "1:30.5",
            "1:60",
            "2001-12-14",
            "2001-12-14t21:59:43.10-05:00",
            "2001-12-14 21:59:43.10 -5",
            "2002-12-14",
            "2001-1-2",
            "12:00:00",
            "<<",
            "=",
            "-",
            "+",
            ".",
            "1.2.3",
            "10.0.0.1",
            "192.168.122.0/24",
            "br-ex",
            "eth0",
            "2001:db8::1",
            "~x",
            "null!",
            "e3",
            "1e",
            "0.5.",
            "+-1",
            "0x-1",
            "0b-1",
            "0b+1",
            "-0b-1",
            "1_",
            "_1",
            "1-2",
            "abc",
            "True1",
        ]
        .map(String::from),
    );
    // Generated: short strings over the characters that make numbers, booleans and nulls.
    let alphabet: Vec<char> = "0123456789_.+-:eExXoObBaAfFyYnN~".chars().collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = 1 + (state % 7) as usize;
        let mut s = String::new();
        let mut x = state;
        for _ in 0..len {
            s.push(alphabet[(x % alphabet.len() as u64) as usize]);
            x /= alphabet.len() as u64;
        }
        out.push(s);
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn scalars_in_every_position_agree_but_for_the_known_differences() {
    type Make = fn(&str) -> String;
    let positions: [(&str, Make); 9] = [
        ("value", |t| format!("v: {t}\n")),
        ("key", |t| format!("{t}: v\n")),
        ("item", |t| format!("v: [{t}]\n")),
        ("single", |t| format!("v: '{}'\n", t.replace('\'', "''"))),
        ("double", |t| format!("v: \"{}\"\n", t.replace('\\', "\\\\").replace('"', "\\\""))),
        ("!!str", |t| format!("v: !!str {t}\n")),
        ("!!int", |t| format!("v: !!int {t}\n")),
        ("!!float", |t| format!("v: !!float {t}\n")),
        ("!!bool", |t| format!("v: !!bool {t}\n")),
    ];
    let scalars = scalars();
    let mut cases = Vec::new();
    for t in &scalars {
        for (name, make) in &positions {
            cases.push((t.clone(), *name, make(t)));
        }
    }
    let texts: Vec<String> = cases.iter().map(|c| c.2.clone()).collect();
    let answers = pyyaml(&texts);
    let mut unexplained = Vec::new();
    let mut agreed = 0;
    for ((t, position, text), py) in cases.iter().zip(&answers) {
        match compare(text, py) {
            Outcome::Agree => agreed += 1,
            Outcome::Differ { ours, py } => {
                if explained(t, position, &ours, &py).is_none() {
                    unexplained.push(format!("{position} {t:?}: ours {ours:?}, PyYAML {py:?}"));
                }
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "{} unexplained differences:\n{}",
        unexplained.len(),
        unexplained.join("\n")
    );
    assert!(agreed > cases.len() * 3 / 4, "only {agreed} of {} cases agreed", cases.len());
}

// ---------------------------------------------------------------------------------------------
// Generated documents: nested block and flow collections, every scalar style, anchors and
// aliases, merge keys, comments and multi-document streams.

/// A small deterministic generator (xorshift), so a failure names a reproducible document.
struct Gen {
    state: u64,
    /// Anchors defined so far in this document: name, whether a mapping, whether still open.
    anchors: Vec<(String, bool, bool)>,
    count: usize,
}

/// Scalars both readers agree on, as written in a plain context safe for flow collections too.
const PLAIN: &[&str] = &[
    "12",
    "-7",
    "0640",
    "0x1F",
    "1_000",
    "0b101",
    "1.5",
    "-0.25",
    "6.02e+23",
    ".5",
    "true",
    "False",
    "yes",
    "NO",
    "on",
    "Off",
    "~",
    "null",
    "NULL",
    "hello",
    "hello world",
    "10.0.0.1",
    "br-ex",
    "v1.2.3",
    "edpm_compute",
    "x=y",
    "a/b",
    "-dash",
    "2001-12-14x",
    "1.0",
    "0",
    "007",
    "100000000000000000000",
];

/// Keys with their JSON form.
const KEYS: &[(&str, &str)] = &[
    ("name", "name"),
    ("a", "a"),
    ("ansibleVars", "ansibleVars"),
    ("edpm_network_config_template", "edpm_network_config_template"),
    ("'quoted key'", "quoted key"),
    ("\"dq\\tkey\"", "dq\tkey"),
    ("8080", "8080"),
    ("0640", "416"),
    ("on", "true"),
    ("OFF", "false"),
    ("'on'", "on"),
    ("1.5", "1.5"),
    ("-3", "-3"),
    ("with space", "with space"),
    ("k.dotted", "k.dotted"),
];

const WORDS: &[&str] =
    &["alpha", "beta", "gamma", "delta", "  indented", "x: y", "# not a comment", "'q'", "\"dq\""];

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, anchors: Vec::new(), count: 0 }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn stream(&mut self) -> String {
        let docs = 1 + self.below(3);
        let mut out = String::new();
        if self.below(2) == 0 {
            out.push_str("---\n");
        }
        for i in 0..docs {
            if i > 0 {
                out.push_str(if self.below(2) == 0 { "---\n" } else { "--- # next\n" });
            }
            self.anchors.clear();
            self.count = 0;
            out.push_str(&self.block_map(0, 0));
        }
        out
    }

    fn anchor(&mut self, map: bool) -> String {
        if self.below(6) != 0 {
            return String::new();
        }
        let name = format!("a{}", self.anchors.len());
        self.anchors.push((name.clone(), map, true));
        format!("&{name} ")
    }

    fn close_anchor(&mut self, prefix: &str) {
        if let Some(name) = prefix.strip_prefix('&').map(str::trim)
            && let Some(a) = self.anchors.iter_mut().find(|a| a.0 == name)
        {
            a.2 = false;
        }
    }

    fn alias(&mut self, map_only: bool) -> Option<String> {
        let closed: Vec<String> =
            self.anchors.iter().filter(|a| !a.2 && (a.1 || !map_only)).map(|a| a.0.clone()).collect();
        (!closed.is_empty()).then(|| format!("*{}", self.pick(&closed)))
    }

    fn scalar(&mut self, flow: bool) -> String {
        match self.below(if flow { 4 } else { 6 }) {
            0 | 1 => self.pick(PLAIN).to_string(),
            2 => format!("'{}'", self.pick(WORDS).replace('\'', "''")),
            3 => format!("\"{}\\t{}\\u00e9\"", self.pick(WORDS).replace('"', "\\\""), self.below(100)),
            _ => String::new(), // a block scalar, written by the caller
        }
    }

    fn block_scalar(&mut self, indent: usize) -> String {
        let header = *self.pick(&["|", "|-", "|+", ">", ">-"]);
        let pad = " ".repeat(indent + 2);
        // The first line sets the indentation: it must not be one of the more-indented words.
        let mut out = format!("{header}\n{pad}{}\n", self.pick(&WORDS[..4]));
        for _ in 0..self.below(3) {
            if self.below(4) == 0 {
                out.push('\n');
            }
            out.push_str(&format!("{pad}{}\n", self.pick(WORDS)));
        }
        out
    }

    fn flow(&mut self, depth: usize) -> String {
        if depth > 2 || self.below(3) == 0 {
            return self.scalar(true);
        }
        let n = self.below(4);
        if self.below(2) == 0 {
            let items: Vec<String> = (0..n).map(|_| self.flow(depth + 1)).collect();
            format!("[{}]", items.join(", "))
        } else {
            let mut seen = Vec::new();
            let mut items = Vec::new();
            for _ in 0..n {
                let (k, json) = *self.pick(KEYS);
                if seen.contains(&json) {
                    continue;
                }
                seen.push(json);
                items.push(format!("{k}: {}", self.flow(depth + 1)));
            }
            format!("{{{}}}", items.join(", "))
        }
    }

    /// A value after `key:` (or `-`) at `indent`: the rest of the line and any lines below.
    fn value(&mut self, indent: usize, depth: usize) -> String {
        self.count += 1;
        let roll = if depth >= 4 || self.count > 16 { self.below(4) } else { self.below(9) };
        match roll {
            0 | 1 => {
                let a = self.anchor(false);
                let s = self.scalar(false);
                let s = if s.is_empty() { self.block_scalar(indent) } else { format!("{s}\n") };
                self.close_anchor(&a);
                format!(" {a}{s}")
            }
            2 => match self.alias(false) {
                Some(alias) => format!(" {alias}\n"),
                None => format!(" {}\n", self.flow(0)),
            },
            3 => format!(" {}\n", self.flow(0)),
            4 | 5 => {
                let a = self.anchor(true);
                let body = self.block_map(indent + 2, depth + 1);
                self.close_anchor(&a);
                format!(" {a}\n{body}")
            }
            6 => {
                let a = self.anchor(true);
                let body = self.block_map(indent + 2, depth + 1);
                self.close_anchor(&a);
                format!(" {a}# a comment\n{body}")
            }
            _ => {
                let a = self.anchor(false);
                let body = self.block_seq(indent + 2, depth + 1);
                self.close_anchor(&a);
                format!(" {a}\n{body}")
            }
        }
    }

    fn block_map(&mut self, indent: usize, depth: usize) -> String {
        let pad = " ".repeat(indent);
        let mut out = String::new();
        let mut seen: Vec<&str> = Vec::new();
        // A merge first, so that go-yaml's and PyYAML's orders agree.
        if self.below(5) == 0
            && let Some(alias) = self.alias(true)
        {
            let target = if self.below(2) == 0 {
                alias
            } else {
                format!("[{alias}, {}]", self.alias(true).unwrap_or_else(|| "{extra: 1}".into()))
            };
            out.push_str(&format!("{pad}<<: {target}\n"));
        }
        for _ in 0..1 + self.below(4) {
            let (k, json) = *self.pick(KEYS);
            if seen.contains(&json) {
                continue;
            }
            seen.push(json);
            if self.below(6) == 0 {
                out.push_str(&format!("{pad}# about {json}\n"));
            }
            let v = self.value(indent, depth);
            out.push_str(&format!("{pad}{k}:{v}"));
        }
        out
    }

    fn block_seq(&mut self, indent: usize, depth: usize) -> String {
        let pad = " ".repeat(indent);
        let mut out = String::new();
        for _ in 0..1 + self.below(4) {
            let v = self.value(indent, depth);
            out.push_str(&format!("{pad}-{v}"));
        }
        out
    }
}

#[test]
fn generated_documents_agree() {
    let texts: Vec<String> = (0..2000).map(|seed| Gen::new(seed + 1).stream()).collect();
    let answers = pyyaml(&texts);
    let mut failures = Vec::new();
    let mut errors = 0;
    for (text, py) in texts.iter().zip(&answers) {
        if let Py::Error(_) = py {
            errors += 1;
        }
        if let Outcome::Differ { ours, py } = compare(text, py) {
            failures.push(format!("{text}\n--> ours {ours:?}\n--> PyYAML {py:?}\n"));
        }
    }
    assert!(failures.is_empty(), "{} documents differ; the first:\n{}", failures.len(), failures[0]);
    assert!(errors < texts.len() / 20, "{errors} generated documents were not even YAML to PyYAML");
}
