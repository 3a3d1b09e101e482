//! A program's output: its text written whole to its stream, a warning for the person at the
//! terminal, and standard output for a child's output pump. The CLI's commands write through
//! it (`edpm-agent`'s `app::output` adds files and JSON), and so does the runner.

use std::io::Write;

/// Why output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The reader went away (`edpm-agent … | head`): nothing more to say, and not a failure.
    #[error("the output's reader went away")]
    Closed,
    #[error("cannot write output: {0}")]
    Failed(std::io::Error),
}

/// Writes `text` and flushes.
pub fn write_out(out: &mut dyn Write, text: &str) -> Result<(), OutputError> {
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe { OutputError::Closed } else { OutputError::Failed(e) }
    })
}

/// A warning for the person at the terminal, on stderr. Never in inventory-script mode, where
/// stderr must stay empty on success (callers log instead).
#[allow(clippy::disallowed_macros, reason = "the one place warnings reach stderr")]
pub fn warn(message: &str) {
    eprintln!("edpm-agent: warning: {}", edpm_core::excerpt::printable(message));
}

/// Our stdout for a child's output pump (a thread): a duplicate descriptor, so that the
/// caller's locked handle and the pump never wait on each other.
pub fn stdout_for_pump() -> std::io::Result<Box<dyn Write + Send>> {
    use std::os::fd::AsFd;
    Ok(Box::new(std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?)))
}
