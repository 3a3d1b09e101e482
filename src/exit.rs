//! Exit codes. Each class of failure has its own code so that scripts and Ansible wrappers can
//! tell a typo in a manifest from an unreachable cluster. Documented in docs/reference.md, "Exit codes".

/// Process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    Success = 0,
    /// Output could not be written, or a bug. For `oslo` commands, oslo's own convention: a
    /// malformed config file, an unset option, a missing file, or lint errors.
    Failure = 1,
    /// Bad command-line usage (clap's own code).
    Usage = 2,
    /// Malformed input: YAML/JSON syntax, wrong field types, invalid objects or settings.
    InvalidInput = 3,
    /// A referenced object does not exist (Role, ConfigMap, Secret).
    MissingReference = 4,
    /// Conflicting objects: duplicate hosts, duplicate objects, clashing group names.
    Conflict = 5,
    /// A source directory or file cannot be read, or holds no manifests.
    SourceUnreadable = 6,
    /// The Kubernetes API cannot be reached or refused a request.
    Cluster = 7,
    /// The host or variable asked for is not in the inventory.
    NotFound = 8,
    /// `validate` found at least one error.
    ValidationFailed = 9,
    /// `render --check`: the files on disk differ from what would be rendered.
    Drift = 10,
    /// `status wait`: the condition was not met in time.
    Timeout = 11,
    /// `status wait`: a node failed in a way no running Deployment will retry.
    Terminal = 12,
    /// The sources hold no data-plane host (and `--allow-empty` was not given): an inventory
    /// script that finds nothing must not let Ansible run against nothing and succeed.
    Empty = 13,
    /// `status plan`: nothing to apply and nothing in progress: no node failed, is behind the
    /// target version or holds a stale input.
    NothingToDo = 14,
    /// `status plan`: nothing to apply, but Deployments not finished cover every gap: wait for
    /// them (`status wait`), then plan again.
    InProgress = 15,
}

/// What a run ends with: one of the codes above, or, for `run`, the play's own return code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Exit(Exit),
    Play(u8),
}

impl From<Exit> for Status {
    fn from(e: Exit) -> Self {
        Status::Exit(e)
    }
}

impl Status {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Status::Exit(e) => e as u8,
            Status::Play(code) => code,
        }
    }
}
