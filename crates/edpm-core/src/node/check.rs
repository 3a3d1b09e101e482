//! The checks, over facts in plain data.
//!
//! `NodeAgentReady` covers the node itself: phase -1 (it booted what it was given: host name,
//! addresses, operating system) and phase 0 (network configuration succeeded, the container
//! runtime is there, the files `stage` wrote still match its manifest). Every problem found is
//! named; the first decides the reason. `Service<Camel>RuntimeReady` covers each service in
//! `deployed_services.yaml`: its `edpm_<container>.service` units are active
//! (`UnitInactive`), their quadlet `config_hash` is what the container runs with
//! (`ConfigHashMismatch`), and their podman health checks pass (`HealthcheckFailing`).
//!
//! Messages quote what the node holds (host names, file excerpts, what podman said): every
//! one passes the redactor and has its control characters escaped on its way out, whatever
//! the shell already did, because conditions are read by people and stored in the API.

use crate::condition::reasons::{
    ADDRESS_MISSING, CONFIG_HASH_MISMATCH, CONTAINER_RUNTIME_MISSING, FACTS_UNAVAILABLE, HEALTHCHECK_FAILING,
    HEALTHCHECK_STARTING, HOSTNAME_MISMATCH, IMAGE_MISMATCH, NETWORK_CONFIG_FAILED, STAGED_FILE_MISMATCH,
    UNEXPECTED_OS, UNIT_INACTIVE,
};
use crate::condition::types::NODE_AGENT;
use crate::condition::{Condition, Reason};

use super::config::Expect;
use super::facts::{Facts, StagedDrift, UnitState};

