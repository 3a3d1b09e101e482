//! The one way commands produce output: text to the `out` writer, JSON (a serialization
//! failure is an error, never an empty document), and files replaced atomically.

use std::io::Write;
use std::path::Path;

use super::AppError;
use crate::exit::Exit;

/// Writes `text` and flushes. A reader that went away (`edpm-agent … | head`) ends the run
/// quietly with success.
pub(crate) fn write_out(out: &mut dyn Write, text: &str) -> Result<(), AppError> {
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return AppError { code: Exit::Success, message: String::new() };
        }
        AppError::new(Exit::Failure, format!("cannot write output: {e}"))
    })
}

/// `value` as JSON text with a final newline, indented or compact.
pub(crate) fn json_text(value: &impl serde::Serialize, pretty: bool) -> Result<String, AppError> {
    let text = if pretty { serde_json::to_string_pretty(value) } else { serde_json::to_string(value) };
    let mut text =
        text.map_err(|e| AppError::new(Exit::Failure, format!("cannot encode JSON output: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// Replaces the file at `path` atomically with `bytes` and `mode`; on failure nothing was
/// written.
pub(crate) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AppError> {
    crate::fsutil::write_atomic(path, bytes, mode).map_err(|e| {
        AppError::new(Exit::Failure, format!("cannot write {}: {e}; nothing was written", path.display()))
    })
}
