//! `edpm-agent run`: the job's inputs (environment, extra vars, job events), its summary and termination message, and the secrets they must never show.
//!
//! With real ansible-runner (the venv `.ci/run` makes) where a play has to run; with job
//! events written here where `--summarize-only` reads what a run left.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::mkfifo;
use crate::runner::{Job, host_statuses, pairs};
use crate::util::{Output, bin};

/// `edpm-agent ARGS` in the job's environment, killed (and the test failed) after 120 s: a
/// hang must fail the test, not the CI job. `run` blocks SIGTERM, so the kill is SIGKILL.
fn bounded(job: &Job, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(crate::util::repo())
        .env_clear()
        .envs(job.env())
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read on threads, so a chatty child never blocks on a full pipe while it is waited for.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut s).ok();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut s).ok();
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("edpm-agent {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err.join().unwrap()).into_owned(),
    }
}

/// `edpm-agent run [flags] -- ansible-runner run DIR -p PLAYBOOK -i IDENT`, bounded.
fn run_job(job: &Job, flags: &[&str], playbook: &str, ident: &str, env: &[(&str, &str)]) -> Output {
    let dir = job.dir().display().to_string();
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend(["--", "ansible-runner", "run", &dir, "-p", playbook, "-i", ident]);
    bounded(job, &args, env)
}

/// `run --summarize-only` over the artifacts of `ident`, bounded.
fn summarize(job: &Job, ident: &str, env: &[(&str, &str)]) -> Output {
    let dir = job.dir().display().to_string();
    bounded(
        job,
        &["run", "--summarize-only", "--", "ansible-runner", "run", &dir, "-p", "x.yml", "-i", ident],
        env,
    )
}

/// Our own lines in the job's log (Ansible's output, streamed as it comes, is Ansible's).
fn our_lines(out: &Output) -> String {
    out.stdout.lines().filter(|l| l.starts_with("edpm-agent:")).collect::<Vec<_>>().join("\n")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes job events for `--summarize-only`: one file per event, in counter order.
fn write_events(job: &Job, ident: &str, events: &[Value]) {
    let dir = job.dir().join("artifacts").join(ident).join("job_events");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, e) in events.iter().enumerate() {
        let mut e = e.clone();
        e["counter"] = json!(i + 1);
        std::fs::write(dir.join(format!("{}-{:08x}.json", i + 1, i + 1)), e.to_string()).unwrap();
    }
}

fn failed_event(host: &str, task: &str, msg: &str) -> Value {
    json!({"event": "runner_on_failed", "event_data": {"host": host, "task": task, "task_uuid": "t1",
           "play": "p", "resolved_action": "ansible.builtin.fail", "task_path": "/runner/project/site.yml:4",
           "res": {"msg": msg, "failed": true}}})
}

fn stats_event(failed: &[&str], ok: &[&str]) -> Value {
    let all: serde_json::Map<String, Value> =
        failed.iter().chain(ok).map(|h| (h.to_string(), json!(1))).collect();
    let failures: serde_json::Map<String, Value> = failed.iter().map(|h| (h.to_string(), json!(1))).collect();
    json!({"event": "playbook_on_stats", "event_data": {"processed": all, "ok": {}, "failures": failures, "dark": {}}})
}

/// The secrets of [`secrets_in_every_form_never_reach_the_summary_the_termination_message_or_the_log`]:
/// none known to edpm-agent but by the key before it (each host's message shows one form),
/// and two extra vars whose values are masked wherever they appear.
const LEAKS: &[(&str, &str, &str)] = &[
    // (host, the message it fails with, the secret in it)
    ("yaml-next-line", "config:\\n  password:\\n    LeakNextLine1\\n  user: nova", "LeakNextLine1"),
    ("yaml-tab", "password:\\tLeakTab2", "LeakTab2"),
    ("json-newline", "{\\\"password\\\":\\n \\\"LeakJson3\\\"}", "LeakJson3"),
    ("option", "openstack --os-cloud edpm --password LeakOption4 server list", "LeakOption4"),
    ("environment", "export OS_PASSWORD LeakEnv5", "LeakEnv5"),
    ("token", "keystone said: token LeakToken6", "LeakToken6"),
    ("bearer", "curl -H 'Authorization: Bearer LeakBearer7' https://keystone", "LeakBearer7"),
    ("pass", "rabbitmqctl add_user nova pass=LeakPass8", "LeakPass8"),
    // The secret extra var as JSON, shell and Python quote it.
    ("json-escaped", "{{ {'cfg': db_password} | to_json }}", "Pw9"),
    ("shell-quoted", "mysql -p{{ db_password | quote }}", "Pw9"),
    ("python-repr", "{{ [db_password] }}", "Pw9"),
];

