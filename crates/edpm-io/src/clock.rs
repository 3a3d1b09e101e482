//! The wall clock, for condition and Lease times: the one reading of `SystemTime` every program
//! shares (the core takes the time as data; loops time themselves with tokio's clock).

use edpm_core::condition::Time;

/// Now, in whole seconds since the epoch (the epoch itself on a clock set before it).
pub fn now() -> Time {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Time::from_unix(i64::try_from(secs).unwrap_or(i64::MAX))
}
