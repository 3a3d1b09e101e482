//! The hashes openstack-operator records of the Secrets and ConfigMaps a Deployment delivered
//! (`status.secretHashes`, `status.configMapHashes`), computed exactly as lib-common computes
//! them, so that a hash recorded by the operator can be compared with the object as it is now:
//!
//! - `secret.Hash`: `util.ObjectHash` of `{data, stringData, type}` (each `omitempty`);
//! - `configmap.Hash`: `util.ObjectHash` of `{data, binaryData}` (each `omitempty`);
//! - `util.ObjectHash`: Go's `json.Marshal` of that struct (map keys sorted bytewise, `[]byte`
//!   as padded standard base64, strings escaped as Go escapes them: `<`, `>`, `&`, U+2028 and
//!   U+2029 as `\u…`), SHA-256 of the bytes, `fmt.Sprint` of the 32-byte array (`[12 0 255 …]`),
//!   and apimachinery's `rand.SafeEncodeString` of that text (each character to one of 27
//!   letters and digits).
//!
//! Pinned by `tests/fixtures/hash/cases.json`, whose hashes Go itself computed
//! (`tests/fixtures/hash/gen.go`): binary data, non-ASCII text, the characters Go's encoder
//! escapes, and keys that sort differently by bytes and by letters.
//!
//! A Secret is hashed as the API server stores it (`stringData` merged into `data`, `type`
//! defaulted to `Opaque`): what the operator read when it hashed it.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::snapshot::{ConfigMapData, SecretData};

/// The hash of a Secret as stored: its `data` (with any `stringData` already merged, as the
/// snapshot keeps it) and its `type`.
pub fn secret(s: &SecretData) -> String {
    secret_parts(&s.data, &BTreeMap::new(), &s.type_)
}

/// The hash of a Secret's fields as given (`string_data` beside `data`, `type` as it is:
/// empty is left out), as lib-common's `secret.Hash` computes it.
pub fn secret_parts(
    data: &BTreeMap<String, Vec<u8>>,
    string_data: &BTreeMap<String, String>,
    type_: &str,
) -> String {
    let mut json = String::from("{");
    let mut first = true;
    if !data.is_empty() {
        field(&mut json, &mut first, "data");
        bytes_map(&mut json, data);
    }
    if !string_data.is_empty() {
        field(&mut json, &mut first, "stringData");
        text_map(&mut json, string_data);
    }
    if !type_.is_empty() {
        field(&mut json, &mut first, "type");
        go_string(&mut json, type_);
    }
    json.push('}');
    object_hash(json.as_bytes())
}

/// The hash of a ConfigMap, as lib-common's `configmap.Hash` computes it.
pub fn config_map(c: &ConfigMapData) -> String {
    let mut json = String::from("{");
    let mut first = true;
    if !c.data.is_empty() {
        field(&mut json, &mut first, "data");
        text_map(&mut json, &c.data);
    }
    if !c.binary.is_empty() {
        field(&mut json, &mut first, "binaryData");
        bytes_map(&mut json, &c.binary);
    }
    json.push('}');
    object_hash(json.as_bytes())
}

fn field(json: &mut String, first: &mut bool, name: &str) {
    if !std::mem::take(first) {
        json.push(',');
    }
    go_string(json, name);
    json.push(':');
}

/// A `map[string]string`: keys in byte order (Go sorts map keys as strings, which compare
/// bytewise; so does a `BTreeMap<String, _>`).
fn text_map(json: &mut String, m: &BTreeMap<String, String>) {
    json.push('{');
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        go_string(json, k);
        json.push(':');
        go_string(json, v);
    }
    json.push('}');
}

/// A `map[string][]byte`: each value as padded standard base64.
fn bytes_map(json: &mut String, m: &BTreeMap<String, Vec<u8>>) {
    json.push('{');
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        go_string(json, k);
        json.push_str(":\"");
        base64(json, v);
        json.push('"');
    }
    json.push('}');
}

