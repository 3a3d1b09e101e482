//! The kubeconfig's exec credential plugin (`users[].user.exec`: `aws eks get-token`,
//! `kubelogin`, `gke-gcloud-auth-plugin`), run bounded.
//!
//! kube runs the plugin itself, on a blocking thread, with no time limit and no way to stop
//! it: a plugin that hangs hangs the inventory script and `status report` past their
//! timeouts, and one left running when edpm-agent exits outlives it (PPID 1). kube's error for
//! a failed plugin prints its whole output, a token included.
//!
//! So the configuration is rewritten before the client is built ([`wrap`]): kube runs
//! edpm-agent itself as the plugin (`edpm-agent __exec-credential PID MS COMMAND ARGS…`, PID
//! being the edpm-agent that asks), which
//! runs the real one through `edpm_io::process` ([`main`]): its own process group, the request
//! timeout (or what is left of the command's deadline), output capped, killed with its group
//! on timeout, on SIGTERM and when edpm-agent dies (the parent-death signal); its answer is
//! passed on as it is, and a failure becomes one line that names the program and what
//! happened, redacted ([`message_of`] turns it into the request's error). Never interactive:
//! these are services and scripts, with no person to answer a prompt.

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use kube::config::{ExecConfig, ExecInteractiveMode};

/// The first argument that makes edpm-agent the bounded runner of a credential plugin.
pub const ARG: &str = "__exec-credential";

/// The most of a plugin's answer that is read: an ExecCredential is a few kilobytes.
const ANSWER_CAP: usize = 1 << 20;

/// Makes kube run the plugin through edpm-agent, bounded by `timeout`.
pub fn wrap(exec: &mut ExecConfig, timeout: Duration) -> Result<(), String> {
    let Some(command) = exec.command.clone() else { return Ok(()) };
    let me = std::env::current_exe().map_err(|e| {
        format!("cannot find edpm-agent's own executable to run the credential plugin {command}: {e}")
    })?;
    let mut args =
        vec![ARG.to_string(), std::process::id().to_string(), timeout.as_millis().to_string(), command];
    args.extend(exec.args.take().unwrap_or_default());
    exec.command = Some(me.to_string_lossy().into_owned());
    exec.args = Some(args);
    exec.interactive_mode = Some(ExecInteractiveMode::Never);
    Ok(())
}

/// When the process was started as the bounded runner of a credential plugin (its first
/// argument [`ARG`], which only [`wrap`] writes into the configuration it hands kube): runs
/// it and says how it ended. `None`: an ordinary start. Every binary that connects with
/// [`wrap`]ped plugins (edpm-agent, edpm-agent-node) asks this first thing in `main`.
pub fn answer(args: &[OsString]) -> Option<std::process::ExitCode> {
    match args.get(1) {
        Some(a) if a == ARG => Some(main(&args[2..])),
        _ => None,
    }
}

/// `edpm-agent __exec-credential PID MS COMMAND ARGS…`: runs COMMAND for at most MS
/// milliseconds, for the edpm-agent of process PID; its stdout (the ExecCredential) on
/// success, else one line saying why, on stdout (kube keeps it for the error) with exit
/// status 1.
pub fn main(args: &[OsString]) -> std::process::ExitCode {
    match run(args) {
        Ok(answer) => {
            let mut out = std::io::stdout().lock();
            if out.write_all(&answer).and_then(|()| out.flush()).is_err() {
                return std::process::ExitCode::from(1);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(why) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", edpm_core::excerpt::printable(&why));
            std::process::ExitCode::from(1)
        }
    }
}

fn run(args: &[OsString]) -> Result<Vec<u8>, String> {
    let (Some(parent), Some(ms), Some(program)) = (args.first(), args.get(1), args.get(2)) else {
        return Err(format!("usage: edpm-agent {ARG} PID MILLISECONDS COMMAND [ARGS…]"));
    };
    let parent: i32 = parent.to_str().and_then(|s| s.parse().ok()).ok_or("the parent is not a process id")?;
    let ms: u64 =
        ms.to_str().and_then(|s| s.parse().ok()).ok_or("the timeout is not a number of milliseconds")?;
    let program = program.to_string_lossy().into_owned();
    let cancel = crate::process::Cancel::new();
    stop_on_signals(&cancel, parent)?;
    let spec = crate::process::Spec::new(program.clone(), Duration::from_millis(ms), ANSWER_CAP)
        .args(args[3..].iter().cloned());
    let out = crate::process::run(&spec, Some(&cancel))
        .and_then(crate::process::Output::success)
        .map_err(|e| format!("the kubeconfig's credential plugin: {e}"))?;
    if out.stdout.is_cut() {
        return Err(format!(
            "the kubeconfig's credential plugin {program} answered more than {ANSWER_CAP} bytes; an ExecCredential is a few kilobytes"
        ));
    }
    Ok(out.stdout.bytes)
}

/// SIGTERM, SIGINT and SIGHUP, and edpm-agent's death (the parent-death signal), cancel the
/// plugin: its group is killed before this process ends.
fn stop_on_signals(cancel: &crate::process::Cancel, parent: i32) -> Result<(), String> {
    // SAFETY: plain libc calls on a signal set we own, before any other thread exists.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
        // The parent may have died before the death signal was set: then nobody waits for the
        // answer. (Compared with the asker's own id, not with 1: edpm-agent may be PID 1.)
        if libc::getppid() != parent {
            return Err("edpm-agent, which asked for the credential, is gone".into());
        }
        let cancel = cancel.clone();
        let set = set;
        #[allow(clippy::disallowed_methods, reason = "the one thread that waits for the stop signal")]
        std::thread::spawn(move || {
            let mut sig = 0;
            libc::sigwait(&set, &mut sig);
            cancel.cancel();
        });
    }
    Ok(())
}

/// The error a failed plugin left in kube's error, in our words: the line [`main`] wrote
/// (already redacted), never kube's dump of the plugin's output. `None`: not a plugin error.
pub fn message_of(e: &kube::Error) -> Option<String> {
    use kube::client::AuthError;
    let auth = match e {
        kube::Error::Auth(a) => a,
        kube::Error::Service(s) => s.downcast_ref::<AuthError>()?,
        _ => return None,
    };
    Some(match auth {
        AuthError::AuthExecRun { out, .. } => {
            let said = String::from_utf8_lossy(&out.stdout);
            let line = said.lines().next().unwrap_or("").trim();
            if line.starts_with("the kubeconfig's credential plugin") || line.starts_with("edpm-agent") {
                line.to_string()
            } else {
                format!("the kubeconfig's credential plugin failed ({})", out.status)
            }
        }
        AuthError::AuthExecStart(e) => format!("the kubeconfig's credential plugin cannot be started: {e}"),
        AuthError::AuthExecParse(_) => {
            "the kubeconfig's credential plugin answered something that is not an ExecCredential (its answer is not shown: it may hold a token)".to_string()
        }
        other => {
            let text = edpm_core::redact::Redactor::default().redact(&other.to_string());
            format!("the kubeconfig's credentials cannot be had: {}", edpm_core::excerpt::echo(&text))
        }
    })
}
