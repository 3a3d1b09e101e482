//! `oslo parse|get|explain|lint|merge`: reads the files named on the command line, runs the
//! pure engine in `edpm_core::oslo`, prints text or JSON. Exit 1 on a malformed file or an unset
//! option, as the issue and oslo's own tools do.

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Value, json};

use super::AppError;
use super::output::{write_out, write_output};
use crate::cli::{LayerArg, LayersArgs, OsloAction, OsloArgs, TextOrJson};
use crate::exit::Exit;
use edpm_core::excerpt::echo;
use edpm_core::oslo::layer::{Layer, Layers};
use edpm_core::oslo::lint::{self, Severity};
use edpm_core::oslo::{self, ConfigFile, pyrepr};
use edpm_io::files::Texts;

#[allow(clippy::too_many_lines, reason = "the dispatch of the oslo subcommands, one arm each")]
pub(super) fn run(args: OsloArgs, out: &mut dyn Write) -> Result<Exit, AppError> {
    let writes_files = matches!(args.action, OsloAction::Merge { .. });
    let output_file = match &args.action {
        OsloAction::Merge { output_file, .. } => output_file.clone(),
        _ => None,
    };
    let (format, output) =
        super::output::format_and_file(args.format, output_file, TextOrJson::Text, writes_files)?;
    let json = format == TextOrJson::Json;
    match args.action {
        OsloAction::Parse { file } => {
            let text = read(&file)?;
            match oslo::parse(&text) {
                Ok(f) => {
                    let doc =
                        if json { pretty(&json!({ "sections": Sections(&f) })) } else { text_listing(&f) };
                    write_out(out, &doc)?;
                    Ok(Exit::Success)
                }
                Err(e) => parse_failure(&file, &e, json, out),
            }
        }
        OsloAction::Get { layers, multi, group, key } => {
            let texts = read_layers(&layers)?;
            let layers = match load(&texts, json, out)? {
                Ok(l) => l,
                Err(code) => return Ok(code),
            };
            let found: Vec<_> = if multi {
                layers.get_multi(&group, &key).collect()
            } else {
                layers.get(&group, &key).into_iter().collect()
            };
            if found.is_empty() {
                return Err(AppError::failure(format!(
                    "[{group}] {key} is not set in any of the {} file(s)",
                    layers.layers.len()
                )));
            }
            let doc = if json {
                let entry = |f: &oslo::layer::Found| json!({"value": f.value, "file": f.file, "line": f.line, "section": f.section});
                let v = if multi {
                    json!({"group": group, "key": key, "values": found.iter().map(entry).collect::<Vec<_>>()})
                } else {
                    let mut e = entry(&found[0]);
                    e["group"] = json!(group);
                    e["key"] = json!(key);
                    e
                };
                pretty(&v)
            } else {
                found.iter().map(|f| format!("{}\n  from {}:{}\n", f.value, f.file, f.line)).collect()
            };
            write_out(out, &doc)?;
            Ok(Exit::Success)
        }
        OsloAction::Explain { layers } => {
            let texts = read_layers(&layers)?;
            let layers = match load(&texts, json, out)? {
                Ok(l) => l,
                Err(code) => return Ok(code),
            };
            write_out(out, &explain(&layers, json))?;
            Ok(Exit::Success)
        }
        OsloAction::Lint { file, strict } => {
            let text = read(&file)?;
            let findings = lint::lint(&text);
            let shown = file.display().to_string();
            let doc = if json {
                pretty(&json!({"file": shown, "findings": findings.iter().map(|f| json!({
                    "severity": match f.severity { Severity::Error => "error", Severity::Warning => "warning" },
                    "line": f.line, "message": f.message})).collect::<Vec<_>>()}))
            } else {
                findings
                    .iter()
                    .map(|f| {
                        let sev = if f.severity == Severity::Error { "error" } else { "warning" };
                        format!("{shown}:{}: {sev}: {}\n", f.line, f.message)
                    })
                    .collect()
            };
            write_out(out, &doc)?;
            let errors = findings.iter().any(|f| f.severity == Severity::Error);
            Ok(if errors || (strict && !findings.is_empty()) { Exit::Failure } else { Exit::Success })
        }
        OsloAction::Merge { layers, .. } => {
            let texts = read_layers(&layers)?;
            let layers = match load(&texts, json, out)? {
                Ok(l) => l,
                Err(code) => return Ok(code),
            };
            let names: Vec<String> = layers.layers.iter().map(|l| l.file.clone()).collect();
            let header = format!("Merged by edpm-agent from, in order:\n{}", names.join("\n"));
            let text =
                oslo::write::write(&oslo::merge::merge(&layers), &[&header]).map_err(AppError::failure)?;
            match output {
                // Config files carry credentials (transport_url, passwords).
                Some(path) => write_output(out, &path, &text, 0o600)?,
                None => write_out(out, &text)?,
            }
            Ok(Exit::Success)
        }
    }
}