/// A string as Go's `encoding/json` writes it with HTML escaping on (json.Marshal's default):
/// `"` and `\` escaped, `\b \f \n \r \t` by name (Go 1.22 and later), other control characters
/// and `<`, `>`, `&`, U+2028, U+2029 as `\u00xx`/`\u20xx`; everything else as is (UTF-8).
fn go_string(json: &mut String, s: &str) {
    json.push('"');
    for c in s.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            '\u{8}' => json.push_str("\\b"),
            '\u{c}' => json.push_str("\\f"),
            '\n' => json.push_str("\\n"),
            '\r' => json.push_str("\\r"),
            '\t' => json.push_str("\\t"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                let _ = write!(json, "\\u{:04x}", c as u32);
            }
            c => json.push(c),
        }
    }
    json.push('"');
}

/// Padded standard base64 (Go's `base64.StdEncoding`, which `[]byte` fields use).
fn base64(out: &mut String, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

/// SHA-256 of the JSON, printed as Go's `fmt.Sprint` prints a `[32]byte`, then
/// `rand.SafeEncodeString`.
fn object_hash(json: &[u8]) -> String {
    const ALPHANUMS: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
    let sum = crate::staging::sha256(json);
    let mut printed = String::from("[");
    for (i, b) in sum.iter().enumerate() {
        if i > 0 {
            printed.push(' ');
        }
        let _ = write!(printed, "{b}");
    }
    printed.push(']');
    printed.bytes().map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const CASES: &str = include_str!("../../../tests/fixtures/hash/cases.json");

    /// The fixture's base64 (Go's own output), read as go-yaml reads `!!binary`.
    fn decode(v: &Value) -> Vec<u8> {
        crate::yaml::resolve::decode_base64(v.as_str().unwrap()).unwrap()
    }

    fn texts(v: &Value) -> BTreeMap<String, String> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    }

    fn blobs(v: &Value) -> BTreeMap<String, Vec<u8>> {
        v.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), decode(v))).collect()
    }

    #[test]
    fn hashes_are_the_ones_go_computed() {
        let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
        assert!(cases.len() >= 10);
        for c in &cases {
            let got = match c["kind"].as_str().unwrap() {
                "Secret" => secret_parts(
                    &blobs(&c["data"]),
                    &texts(&c["stringData"]),
                    c["type"].as_str().unwrap_or_default(),
                ),
                _ => config_map(&ConfigMapData { data: texts(&c["data"]), binary: blobs(&c["binaryData"]) }),
            };
            assert_eq!(got, c["hash"].as_str().unwrap(), "{}", c["name"]);
        }
    }

    proptest::proptest! {
        /// Whatever the text, the JSON written reads back as that text, and never carries the
        /// characters Go's encoder escapes.
        #[test]
        fn go_strings_read_back_and_escape_what_go_escapes(s in "\\PC*|[<>&\u{2028}\u{0}-\u{1f}\"\\\\]{0,8}") {
            let mut json = String::new();
            go_string(&mut json, &s);
            let back: String = serde_json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(&back, &s);
            let escaped = ['<', '>', '&', '\u{2028}', '\u{2029}'];
            proptest::prop_assert!(!json.contains(escaped), "{}", json);
        }

        #[test]
        fn base64_reads_back(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut s = String::new();
            base64(&mut s, &bytes);
            proptest::prop_assert_eq!(s.len() % 4, 0);
            proptest::prop_assert_eq!(decode(&Value::String(s)), bytes);
        }
    }

    #[test]
    fn base64_pads_as_go_does() {
        for (bytes, want) in
            [(&b""[..], ""), (b"a", "YQ=="), (b"ab", "YWI="), (b"abc", "YWJj"), (&[0xff, 0xfe][..], "//4=")]
        {
            let mut s = String::new();
            base64(&mut s, bytes);
            assert_eq!(s, want);
        }
    }

    #[test]
    fn a_secret_is_hashed_as_stored() {
        // stringData merged into data and type Opaque: the same hash as the API server's copy.
        let stored = SecretData {
            data: BTreeMap::from([("password".to_string(), b"secret".to_vec())]),
            type_: "Opaque".into(),
        };
        let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
        let one = cases.iter().find(|c| c["name"] == "one text key").unwrap();
        assert_eq!(secret(&stored), one["hash"].as_str().unwrap());
    }
}
