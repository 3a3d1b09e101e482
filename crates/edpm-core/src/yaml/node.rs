//! The value tree the readers build: JSON's data model (what the API server holds after
//! sigs.k8s.io/yaml's conversion), with the line each node and key was written on, and strings
//! borrowed from the file text wherever no escape or folding changed them.
//!
//! Typed objects are decoded straight from the tree (`impl Deserializer for &Node`), so no
//! intermediate `serde_json::Value` is built for the parts that become typed fields.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A node: its value and the (1-based) line it starts on; 0 when unknown (JSON input).
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    pub line: u32,
    pub data: Data<'a>,
}

/// A node's value: JSON's data model. The scalars are what go-yaml's resolution gives
/// (`resolve`, before the JSON conversion `load` applies) and what the tree holds after it:
/// one enum for both.
#[derive(Debug, Clone, PartialEq)]
pub enum Data<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(Cow<'a, str>),
    Seq(Vec<Node<'a>>),
    /// Keys are unique (duplicates are refused), kept in the order written.
    Map(Vec<Entry<'a>>),
}

/// A mapping entry: the key as JSON sees it, the line the key was written on, and the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'a> {
    pub key: Cow<'a, str>,
    pub line: u32,
    pub value: Node<'a>,
}

impl Data<'_> {
    /// go-yaml's short name for the value's type, for messages (`!!int`).
    pub fn tag_name(&self) -> &'static str {
        match self {
            Data::Null => "!!null",
            Data::Bool(_) => "!!bool",
            Data::Int(_) | Data::UInt(_) => "!!int",
            Data::Float(_) => "!!float",
            Data::Str(_) => "!!str",
            Data::Seq(_) => "!!seq",
            Data::Map(_) => "!!map",
        }
    }
}

impl<'a> Node<'a> {
    pub fn new(line: u32, data: Data<'a>) -> Node<'a> {
        Node { line, data }
    }

    /// The value under `key` when this is a mapping.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        match &self.data {
            Data::Map(entries) => entries.iter().find(|e| e.key == key).map(|e| &e.value),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.data {
            Data::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.data, Data::Null)
    }

    pub fn is_map(&self) -> bool {
        matches!(self.data, Data::Map(_))
    }

    /// Takes the value under `key` out of a mapping (the entry stays, holding null).
    pub fn take(&mut self, key: &str) -> Option<Node<'a>> {
        match &mut self.data {
            Data::Map(entries) => entries.iter_mut().find(|e| e.key == key).map(|e| {
                let line = e.value.line;
                std::mem::replace(&mut e.value, Node::new(line, Data::Null))
            }),
            _ => None,
        }
    }

    /// Number of nodes in this subtree (this one included).
    pub fn count(&self) -> usize {
        1 + match &self.data {
            Data::Seq(items) => items.iter().map(Node::count).sum(),
            Data::Map(entries) => entries.iter().map(|e| e.value.count()).sum(),
            _ => 0,
        }
    }

    /// Depth of this subtree: 0 for a scalar, 1 for a flat collection.
    pub fn depth(&self) -> usize {
        match &self.data {
            Data::Seq(items) => 1 + items.iter().map(Node::depth).max().unwrap_or(0),
            Data::Map(entries) => 1 + entries.iter().map(|e| e.value.depth()).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// The node a serde field path leads to, for errors that point at a line.
    pub fn at_path(&self, path: &serde_path_to_error::Path) -> Option<(&Node<'a>, u32)> {
        use serde_path_to_error::Segment;
        let mut node = self;
        let mut line = self.line;
        for seg in path {
            match (seg, &node.data) {
                (Segment::Seq { index }, Data::Seq(items)) => {
                    node = items.get(*index)?;
                    line = node.line;
                }
                (Segment::Map { key }, Data::Map(entries)) => {
                    let e = entries.iter().find(|e| e.key == key.as_str())?;
                    line = e.line;
                    node = &e.value;
                }
                _ => return Some((node, line)),
            }
        }
        Some((node, line))
    }

    /// A JSON value as a tree (owned strings, no lines).
    pub fn from_value(v: &Value) -> Node<'static> {
        let data = match v {
            Value::Null => Data::Null,
            Value::Bool(b) => Data::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => Data::Int(i),
                (None, Some(u), _) => Data::UInt(u),
                (None, None, f) => Data::Float(f.unwrap_or_default()),
            },
            Value::String(s) => Data::Str(Cow::Owned(s.clone())),
            Value::Array(items) => Data::Seq(items.iter().map(Node::from_value).collect()),
            Value::Object(m) => Data::Map(
                m.iter()
                    .map(|(k, v)| Entry { key: Cow::Owned(k.clone()), line: 0, value: Node::from_value(v) })
                    .collect(),
            ),
        };
        Node::new(0, data)
    }

    /// The plain JSON value.
    pub fn to_value(&self) -> Value {
        match &self.data {
            Data::Null => Value::Null,
            Data::Bool(b) => Value::Bool(*b),
            Data::Int(i) => Value::from(*i),
            Data::UInt(u) => Value::from(*u),
            Data::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Data::Str(s) => Value::String(s.to_string()),
            Data::Seq(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Data::Map(entries) => {
                Value::Object(entries.iter().map(|e| (e.key.to_string(), e.value.to_value())).collect())
            }
        }
    }

    /// Every field path (`spec.nodes.edpm-compute-0.networks[0].fixedIP`) with the line its key
    /// or item starts on, for `explain`. Keys are joined with dots as written, unquoted.
    pub fn field_lines(&self, out: &mut Vec<(String, u32)>) {
        fn walk(node: &Node, path: &mut String, out: &mut Vec<(String, u32)>) {
            match &node.data {
                Data::Map(entries) => {
                    for e in entries {
                        let len = path.len();
                        if !path.is_empty() {
                            path.push('.');
                        }
                        path.push_str(&e.key);
                        out.push((path.clone(), e.line));
                        walk(&e.value, path, out);
                        path.truncate(len);
                    }
                }
                Data::Seq(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let len = path.len();
                        path.push_str(&format!("[{i}]"));
                        out.push((path.clone(), item.line));
                        walk(item, path, out);
                        path.truncate(len);
                    }
                }
                _ => {}
            }
        }
        walk(self, &mut String::new(), out);
    }
}

