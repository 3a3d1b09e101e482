//! Manifests and outputs: files that are not regular files (links, FIFOs, devices, sockets),
//! encodings, unknown kinds, empty inventories, label selectors, duplicate keys in JSON, and
//! the words errors use.

use std::path::{Path, PathBuf};

use super::{char_device, file_kind, mkfifo, nodeset_copy, run_bounded, socket};
use crate::util::{Output, run};

/// Every output flag refuses every kind of path that is not a regular file, leaves it as it
/// was, and says what it is; `-` and `/dev/stdout` are the output stream.
#[test]
fn outputs_never_replace_links_fifos_devices_or_sockets() {
    let d = tempfile::tempdir().unwrap();
    let src = nodeset_copy(d.path());
    let src = src.to_str().unwrap();
    let conf = d.path().join("a.conf");
    std::fs::write(&conf, "[DEFAULT]\ndebug = true\n").unwrap();
    let target_file = d.path().join("keep.txt");
    std::fs::write(&target_file, "keep").unwrap();

    let mut targets: Vec<(String, PathBuf, &str)> = Vec::new();
    let t = |name: &str| d.path().join(name);
    std::os::unix::fs::symlink("/proc/self/fd/1", t("to-stdout")).unwrap();
    targets.push(("link to /proc/self/fd/1".into(), t("to-stdout"), "symbolic link"));
    std::os::unix::fs::symlink(&target_file, t("to-file")).unwrap();
    targets.push(("link to a regular file".into(), t("to-file"), "symbolic link"));
    std::os::unix::fs::symlink(d.path().join("nowhere"), t("dangling")).unwrap();
    targets.push(("dangling link".into(), t("dangling"), "symbolic link"));
    std::os::unix::fs::symlink("/dev/full", t("to-full")).unwrap();
    targets.push(("link to /dev/full".into(), t("to-full"), "symbolic link"));
    mkfifo(&t("fifo"));
    targets.push(("FIFO".into(), t("fifo"), "FIFO"));
    let _listener = socket(&t("sock"));
    targets.push(("socket".into(), t("sock"), "socket"));
    std::fs::create_dir(t("dir")).unwrap();
    targets.push(("directory".into(), t("dir"), "directory"));
    if char_device(&t("null")).is_some() {
        targets.push(("device node".into(), t("null"), "character device"));
    }

    let conf_s = conf.to_str().unwrap();
    let mut tried = 0;
    for (what, path, says) in &targets {
        let before = file_kind(path);
        let p = path.to_str().unwrap();
        let commands: [Vec<&str>; 2] = [
            vec!["--source", src, "inventory", "export", "--format", "ini", "--output", p],
            vec!["oslo", "merge", "--config-file", conf_s, "-o", p],
        ];
        for args in commands {
            let out = run_bounded(&args);
            tried += 1;
            assert_eq!(out.code, 1, "{what} {args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains(says) && out.stderr.contains("not a regular file"),
                "{what}: {}",
                out.stderr
            );
            assert!(out.stderr.contains("nothing was written"), "{what}: {}", out.stderr);
            assert_eq!(out.stdout, "", "{what}: nothing reached stdout through the link");
            assert_eq!(file_kind(path), before, "{what} was replaced");
        }
    }
    assert_eq!(std::fs::read_to_string(&target_file).unwrap(), "keep", "a link's target is untouched");
    assert!(tried >= 14);

    // A regular file is replaced; `-` and /dev/stdout stream.
    let regular = d.path().join("out.ini");
    std::fs::write(&regular, "old").unwrap();
    let out = run(
        &["--source", src, "inventory", "export", "--format", "ini", "--output", regular.to_str().unwrap()],
        &[],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert!(std::fs::read_to_string(&regular).unwrap().contains("[edpm-compute-cell1]"));
    for stream in ["-", "/dev/stdout"] {
        let out = run(&["--source", src, "inventory", "export", "--format", "ini", "--output", stream], &[]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{stream}");
        assert!(out.stdout.contains("[edpm-compute-cell1]"), "{stream}");
        let out = run(&["oslo", "merge", "--config-file", conf_s, "-o", stream], &[]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{stream}");
        assert!(out.stdout.contains("debug = true"), "{stream}: {}", out.stdout);
    }
}

/// What to put in a source directory, what the error says, and the exit code.
type SourceCase = (&'static str, Box<dyn Fn(&Path)>, &'static str, i32);

/// The directory source reads regular files only (after following links), never blocks on a
/// FIFO, never reads a device, and names the file and the fix.
#[test]
fn sources_read_only_regular_files_and_never_hang() {
    let d = tempfile::tempdir().unwrap();
    let mut cases: Vec<SourceCase> = vec![
        ("FIFO named pipe.yaml", Box::new(|s: &Path| mkfifo(&s.join("pipe.yaml"))), "FIFO", 6),
        (
            "link to /dev/zero",
            Box::new(|s: &Path| std::os::unix::fs::symlink("/dev/zero", s.join("zero.yaml")).unwrap()),
            "character device",
            6,
        ),
        (
            "link to /dev/urandom",
            Box::new(|s: &Path| std::os::unix::fs::symlink("/dev/urandom", s.join("r.json")).unwrap()),
            "character device",
            6,
        ),
        (
            "link to a FIFO elsewhere",
            Box::new(|s: &Path| {
                let f = s.parent().unwrap().join("elsewhere.fifo");
                mkfifo(&f);
                std::os::unix::fs::symlink(&f, s.join("l.yml")).unwrap();
            }),
            "FIFO",
            6,
        ),
        (
            "socket named s.yaml",
            Box::new(|s: &Path| std::mem::forget(socket(&s.join("s.yaml")))),
            "socket",
            6,
        ),
        (
            "dangling link",
            Box::new(|s: &Path| std::os::unix::fs::symlink(s.join("gone"), s.join("gone.yaml")).unwrap()),
            "gone.yaml",
            6,
        ),
        (
            "sparse 300 MiB file",
            Box::new(|s: &Path| {
                std::fs::File::create(s.join("big.yaml")).unwrap().set_len(300 << 20).unwrap()
            }),
            "256 MiB cap",
            3,
        ),
    ];
    let device_dir = d.path().join("device-case");
    std::fs::create_dir(&device_dir).unwrap();
    if char_device(&device_dir.join("probe")).is_some() {
        cases.push((
            "device node",
            Box::new(|s: &Path| {
                let _ = char_device(&s.join("dev.yaml"));
            }),
            "character device",
            6,
        ));
    }
    for (i, (what, make, says, code)) in cases.iter().enumerate() {
        let case = d.path().join(format!("case{i}"));
        let src = nodeset_copy(&case);
        make(&src);
        for args in [
            vec!["--source", src.to_str().unwrap(), "inventory", "--list"],
            vec!["--source", src.to_str().unwrap(), "validate"],
        ] {
            let out = run_bounded(&args);
            assert_eq!(out.code, *code, "{what} {args:?}: {}", out.stderr);
            assert_eq!(out.stdout, "", "{what}");
            assert!(out.stderr.contains(says), "{what}: {}", out.stderr);
            assert_eq!(out.stderr.lines().count(), 1, "{what}: one line: {}", out.stderr);
        }
    }
    // Named outright as the source.
    let fifo = d.path().join("source.fifo");
    mkfifo(&fifo);
    let out = run_bounded(&["--source", fifo.to_str().unwrap(), "inventory", "--list"]);
    assert_eq!(out.code, 6, "{}", out.stderr);
    assert!(out.stderr.contains("FIFO"), "{}", out.stderr);
    let out = run_bounded(&["--source", "/dev/zero", "inventory", "--list"]);
    assert_eq!(out.code, 6, "{}", out.stderr);
    assert!(out.stderr.contains("character device"), "{}", out.stderr);
}

/// Text that is not UTF-8 names the encoding it seems to be in and where the first bad byte is.
#[test]
fn encodings_other_than_utf8_are_named_with_line_and_byte() {
    let d = tempfile::tempdir().unwrap();
    let node = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: n\n";
    let utf16: Vec<u8> =
        [0xFF, 0xFE].into_iter().chain(node.encode_utf16().flat_map(|u| u.to_le_bytes())).collect();
    let latin1_place = format!("line 5, byte {}", node.len() + "  # caf".len());
    let cases: [(&str, Vec<u8>, &str, &str); 4] = [
        ("latin-1", [node.as_bytes(), b"  # caf\xe9\n"].concat(), "Latin-1", &latin1_place),
        ("utf-16", utf16, "UTF-16 (it starts with a UTF-16 byte-order mark)", "line 1, byte 0"),
        ("nul bytes", [node.as_bytes(), b"\0\0\xff"].concat(), "NUL bytes", "line 5"),
        (
            "windows-1252 quote",
            [b"a: \x93quoted\x94\n".as_slice()].concat(),
            "Windows-1252",
            "line 1, byte 3",
        ),
    ];
    for (what, bytes, encoding, place) in cases {
        let src = d.path().join(what);
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("m.yaml"), &bytes).unwrap();
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
        assert_eq!(out.code, 3, "{what}: {}", out.stderr);
        assert!(out.stderr.contains(encoding) && out.stderr.contains(place), "{what}: {}", out.stderr);
        assert!(out.stderr.contains("convert the file to UTF-8"), "{what}: {}", out.stderr);
        assert!(!out.stderr.contains("exists and is readable"), "{what}: {}", out.stderr);
        // oslo files too.
        let out = run(&["oslo", "parse", src.join("m.yaml").to_str().unwrap()], &[]);
        assert_ne!(out.code, 0, "{what}");
        assert!(out.stderr.contains(encoding), "{what}: {}", out.stderr);
    }
}

const ROLE: &str = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneRole\nmetadata:\n  name: compute\nspec: {}\n";

fn node(name: &str, labels: &str) -> String {
    format!(
        "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNode\nmetadata:\n  name: {name}\n  labels: {labels}\nspec:\n  role: compute\n  hostName: {name}\n"
    )
}

fn write_source(dir: &Path, text: &str) -> PathBuf {
    let src = dir.join(format!("src{}", std::fs::read_dir(dir).unwrap().count()));
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("m.yaml"), text).unwrap();
    src
}

fn hosts(out: &Output) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    let mut h: Vec<String> = v["_meta"]["hostvars"].as_object().unwrap().keys().cloned().collect();
    h.sort();
    h
}

