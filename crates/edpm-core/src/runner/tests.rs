//! The runner's pure half: events, the fold, the summary, the termination message, the retry.

use proptest::prelude::*;
use serde_json::json;

use std::collections::BTreeMap;

use super::events::*;
use super::fold::*;
use super::retry::*;
use super::summary::*;
use super::termination::*;
use super::text::*;
use crate::redact::Redactor;

/// A command line split at spaces, for the job contract's tests.
pub(super) fn argv(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_string).collect()
}

/// An environment lookup over `pairs`, for the job contract's tests.
pub(super) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let m: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |k| m.get(k).cloned()
}

fn ev(v: serde_json::Value) -> Event {
    parse_event(v.to_string().as_bytes()).unwrap()
}

fn task(uuid: &str, name: &str) -> serde_json::Value {
    json!({"event": "playbook_on_task_start", "event_data": {"task": name, "task_uuid": uuid, "play": "p"}})
}

fn on(kind: &str, host: &str, uuid: &str, name: &str, res: serde_json::Value) -> serde_json::Value {
    json!({"event": kind, "event_data": {"host": host, "task": name, "task_uuid": uuid, "play": "p",
           "resolved_action": "ansible.builtin.command", "task_path": "/p/site.yml:4", "res": res}})
}

fn facts(status: RunStatus, rc: i32) -> RunFacts {
    RunFacts { ident: "job".into(), status, rc, timeout: None, reason: None, attempt: 1, limit: None }
}

fn stats(v: serde_json::Value) -> serde_json::Value {
    json!({"event": "playbook_on_stats", "event_data": v})
}

fn fold(events: Vec<serde_json::Value>) -> Fold {
    let mut f = Fold::new();
    for e in events {
        f.push(ev(e));
    }
    f
}

/// An any_errors_fatal play: b fails at task 2, so a and c stop with it; d had finished
/// in an earlier play and is not interrupted.
fn fatal_play() -> Vec<serde_json::Value> {
    vec![
        json!({"event": "playbook_on_play_start", "event_data": {"play": "first", "play_index": 0, "play_count": 2}}),
        task("t0", "d only"),
        on("runner_on_start", "d", "t0", "d only", json!(null)),
        on("runner_on_ok", "d", "t0", "d only", json!({"changed": true})),
        json!({"event": "playbook_on_play_start", "event_data": {"play": "p", "play_uuid": "p2"}}),
        task("t1", "ping"),
        on("runner_on_start", "a", "t1", "ping", json!(null)),
        on("runner_on_start", "b", "t1", "ping", json!(null)),
        on("runner_on_start", "c", "t1", "ping", json!(null)),
        on("runner_on_ok", "a", "t1", "ping", json!({})),
        on("runner_on_ok", "b", "t1", "ping", json!({})),
        on("runner_on_ok", "c", "t1", "ping", json!({})),
        task("t2", "fail on b"),
        on("runner_on_start", "a", "t2", "fail on b", json!(null)),
        on("runner_on_start", "b", "t2", "fail on b", json!(null)),
        on("runner_on_start", "c", "t2", "fail on b", json!(null)),
        on("runner_on_skipped", "a", "t2", "fail on b", json!({})),
        on(
            "runner_on_failed",
            "b",
            "t2",
            "fail on b",
            json!({"msg": "non-zero return code", "rc": 1, "stderr": "warning\nno such file: /etc/x\n", "changed": true}),
        ),
        on("runner_on_skipped", "c", "t2", "fail on b", json!({})),
        stats(json!({"processed": {"a": 1, "b": 1, "c": 1, "d": 1}, "ok": {"a": 1, "b": 1, "c": 1, "d": 1},
                     "failures": {"b": 1}, "skipped": {"a": 1, "c": 1}, "changed": {"d": 1, "b": 0}, "dark": {}})),
    ]
}

/// `fatal_play` folded with the plugin's note that "p" is the playbook's last play.
fn fatal_summary() -> RunSummary {
    let mut f = Fold::new();
    f.set_notes(parse_notes(r#"{"kind": "play", "play_uuid": "p2", "play_index": 1, "play_count": 2}"#));
    fatal_play().into_iter().for_each(|e| f.push(ev(e)));
    f.finish(facts(RunStatus::Failed, 2), &Redactor::default())
}

#[test]
fn any_errors_fatal_interrupts_the_hosts_still_in_the_play() {
    let s = fatal_summary();
    assert!(!s.stopped_early);
    assert!(s.complete);
    assert_eq!(s.hosts_with(HostStatus::Failed), ["b"]);
    assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "c"]);
    assert_eq!(s.hosts_with(HostStatus::Ok), ["d"]);
    let b = &s.hosts["b"];
    assert_eq!((b.ok, b.failures, b.changed), (1, 1, 0));
    let t = b.failed_task.as_ref().unwrap();
    assert_eq!(t.task, "fail on b");
    assert_eq!(t.play.as_deref(), Some("p"));
    assert_eq!(t.path.as_deref(), Some("/p/site.yml:4"));
    assert_eq!(t.message, "non-zero return code (rc 1): no such file: /etc/x");
    assert_eq!(
        s.termination_message.to_json(),
        r#"{"failedHostList":["b"],"failedHosts":1,"failurePercent":25,"hostFailures":{"b":"fail on b (p/site.yml:4): non-zero return code (rc 1): no such file: /etc/x"},"rc":2,"status":"failed","totalHosts":4,"truncated":false,"unreachableHostList":[],"unreachableHosts":0}"#
    );
}

