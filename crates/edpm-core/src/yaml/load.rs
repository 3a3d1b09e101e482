//! granit-parser's events into a [`Node`] tree, one kubectl document at a time, with go-yaml
//! v2's semantics for everything above the scanner: scalar resolution, anchors and aliases
//! (an alias names the latest anchor of that name before it), merge keys, and the JSON keys
//! sigs.k8s.io/yaml makes of non-string keys. Duplicate keys are refused (on purpose; see
//! [`super::DUPLICATE_POLICY`]), and so is input past the limits in [`super`].
//!
//! Iterative (an explicit stack of open collections), so nesting never grows the Rust stack.

use std::borrow::Cow;

use granit_parser::{Event, Options, Parser, ScalarStyle, Span, StructureStyle};

use super::node::{Data, Entry, KeyIndex, MAP_CAPACITY, Node, SEQ_CAPACITY};
use super::resolve;
use super::{ALIAS_NODES_FLOOR, ALIAS_NODES_PER_WRITTEN, DUPLICATE_POLICY, Error, MAX_DEPTH};
use crate::excerpt::echo;

const MERGE_TAG: &str = "tag:yaml.org,2002:merge";

/// Parses the text of one kubectl document (the lines between two `---` separators), whose
/// first line is line `first_line` of the file. `None` when it holds no document (only
/// comments or blank lines).
pub(crate) fn document(text: &str, first_line: u32) -> Result<Option<Node<'_>>, Error> {
    document_streaming(text, first_line, None)
}

/// [`document`], giving each item of the root mapping's `items` list to `items` as soon as
/// it is built instead of keeping it in the tree: a `kind: List` of 50,000 objects is never
/// one tree. The root comes back with `items` empty; whether it was a List, and so whether the
/// items were what the caller took them for, is the caller's to check.
pub(crate) fn document_streaming<'a>(
    text: &'a str,
    first_line: u32,
    items: Option<&mut dyn FnMut(Node<'a>)>,
) -> Result<Option<Node<'a>>, Error> {
    let mut options = Options::default();
    // Comments are compiled into granit-parser here (serde-saphyr asks for them); not capturing
    // them still saves the work of buffering their text.
    options.set_emit_comments(false);
    let mut parser = Parser::new_from_str_with_options(text, options);
    let mut b = Builder::new(text, first_line);
    b.sink = items;
    let mut documents = 0;
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| {
            let m = e.marker();
            Error::syntax(first_line as u64 + m.line() as u64 - 1, m.col() as u64 + 1, e.info())
        })?;
        match event {
            Event::StreamStart | Event::StreamEnd => {}
            // Only a node makes a second document worth refusing (`check_single`).
            Event::DocumentStart(..) if documents > 0 => b.after_end = true,
            Event::DocumentEnd => documents += 1,
            Event::Scalar(value, style, anchor, tag) => {
                b.check_single(&span)?;
                let tag = tag.map(|t| format!("{}{}", t.handle(), t.suffix()));
                b.scalar(value, style, anchor, tag.as_deref(), &span)?;
            }
            Event::SequenceStart(style, anchor, _) => {
                b.check_single(&span)?;
                b.open(anchor, &span, true, style == StructureStyle::Flow)?;
            }
            Event::MappingStart(style, anchor, _) => {
                b.check_single(&span)?;
                b.open(anchor, &span, false, style == StructureStyle::Flow)?;
            }
            Event::SequenceEnd | Event::MappingEnd => b.close()?,
            Event::Alias(id) => {
                b.check_single(&span)?;
                b.alias(id, &span)?;
            }
            // Not asked for (anchor events, unresolved aliases) or not captured (comments).
            _ => {}
        }
    }
    Ok(b.root)
}

/// An anchored node as it was when its anchor closed, kept for aliases.
struct Anchored<'a> {
    /// `None` while the anchored collection is still open.
    node: Option<Node<'a>>,
    /// The scalar as go-yaml resolved it, for an alias used as a key.
    scalar: Option<Data<'a>>,
    count: usize,
    depth: usize,
}

/// A place in the file: line (1-based) and column (1-based).
#[derive(Clone, Copy)]
struct Pos {
    line: u32,
    col: u32,
}

impl Pos {
    fn error(self, message: String) -> Error {
        Error::invalid(self.line as u64, self.col as u64, message)
    }
}

enum KeyState<'a> {
    /// The next node is a key.
    Expect,
    Key(Cow<'a, str>, Pos),
    /// The `<<` merge key: the value's entries are merged in.
    Merge,
}