/// A kind a typo away from one we read is an error naming it; another unknown kind in our
/// groups is warned about (and listed by validate); kinds the operators define but we do not
/// read, and other groups, stay silent.
#[test]
fn unknown_kinds_in_our_groups_are_never_dropped_silently() {
    let d = tempfile::tempdir().unwrap();
    let base = format!("{ROLE}---\n{}", node("n1", "{}"));
    let typos = [
        ("dataplane.openstack.org/v1beta1", "OpenStackDataPlaneNodee", "OpenStackDataPlaneNode"),
        ("dataplane.openstack.org/v1beta1", "OpenStackDataPlaneNodeSets", "OpenStackDataPlaneNodeSet"),
        ("dataplane.openstack.org/v1beta1", "openstackdataplanenodeset", "OpenStackDataPlaneNodeSet"),
        ("dataplane.openstack.org/v1beta1", "OpenStackDataPlaneRol", "OpenStackDataPlaneRole"),
        ("dataplane.openstack.org/v1beta1", "OpenstackDataPlaneService", "OpenStackDataPlaneService"),
        ("network.openstack.org/v1beta1", "IPSets", "IPSet"),
        ("network.openstack.org/v1beta1", "NetConfg", "NetConfig"),
        ("network.openstack.org/v1beta1", "DNSMasqs", "DNSMasq"),
        ("baremetal.openstack.org/v1beta1", "OpenStackBaremetalSets", "OpenStackBaremetalSet"),
    ];
    for (api, kind, meant) in typos {
        let src = write_source(
            d.path(),
            &format!("{base}---\napiVersion: {api}\nkind: {kind}\nmetadata:\n  name: x\n"),
        );
        for cmd in ["inventory", "validate"] {
            let args = if cmd == "inventory" { vec!["inventory", "--list"] } else { vec!["validate"] };
            let out = run(&[&["--source", src.to_str().unwrap()], &args[..]].concat(), &[]);
            assert_eq!(out.code, 3, "{kind}: {}", out.stderr);
            assert!(
                out.stderr.contains(&format!("did you mean {meant}?")) && out.stderr.contains("m.yaml:"),
                "{kind}: {}",
                out.stderr
            );
        }
    }
    let unknown = [
        ("dataplane.openstack.org/v1beta1", "OpenStackDataPlaneWidget"),
        ("network.openstack.org/v1beta1", "FloatingRange"),
        ("agent.edpm.openstack.org/v1beta1", "SomethingElse"),
    ];
    for (api, kind) in unknown {
        let src = write_source(
            d.path(),
            &format!("{base}---\napiVersion: {api}\nkind: {kind}\nmetadata:\n  name: w\n"),
        );
        // As Ansible's inventory script, stderr stays empty: the warning is in the log.
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{kind}");
        assert_eq!(hosts(&out), ["n1"]);
        let out = run(&["--source", src.to_str().unwrap(), "-v", "inventory", "--list"], &[]);
        assert!(out.stderr.contains(kind), "{kind}: logged with -v: {}", out.stderr);
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "export", "--format", "json"], &[]);
        assert_eq!(out.code, 0, "{kind}: {}", out.stderr);
        assert!(
            out.stderr.starts_with("edpm-agent: warning: ") && out.stderr.contains(kind),
            "{kind}: {}",
            out.stderr
        );
        let out = run(&["--source", src.to_str().unwrap(), "validate"], &[]);
        assert_eq!(out.code, 0, "{kind}: warnings do not fail validate: {}", out.stderr);
        assert!(out.stdout.contains(&format!("warning: {kind}/w")), "{kind}: {}", out.stdout);
        assert_eq!(out.stderr, "", "validate lists it instead of warning");
    }
    let silent = [
        ("network.openstack.org/v1beta1", "Reservation"),
        ("network.openstack.org/v1beta1", "DNSData"),
        ("baremetal.openstack.org/v1beta1", "OpenStackProvisionServer"),
        ("network.openstack.org/v1beta1", "OpenStackNet"),
        ("network.openstack.org/v1beta1", "OpenStackIPSet"),
        ("example.com/v1", "OpenStackDataPlaneNodee"),
        ("apps/v1", "Deployment"),
    ];
    for (api, kind) in silent {
        let src = write_source(
            d.path(),
            &format!("{base}---\napiVersion: {api}\nkind: {kind}\nmetadata:\n  name: w\n"),
        );
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{api} {kind}");
    }
}