/// The secret-named extra vars: one with quotes and a backslash, one of three characters.
const SECRET_EXTRA_VARS: &str = "\ndb_password: \"Qu'ot\\\"e\\\\dPw9\"\nshort_password: Zq7\n\n";

/// Every string in a JSON value.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out)
        }),
        _ => {}
    }
}

/// Checks that no secret of [`LEAKS`] or [`SECRET_EXTRA_VARS`] is in `text` (`what` names it).
fn assert_no_leak(what: &str, text: &str) {
    for (host, _, secret) in LEAKS {
        assert!(!text.contains(secret), "{what} shows {host}'s secret {secret}:\n{text}");
    }
    for piece in ["Qu'ot", "dPw9", "Zq7"] {
        assert!(!text.contains(piece), "{what} shows an extra var's value ({piece}):\n{text}");
    }
}

#[test]
fn secrets_in_every_form_never_reach_the_summary_the_termination_message_or_the_log() {
    let hosts: Vec<&str> = LEAKS.iter().map(|(h, _, _)| *h).collect();
    let job = Job::new(&hosts, &[]);
    let mut msgs = String::new();
    for (host, msg, _) in LEAKS {
        msgs.push_str(&format!("          {host}: \"{msg}\"\n"));
    }
    // The extra vars' values are substituted into the task's name, which every host reports.
    job.write(
        "project/site.yml",
        &format!(
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: \"deploy {{{{ db_password }}}} as {{{{ short_password }}}}\"\n      ansible.builtin.fail:\n        msg: \"{{{{ msgs[inventory_hostname] }}}}\"\n      vars:\n        msgs:\n{msgs}"
        ),
    );
    let out = run_job(&job, &[], "site.yml", "leaks", &[("RUNNER_EXTRA_VARS", SECRET_EXTRA_VARS)]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("leaks");
    let statuses = host_statuses(&s);
    assert!(statuses.iter().all(|(_, st)| st == "failed"), "{statuses:?}");
    assert_eq!(statuses.len(), LEAKS.len());
    // The task's name is still there, masked.
    assert_eq!(s["hosts"]["token"]["failedTask"]["task"], "deploy ******** as ********");
    assert_eq!(s["hosts"]["token"]["failedTask"]["message"], "keystone said: token ********");
    let mut all = Vec::new();
    strings(&s, &mut all);
    assert_no_leak("edpm-summary.json", &all.join("\n"));
    assert_no_leak("edpm-summary.json's text", &read(&job.dir().join("artifacts/leaks/edpm-summary.json")));
    let (termination, _) = job.termination();
    let mut all = Vec::new();
    strings(&termination, &mut all);
    assert_no_leak("the termination message", &all.join("\n"));
    assert_no_leak("the job log's own lines", &our_lines(&out));
    assert!(our_lines(&out).contains("edpm-agent: token: failed at task"), "{}", out.stdout);
}

#[test]
fn summarize_only_masks_the_extra_vars_as_run_does() {
    let job = Job::new(&[], &[]);
    write_events(
        &job,
        "summ",
        &[
            failed_event("h1", "log in as Kx9-Secret-Value", "login refused for Kx9-Secret-Value and Zq7"),
            stats_event(&["h1"], &[]),
        ],
    );
    job.write("artifacts/summ/rc", "2");
    job.write("artifacts/summ/status", "failed");
    let extra = "\nregistry_password: Kx9-Secret-Value\nshort_password: Zq7\n\n";
    let out = summarize(&job, "summ", &[("RUNNER_EXTRA_VARS", extra)]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("summ");
    assert_eq!(s["hosts"]["h1"]["failedTask"]["message"], "login refused for ******** and ********");
    assert_eq!(s["hosts"]["h1"]["failedTask"]["task"], "log in as ********");
    let text = read(&job.dir().join("artifacts/summ/edpm-summary.json")) + &our_lines(&out);
    assert!(!text.contains("Kx9") && !text.contains("Zq7"), "{text}");
}

#[test]
fn a_fifo_or_a_device_among_the_job_events_is_refused_never_waited_on() {
    for flags in [&["--summarize-only"][..], &["--retry-failed"][..]] {
        let job = Job::new(&["local-0"], &[]);
        job.write(
            "project/site.yml",
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n",
        );
        write_events(&job, "fifo-events", &[json!({}), json!({}), stats_event(&[], &["local-0"])]);
        let events = job.dir().join("artifacts/fifo-events/job_events");
        std::fs::remove_file(events.join("1-00000001.json")).unwrap();
        mkfifo(&events.join("1-00000001.json"));
        std::fs::remove_file(events.join("2-00000002.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", events.join("2-00000002.json")).unwrap();
        let started = Instant::now();
        let out = run_job(&job, flags, "site.yml", "fifo-events", &[]);
        assert!(started.elapsed() < Duration::from_secs(100), "{flags:?} took {:?}", started.elapsed());
        assert_eq!(out.code, 0, "{flags:?}: {}\n{}", out.stdout, out.stderr);
        let s = job.summary("fifo-events");
        assert_eq!(host_statuses(&s), pairs(&[("local-0", "ok")]), "{flags:?}: {s}");
        if flags == ["--summarize-only"] {
            assert_eq!(s["unreadableEvents"], 2, "{s}");
        } else {
            // The retry read the events the previous pod left, two of them unreadable, then ran.
            assert_eq!(s["attempt"], 2, "{s}");
        }
    }
}

#[test]
fn timeouts_and_grace_periods_past_what_a_clock_holds_never_panic() {
    let job = Job::new(&["local-0"], &[]);
    job.write(
        "project/site.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n",
    );
    let huge =
        [("RUNNER_JOB_TIMEOUT", "9223372036854775807"), ("RUNNER_IDLE_TIMEOUT", "18446744073709551615")];
    let out = run_job(&job, &["--grace-period", "18446744073709551615"], "site.yml", "huge", &huge);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(job.summary("huge")["status"], "successful");

    // A job timeout that fires, with a grace period no clock can add.
    job.write(
        "project/slow.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.command: sleep 64.75\n",
    );
    let out = run_job(
        &job,
        &["--grace-period", "18446744073709551615"],
        "slow.yml",
        "huge-grace",
        &[("RUNNER_JOB_TIMEOUT", "4")],
    );
    assert_eq!(out.code, 254, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("huge-grace");
    assert_eq!((s["status"].as_str(), s["timeout"].as_str()), (Some("timeout"), Some("job")), "{s}");
}

#[test]
fn a_bad_timeout_without_a_command_still_writes_an_invalid_summary() {
    for value in ["abc", "10m", "-5"] {
        let job = Job::new(&["local-0"], &[]);
        job.write("project/playbook.yaml", "- hosts: all\n  gather_facts: false\n  tasks: []\n");
        let dir = job.dir().display().to_string();
        let out = bounded(&job, &["run", "--runner-dir", &dir], &[("RUNNER_JOB_TIMEOUT", value)]);
        assert_eq!(out.code, 3, "{value}: {}\n{}", out.stdout, out.stderr);
        assert!(out.stderr.contains("RUNNER_JOB_TIMEOUT"), "{value}: {}", out.stderr);
        let s = job.summary("edpm-agent");
        assert_eq!(s["status"], "invalid", "{value}: {s}");
        assert!(s["reason"].as_str().unwrap().starts_with("RUNNER_JOB_TIMEOUT: "), "{value}: {s}");
        assert!(!job.dir().join("artifacts/edpm-agent/job_events").exists(), "{value}: the play ran");
    }
}

#[test]
fn retry_failed_with_a_relative_runner_dir_runs_the_failed_hosts() {
    let job = Job::new(&["a", "b"], &[]);
    job.write(
        "project/playbook.yaml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.command: \"test -e {{ playbook_dir }}/../fixed\"\n      when: inventory_hostname == 'b'\n",
    );
    // Relative to the working directory (the repository).
    let up = "../".repeat(crate::util::repo().components().count() - 1);
    let dir = format!("{up}{}", job.dir().display().to_string().trim_start_matches('/'));
    let first = bounded(&job, &["run", "--retry-failed", "--runner-dir", &dir], &[]);
    assert_eq!(first.code, 2, "{}\n{}", first.stdout, first.stderr);
    assert_eq!(host_statuses(&job.summary("edpm-agent")), pairs(&[("a", "ok"), ("b", "failed")]));
    job.write("fixed", "");
    let second = bounded(&job, &["run", "--retry-failed", "--runner-dir", &dir], &[]);
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    let s = job.summary("edpm-agent");
    assert_eq!(host_statuses(&s), pairs(&[("b", "ok")]), "{s}");
    assert_eq!(s["limit"], json!(["b"]));
}

#[test]
fn four_hundred_failed_hosts_keep_the_first_hosts_reason_in_the_termination_message() {
    let job = Job::new(&[], &[]);
    let names: Vec<String> = (0..400).map(|i| format!("edpm-compute-{i:04}.example.com")).collect();
    let mut events: Vec<Value> = names
        .iter()
        .map(|h| {
            failed_event(
                h,
                "Deploy nova",
                &format!("non-zero return code (rc 125): cannot pull image on {h}"),
            )
        })
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    events.push(stats_event(&refs, &[]));
    write_events(&job, "many", &events);
    job.write("artifacts/many/rc", "2");
    job.write("artifacts/many/status", "failed");
    let out = summarize(&job, "many", &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let (text, upstream) = job.termination();
    assert_eq!((text["failedHosts"].as_u64(), text["totalHosts"].as_u64()), (Some(400), Some(400)));
    assert_eq!(text["truncated"], true);
    let reasons = text["hostFailures"].as_object().unwrap_or_else(|| panic!("no hostFailures: {text}"));
    let first = reasons[&names[0]].as_str().unwrap();
    assert!(first.starts_with("Deploy nova (site.yml:4): non-zero return code"), "{first}");
    assert_eq!(text["hostFailuresOmitted"].as_u64(), Some(400 - reasons.len() as u64));
    let upstream = upstream.unwrap();
    assert_eq!(upstream.failed_hosts, Some(400));
    let listed = upstream.failed_host_list.unwrap();
    assert!(!listed.is_empty() && listed[0] == names[0], "{listed:?}");
}

#[test]
fn extra_vars_of_several_documents_say_one_document_is_expected() {
    let job = Job::new(&["local-0"], &[]);
    job.write("project/site.yml", "- hosts: all\n  tasks: []\n");
    let out = run_job(&job, &[], "site.yml", "multi", &[("RUNNER_EXTRA_VARS", "\na: 1\n---\nb: 2\n\n")]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("RUNNER_EXTRA_VARS: ") && out.stderr.contains("one YAML document expected"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("from_str_multiple"), "{}", out.stderr);
    assert!(job.summary("multi")["reason"].as_str().unwrap().contains("one YAML document expected"));
}

#[test]
fn return_code_4_says_what_ansible_means_by_it() {
    // Unreachable hosts.
    let job = Job::new(&["a"], &["u"]);
    job.write(
        "project/site.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n",
    );
    let out = run_job(&job, &[], "site.yml", "rc4", &[]);
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("rc4");
    let reason = s["reason"].as_str().unwrap_or_else(|| panic!("no reason: {s}"));
    assert!(reason.contains("unreachable"), "{reason}");
    assert!(our_lines(&out).contains(reason), "{}", out.stdout);

    // A playbook Ansible cannot parse: the same code, no host.
    job.write("project/broken.yml", "- hosts: all\n  tasks: [\n");
    let out = run_job(&job, &[], "broken.yml", "rc4-parse", &[]);
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("rc4-parse");
    let reason = s["reason"].as_str().unwrap_or_else(|| panic!("no reason: {s}"));
    assert!(reason.contains("could not parse"), "{reason}");
}

#[test]
fn summarize_only_without_an_rc_file_says_the_return_code_is_unknown() {
    let job = Job::new(&[], &[]);
    write_events(&job, "norc", &[failed_event("h1", "t", "boom"), stats_event(&["h1"], &[])]);
    let out = summarize(&job, "norc", &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("(rc 0)"), "{}", out.stdout);
    let s = job.summary("norc");
    let reason = s["reason"].as_str().unwrap_or_else(|| panic!("no reason: {s}"));
    let rc_file = job.dir().join("artifacts/norc/rc").display().to_string();
    assert!(reason.contains("return code is unknown") && reason.contains(&rc_file), "{reason}");
    assert!(our_lines(&out).contains(reason), "{}", out.stdout);
}

#[test]
fn control_characters_in_host_names_and_messages_are_escaped_in_the_job_log() {
    let job = Job::new(&[], &[]);
    let python = crate::util::python_tool("python3").display().to_string();
    job.write(
        "inventory/hosts",
        &format!(
            "all:\n  hosts:\n    \"evil\\ecHost\\r\\a\": {{ansible_connection: local}}\n  vars:\n    ansible_python_interpreter: {python}\n"
        ),
    );
    job.write(
        "project/site.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: \"bad \\e[2J task\"\n      ansible.builtin.fail:\n        msg: \"boom \\e]0;title\\a\\rX\"\n",
    );
    for flags in [&[][..], &["--retry-failed"][..]] {
        let out = run_job(&job, flags, "site.yml", "ctl", &[]);
        assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
        let ours = our_lines(&out);
        assert!(!ours.contains(['\u{1b}', '\r', '\u{7}']), "raw control characters: {ours:?}");
        assert!(ours.contains("evil\\ecHost\\r\\x07: failed at task"), "{ours}");
        if !flags.is_empty() {
            // Ansible reads the limit file in text mode, where the CR ends a line: the retry
            // runs on every host rather than on two halves of the name (it ran on none).
            assert!(ours.contains("cannot be used in an Ansible limit"), "{ours}");
        }
    }
    // The summary keeps the host's exact name.
    assert!(job.summary("ctl")["hosts"].as_object().unwrap().contains_key("evil\u{1b}cHost\r\u{7}"));
}

/// A secret-named variable given in a file (`-e @secrets.yml`, relative to the project
/// directory, where ansible-playbook runs) is masked in the summary, the termination message
/// and edpm-agent's own lines, as one given inline is; the file was not read before. An HTTP
/// status after a secret-sounding key ("the credential: 401 Unauthorized") keeps its 401.
#[test]
fn a_secret_named_variable_in_an_extra_vars_file_is_masked_and_a_401_is_kept() {
    const SECRET: &str = "FileSecret-Kx9q";
    let job = Job::new(&["local-0", "local-1"], &[]);
    job.write("project/secrets.yml", &format!("---\nvault_password: {SECRET}\nregion: one\n"));
    job.write(
        "project/site.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: \"log in with {{ vault_password }}\"\n      ansible.builtin.fail:\n        msg: \"{{ msgs[inventory_hostname] }}\"\n      vars:\n        msgs:\n          local-0: \"keystone refused {{ vault_password }}\"\n          local-1: \"the credential: 401 Unauthorized\"\n",
    );
    let out = run_job(&job, &[], "site.yml", "file-vars", &[("RUNNER_CMDLINE", "-e @secrets.yml")]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("file-vars");
    assert_eq!(s["hosts"]["local-0"]["failedTask"]["task"], "log in with ********", "{s}");
    assert_eq!(s["hosts"]["local-0"]["failedTask"]["message"], "keystone refused ********", "{s}");
    assert_eq!(s["hosts"]["local-1"]["failedTask"]["message"], "the credential: 401 Unauthorized", "{s}");
    let summary = read(&job.dir().join("artifacts/file-vars/edpm-summary.json"));
    let (termination, _) = job.termination();
    for (what, text) in [
        ("the summary", summary),
        ("the termination message", termination.to_string()),
        ("our lines", our_lines(&out)),
    ] {
        assert!(!text.contains(SECRET) && !text.contains("Kx9q"), "{what} shows the file's secret:\n{text}");
    }
    assert!(our_lines(&out).contains("401 Unauthorized"), "{}", our_lines(&out));
}

/// `--inventory hosts` (relative) is found where ansible-runner finds it: the working
/// directory's `hosts` first, else `DIR/inventory/hosts`; it was refused ("inventory
/// DIR/hosts: ...") though ansible-runner would run with it.
#[test]
fn a_relative_inventory_is_found_as_ansible_runner_finds_it() {
    let job = Job::new(&["local-0"], &[]);
    job.write(
        "project/site.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n",
    );
    let dir = job.dir().display().to_string();
    let out = bounded(
        &job,
        &[
            "run",
            "--",
            "ansible-runner",
            "run",
            &dir,
            "-p",
            "site.yml",
            "-i",
            "rel-inv",
            "--inventory",
            "hosts",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(host_statuses(&job.summary("rel-inv")), pairs(&[("local-0", "ok")]));
    // Where neither holds it, the error names DIR/inventory/<path>, where it belongs.
    let out = bounded(
        &job,
        &[
            "run",
            "--",
            "ansible-runner",
            "run",
            &dir,
            "-p",
            "site.yml",
            "-i",
            "rel-inv2",
            "--inventory",
            "nowhere",
        ],
        &[],
    );
    assert_ne!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let missing = job.dir().join("inventory/nowhere").display().to_string();
    assert!(out.stdout.contains(&missing) || out.stderr.contains(&missing), "{}\n{}", out.stdout, out.stderr);
}