/// A problem found: its reason (which says how bad it is) and message.
type Problem = (&'static Reason, String);

/// The agent's conditions for this node.
pub fn evaluate(f: &Facts, expect: &Expect) -> Vec<Condition> {
    let mut out = vec![node_condition(f, expect)];
    out.extend(service_conditions(f));
    let redactor = crate::redact::Redactor::default();
    for c in &mut out {
        let masked = redactor.redact(&c.message);
        c.message = crate::excerpt::printable(&masked).into_owned();
    }
    out
}

fn short(h: &str) -> &str {
    h.split('.').next().unwrap_or(h)
}

/// What the checks of one condition found: the problems, in the order checked, and the facts
/// that could not be read.
#[derive(Default)]
struct Findings {
    problems: Vec<Problem>,
    unknown: Vec<String>,
}

impl Findings {
    fn problem(&mut self, reason: &'static Reason, message: impl Into<String>) {
        self.problems.push((reason, message.into()));
    }

    /// False with the first problem's reason and every problem's message; `None` without any.
    fn failed(&self, type_: &str) -> Option<Condition> {
        let (reason, _) = self.problems.first()?;
        let message = self.problems.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>().join("; ");
        Some(Condition::because(type_, reason, message))
    }
}

fn node_condition(f: &Facts, expect: &Expect) -> Condition {
    let mut found = Findings::default();
    booted_as_given(f, expect, &mut found);
    network_and_runtime(f, &mut found);
    let staged_count = staged_files(f, &mut found);
    if let Some(c) = found.failed(NODE_AGENT) {
        return c;
    }
    if !found.unknown.is_empty() {
        return Condition::because(
            NODE_AGENT,
            &FACTS_UNAVAILABLE,
            format!("cannot check: {}", found.unknown.join("; ")),
        );
    }
    let services = match &f.deployed {
        Some(Ok(d)) => format!("{} deployed service(s)", d.services.len()),
        _ => "no services deployed yet".into(),
    };
    // Without a runtime that can be run, the node is refused above: "present" means podman is
    // there and was not found unusable.
    Condition::true_(
        NODE_AGENT,
        format!(
            "host name, addresses and network as given; container runtime present; {staged_count} staged file(s) as staged; {services}"
        ),
    )
}

/// Phase -1: the node booted what it was given (host name, addresses, operating system).
fn booted_as_given(f: &Facts, expect: &Expect, found: &mut Findings) {
    if let Some(want) = &expect.hostname {
        match &f.hostname {
            Ok(have) if have == want || short(have) == short(want) => {}
            Ok(have) => found
                .problem(&HOSTNAME_MISMATCH, format!("host name is {have:?}, the inventory says {want:?}")),
            Err(e) => found.unknown.push(format!("host name: {e}")),
        }
    }
    if !expect.addresses.is_empty() {
        match &f.addresses {
            Ok(have) => {
                let missing: Vec<&str> = expect
                    .addresses
                    .iter()
                    .filter(|a| !have.iter().any(|h| a.parse::<std::net::IpAddr>().is_ok_and(|w| w == *h)))
                    .map(String::as_str)
                    .collect();
                if !missing.is_empty() {
                    found.problem(
                        &ADDRESS_MISSING,
                        format!("the node holds none of the inventory's {}", missing.join(", ")),
                    );
                }
            }
            Err(e) => found.unknown.push(format!("addresses: {e}")),
        }
    }
    if let Some(want) = &expect.os {
        match &f.os {
            Ok(have) if have.contains(want.as_str()) => {}
            Ok(have) => found.problem(&UNEXPECTED_OS, format!("booted {have:?}, expected {want:?}")),
            Err(e) => found.unknown.push(format!("os-release: {e}")),
        }
    }
}

/// Phase 0: the network configuration succeeded, and the node has a container runtime it can
/// run (every service runs in containers: a node without one is not ready for them, whether
/// or not any is deployed yet).
fn network_and_runtime(f: &Facts, found: &mut Findings) {
    match &f.network {
        Some((file, Ok(code))) if *code != 0 => found.problem(
            &NETWORK_CONFIG_FAILED,
            format!("{file} records return code {code}: the network configuration failed"),
        ),
        Some((file, Err(e))) => found.unknown.push(format!("{file}: {e}")),
        _ => {}
    }
    let deployed = matches!(&f.deployed, Some(Ok(d)) if !d.services.is_empty());
    if let Err(why) = &f.runtime {
        let message = if deployed {
            format!("services are deployed but {why}")
        } else {
            format!("{why}: no service can run here until it can (edpm_podman installs it)")
        };
        found.problem(&CONTAINER_RUNTIME_MISSING, message);
    }
    // A file of the wrong shape says nothing about what runs: not "0 deployed service(s)".
    if let Some(Err(e)) = &f.deployed {
        found.unknown.push(e.clone());
    }
}

/// Phase 0: the files `stage` wrote still match its manifest. Returns how many it wrote.
fn staged_files(f: &Facts, found: &mut Findings) -> usize {
    let (count, drift) = match &f.staged {
        Ok((count, drift)) => (*count, drift),
        Err(e) => {
            found.unknown.push(format!("staged files: {e}"));
            return 0;
        }
    };
    if drift.is_empty() {
        return count;
    }
    let named: Vec<String> = drift
        .iter()
        .take(5)
        .map(|d| match d {
            StagedDrift::Missing(p) => format!("{p} (missing)"),
            StagedDrift::Changed(p) => format!("{p} (content)"),
            StagedDrift::Mode(p, have, want) => format!("{p} (mode {have:04o}, staged {want:04o})"),
        })
        .collect();
    let more = if drift.len() > 5 { format!(" and {} more", drift.len() - 5) } else { String::new() };
    found.problem(
        &STAGED_FILE_MISMATCH,
        format!(
            "{} of {count} staged file(s) changed since edpm-agent stage wrote them: {}{more}; run stage again",
            drift.len(),
            named.join(", ")
        ),
    );
    count
}

fn service_conditions(f: &Facts) -> Vec<Condition> {
    let Some(deployed) = &f.deployed else { return Vec::new() };
    let d = match deployed {
        Ok(d) => d,
        Err(e) => {
            return vec![Condition::because(
                crate::condition::types::SERVICES_RUNTIME,
                &FACTS_UNAVAILABLE,
                format!("cannot check: {e}"),
            )];
        }
    };
    d.services.iter().map(|(service, s)| service_condition(f, service, &s.containers)).collect()
}

/// The image of the same repository last deployed to the node when the container runs
/// another (`None`: it runs that one, or nothing of its repository was deployed here).
fn image_mismatch<'d>(running: &str, deployed: &'d [String]) -> Option<&'d str> {
    let same: Vec<&'d str> =
        deployed.iter().map(String::as_str).filter(|d| repository(d) == repository(running)).collect();
    if same.is_empty() || same.contains(&running) { None } else { same.first().copied() }
}

