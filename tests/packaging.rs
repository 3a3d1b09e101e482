//! What packaging/ ships: the runner image's Containerfile (its ENTRYPOINT run with a Job's
//! arguments), the RBAC manifest, and the RPM spec, built with rpmbuild from a tarball of this
//! tree (the test binary stands in for the release build), checked by its file lists.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::runner::{Job, host_statuses, pairs};
use crate::util::{bin, node_bin, repo, run_program};

/// rpmbuild is installed by `scripts/test.sh` (Debian's `rpm` package); without it the test
/// only skips outside CI.
fn rpmbuild() -> Option<&'static str> {
    let found = Command::new("rpmbuild").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "rpmbuild is missing in CI: scripts/test.sh installs Debian's rpm package"
        );
        eprintln!("skipping: rpmbuild not found (apt-get install rpm)");
        return None;
    }
    Some("rpmbuild")
}

fn files(rpm: &Path) -> Vec<String> {
    let out = Command::new("rpm").args(["-qlp", rpm.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("/usr/lib/.build-id"))
        .map(str::to_string)
        .collect()
}

/// Builds the RPMs from a tarball of this tree, with the test binary as edpm-agent; returns
/// the build's top directory (its `RPMS/`), or `None` (skipped) without rpmbuild.
pub(crate) fn build_rpms() -> Option<tempfile::TempDir> {
    let rpmbuild = rpmbuild()?;
    let top = tempfile::tempdir().unwrap();
    let sources = top.path().join("SOURCES");
    std::fs::create_dir_all(&sources).unwrap();
    // The tree as a release tarball would hold it: no build output, no venv, no git.
    let tar = Command::new("tar")
        .current_dir(repo())
        .args([
            "--exclude=./target",
            "--exclude=./.venv",
            "--exclude=./.git",
            "--transform",
            "s,^\\.,edpm-agent-0.1.0,",
            "-czf",
        ])
        .arg(sources.join("edpm-agent-0.1.0.tar.gz"))
        .arg(".")
        .output()
        .unwrap();
    assert!(tar.status.success(), "{}", String::from_utf8_lossy(&tar.stderr));
    let out = Command::new(rpmbuild)
        .args(["-bb", "--nodeps"])
        .arg("--define")
        .arg(format!("_topdir {}", top.path().display()))
        .arg("--define")
        .arg(format!("edpm_agent_binary {}", bin().display()))
        .arg("--define")
        .arg(format!("edpm_agent_node_binary {}", node_bin().display()))
        // The debug test binary is large: store it uncompressed, and skip the distribution's
        // post-install processing (stripping, byte-compiling), which is not what is tested.
        .args(["--define", "_binary_payload w0.ufdio", "--define", "__os_install_post %{nil}"])
        .arg(repo().join("packaging/rpm/edpm-agent.spec"))
        .output()
        .unwrap();
    assert!(out.status.success(), "rpmbuild failed:\n{}", String::from_utf8_lossy(&out.stderr));
    Some(top)
}

#[test]
fn the_rpm_packages_install_what_the_spec_promises() {
    let Some(top) = build_rpms() else { return };
    let rpms = top.path().join("RPMS");
    let main = files(&rpms.join(format!(
        "{}/edpm-agent-0.1.0-1.{}.rpm",
        std::env::consts::ARCH,
        std::env::consts::ARCH
    )));
    // The user guides (docs/*.md), whatever their names, beside the README.
    let mut guides: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("/usr/share/doc/edpm-agent-0.1.0/{n}"))
        .collect();
    guides.sort();
    assert!(guides.iter().any(|g| g.ends_with("/node-agent.md")), "{guides:?}");
    let mut want_main: Vec<String> = [
        "/etc/edpm-agent",
        "/etc/edpm-agent/agent.yaml",
        "/usr/bin/edpm-agent",
        "/usr/bin/edpm-inventory",
        "/usr/bin/kubectl-edpm",
        "/usr/share/doc/edpm-agent-0.1.0",
        "/usr/share/doc/edpm-agent-0.1.0/CHANGELOG.md",
        "/usr/share/doc/edpm-agent-0.1.0/README.md",
        "/usr/share/doc/edpm-agent-0.1.0/ansible.cfg.example",
    ]
    .map(String::from)
    .to_vec();
    want_main.extend(guides);
    want_main.sort();
    assert_eq!(main, want_main);
    let roles = files(&rpms.join("noarch/edpm-agent-roles-0.1.0-1.noarch.rpm"));
    for role in
        std::fs::read_dir(repo().join("roles")).unwrap().filter_map(|e| e.ok()).filter(|e| e.path().is_dir())
    {
        let name = role.file_name().into_string().unwrap();
        let want = format!("/usr/share/ansible/roles/{name}/tasks/main.yml");
        assert!(roles.contains(&want), "{want} not in {roles:?}");
    }
    assert!(roles.iter().all(|f| f.starts_with("/usr/share/ansible/roles/edpm_agent_")), "{roles:?}");
    // Every manifest in packaging/kubernetes, whatever its name.
    let kube = files(&rpms.join("noarch/edpm-agent-kubernetes-0.1.0-1.noarch.rpm"));
    let mut want = vec!["/usr/share/edpm-agent".to_string(), "/usr/share/edpm-agent/kubernetes".to_string()];
    let mut manifests: Vec<String> = std::fs::read_dir(repo().join("packaging/kubernetes"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml"))
        .map(|n| format!("/usr/share/edpm-agent/kubernetes/{n}"))
        .collect();
    manifests.sort();
    assert!(manifests.iter().any(|m| m.ends_with("/rbac-runner.yaml")));
    want.extend(manifests);
    want.extend(
        ["/usr/share/edpm-agent/grafana", "/usr/share/edpm-agent/grafana/edpm-agent.json"].map(String::from),
    );
    want.sort();
    assert_eq!(kube, want);
    // The node agent: its own binary, its guide, and its unit in systemd's unit directory.
    let arch = std::env::consts::ARCH;
    let node = files(&rpms.join(format!("{arch}/edpm-agent-node-0.1.0-1.{arch}.rpm")));
    assert_eq!(
        node,
        [
            "/usr/bin/edpm-agent-node",
            "/usr/lib/systemd/system/edpm-agent-node.service",
            "/usr/share/doc/edpm-agent-node-0.1.0",
            "/usr/share/doc/edpm-agent-node-0.1.0/node-agent.md",
        ]
    );
    let requires = Command::new("rpm")
        .args(["-qp", "--requires"])
        .arg(rpms.join(format!("{arch}/edpm-agent-node-0.1.0-1.{arch}.rpm")))
        .output()
        .unwrap();
    let requires = String::from_utf8_lossy(&requires.stdout);
    assert!(
        !requires.lines().any(|l| l.starts_with("edpm-agent ") || l == "edpm-agent"),
        "a node needs only the node agent, not the product: {requires}"
    );
    let unit = std::fs::read_to_string(repo().join("packaging/systemd/edpm-agent-node.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/bin/edpm-agent-node --config "),
        "the unit runs the packaged node agent binary"
    );

    // The settings file is configuration that an update keeps.
    let q = Command::new("rpm")
        .args(["-qp", "--configfiles"])
        .arg(rpms.join(format!(
            "{}/edpm-agent-0.1.0-1.{}.rpm",
            std::env::consts::ARCH,
            std::env::consts::ARCH
        )))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&q.stdout).trim(), "/etc/edpm-agent/agent.yaml");
}