#[test]
fn a_play_that_goes_on_after_a_failure_interrupts_nobody() {
    let mut events = fatal_play();
    let stats_event = events.pop().unwrap();
    events.push(task("t3", "after"));
    for h in ["a", "c"] {
        events.push(on("runner_on_start", h, "t3", "after", json!(null)));
        events.push(on("runner_on_ok", h, "t3", "after", json!({})));
    }
    events.push(stats_event);
    let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(s.hosts_with(HostStatus::Interrupted).is_empty());
}

#[test]
fn a_playbook_that_ends_before_its_last_play_stopped_early() {
    // Without the plugin's note, the stop in play "p" may have skipped later plays.
    let s = fold(fatal_play()).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(s.stopped_early);
    assert_eq!(retry_plan(Some(&s)).scope, RetryScope::Everything);
    assert!(
        retry_plan(Some(&s)).note.contains("stopped before its last play"),
        "{}",
        retry_plan(Some(&s)).note
    );
    // With it: "p" is the last play, nothing was skipped.
    assert!(!fatal_summary().stopped_early);
}

#[test]
fn limited_hosts_no_event_mentions_were_not_reached() {
    let mut f = facts(RunStatus::Failed, 4);
    f.limit = Some(vec!["a".into(), "u".into(), "x".into()]);
    let events = vec![
        json!({"event": "playbook_on_play_start", "event_data": {"play": "first", "play_index": 0, "play_count": 2}}),
        task("t1", "ping"),
        on("runner_on_unreachable", "u", "t1", "ping", json!({"msg": "refused"})),
        stats(json!({"processed": {"u": 1}, "dark": {"u": 1}})),
    ];
    let s = fold(events).finish(f, &Redactor::default());
    assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "x"]);
    assert_eq!(s.hosts_with(HostStatus::Unreachable), ["u"]);
    assert!(s.stopped_early);
    let plan = retry_plan(Some(&s));
    assert_eq!(plan.scope, RetryScope::Hosts(vec!["a".into(), "u".into(), "x".into()]));
}

#[test]
fn a_later_play_without_hosts_does_not_undo_the_stop() {
    // What ansible-core 2.19 sends after any_errors_fatal stops a play that another play
    // follows: the next play starts with no host left to run.
    let mut events = fatal_play();
    let stats_event = events.pop().unwrap();
    events.push(json!({"event": "playbook_on_play_start", "event_data": {"play": "second"}}));
    events.push(stats_event);
    let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "c"]);
}

#[test]
fn the_plugin_saying_not_fatal_interrupts_nobody() {
    let mut events = fatal_play();
    events[17]["event_data"]["any_errors_fatal"] = json!(false);
    let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(s.hosts_with(HostStatus::Interrupted).is_empty());
}

#[test]
fn fatality_from_the_plugin_fills_events_that_lack_it() {
    let lines = concat!(
        "{\"kind\": \"failure\", \"host\": \"b\", \"task_uuid\": \"t2\", \"any_errors_fatal\": false}\n",
        "not json\n",
        "{\"kind\": \"play\", \"play_uuid\": \"p2\", \"play_index\": 1, \"play_count\": 2}\n",
    );
    let notes = parse_notes(lines);
    assert_eq!((notes.fatality.len(), notes.plays.get("p2")), (1, Some(&(1, 2))));
    let mut f = Fold::new();
    f.set_notes(notes);
    for e in fatal_play() {
        f.push(ev(e));
    }
    assert!(f.play_position.is_some(), "the play's place came from the notes");
    let s = f.finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(s.hosts_with(HostStatus::Interrupted).is_empty());
}

#[test]
fn zero_counts_never_make_a_host_failed() {
    let s = fold(vec![stats(json!({"processed": {"a": 1, "b": 1}, "ok": {"a": 2, "b": 2},
                                      "failures": {"a": 0}, "dark": {"b": 0}}))])
    .finish(facts(RunStatus::Successful, 0), &Redactor::default());
    assert_eq!(s.hosts_with(HostStatus::Ok), ["a", "b"]);
    let m = &s.termination_message;
    assert_eq!((m.failed_hosts, m.unreachable_hosts, m.total_hosts, m.failure_percent), (0, 0, 2, 0));
}

#[test]
fn a_run_cut_short_counts_events_and_interrupts_every_host_still_running() {
    let mut events = fatal_play();
    events.truncate(17); // up to c's start of task 2, b's failure not yet seen
    let s = fold(events).finish(facts(RunStatus::Canceled, 254), &Redactor::default());
    assert!(!s.complete);
    assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "b", "c", "d"]);
    assert_eq!((s.hosts["a"].ok, s.hosts["a"].skipped, s.hosts["d"].changed), (1, 1, 1));
    assert_eq!(s.termination_message.status, RunStatus::Canceled);
    assert_eq!(s.termination_message.total_hosts, 4);
}