#[test]
fn unknown_kinds_in_other_namespaces_are_not_read_and_not_judged() {
    let d = tempfile::tempdir().unwrap();
    let base = format!("{ROLE}---\n{}", node("n1", "{}"));
    for kind in ["OpenStackDataPlaneNodee", "OpenStackDataPlaneWidget"] {
        let src = write_source(
            d.path(),
            &format!(
                "{base}---\napiVersion: dataplane.openstack.org/v1beta1\nkind: {kind}\nmetadata:\n  name: w\n  namespace: other\n"
            ),
        );
        let out = run(
            &[
                "--source",
                src.to_str().unwrap(),
                "-n",
                "openstack",
                "inventory",
                "export",
                "--format",
                "json",
            ],
            &[],
        );
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{kind}");
    }
}

/// Sources that hold no host are an error that names what was searched, for every way of
/// holding nothing; `--allow-empty` (and its variable and setting) makes it a success.
#[test]
fn empty_inventories_are_an_error_unless_allowed() {
    let d = tempfile::tempdir().unwrap();
    let controlplane = "apiVersion: core.openstack.org/v1beta1\nkind: OpenStackControlPlane\nmetadata:\n  name: cp\nspec: {}\n";
    let nodeset_without_nodes = "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: empty\nspec:\n  nodes: {}\n";
    let namespaced = format!("{ROLE}---\n{}", node("n1", "{}"))
        .replace("  name: n1\n", "  name: n1\n  namespace: openstack\n")
        .replace("  name: compute\n", "  name: compute\n  namespace: openstack\n");
    let cases: Vec<(&str, String, Vec<&str>, &str)> = vec![
        ("only a control plane", controlplane.to_string(), vec![], "1 object(s) of other kinds"),
        ("an empty file", String::new(), vec![], "found 0 NodeSet(s)"),
        ("only comments", "# nothing here\n---\n# nor here\n".into(), vec![], "found 0 NodeSet(s)"),
        ("the wrong namespace", namespaced, vec!["--namespace", "elsewhere"], "namespace elsewhere only"),
        (
            "a selector matching nothing",
            format!("{ROLE}---\n{}", node("n1", "{app: a}")),
            vec!["-l", "app=b"],
            "2 data-plane object(s) the selector left out",
        ),
    ];
    for (what, text, extra, says) in &cases {
        let src = write_source(d.path(), text);
        let src = src.to_str().unwrap();
        let commands = [
            vec!["inventory", "--list"],
            vec!["inventory", "--host", "x"],
            vec!["inventory", "export", "--format", "ini"],
            vec!["validate"],
            vec!["status", "show"],
        ];
        for cmd in commands {
            let args = [&["--source", src][..], &extra[..], &cmd[..]].concat();
            let out = run(&args, &[]);
            assert_eq!(out.code, 13, "{what} {cmd:?}: {}", out.stderr);
            assert!(
                out.stderr.contains("no hosts") && out.stderr.contains(&format!("directory {src}")),
                "{what}: {}",
                out.stderr
            );
            assert!(out.stderr.contains(says), "{what}: {}", out.stderr);
            assert!(out.stderr.contains("--allow-empty"), "{what}: {}", out.stderr);
        }
        let args =
            [&["--source", src][..], &extra[..], &["--allow-empty", "inventory", "--list"][..]].concat();
        let out = run(&args, &[]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{what}");
        assert!(hosts(&out).is_empty());
        let args = [&["--source", src][..], &extra[..], &["inventory", "--list"][..]].concat();
        let out = run(&args, &[("EDPM_AGENT_ALLOW_EMPTY", "1")]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{what}: EDPM_AGENT_ALLOW_EMPTY");
    }
    // A NodeSet without nodes, or a Role alone, is a data-plane object upstream deploys (its
    // kuttl tests do): an inventory of its group and no hosts, not an error.
    for text in [nodeset_without_nodes, ROLE] {
        let src = write_source(d.path(), text);
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{text}");
        assert!(hosts(&out).is_empty());
    }
    let config = d.path().join("settings.yaml");
    std::fs::write(&config, "allow_empty: true\n").unwrap();
    let src = write_source(d.path(), "# nothing\n");
    let out = run(
        &["--source", src.to_str().unwrap(), "inventory", "--list"],
        &[("EDPM_AGENT_CONFIG", config.to_str().unwrap())],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "allow_empty: true in the settings file");
    let out = run(
        &["--source", src.to_str().unwrap(), "inventory", "--list"],
        &[("EDPM_AGENT_ALLOW_EMPTY", "maybe")],
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
}

/// The label selector filters directory sources as the API server filters a list, and a
/// selector the API server would refuse is refused, naming where it came from.
fn nodeset(name: &str, labels: &str) -> String {
    format!(
        "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: {name}\n  labels: {labels}\nspec:\n  nodes:\n    {name}-0:\n      hostName: {name}-0\n"
    )
}

#[test]
fn label_selectors_apply_to_directories_and_malformed_ones_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let text = [
        nodeset("a1", "{app: edpm, tier: compute}"),
        nodeset("a2", "{app: edpm, tier: networker}"),
        nodeset("b1", "{app: other}"),
        nodeset("c1", "{}"),
    ]
    .join("---\n");
    let src = write_source(d.path(), &text);
    let src = src.to_str().unwrap();
    let cases: [(&str, &[&str]); 11] = [
        ("", &["a1-0", "a2-0", "b1-0", "c1-0"]),
        ("app=edpm", &["a1-0", "a2-0"]),
        ("app==edpm", &["a1-0", "a2-0"]),
        ("app!=edpm", &["b1-0", "c1-0"]),
        ("tier in (compute, networker)", &["a1-0", "a2-0"]),
        ("tier notin (compute)", &["a2-0", "b1-0", "c1-0"]),
        ("tier", &["a1-0", "a2-0"]),
        ("!tier", &["b1-0", "c1-0"]),
        ("app=edpm,tier=compute", &["a1-0"]),
        ("app", &["a1-0", "a2-0", "b1-0"]),
        ("app=nothing", &[]),
    ];
    for (sel, want) in cases {
        let out = run(&["--source", src, "-l", sel, "--allow-empty", "inventory", "--list"], &[]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{sel}");
        assert_eq!(hosts(&out), want, "{sel}");
    }
    // Nodes kept whose Role the selector left out are named as such, as with the cluster.
    let src2 = write_source(d.path(), &format!("{ROLE}---\n{}", node("n1", "{app: edpm}")));
    let out = run(&["--source", src2.to_str().unwrap(), "-l", "app=edpm", "inventory", "--list"], &[]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(out.stderr.contains("Role \"compute\", which does not exist"), "{}", out.stderr);
    for (bad, origin) in [
        ("app in (a", "--selector"),
        ("app=edpm,", "--selector"),
        ("app=has space", "--selector"),
        ("-app=x", "--selector"),
        ("app gt 3", "--selector"),
    ] {
        let out = run(&["--source", src, &format!("--selector={bad}"), "inventory", "--list"], &[]);
        assert_eq!(out.code, 3, "{bad}: {}", out.stderr);
        assert!(
            out.stderr.contains(origin) && out.stderr.contains("label selector"),
            "{bad}: {}",
            out.stderr
        );
        assert_eq!(out.stdout, "");
        let out = run(&["--source", src, "inventory", "--list"], &[("EDPM_AGENT_SELECTOR", bad)]);
        assert_eq!(out.code, 3, "{bad}");
        assert!(out.stderr.contains("EDPM_AGENT_SELECTOR"), "{bad}: {}", out.stderr);
    }
}

/// JSON manifests refuse a key written twice, as YAML manifests do, at every depth.
#[test]
fn duplicate_keys_in_json_are_refused_like_yaml() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        r#"{"apiVersion": "v1", "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}"#,
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "name": "d"}}"#,
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1", "k": "2"}}"#,
        r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1", "k": "2"}}]}"#,
    ];
    for (i, text) in cases.iter().enumerate() {
        let src = d.path().join(format!("j{i}"));
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("m.json"), text).unwrap();
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
        assert_eq!(out.code, 3, "{text}: {}", out.stderr);
        assert!(
            out.stderr.contains("appears twice") && out.stderr.contains("m.json:1:"),
            "{text}: {}",
            out.stderr
        );
    }
}

