//! Runs the play (the runner's) as a child process and supervises it: output streamed as it
//! comes, SIGTERM and SIGINT forwarded, a grace period and then SIGKILL, job and idle timeouts
//! each reported as their own reason. The long supervision of `process` (the bounded runs are
//! its `mod.rs`): the runner's shell says what to run, this runs it.
//!
//! How: SIGTERM, SIGINT and SIGCHLD are blocked ([`block_signals`], before any thread starts,
//! so every thread inherits the mask) and taken synchronously with `sigtimedwait`, whose
//! timeout is the nearest deadline; no signal handler runs. The child gets its own session
//! (so it has no controlling terminal and a prompt fails instead of stopping the job) and an
//! empty signal mask (std keeps the parent's, which would leave it deaf to SIGTERM). Signals
//! go to its process group. edpm-agent is a
//! child subreaper while it supervises, and reaps every child it gets: as the container's
//! PID 1 it must, and descendants that outlive a child it had to kill (ansible-runner puts
//! ansible-playbook in a session of its own) come back to it to be killed.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use edpm_core::runner::outcome::Timeout;
pub use edpm_core::runner::outcome::{Ending, Limits, Outcome, Stop};

/// The child to run.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Variables set on top of the inherited environment.
    pub env: Vec<(String, String)>,
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a sigset_t we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGCHLD] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks SIGTERM, SIGINT and SIGCHLD in this thread and in every thread it starts from now
/// on. Call before any other thread exists: a thread that leaves SIGTERM unblocked would let
/// it end the process.
pub fn block_signals() -> std::io::Result<()> {
    let set = signal_set();
    // SAFETY: `set` is initialised; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Takes one blocked signal, waiting at most `timeout`; `None` on timeout.
fn wait_signal(timeout: Duration) -> Option<i32> {
    let set = signal_set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    loop {
        // SAFETY: `set` and `ts` are initialised locals; no siginfo is asked for.
        let s = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
        if s > 0 {
            return Some(s);
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            _ => return None,
        }
    }
}

/// A SIGTERM or SIGINT that arrived before the play started (while the inventory was read),
/// taken so that the play does not start.
pub fn pending_stop() -> Option<i32> {
    loop {
        match wait_signal(Duration::ZERO) {
            Some(libc::SIGCHLD) => continue,
            other => return other,
        }
    }
}

fn send(pgid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; errors (ESRCH when the
    // group is gone) need no handling.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Reaps every exited child; returns the status of `child` if it was among them.
fn reap(child: i32) -> Option<Ending> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a status out-pointer to a local.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid == child {
            found = Some(if libc::WIFSIGNALED(status) {
                Ending::Signaled(libc::WTERMSIG(status))
            } else {
                Ending::Exited(libc::WEXITSTATUS(status))
            });
        }
    }
}

/// Our children, from /proc: descendants re-parented to this subreaper.
#[allow(
    clippy::disallowed_methods,
    reason = "procfs stat files are the kernel's: short, regular, never a FIFO"
)]
fn children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| {
        let name = e.ok()?.file_name();
        let pid: i32 = name.to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let ppid: i32 = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == me).then_some(pid)
    })
    .collect()
}

/// Kills and reaps whatever the killed child left behind, for at most `within`.
fn kill_leftovers(within: Duration) {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let kids = children();
        if kids.is_empty() {
            return;
        }
        for pid in kids {
            // SAFETY: signalling a child of ours by pid.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        reap(-1);
    }
}

/// The output pump: copies the child's output to `out` (and `tee`) as it comes, and records
/// when it last saw some.
struct Pump {
    /// Milliseconds since `start` of the last output.
    last: Arc<AtomicU64>,
    done: Arc<(Mutex<bool>, Condvar)>,
}