struct Frame<'a> {
    pos: Pos,
    /// Written in flow style (`[ ]`, `{ }`).
    flow: bool,
    anchor: usize,
    count: usize,
    depth: usize,
    kind: FrameKind<'a>,
}

enum FrameKind<'a> {
    Seq(Vec<Node<'a>>),
    Map(MapFrame<'a>),
}

struct MapFrame<'a> {
    entries: Vec<Entry<'a>>,
    /// Whether each entry's key was written in this mapping (not only merged in).
    explicit: Vec<bool>,
    index: KeyIndex,
    key: KeyState<'a>,
}

impl<'a> MapFrame<'a> {
    /// A key written in this mapping: a second one of the same name is refused; a merged-in
    /// one is replaced.
    fn insert(&mut self, key: Cow<'a, str>, pos: Pos, value: Node<'a>) -> Result<(), Error> {
        match self.index.find(&self.entries, &key) {
            Some(i) if self.explicit[i] => Err(pos.error(format!(
                "key \"{}\" appears twice in this mapping (first at line {}); {DUPLICATE_POLICY}",
                echo(&key),
                self.entries[i].line
            ))),
            Some(i) => {
                self.explicit[i] = true;
                self.entries[i] = Entry { key, line: pos.line, value };
                Ok(())
            }
            None => {
                self.entries.push(Entry { key, line: pos.line, value });
                self.explicit.push(true);
                self.index.added(&self.entries);
                Ok(())
            }
        }
    }

    /// The value of a `<<` key: a mapping, or a list of mappings of which earlier ones win.
    /// As in go-yaml v2, merged keys replace whatever the mapping holds so far, and keys
    /// written after the `<<` replace them in turn.
    fn merge(&mut self, value: Node<'a>, pos: Pos) -> Result<(), Error> {
        let refused = || {
            pos.error(
                "the merge key `<<` needs a mapping, an alias of one, or a list of them (go-yaml refuses anything else: map merge requires map or sequence of maps as the value)".into(),
            )
        };
        let maps: Vec<Vec<Entry<'a>>> = match value.data {
            Data::Map(entries) => vec![entries],
            Data::Seq(items) => {
                let mut maps = Vec::with_capacity(items.len());
                for item in items.into_iter().rev() {
                    match item.data {
                        Data::Map(entries) => maps.push(entries),
                        _ => return Err(refused()),
                    }
                }
                maps
            }
            _ => return Err(refused()),
        };
        for e in maps.into_iter().flatten() {
            match self.index.find(&self.entries, &e.key) {
                Some(i) => self.entries[i].value = e.value,
                None => {
                    self.entries.push(e);
                    self.explicit.push(false);
                    self.index.added(&self.entries);
                }
            }
        }
        Ok(())
    }
}

struct Builder<'a, 's> {
    text: &'a str,
    first_line: u32,
    /// Where the root's `items` go, one by one, when streaming.
    sink: Option<&'s mut dyn FnMut(Node<'a>)>,
    stack: Vec<Frame<'a>>,
    anchors: Vec<Option<Anchored<'a>>>,
    root: Option<Node<'a>>,
    /// Nodes written in the text, and nodes added by expanding aliases.
    written: usize,
    aliased: usize,
    after_end: bool,
}

impl<'a, 's> Builder<'a, 's> {
    fn new(text: &'a str, first_line: u32) -> Self {
        Builder {
            text,
            first_line,
            sink: None,
            stack: Vec::new(),
            anchors: Vec::new(),
            root: None,
            written: 0,
            aliased: 0,
            after_end: false,
        }
    }

    fn pos(&self, span: &Span) -> Pos {
        Pos { line: self.first_line + span.start.line() as u32 - 1, col: span.start.col() as u32 + 1 }
    }

    /// kubectl hands go-yaml one `---` section at a time, and go-yaml reads only its first
    /// document: a second one (after `...`) would be dropped without a word. Refused instead.
    fn check_single(&self, span: &Span) -> Result<(), Error> {
        if self.after_end && self.stack.is_empty() {
            return Err(self.pos(span).error(
                "a second document starts here, after `...` but without a `---` line; kubectl would silently drop it: put `---` on the line before it".into(),
            ));
        }
        Ok(())
    }

