//! Runs a short-lived child process, bounded: the one general way edpm-agent starts a program
//! and waits for its answer (the node agent's `systemctl` and `podman` queries, kubeconfig
//! exec credential plugins). The one module that spawns, signals or reaps processes: the
//! play's long supervision is [`supervise`], and handing this process over to another program
//! is [`hand_over`].
//!
//! What a caller gets, whatever the program does:
//! - it runs in a process group of its own, stdin from /dev/null (or the bytes given), with
//!   an empty signal mask;
//! - stdout and stderr are read at once (a program that fills one pipe while we wait on the
//!   other would otherwise hang), each kept up to a cap and drained past it (the rest is
//!   counted, not kept): endless output costs nothing but the time until the deadline;
//! - one deadline covers the run and the reading of its output: when it passes, the whole
//!   group gets SIGKILL, also when the program itself exited but something it started still
//!   holds its output open;
//! - a [`Cancel`] (the caller's SIGTERM) kills the group at once;
//! - the exit status is reported as it is: a code or a signal; a timeout is a timeout.
//!
//! Errors name the program and say what happened ([`Error`]); text from its stderr in them is
//! redacted (`redact::Redactor`) and escaped (`excerpt::printable`), because they end up in
//! conditions, Events and logs. The program's arguments are never in a message: they may hold
//! credentials.
//!
//! How: one thread, `poll(2)` over the pipes, the stdin pipe and the cancel pipe, with the
//! time left as its timeout. The child is looked at with `waitid(WNOWAIT)` and reaped only at
//! the end, so its pid (the group's id) cannot be reused while the group may still be
//! signalled. A caller that reaps every child of the process (`waitpid(-1)`, as [`supervise`]
//! does) must not run this at the same time.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod hand_over;
pub mod supervise;

pub use hand_over::hand_over;

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The program: a path, or a name looked up on PATH.
    pub program: String,
    pub args: Vec<OsString>,
    /// Variables set on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Inherited variables the child must not see (removed before `env` is set).
    pub env_remove: Vec<OsString>,
    /// Bytes written to its stdin (then closed); `None`: stdin is /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// The limit on the whole run, reading its output included.
    pub timeout: Duration,
    /// The most bytes kept of stdout, and of stderr; the rest is read and discarded.
    pub output_cap: usize,
}

impl Spec {
    pub fn new(program: impl Into<String>, timeout: Duration, output_cap: usize) -> Spec {
        Spec {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            stdin: None,
            timeout,
            output_cap,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Spec
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    #[allow(dead_code, reason = "the general API: exec credential plugins set variables; tested below")]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Spec {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn env_remove(mut self, key: impl Into<OsString>) -> Spec {
        self.env_remove.push(key.into());
        self
    }

    #[allow(dead_code, reason = "the general API: a program fed its input; tested below")]
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Spec {
        self.stdin = Some(bytes.into());
        self
    }

    /// The program's name as messages show it.
    fn name(&self) -> String {
        edpm_core::excerpt::printable(&self.program).into_owned()
    }
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exited with code {c}"),
            Exit::Signal(s) => match signal_name(*s) {
                Some(name) => write!(f, "was killed by signal {s} ({name})"),
                None => write!(f, "was killed by signal {s}"),
            },
        }
    }
}

