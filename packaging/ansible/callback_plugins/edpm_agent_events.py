# Copyright edpm-agent contributors. Licensed under the Apache License, Version 2.0.
"""Events for `edpm-agent run`.

With EDPM_AGENT_EVENTS_DIR set (edpm-agent runs ansible-playbook itself, in an image without
ansible-runner), it writes ansible-runner's job_events layout. With EDPM_AGENT_NOTES_FILE set
(under ansible-runner, whose own events lack these facts), it appends JSON lines:
{"kind": "play", "play_uuid", "play_index", "play_count", "linear", "serial"} when a play starts, and
{"kind": "failure", "host", "task_uuid", "any_errors_fatal"} for each failure, so edpm-agent can
tell hosts a play stopped under from hosts that had finished, and a playbook that ended early
from one that ran its last play.

Each event is one JSON file, <counter>-<uuid>.json, written to a temporary name and renamed
into $EDPM_AGENT_EVENTS_DIR, with ansible-runner's field names: event, counter, uuid, created,
runner_ident, event_data {playbook, play, play_uuid, task, task_uuid, task_action,
resolved_action, task_path, host, res, ignore_errors, and the statistics}. Only the parts of a
result edpm-agent reads are kept (msg, rc, stderr, stdout, changed, failed, no_log markers,
loop items). Failure events also carry any_errors_fatal, which ansible-runner's do not: true
when the failure can stop the play for every host (the task's any_errors_fatal or run_once, or a
play with max_fail_percentage); play start events carry play_index and play_count, and the
play's shape: linear (its strategy is linear, so every host still in the play starts each task
and a host a failure stopped is seen stopping there) and serial (it runs in batches, so a batch
that fails can leave later batches never run).
Embedded in the edpm-agent binary; edpm-agent writes it to a temporary directory and enables
it through ANSIBLE_CALLBACK_PLUGINS and ANSIBLE_CALLBACKS_ENABLED.
"""

DOCUMENTATION = """
    name: edpm_agent_events
    type: notification
    short_description: ansible-runner style job_events for edpm-agent
    description:
      - Writes one JSON file per event into the directory named by EDPM_AGENT_EVENTS_DIR.
    requirements:
      - enabled in callbacks_enabled
"""

import json
import os

from ansible.plugins.callback import CallbackBase

# The result keys edpm-agent reads; everything else stays out of the event files.
_KEPT = ("msg", "rc", "stderr", "stdout", "module_stderr", "changed", "failed", "unreachable",
         "censored", "_ansible_no_log", "item")


def _result(result):
    return getattr(result, "result", None) or getattr(result, "_result", None) or {}


def _task(result):
    return getattr(result, "task", None) or getattr(result, "_task", None)


def _host(result):
    host = getattr(result, "host", None) or getattr(result, "_host", None)
    return host.get_name() if host is not None else None


