"""Differential-test harness: which hosts Ansible's own InventoryManager keeps for a --limit.

Reads one JSON request on stdin, {"inventory": path, "limits": [text, ...], "raw": [text, ...]},
and prints one JSON answer with one entry per text, so a test pays Python's and Ansible's
start-up once for thousands of cases:

  limits: what `ansible-inventory -i inventory --limit TEXT --list` keeps, the very calls it
          makes (InventoryManager.subset(TEXT), then get_hosts('all')):
          {"hosts": [name, ...]} or {"error": message}
  raw:    an ansibleLimit as upstream puts it in RUNNER_CMDLINE (`--limit TEXT`), split as
          ansible-runner splits it (shlex.split), then as above when it is one word that is no
          option: {"hosts": [...]}, {"error": message}, or {"words": n}
"""

import json
import shlex
import sys

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.utils.display import Display

# Warnings ("Could not match supplied host pattern") go to stderr, never into the answer.
Display().verbosity = 0


def keep(inventory, text):
    try:
        inventory.subset(text)
        return {"hosts": sorted(h.name for h in inventory.get_hosts("all"))}
    except Exception as e:  # AnsibleError, and the IndexError of a bare '!'
        return {"error": "%s: %s" % (type(e).__name__, e)}
    finally:
        inventory.subset(None)


def main():
    request = json.load(sys.stdin)
    inventory = InventoryManager(loader=DataLoader(), sources=[request["inventory"]])
    limits = [keep(inventory, t) for t in request.get("limits", [])]
    raw = []
    for text in request.get("raw", []):
        try:
            words = shlex.split(text)
        except ValueError as e:
            raw.append({"error": "shlex: %s" % e})
            continue
        if len(words) == 1 and not words[0].startswith("-"):
            raw.append(keep(inventory, words[0]))
        elif not words:
            raw.append(keep(inventory, None))
        else:
            raw.append({"words": len(words)})
    json.dump({"limits": limits, "raw": raw}, sys.stdout)


main()
