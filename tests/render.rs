//! `render` and `derive` against the example deployment: golden files, oslo's own reading of
//! the rendered layers versus `--merged`, error chains, and applying NovaExternalComputes to
//! the fake API server.

use serde_json::{Value, json};

use crate::util::fake_api::{FakeApi, Fault};
use crate::util::{normalize, run};

const SEEDS: &[&str] = &["--config", "examples/edpm-agent.yaml"];

fn args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    SEEDS.iter().chain(rest).copied().collect()
}

fn snap(name: &str, text: &str) {
    insta::with_settings!({ snapshot_path => "snapshots/render", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(name, normalize(text));
    });
}

#[test]
fn golden_rendered_files_for_the_examples() {
    let out = run(&args(&["render", "--redact"]), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stdout.contains("fake-cell1-pass") && !out.stdout.contains("fake-nova-password"),
        "redacted"
    );
    snap("examples_all_redacted", &out.stdout);
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let out = run(&args(&["render", "--node", "edpm-compute-1", "--service", "nova", "--out", dir]), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for f in ["01-nova.conf", "02-nova-host-specific.conf", "25-nova-extra.conf"] {
        snap(
            &format!("edpm-compute-1_nova_{f}"),
            &std::fs::read_to_string(d.path().join("nova").join(f)).unwrap(),
        );
    }
    let nodeset = run(
        &["--config", "examples/edpm-agent-nodeset.yaml", "render", "--redact", "--node", "edpm-compute-4"],
        &[],
    );
    assert_eq!(nodeset.code, 0, "{}", nodeset.stderr);
    snap("nodeset_edpm-compute-4_redacted", &nodeset.stdout);
}

#[test]
fn cell_values_follow_the_node_annotation() {
    let v = |node: &str| {
        let d = tempfile::tempdir().unwrap();
        let out = run(
            &args(&["render", "--node", node, "--service", "nova", "--out", d.path().to_str().unwrap()]),
            &[],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        std::fs::read_to_string(d.path().join("nova/01-nova.conf")).unwrap()
    };
    assert!(v("edpm-compute-0").contains("transport_url=rabbit://cell1-user:fake-cell1-pass@rabbitmq-cell1"));
    let c1 = v("edpm-compute-1");
    assert!(
        c1.contains("transport_url=rabbit://cell2-user:fake-cell2-pass@rabbitmq-cell2"),
        "node annotation nova-cell2 wins"
    );
    assert!(
        c1.contains("amqp_durable_queues=false") && !c1.contains("[notifications]"),
        "cell2 has no quorum queues, no notifications"
    );
}

/// What nova-compute would see: the real oslo.config reading the rendered directory equals
/// reading the single --merged file, for every option, single- and multi-valued.
#[test]
fn oslo_reads_rendered_layers_and_merged_file_alike() {
    let d = tempfile::tempdir().unwrap();
    let layered = d.path().join("layered");
    let merged = d.path().join("merged");
    for (dir, extra) in [(&layered, None), (&merged, Some("--merged"))] {
        let mut a = args(&[
            "render",
            "--node",
            "edpm-compute-0",
            "--service",
            "nova",
            "--out",
            dir.to_str().unwrap(),
        ]);
        a.extend(extra);
        let out = run(&a, &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let files = |dir: &std::path::Path| -> Vec<(String, String)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let layered_files = files(&layered.join("nova"));
    let merged_files = files(&merged.join("nova"));
    assert_eq!(merged_files.len(), 1);
    let mut queries: Vec<Value> = Vec::new();
    for (_, text) in &layered_files {
        let f = edpm_core::oslo::parse(text).expect("rendered files parse");
        for s in &f.sections {
            for e in &s.entries {
                let q = json!([edpm_core::oslo::normalize_group(&s.name), e.key]);
                if !queries.contains(&q) {
                    queries.push(q);
                }
            }
        }
    }
    let answer = crate::oslo_diff::harness(&json!({"layer": [
        {"items": [{"dir": layered_files}], "queries": queries},
        {"items": [{"file": merged_files[0].1}], "queries": queries},
    ]}));
    assert_eq!(answer["layer"][0], answer["layer"][1]);
    let debug = queries.iter().position(|q| q == &json!(["DEFAULT", "cpu_allocation_ratio"])).unwrap();
    assert_eq!(answer["layer"][0]["single"][debug], "8.0", "CustomServiceConfig wins");
    let images = queries.iter().position(|q| q == &json!(["libvirt", "images_type"])).unwrap();
    assert_eq!(answer["layer"][0]["single"][images], "rbd");
}

#[test]
fn check_reports_drift_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    assert_eq!(run(&args(&["render", "--out", dir]), &[]).code, 0);
    assert_eq!(run(&args(&["render", "--out", dir, "--check"]), &[]).code, 0);
    let f = d.path().join("edpm-compute-0/nova/02-nova-host-specific.conf");
    std::fs::write(&f, "[DEFAULT]\nmy_ip = 10.9.9.9\n").unwrap();
    let out = run(&args(&["render", "--out", dir, "--check"]), &[]);
    assert_eq!(out.code, 10);
    assert!(
        out.stdout.contains("differs:") && out.stdout.contains("02-nova-host-specific.conf"),
        "{}",
        out.stdout
    );
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "[DEFAULT]\nmy_ip = 10.9.9.9\n",
        "--check writes nothing"
    );
}

fn scratch_with(extra: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    crate::util::example_copy(d.path());
    std::fs::write(d.path().join("extra.yaml"), extra).unwrap();
    d
}

fn render_in(d: &tempfile::TempDir, rest: &[&str]) -> crate::util::Output {
    let src = d.path().to_str().unwrap();
    let mut a = vec!["--source", src];
    a.extend_from_slice(rest);
    run(&a, &[])
}

#[test]
fn a_broken_link_in_the_cell_chain_is_named_whole() {
    let d = scratch_with("");
    std::fs::write(
        d.path().join("controlplane/novacells.yaml"),
        std::fs::read_to_string(crate::util::repo().join("examples/controlplane/novacells.yaml"))
            .unwrap()
            .replace("  transport_url: rabbit://cell2-user", "  transport_uri: rabbit://cell2-user"),
    )
    .unwrap();
    let out = render_in(&d, &["render", "--redact", "--node", "edpm-compute-1", "--service", "nova"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    for n in [
        "node edpm-compute-1",
        "nova-cell2 (OpenStackDataPlaneNode/edpm-compute-1)",
        "NovaCell nova-cell2",
        "Secret nova-cell2",
        "key transport_url",
    ] {
        assert!(out.stderr.contains(n), "missing {n:?}: {}", out.stderr);
    }
    let d = scratch_with("");
    std::fs::write(
        d.path().join("dataplane/nodes.yaml"),
        std::fs::read_to_string(crate::util::repo().join("examples/dataplane/nodes.yaml"))
            .unwrap()
            .replace("nova-cell2", "nova-cell3"),
    )
    .unwrap();
    let out = render_in(&d, &["render", "--redact", "--node", "edpm-compute-1", "--service", "nova"]);
    assert_eq!(out.code, 4);
    assert!(
        out.stderr.contains("NovaCell nova-cell3: not found; did you mean \"nova-cell1\"?")
            || out.stderr.contains("NovaCell nova-cell3: not found; did you mean \"nova-cell2\"?"),
        "{}",
        out.stderr
    );
}

#[test]
fn user_config_must_parse_match_the_glob_and_sort_last() {
    let cm = |key: &str, text: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nova-extra-config\ndata:\n  {key}: |\n{}",
            text.lines().map(|l| format!("    {l}\n")).collect::<String>()
        )
    };
    let cases = [
        (cm("25-nova-extra.conf", "debug = True"), "Section must be started before assignment"),
        (cm("custom.conf", "[DEFAULT]\ndebug = True"), "edpm-ansible does not copy (it copies *nova*.conf)"),
        (
            cm("00-nova-early.conf", "[DEFAULT]\ndebug = True"),
            "sorts before the generated 02-nova-host-specific.conf",
        ),
    ];
    for (cm_yaml, needle) in cases {
        let d = scratch_with("");
        let orig = std::fs::read_to_string(crate::util::repo().join("examples/controlplane/configmaps.yaml"))
            .unwrap();
        let rest = orig.split_once("---\n").unwrap().1;
        std::fs::write(d.path().join("controlplane/configmaps.yaml"), format!("{cm_yaml}---\n{rest}"))
            .unwrap();
        let out = render_in(&d, &["render", "--redact", "--node", "edpm-compute-0", "--service", "nova"]);
        assert_eq!(out.code, 3, "{}", out.stderr);
        assert!(
            out.stderr.contains(needle) && out.stderr.contains("ConfigMap/nova-extra-config"),
            "{needle}: {}",
            out.stderr
        );
    }
}

#[test]
fn template_overrides_and_strict_undefined() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("nova")).unwrap();
    let render_with = |template: &str| {
        std::fs::write(t.path().join("nova/02-nova-host-specific.conf.j2"), template).unwrap();
        let dir = t.path().to_str().unwrap();
        run(
            &args(&[
                "render",
                "--redact",
                "--node",
                "edpm-compute-0",
                "--service",
                "nova",
                "--templates",
                dir,
            ]),
            &[],
        )
    };
    let out = render_with("[DEFAULT]\nmy_ip = {{ vars.ctlplane_ip }}\nrack = {{ vars.rack_name }}\n");
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("nova/02-nova-host-specific.conf.j2")
            && out.stderr.contains("line 3")
            && out.stderr.contains("undefined"),
        "{}",
        out.stderr
    );
    let out = render_with(
        "[DEFAULT]\nmy_ip = {{ vars.ctlplane_ip }}\nrack = {{ vars.rack_name | default('r1') }}\n",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("rack = r1"));
}

