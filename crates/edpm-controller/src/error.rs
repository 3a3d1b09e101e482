//! Why the controller could not start or go on: its own error, which the CLI turns into an
//! exit code (`edpm-agent`'s table, docs/reference.md "Exit codes"). An evaluation's failure
//! is not one: it is logged and retried.

/// Why the controller stopped short.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It was asked for something it cannot do as asked (a source other than the cluster).
    #[error("{0}")]
    Usage(String),
    /// The API server could not be reached or refused a request.
    #[error("{0}")]
    Cluster(#[from] edpm_io::k8s::Error),
    /// The objects read do not hold together (an evaluation's: logged and retried).
    #[error("{0}")]
    Model(#[from] edpm_core::model::ModelError),
    /// Anything else: the runtime, a listener, the serving certificate, a read.
    #[error("{0}")]
    Failure(String),
}

impl Error {
    pub(crate) fn failure(message: impl std::fmt::Display) -> Error {
        Error::Failure(message.to_string())
    }
}
