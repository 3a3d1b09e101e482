//! The node agent's checks: what was deployed on this node, and whether it still holds.
//!
//! Pure: [`Facts`] (collected by the shell, `host`) and what the node was given ([`Expect`],
//! from the agent's config file, which the install role writes from the inventory) in,
//! conditions out. The agent writes only its own condition types into its node's
//! `EDPMNodeStatus`: `NodeAgentReady` (phase -1 and 0 on the node itself) and one
//! `Service<Camel>RuntimeReady` per deployed service (phase 1); `status report` owns the rest.

pub mod check;
pub mod config;
pub mod facts;

pub use check::evaluate;
pub use config::{AgentConfig, Expect};
