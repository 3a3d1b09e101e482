//! The one place where errors become exit codes (docs/reference.md, "Exit codes"): `AppError` is built
//! only here, by a constructor named after its exit code's class or from a module error by
//! the `From` impls below.

use std::path::Path;

use crate::exit::Exit;
use crate::source::SourceError;
use edpm_core::inventory::{self, InventoryError};
use edpm_core::model::ModelError;
use edpm_core::render::RenderError;
use edpm_core::runner::job::JobError;
use edpm_core::runner::policy::RunError;
use edpm_core::settings::SettingsError;
use edpm_core::snapshot::SnapshotError;
use edpm_core::staging::StageError;
use edpm_io::files::ReadError;
use edpm_io::k8s;
use edpm_io::node_root::FsError;

/// An error that ends the run: a one-line message and the exit code for its class.
#[derive(Debug)]
pub struct AppError {
    code: Exit,
    message: String,
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl AppError {
    /// The exit code of the error's class.
    pub fn code(&self) -> Exit {
        self.code
    }

    /// The one-line message.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn new(code: Exit, message: impl std::fmt::Display) -> Self {
        // Ansible shows the script's stderr as one message; keep it one line.
        let message = message.to_string().replace('\n', " ");
        AppError { code, message }
    }

    /// Exit 1: something failed that is not the input's fault (an encoding, a write).
    pub(crate) fn failure(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Failure, message)
    }

    /// Exit 2: the command line asks for something that cannot be done as asked.
    pub(crate) fn usage(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// Exit 3: the input is malformed.
    pub(crate) fn invalid_input(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::InvalidInput, message)
    }

    /// Exit 5: the input contradicts itself.
    pub(crate) fn conflict(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Conflict, message)
    }

    /// Exit 6: a source or a file the command needs cannot be read.
    pub(crate) fn source_unreadable(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::SourceUnreadable, message)
    }

    /// Exit 8: a host, node, NodeSet or variable the command names is not there.
    pub(crate) fn not_found(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::NotFound, message)
    }

    /// Exit 11: `status wait` ran out of time.
    pub(crate) fn timeout(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Timeout, message)
    }

    /// Exit 12: `status wait` saw a condition that will not become true by waiting.
    pub(crate) fn terminal(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Terminal, message)
    }

    /// Exit 13: the sources hold no data-plane object.
    pub(crate) fn empty(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Empty, message)
    }

    /// Standard output went away (`| head`): nothing more to say, and not a failure.
    pub(crate) fn output_closed() -> Self {
        AppError { code: Exit::Success, message: String::new() }
    }

    /// A file the user named could not be read: `code` when it could not be opened or read,
    /// invalid input when it is not a regular file, too large or not UTF-8.
    pub(crate) fn unreadable(what: &str, path: &Path, e: ReadError, code: Exit) -> Self {
        let code = if matches!(e, ReadError::Io(_)) { code } else { Exit::InvalidInput };
        Self::new(code, format!("cannot read {what} {}: {e}", path.display()))
    }
}

/// `main` prints the message once, on one line, and exits with the code.
impl edpm_io::program::Failure for AppError {
    fn exit_code(&self) -> u8 {
        self.code as u8
    }
}

/// The runner reports a failed run's code and message in its summary.
impl edpm_runner::Failure for AppError {
    fn message(&self) -> &str {
        &self.message
    }
}

impl From<RunError> for AppError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Usage(m) => AppError::usage(m),
            RunError::Unreadable(m) => AppError::source_unreadable(m),
            RunError::Failure(m) => AppError::failure(m),
            RunError::Job(j) => j.into(),
        }
    }
}

impl From<JobError> for AppError {
    fn from(e: JobError) -> Self {
        use JobError as J;
        let code = match e {
            J::NotRunner { .. }
            | J::BadOption { .. }
            | J::NoDirectory
            | J::NoPlaybook
            | J::DirMismatch { .. } => Exit::Usage,
            J::Env { .. } | J::Malformed { .. } | J::NoFallback { .. } => Exit::InvalidInput,
        };
        AppError::new(code, e)
    }
}

