//! The process environment as plain data. `main` reads it once (the only read of the real
//! environment, see `clippy.toml`); everything else looks variables up here, with one rule:
//! an empty value is unset.

/// The process environment, read once by `main` and passed in (tests pass their own). One
/// rule for every variable edpm-agent reads: an empty value is unset.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: Vec<(String, String)>,
}

impl Env {
    pub fn new(vars: impl IntoIterator<Item = (String, String)>) -> Env {
        Env { vars: vars.into_iter().collect() }
    }

    /// A variable's value; `None` when it is unset or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        // The first definition wins, as getenv(3) reads a duplicated name on glibc.
        self.vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }

    /// `get` as an owned value, for the readers that keep it.
    pub fn string(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_string)
    }

    /// Every variable, for the readers of a prefix (`EDPM_AGENT_IMAGE_*`) and for a child
    /// process's environment.
    pub fn vars(&self) -> &[(String, String)] {
        &self.vars
    }
}
