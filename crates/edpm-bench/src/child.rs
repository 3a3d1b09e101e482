//! A long-running child under measurement (the controller): its stderr kept in a file, and
//! every wait of the benchmark checks that it still runs, so a child that exits ends the
//! benchmark at once with its last words instead of a wait that never ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How many of its last stderr lines a child that exited is quoted with.
const TAIL_LINES: usize = 20;

pub(crate) struct Watched {
    child: Child,
    what: String,
    log: PathBuf,
}

impl Watched {
    /// Starts `cmd` (stdout discarded, stderr into `log`); `what` names it in errors.
    pub(crate) fn spawn(cmd: &mut Command, what: &str, log: &Path) -> Result<Watched, String> {
        let err = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", cmd.get_program().to_string_lossy()))?;
        Ok(Watched { child, what: what.to_string(), log: log.to_path_buf() })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Err` (its exit status and last stderr lines) once the child has exited.
    pub(crate) fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                Err(format!("{} exited ({status}); its last stderr lines:\n{}", self.what, self.tail()))
            }
            Err(e) => Err(format!("{}: {e}", self.what)),
        }
    }

    /// Sleeps `d`, looking at the child every 100 ms.
    pub(crate) fn sleep(&mut self, d: Duration) -> Result<(), String> {
        let end = Instant::now() + d;
        loop {
            self.alive()?;
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }

    /// Waits until `ready` says so, for at most `limit`; `Err` naming `what` (with the
    /// child's last stderr lines) when it does not, or when the child exits meanwhile.
    pub(crate) fn wait_for(
        &mut self,
        what: &str,
        limit: Duration,
        step: Duration,
        mut ready: impl FnMut() -> Result<bool, String>,
    ) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        while !ready()? {
            self.alive()?;
            if Instant::now() > deadline {
                return Err(format!(
                    "{what}: not within {limit:?}; {}'s last stderr lines:\n{}",
                    self.what,
                    self.tail()
                ));
            }
            std::thread::sleep(step);
        }
        Ok(())
    }

    /// The last lines of its stderr (read from its last 64 KiB: a log can be long).
    pub(crate) fn tail(&self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let mut bytes = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
            let _ = f.take(64 * 1024).read_to_end(&mut bytes);
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
        if tail.is_empty() { "(none)".to_string() } else { tail }
    }

    /// SIGTERM, as Kubernetes stops a pod (to the children of `pid` too when the child is a
    /// wrapper such as a profiler, which then writes its data); killed after 30 s.
    pub(crate) fn stop(mut self, wrapped: bool) {
        let pid = self.child.id();
        if wrapped {
            let _ = Command::new("pkill").args(["-TERM", "-P", &pid.to_string()]).status();
        } else {
            // SAFETY: kill has no memory preconditions; the pid is our child's, not reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        // Drop kills what is left.
    }
}

impl Drop for Watched {
    /// A benchmark that ends early (an error) leaves no controller running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