/// Errors speak our words: no library type names, the right exit code for a missing field,
/// an empty EDPM_AGENT_CONFIG is unset.
#[test]
fn errors_name_the_fix_in_our_words() {
    let d = tempfile::tempdir().unwrap();
    let internals = ["OneOrMany", "untagged", "DuplicateKeyPolicy", "budget breached", "Depth {", "Options"];
    let check = |what: &str, out: &Output, code: i32| {
        assert_eq!(out.code, code, "{what}: {}", out.stderr);
        for word in internals {
            assert!(!out.stderr.contains(word), "{what}: {}", out.stderr);
        }
        assert_eq!(out.stderr.lines().count(), 1, "{what}: {}", out.stderr);
    };
    // Settings files.
    let src = nodeset_copy(d.path());
    for (i, (text, says)) in [
        ("source: {a: 1}\n", "expected a directory or `kube`"),
        ("source: [1, {a: b}]\n", "expected a directory or `kube`"),
        ("source: x\nsource: y\n", "appears twice"),
        (&*format!("images: {}1{}\n", "[".repeat(200), "]".repeat(200)), "deeper"),
    ]
    .iter()
    .enumerate()
    {
        let f = d.path().join(format!("settings{i}.yaml"));
        std::fs::write(&f, text).unwrap();
        let out = run(
            &["inventory", "--list"],
            &[("EDPM_AGENT_CONFIG", f.to_str().unwrap()), ("EDPM_AGENT_SOURCE", src.to_str().unwrap())],
        );
        check(text, &out, 3);
        assert!(
            out.stderr.contains(says) && out.stderr.contains(&format!("settings{i}.yaml:")),
            "{text}: {}",
            out.stderr
        );
    }
    // The node agent's config file.
    for (i, text) in [
        "namespace: a\nnamespace: b\n",
        &format!("namespace: {}1{}\n", "[".repeat(200), "]".repeat(200)),
        "node: [1\n",
    ]
    .iter()
    .enumerate()
    {
        let f = d.path().join(format!("node{i}.yaml"));
        std::fs::write(&f, text).unwrap();
        let out = run(&["node", "--once", "--config", f.to_str().unwrap()], &[]);
        check(text, &out, 3);
        assert!(out.stderr.contains(&format!("node{i}.yaml:")), "{text}: {}", out.stderr);
    }
    // A Node without spec.role is malformed input (3), not a missing reference (4).
    for spec in ["spec:\n  hostName: n1\n", "spec:\n  role: \"\"\n", "spec: {}\n"] {
        let text = format!(
            "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNode\nmetadata:\n  name: n1\n{spec}"
        );
        let src = write_source(d.path(), &text);
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
        check(spec, &out, 3);
        assert!(out.stderr.contains("spec.role"), "{spec}: {}", out.stderr);
    }
    // A Secret's value that does not decode is named by field and line, never shown.
    for (field, value) in
        [("stringData", "12345678901234"), ("data", "abc!defghijk"), ("stringData", "[s3cr3t-in-a-list]")]
    {
        let text =
            format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n{field}:\n  password: {value}\n");
        let src = write_source(d.path(), &text);
        let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[]);
        check(&text, &out, 3);
        let shown = value.trim_matches(['[', ']']);
        assert!(!out.stderr.contains(shown) && !out.stderr.contains("symbol"), "{text}: {}", out.stderr);
        assert!(out.stderr.contains(&format!("{field}.password (line 6)")), "{text}: {}", out.stderr);
    }
    // An empty EDPM_AGENT_CONFIG is unset: the inventory-script contract holds.
    let out = run(&["--source", src.to_str().unwrap(), "inventory", "--list"], &[("EDPM_AGENT_CONFIG", "")]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
}

