//! The controller's pure half: which NodeSets a change can move (`touch`) and when the loop
//! evaluates what (`schedule`). Its shell, the loop itself, the watches and the writes, is the
//! product's `controller` (ARCHITECTURE.md, "The controller").

pub mod schedule;
pub mod touch;