    fn in_key_position(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame { kind: FrameKind::Map(MapFrame { key: KeyState::Expect, .. }), .. })
        )
    }

    fn scalar(
        &mut self,
        value: Cow<'a, str>,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&str>,
        span: &Span,
    ) -> Result<(), Error> {
        self.written += 1;
        let pos = self.pos(span);
        if style == ScalarStyle::Plain && self.stack.last().is_some_and(|f| f.flow) {
            // YAML 1.2 (and granit) lets a plain scalar start with `:` or `?` inside `[ ]` or
            // `{ }` when a non-space follows; libyaml's scanner, and so go-yaml, does not.
            match value.as_bytes().first() {
                Some(b':') => {
                    return Err(pos.error(format!(
                        "`{}` inside [ ] or {{ }}: go-yaml (kubectl, the API server) does not read a plain scalar starting with `:` there; quote it",
                        echo(&value)
                    )));
                }
                Some(b'?') => {
                    return Err(pos.error(format!(
                        "`{}` inside [ ] or {{ }}: go-yaml (kubectl, the API server) reads `?` there as a mapping key, not text; quote it",
                        echo(&value)
                    )));
                }
                _ => {}
            }
        }
        // go-yaml's `isMerge`: the text `<<`, plain (an empty `!` tag counts as plain there)
        // or tagged `!!merge`.
        let merge_key = value == "<<"
            && match tag {
                None => style == ScalarStyle::Plain,
                Some(t) => t == "!" || t == MERGE_TAG,
            };
        let scalar = match tag {
            Some(tag) => resolve::tagged(tag, value).map_err(|m| pos.error(m))?,
            None if style == ScalarStyle::Plain => match resolve::implicit(&value) {
                Some(s) => s,
                None => Data::Str(value),
            },
            None => Data::Str(value),
        };
        let source = span.slice(self.text).unwrap_or_default();
        if anchor != 0 {
            let data = value_data(scalar.clone(), pos, source)?;
            self.set_anchor(
                anchor,
                Anchored {
                    node: Some(Node::new(pos.line, data)),
                    scalar: Some(scalar.clone()),
                    count: 1,
                    depth: 0,
                },
            );
        }
        if self.in_key_position() {
            if merge_key {
                self.set_key(KeyState::Merge);
                return Ok(());
            }
            return self.key(scalar, pos);
        }
        let data = value_data(scalar, pos, source)?;
        self.attach(Node::new(pos.line, data), 1, 0, pos)
    }

    fn key(&mut self, scalar: Data<'a>, pos: Pos) -> Result<(), Error> {
        match resolve::key_text(scalar) {
            Ok(k) => {
                self.set_key(KeyState::Key(k, pos));
                Ok(())
            }
            Err(what) => Err(pos.error(format!(
                "a key that is {what} cannot become a JSON object key, so Kubernetes refuses it; quote the key"
            ))),
        }
    }

    fn set_key(&mut self, state: KeyState<'a>) {
        if let Some(Frame { kind: FrameKind::Map(m), .. }) = self.stack.last_mut() {
            m.key = state;
        }
    }

    fn open(&mut self, anchor: usize, span: &Span, seq: bool, flow: bool) -> Result<(), Error> {
        self.written += 1;
        let pos = self.pos(span);
        if self.in_key_position() {
            return Err(pos.error(
                "a mapping or list cannot be a key: Kubernetes (JSON) object keys are strings".into(),
            ));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(depth_error(pos));
        }
        if anchor != 0 {
            self.set_anchor(anchor, Anchored { node: None, scalar: None, count: 0, depth: 0 });
        }
        let kind = if seq {
            FrameKind::Seq(Vec::with_capacity(SEQ_CAPACITY))
        } else {
            FrameKind::Map(MapFrame {
                entries: Vec::with_capacity(MAP_CAPACITY),
                explicit: Vec::with_capacity(MAP_CAPACITY),
                index: KeyIndex::default(),
                key: KeyState::Expect,
            })
        };
        self.stack.push(Frame { pos, flow, anchor, count: 1, depth: 1, kind });
        Ok(())
    }

    fn close(&mut self) -> Result<(), Error> {
        let Some(frame) = self.stack.pop() else { return Ok(()) };
        let data = match frame.kind {
            FrameKind::Seq(items) => Data::Seq(items),
            FrameKind::Map(m) => Data::Map(m.entries),
        };
        let node = Node::new(frame.pos.line, data);
        if frame.anchor != 0 {
            self.set_anchor(
                frame.anchor,
                Anchored { node: Some(node.clone()), scalar: None, count: frame.count, depth: frame.depth },
            );
        }
        self.attach(node, frame.count, frame.depth, frame.pos)
    }

    fn alias(&mut self, id: usize, span: &Span) -> Result<(), Error> {
        let pos = self.pos(span);
        let name = echo(span.slice(self.text).unwrap_or("*"));
        let in_key = self.in_key_position();
        let Some(Some(anchored)) = self.anchors.get(id) else {
            return Err(pos.error(format!("alias {name} names no anchor before it in this document")));
        };
        let Some(node) = &anchored.node else {
            return Err(pos.error(format!(
                "alias {name} is inside the node its anchor names, so the value would contain itself; Kubernetes refuses it too"
            )));
        };
        let (count, depth) = (anchored.count, anchored.depth);
        let allowed = ALIAS_NODES_FLOOR.max(ALIAS_NODES_PER_WRITTEN * self.written);
        if self.aliased + count > allowed {
            return Err(Error::limit(
                pos.line as u64,
                pos.col as u64,
                format!(
                    "aliases would expand this document past {allowed} nodes (alias {name} adds {count} to the {} already added): refused as an alias bomb; aliases may add {ALIAS_NODES_FLOOR} nodes to a document, or {ALIAS_NODES_PER_WRITTEN} per node written if that is more",
                    self.aliased
                ),
            ));
        }
        if self.stack.len() + depth > MAX_DEPTH {
            return Err(depth_error(pos));
        }
        if in_key {
            return match anchored.scalar.clone() {
                Some(scalar) => self.key(scalar, pos),
                None => Err(pos.error(format!(
                    "alias {name} names a mapping or list, which cannot be a key: Kubernetes (JSON) object keys are strings"
                ))),
            };
        }
        let mut node = node.clone();
        node.line = pos.line;
        self.aliased += count;
        self.attach(node, count, depth, pos)
    }

    /// Whether the root mapping is reading the value of `key`.
    fn root_key_is(&self, key: &str) -> bool {
        matches!(self.stack.first(), Some(Frame { kind: FrameKind::Map(MapFrame { key: KeyState::Key(k, _), .. }), .. }) if k == key)
    }

    fn set_anchor(&mut self, id: usize, a: Anchored<'a>) {
        if self.anchors.len() <= id {
            self.anchors.resize_with(id + 1, || None);
        }
        self.anchors[id] = Some(a);
    }

    /// Adds a finished node to the open collection (or makes it the document).
    fn attach(&mut self, node: Node<'a>, count: usize, depth: usize, pos: Pos) -> Result<(), Error> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        frame.count += count;
        frame.depth = frame.depth.max(depth + 1);
        let streamed =
            self.sink.is_some() && frame.anchor == 0 && self.stack.len() == 2 && self.root_key_is("items");
        let frame = self.stack.last_mut().expect("checked above");
        match &mut frame.kind {
            FrameKind::Seq(_) if streamed => {
                if let Some(sink) = self.sink.as_mut() {
                    sink(node);
                }
                Ok(())
            }
            FrameKind::Seq(items) => {
                items.push(node);
                Ok(())
            }
            FrameKind::Map(m) => match std::mem::replace(&mut m.key, KeyState::Expect) {
                KeyState::Key(key, key_pos) => m.insert(key, key_pos, node),
                KeyState::Merge => m.merge(node, pos),
                KeyState::Expect => Ok(()),
            },
        }
    }
}