/// A FIFO, a device or a link where a staged or rendered file was is refused or reported as
/// different, never read: `stage`, `mounts plan`, `render --out` and `render --check` used to
/// block on a FIFO there and read a device without end.
#[test]
fn files_replaced_by_fifos_or_devices_on_the_node_never_hang_the_tools() {
    let d = tempfile::tempdir().unwrap();
    crate::util::example_copy(d.path());
    let src = d.path().to_str().unwrap();
    let root = tempfile::tempdir().unwrap();
    let r = root.path().to_str().unwrap();
    let stage = ["--source", src, "stage", "--node", "edpm-compute-0", "--root", r];
    let plan = ["--source", src, "mounts", "plan", "--node", "edpm-compute-0", "--root", r];
    assert_eq!(run_bounded(&stage).code, 0);
    let staged = root.path().join("var/lib/openstack/configs/nova/25-nova-extra.conf");
    assert!(staged.is_file(), "the example stages {}", staged.display());
    let out_dir = root.path().join("rendered");
    let o = out_dir.to_str().unwrap();
    let render = ["--source", src, "render", "--node", "edpm-compute-0", "--service", "nova", "--out", o];
    assert_eq!(run_bounded(&render).code, 0);
    let rendered = out_dir.join("nova/01-nova.conf");
    assert!(rendered.is_file());
    let check = [&render[..], &["--check"]].concat();

    type Make = fn(&Path);
    let makers: [(&str, Make); 3] = [
        ("FIFO", |p: &Path| mkfifo(p)),
        ("symbolic link", |p: &Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
        ("socket", |p: &Path| std::mem::forget(socket(p))),
    ];
    for (what, make) in makers {
        for path in [&staged, &rendered] {
            std::fs::remove_file(path).unwrap();
            make(path);
        }
        for args in [&stage[..], &plan[..], &render[..]] {
            let out = run_bounded(args);
            assert_ne!(out.code, 0, "{what} {args:?}");
            assert!(out.stderr.contains(what), "{what} {args:?}: {}", out.stderr);
        }
        let out = run_bounded(&check);
        assert_eq!(out.code, 10, "{what}: {}", out.stderr);
        assert!(out.stdout.contains("differs:") && out.stdout.contains(what), "{what}: {}", out.stdout);
        for path in [&staged, &rendered] {
            std::fs::remove_file(path).unwrap();
        }
        // Put the files back for the next kind.
        assert_eq!(run_bounded(&stage).code, 0);
        assert_eq!(run_bounded(&render).code, 0);
    }
}