#[test]
fn services_the_node_does_not_run_or_unknown_ones_are_refused() {
    assert_eq!(
        run(&args(&["render", "--redact", "--node", "edpm-networker-0", "--service", "nova"]), &[]).code,
        8
    );
    assert_eq!(run(&args(&["render", "--redact", "--service", "glance"]), &[]).code, 2);
}

const NEC_EXISTING: &str = "apiVersion: nova.openstack.org/v1beta1\nkind: NovaExternalCompute\nmetadata:\n  name: edpm-compute-1\n  namespace: openstack\nspec:\n  cellName: CELL\n  customServiceConfig: |\n    [DEFAULT]\n    reserved_host_memory_mb = 4096\n";

#[test]
fn derive_keeps_custom_config_renders_it_last_and_refuses_cell_moves() {
    let d = scratch_with(&NEC_EXISTING.replace("CELL", "nova-cell2"));
    let out = render_in(&d, &["derive", "novaexternalcompute", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> =
        v.as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["edpm-compute-0", "edpm-compute-1", "edpm-compute-2"], "networker has no cell");
    assert_eq!(v[1]["spec"]["cellName"], "nova-cell2");
    assert!(v[1]["spec"]["customServiceConfig"].as_str().unwrap().contains("reserved_host_memory_mb"));
    assert!(v[0]["spec"].get("customServiceConfig").is_none());
    let r = render_in(&d, &["render", "--redact", "--node", "edpm-compute-1", "--service", "nova"]);
    assert!(r.stdout.contains("99-nova-custom.conf (mode 0644, from NovaExternalCompute/edpm-compute-1 spec.customServiceConfig)"), "{}", r.stdout);

    let d = scratch_with(&NEC_EXISTING.replace("CELL", "nova-cell1"));
    let out = render_in(&d, &["derive", "novaexternalcompute"]);
    assert_eq!(out.code, 5);
    assert!(
        out.stderr.contains("cannot move a compute between cells") && out.stderr.contains("\"nova-cell1\""),
        "{}",
        out.stderr
    );
}

fn apply_setup() -> (FakeApi, std::path::PathBuf) {
    let api = FakeApi::start();
    api.add_crd("dataplane.openstack.org", "v1beta1", "openstackdataplanenodesets");
    api.add_crd("nova.openstack.org", "v1beta1", "novaexternalcomputes");
    api.put(json!({
        "apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
        "metadata": {"name": "cmp", "namespace": "openstack", "annotations": {"nova.openstack.org/cell": "nova-cell1"}},
        "spec": {"nodeTemplate": {"ansibleSSHPrivateKeySecret": "ssh"}, "nodes": {"c0": {}, "c1": {}}}
    }));
    api.put(json!({"apiVersion": "nova.openstack.org/v1beta1", "kind": "NovaExternalCompute",
        "metadata": {"name": "c1", "namespace": "openstack"},
        "spec": {"cellName": "nova-cell1", "customServiceConfig": "[DEFAULT]\nx = 1\n"}}));
    let kc = api.kubeconfig();
    (api, kc)
}

#[test]
fn apply_uses_server_side_apply_with_resource_version_and_retries_conflicts() {
    let (api, kc) = apply_setup();
    api.fault("/novaexternalcomputes/c1?", Fault::Status(409), 1);
    let out = run(
        &[
            "--source",
            "kube",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "derive",
            "novaexternalcompute",
            "--apply",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "novaexternalcompute/c0 created\nnovaexternalcompute/c1 configured\n");
    let patches: Vec<String> = api.requests().into_iter().filter(|r| r.starts_with("PATCH")).collect();
    assert!(patches.iter().all(|p| p.contains("fieldManager=edpm-agent")), "{patches:?}");
    assert_eq!(
        patches.iter().filter(|p| p.contains("/c1?")).count(),
        2,
        "409 then a re-read and a second apply"
    );
    let bodies = api.bodies("/novaexternalcomputes/c1?");
    assert!(
        bodies.iter().all(|b| b["metadata"]["resourceVersion"].is_string()),
        "precondition sent: {bodies:?}"
    );
    assert!(
        bodies.iter().all(|b| b["spec"].get("customServiceConfig").is_none()),
        "never applies customServiceConfig"
    );
    let c1 = api.object("NovaExternalCompute", "c1").unwrap();
    assert_eq!(c1["spec"]["customServiceConfig"], "[DEFAULT]\nx = 1\n", "the operator's field is kept");
    assert_eq!(c1["spec"]["inventoryConfigMapName"], "dataplanenodeset-cmp");
    assert_eq!(api.object("NovaExternalCompute", "c0").unwrap()["spec"]["cellName"], "nova-cell1");
}

#[test]
fn apply_refuses_a_live_cell_move() {
    let (api, kc) = apply_setup();
    api.put(json!({"apiVersion": "nova.openstack.org/v1beta1", "kind": "NovaExternalCompute",
        "metadata": {"name": "c0", "namespace": "openstack"}, "spec": {"cellName": "nova-cell2"}}));
    let out = run(
        &[
            "--source",
            "kube",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "derive",
            "novaexternalcompute",
            "--apply",
        ],
        &[],
    );
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("cannot move a compute between cells"), "{}", out.stderr);
    assert!(api.requests().iter().all(|r| !r.starts_with("PATCH")), "nothing applied");
}

#[test]
fn apply_needs_a_cluster() {
    let out = run(&args(&["derive", "novaexternalcompute", "--apply"]), &[]);
    assert_eq!(out.code, 2);
}

/// `render --redact` masks every value that came from a Secret wherever it shows up (the cell
/// Secret's password copied into a ConfigMap's URL, a data-source Secret's values), and the
/// password of every URL, while the hosts stay readable.
#[test]
fn redact_masks_secret_values_and_url_passwords_everywhere() {
    let secret_copy = "fake-cell1-pass";
    let extra = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nova-extra-config\n  namespace: openstack\ndata:\n  25-nova-extra.conf: |\n    [DEFAULT]\n    cpu_allocation_ratio = 8.0\n    [database]\n    connection = mysql+pymysql://nova:NotFromASecret1@openstack-db.svc/nova_cell1\n    [cache]\n    backend_argument = url:redis://:RedisPass-77@redis.svc:6379\n    memcache_servers = https://admin:fake-cell1-pass@memcached.svc:11211\n    [x]\n    copied = fake-cell1-pass\n";
    let d = scratch_with("");
    let orig =
        std::fs::read_to_string(crate::util::repo().join("examples/controlplane/configmaps.yaml")).unwrap();
    let rest = orig.split_once("---\n").unwrap().1;
    std::fs::write(d.path().join("controlplane/configmaps.yaml"), format!("{extra}---\n{rest}")).unwrap();
    for merged in [false, true] {
        let mut a = vec!["render", "--redact", "--node", "edpm-compute-0"];
        if merged {
            a.push("--merged");
        }
        let out = render_in(&d, &a);
        assert_eq!(out.code, 0, "{}", out.stderr);
        for leak in [
            secret_copy,
            "NotFromASecret1",
            "RedisPass-77",
            "fake-nova-password",
            "fake-notif-pass",
            "fake-metadata-proxy-secret",
        ] {
            assert!(!out.stdout.contains(leak), "{leak} (merged {merged}):\n{}", out.stdout);
        }
        for kept in [
            "mysql+pymysql://nova:********@openstack-db.svc/nova_cell1",
            "redis://:********@redis.svc:6379",
            "https://admin:********@memcached.svc:11211",
            "@rabbitmq-cell1.openstack.svc:5672/?ssl=0",
            "copied = ********",
        ] {
            assert!(out.stdout.contains(kept), "{kept} (merged {merged}):\n{}", out.stdout);
        }
    }
}

/// A template that carries a value from any Secret (here a variable from an ansibleVarsFrom
/// Secret, not the cell's) renders a 0600 file, and `--redact` masks the value.
#[test]
fn files_carrying_any_secrets_value_are_private() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let text = std::fs::read_to_string(crate::util::repo().join("examples/nodeset/nodesets.yaml")).unwrap();
    let text = text.replacen(
        "      ansibleVarsFrom:\n",
        "      ansibleVarsFrom:\n        - secretRef:\n            name: rack-creds\n",
        1,
    );
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: rack-creds\n  namespace: openstack\nstringData:\n  rack_token: s3cr3t-rack-token\n";
    std::fs::write(src.join("nodesets.yaml"), format!("{text}\n---\n{secret}")).unwrap();
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("neutron-metadata")).unwrap();
    std::fs::write(
        t.path().join("neutron-metadata/01-neutron-ovn-metadata-agent.conf.j2"),
        "[DEFAULT]\ndebug = true\n[rack]\ntoken = {{ vars.rack_token }}\n",
    )
    .unwrap();
    let out_dir = d.path().join("out");
    let (s, t, o) = (src.to_str().unwrap(), t.path().to_str().unwrap(), out_dir.to_str().unwrap());
    let cp = crate::util::repo().join("examples/controlplane");
    let cp = cp.to_str().unwrap();
    let base = [
        "--source",
        cp,
        "--source",
        s,
        "render",
        "--node",
        "edpm-compute-3",
        "--service",
        "neutron-metadata",
        "--templates",
        t,
    ];
    let out = run(&[&base[..], &["--redact"]].concat(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("01-neutron-ovn-metadata-agent.conf (mode 0600"), "{}", out.stdout);
    assert!(!out.stdout.contains("s3cr3t-rack-token"), "{}", out.stdout);
    let out = run(&[&base[..], &["--out", o]].concat(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let file = out_dir.join("neutron-metadata/01-neutron-ovn-metadata-agent.conf");
    assert!(std::fs::read_to_string(&file).unwrap().contains("token = s3cr3t-rack-token"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
}

/// A template whose output oslo cannot read is refused; the line quoted in the error never
/// shows a Secret's value (here the cell's service password).
#[test]
fn a_broken_generated_line_never_shows_a_secret() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("nova")).unwrap();
    std::fs::write(
        t.path().join("nova/01-nova.conf.j2"),
        "[DEFAULT]\ndebug = true\npassword {{ cell.service_password }}\n",
    )
    .unwrap();
    let dir = t.path().to_str().unwrap();
    for extra in [&["--redact"][..], &["--out", dir][..]] {
        let base = ["render", "--node", "edpm-compute-0", "--service", "nova", "--templates", dir];
        let out = run(&args(&[&base[..], extra].concat()), &[]);
        assert_eq!(out.code, 3, "{}", out.stderr);
        assert!(out.stderr.contains("01-nova.conf") && out.stderr.contains("********"), "{}", out.stderr);
        assert!(!out.stderr.contains("fake-nova-password"), "{}", out.stderr);
    }
}
