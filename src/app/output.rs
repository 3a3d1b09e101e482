//! The one way commands produce output: text to the `out` writer (`edpm_io::output`, which
//! the runner writes through too), JSON (a serialization failure is an error, never an empty
//! document), and files replaced atomically (never a link, FIFO or device: those are refused,
//! and `-` or `/dev/stdout` is the output stream). And the one way they read a file the user
//! named: bounded, and saying why not.

use std::io::Write;
use std::path::Path;

use super::AppError;
use crate::exit::Exit;
pub(crate) use edpm_io::output::warn;

/// Writes `text` and flushes (`edpm_io::output::write_out`). A reader that went away
/// (`edpm-agent … | head`) ends the run quietly with success.
pub(crate) fn write_out(out: &mut dyn Write, text: &str) -> Result<(), AppError> {
    Ok(edpm_io::output::write_out(out, text)?)
}

/// Whether standard output is a terminal, and its width in columns when it says one.
pub(crate) fn stdout_terminal() -> (bool, Option<usize>) {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return (false, None);
    }
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ only writes a `winsize` into the one passed, which lives on this
    // stack frame for the call; a descriptor that is no terminal fails it, changing nothing.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &raw mut size) };
    (true, (rc == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col)))
}

/// `value` as JSON text with a final newline, indented or compact.
pub(crate) fn json_text(value: &impl serde::Serialize, pretty: bool) -> Result<String, AppError> {
    let text = if pretty { serde_json::to_string_pretty(value) } else { serde_json::to_string(value) };
    let mut text = text.map_err(|e| AppError::failure(format!("cannot encode JSON output: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// Replaces the file at `path` atomically with `bytes` and `mode`; on failure nothing was
/// written. A path that exists and is not a regular file is refused (`edpm_io::files::check_replaceable`).
pub(crate) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AppError> {
    write_atomic(path, bytes, mode, "; remove it, or name another path")
}

/// [`write_file`] with the fix an error names when the path is no regular file.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32, not_regular_fix: &str) -> Result<(), AppError> {
    edpm_io::files::write_atomic(path, bytes, mode).map_err(|e| {
        let fix = if e.kind() == std::io::ErrorKind::AlreadyExists { not_regular_fix } else { "" };
        AppError::failure(format!("cannot write {}: {e}{fix}; nothing was written", path.display()))
    })
}

/// A command's `-o`/`--output FILE`: the file replaced atomically ([`write_file`]), or, for
/// `-` and `/dev/stdout`, the output stream `out`: a rename over those would replace the
/// device or the link and never reach the reader.
pub(crate) fn write_output(out: &mut dyn Write, path: &Path, text: &str, mode: u32) -> Result<(), AppError> {
    if is_stdout(path) {
        return write_out(out, text);
    }
    write_atomic(path, text.as_bytes(), mode, "; name a new or regular file, or `-` for standard output")
}

/// Whether an output path names standard output.
pub(crate) fn is_stdout(path: &Path) -> bool {
    path == Path::new("-") || path == Path::new("/dev/stdout")
}

/// Reads a text file the user named (a settings file, a config file, a template): at most
/// `edpm_io::files::MAX_FILE_BYTES`, UTF-8, and a FIFO such as `<(…)` is read as a stream. `what`
/// says what the file is for; `code` is the exit code for an unreadable one.
pub(crate) fn read_text(path: &Path, what: &str, code: Exit) -> Result<String, AppError> {
    use edpm_io::files::{MAX_FILE_BYTES, read_bounded};
    read_bounded(path, MAX_FILE_BYTES, true).map_err(|e| AppError::unreadable(what, path, e, code))
}

/// A command's `-o`/`--output` (its format, or, the old spelling, its file) and its
/// `--output-file`: the format (`default` when none is given) and the file to write, if any.
/// `writes_files`: whether the command writes a file at all (else `-o FILE` names no format).
pub(crate) fn format_and_file<F: clap::ValueEnum + Copy + PartialEq>(
    given: Vec<crate::cli::Output<F>>,
    output_file: Option<std::path::PathBuf>,
    default: F,
    writes_files: bool,
) -> Result<(F, Option<std::path::PathBuf>), AppError> {
    use crate::cli::Output;
    let name = |f: &F| f.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
    let (mut format, mut file) = (None::<F>, output_file);
    for g in given {
        match g {
            Output::Format(f) => match format {
                Some(before) if before != f => {
                    return Err(AppError::usage(format!(
                        "-o/--output/--format given twice ({} and {}): give the format once",
                        name(&before),
                        name(&f)
                    )));
                }
                _ => format = Some(f),
            },
            Output::File(p) if !writes_files => {
                let mut names: Vec<String> = F::value_variants().iter().map(name).collect();
                let last = names.pop().unwrap_or_default();
                return Err(AppError::usage(format!(
                    "-o {:?}: give {} or {last} (only a command that writes a file takes one)",
                    edpm_core::excerpt::printable(&p.display().to_string()),
                    names.join(", ")
                )));
            }
            Output::File(p) => match &file {
                Some(before) if *before != p => {
                    return Err(AppError::usage(format!(
                        "two output files ({} and {}): give one, with --output-file",
                        before.display(),
                        p.display()
                    )));
                }
                _ => file = Some(p),
            },
        }
    }
    Ok((format.unwrap_or(default), file))
}