/// The lines of a Containerfile's stage `name` (from its `FROM … AS name` to the next `FROM`),
/// continuation lines and comments left out.
fn stage<'a>(containerfile: &'a str, name: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in containerfile.lines().filter(|l| !l.starts_with('#') && !l.starts_with(' ')) {
        if line.starts_with("FROM ") {
            inside = line.ends_with(&format!(" AS {name}"));
        }
        if inside {
            out.push(line);
        }
    }
    assert!(!out.is_empty(), "no stage {name} in packaging/Containerfile");
    out
}

#[test]
fn the_runner_image_entrypoint_takes_the_jobs_arguments_unchanged() {
    let containerfile = std::fs::read_to_string(repo().join("packaging/Containerfile")).unwrap();
    let runner = stage(&containerfile, "runner");
    let instruction = |name: &str| -> Vec<String> {
        runner.iter().filter_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_string)).collect()
    };
    let entrypoint: Vec<String> = serde_json::from_str(&instruction("ENTRYPOINT")[0]).unwrap();
    assert_eq!(entrypoint, ["/usr/bin/edpm-agent", "run", "--"]);
    assert!(instruction("COPY").contains(&"--from=build /out/edpm-agent /usr/bin/edpm-agent".to_string()));
    assert!(instruction("RUN").contains(&"ln -sf edpm-agent /usr/bin/edpm-inventory".to_string()));
    assert_eq!(instruction("WORKDIR"), ["/runner"], "the runner directory the Job's command names");
    let envs: Vec<(String, String)> = instruction("ENV")
        .iter()
        .map(|e| {
            let (k, v) = e.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    assert_eq!(envs, pairs(&[("EDPM_AGENT_INIT", "dumb-init")]));
    assert_eq!(instruction("FROM"), ["${RUNNER_BASE_IMAGE} AS runner"]);
    assert!(
        containerfile
            .contains("ARG RUNNER_BASE_IMAGE=quay.io/openstack-k8s-operators/openstack-ansibleee-runner:")
    );
    // The controller's minimal base is pinned by digest, and built from source by a builder
    // that is a build argument too.
    let pinned = containerfile.lines().find_map(|l| l.strip_prefix("ARG CONTROLLER_BASE_IMAGE=")).unwrap();
    let digest = pinned.split_once("@sha256:").map(|(_, d)| d).unwrap_or_default();
    assert!(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()), "{pinned}");
    assert!(stage(&containerfile, "build")[0].starts_with("FROM ${BUILDER_IMAGE} AS build"));
    assert_eq!(stage(&containerfile, "controller").iter().filter(|l| l.starts_with("USER ")).count(), 1);
    // `edpm-agent run --help` documents the same defaults.
    let help = run_program(&bin(), &["run", "--help"], &[]);
    for needle in [
        "/dev/termination-log",
        "EDPM_AEE_TERMINATION_LOG",
        "EDPM_AEE_ARTIFACTS_ROOT",
        "/runner",
        "EDPM_AGENT_INIT",
    ] {
        assert!(help.stdout.contains(needle), "run --help lacks {needle}");
    }

    // The ENTRYPOINT with a Job's arguments and environment, exactly as openstack-operator
    // builds them (readiness-runner.md §2), in a runner directory standing in for /runner.
    let job = Job::new(&["edpm-compute-0", "edpm-compute-1"], &[]);
    let playbook = "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: write what the job passed\n      ansible.builtin.copy:\n        content: \"{{ edpm_service_type }} {{ edpm_override_hosts }}\\n\"\n        dest: \"{{ playbook_dir }}/../out-{{ inventory_hostname }}\"\n      tags: [deploy]\n    - name: skipped by --skip-tags\n      ansible.builtin.fail: {msg: never}\n      tags: [never-run]\n";
    let wrap = |v: &str| format!("\n{v}\n\n");
    let job_args = [
        "ansible-runner",
        "run",
        "/runner",
        "-p",
        "playbook.yaml",
        "-i",
        "nova-edpm-deployment-edpm-compute",
    ];
    let mut argv: Vec<&str> = entrypoint[1..].iter().map(String::as_str).collect();
    argv.extend(job_args);
    let (playbook_env, cmdline, extra) = (
        wrap(playbook),
        wrap("--skip-tags never-run"),
        wrap("edpm_override_hosts: all\nedpm_service_type: nova\nedpm_services_override: []\n"),
    );
    let dir = job.dir().display().to_string();
    let out = job.edpm_agent(
        &argv,
        &[
            (envs[0].0.as_str(), envs[0].1.as_str()),
            ("EDPM_AGENT_RUNNER_DIR", dir.as_str()),
            ("RUNNER_PLAYBOOK", &playbook_env),
            ("RUNNER_CMDLINE", &cmdline),
            ("RUNNER_EXTRA_VARS", &extra),
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.starts_with(&format!(
            "edpm-agent: running dumb-init -- ansible-runner run {dir} -p playbook.yaml"
        )),
        "{}",
        out.stdout
    );
    for h in ["edpm-compute-0", "edpm-compute-1"] {
        assert_eq!(std::fs::read_to_string(job.dir().join(format!("out-{h}"))).unwrap(), "nova all\n");
    }
    assert_eq!(
        std::fs::read_to_string(job.dir().join("project/playbook.yaml")).unwrap(),
        format!("---\n{playbook_env}\n")
    );
    assert_eq!(std::fs::read_to_string(job.dir().join("env/extravars")).unwrap(), format!("---\n{extra}\n"));
    assert_eq!(std::fs::read_to_string(job.dir().join("env/cmdline")).unwrap(), format!("{cmdline}\n"));
    let s = job.summary("nova-edpm-deployment-edpm-compute");
    assert_eq!(host_statuses(&s), pairs(&[("edpm-compute-0", "ok"), ("edpm-compute-1", "ok")]));
    let (text, upstream) = job.termination();
    assert_eq!(text["status"], "successful");
    assert_eq!(upstream.unwrap().total_hosts, 2);
}

#[test]
fn the_rbac_grants_what_the_kubernetes_source_reads_and_no_more() {
    let text = std::fs::read_to_string(repo().join("packaging/kubernetes/rbac-runner.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let role = docs.iter().find(|d| d["kind"] == "Role").unwrap();
    let mut granted: Vec<(String, String, Vec<String>)> = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let verbs: Vec<String> =
            rule["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        assert!(verbs.iter().all(|v| v == "get" || v == "list"), "read-only: {verbs:?}");
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                granted.push((g.as_str().unwrap().into(), r.as_str().unwrap().into(), verbs.clone()));
            }
        }
    }
    // Every kind the Kubernetes source lists for an inventory (edpm_core::kinds, the table
    // edpm_io::k8s::read lists from; not the readiness evidence, which only `status`
    // lists) needs list; ConfigMaps and Secrets only get.
    let kinds = edpm_core::kinds::KINDS;
    let listed: Vec<(String, String)> = kinds
        .iter()
        .filter(|k| k.is_listed() && !k.evidence)
        .map(|k| (k.group.to_string(), k.plural.to_string()))
        .collect();
    let evidence = kinds.iter().filter(|k| k.evidence).count();
    assert!(evidence >= 5, "the evidence kinds are still told apart in edpm_core::kinds");
    for (g, p) in [("batch", "jobs"), ("coordination.k8s.io", "leases")] {
        assert!(
            !granted.iter().any(|(gg, pp, _)| gg == g && pp == p),
            "{p}.{g}: the runner reads no evidence"
        );
    }
    assert!(listed.len() >= 10, "{listed:?}");
    for (g, p) in &listed {
        assert!(
            granted.iter().any(|(gg, pp, v)| gg == g && pp == p && v.contains(&"list".to_string())),
            "{p}.{g} is read but not granted"
        );
    }
    for r in ["configmaps", "secrets"] {
        assert!(
            granted.iter().any(|(g, p, v)| g.is_empty() && p == r && v == &["get".to_string()]),
            "{r}: get only"
        );
    }
    let binding = docs.iter().find(|d| d["kind"] == "RoleBinding").unwrap();
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
}

/// systemd-analyze is installed by `scripts/test.sh` (Debian's `systemd` package); without it
/// the unit tests only skip outside CI.
fn systemd_analyze() -> bool {
    let found = Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is missing in CI: scripts/test.sh installs Debian's systemd package"
        );
        eprintln!("SKIPPED: systemd-analyze not found (apt-get install systemd)");
    }
    found
}