#[test]
fn rescued_and_ignored_failures_are_not_the_failed_task() {
    let events = vec![
        task("t1", "rescued"),
        on("runner_on_start", "a", "t1", "rescued", json!(null)),
        on("runner_on_failed", "a", "t1", "rescued", json!({"msg": "first"})),
        task("t2", "rescue task"),
        on("runner_on_ok", "a", "t2", "rescue task", json!({})),
        task("t3", "ignored"),
        json!({"event": "runner_on_failed", "event_data": {"host": "a", "task": "ignored", "task_uuid": "t3",
               "ignore_errors": true, "res": {"msg": "ignored", "changed": true}}}),
        task("t4", "real"),
        on("runner_on_failed", "a", "t4", "real", json!({"msg": "the real one"})),
        stats(json!({"processed": {"a": 1}, "ok": {"a": 2}, "failures": {"a": 1}, "rescued": {"a": 1},
                     "ignored": {"a": 1}, "changed": {"a": 1}})),
    ];
    let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    let a = &s.hosts["a"];
    assert_eq!((a.rescued, a.ignored, a.failures), (1, 1, 1));
    assert_eq!(a.failed_task.as_ref().unwrap().task, "real");
    assert_eq!(a.failed_task.as_ref().unwrap().message, "the real one");
}

#[test]
fn unreachable_hosts_report_where_and_why() {
    let events = vec![
        task("t1", "ping"),
        on("runner_on_start", "d", "t1", "ping", json!(null)),
        on(
            "runner_on_unreachable",
            "d",
            "t1",
            "ping",
            json!({"unreachable": true, "msg": "Failed to connect to the host via ssh: ssh: connect to host 127.0.0.2 port 1: Connection refused"}),
        ),
        stats(json!({"processed": {"d": 1}, "dark": {"d": 1}})),
    ];
    let s = fold(events).finish(facts(RunStatus::Failed, 4), &Redactor::default());
    let d = &s.hosts["d"];
    assert_eq!(d.status, HostStatus::Unreachable);
    let t = d.failed_task.as_ref().unwrap();
    assert!(t.unreachable && t.message.starts_with("Failed to connect"), "{t:?}");
    assert_eq!(s.termination_message.unreachable_host_list, ["d"]);
    assert_eq!(s.termination_message.failure_percent, 100);
    assert_eq!(s.reason.as_deref(), Some("Ansible's exit code 4: one or more hosts were unreachable"));
}

#[test]
fn an_exit_code_without_a_reason_of_ours_says_what_ansible_means_by_it() {
    // 4 and no host at all: Ansible could not parse the playbook.
    let s = fold(vec![]).finish(facts(RunStatus::Failed, 4), &Redactor::default());
    assert!(s.reason.as_deref().unwrap().contains("could not parse its input"), "{:?}", s.reason);
    // Our own reason (a timeout, a signal) comes first; a successful run has none.
    let mut f = facts(RunStatus::Timeout, 254);
    f.reason = Some("job timeout".into());
    assert_eq!(fold(vec![]).finish(f, &Redactor::default()).reason.as_deref(), Some("job timeout"));
    assert_eq!(fold(vec![]).finish(facts(RunStatus::Successful, 0), &Redactor::default()).reason, None);
    assert_eq!(fold(vec![]).finish(facts(RunStatus::Failed, 137), &Redactor::default()).reason, None);
}

#[test]
fn the_job_log_escapes_control_characters_and_the_summary_keeps_them() {
    let host = "evil\u{1b}cHost\r\u{7}";
    let events = vec![
        task("t1", "bad \u{1b}[2J task"),
        on("runner_on_failed", host, "t1", "bad \u{1b}[2J task", json!({"msg": "boom \u{7}\u{9b}X"})),
        stats(json!({"processed": {host: 1}, "failures": {host: 1}})),
    ];
    let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(s.hosts.contains_key(host), "the summary keeps the exact name");
    let log = describe(&s, "; summary in /a\u{1b}b");
    assert!(!log.contains(['\u{1b}', '\r', '\u{7}', '\u{9b}']), "{log:?}");
    assert!(log.contains("failed 1 (evil\\ecHost\\r\\x07)"), "{log}");
    assert!(
        log.contains(
            "edpm-agent: evil\\ecHost\\r\\x07: failed at task \"bad \\e[2J task\": boom \\x07\\u{9b}X"
        ),
        "{log}"
    );
    assert!(log.contains("summary in /a\\eb"), "{log}");
    // Ansible reads the limit file in text mode: a CR would cut the name in two.
    let prev = RunSummary { complete: true, stopped_early: false, ..s };
    let plan = retry_plan(Some(&prev));
    assert_eq!(plan.scope, RetryScope::Everything);
    assert!(plan.note.contains("host name \"evil\\u{1b}cHost\\r\\u{7}\" cannot be used"), "{}", plan.note);
    let mut prev = prev;
    let h = prev.hosts.remove(host).unwrap();
    prev.hosts.insert("evil\u{1b}cHost\u{7}".into(), h.clone());
    let plan = retry_plan(Some(&prev));
    assert!(plan.note.ends_with(": evil\\ecHost\\x07"), "{}", plan.note);
    assert_eq!(plan.scope, RetryScope::Hosts(vec!["evil\u{1b}cHost\u{7}".into()]));
    for name in [" lead", "trail\t", "sep\u{1f}"] {
        prev.hosts = BTreeMap::from([(name.to_string(), h.clone())]);
        assert_eq!(retry_plan(Some(&prev)).scope, RetryScope::Everything, "{name:?}");
    }
}

