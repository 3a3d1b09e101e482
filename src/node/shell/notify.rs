//! systemd's notify protocol (`Type=notify`): `READY=1` after the first complete check,
//! `WATCHDOG=1` at half of `WATCHDOG_USEC` from the main loop, `STOPPING=1` on SIGTERM. A
//! no-op when not started by systemd (`NOTIFY_SOCKET` unset).

use std::time::Duration;

use sd_notify::NotifyState;

pub(crate) trait Notify: Send + Sync {
    fn ready(&self, status: &str);
    fn watchdog(&self);
    fn stopping(&self);
}

/// The real socket, through the `sd-notify` crate.
pub(crate) struct Systemd;

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
pub(crate) fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|d| d / 2)
}