/// An image reference without its tag or digest: `registry/path/name`.
fn repository(image: &str) -> &str {
    let no_digest = image.split_once('@').map_or(image, |(r, _)| r);
    // A `:` after the last `/` starts the tag (one before it is a registry's port).
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
        _ => no_digest,
    }
}

/// One deployed service's `Service<Camel>RuntimeReady`, from its containers.
fn service_condition(f: &Facts, service: &str, containers: &[String]) -> Condition {
    let ty = crate::condition::types::service_runtime(service);
    let units = match &f.units {
        Ok(u) => u,
        Err(e) => return Condition::because(&ty, &FACTS_UNAVAILABLE, format!("cannot read units: {e}")),
    };
    // Without podman's answer, health and the running config_hash are unknown: say so
    // rather than report a service ready that might be failing its health check.
    if let Err(e) = &f.containers {
        return Condition::because(&ty, &FACTS_UNAVAILABLE, format!("cannot query podman: {e}"));
    }
    let mut found = Findings::default();
    for c in containers {
        container_problems(f, c, units.get(&format!("edpm_{c}.service")), &mut found);
    }
    found.failed(&ty).unwrap_or_else(|| {
        Condition::true_(
            &ty,
            format!("{} container(s) active{}", containers.len(), health_note(f, containers)),
        )
    })
}

/// One container's problems: its unit, its `config_hash`, its health check.
fn container_problems(f: &Facts, c: &str, unit_state: Option<&UnitState>, found: &mut Findings) {
    let unit = format!("edpm_{c}.service");
    match unit_state {
        Some(u) if u.active == "active" => {}
        Some(u) if u.load == "not-found" || u.load.is_empty() => {
            found.problem(&UNIT_INACTIVE, format!("{unit} does not exist"))
        }
        Some(u) => found.problem(&UNIT_INACTIVE, format!("{unit} is {} ({})", u.active, u.sub)),
        None => found.problem(&UNIT_INACTIVE, format!("{unit} is not known to systemd")),
    }
    let running = f.containers.as_ref().ok().and_then(|m| m.get(c));
    match (f.quadlet_hashes.get(c), running.and_then(|r| r.config_hash.as_ref())) {
        (Some(want), Some(have)) if want != have => found.problem(
            &CONFIG_HASH_MISMATCH,
            format!(
                "edpm_{c}.container has config_hash {want}, the container runs with {have}: restart {unit}"
            ),
        ),
        _ => {}
    }
    if unit_state.is_some_and(|u| u.need_daemon_reload) {
        found.problem(
            &CONFIG_HASH_MISMATCH,
            format!("edpm_{c}.container changed since systemd loaded it: run systemctl daemon-reload and restart {unit}"),
        );
    }
    if let (Some(deployed), Some(image)) = (&f.deployed_images, running.and_then(|r| r.image.as_deref()))
        && let Some(want) = image_mismatch(image, deployed)
    {
        found.problem(
            &IMAGE_MISMATCH,
            format!("container {c} runs {image}; {want} was deployed to this node last: restart {unit} (or deploy again)"),
        );
    }
    match running.and_then(|r| r.health.as_deref()) {
        Some("unhealthy") => found.problem(&HEALTHCHECK_FAILING, format!("container {c} is unhealthy")),
        Some("starting") => {
            found.problem(&HEALTHCHECK_STARTING, format!("container {c} health check is starting"))
        }
        _ => {}
    }
}