#[test]
fn task_and_play_names_are_redacted_like_messages() {
    let events = vec![
        json!({"event": "playbook_on_play_start", "event_data": {"play": "as Zq7"}}),
        task("t1", "deploy Qu0te-Pw9x"),
        on("runner_on_failed", "h", "t1", "deploy Qu0te-Pw9x", json!({"msg": "token LeakToken6 and Zq7"})),
    ];
    let mut f = fold(events);
    f.push(ev(
        json!({"event": "runner_on_failed", "event_data": {"host": "g", "task": "log in", "task_uuid": "t1",
        "play": "as Zq7", "task_path": "/p/Qu0te-Pw9x/site.yml:3", "res": {"msg": "x"}}}),
    ));
    let r = Redactor::default().with_named(["Qu0te-Pw9x".to_string(), "Zq7".to_string()]);
    let s = f.finish(facts(RunStatus::Failed, 2), &r);
    let t = s.hosts["h"].failed_task.as_ref().unwrap();
    assert_eq!((t.task.as_str(), t.message.as_str()), ("deploy ********", "token ******** and ********"));
    let t = s.hosts["g"].failed_task.as_ref().unwrap();
    assert_eq!((t.play.as_deref(), t.path.as_deref()), (Some("as ********"), Some("/p/********/site.yml:3")));
}

#[test]
fn an_unknown_return_code_is_said_never_shown_as_a_number() {
    let mut f = facts(RunStatus::Failed, RC_UNKNOWN);
    f.reason = Some("the run's return code is unknown: /a/rc is missing".into());
    let s = fold(vec![]).finish(f, &Redactor::default());
    assert_eq!(
        describe(&s, ""),
        "edpm-agent: failed (rc unknown): 0 host(s); the run's return code is unknown: /a/rc is missing\n"
    );
}

#[test]
fn no_log_results_are_never_read() {
    let events = vec![
        on(
            "runner_on_failed",
            "a",
            "t1",
            "secret",
            json!({"censored": "the output has been hidden", "_ansible_no_log": true, "msg": "pw=hunter22"}),
        ),
        on(
            "runner_on_failed",
            "b",
            "t1",
            "loop",
            json!({"msg": "One or more items failed", "results": [
                {"failed": false, "item": 1},
                {"failed": true, "_ansible_no_log": true, "msg": "pw=hunter22"}]}),
        ),
    ];
    let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    for h in ["a", "b"] {
        let m = &s.hosts[h].failed_task.as_ref().unwrap().message;
        assert!(m.contains("no_log") && !m.contains("hunter22"), "{m}");
    }
}

#[test]
fn loop_failures_name_the_item() {
    let s = fold(vec![on(
        "runner_on_failed",
        "a",
        "t1",
        "loop",
        json!({"msg": "One or more items failed", "results": [
            {"failed": false, "item": "x"}, {"failed": true, "item": "nova", "msg": "no package nova"}]}),
    )])
    .finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert_eq!(s.hosts["a"].failed_task.as_ref().unwrap().message, "item nova: no package nova");
}

#[test]
fn messages_are_redacted_then_cut() {
    let long = format!(
        "rabbit://nova:S3cr3tPw@rabbitmq.openstack.svc:5672/?ssl=1 password=hunter22 \"token\": \"abc\" cell-secret-value {}",
        "x".repeat(400)
    );
    let s = fold(vec![on("runner_on_failed", "a", "t1", "t", json!({"msg": long}))])
        .finish(facts(RunStatus::Failed, 2), &Redactor::new(["cell-secret-value".to_string()]));
    let m = &s.hosts["a"].failed_task.as_ref().unwrap().message;
    assert_eq!(m.chars().count(), MESSAGE_LIMIT);
    assert!(m.ends_with('…'));
    for leak in ["S3cr3tPw", "hunter22", "abc", "cell-secret-value"] {
        assert!(!m.contains(leak), "{leak} in {m}");
    }
    assert!(m.starts_with("rabbit://nova:********@rabbitmq.openstack.svc:5672/"), "{m}");
}

#[test]
fn event_files_are_named_counter_uuid() {
    assert_eq!(event_file_counter("12-02fc0000-0001-bd3f.json"), Some(12));
    assert_eq!(event_file_counter("02fc0000-partial.json"), None);
    assert_eq!(event_file_counter("3-abc.json.tmp"), None);
    assert_eq!(event_file_counter("x-abc.json"), None);
}

#[test]
fn odd_event_data_is_read_leniently() {
    let e = ev(
        json!({"event": "runner_on_failed", "counter": 3, "event_data": {"host": "a", "ignore_errors": null,
        "res": {"msg": {"nested": ["list"]}, "rc": "2", "stderr": 5, "changed": "yes"}}}),
    );
    assert_eq!(e.counter, 3);
    assert!(e.changed);
    assert_eq!(e.failure.unwrap().text, "{\"nested\":[\"list\"]} (rc 2): 5");
    assert!(parse_event(b"{\"no\": \"event\"}").is_err());
    let s = ev(stats(json!({"processed": {"a": 1}, "failures": {"a": "2", "b": 1.0, "c": null}})));
    let st = s.stats.unwrap();
    assert_eq!((st.failures["a"], st.failures["b"], st.failures["c"]), (2, 1, 0));
}