def _trim(res):
    if not isinstance(res, dict):
        return {}
    kept = {k: res[k] for k in _KEPT if k in res}
    items = res.get("results")
    if isinstance(items, list):
        kept["results"] = [_trim(i) for i in items]
    return kept


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "edpm_agent_events"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._dir = os.environ.get("EDPM_AGENT_EVENTS_DIR")
        self._notes_file = os.environ.get("EDPM_AGENT_NOTES_FILE")
        self._play_uuids = []
        self._ident = os.environ.get("EDPM_AGENT_IDENT", "")
        self._counter = 0
        self._playbook = None
        self._play = {}
        self._max_fail = False

    def _emit(self, event, data):
        if not self._dir:
            return
        # Imported here: under ansible-runner events are never written, and the plugin should
        # cost the play nothing it does not use.
        import datetime
        import uuid

        self._counter += 1
        event_uuid = str(uuid.uuid4())
        data = dict(data, uuid=event_uuid)
        if self._playbook:
            data.setdefault("playbook", self._playbook)
        record = {
            "uuid": event_uuid,
            "counter": self._counter,
            "event": event,
            "runner_ident": self._ident,
            "pid": os.getpid(),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "event_data": data,
        }
        path = os.path.join(self._dir, "%d-%s.json" % (self._counter, event_uuid))
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f, default=str)
        os.rename(tmp, path)

    def _task_data(self, task):
        data = dict(self._play)
        if task is not None:
            data.update(
                task=task.get_name().strip(),
                task_uuid=str(task._uuid),
                task_action=task.action,
                resolved_action=getattr(task, "resolved_action", None) or task.action,
                task_path=task.get_path(),
            )
        return data

    def _host_event(self, event, result, **extra):
        if not self._dir:
            return
        data = self._task_data(_task(result))
        data.update(host=_host(result), res=_trim(_result(result)), **extra)
        self._emit(event, data)

    def v2_playbook_on_start(self, playbook):
        self._playbook = os.path.basename(playbook._file_name)
        self._play_uuids = [str(p._uuid) for p in playbook.get_plays()]
        self._emit("playbook_on_start", {})

    def v2_playbook_on_play_start(self, play):
        play_uuid = str(play._uuid)
        self._play = {"play": play.get_name().strip(), "play_uuid": play_uuid}
        self._max_fail = getattr(play, "max_fail_percentage", None) is not None
        position = {}
        if play_uuid in self._play_uuids:
            position = {"play_index": self._play_uuids.index(play_uuid), "play_count": len(self._play_uuids)}
            strategy = str(getattr(play, "strategy", "") or "")
            position.update(linear=strategy in ("linear", "ansible.builtin.linear", "ansible.legacy.linear"),
                            serial=bool(getattr(play, "serial", None)))
        self._emit("playbook_on_play_start", dict(self._play, **position))
        if position:
            self._write_note(dict(kind="play", play_uuid=play_uuid, **position))

    # Under ansible-runner (no events directory) only play starts and failures matter: the
    # other hooks return at once, so the plugin costs the play next to nothing.

    def v2_playbook_on_task_start(self, task, is_conditional):
        if self._dir:
            self._emit("playbook_on_task_start", self._task_data(task))

    def v2_playbook_on_handler_task_start(self, task):
        if self._dir:
            self._emit("playbook_on_handler_task_start", self._task_data(task))

    def v2_playbook_on_cleanup_task_start(self, task):
        if self._dir:
            self._emit("playbook_on_cleanup_task_start", self._task_data(task))

    def v2_playbook_on_no_hosts_remaining(self):
        self._emit("playbook_on_no_hosts_remaining", {})

    def v2_runner_on_start(self, host, task):
        if not self._dir:
            return
        data = self._task_data(task)
        data.update(host=host.get_name())
        self._emit("runner_on_start", data)

    def v2_runner_on_ok(self, result):
        self._host_event("runner_on_ok", result)

    def v2_runner_on_skipped(self, result):
        self._host_event("runner_on_skipped", result)

    def _fatal(self, result):
        task = _task(result)
        return bool(getattr(task, "any_errors_fatal", False) or getattr(task, "run_once", False)
                    or self._max_fail)

    def _write_note(self, note):
        if not self._notes_file:
            return
        with open(self._notes_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(note, default=str) + "\n")

    def _note(self, result, fatal):
        task = _task(result)
        self._write_note({"kind": "failure", "host": _host(result),
                          "task_uuid": str(task._uuid) if task is not None else None, "any_errors_fatal": fatal})

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not (self._dir or self._notes_file):
            return
        fatal = self._fatal(result)
        self._host_event("runner_on_failed", result, ignore_errors=bool(ignore_errors), any_errors_fatal=fatal)
        if not ignore_errors:
            self._note(result, fatal)

    def v2_runner_on_unreachable(self, result):
        if not (self._dir or self._notes_file):
            return
        fatal = self._fatal(result)
        self._host_event("runner_on_unreachable", result, any_errors_fatal=fatal)
        self._note(result, fatal)

    def v2_playbook_on_stats(self, stats):
        if not self._dir:
            return
        data = {name: dict(getattr(stats, name, {}) or {})
                for name in ("changed", "dark", "failures", "ignored", "ok", "processed", "rescued", "skipped")}
        self._emit("playbook_on_stats", data)