fn pretty(v: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

fn read(path: &Path) -> Result<String, AppError> {
    super::output::read_text(path, "config file", Exit::Failure)
}

/// oslo's `ConfigFileParseError` text with the line cut to a readable length and what to do,
/// or the JSON error object, whose `text` is the whole line as oslo's parser reports it (a
/// program reading it gets exactly what oslo would give, and `line` to find it).
fn parse_failure(
    file: &Path,
    e: &oslo::ParseError,
    json: bool,
    out: &mut dyn Write,
) -> Result<Exit, AppError> {
    let shown = file.display().to_string();
    if json {
        write_out(
            out,
            &pretty(&json!({"error": {"file": shown, "line": e.line, "message": e.message, "text": e.text}})),
        )?;
        return Ok(Exit::Failure);
    }
    Err(AppError::failure(format!(
        "Failed to parse {shown}: at {shown}:{}, {}: {}; {}",
        e.line,
        e.message,
        echo(&e.text).quoted(pyrepr::repr),
        e.hint()
    )))
}

/// Reads the layers' files in command-line order; missing files are reported together, as
/// oslo does. A file that cannot be read stops the reading; its error is reported after the
/// files before it have been parsed (see [`load`]).
fn read_layers(args: &LayersArgs) -> Result<(Texts, Option<std::io::Error>), AppError> {
    let mut files = Vec::new();
    for l in &args.order {
        match l {
            LayerArg::File(p) => files.push(p.clone()),
            LayerArg::Dir(d) => {
                let entries = std::fs::read_dir(d).map_err(|_| {
                    AppError::failure(format!("Failed to read config file directory: {}", d.display()))
                })?;
                let names: Vec<String> =
                    entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
                files.extend(oslo::layer::config_dir_files(&names).into_iter().map(|n| d.join(n)));
            }
        }
    }
    let missing: Vec<String> =
        files.iter().filter(|p| !p.is_file()).map(|p| p.display().to_string()).collect();
    if !missing.is_empty() {
        return Err(AppError::failure(format!("Failed to find some config files: {}", missing.join(","))));
    }
    Ok(Texts::read_until_error(files))
}

/// Parses the files read by [`read_layers`]. A malformed file ends the command (exit 1), as it
/// stops the service at start-up; so does an unreadable one, but only once every file before it
/// has parsed: the order oslo, which reads and parses file by file, reports problems in.
fn load<'t>(
    (texts, unreadable): &'t (Texts, Option<std::io::Error>),
    json: bool,
    out: &mut dyn Write,
) -> Result<Result<Layers<'t>, Exit>, AppError> {
    let mut layers = Vec::new();
    for (f, text) in texts.iter() {
        match oslo::parse(text) {
            Ok(config) => layers.push(Layer { file: f.display().to_string(), config }),
            Err(e) => return parse_failure(f, &e, json, out).map(Err),
        }
    }
    if let Some(e) = unreadable {
        return Err(AppError::failure(e));
    }
    Ok(Ok(Layers::new(layers)))
}

/// `{"sections": {name: {key: [values]}}}` in file order.
struct Sections<'a, 'b>(&'b ConfigFile<'a>);

impl Serialize for Sections<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (name, keys) in self.0.sections_merged() {
            m.serialize_entry(name, &Keys(&keys))?;
        }
        m.end()
    }
}

struct Keys<'a, 'b, 'c>(&'c oslo::parse::MergedKeys<'a, 'b>);

impl Serialize for Keys<'_, '_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, entries) in self.0 {
            m.serialize_entry(k, &entries.iter().map(|e| &*e.value).collect::<Vec<_>>())?;
        }
        m.end()
    }
}

fn text_listing(f: &ConfigFile) -> String {
    let mut s = String::new();
    for (name, keys) in f.sections_merged() {
        s.push_str(&format!("[{name}]\n"));
        for (k, entries) in keys {
            for e in entries {
                s.push_str(&format!("{k} = {}  # line {}\n", pyrepr::repr(&e.value), e.line));
            }
        }
    }
    s
}

fn explain(layers: &Layers, json: bool) -> String {
    let options = layers.options();
    if json {
        let items: Vec<Value> = options
            .iter()
            .map(|(g, k)| {
                let winner = layers.get(g, k);
                let all: Vec<_> = layers.get_multi(g, k).collect();
                json!({
                    "group": g, "key": k,
                    "value": winner.map(|w| w.value),
                    "from": winner.map(|w| json!({"file": w.file, "line": w.line})),
                    "occurrences": all.iter().map(|f| json!({"value": f.value, "file": f.file, "line": f.line})).collect::<Vec<_>>(),
                })
            })
            .collect();
        return pretty(
            &json!({ "files": layers.layers.iter().map(|l| &l.file).collect::<Vec<_>>(), "options": items }),
        );
    }
    let mut s = String::new();
    for (g, k) in options {
        let Some(w) = layers.get(&g, &k) else { continue };
        s.push_str(&format!("[{g}] {k} = {}\n    set by   {}:{}\n", pyrepr::repr(w.value), w.file, w.line));
        let all: Vec<_> = layers.get_multi(&g, &k).collect();
        for f in all.iter().rev().filter(|f| (f.file, f.line) != (w.file, w.line)) {
            s.push_str(&format!(
                "    overrode {}:{} = {} (kept too if the option is multi-valued)\n",
                f.file,
                f.line,
                pyrepr::repr(f.value)
            ));
        }
    }
    s
}
