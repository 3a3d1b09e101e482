//! `status controller`: its flags checked and turned into the controller's
//! [`Options`](edpm_controller::Options), then `edpm_controller::run` until a signal or the end
//! of its watches. The checks it shares with the other `status` commands are `status`'s.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use super::output::write_out;
use super::pipeline::Context;
use super::status::{duration, lease_namespace, now};
use super::{AppError, resolve_settings};
use crate::cli::{SourceArgs, StatusAction, StatusArgs};
use crate::exit::{Exit, Status};
use edpm_controller::k8s::leader::Timings;
use edpm_controller::{CertFiles, MetricsSecurity, NovaPolling, Options};
use edpm_core::environment::Env;

/// Runs `status controller` (`args`, whose action is `Controller`; `source`, the source
/// flags) until a signal or the end of its watches.
pub(super) fn run(
    source: &SourceArgs,
    args: StatusArgs,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Status, AppError> {
    let settings = resolve_settings(source, env)?;
    // The checks every `status` command makes, in the same order.
    now(env)?;
    let mut cx = Context::new(&settings);
    cx.with_evidence = true;
    cx.lease_namespace = lease_namespace(&args)?;
    let nova_timeout = duration("--nova-timeout", &args.nova_timeout)?.max(Duration::from_secs(1));
    let opts = options(&args, nova_timeout)?;
    let stopped = edpm_controller::run(cx.settings, cx.k8s_settings(), opts)?;
    write_out(out, &format!("edpm-agent status controller: stopped ({stopped})\n"))?;
    Ok(Exit::Success.into())
}

/// The controller's flags, checked.
fn options(args: &StatusArgs, nova_timeout: Duration) -> Result<Options, AppError> {
    let StatusAction::Controller {
        metrics_bind_address,
        health_probe_bind_address,
        metrics_secure,
        leader_elect,
        leader_election_id,
        debounce_ms,
        grace_period,
        crd_recheck,
        nova_interval,
        inputs_interval,
        ..
    } = &args.action
    else {
        return Err(AppError::failure("not status controller's flags"));
    };
    let identities = identities(args)?;
    let metrics = parse_bind("--metrics-bind-address", metrics_bind_address).map_err(AppError::usage)?;
    let probes =
        parse_bind("--health-probe-bind-address", health_probe_bind_address).map_err(AppError::usage)?;
    if *metrics_secure && metrics.is_some() && metrics == probes {
        return Err(AppError::usage(format!(
            "--metrics-bind-address {metrics_bind_address} is the probes' address too: /metrics over HTTPS needs an address of its own (the kubelet probes speak plain HTTP); give another, or --metrics-secure=false"
        )));
    }
    Ok(Options {
        metrics,
        probes,
        metrics_security: metrics_security(args),
        leader_elect: *leader_elect,
        leader_election_id: leader_election_id.clone(),
        leader_timings: leader_timings(args)?,
        debounce: Duration::from_millis((*debounce_ms).max(1)),
        grace: duration("--grace-period", grace_period)?,
        crd_recheck: match duration("--crd-recheck", crd_recheck)? {
            d if d < Duration::from_secs(1) => {
                return Err(AppError::usage(format!(
                    "--crd-recheck {crd_recheck}: give at least 1 second (each recheck is a list request per absent kind)"
                )));
            }
            d => d,
        },
        inputs_interval: Some(duration("--inputs-interval", inputs_interval)?).filter(|d| !d.is_zero()),
        identities,
        nova: (!args.no_nova).then_some(NovaPolling {
            interval: duration("--nova-interval", nova_interval)?.max(Duration::from_secs(1)),
            timeout: nova_timeout,
            credentials: args.nova_credentials.clone(),
        }),
    })
}

/// `--node-identities` and its flags, checked.
fn identities(args: &StatusArgs) -> Result<Option<edpm_controller::identities::IdentityOptions>, AppError> {
    let StatusAction::Controller { node_identities: flags, .. } = &args.action else {
        return Ok(None);
    };
    let crate::cli::NodeIdentityArgs {
        node_identities,
        node_identities_server,
        node_identities_certificate_authority,
        node_identities_credential_lifetime,
        node_identities_interval,
    } = flags.as_ref();
    if !node_identities {
        return Ok(None);
    }
    let lifetime = duration("--node-identities-credential-lifetime", node_identities_credential_lifetime)?;
    let lifetime = edpm_core::identity::lifetime(lifetime.as_secs() as i64).map_err(AppError::usage)?;
    let ca_pem = match node_identities_certificate_authority {
        Some(p) => Some(super::output::read_text(
            p,
            "--node-identities-certificate-authority",
            crate::exit::Exit::InvalidInput,
        )?),
        None => None,
    };
    Ok(Some(edpm_controller::identities::IdentityOptions {
        server: node_identities_server.clone(),
        ca_pem,
        lifetime,
        every: duration("--node-identities-interval", node_identities_interval)?.max(Duration::from_secs(10)),
    }))
}

/// `--metrics-secure` and the certificate's files.
fn metrics_security(args: &StatusArgs) -> MetricsSecurity {
    let StatusAction::Controller {
        metrics_secure,
        metrics_cert_path,
        metrics_cert_name,
        metrics_cert_key,
        ..
    } = &args.action
    else {
        return MetricsSecurity::Plain;
    };
    if !*metrics_secure {
        return MetricsSecurity::Plain;
    }
    MetricsSecurity::Secure(metrics_cert_path.as_ref().map(|dir| CertFiles {
        dir: dir.clone(),
        cert: metrics_cert_name.clone(),
        key: metrics_cert_key.clone(),
    }))
}

/// The leader election's times, checked as client-go checks them.
fn leader_timings(args: &StatusArgs) -> Result<Timings, AppError> {
    let StatusAction::Controller {
        leader_elect_lease_duration,
        leader_elect_renew_deadline,
        leader_elect_retry_period,
        ..
    } = &args.action
    else {
        return Ok(Timings::default());
    };
    Timings {
        lease_duration: duration("--leader-elect-lease-duration", leader_elect_lease_duration)?,
        renew_deadline: duration("--leader-elect-renew-deadline", leader_elect_renew_deadline)?,
        retry: duration("--leader-elect-retry-period", leader_elect_retry_period)?,
    }
    .checked()
    .map_err(AppError::usage)
}

/// `:8080` (every address), `127.0.0.1:8080`, or `0` (off), as kubebuilder's flags take them.
fn parse_bind(flag: &str, text: &str) -> Result<Option<SocketAddr>, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(None);
    }
    let full = if t.starts_with(':') { format!("0.0.0.0{t}") } else { t.to_string() };
    full.parse::<SocketAddr>()
        .map(Some)
        .map_err(|_| format!("{flag} {text:?}: give :PORT, HOST:PORT, or 0 to turn it off"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_read_as_kubebuilder_flags() {
        assert_eq!(parse_bind("--x", ":8080").unwrap(), Some("0.0.0.0:8080".parse().unwrap()));
        assert_eq!(parse_bind("--x", "127.0.0.1:9").unwrap(), Some("127.0.0.1:9".parse().unwrap()));
        assert_eq!(parse_bind("--x", "0").unwrap(), None);
        assert!(parse_bind("--x", "eighty").unwrap_err().contains("--x"));
    }
}
