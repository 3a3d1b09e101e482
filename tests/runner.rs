//! `edpm-agent run` with real ansible-runner and ansible-playbook (the venv `.ci/run` makes):
//! local hosts (`ansible_connection: local`), an unreachable one (a closed loopback port),
//! failures, timeouts, SIGTERM, retries, bad input, and the termination message read the way
//! openstack-operator reads it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::fake_api::FakeApi;
use crate::util::{Output, bin, python_tool, run_program};

/// openstack-operator's `AnsibleExecutionSummary` as `ParseAnsibleExecutionSummaryFromPod`
/// fills it (readiness-runner.md §2): Go's encoding/json into `*int` and `*[]string` fields.
#[derive(Debug, PartialEq)]
pub struct Upstream {
    pub total_hosts: i64,
    pub failed_hosts: Option<i64>,
    pub unreachable_hosts: Option<i64>,
    pub failure_percent: Option<i64>,
    pub failed_host_list: Option<Vec<String>>,
    pub unreachable_host_list: Option<Vec<String>>,
}

/// Go's rules, as the reference note states them: Kubernetes keeps at most 4096 bytes of the
/// message (a longer one is cut, so it no longer parses); keys match field names ignoring case
/// (unknown keys are ignored; the last duplicate wins); an int field takes only an integral
/// JSON number; a list field takes an array of strings or null; a summary whose totalHosts is
/// 0 or missing is skipped (`Ok(None)`); a parse error is an error.
pub fn upstream_parse(message: &str) -> Result<Option<Upstream>, String> {
    let kept = &message.as_bytes()[..message.len().min(4096)];
    let v: Value = serde_json::from_slice(kept)
        .map_err(|e| format!("failed to parse ansible execution summary: {e}"))?;
    let obj = v.as_object().ok_or("cannot unmarshal non-object into AnsibleExecutionSummary")?;
    let field = |name: &str| -> Option<&Value> {
        obj.get(name).or_else(|| obj.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
    };
    let int = |name: &str| -> Result<Option<i64>, String> {
        match field(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => {
                n.as_i64().map(Some).ok_or(format!("cannot unmarshal number {n} into int {name}"))
            }
            Some(other) => Err(format!("cannot unmarshal {other} into int {name}")),
        }
    };
    let list = |name: &str| -> Result<Option<Vec<String>>, String> {
        match field(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| match x {
                    Value::String(s) => Ok(s.clone()),
                    Value::Null => Ok(String::new()),
                    other => Err(format!("cannot unmarshal {other} into string in {name}")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(format!("cannot unmarshal {other} into []string {name}")),
        }
    };
    let total = int("totalHosts")?;
    let parsed = Upstream {
        total_hosts: total.unwrap_or(0),
        failed_hosts: int("failedHosts")?,
        unreachable_hosts: int("unreachableHosts")?,
        failure_percent: int("failurePercent")?,
        failed_host_list: list("failedHostList")?,
        unreachable_host_list: list("unreachableHostList")?,
    };
    Ok((parsed.total_hosts != 0).then_some(parsed))
}

fn venv_bin() -> PathBuf {
    python_tool("ansible-runner").parent().unwrap().to_path_buf()
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0").unwrap().local_addr().unwrap().port()
}

/// A runner directory in a temporary directory: `inventory/hosts` (local hosts, plus an
/// unreachable one when asked), `project/<playbooks>`, and `env/settings` that makes
/// ansible-runner notice a cancel quickly.
pub struct Job {
    tmp: tempfile::TempDir,
}

impl Job {
    pub fn new(local: &[&str], unreachable: &[&str]) -> Job {
        let tmp = tempfile::tempdir().unwrap();
        let job = Job { tmp };
        let mut hosts = String::from("all:\n  hosts:\n");
        for h in local {
            hosts.push_str(&format!("    {h}: {{ansible_connection: local}}\n"));
        }
        for h in unreachable {
            hosts.push_str(&format!(
                "    {h}: {{ansible_host: 127.0.0.9, ansible_port: {}, ansible_user: nobody, ansible_ssh_common_args: '-o ConnectTimeout=5 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'}}\n",
                closed_port()
            ));
        }
        hosts.push_str(&format!(
            "  vars:\n    ansible_python_interpreter: {}\n",
            python_tool("python3").display()
        ));
        job.write("inventory/hosts", &hosts);
        job.write("env/settings", "pexpect_timeout: 0.2\n");
        job
    }

    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.dir().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn tmpdir(&self) -> String {
        let t = self.dir().join(".tmp");
        std::fs::create_dir_all(&t).unwrap();
        t.display().to_string()
    }

    pub fn termination_log(&self) -> PathBuf {
        self.dir().join("termination-log")
    }

    pub fn env(&self) -> Vec<(String, String)> {
        let path = format!("{}:{}", venv_bin().display(), std::env::var("PATH").unwrap_or_default());
        vec![
            ("PATH".into(), path),
            ("EDPM_AEE_TERMINATION_LOG".into(), self.termination_log().display().to_string()),
            ("ANSIBLE_NOCOLOR".into(), "1".into()),
            ("ANSIBLE_LOCAL_TEMP".into(), self.dir().join(".ansible-tmp").display().to_string()),
            // Modules killed by a timeout or a signal leave their payload directories behind.
            ("TMPDIR".into(), self.tmpdir()),
        ]
    }

    /// `edpm-agent run [flags] -- ansible-runner run DIR -p PLAYBOOK -i IDENT`.
    pub fn run(&self, flags: &[&str], playbook: &str, ident: &str, env: &[(&str, &str)]) -> Output {
        let dir = self.dir().display().to_string();
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend(["--", "ansible-runner", "run", &dir, "-p", playbook, "-i", ident]);
        self.edpm_agent(&args, env)
    }

    pub fn edpm_agent(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let base = self.env();
        let mut all: Vec<(&str, &str)> = base.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        all.extend_from_slice(env);
        run_program(&bin(), args, &all)
    }

    pub fn summary(&self, ident: &str) -> Value {
        let p = self.dir().join("artifacts").join(ident).join("edpm-summary.json");
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            .unwrap()
    }

    /// The termination message: its text, and what openstack-operator makes of it.
    pub fn termination(&self) -> (Value, Option<Upstream>) {
        let text = std::fs::read_to_string(self.termination_log()).unwrap();
        assert!(text.len() <= 4096, "{} bytes", text.len());
        let upstream = upstream_parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (serde_json::from_str(&text).unwrap(), upstream)
    }
}

pub fn host_statuses(summary: &Value) -> Vec<(String, String)> {
    summary["hosts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(h, v)| (h.clone(), v["status"].as_str().unwrap().to_string()))
        .collect()
}

pub fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

const FAILING_PLAY: &str = r#"
- hosts: all
  gather_facts: false
  tasks:
    - name: reach every host
      ansible.builtin.ping:
    - name: configure nova
      ansible.builtin.shell: echo 'cannot reach rabbit://nova:Sup3rSecretPw@rabbitmq:5672/ for /etc/nova/nova.conf' >&2; exit 3
      when: inventory_hostname == 'compute-1'
    - name: after
      ansible.builtin.debug:
        msg: done
"#;

/// Checks the per-host results of FAILING_PLAY against a, compute-1 (failed), c and u
/// (unreachable), for either way of running it.
fn check_failing_play(job: &Job, out: &Output, ident: &str) -> Value {
    assert_eq!(out.code, 4, "ansible returns 4 when a host is unreachable:\n{}\n{}", out.stdout, out.stderr);
    let s = job.summary(ident);
    assert_eq!(
        host_statuses(&s),
        pairs(&[("a", "ok"), ("c", "ok"), ("compute-1", "failed"), ("u", "unreachable")])
    );
    assert_eq!(
        (s["status"].as_str(), s["rc"].as_i64(), s["complete"].as_bool()),
        (Some("failed"), Some(4), Some(true))
    );
    let a = &s["hosts"]["a"];
    assert_eq!(
        (a["ok"].as_u64(), a["skipped"].as_u64(), a["failures"].as_u64(), a["interrupted"].as_bool()),
        (Some(2), Some(1), Some(0), Some(false))
    );
    let f = &s["hosts"]["compute-1"]["failedTask"];
    assert_eq!(f["task"], "configure nova");
    assert_eq!(f["action"], "ansible.builtin.shell");
    assert_eq!(f["play"], "all");
    assert!(f["path"].as_str().unwrap().ends_with("/project/site.yml:7"), "{f}");
    assert_eq!(
        f["message"],
        "non-zero return code (rc 3): cannot reach rabbit://nova:********@rabbitmq:5672/ for /etc/nova/nova.conf"
    );
    let u = &s["hosts"]["u"]["failedTask"];
    assert_eq!((u["task"].as_str(), u["unreachable"].as_bool()), (Some("reach every host"), Some(true)));
    assert!(u["message"].as_str().unwrap().contains("Connection refused"), "{u}");
    let (text, upstream) = job.termination();
    assert_eq!(s["terminationMessage"], text, "the summary keeps the message it wrote");
    let mut text = text;
    // Why each host failed, masked as in the summary, paths from the project on.
    let reasons = text.as_object_mut().unwrap().remove("hostFailures").unwrap_or_default();
    assert_eq!(
        reasons["compute-1"],
        "configure nova (site.yml:7): non-zero return code (rc 3): cannot reach rabbit://nova:********@rabbitmq:5672/ for /etc/nova/nova.conf"
    );
    let unreachable = reasons["u"].as_str().unwrap_or_default();
    assert!(
        unreachable.starts_with("reach every host (site.yml:5): ")
            && unreachable.ends_with("Connection refused"),
        "{reasons}"
    );
    assert_eq!(
        text,
        json!({"completedHostList": ["a", "c"], "failedHostList": ["compute-1"], "failedHosts": 1, "failurePercent": 50, "rc": 4, "status": "failed",
               "totalHosts": 4, "truncated": false, "unreachableHostList": ["u"], "unreachableHosts": 1})
    );
    assert_eq!(
        upstream,
        Some(Upstream {
            total_hosts: 4,
            failed_hosts: Some(1),
            unreachable_hosts: Some(1),
            failure_percent: Some(50),
            failed_host_list: Some(vec!["compute-1".into()]),
            unreachable_host_list: Some(vec!["u".into()]),
        })
    );
    // The job log says which host failed, where and why; edpm-agent's own lines never carry
    // the secret (Ansible's output is Ansible's).
    assert!(
        out.stdout.contains(
            "edpm-agent: compute-1: failed at task \"configure nova\": non-zero return code (rc 3): cannot reach rabbit://nova:********@"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.lines().filter(|l| l.starts_with("edpm-agent:")).all(|l| !l.contains("Sup3rSecretPw"))
    );
    assert!(
        !std::fs::read_to_string(job.dir().join("artifacts").join(ident).join("edpm-summary.json"))
            .unwrap()
            .contains("Sup3rSecretPw")
    );
    s
}

#[test]
fn failed_and_unreachable_hosts_are_reported_per_host() {
    let job = Job::new(&["a", "compute-1", "c"], &["u"]);
    job.write("project/site.yml", FAILING_PLAY);
    let out = job.run(&[], "site.yml", "deploy-1", &[]);
    assert!(out.stdout.starts_with("edpm-agent: running ansible-runner run "), "{}", out.stdout);
    check_failing_play(&job, &out, "deploy-1");
    // ansible-runner's own artifacts are there too.
    let artifacts = job.dir().join("artifacts/deploy-1");
    assert_eq!(std::fs::read_to_string(artifacts.join("status")).unwrap(), "failed");
    assert_eq!(std::fs::read_to_string(artifacts.join("rc")).unwrap(), "4");
}

#[test]
fn ansible_playbook_runs_the_same_play_with_the_same_results() {
    let job = Job::new(&["a", "compute-1", "c"], &["u"]);
    job.write("project/site.yml", FAILING_PLAY);
    job.write("env/cmdline", "--forks 3\n");
    let out = job.run(&["--executor", "ansible-playbook"], "site.yml", "deploy-2", &[]);
    assert!(out.stdout.starts_with("edpm-agent: running ansible-playbook --forks 3 -i "), "{}", out.stdout);
    let s = check_failing_play(&job, &out, "deploy-2");
    // The artifacts ansible-runner would have written, written by edpm-agent.
    let artifacts = job.dir().join("artifacts/deploy-2");
    assert_eq!(std::fs::read_to_string(artifacts.join("status")).unwrap(), "failed");
    assert!(std::fs::read_to_string(artifacts.join("stdout")).unwrap().contains("PLAY RECAP"));
    assert!(std::fs::read_dir(artifacts.join("job_events")).unwrap().count() > 10);
    assert_eq!(s["hosts"]["c"]["ok"], 2);
}

/// Play 1 runs on every host (u is unreachable); play 2, with any_errors_fatal, on a, b and c,
/// where b fails until `fixed` exists, which stops the play under a and c.
const RETRY_PLAY: &str = r#"
- hosts: all
  gather_facts: false
  tasks:
    - name: first play
      ansible.builtin.ping:
- hosts: a,b,c
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: fail on b until fixed
      ansible.builtin.command: "test -e {{ playbook_dir }}/../fixed"
      when: inventory_hostname == 'b'
    - name: record the host
      ansible.builtin.copy:
        content: "ran\n"
        dest: "{{ playbook_dir }}/../ran-{{ inventory_hostname }}"
"#;

#[test]
fn retry_failed_reruns_exactly_failed_unreachable_and_interrupted_hosts() {
    let job = Job::new(&["done", "a", "b", "c"], &["u"]);
    job.write("project/site.yml", RETRY_PLAY);
    let first = job.run(&["--retry-failed"], "site.yml", "retry-job", &[]);
    assert_eq!(first.code, 4, "{}\n{}", first.stdout, first.stderr);
    assert!(
        first.stdout.starts_with(
            "edpm-agent: --retry-failed: no earlier attempt recorded for this run; running on every host\n"
        ),
        "{}",
        first.stdout
    );
    let s1 = job.summary("retry-job");
    assert_eq!(
        host_statuses(&s1),
        pairs(&[
            ("a", "interrupted"),
            ("b", "failed"),
            ("c", "interrupted"),
            ("done", "ok"),
            ("u", "unreachable")
        ])
    );
    assert_eq!(s1["attempt"], 1);
    assert!(!job.dir().join("ran-a").exists(), "any_errors_fatal stopped the play before a recorded itself");

    job.write("fixed", "");
    let second = job.edpm_agent(
        &[
            "run",
            "--",
            "ansible-runner",
            "run",
            job.dir().to_str().unwrap(),
            "-p",
            "site.yml",
            "-i",
            "retry-job",
        ],
        &[("EDPM_AGENT_RETRY_FAILED", "true")],
    );
    assert_eq!(second.code, 4, "u is still unreachable:\n{}\n{}", second.stdout, second.stderr);
    let first_line = second.stdout.lines().next().unwrap();
    assert_eq!(
        first_line,
        "edpm-agent: --retry-failed: attempt 1 ended failed; running only on its 4 failed (1), unreachable (1) or interrupted (2) host(s) of 5: a, b, c, u"
    );
    let s2 = job.summary("retry-job");
    assert_eq!(host_statuses(&s2), pairs(&[("a", "ok"), ("b", "ok"), ("c", "ok"), ("u", "unreachable")]));
    assert_eq!((s2["attempt"].as_u64(), &s2["limit"]), (Some(2), &json!(["a", "b", "c", "u"])));
    for h in ["a", "b", "c"] {
        assert!(job.dir().join(format!("ran-{h}")).exists(), "{h} ran in the retry");
    }
    let (text, upstream) = job.termination();
    assert_eq!((text["totalHosts"].as_u64(), text["unreachableHostList"].clone()), (Some(4), json!(["u"])));
    assert_eq!(upstream.unwrap().failed_hosts, Some(0));
    // The first attempt is kept, whole, beside the second.
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(job.dir().join("artifacts/retry-job/attempts/1/edpm-summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(kept, s1);
    assert!(job.dir().join("artifacts/retry-job/attempts/1/job_events").is_dir());

    // Retried again: only the host still unreachable. Alone in play 1, it fails the whole
    // play, so Ansible runs no further play: the summary says the playbook stopped early, and
    // the next retry keeps the same hosts rather than trusting that nothing else was left.
    let third = job.edpm_agent(
        &[
            "run",
            "--retry-failed",
            "--",
            "ansible-runner",
            "run",
            job.dir().to_str().unwrap(),
            "-p",
            "site.yml",
            "-i",
            "retry-job",
        ],
        &[],
    );
    assert!(third.stdout.lines().next().unwrap().ends_with("host(s) of 4: u"), "{}", third.stdout);
    let s3 = job.summary("retry-job");
    assert_eq!(host_statuses(&s3), pairs(&[("u", "unreachable")]));
    assert_eq!((s3["stoppedEarly"].as_bool(), s3["attempt"].as_u64()), (Some(true), Some(3)));
}

/// Play 1 on every host; play 2, the playbook's last, on b, c, e (and f), with `stop` as its
/// play keywords: b fails at its first task.
fn stopping_play(hosts: &str, stop: &str) -> String {
    format!(
        r#"
- hosts: all
  gather_facts: false
  tasks:
    - name: first play
      ansible.builtin.ping:
- hosts: {hosts}
  gather_facts: false
{stop}
  tasks:
    - name: fail on b
      ansible.builtin.command: /bin/false
      when: inventory_hostname == 'b'
    - name: after
      ansible.builtin.debug:
        msg: done
"#
    )
}

/// The termination message's `completedHostList` (absent: nobody), checked to parse as
/// openstack-operator parses the rest.
fn completed_hosts(job: &Job) -> Vec<String> {
    let (text, upstream) = job.termination();
    assert!(upstream.is_some(), "{text}");
    serde_json::from_value(text.get("completedHostList").cloned().unwrap_or(json!([]))).unwrap()
}

#[test]
fn any_errors_fatal_credits_only_the_hosts_that_ran_to_the_end() {
    let job = Job::new(&["a", "b", "c", "d", "e"], &[]);
    job.write("project/site.yml", &stopping_play("b,c,e", "  any_errors_fatal: true"));
    let out = job.run(&[], "site.yml", "fatal", &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("fatal");
    assert_eq!(
        host_statuses(&s),
        pairs(&[("a", "ok"), ("b", "failed"), ("c", "interrupted"), ("d", "ok"), ("e", "interrupted")])
    );
    assert_eq!(s["ranToEnd"], true);
    // a and d were never in the play that stopped; c and e were stopped in it.
    assert_eq!(completed_hosts(&job), ["a", "d"]);
    let (text, _) = job.termination();
    assert_eq!((&text["failedHostList"], &text["unreachableHostList"]), (&json!(["b"]), &json!([])));
}

#[test]
fn max_fail_percentage_credits_only_the_hosts_that_ran_to_the_end() {
    // 1 of 4 failed: above 20 %, the play stops under c, e and f.
    let job = Job::new(&["a", "b", "c", "d", "e", "f"], &[]);
    job.write("project/site.yml", &stopping_play("b,c,e,f", "  max_fail_percentage: 20"));
    let out = job.run(&[], "site.yml", "maxfail", &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("maxfail");
    assert_eq!(s["hosts"]["c"]["status"], "interrupted", "{s}");
    assert_eq!(completed_hosts(&job), ["a", "d"]);
    // Below 50 %, the play goes on: c, e and f run it to its end.
    job.write("project/site.yml", &stopping_play("b,c,e,f", "  max_fail_percentage: 50"));
    let out = job.run(&[], "site.yml", "maxfail-2", &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(completed_hosts(&job), ["a", "c", "d", "e", "f"]);
}

#[test]
fn a_failed_batch_or_a_stop_before_the_last_play_credits_no_host_it_may_have_left_out() {
    // serial: b's batch fails alone, so c's batch never runs: nobody is known done.
    let job = Job::new(&["a", "b", "c"], &[]);
    job.write("project/site.yml", &stopping_play("b,c", "  serial: 1"));
    let out = job.run(&[], "site.yml", "serial", &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(job.summary("serial")["hosts"]["c"]["status"], "ok", "c never reached the last play");
    assert!(completed_hosts(&job).is_empty());
    // any_errors_fatal in the first of two plays: the second never runs.
    let job = Job::new(&["a", "b", "c"], &[]);
    let fatal_first = stopping_play("all", "  any_errors_fatal: true")
        .split_once("- hosts: all\n  gather_facts: false\n  any_errors_fatal")
        .map(|(_, rest)| format!("- hosts: all\n  gather_facts: false\n  any_errors_fatal{rest}"))
        .unwrap();
    job.write(
        "project/site.yml",
        &format!("{fatal_first}- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n"),
    );
    let out = job.run(&[], "site.yml", "early", &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(job.summary("early")["ranToEnd"], false);
    assert!(completed_hosts(&job).is_empty());
}

/// A playbook whose second task outlives every limit; its `sleep` is recognisable by its odd
/// duration, to check nothing is left running.
fn slow_play(sleep: &str) -> String {
    format!(
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: start\n      ansible.builtin.debug: {{msg: started}}\n    - name: wait here\n      ansible.builtin.command: sleep {sleep}\n"
    )
}

fn still_running(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()).any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(needle))
    })
}

#[test]
fn a_play_that_runs_too_long_stops_as_a_job_timeout() {
    let job = Job::new(&["a", "b"], &[]);
    job.write("project/site.yml", &slow_play("61.25"));
    let start = Instant::now();
    // Long enough for ansible-runner to start the play on a loaded machine.
    let out = job.run(&[], "site.yml", "slow", &[("RUNNER_JOB_TIMEOUT", "6")]);
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    assert_eq!(out.code, 254, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("slow");
    assert_eq!(
        (s["status"].as_str(), s["timeout"].as_str(), s["complete"].as_bool()),
        (Some("timeout"), Some("job"), Some(false))
    );
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .starts_with("job timeout: the play ran longer than RUNNER_JOB_TIMEOUT=6s"),
        "{s}"
    );
    assert_eq!(host_statuses(&s), pairs(&[("a", "interrupted"), ("b", "interrupted")]));
    assert_eq!(s["hosts"]["a"]["ok"], 1);
    let (text, upstream) = job.termination();
    assert_eq!(
        (text["status"].as_str(), text["rc"].as_i64(), text["totalHosts"].as_u64()),
        (Some("timeout"), Some(254), Some(2))
    );
    assert_eq!(upstream.unwrap().failure_percent, Some(0));
    assert!(text.get("completedHostList").is_none(), "a run cut short credits nobody: {text}");
    assert!(!still_running("sleep 61.25"), "the play's processes were left running");
}

#[test]
fn a_silent_play_stops_as_an_idle_timeout() {
    let job = Job::new(&["a"], &[]);
    job.write("project/site.yml", &slow_play("62.25"));
    let out =
        job.run(&["--executor", "ansible-playbook"], "site.yml", "idle", &[("RUNNER_IDLE_TIMEOUT", "5")]);
    assert_eq!(out.code, 254, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("idle");
    assert_eq!((s["status"].as_str(), s["timeout"].as_str()), (Some("timeout"), Some("idle")));
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .starts_with("idle timeout: the play printed nothing for RUNNER_IDLE_TIMEOUT=5s"),
        "{s}"
    );
    assert_eq!(host_statuses(&s), pairs(&[("a", "interrupted")]));
    assert!(!still_running("sleep 62.25"));
}

#[test]
fn sigterm_during_the_play_cancels_it_and_still_summarizes() {
    let job = Job::new(&["a", "b"], &[]);
    job.write("project/site.yml", &slow_play("63.25"));
    let dir = job.dir().display().to_string();
    let mut child = Command::new(bin())
        .args([
            "run",
            "--grace-period",
            "10",
            "--",
            "ansible-runner",
            "run",
            &dir,
            "-p",
            "site.yml",
            "-i",
            "term",
        ])
        .env_clear()
        .envs(job.env())
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("TASK [wait here]") {
            break;
        }
    }
    assert!(seen.contains("TASK [wait here]"), "the play never reached the slow task:\n{seen}");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let signalled = Instant::now();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert!(signalled.elapsed() < Duration::from_secs(8), "took {:?} after SIGTERM", signalled.elapsed());
    assert_eq!(status.code(), Some(254), "ansible-runner's code for a canceled run:\n{}", rest.join("\n"));
    let s = job.summary("term");
    assert_eq!((s["status"].as_str(), s["rc"].as_i64()), (Some("canceled"), Some(254)));
    assert_eq!(s["reason"], "SIGTERM received: the play was canceled");
    assert_eq!(host_statuses(&s), pairs(&[("a", "interrupted"), ("b", "interrupted")]));
    assert_eq!(std::fs::read_to_string(job.dir().join("artifacts/term/status")).unwrap(), "canceled");
    let (text, _) = job.termination();
    assert_eq!((text["status"].as_str(), text["totalHosts"].as_u64()), (Some("canceled"), Some(2)));
    assert!(text.get("completedHostList").is_none(), "a canceled run credits nobody: {text}");
    assert!(
        rest.iter().any(|l| l.starts_with("edpm-agent: canceled (rc 254): 2 host(s), interrupted 2 (a, b)")),
        "{rest:?}"
    );
    assert!(!still_running("sleep 63.25"));
}

#[test]
fn bad_input_stops_before_the_play_and_says_which() {
    // (what, ansible-runner options, environment, exit code, what stderr and the summary say)
    type Case<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)], i32, &'a str);
    let cases: &[Case] = &[
        ("missing playbook", &["-p", "missing.yml"], &[], 6, "playbook {DIR}/project/missing.yml: not found"),
        (
            "malformed extra vars",
            &["-p", "site.yml"],
            &[("RUNNER_EXTRA_VARS", "\nedpm_override_hosts: [all\n\n")],
            3,
            "RUNNER_EXTRA_VARS: ",
        ),
        (
            "extra vars that are not a mapping",
            &["-p", "site.yml"],
            &[("RUNNER_EXTRA_VARS", "\n- a\n\n")],
            3,
            "RUNNER_EXTRA_VARS: extra vars must be a YAML mapping",
        ),
        (
            "bad timeout",
            &["-p", "site.yml"],
            &[("RUNNER_JOB_TIMEOUT", "1h")],
            3,
            "RUNNER_JOB_TIMEOUT: \"1h\"",
        ),
        (
            "inline playbook that is not a list",
            &["-p", "playbook.yaml"],
            &[("RUNNER_PLAYBOOK", "\nhosts: all\n\n")],
            3,
            "RUNNER_PLAYBOOK: an inline playbook must be a YAML list of plays",
        ),
        (
            "unreadable inventory",
            &["-p", "site.yml"],
            &[("BREAK_INVENTORY", "1")],
            6,
            "inventory {DIR}/inventory/broken: ",
        ),
        (
            "a setting that is not one",
            &["-p", "site.yml"],
            &[("EDPM_AGENT_EXECUTOR", "ansible")],
            2,
            "environment variable EDPM_AGENT_EXECUTOR=\"ansible\": expected auto, ansible-runner, ansible-playbook",
        ),
        (
            "not an ansible-runner command",
            &["--frobnicate"],
            &[],
            2,
            "--frobnicate: not an ansible-runner run option",
        ),
    ];
    for (what, extra, env, code, needle) in cases {
        let job = Job::new(&["a"], &[]);
        job.write("project/site.yml", "- hosts: all\n  tasks: []\n");
        if env.iter().any(|(k, _)| *k == "BREAK_INVENTORY") {
            std::os::unix::fs::symlink("/nonexistent/inventory", job.dir().join("inventory/broken")).unwrap();
        }
        let dir = job.dir().display().to_string();
        let mut args = vec!["run", "--", "ansible-runner", "run", dir.as_str()];
        args.extend_from_slice(extra);
        args.extend(["-i", "bad"]);
        let out = job.edpm_agent(&args, env);
        let needle = needle.replace("{DIR}", &dir);
        assert_eq!(out.code, *code, "{what}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{what}: one line: {}", out.stderr);
        assert!(out.stderr.contains(&needle), "{what}: {} lacks {needle}", out.stderr);
        assert!(!job.dir().join("artifacts/bad/job_events").exists(), "{what}: the play started");
        assert!(!job.dir().join("env/extravars").exists(), "{what}: wrote the runner directory");
        let (text, upstream) = job.termination();
        assert_eq!(
            (text["status"].as_str(), text["rc"].as_i64(), text["totalHosts"].as_u64()),
            (Some("invalid"), Some(*code as i64), Some(0))
        );
        assert_eq!(upstream, None, "{what}: openstack-operator skips a summary without hosts");
        if *code != 2 {
            let s = job.summary("bad");
            assert_eq!(s["status"], "invalid");
            assert!(s["reason"].as_str().unwrap().contains(&needle), "{what}: {s}");
        }
    }
}

#[test]
fn the_inventory_can_come_from_the_api_and_secrets_stay_out_of_the_summary() {
    let api = FakeApi::start();
    api.add_crd("dataplane.openstack.org", "v1beta1", "openstackdataplanenodesets");
    api.put(json!({
        "apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
        "metadata": {"name": "edpm-compute", "namespace": "openstack"},
        "spec": {"nodeTemplate": {"ansibleSSHPrivateKeySecret": "ssh-key",
                                  "ansible": {"ansibleVarsFrom": [{"secretRef": {"name": "registry"}}]}},
                 "nodes": {"edpm-compute-0": {"ansible": {"ansibleHost": "192.0.2.10"}},
                           "edpm-compute-1": {"ansible": {"ansibleHost": "192.0.2.11"}}}}
    }));
    api.put(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "registry", "namespace": "openstack"},
                   "data": {"registry_login": "UmVnaXN0cnlQdy05ZjNh"}}));
    let job = Job::new(&[], &[]);
    std::fs::remove_dir_all(job.dir().join("inventory")).unwrap();
    job.write(
        "project/site.yml",
        "- hosts: edpm-compute\n  gather_facts: false\n  tasks:\n    - name: log in\n      ansible.builtin.fail:\n        msg: \"login refused for {{ registry_login }} on {{ ansible_host }}\"\n      when: inventory_hostname == 'edpm-compute-1'\n",
    );
    let python = format!("ansible_python_interpreter: {}", python_tool("python3").display());
    let extra = format!("\nansible_connection: local\n{python}\n\n");
    let kubeconfig = api.kubeconfig();
    let out = job.run(
        &["--inventory-source", "kube", "--kubeconfig", kubeconfig.to_str().unwrap()],
        "site.yml",
        "kube-job",
        &[("RUNNER_EXTRA_VARS", &extra)],
    );
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("kube-job");
    assert_eq!(host_statuses(&s), pairs(&[("edpm-compute-0", "ok"), ("edpm-compute-1", "failed")]));
    assert_eq!(
        s["hosts"]["edpm-compute-1"]["failedTask"]["message"],
        "login refused for ******** on 192.0.2.11"
    );
    let requests = api.requests();
    assert!(
        requests.iter().any(|r| r == "GET /api/v1/namespaces/openstack/secrets/registry"),
        "{requests:?}"
    );
}

#[test]
fn summarize_only_keeps_the_termination_message_within_4096_bytes() {
    // A job_events directory as a 3,000-host run with long names leaves it: the full lists
    // would be ~200 KB.
    let job = Job::new(&[], &[]);
    let events = job.dir().join("artifacts/big/job_events");
    std::fs::create_dir_all(&events).unwrap();
    let name = |i: usize| format!("compute-{i:05}.{}", "very-long-domain-name.example.com");
    let failures: serde_json::Map<String, Value> = (0..2000).map(|i| (name(i), json!(1))).collect();
    let dark: serde_json::Map<String, Value> = (2000..2600).map(|i| (name(i), json!(1))).collect();
    let mut processed: serde_json::Map<String, Value> = (0..3000).map(|i| (name(i), json!(1))).collect();
    processed.insert("zero-count-host".into(), json!(1));
    let mut zero = failures.clone();
    zero.insert("zero-count-host".into(), json!(0));
    let stats = json!({"event": "playbook_on_stats", "counter": 1,
                       "event_data": {"processed": processed, "failures": zero, "dark": dark, "ok": {}}});
    std::fs::write(events.join("1-aaaa.json"), stats.to_string()).unwrap();
    std::fs::write(job.dir().join("artifacts/big/rc"), "2").unwrap();
    std::fs::write(job.dir().join("artifacts/big/status"), "failed").unwrap();
    let dir = job.dir().display().to_string();
    let out = job.edpm_agent(
        &["run", "--summarize-only", "--", "ansible-runner", "run", &dir, "-p", "x.yml", "-i", "big"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (text, upstream) = job.termination();
    assert_eq!(
        (
            text["failedHosts"].as_u64(),
            text["unreachableHosts"].as_u64(),
            text["totalHosts"].as_u64(),
            text["failurePercent"].as_u64()
        ),
        (Some(2000), Some(600), Some(3001), Some(87)),
        "counts are never shortened, and a 0 count is no failure"
    );
    assert_eq!(text["truncated"], true);
    let upstream = upstream.unwrap();
    let listed = upstream.failed_host_list.unwrap();
    assert!(!listed.is_empty() && listed.len() < 2000 && listed[0] == name(0), "{listed:?}");
    assert!(!listed.contains(&"zero-count-host".to_string()));
    let s = job.summary("big");
    assert_eq!(s["hosts"].as_object().unwrap().len(), 3001, "the full summary lists every host");
}

#[test]
fn the_offline_example_runs_on_the_bundled_deployment() {
    // docs/ansibleee.md, "Trying it offline": examples/runner with edpm-agent's inventory of examples/.
    let job = Job::new(&[], &[]);
    std::fs::remove_dir_all(job.dir().join("inventory")).unwrap();
    for rel in ["project/playbook.yaml", "env/extravars"] {
        job.write(
            rel,
            &std::fs::read_to_string(crate::util::repo().join("examples/runner").join(rel)).unwrap(),
        );
    }
    // Relative to the working directory (the repository), as in scripts/example.sh: the
    // callback plugin still finds its notes file when ansible-runner changes directory.
    let up = "../".repeat(crate::util::repo().components().count() - 1);
    let dir = format!("{up}{}", job.dir().display().to_string().trim_start_matches('/'));
    let out = job.edpm_agent(
        &[
            "--config",
            "examples/edpm-agent.yaml",
            "run",
            "--runner-dir",
            &dir,
            "--inventory-source",
            "sources",
        ],
        &[("RUNNER_CMDLINE", "-e fail_on=edpm-compute-1")],
    );
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("edpm-agent");
    assert_eq!(
        host_statuses(&s),
        pairs(&[
            ("edpm-compute-0", "ok"),
            ("edpm-compute-1", "failed"),
            ("edpm-compute-2", "ok"),
            ("edpm-networker-0", "ok")
        ])
    );
    assert_eq!(s["hosts"]["edpm-compute-1"]["failedTask"]["message"], "asked to fail on edpm-compute-1");
    assert!(!out.stdout.contains("Callback dispatch"), "the callback plugin failed:\n{}", out.stdout);
    // The groups are NodeSet and Role names, used as they are: no warning about them.
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains("Invalid characters were found in group names"), "{text}");
    }
    assert!(
        out.stdout.contains("edpm-compute-0: ctlplane 192.168.122.100, groups edpm-compute,nova-cell1"),
        "{}",
        out.stdout
    );
}

/// Makes a FIFO at `path` (replacing a file there).
fn fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// `edpm-agent run` that cannot hang the suite: `timeout` ends it after 60 s (exit 124), and
/// kills it 5 s later if it ignores SIGTERM (run blocks it while it reads its inputs).
fn run_bounded(job: &Job, flags: &[&str], playbook: &str, ident: &str, env: &[(&str, &str)]) -> Output {
    let dir = job.dir().display().to_string();
    let bin = bin().display().to_string();
    let mut args = vec!["-k", "5", "60", bin.as_str(), "run"];
    args.extend_from_slice(flags);
    args.extend(["--", "ansible-runner", "run", &dir, "-p", playbook, "-i", ident]);
    let base = job.env();
    let mut all: Vec<(&str, &str)> = base.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    all.extend_from_slice(env);
    run_program(Path::new("timeout"), &args, &all)
}

#[test]
fn a_fifo_among_the_runner_directorys_files_is_named_never_waited_on() {
    // env/settings (read by every run) and env/envvars (read for ansible-playbook).
    for (file, flags) in [("env/settings", &[][..]), ("env/envvars", &["--executor", "ansible-playbook"][..])]
    {
        let job = Job::new(&["local-0"], &[]);
        job.write("project/site.yml", "- hosts: all\n  gather_facts: false\n  tasks: []\n");
        fifo(&job.dir().join(file));
        let out = run_bounded(&job, flags, "site.yml", "fifo-env", &[]);
        assert_eq!(out.code, 6, "{file}: {}\n{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(file) && out.stderr.contains("FIFO"), "{file}: {}", out.stderr);
    }
}

#[test]
fn a_fifo_in_a_mounted_inventory_is_named_never_waited_on() {
    // Checked before the play: the FIFO is named.
    let job = Job::new(&["local-0"], &[]);
    job.write("project/site.yml", "- hosts: all\n  gather_facts: false\n  tasks: []\n");
    fifo(&job.dir().join("inventory/extra"));
    let out = run_bounded(&job, &[], "site.yml", "fifo-inv", &[]);
    assert_eq!(out.code, 6, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("inventory/extra") && out.stderr.contains("FIFO"), "{}", out.stderr);
}

#[test]
fn extra_vars_with_a_repeated_key_are_checked_and_redacted_as_ansible_reads_them() {
    // Ansible (PyYAML) keeps the last of repeated keys; the check and the redaction must read
    // them the same way, or a password that passes the check escapes the redaction.
    let job = Job::new(&["local-0"], &[]);
    job.write(
        "project/site.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.fail:\n        msg: \"cannot log in with {{ db_password }}\"\n",
    );
    let extra = "\ndb_password: Sup3rS3cretFirst\ndb_password: Sup3rS3cretLast\n\n";
    let out = run_bounded(&job, &[], "site.yml", "dup-vars", &[("RUNNER_EXTRA_VARS", extra)]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let s = job.summary("dup-vars");
    let message = s["hosts"]["local-0"]["failedTask"]["message"].as_str().unwrap().to_string();
    assert_eq!(message, "cannot log in with ********");
    let (termination, _) = job.termination();
    // Our own lines in the job's log (Ansible's output, streamed as it comes, is Ansible's:
    // it quotes the repeated key's line in its own warning).
    let ours: String = out.stdout.lines().filter(|l| l.starts_with("edpm-agent:")).collect();
    for text in [s.to_string(), termination.to_string(), ours] {
        assert!(!text.contains("Sup3rS3cret"), "{text}");
    }
}

/// Ansible colours whatever ansible-runner's pty shows it; a Job's log is no terminal, so the
/// play runs uncoloured unless the Job asks (ANSIBLE_FORCE_COLOR), and escape codes reach
/// neither the pod's log nor the artifacts' stdout.
#[test]
fn the_play_is_coloured_only_when_asked_or_on_a_terminal() {
    let job = Job::new(&["a"], &[]);
    job.write(
        "project/site.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug: {msg: hello}\n",
    );
    let dir = job.dir().display().to_string();
    let base: Vec<(String, String)> = job.env().into_iter().filter(|(k, _)| k != "ANSIBLE_NOCOLOR").collect();
    let mut env: Vec<(&str, &str)> = base.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // A terminal type, as a shell that runs the command (or redirects it to a file) has: with
    // it, Ansible colours on ansible-runner's pty.
    env.push(("TERM", "xterm-256color"));
    let run = |ident: &str, env: &[(&str, &str)]| {
        run_program(&bin(), &["run", "--", "ansible-runner", "run", &dir, "-p", "site.yml", "-i", ident], env)
    };
    let out = run("plain", &env);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("hello"), "{}", out.stdout);
    assert!(!out.stdout.contains('\u{1b}'), "escape codes in the log: {:?}", out.stdout);
    let log = std::fs::read_to_string(job.dir().join("artifacts/plain/stdout")).unwrap();
    assert!(log.contains("hello") && !log.contains('\u{1b}'), "{log:?}");
    env.push(("ANSIBLE_FORCE_COLOR", "1"));
    let out = run("forced", &env);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains('\u{1b}'), "the Job asked for colour: {:?}", out.stdout);
}