impl From<SettingsError> for AppError {
    fn from(e: SettingsError) -> Self {
        let code = if matches!(e, SettingsError::NoSource) { Exit::Usage } else { Exit::InvalidInput };
        AppError::new(code, e)
    }
}

impl From<SnapshotError> for AppError {
    fn from(e: SnapshotError) -> Self {
        let code = if e.is_duplicate() { Exit::Conflict } else { Exit::InvalidInput };
        AppError::new(code, e)
    }
}

impl From<SourceError> for AppError {
    fn from(e: SourceError) -> Self {
        match e {
            SourceError::Unreadable { .. } | SourceError::NoManifests { .. } => {
                AppError::new(Exit::SourceUnreadable, e)
            }
            SourceError::NotRegular { .. } => AppError::new(Exit::SourceUnreadable, e),
            SourceError::TooLarge { .. } | SourceError::FileTooLarge { .. } | SourceError::NotUtf8 { .. } => {
                AppError::new(Exit::InvalidInput, e)
            }
            SourceError::Snapshot(s) => s.into(),
            SourceError::Cluster(k) => k.into(),
        }
    }
}

impl From<k8s::Error> for AppError {
    fn from(e: k8s::Error) -> Self {
        AppError::new(Exit::Cluster, e)
    }
}

impl From<edpm_io::output::OutputError> for AppError {
    fn from(e: edpm_io::output::OutputError) -> Self {
        match e {
            edpm_io::output::OutputError::Closed => AppError::output_closed(),
            failed @ edpm_io::output::OutputError::Failed(_) => AppError::failure(failed),
        }
    }
}

impl From<edpm_controller::Error> for AppError {
    fn from(e: edpm_controller::Error) -> Self {
        use edpm_controller::Error as E;
        match e {
            E::Usage(m) => AppError::usage(m),
            E::Cluster(k) => k.into(),
            E::Model(m) => m.into(),
            E::Failure(m) => AppError::failure(m),
        }
    }
}

impl From<ModelError> for AppError {
    fn from(e: ModelError) -> Self {
        let code = match e {
            ModelError::MissingRole { .. } => Exit::MissingReference,
            // A required field left out is malformed input, not a reference to nothing.
            ModelError::NoRole { .. } => Exit::InvalidInput,
        };
        AppError::new(code, e)
    }
}

impl From<InventoryError> for AppError {
    fn from(e: InventoryError) -> Self {
        let code = match e.kind() {
            inventory::ErrorKind::Invalid => Exit::InvalidInput,
            inventory::ErrorKind::Missing => Exit::MissingReference,
            inventory::ErrorKind::Conflict => Exit::Conflict,
        };
        AppError::new(code, e)
    }
}

impl From<RenderError> for AppError {
    fn from(e: RenderError) -> Self {
        let code = match &e {
            RenderError::Cell(_) | RenderError::MissingDataSource { .. } => Exit::MissingReference,
            RenderError::NotDeployed { .. } => Exit::NotFound,
            _ => Exit::InvalidInput,
        };
        AppError::new(code, e)
    }
}

impl From<StageError> for AppError {
    fn from(e: StageError) -> Self {
        let code = match &e {
            StageError::NoNode(_) => Exit::NotFound,
            StageError::MissingSource { .. } | StageError::MissingCaBundle { .. } => Exit::MissingReference,
            StageError::Render(r) => return AppError::from(r.clone()),
            StageError::Clash { .. } => Exit::Conflict,
            _ => Exit::InvalidInput,
        };
        AppError::new(code, e)
    }
}

impl From<FsError> for AppError {
    fn from(e: FsError) -> Self {
        let code = match e {
            FsError::Unsafe { .. } => Exit::Conflict,
            _ => Exit::Failure,
        };
        AppError::new(code, e)
    }
}