fn health_note(f: &Facts, containers: &[String]) -> &'static str {
    let checked = f
        .containers
        .as_ref()
        .is_ok_and(|m| containers.iter().any(|c| m.get(c).is_some_and(|r| r.health.is_some())));
    if checked { " and healthy" } else { "" }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::condition::{Severity, Status};
    use crate::node::facts::{ContainerState, DeployedService, DeployedServices};

    fn healthy() -> Facts {
        let unit = |a: &str| UnitState {
            active: a.into(),
            sub: "running".into(),
            load: "loaded".into(),
            need_daemon_reload: false,
        };
        Facts {
            hostname: Ok("edpm-compute-3".into()),
            addresses: Ok(vec!["192.168.122.103".parse().unwrap(), "127.0.0.1".parse().unwrap()]),
            os: Ok("CentOS Stream 9".into()),
            network: Some(("var/lib/edpm-config/os-net-config.returncode".into(), Ok(0))),
            runtime: Ok("/usr/bin/podman".into()),
            staged: Ok((12, vec![])),
            deployed: Some(Ok(DeployedServices {
                services: BTreeMap::from([
                    (
                        "nova".into(),
                        DeployedService { containers: vec!["nova_compute".into()], updated_at: None },
                    ),
                    (
                        "neutron_metadata".into(),
                        DeployedService { containers: vec!["ovn_metadata_agent".into()], updated_at: None },
                    ),
                ]),
            })),
            units: Ok(BTreeMap::from([
                ("edpm_nova_compute.service".into(), unit("active")),
                ("edpm_ovn_metadata_agent.service".into(), unit("active")),
            ])),
            quadlet_hashes: BTreeMap::from([("nova_compute".into(), "abc".into())]),
            containers: Ok(BTreeMap::from([(
                "nova_compute".into(),
                ContainerState {
                    health: Some("healthy".into()),
                    config_hash: Some("abc".into()),
                    image: None,
                },
            )])),
            deployed_images: None,
        }
    }

    #[test]
    fn a_container_on_another_image_than_deployed_is_named() {
        let nova = |running: Option<&str>, deployed: Option<Vec<&str>>| {
            let mut f = healthy();
            if let Ok(c) = &mut f.containers {
                c.get_mut("nova_compute").unwrap().image = running.map(String::from);
            }
            f.deployed_images = deployed.map(|d| d.into_iter().map(String::from).collect());
            get(&evaluate(&f, &expect()), "ServiceNovaRuntimeReady").clone()
        };
        let new = "quay.io/podified/openstack-nova-compute:18.0.4";
        let old = "quay.io/podified/openstack-nova-compute:18.0.3";
        let ovn = "quay.io/podified/openstack-ovn-controller:18.0.4";
        // Restarted on the previous image after a failed update.
        let c = nova(Some(old), Some(vec![new, ovn]));
        assert_eq!((c.status, c.reason.as_str()), (crate::condition::Status::False, "ImageMismatch"));
        assert!(
            c.message.contains(&format!("runs {old}; {new} was deployed to this node last")),
            "{}",
            c.message
        );
        // The deployed one, nothing of its repository deployed, or the cluster not asked: fine.
        assert!(nova(Some(new), Some(vec![new])).is_true());
        assert!(nova(Some(old), Some(vec![ovn])).is_true());
        assert!(nova(Some(old), None).is_true());
        assert!(nova(None, Some(vec![new])).is_true());
        // A registry's port is not a tag; a digest is not one either.
        assert_eq!(repository("registry.local:5000/nova:18.0.4"), "registry.local:5000/nova");
        assert_eq!(repository("registry.local:5000/nova"), "registry.local:5000/nova");
        assert_eq!(repository("quay.io/nova@sha256:abcd"), "quay.io/nova");
        assert!(
            nova(Some("quay.io/podified/openstack-nova-compute@sha256:1"), Some(vec![new])).reason
                == "ImageMismatch"
        );
    }

    fn expect() -> Expect {
        Expect {
            hostname: Some("edpm-compute-3.ctlplane.example.com".into()),
            addresses: vec!["192.168.122.103".into()],
            os: Some("CentOS Stream".into()),
        }
    }

    fn get<'a>(cs: &'a [Condition], ty: &str) -> &'a Condition {
        cs.iter().find(|c| c.type_ == ty).unwrap()
    }

    #[test]
    fn a_node_as_deployed_is_ready() {
        let cs = evaluate(&healthy(), &expect());
        assert!(get(&cs, NODE_AGENT).is_true(), "{cs:?}");
        assert!(get(&cs, "ServiceNovaRuntimeReady").is_true());
        assert_eq!(get(&cs, "ServiceNovaRuntimeReady").message, "1 container(s) active and healthy");
        assert!(get(&cs, "ServiceNeutronMetadataRuntimeReady").is_true());
    }

    #[test]
    fn one_reason_per_problem() {
        let reason = |f: Facts| evaluate(&f, &expect())[0].reason.clone();
        let mut f = healthy();
        f.hostname = Ok("localhost".into());
        assert_eq!(reason(f), HOSTNAME_MISMATCH.name);
        let mut f = healthy();
        f.addresses = Ok(vec!["10.0.0.1".parse().unwrap()]);
        assert_eq!(reason(f), ADDRESS_MISSING.name);
        let mut f = healthy();
        f.os = Ok("Fedora 40".into());
        assert_eq!(reason(f), UNEXPECTED_OS.name);
        let mut f = healthy();
        f.network = Some(("var/lib/edpm-config/nmstate.returncode".into(), Ok(1)));
        assert_eq!(reason(f), NETWORK_CONFIG_FAILED.name);
        let mut f = healthy();
        f.runtime = Err(MISSING.into());
        assert_eq!(reason(f), CONTAINER_RUNTIME_MISSING.name);
        let mut f = healthy();
        f.staged = Ok((12, vec![StagedDrift::Changed("var/lib/openstack/configs/nova/01-nova.conf".into())]));
        let c = evaluate(&f, &expect())[0].clone();
        assert_eq!((c.reason.as_str(), c.severity), (STAGED_FILE_MISMATCH.name, Severity::Warning));
        assert!(c.message.contains("var/lib/openstack/configs/nova/01-nova.conf (content)"), "{}", c.message);
        let mut f = healthy();
        f.hostname = Err("permission denied".into());
        let c = evaluate(&f, &expect())[0].clone();
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, FACTS_UNAVAILABLE.name));
    }

    #[test]
    fn service_runtime_problems() {
        let nova = |f: Facts| get(&evaluate(&f, &expect()), "ServiceNovaRuntimeReady").clone();
        let mut f = healthy();
        f.units.as_mut().unwrap().get_mut("edpm_nova_compute.service").unwrap().active = "failed".into();
        let c = nova(f);
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            (UNIT_INACTIVE.name, "edpm_nova_compute.service is failed (running)")
        );
        let mut f = healthy();
        f.units.as_mut().unwrap().remove("edpm_nova_compute.service");
        assert_eq!(nova(f).reason, UNIT_INACTIVE.name);
        let mut f = healthy();
        f.containers.as_mut().unwrap().get_mut("nova_compute").unwrap().health = Some("unhealthy".into());
        assert_eq!(nova(f).reason, HEALTHCHECK_FAILING.name);
        let mut f = healthy();
        f.containers = Err("podman ps: permission denied".into());
        let c = nova(f);
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, FACTS_UNAVAILABLE.name));
        assert!(c.message.contains("permission denied"), "{}", c.message);
        let mut f = healthy();
        f.quadlet_hashes.insert("nova_compute".into(), "def".into());
        let c = nova(f);
        assert_eq!((c.reason.as_str(), c.severity), (CONFIG_HASH_MISMATCH.name, Severity::Warning));
        let mut f = healthy();
        f.units.as_mut().unwrap().get_mut("edpm_nova_compute.service").unwrap().need_daemon_reload = true;
        assert_eq!(nova(f).reason, CONFIG_HASH_MISMATCH.name);
        let mut f = healthy();
        f.units = Err("systemctl: not found".into());
        assert_eq!(nova(f).status, Status::Unknown);
    }

    const MISSING: &str = "podman is not installed (no program at usr/bin/podman)";

    /// Nothing deployed is no problem; no runtime, or one that cannot be run, is one, deployed
    /// services or not (it was True, "no container runtime yet", before any was deployed).
    #[test]
    fn nothing_deployed_is_not_a_problem_but_no_runtime_is() {
        let mut f = healthy();
        f.deployed = None;
        let cs = evaluate(&f, &expect());
        assert_eq!(cs.len(), 1);
        assert!(cs[0].is_true() && cs[0].message.ends_with("no services deployed yet"), "{:?}", cs[0]);
        assert!(cs[0].message.contains("; container runtime present;"), "{}", cs[0].message);
        for why in [MISSING, "podman cannot be run: cannot run podman: permission denied"] {
            f.runtime = Err(why.into());
            let c = get(&evaluate(&f, &expect()), NODE_AGENT).clone();
            assert_eq!(
                (c.status, c.reason.as_str()),
                (Status::False, CONTAINER_RUNTIME_MISSING.name),
                "{c:?}"
            );
            assert!(c.message.contains(why) && !c.message.contains("present"), "{}", c.message);
        }
        let mut f = healthy();
        f.runtime = Err("usr/bin/podman cannot be executed (mode 0644)".into());
        let c = get(&evaluate(&f, &expect()), NODE_AGENT).clone();
        assert!(
            c.message.starts_with("services are deployed but usr/bin/podman cannot be executed"),
            "{}",
            c.message
        );
    }

    #[test]
    fn a_deployed_services_file_of_the_wrong_shape_leaves_the_node_unknown() {
        let mut f = healthy();
        f.deployed = Some(Err("var/lib/edpm-config/deployed_services.yaml has no `services` key".into()));
        let cs = evaluate(&f, &expect());
        let c = get(&cs, NODE_AGENT);
        assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, FACTS_UNAVAILABLE.name));
        assert!(c.message.contains("deployed_services.yaml has no `services` key"), "{}", c.message);
        // A real problem still decides the reason.
        f.hostname = Ok("elsewhere".into());
        assert_eq!(get(&evaluate(&f, &expect()), NODE_AGENT).reason, HOSTNAME_MISMATCH.name);
    }

    #[test]
    fn messages_are_redacted_and_escaped_whatever_the_facts_hold() {
        let mut f = healthy();
        f.containers = Err("podman exited with code 125: Error: dial postgres://nova:S3cretPassw0rd@db/nova: password=hunter2hunter2".into());
        f.hostname = Ok("evil\u{1b}[2J\rhost".into());
        let cs = evaluate(&f, &expect());
        for c in &cs {
            assert!(
                !c.message.contains("S3cretPassw0rd") && !c.message.contains("hunter2hunter2"),
                "{}",
                c.message
            );
            assert!(!c.message.chars().any(char::is_control), "{:?}", c.message);
        }
        assert!(get(&cs, "ServiceNovaRuntimeReady").message.contains("postgres://nova:********@db/nova"));
    }
}