#[test]
fn termination_message_keys_are_sorted() {
    let text = TerminationMessage::default().to_json();
    let v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    let keys: Vec<&String> = v.keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    // serde_json's Map keeps keys sorted; compare with the text's own order instead.
    let order: Vec<usize> = keys.iter().map(|k| text.find(&format!("\"{k}\":")).unwrap()).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert_eq!(keys, sorted);
}

fn failed_task(message: &str, unreachable: bool) -> Option<FailedTask> {
    Some(FailedTask {
        task: "Deploy nova".into(),
        action: Some("ansible.builtin.command".into()),
        play: None,
        path: Some(
            "/usr/share/ansible/collections/ansible_collections/osp/edpm/roles/edpm_nova/tasks/main.yml:12"
                .into(),
        ),
        unreachable,
        message: message.into(),
    })
}

fn summary_with(failed: &[String], unreachable: &[String], ok: usize) -> RunSummary {
    let mut hosts = BTreeMap::new();
    for h in failed {
        let message = format!("non-zero return code (rc 125): Error: cannot pull image for {h}");
        hosts.insert(
            h.clone(),
            HostResult {
                failures: 1,
                status: HostStatus::Failed,
                failed_task: failed_task(&message, false),
                ..Default::default()
            },
        );
    }
    for h in unreachable {
        hosts.insert(
            h.clone(),
            HostResult {
                dark: 1,
                status: HostStatus::Unreachable,
                failed_task: failed_task("Failed to connect to the host via ssh: timed out", true),
                ..Default::default()
            },
        );
    }
    for i in 0..ok {
        hosts.insert(format!("ok-{i}"), HostResult::default());
    }
    let mut s = RunSummary::invalid("job", 2, "x", 1, None);
    s.status = RunStatus::Failed;
    s.hosts = hosts;
    s
}

proptest! {
    // Generating hundreds of long names is slow in a debug build: fewer, still large, cases.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn termination_message_fits_and_keeps_counts(
        failed in proptest::collection::btree_set("[a-z0-9.\\-é\"\\\\]{1,64}", 0..200),
        unreachable in proptest::collection::btree_set("u[a-z0-9.\\-]{1,64}", 0..200),
        ok in 0usize..50,
    ) {
        let failed: Vec<String> = failed.into_iter().map(|h| format!("f{h}")).collect();
        let unreachable: Vec<String> = unreachable.into_iter().collect();
        let s = summary_with(&failed, &unreachable, ok);
        let m = TerminationMessage::from_summary(&s);
        let text = m.to_json();
        prop_assert!(text.len() <= TERMINATION_MESSAGE_LIMIT);
        prop_assert_eq!(m.failed_hosts as usize, failed.len());
        prop_assert_eq!(m.unreachable_hosts as usize, unreachable.len());
        prop_assert_eq!(m.total_hosts as usize, failed.len() + unreachable.len() + ok);
        prop_assert!(failed.starts_with(&m.failed_host_list));
        prop_assert!(unreachable.starts_with(&m.unreachable_host_list));
        let full = m.failed_host_list.len() == failed.len() && m.unreachable_host_list.len() == unreachable.len();
        prop_assert_eq!(m.truncated, !full);
        let back: TerminationMessage = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&back, &m);
        // Reasons: only of failed or unreachable hosts, failed ones first; each whole or cut
        // to one common length; the rest counted, unless not even the count fits.
        let reasons = m.host_failures.len() + m.host_failures_omitted as usize;
        prop_assert!(reasons == failed.len() + unreachable.len() || reasons == 0);
        // The first host's reason keeps its room ahead of the lists' tails.
        if let Some(first) = failed.first().or(unreachable.first()) {
            prop_assert!(m.host_failures.contains_key(first), "{}", text);
        }
        for (h, r) in &m.host_failures {
            prop_assert!(failed.contains(h) || unreachable.contains(h));
            prop_assert!(r.starts_with("Deploy nova (edpm_nova/tasks/main.yml:12): ") || r.ends_with('…'));
        }
        // One cut for all: some length c with every shortened reason exactly `cut(original, c)`
        // (`cut` trims the space before its ellipsis, so the lengths may differ by that).
        let original = |h: &str| s.hosts[h].failed_task.as_ref().unwrap().reason();
        // The first reason may be longer: it keeps the room it was given ahead of the lists.
        let first = failed.first().or(unreachable.first());
        let shortened: Vec<(String, &String)> = m
            .host_failures
            .iter()
            .filter(|(h, r)| r.ends_with('…') && Some(*h) != first)
            .map(|(h, r)| (original(h), r))
            .collect();
        if let Some((o, r)) = shortened.first() {
            let fits = |c: usize| shortened.iter().all(|(o, r)| &cut(o, c) == *r);
            prop_assert!(
                (r.chars().count()..=o.chars().count()).any(fits),
                "no common cut: {:?}",
                shortened
            );
        }
        if m.host_failures.keys().any(|h| unreachable.contains(h)) {
            prop_assert!(failed.iter().all(|f| m.host_failures.contains_key(f)));
        }
    }

    #[test]
    fn redacted_messages_never_hold_the_secret(secret in "[A-Za-z0-9+/]{6,40}", pad in "[ a-z:=]{0,300}") {
        let r = Redactor::new([secret.clone()]);
        let text = format!("{pad}{secret}{pad}");
        let m = cut(&one_line(&r.redact(&text)), MESSAGE_LIMIT);
        prop_assert!(!m.contains(&secret));
        prop_assert!(m.chars().count() <= MESSAGE_LIMIT);
    }
}