fn signal_name(s: i32) -> Option<&'static str> {
    Some(match s {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

/// One output stream: its first bytes, and how many there were in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// At most the cap's worth.
    pub bytes: Vec<u8>,
    /// Every byte the program wrote.
    pub total: u64,
}

impl Captured {
    /// Whether more was written than kept.
    pub fn is_cut(&self) -> bool {
        self.total > self.bytes.len() as u64
    }
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Output {
    /// The program's name as messages show it.
    pub program: String,
    pub exit: Exit,
    pub stdout: Captured,
    pub stderr: Captured,
    pub elapsed: Duration,
}

impl Output {
    /// The output of a run that exited 0; otherwise [`Error::Failed`] with its status and what
    /// its stderr said.
    pub fn success(self) -> Result<Output, Error> {
        if self.exit.success() {
            return Ok(self);
        }
        Err(Error::Failed { stderr: stderr_summary(&self.stderr), program: self.program, exit: self.exit })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot run {program}: {}", start_reason(source))]
    Start {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} {exit}{}", said(stderr))]
    Failed { program: String, exit: Exit, stderr: String },
    #[error("{program} did not finish within {}{note}; killed it and its process group", seconds(*timeout))]
    TimedOut { program: String, timeout: Duration, note: String },
    #[error("{program} was stopped before it finished (shutting down); killed it and its process group")]
    Cancelled { program: String },
    #[error("while running {program}: {source}")]
    Io {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

fn start_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "not found (not installed, or not on PATH)".into(),
        std::io::ErrorKind::PermissionDenied => format!("permission denied ({e})"),
        _ => e.to_string(),
    }
}

fn said(stderr: &str) -> String {
    if stderr.is_empty() { " (nothing on stderr)".into() } else { format!(": {stderr}") }
}

/// `20 s`, or `1500 ms` below a second's precision.
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{} ms", d.as_millis()) }
}

/// The line of stderr that says what went wrong, fit for a message: the first `Error…` line
/// (podman and systemctl print warnings before it), else the last line with text; redacted,
/// control characters escaped, cut to a readable length.
pub fn stderr_summary(stderr: &Captured) -> String {
    let text = String::from_utf8_lossy(&stderr.bytes);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let line = lines
        .iter()
        .find(|l| l.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("error")))
        .or_else(|| lines.last())
        .copied()
        .unwrap_or("");
    let clean = edpm_core::redact::Redactor::default().redact(line);
    let clean = edpm_core::excerpt::printable(&clean);
    let echo = edpm_core::excerpt::echo(&clean);
    let more =
        if stderr.is_cut() { format!(" ({} bytes on stderr in all)", stderr.total) } else { String::new() };
    format!("{}{}{more}", echo.head(), if echo.is_cut() { "…" } else { "" })
}

/// A cancellation the caller triggers (on SIGTERM, at shutdown): every run given it kills its
/// process group and returns [`Error::Cancelled`], at once. Clones share the one state, so one
/// `cancel()` reaches every run in flight and every later one.
#[derive(Clone)]
pub struct Cancel(Arc<CancelState>);

struct CancelState {
    cancelled: AtomicBool,
    /// A pipe that becomes readable on cancel, for `poll` (nothing ever reads it, so it stays
    /// readable); `None` when no pipe could be made: runs then look at the flag every 100 ms.
    pipe: Option<(std::io::PipeReader, std::io::PipeWriter)>,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel").field("cancelled", &self.is_cancelled()).finish()
    }
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel(Arc::new(CancelState { cancelled: AtomicBool::new(false), pipe: std::io::pipe().ok() }))
    }

    pub fn cancel(&self) {
        if !self.0.cancelled.swap(true, Ordering::SeqCst)
            && let Some((_, w)) = &self.0.pipe
        {
            let _ = (&*w).write(&[1]);
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    fn fd(&self) -> Option<RawFd> {
        self.0.pipe.as_ref().map(|(r, _)| r.as_raw_fd())
    }
}

/// The child and its group, killed when dropped before [`Group::finish`]: every early return
/// (timeout, cancel, an I/O error) leaves nothing running.
struct Group {
    child: Option<Child>,
    pid: i32,
}

impl Group {
    fn kill(&self) {
        // SAFETY: kill(2) with a negative pid signals the process group the child leads. The
        // child is not reaped yet, so its pid (the group's id) is still ours.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
        }
    }

    /// How the child ended, without reaping it (`WNOWAIT`): `None` while it runs.
    fn peek(&self) -> std::io::Result<Option<Exit>> {
        loop {
            // SAFETY: siginfo_t is plain data; waitid fills it for our own child.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waitid on our own child's pid with an out-pointer to a local.
            let rc = unsafe {
                libc::waitid(
                    libc::P_PID,
                    self.pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            // SAFETY: the fields waitid sets for SIGCHLD; si_pid is 0 when nothing exited.
            let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
            if pid == 0 {
                return Ok(None);
            }
            return Ok(Some(match info.si_code {
                libc::CLD_EXITED => Exit::Code(status),
                _ => Exit::Signal(status),
            }));
        }
    }

    /// Reaps the exited child: its status as it is.
    fn finish(mut self) -> std::io::Result<Exit> {
        let Some(mut child) = self.child.take() else { return Err(std::io::Error::other("already reaped")) };
        let status = child.wait()?;
        Ok(match (status.code(), status.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(s)) => Exit::Signal(s),
            (None, None) => Exit::Code(-1),
        })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        self.kill();
        // SIGKILL ends the child at once, unless it is stuck in the kernel (a hung mount):
        // reap it here when it goes quickly, else in the background, never holding the caller.
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        #[allow(
            clippy::disallowed_methods,
            reason = "a child stuck in the kernel is reaped in the background"
        )]
        let _ = std::thread::Builder::new().name("reap".into()).spawn(move || child.wait());
    }
}

