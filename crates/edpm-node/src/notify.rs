//! systemd's notify protocol (`Type=notify`): `READY=1` after the first complete check,
//! `WATCHDOG=1` at half of `WATCHDOG_USEC` from the main loop, `STOPPING=1` on SIGTERM. A
//! no-op when not started by systemd (`NOTIFY_SOCKET` unset).

use std::time::Duration;

use sd_notify::NotifyState;

pub trait Notify: Send + Sync {
    fn ready(&self, status: &str);
    fn watchdog(&self);
    fn stopping(&self);
}

/// The real socket, through the `sd-notify` crate.
pub struct Systemd;

impl Notify for Systemd {
    fn ready(&self, status: &str) {
        if let Err(e) = sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(status)]) {
            tracing::warn!(error = %e, "cannot notify systemd");
        }
    }

    fn watchdog(&self) {
        let _ = sd_notify::notify(&[NotifyState::Watchdog]);
    }

    fn stopping(&self) {
        let _ = sd_notify::notify(&[NotifyState::Stopping]);
    }
}

/// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, when systemd set it for us.
pub fn watchdog_interval() -> Option<Duration> {
    interval_for(sd_notify::watchdog_enabled())
}

/// Half the watchdog period, kept within what a timer can do: 0 (which systemd never sets)
/// is no watchdog rather than a loop that does nothing but notify, and a period of centuries
/// is a notification an hour.
fn interval_for(watchdog: Option<Duration>) -> Option<Duration> {
    let half = watchdog.filter(|d| !d.is_zero())? / 2;
    Some(half.clamp(Duration::from_millis(100), Duration::from_secs(3600)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_intervals_are_bounded() {
        assert_eq!(interval_for(None), None);
        assert_eq!(interval_for(Some(Duration::ZERO)), None);
        assert_eq!(interval_for(Some(Duration::from_secs(60))), Some(Duration::from_secs(30)));
        assert_eq!(interval_for(Some(Duration::from_micros(1))), Some(Duration::from_millis(100)));
        assert_eq!(interval_for(Some(Duration::from_micros(u64::MAX))), Some(Duration::from_secs(3600)));
    }
}
