//! The controller's pure half: which NodeSets a change can move (`touch`) and when the loop
//! evaluates what (`schedule`: every trigger, and what to do next). Its shell, the loop itself,
//! the watches and the writes, is the `edpm-controller` crate (ARCHITECTURE.md, "The
//! controller").

pub mod schedule;
pub mod touch;