/// One output pipe being read.
struct Stream {
    file: Option<std::fs::File>,
    cap: usize,
    got: Captured,
}

impl Stream {
    fn new(fd: Option<OwnedFd>, cap: usize) -> std::io::Result<Stream> {
        if let Some(fd) = &fd {
            nonblocking(fd.as_raw_fd())?;
        }
        Ok(Stream { file: fd.map(std::fs::File::from), cap, got: Captured::default() })
    }

    /// Reads some of what is there (a few buffers' worth, so that a program writing faster
    /// than we read cannot keep us from the deadline); closes the stream at end of file.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        let Some(f) = self.file.as_mut() else { return Ok(()) };
        for _ in 0..4 {
            match f.read(buf) {
                Ok(0) => {
                    self.file = None;
                    return Ok(());
                }
                Ok(n) => {
                    let keep = n.min(self.cap.saturating_sub(self.got.bytes.len()));
                    self.got.bytes.extend_from_slice(&buf[..keep]);
                    self.got.total += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let rc = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 { flags } else { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }
    };
    if rc < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// In a child, between fork and exec: an empty signal mask. A caller that blocks signals (the
/// runner blocks SIGTERM to take it synchronously) must not pass that mask on to the program,
/// which would be deaf to them (std keeps the parent's). Async-signal-safe.
fn empty_signal_mask() -> std::io::Result<()> {
    // SAFETY: sigemptyset and sigprocmask are async-signal-safe; they work on a sigset_t built
    // here.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Runs `spec` to its end, its deadline, or `cancel`; see the module documentation.
#[allow(
    clippy::too_many_lines,
    reason = "spawns one child and waits for its end, deadline or cancel; pipes and signals share one loop"
)]
pub fn run(spec: &Spec, cancel: Option<&Cancel>) -> Result<Output, Error> {
    let program = spec.name();
    if cancel.is_some_and(Cancel::is_cancelled) {
        return Err(Error::Cancelled { program });
    }
    let io = |source: std::io::Error| Error::Io { program: program.clone(), source };
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(if spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    // SAFETY: `empty_signal_mask` is async-signal-safe, as what runs between fork and exec
    // must be.
    unsafe {
        cmd.pre_exec(empty_signal_mask);
    }
    let started = Instant::now();
    // A deadline past what an Instant holds is no deadline.
    let deadline = started.checked_add(spec.timeout);
    let mut child = cmd.spawn().map_err(|source| Error::Start { program: program.clone(), source })?;
    let (stdout, stderr, stdin) = (child.stdout.take(), child.stderr.take(), child.stdin.take());
    let group = Group { pid: child.id() as i32, child: Some(child) };
    let mut out = Stream::new(stdout.map(OwnedFd::from), spec.output_cap).map_err(io)?;
    let mut err = Stream::new(stderr.map(OwnedFd::from), spec.output_cap).map_err(io)?;
    let mut input = match (stdin, &spec.stdin) {
        (Some(w), Some(bytes)) => {
            let fd = OwnedFd::from(w);
            nonblocking(fd.as_raw_fd()).map_err(io)?;
            Some((std::fs::File::from(fd), bytes.as_slice()))
        }
        _ => None,
    };
    let mut buf = vec![0u8; 64 * 1024];
    // Once the output is closed, how long to sleep before looking at the child again: the
    // pipes close as it exits, a moment before its status is there.
    let mut tick = Duration::from_millis(1);
    let exit = loop {
        let reading = out.file.is_some() || err.file.is_some();
        if !reading {
            // Nobody reads the answer: a program still waiting to be fed would never end.
            input = None;
            if let Some(exit) = group.peek().map_err(io)? {
                break exit;
            }
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            let exited = group.peek().ok().flatten();
            group.kill();
            let mut note = String::new();
            if let Some(e) = exited {
                note = format!(" (it {e}, but a process it started kept its output open)");
            } else if out.got.is_cut() || err.got.is_cut() {
                let s = if out.got.is_cut() { &out.got } else { &err.got };
                note = format!(" (its output ran past {} bytes; the rest was discarded)", s.bytes.len());
            }
            return Err(Error::TimedOut { program, timeout: spec.timeout, note });
        }
        let left = deadline.map_or(Duration::MAX, |d| d - now);
        let mut wait = if reading {
            left.min(Duration::from_secs(1))
        } else {
            let t = tick;
            tick = (tick * 2).min(Duration::from_millis(50));
            left.min(t)
        };
        let cancel_fd = cancel.and_then(Cancel::fd);
        if cancel.is_some() && cancel_fd.is_none() {
            wait = wait.min(Duration::from_millis(100));
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(4);
        let mut slot = |fd: Option<RawFd>, events: libc::c_short| {
            fd.map(|fd| {
                fds.push(libc::pollfd { fd, events, revents: 0 });
                fds.len() - 1
            })
        };
        let out_at = slot(out.file.as_ref().map(AsRawFd::as_raw_fd), libc::POLLIN);
        let err_at = slot(err.file.as_ref().map(AsRawFd::as_raw_fd), libc::POLLIN);
        let in_at = slot(input.as_ref().map(|(f, _)| f.as_raw_fd()), libc::POLLOUT);
        let cancel_at = slot(cancel_fd, libc::POLLIN);
        let ms = wait.as_millis().clamp(1, 60_000) as libc::c_int;
        // SAFETY: `fds` is a live, initialised array of `fds.len()` pollfd structs.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io(e));
        }
        let fired = |at: Option<usize>| at.is_some_and(|i| fds[i].revents != 0);
        if fired(cancel_at) || cancel.is_some_and(Cancel::is_cancelled) {
            group.kill();
            return Err(Error::Cancelled { program });
        }
        if fired(out_at) {
            out.read(&mut buf).map_err(io)?;
        }
        if fired(err_at) {
            err.read(&mut buf).map_err(io)?;
        }
        if fired(in_at)
            && let Some((f, rest)) = input.as_mut()
        {
            match f.write(rest) {
                Ok(n) => *rest = &rest[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The program closed its stdin (EPIPE): it wants no more.
                Err(_) => *rest = &[],
            }
            if rest.is_empty() {
                // Closing it is the end of input the program waits for.
                input = None;
            }
        }
    };
    let reaped = group.finish().map_err(io)?;
    // `finish` reaps what `peek` saw; both say the same.
    debug_assert_eq!(reaped, exit);
    Ok(Output { program, exit: reaped, stdout: out.got, stderr: err.got, elapsed: started.elapsed() })
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "tests cancel from a thread of their own and read their own files"
)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Spec {
        Spec::new("/bin/sh", timeout, 1024).args(["-c", script])
    }

    fn gone(pid: i32) -> bool {
        // SAFETY: kill with signal 0 only checks that the pid exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        #[allow(clippy::disallowed_methods, reason = "procfs stat files are the kernel's")]
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().starts_with('Z')))
            .unwrap_or(false);
        !alive || zombie
    }

    fn wait_gone(pid: i32) -> bool {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if gone(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn reports_output_and_exit_status_as_they_are() {
        let o = run(&sh("echo out; echo err >&2; exit 3", Duration::from_secs(30)), None).unwrap();
        assert_eq!(o.exit, Exit::Code(3));
        assert_eq!((o.stdout.bytes.as_slice(), o.stderr.bytes.as_slice()), (&b"out\n"[..], &b"err\n"[..]));
        let e = o.success().unwrap_err().to_string();
        assert_eq!(e, "/bin/sh exited with code 3: err");
        let o = run(&sh("kill -9 $$", Duration::from_secs(30)), None).unwrap();
        assert_eq!(o.exit, Exit::Signal(9));
        assert_eq!(
            o.success().unwrap_err().to_string(),
            "/bin/sh was killed by signal 9 (SIGKILL) (nothing on stderr)"
        );
        let o = run(&sh("true", Duration::from_secs(30)), None).unwrap().success().unwrap();
        assert!(o.stdout.bytes.is_empty() && !o.stdout.is_cut());
    }

    #[test]
    fn a_missing_program_says_so() {
        let e = run(&Spec::new("edpm-agent-no-such-program", Duration::from_secs(5), 10), None).unwrap_err();
        assert!(matches!(e, Error::Start { .. }));
        assert_eq!(
            e.to_string(),
            "cannot run edpm-agent-no-such-program: not found (not installed, or not on PATH)"
        );
    }

    #[test]
    fn output_is_capped_and_counted_and_a_full_stderr_pipe_does_not_hang() {
        // 200 KB on stderr (three pipes' worth) while stdout is read too, then a failure.
        let o = run(
            &sh("head -c 200000 /dev/zero | tr '\\0' x >&2; echo done; exit 125", Duration::from_secs(60)),
            None,
        )
        .unwrap();
        assert_eq!(o.exit, Exit::Code(125));
        assert_eq!((o.stderr.bytes.len(), o.stderr.total), (1024, 200_000));
        assert!(o.stderr.is_cut() && !o.stdout.is_cut());
        assert_eq!(o.stdout.bytes, b"done\n");
        let e = o.success().unwrap_err().to_string();
        assert!(
            e.starts_with("/bin/sh exited with code 125: xxxx")
                && e.ends_with("(200000 bytes on stderr in all)"),
            "{e}"
        );
    }

    #[test]
    fn endless_output_ends_at_the_deadline_with_bounded_memory() {
        let e = run(&sh("exec yes", Duration::from_millis(500)), None).unwrap_err();
        assert!(matches!(e, Error::TimedOut { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "/bin/sh did not finish within 500 ms (its output ran past 1024 bytes; the rest was discarded); killed it and its process group"
        );
    }

    #[test]
    fn the_deadline_covers_a_grandchild_holding_the_output_and_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 600 & echo $! > {}; echo answer", pid_file.display());
        let e = run(&sh(&script, Duration::from_secs(1)), None).unwrap_err();
        assert!(
            e.to_string().starts_with("/bin/sh did not finish within 1 s (it exited with code 0, but a process it started kept its output open)"),
            "{e}"
        );
        #[allow(clippy::disallowed_methods, reason = "the test's own small file")]
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        assert!(wait_gone(pid), "the grandchild {pid} still runs");
    }

    #[test]
    fn a_program_that_ignores_sigterm_is_killed_at_the_deadline() {
        let e = run(&sh("trap '' TERM; sleep 600", Duration::from_millis(300)), None).unwrap_err();
        assert!(matches!(e, Error::TimedOut { .. }), "{e}");
    }

    #[test]
    fn cancel_kills_the_group_at_once_and_refuses_later_runs() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let cancel = Cancel::new();
        let c2 = cancel.clone();
        let pf = pid_file.clone();
        let canceller = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(30);
            while !pf.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(50));
            c2.cancel();
        });
        let script = format!("sleep 600 & echo $! > {}; wait", pid_file.display());
        let started = Instant::now();
        let e = run(&sh(&script, Duration::from_secs(600)), Some(&cancel)).unwrap_err();
        canceller.join().unwrap();
        assert!(matches!(e, Error::Cancelled { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(300), "waited for the deadline");
        #[allow(clippy::disallowed_methods, reason = "the test's own small file")]
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        assert!(wait_gone(pid), "the group's sleep {pid} still runs");
        let e = run(&sh("true", Duration::from_secs(5)), Some(&cancel)).unwrap_err();
        assert!(matches!(e, Error::Cancelled { .. }), "{e}");
    }

    #[test]
    fn stdin_bytes_environment_and_a_clean_signal_mask_reach_the_program() {
        // The runner blocks SIGTERM to take it synchronously; its children must not inherit that.
        // SAFETY: sigset_t built locally; only this test thread's mask changes, and is restored.
        let old = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            old
        };
        let spec = Spec::new("/bin/sh", Duration::from_secs(30), 1 << 20)
            .args(["-c", "cat; echo \"$EDPM_A-${HOME-unset}\"; grep SigBlk /proc/self/status"])
            .env("EDPM_A", "set")
            .env_remove("HOME")
            .stdin(vec![b'i'; 300_000]);
        let o = run(&spec, None);
        // SAFETY: restoring this thread's mask as it was.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        let o = o.unwrap().success().unwrap();
        let text = String::from_utf8(o.stdout.bytes).unwrap();
        assert!(text.len() > 300_000 && text[..300_000].bytes().all(|b| b == b'i'), "{}", &text[..100]);
        assert!(text.contains("set-unset\n"), "{}", &text[300_000..]);
        assert!(text.contains("SigBlk:\t0000000000000000"), "{}", &text[300_000..]);
    }

    #[test]
    fn stderr_in_messages_is_redacted_escaped_and_short() {
        let c = |s: &str| Captured { bytes: s.as_bytes().to_vec(), total: s.len() as u64 };
        assert_eq!(
            stderr_summary(&c("WARN a warning\nError: login to postgres://nova:S3cret@db/x failed\nmore\n")),
            "Error: login to postgres://nova:********@db/x failed"
        );
        assert_eq!(stderr_summary(&c("one\npassword=hunter2 \x1b[31m\n\n")), "password=******** \\e[31m");
        let long = "e".repeat(500);
        let s = stderr_summary(&c(&long));
        assert!(s.chars().count() <= edpm_core::excerpt::LIMIT + 1 && s.ends_with('…'), "{s}");
        assert_eq!(stderr_summary(&c("")), "");
    }
}