fn depth_error(pos: Pos) -> Error {
    Error::limit(
        pos.line as u64,
        pos.col as u64,
        format!(
            "nesting deeper than {MAX_DEPTH} levels: refused as hostile input (no custom resource nests this deep, and the API server's JSON decoding stops there too)"
        ),
    )
}

/// A resolved scalar as the API server holds it after the JSON round trip: only a float
/// changes (or is refused).
fn value_data<'a>(scalar: Data<'a>, pos: Pos, source: &str) -> Result<Data<'a>, Error> {
    let Data::Float(f) = scalar else { return Ok(scalar) };
    json_number(f).ok_or_else(|| {
        pos.error(format!(
            "`{}` is a float {}, which JSON and so the Kubernetes API cannot hold (kubectl fails on it too); quote it to keep the text",
            echo(source),
            if f.is_nan() { "NaN" } else { "infinity" }
        ))
    })
}

/// A finite float as the API server sees it after `json.Marshal`: an integral value below
/// 1e21 is written without a fraction and so reads back as an integer. `None` for NaN and
/// the infinities, which JSON cannot hold.
fn json_number(f: f64) -> Option<Data<'static>> {
    if !f.is_finite() {
        return None;
    }
    if f.fract() == 0.0 && f.abs() < 1e21 {
        if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
            return Some(Data::Int(f as i64));
        }
        if (0.0..1.844_674_407_370_955_2e19).contains(&f) {
            return Some(Data::UInt(f as u64));
        }
    }
    Some(Data::Float(f))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{ErrorKind, documents, to_json_values};

    fn one(text: &str) -> Value {
        let mut docs = to_json_values(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(docs.len(), 1, "{text:?}");
        docs.remove(0)
    }

    fn err(text: &str) -> super::Error {
        documents(text).map(|d| d.len()).unwrap_err()
    }

    #[test]
    fn kubernetes_scalars() {
        let v = one(
            "mode: 0640\nother: 0400\nhex: 0x1F\na: on\nb: y\nc: No\nd: ~\nf: 1.0\ng: 1.5\nexp: 1e3\nt: 2001-12-14\ns: '0640'\nm: 08\nlit: |\n  a\n",
        );
        assert_eq!(
            v,
            json!({"mode": 416, "other": 256, "hex": 31, "a": true, "b": true, "c": false, "d": null,
                   "f": 1, "g": 1.5, "exp": 1000, "t": "2001-12-14", "s": "0640", "m": 8, "lit": "a\n"})
        );
        assert!(v["f"].is_i64() && v["exp"].is_i64());
        assert_eq!(one("on: 1\nOFF: 3\n"), json!({"true": 1, "false": 3}));
    }

    #[test]
    fn keys_become_strings() {
        let v = one("1: a\n0x10: b\ntrue: c\n1.5: d\n2001-01-01: e\n");
        assert_eq!(v, json!({"1": "a", "16": "b", "true": "c", "1.5": "d", "2001-01-01": "e"}));
        for (text, what) in [("~: x\n", "null"), (": x\n", "null"), ("18446744073709551615: x\n", "above")] {
            let e = err(text);
            assert!(e.message.contains(what) && e.message.contains("quote the key"), "{text:?}: {e}");
        }
        let e = err("a: 1\n? [x]\n: y\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("cannot be a key"), "{e}");
    }

    #[test]
    fn anchors_aliases_and_merge_keys_as_go_yaml_v2() {
        let v = one(
            "base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  b: 3\nw:\n  b: 3\n  <<: *b\nz:\n  <<: [{a: 9}, *b]\nq: *b\n",
        );
        assert_eq!(v["x"], json!({"a": 1, "b": 3}));
        // go-yaml v2 applies a merge over the keys written before it.
        assert_eq!(v["w"], json!({"a": 1, "b": 2}));
        // `y` is a key too: the boolean true.
        assert_eq!(one("y: 1\n"), json!({"true": 1}));
        // Earlier maps in a merge list win.
        assert_eq!(v["z"], json!({"a": 9, "b": 2}));
        assert_eq!(v["q"], json!({"a": 1, "b": 2}));
        // An alias names the latest anchor of that name before it.
        assert_eq!(one("a: &x 1\nb: &x 2\nc: *x\n")["c"], json!(2));
        // Quoted `<<` is an ordinary key; a tagged one merges.
        assert_eq!(one("m: &m {k: v}\na:\n  '<<': *m\n")["a"], json!({"<<": {"k": "v"}}));
        assert_eq!(one("m: &m {k: v}\na:\n  !!merge '<<': *m\n")["a"], json!({"k": "v"}));
        for bad in ["a:\n  <<: 1\n", "s: &s [1]\na:\n  <<: *s\n", "a:\n  <<: [x]\n"] {
            let e = err(bad);
            assert!(e.message.contains("merge key"), "{bad:?}: {e}");
        }
        let e = err("a: &a [1, *a]\n");
        assert!(e.message.contains("contain itself"), "{e}");
        let e = err("a: *nope\n");
        assert_eq!((e.line, e.column), (1, 4));
        // libyaml's scanner rules, which granit (YAML 1.2) relaxes.
        assert!(err("a: [:x]\n").message.contains("starting with `:`"));
        assert!(err("a: {?x: 1}\n").message.contains("mapping key"));
        assert_eq!(one("a: :x\n"), json!({"a": ":x"}));
    }

    #[test]
    fn duplicate_keys_are_refused_even_after_conversion() {
        let e = err("a: 1\nb: 2\na: 3\n");
        assert_eq!((e.line, e.kind), (3, ErrorKind::Invalid));
        assert_eq!(
            e.message,
            "key \"a\" appears twice in this mapping (first at line 1); the API server would silently keep one of them, so edpm-agent refuses the ambiguity on purpose: remove one"
        );
        assert!(err("1: a\n\"1\": b\n").message.contains("key \"1\" appears twice"));
        assert!(err("yes: a\non: b\n").message.contains("key \"true\" appears twice"));
        let many: String = (0..100).map(|i| format!("k{i}: {i}\n")).collect::<String>() + "k42: again\n";
        assert_eq!(err(&many).line, 101);
        // A key merged in and then written is not a duplicate.
        assert_eq!(one("m: &m {a: 1}\nx:\n  <<: *m\n  a: 2\n")["x"], json!({"a": 2}));
    }

    #[test]
    fn tags() {
        let v = one(
            "a: !!str 0640\nb: !!int \"0640\"\nc: !!float 2\nd: !custom 12\ne: ! yes\nf: !!binary aGk=\n",
        );
        assert_eq!(v, json!({"a": "0640", "b": 416, "c": 2, "d": "12", "e": "yes", "f": "hi"}));
        let e = err("a: 1\nb: !!int abc\n");
        assert_eq!((e.line, e.column), (2, 10));
        assert!(e.message.contains("cannot be read as !!int"), "{e}");
    }

    #[test]
    fn floats_json_cannot_hold_are_refused() {
        for text in ["a: .inf\n", "a: -.Inf\n", "a: .nan\n", "a: !!float .inf\n"] {
            let e = err(text);
            assert!(e.message.contains("JSON and so the Kubernetes API cannot hold"), "{text}: {e}");
        }
        // As a key it is only text.
        assert_eq!(one(".inf: x\n"), json!({".inf": "x"}));
    }

    #[test]
    fn documents_and_lines() {
        let docs = documents("# c\na: 1\n---\n\nb:\n  c: 2\n--- # x\n---\n...\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!((docs[0].line, docs[1].line), (2, 5));
        assert_eq!(docs[1].get("b").unwrap().line, 6);
        let e = err("a: 1\n...\nb: 2\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("kubectl would silently drop it"), "{e}");
        let e = err("a: 1\n---\nb: [1\n");
        assert_eq!((e.line, e.kind), (3, ErrorKind::Syntax));
        assert!(e.message.ends_with("fix the YAML syntax"), "{e}");
    }

    #[test]
    fn depth_and_alias_limits() {
        let ok = "[".repeat(super::MAX_DEPTH) + &"]".repeat(super::MAX_DEPTH);
        assert!(documents(&ok).is_ok());
        let deep = "[".repeat(super::MAX_DEPTH + 1) + &"]".repeat(super::MAX_DEPTH + 1);
        let e = err(&deep);
        assert_eq!((e.line, e.column, e.kind), (1, 101, ErrorKind::Limit));
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            bomb.push_str(&format!(
                "{}: &{} [{}]\n",
                (b'a' + i) as char,
                (b'a' + i) as char,
                vec![format!("*{}", (b'a' + i - 1) as char); 10].join(", ")
            ));
        }
        let e = err(&bomb);
        assert_eq!(e.kind, ErrorKind::Limit);
        assert!(e.message.contains("alias bomb"), "{e}");
        // One anchor used many times is ordinary.
        let many: String = String::from("d: &d {k: v}\nl:\n") + &"- *d\n".repeat(5000);
        assert_eq!(one(&many)["l"].as_array().unwrap().len(), 5000);
    }

    #[test]
    fn json_shares_the_rules() {
        let deep = "[".repeat(super::MAX_DEPTH + 1) + &"]".repeat(super::MAX_DEPTH + 1);
        let e = super::super::json_documents(&deep).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit);
        assert!(e.message.starts_with("nesting deeper than 100 levels"), "{e}");
        let docs = super::super::json_documents("{\"a\": 1}\n\n  {\"b\": 1.0}\n").unwrap();
        assert_eq!((docs[0].line, docs[1].line), (1, 3));
        assert_eq!(docs[1].to_value(), json!({"b": 1.0}));
        let e = super::super::json_documents("{\"a\": }").unwrap_err();
        assert!(e.message.ends_with("fix the JSON syntax"), "{e}");
    }
}
