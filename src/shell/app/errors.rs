//! The one place where module errors become exit codes (README, "Exit codes").

use super::AppError;
use crate::inventory::{self, InventoryError};
use crate::model::ModelError;
use crate::render::RenderError;
use crate::shell::exit::Exit;
use crate::shell::k8s;
use crate::shell::node_root::FsError;
use crate::shell::source::SourceError;
use crate::snapshot::SnapshotError;
use crate::staging::StageError;

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