impl Pump {
    fn start(
        mut reader: std::io::PipeReader,
        mut out: Box<dyn Write + Send>,
        mut tee: Option<std::fs::File>,
        start: Instant,
    ) -> std::io::Result<Pump> {
        let last = Arc::new(AtomicU64::new(0));
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let (l, d) = (last.clone(), done.clone());
        #[allow(
            clippy::disallowed_methods,
            reason = "the play's output is drained beside the supervisor's wait"
        )]
        std::thread::Builder::new().name("output".into()).spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        l.store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
                        // A reader that went away must not stop the play: keep draining.
                        let _ = out.write_all(&buf[..n]).and_then(|()| out.flush());
                        if let Some(t) = tee.as_mut() {
                            let _ = t.write_all(&buf[..n]);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let (m, c) = &*d;
            *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
            c.notify_all();
        })?;
        Ok(Pump { last, done })
    }

    fn last_output(&self, start: Instant) -> Instant {
        start + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }

    /// Waits for the end of the output after the child exited: until end of file, or until
    /// it has been quiet for a moment (a descendant that outlived the child may hold the pipe
    /// open), and never longer than `max`.
    fn drain(&self, start: Instant, max: Duration) {
        let quiet = Duration::from_millis(200);
        let until = Instant::now() + max;
        let since = Instant::now();
        let (m, c) = &*self.done;
        let mut done = m.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            let now = Instant::now();
            if now >= until || (now - since >= quiet && now - self.last_output(start).max(since) >= quiet) {
                return;
            }
            done = c.wait_timeout(done, Duration::from_millis(50)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

/// Runs `spec` to its end under `limits`, streaming its output (stdout and stderr, merged in
/// order) to `out` and `tee`. Signals must already be blocked ([`block_signals`]).
#[allow(
    clippy::too_many_lines,
    reason = "spawns and supervises one child: its pipes, signals and deadlines share one poll loop"
)]
pub fn supervise(
    spec: &Spec,
    limits: &Limits,
    out: Box<dyn Write + Send>,
    tee: Option<std::fs::File>,
) -> std::io::Result<Outcome> {
    use std::os::unix::process::CommandExt;

    let program = spec.argv.first().ok_or_else(|| std::io::Error::other("empty command"))?;
    // SAFETY: prctl with integer arguments; failure (old kernels) only loses the clean-up.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let (reader, writer) = std::io::pipe()?;
    let mut cmd = Command::new(program);
    cmd.args(&spec.argv[1..])
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer);
    // SAFETY: setsid and `empty_signal_mask` are async-signal-safe; they run in the child
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            super::empty_signal_mask()
        });
    }
    let start = Instant::now();
    let child =
        cmd.spawn().map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {program}: {e}")))?;
    // Close our copies of the pipe's write end, or the pump never sees end of file.
    drop(cmd);
    let pid = child.id() as i32;
    let pump = Pump::start(reader, out, tee, start)?;

    let mut stop: Option<Stop> = None;
    let mut grace_until: Option<Instant> = None;
    let mut killed = false;
    let ending = loop {
        if let Some(e) = reap(pid) {
            break e;
        }
        let now = Instant::now();
        // Deadlines that have passed act now; the nearest one left bounds the wait. A limit
        // past what the clock can hold (`RUNNER_JOB_TIMEOUT=9223372036854775807`) is no limit.
        let job_at = limits.job.and_then(|j| start.checked_add(j));
        let idle_at = limits.idle.and_then(|i| pump.last_output(start).checked_add(i));
        if stop.is_none() {
            let hit = match (job_at, idle_at) {
                (Some(j), _) if now >= j => Some(Timeout::Job),
                (_, Some(i)) if now >= i => Some(Timeout::Idle),
                _ => None,
            };
            if let Some(t) = hit {
                stop = Some(Stop::Timeout(t));
                // A grace period past what the clock can hold never ends.
                grace_until = now.checked_add(limits.grace);
                send(pid, libc::SIGTERM);
            }
        }
        if let Some(g) = grace_until
            && now >= g
            && !killed
        {
            killed = true;
            send(pid, libc::SIGKILL);
        }
        let next = if stop.is_none() {
            [job_at, idle_at].into_iter().flatten().min()
        } else if !killed {
            grace_until
        } else {
            None
        };
        let wait = next
            .map_or(Duration::from_secs(1), |n| n.saturating_duration_since(now))
            .min(Duration::from_secs(1));
        // SIGCHLD (or the timeout) only wakes the loop, which reaps at its top.
        if let Some(s @ (libc::SIGTERM | libc::SIGINT)) = wait_signal(wait) {
            if stop.is_none() {
                stop = Some(Stop::Signal(s));
                grace_until = Instant::now().checked_add(limits.grace);
            }
            send(pid, s);
        }
    };
    if stop.is_some() {
        // What the stopped child left running must not go on changing hosts.
        kill_leftovers(Duration::from_secs(2));
    }
    pump.drain(start, Duration::from_secs(2));
    Ok(Outcome { ending, stop, killed, elapsed: start.elapsed() })
}