#[test]
fn the_first_failed_hosts_reason_is_kept_ahead_of_the_host_lists_tail() {
    // 400 failed hosts: their names alone are more than the 4096 bytes.
    let failed: Vec<String> = (0..400).map(|i| format!("edpm-compute-{i:04}.example.com")).collect();
    let s = summary_with(&failed, &["u-1".into()], 0);
    let m = TerminationMessage::from_summary(&s);
    assert!(m.to_json().len() <= TERMINATION_MESSAGE_LIMIT);
    assert_eq!((m.failed_hosts, m.unreachable_hosts, m.total_hosts, m.truncated), (400, 1, 401, true));
    assert_eq!(
        m.host_failures[&failed[0]],
        "Deploy nova (edpm_nova/tasks/main.yml:12): non-zero return code (rc 125): Error: cannot pull image for edpm-compute-0000.example.com"
    );
    assert_eq!(m.host_failures_omitted, 401 - m.host_failures.len() as u64);
    assert!(!m.failed_host_list.is_empty() && failed.starts_with(&m.failed_host_list));
    // A host whose name leaves no room beside the counts: the message still fits, without it.
    let huge = vec!["h".repeat(5000)];
    let m = TerminationMessage::from_summary(&summary_with(&huge, &[], 0));
    assert!(m.to_json().len() <= TERMINATION_MESSAGE_LIMIT);
    assert_eq!((m.failed_hosts, m.host_failures.len()), (1, 0));
    // A long name that fits with a shorter cut of its reason.
    let long = vec!["h".repeat(3700)];
    let m = TerminationMessage::from_summary(&summary_with(&long, &[], 0));
    assert!(m.to_json().len() <= TERMINATION_MESSAGE_LIMIT);
    assert!(m.host_failures[&long[0]].ends_with('…'), "{:?}", m.host_failures);
}

#[test]
fn the_termination_message_says_why_each_host_failed() {
    let s = summary_with(&["edpm-compute-5".into()], &["edpm-compute-7".into()], 3);
    let m = TerminationMessage::from_summary(&s);
    assert_eq!(
        m.host_failures["edpm-compute-5"],
        "Deploy nova (edpm_nova/tasks/main.yml:12): non-zero return code (rc 125): Error: cannot pull image for edpm-compute-5"
    );
    assert_eq!(
        m.host_failures["edpm-compute-7"],
        "Deploy nova (edpm_nova/tasks/main.yml:12): Failed to connect to the host via ssh: timed out"
    );
    assert_eq!(m.host_failures_omitted, 0);
    // Upstream's fields are where they were; the new key sorts among them.
    let text = m.to_json();
    assert!(
        text.starts_with(
            r#"{"failedHostList":["edpm-compute-5"],"failedHosts":1,"failurePercent":40,"hostFailures":{"#
        ),
        "{text}"
    );
    // A run without failures writes exactly upstream's keys.
    let ok = TerminationMessage::from_summary(&summary_with(&[], &[], 2)).to_json();
    assert!(!ok.contains("hostFailures"), "{ok}");
    // Paths outside a role: from the project directory on, else their last three parts.
    let mut t = failed_task("boom", false).unwrap();
    t.path = Some("/runner/project/playbooks/deploy.yml:4".into());
    assert_eq!(t.reason(), "Deploy nova (playbooks/deploy.yml:4): boom");
    t.path = Some("/usr/share/edpm/playbooks/deploy.yml:4".into());
    assert_eq!(t.reason(), "Deploy nova (edpm/playbooks/deploy.yml:4): boom");
    t.path = None;
    assert_eq!(t.reason(), "Deploy nova: boom");
}

#[test]
fn many_failed_hosts_share_the_room_fairly() {
    let failed: Vec<String> = (0..200).map(|i| format!("edpm-compute-{i:03}")).collect();
    let m = TerminationMessage::from_summary(&summary_with(&failed, &[], 0));
    assert!(m.to_json().len() <= TERMINATION_MESSAGE_LIMIT);
    // 200 names take most of the room: the first hosts' reasons, cut alike, and a count.
    assert!(!m.host_failures.is_empty() && m.host_failures_omitted > 0, "{}", m.to_json());
    assert_eq!(m.host_failures.len() + m.host_failures_omitted as usize, 200);
    assert!(m.host_failures.contains_key("edpm-compute-000"));
    let few: Vec<String> = (0..20).map(|i| format!("edpm-compute-{i:03}")).collect();
    let m = TerminationMessage::from_summary(&summary_with(&few, &[], 0));
    assert_eq!((m.host_failures.len(), m.host_failures_omitted), (20, 0), "{}", m.to_json());
}

