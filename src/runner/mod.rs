//! The runner's shell: the one place that spawns and signals processes.

pub(crate) mod artifacts;
pub(crate) mod play;
pub(crate) mod prepare;
pub(crate) mod user;