// ---------------------------------------------------------------------------------------------
// Typed decoding straight from the tree.

/// A decoding error; the caller adds the field path (serde_path_to_error) and the line.
#[derive(Debug, Clone, PartialEq)]
pub struct DeError(pub String);

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError(msg.to_string())
    }
}

impl<'de> Node<'de> {
    fn unexpected(&self) -> de::Unexpected<'_> {
        match &self.data {
            Data::Null => de::Unexpected::Unit,
            Data::Bool(b) => de::Unexpected::Bool(*b),
            Data::Int(i) => de::Unexpected::Signed(*i),
            Data::UInt(u) => de::Unexpected::Unsigned(*u),
            Data::Float(f) => de::Unexpected::Float(*f),
            Data::Str(s) => de::Unexpected::Str(s),
            Data::Seq(_) => de::Unexpected::Seq,
            Data::Map(_) => de::Unexpected::Map,
        }
    }
}

impl<'de> de::Deserializer<'de> for &Node<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.data {
            Data::Null => visitor.visit_unit(),
            Data::Bool(b) => visitor.visit_bool(*b),
            Data::Int(i) => visitor.visit_i64(*i),
            Data::UInt(u) => visitor.visit_u64(*u),
            Data::Float(f) => visitor.visit_f64(*f),
            Data::Str(Cow::Borrowed(s)) => visitor.visit_borrowed_str(s),
            Data::Str(Cow::Owned(s)) => visitor.visit_str(s),
            Data::Seq(items) => {
                let mut seq = Items { iter: items.iter() };
                let v = visitor.visit_seq(&mut seq)?;
                match seq.iter.len() {
                    0 => Ok(v),
                    n => Err(de::Error::invalid_length(items.len() - n, &"fewer elements")),
                }
            }
            Data::Map(entries) => visitor.visit_map(Entries { iter: entries.iter(), value: None }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.data {
            Data::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match &self.data {
            Data::Str(s) => visitor.visit_enum(s.as_ref().into_deserializer()),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"a string naming a variant")),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

struct Items<'n, 'de> {
    iter: std::slice::Iter<'n, Node<'de>>,
}

impl<'de> SeqAccess<'de> for &mut Items<'_, 'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DeError> {
        self.iter.next().map(|n| seed.deserialize(n)).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct Entries<'n, 'de> {
    iter: std::slice::Iter<'n, Entry<'de>>,
    value: Option<&'n Node<'de>>,
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DeError> {
        match self.iter.next() {
            None => Ok(None),
            Some(e) => {
                self.value = Some(&e.value);
                match &e.key {
                    Cow::Borrowed(s) => {
                        seed.deserialize(de::value::BorrowedStrDeserializer::new(s)).map(Some)
                    }
                    Cow::Owned(s) => seed.deserialize(s.as_str().into_deserializer()).map(Some),
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        match self.value.take() {
            Some(v) => seed.deserialize(v),
            None => Err(de::Error::custom("value asked for before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// A decoding failure located in the tree: the field path (`spec.node.ansiblePort`), the line
/// of that field, and serde's message.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeFailure {
    pub path: String,
    pub line: u32,
    pub message: String,
}

/// Decodes `node` into `T`. The fast path keeps no path; on failure the decode runs again with
/// path tracking to name the field, which costs nothing on the way to success.
pub fn decode<'de, T: de::Deserialize<'de>>(node: &Node<'de>) -> Result<T, DecodeFailure> {
    if let Ok(v) = T::deserialize(node) {
        return Ok(v);
    }
    serde_path_to_error::deserialize::<_, T>(node).map_err(|e| {
        let line = node.at_path(e.path()).map_or(node.line, |(_, l)| l);
        DecodeFailure {
            path: e.path().to_string(),
            line,
            message: crate::excerpt::cut_quoted(&e.into_inner().0),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// JSON text into the same tree (serde_json drives it), with duplicate keys refused as in YAML.

/// One JSON document as a tree.
pub struct JsonDocument<'de>(pub Node<'de>);

impl<'de> de::Deserialize<'de> for JsonDocument<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        JsonSeed { depth: 0 }.deserialize(d).map(JsonDocument)
    }
}

/// Builds a node at `depth` collections deep, refusing what YAML would refuse.
struct JsonSeed {
    depth: usize,
}

impl JsonSeed {
    fn deeper<E: de::Error>(&self) -> Result<JsonSeed, E> {
        if self.depth >= super::MAX_DEPTH {
            return Err(E::custom(format_args!(
                "nesting deeper than {} levels: refused as hostile input (no custom resource nests this deep)",
                super::MAX_DEPTH
            )));
        }
        Ok(JsonSeed { depth: self.depth + 1 })
    }
}

impl<'de> DeserializeSeed<'de> for JsonSeed {
    type Value = Node<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for JsonSeed {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::new(0, Data::Null))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
        Ok(Node::new(0, Data::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
        Ok(Node::new(0, Data::Int(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
        Ok(Node::new(
            0,
            match i64::try_from(v) {
                Ok(i) => Data::Int(i),
                Err(_) => Data::UInt(v),
            },
        ))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Node<'de>, E> {
        Ok(Node::new(0, Data::Float(v)))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::new(0, Data::Str(Cow::Borrowed(v))))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::new(0, Data::Str(Cow::Owned(v.to_string()))))
    }

    fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::new(0, Data::Str(Cow::Owned(v))))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let deeper = self.deeper()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(SEQ_CAPACITY));
        while let Some(n) = seq.next_element_seed(JsonSeed { depth: deeper.depth })? {
            items.push(n);
        }
        Ok(Node::new(0, Data::Seq(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let deeper = self.deeper()?;
        let mut entries: Vec<Entry<'de>> = Vec::with_capacity(MAP_CAPACITY);
        let mut index = KeyIndex::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if index.find(&entries, &key).is_some() {
                return Err(duplicate_key(&key));
            }
            let value = map.next_value_seed(JsonSeed { depth: deeper.depth })?;
            entries.push(Entry { key, line: 0, value });
            index.added(&entries);
        }
        Ok(Node::new(0, Data::Map(entries)))
    }
}

/// One JSON document whose root object's `items` array is given to `sink` item by item
/// instead of being kept (it comes back empty): see `load::document_streaming`.
pub struct StreamSeed<'s, 'de> {
    pub sink: &'s mut dyn FnMut(Node<'de>),
    /// Reading the root's `items`, not the root.
    pub items: bool,
}

impl<'de> DeserializeSeed<'de> for StreamSeed<'_, 'de> {
    type Value = Node<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// Forwards the visits of scalars to the plain visitor.
macro_rules! forward_to_json_seed {
    ($($method:ident($($arg:ident: $ty:ty),*)),*) => {
        $(fn $method<E: de::Error>(self, $($arg: $ty),*) -> Result<Node<'de>, E> {
            JsonSeed { depth: 0 }.$method($($arg),*)
        })*
    };
}

impl<'de> Visitor<'de> for StreamSeed<'_, 'de> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    forward_to_json_seed! {
        visit_unit(), visit_bool(v: bool), visit_i64(v: i64), visit_u64(v: u64), visit_f64(v: f64),
        visit_borrowed_str(v: &'de str), visit_str(v: &str), visit_string(v: String)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        if !self.items {
            return JsonSeed { depth: 0 }.visit_seq(seq);
        }
        while let Some(item) = seq.next_element_seed(JsonSeed { depth: 2 })? {
            (self.sink)(item);
        }
        Ok(Node::new(0, Data::Seq(Vec::new())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        if self.items {
            return JsonSeed { depth: 1 }.visit_map(map);
        }
        let mut entries: Vec<Entry<'de>> = Vec::with_capacity(MAP_CAPACITY);
        let mut index = KeyIndex::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if index.find(&entries, &key).is_some() {
                return Err(duplicate_key(&key));
            }
            let value = if key == "items" {
                map.next_value_seed(StreamSeed { sink: &mut *self.sink, items: true })?
            } else {
                map.next_value_seed(JsonSeed { depth: 1 })?
            };
            entries.push(Entry { key, line: 0, value });
            index.added(&entries);
        }
        Ok(Node::new(0, Data::Map(entries)))
    }
}

fn duplicate_key<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("key \"{key}\" appears twice in this object; {}", super::DUPLICATE_POLICY))
}

/// A JSON object key, borrowed from the text when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// First allocations of a collection's children: most mappings of a manifest have fewer than
/// eight keys, so one allocation holds them (the trees live only until they are decoded).
pub(crate) const MAP_CAPACITY: usize = 8;
pub(crate) const SEQ_CAPACITY: usize = 4;

/// Finds keys of one mapping: a scan while it is small, a hash table once it is large, so a
/// mapping with 50,000 keys costs linear time.
#[derive(Default)]
pub(crate) struct KeyIndex {
    table: Option<hashbrown::HashTable<usize>>,
}

const LINEAR_KEYS: usize = 16;

fn hash_key(key: &str) -> u64 {
    // FNV-1a: keys are short, and the table only needs spread, not secrecy (the duplicate
    // check is exact).
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

impl KeyIndex {
    pub(crate) fn find(&self, entries: &[Entry], key: &str) -> Option<usize> {
        match &self.table {
            None => entries.iter().position(|e| e.key == key),
            Some(t) => t.find(hash_key(key), |&i| entries[i].key == key).copied(),
        }
    }

    /// Records the entry just pushed.
    pub(crate) fn added(&mut self, entries: &[Entry]) {
        let hasher = |&i: &usize| hash_key(&entries[i].key);
        match &mut self.table {
            Some(t) => {
                let i = entries.len() - 1;
                t.insert_unique(hash_key(&entries[i].key), i, hasher);
            }
            None if entries.len() > LINEAR_KEYS => {
                let mut t = hashbrown::HashTable::with_capacity(entries.len() * 2);
                for (i, e) in entries.iter().enumerate() {
                    t.insert_unique(hash_key(&e.key), i, hasher);
                }
                self.table = Some(t);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn json_node(text: &str) -> Result<Node<'_>, serde_json::Error> {
        serde_json::from_str::<JsonDocument>(text).map(|d| d.0)
    }

    #[test]
    fn json_strings_borrow_unless_escaped() {
        let n = json_node(r#"{"a": "plain", "b": "esc\"aped", "c": [1, -2, 1.5, true, null]}"#).unwrap();
        assert!(matches!(n.get("a").unwrap().data, Data::Str(Cow::Borrowed("plain"))));
        assert!(matches!(&n.get("b").unwrap().data, Data::Str(Cow::Owned(s)) if s == "esc\"aped"));
        assert_eq!(n.to_value(), json!({"a": "plain", "b": "esc\"aped", "c": [1, -2, 1.5, true, null]}));
    }

    #[test]
    fn json_duplicate_keys_are_refused_with_a_position() {
        let err = json_node("{\n \"a\": 1,\n \"a\": 2\n}").unwrap_err();
        assert_eq!(err.line(), 3);
        assert!(err.to_string().contains("key \"a\" appears twice"), "{err}");
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Port {
        name: String,
        container_port: Option<i64>,
        #[serde(default)]
        tags: Vec<String>,
        #[serde(flatten)]
        rest: std::collections::BTreeMap<String, Value>,
    }

    #[test]
    fn typed_decoding_names_the_field_and_its_line() {
        let mut n =
            json_node(r#"{"name": "x", "containerPort": 80, "tags": ["a"], "extra": {"k": [1]}}"#).unwrap();
        let p: Port = decode(&n).unwrap();
        assert_eq!(p.container_port, Some(80));
        assert_eq!(p.rest["extra"], json!({"k": [1]}));
        if let Data::Map(entries) = &mut n.data {
            entries[1].line = 7;
            entries[1].value = Node::new(7, Data::Str("eighty".into()));
        }
        let err = decode::<Port>(&n).unwrap_err();
        assert_eq!((err.path.as_str(), err.line), ("containerPort", 7));
        assert!(err.message.contains("invalid type: string \"eighty\""), "{}", err.message);
    }

    #[test]
    fn field_lines_follow_keys_and_items() {
        let n = Node::new(
            1,
            Data::Map(vec![Entry {
                key: "spec".into(),
                line: 2,
                value: Node::new(
                    3,
                    Data::Map(vec![Entry {
                        key: "nets".into(),
                        line: 3,
                        value: Node::new(4, Data::Seq(vec![Node::new(4, Data::Str("a".into()))])),
                    }]),
                ),
            }]),
        );
        let mut out = Vec::new();
        n.field_lines(&mut out);
        assert_eq!(
            out,
            [("spec".to_string(), 2), ("spec.nets".to_string(), 3), ("spec.nets[0]".to_string(), 4)]
        );
        assert_eq!((n.count(), n.depth()), (4, 3));
    }
}