#[test]
fn retry_picks_failed_unreachable_and_interrupted_hosts() {
    let mut s = fatal_summary();
    s.hosts.insert("e".into(), HostResult { dark: 1, status: HostStatus::Unreachable, ..Default::default() });
    let plan = retry_plan(Some(&s));
    assert_eq!(plan.scope, RetryScope::Hosts(vec!["a".into(), "b".into(), "c".into(), "e".into()]));
    assert!(
        plan.note.contains("attempt 1 ended failed") && plan.note.contains("a, b, c, e"),
        "{}",
        plan.note
    );
    assert!(
        plan.note.contains("failed (1), unreachable (1) or interrupted (2) host(s) of 5"),
        "{}",
        plan.note
    );

    assert_eq!(retry_plan(None).scope, RetryScope::Everything);

    let mut cut_short = s.clone();
    cut_short.complete = false;
    cut_short.limit = Some(vec!["a".into(), "b".into()]);
    let plan = retry_plan(Some(&cut_short));
    assert_eq!(plan.scope, RetryScope::Hosts(vec!["a".into(), "b".into()]));
    cut_short.limit = None;
    assert_eq!(retry_plan(Some(&cut_short)).scope, RetryScope::Everything);

    let invalid = RunSummary::invalid("job", 3, "bad", 2, None);
    assert_eq!(retry_plan(Some(&invalid)).scope, RetryScope::Everything);

    let mut odd = s.clone();
    odd.hosts.insert(
        "web[1]".into(),
        HostResult { failures: 1, status: HostStatus::Failed, ..Default::default() },
    );
    let plan = retry_plan(Some(&odd));
    assert_eq!(plan.scope, RetryScope::Everything);
    assert!(plan.note.contains("web[1]"), "{}", plan.note);
}

#[test]
fn summaries_read_back_and_tolerate_unknown_fields() {
    let s = fold(fatal_play()).finish(facts(RunStatus::Failed, 2), &Redactor::default());
    let text = serde_json::to_string_pretty(&s).unwrap();
    let back: RunSummary = serde_json::from_str(&text).unwrap();
    assert_eq!(back, s);
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["somethingNew"] = json!(1);
    v["hosts"]["a"]["newCounter"] = json!(2);
    assert!(serde_json::from_value::<RunSummary>(v).is_ok());
}

#[test]
fn cut_and_one_line() {
    assert_eq!(one_line("a\n  b\t c "), "a b c");
    assert_eq!(cut("abc", 3), "abc");
    assert_eq!(cut("abcd", 3), "ab…");
    assert_eq!(cut("ééééé", 4), "ééé…");
    assert_eq!(strip_ansi("\u{1b}[0;31mred\u{1b}[0m"), "red");
}

/// `fatal_play` folded with the plugin's note on "p": the playbook's last play, of `shape`.
fn fatal_with_shape(events: Vec<serde_json::Value>, shape: &str, facts: RunFacts) -> RunSummary {
    let mut f = Fold::new();
    f.set_notes(parse_notes(&format!(
        r#"{{"kind": "play", "play_uuid": "p2", "play_index": 1, "play_count": 2, {shape}}}"#
    )));
    events.into_iter().for_each(|e| f.push(ev(e)));
    f.finish(facts, &Redactor::default())
}

const LINEAR: &str = r#""linear": true, "serial": false"#;

fn completed(s: &RunSummary) -> Vec<&str> {
    s.hosts.iter().filter(|(_, h)| h.completed).map(|(n, _)| n.as_str()).collect()
}

#[test]
fn any_errors_fatal_completes_only_the_hosts_the_playbook_ran_to_its_end_for() {
    let s = fatal_with_shape(fatal_play(), LINEAR, facts(RunStatus::Failed, 2));
    assert!(s.ran_to_end);
    // d finished play 1 and is not in "p"; a and c stopped with b.
    assert_eq!(completed(&s), ["d"]);
    assert_eq!(s.termination_message.completed_host_list, ["d"]);
    assert_eq!(
        s.termination_message.to_json(),
        r#"{"completedHostList":["d"],"failedHostList":["b"],"failedHosts":1,"failurePercent":25,"hostFailures":{"b":"fail on b (p/site.yml:4): non-zero return code (rc 1): no such file: /etc/x"},"rc":2,"status":"failed","totalHosts":4,"truncated":false,"unreachableHostList":[],"unreachableHosts":0}"#
    );
    // Read back from the pod as readiness reads it.
    let back: TerminationMessage = serde_json::from_str(&s.termination_message.to_json()).unwrap();
    assert_eq!(back.completed_host_list, ["d"]);
}