/// The unit as installed, with ExecStart pointing at the binary under test (verify checks
/// that the program exists).
fn unit_under_test() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(repo().join("packaging/systemd/edpm-agent-node.service")).unwrap();
    let unit =
        unit.replace("ExecStart=/usr/bin/edpm-agent-node ", &format!("ExecStart={} ", node_bin().display()));
    std::fs::write(dir.path().join("edpm-agent-node.service"), unit).unwrap();
    dir
}

#[test]
fn the_node_agent_unit_verifies_cleanly() {
    if !systemd_analyze() {
        return;
    }
    let dir = unit_under_test();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join("edpm-agent-node.service"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify failed:\n{stderr}");
    // Warnings (unknown keys, bad values) are printed but do not fail verify: none allowed.
    assert_eq!(stderr.trim(), "", "systemd-analyze verify warns");
    let unit = std::fs::read_to_string(dir.path().join("edpm-agent-node.service")).unwrap();
    for (key, want) in [
        ("Type", "notify"),
        ("Restart", "on-failure"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", "CAP_SYS_ADMIN"),
        ("PrivateMounts", "yes"),
    ] {
        assert!(unit.lines().any(|l| l == format!("{key}={want}")), "{key}={want} missing");
    }
    assert!(unit.lines().any(|l| l.starts_with("WatchdogSec=")), "WatchdogSec missing");
}

/// The exposure score the node agent's guide records (docs/node-agent.md, "As a service"): the
/// sandbox must not loosen without the guide saying so.
#[test]
fn the_node_agent_units_exposure_is_what_the_readme_records() {
    if !systemd_analyze() {
        return;
    }
    let dir = unit_under_test();
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(dir.path().join("edpm-agent-node.service"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let score = text
        .lines()
        .find_map(|l| l.split_once("Overall exposure level for edpm-agent-node.service: "))
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no exposure score in:\n{text}\n{}", String::from_utf8_lossy(&out.stderr)));
    let readme = std::fs::read_to_string(repo().join("docs/node-agent.md")).unwrap();
    let recorded = format!("exposure level {score} ");
    assert!(
        readme.contains(&recorded),
        "systemd-analyze security scores the unit {score}; docs/node-agent.md should say \"{recorded}\""
    );
}

#[test]
fn the_controllers_manifests_parse_and_run_it_as_restricted_pod_security_requires() {
    let dir = repo().join("packaging/kubernetes");
    let mut kinds = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&p).unwrap();
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            for d in docs {
                assert!(d["kind"].is_string() && d["apiVersion"].is_string(), "{}: {d}", p.display());
                kinds.push(d["kind"].as_str().unwrap().to_string());
            }
        }
    }
    for k in [
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ServiceMonitor",
        "PrometheusRule",
        "Kustomization",
        "Role",
        "ClusterRole",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in packaging/kubernetes");
    }
    let k: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap()).unwrap();
    for r in k["resources"].as_array().unwrap() {
        assert!(dir.join(r.as_str().unwrap()).is_file(), "kustomization names a missing {r}");
    }
    let text = std::fs::read_to_string(dir.join("deployment-controller.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let d = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(c["resources"]["requests"].is_object() && c["resources"]["limits"].is_object());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    // A long first list is not killed by the liveness probe (tests/monitoring.rs checks the
    // rendered Deployment's probes, image, spread and HTTPS metrics in full).
    assert_eq!(c["startupProbe"]["httpGet"]["path"], "/readyz");
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--leader-elect") && args.starts_with(&["status", "controller"]), "{args:?}");
    // The arguments are the binary's: it accepts them (up to needing a cluster).
    let out = crate::util::run(&[args.as_slice(), &["--help"]].concat(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(pod["serviceAccountName"], "edpm-agent-controller");
    // SIGTERM ends it within --grace-period and a second (the Lease's release): before the
    // kubelet's SIGKILL.
    let grace: u64 = args
        .iter()
        .find_map(|a| a.strip_prefix("--grace-period="))
        .and_then(|g| g.trim_end_matches('s').parse().ok())
        .expect("--grace-period=Ns");
    let kill = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        kill >= grace + 2,
        "terminationGracePeriodSeconds {kill} leaves no room past --grace-period {grace}"
    );
    // /healthz fails after 60 s without progress: the probe gives it a few periods more.
    let probe = &c["livenessProbe"];
    let (period, failures) =
        (probe["periodSeconds"].as_u64().unwrap(), probe["failureThreshold"].as_u64().unwrap());
    assert!(period * failures >= 40, "{probe}");
    // Secrets are read by name only: never listed or watched. In its own namespace the
    // controller writes no Lease but its own leader Lease by name (`create` cannot be limited
    // by name); the node agents' Leases are written only in their namespace.
    let text = std::fs::read_to_string(dir.join("rbac-controller.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let namespaces: Vec<&str> = docs
        .iter()
        .filter(|d| d["kind"] == "Role")
        .map(|d| d["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["openstack", "edpm-node-lease"]);
    for role in docs.iter().filter(|d| d["kind"] == "Role") {
        for rule in role["rules"].as_array().unwrap() {
            if rule["resources"] == serde_json::json!(["leases"])
                && role["metadata"]["namespace"] == "openstack"
            {
                let verbs: Vec<&str> =
                    rule["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
                let named = rule["resourceNames"] == serde_json::json!(["edpm-agent-status-controller"]);
                assert!(named || verbs == ["create"], "a Lease rule reaching other Leases: {rule}");
            }
        }
    }
    let k: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap()).unwrap();
    assert!(k.get("namespace").is_none(), "a kustomization namespace would move the Leases' Role");
    for role in docs.iter().filter(|d| d["kind"] == "Role") {
        for rule in role["rules"].as_array().unwrap() {
            if rule["resources"].as_array().unwrap().iter().any(|r| r == "secrets") {
                // Read by name, and listed and watched metadata-only for rotations (issue 36):
                // never written.
                let verbs = rule["verbs"].as_array().unwrap();
                assert!(verbs.iter().all(|v| v == "get" || v == "list" || v == "watch"), "Secrets: {rule}");
            }
        }
    }
}