#[test]
fn a_last_play_in_batches_that_failed_completes_no_host_it_did_not_see() {
    // d may have been in a batch of "p" that never ran.
    let s = fatal_with_shape(fatal_play(), r#""linear": true, "serial": true"#, facts(RunStatus::Failed, 2));
    assert!(completed(&s).is_empty());
    assert!(!s.termination_message.to_json().contains("completedHostList"));
    // Not knowing the play's shape is the same.
    assert!(completed(&fatal_summary()).is_empty());
}

/// "p" goes on after b's failure, which could have stopped it (`max_fail_percentage` not
/// exceeded): a and c run its last task.
fn play_going_on() -> Vec<serde_json::Value> {
    let mut events = fatal_play();
    let stats_event = events.pop().unwrap();
    events[17]["event_data"]["any_errors_fatal"] = json!(true);
    events.push(task("t3", "after"));
    for h in ["a", "c"] {
        events.push(on("runner_on_start", h, "t3", "after", json!(null)));
        events.push(on("runner_on_ok", h, "t3", "after", json!({})));
    }
    events.push(stats_event);
    events
}

#[test]
fn max_fail_percentage_not_reached_completes_the_others_under_the_linear_strategy_only() {
    let s = fatal_with_shape(play_going_on(), LINEAR, facts(RunStatus::Failed, 2));
    assert_eq!(completed(&s), ["a", "c", "d"]);
    // Under `free`, a host can be stopped anywhere without the events showing it.
    let s =
        fatal_with_shape(play_going_on(), r#""linear": false, "serial": false"#, facts(RunStatus::Failed, 2));
    assert_eq!(completed(&s), ["d"]);
}

#[test]
fn a_run_cut_short_or_stopped_before_its_last_play_completes_nobody() {
    // SIGTERM or a timeout: no statistics.
    let mut events = play_going_on();
    events.pop();
    let s = fatal_with_shape(events, LINEAR, facts(RunStatus::Canceled, 143));
    assert!(!s.ran_to_end && completed(&s).is_empty());
    assert!(!s.termination_message.to_json().contains("completedHostList"));
    // The last play that started is not the playbook's last (any_errors_fatal in play 1 of 3).
    let mut f = Fold::new();
    f.set_notes(parse_notes(r#"{"kind": "play", "play_uuid": "p2", "play_index": 1, "play_count": 3, "linear": true, "serial": false}"#));
    fatal_play().into_iter().for_each(|e| f.push(ev(e)));
    let s = f.finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(!s.ran_to_end && completed(&s).is_empty());
    // An event that could not be read may have been a failure.
    let mut f = Fold::new();
    f.set_notes(parse_notes(&format!(
        r#"{{"kind": "play", "play_uuid": "p2", "play_index": 1, "play_count": 2, {LINEAR}}}"#
    )));
    play_going_on().into_iter().for_each(|e| f.push(ev(e)));
    f.unreadable();
    let s = f.finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(completed(&s).is_empty());
}

#[test]
fn a_successful_run_lists_no_completed_hosts() {
    let mut events = play_going_on();
    events.retain(|e| e["event"] != "runner_on_failed");
    let last = events.len() - 1;
    events[last] =
        stats(json!({"processed": {"a": 1, "b": 1, "c": 1, "d": 1}, "ok": {"a": 1, "b": 1, "c": 1, "d": 1}}));
    let s = fatal_with_shape(events, LINEAR, facts(RunStatus::Successful, 0));
    assert_eq!(completed(&s), ["a", "b", "c", "d"]);
    assert!(!s.termination_message.to_json().contains("completedHostList"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Completed hosts take only the room upstream's lists and the first reason leave, and
    /// a list cut for room names only hosts that completed.
    #[test]
    fn completed_hosts_never_crowd_out_upstreams_lists(
        failed in proptest::collection::btree_set("[a-z0-9.\\-]{1,40}", 0..120),
        done in proptest::collection::btree_set("[a-z0-9.\\-]{1,40}", 0..300),
    ) {
        let failed: Vec<String> = failed.into_iter().map(|h| format!("f{h}")).collect();
        let done: Vec<String> = done.into_iter().map(|h| format!("ok-{h}")).collect();
        let mut s = summary_with(&failed, &[], 0);
        let without = TerminationMessage::from_summary(&s);
        for h in &done {
            s.hosts.insert(h.clone(), HostResult { completed: true, ..Default::default() });
        }
        let m = TerminationMessage::from_summary(&s);
        prop_assert!(m.to_json().len() <= TERMINATION_MESSAGE_LIMIT);
        prop_assert_eq!(&m.failed_host_list, &without.failed_host_list);
        prop_assert_eq!(m.total_hosts as usize, failed.len() + done.len());
        prop_assert!(done.starts_with(&m.completed_host_list));
        if m.completed_host_list.len() < done.len() {
            prop_assert!(m.truncated);
        }
        if let Some(first) = failed.first() {
            prop_assert_eq!(m.host_failures.get(first), without.host_failures.get(first));
        }
    }
}

#[test]
fn a_last_play_that_started_with_no_host_left_credits_nobody_it_did_not_see() {
    // Play "p" stops (any_errors_fatal); a third play, the playbook's last, starts with no
    // host left to run: d, not in "p", never ran it.
    let mut events = fatal_play();
    let stats_event = events.pop().unwrap();
    events
        .push(json!({"event": "playbook_on_play_start", "event_data": {"play": "third", "play_uuid": "p3"}}));
    events.push(stats_event);
    let mut f = Fold::new();
    f.set_notes(parse_notes(concat!(
        "{\"kind\": \"play\", \"play_uuid\": \"p2\", \"play_index\": 1, \"play_count\": 3, \"linear\": true, \"serial\": false}\n",
        "{\"kind\": \"play\", \"play_uuid\": \"p3\", \"play_index\": 2, \"play_count\": 3, \"linear\": true, \"serial\": false}\n",
    )));
    events.into_iter().for_each(|e| f.push(ev(e)));
    let s = f.finish(facts(RunStatus::Failed, 2), &Redactor::default());
    assert!(s.ran_to_end);
    assert!(completed(&s).is_empty(), "{:?}", completed(&s));
}
