"""Differential-test harness: answers with the real oslo.config what edpm-agent computes.

Reads one JSON request on stdin and prints one JSON answer, so a test pays Python's start-up
once for thousands of cases:

  {"parse": [text, ...],
   "layer": [{"items": [{"file": text} | {"dir": [[name, text], ...]}, ...],
              "queries": [[group, key], ...]}, ...]}

parse -> {"sections": {name: {key: [value, ...]}}} or {"error": {"line", "message", "text"}},
         using cfg.ConfigParser exactly as oslo reads a config file.
layer -> {"single": [value or null, ...], "multi": [[value, ...], ...]}, from ConfigOpts run
         with the items as --config-file/--config-dir arguments in order, once with every
         queried option registered as StrOpt and once as MultiStrOpt.
"""

import json
import os
import sys
import tempfile

from oslo_config import cfg


def parse_text(text, tmp, n):
    path = os.path.join(tmp, "p%d.conf" % n)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    sections = {}
    parser = cfg.ConfigParser(path, sections)
    try:
        parser.parse()
    except cfg.ParseError as e:
        return {"error": {"line": e.lineno, "message": e.msg, "text": e.line}}
    return {"sections": sections}


def layer_case(case, tmp, n):
    args = []
    for i, item in enumerate(case["items"]):
        if "file" in item:
            path = os.path.join(tmp, "l%d_%d.conf" % (n, i))
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(item["file"])
            args += ["--config-file", path]
        else:
            d = os.path.join(tmp, "d%d_%d" % (n, i))
            os.mkdir(d)
            for name, text in item["dir"]:
                with open(os.path.join(d, name), "w", encoding="utf-8", newline="") as f:
                    f.write(text)
            args += ["--config-dir", d]
    out = {}
    for kind, opt_type in (("single", cfg.StrOpt), ("multi", cfg.MultiStrOpt)):
        conf = cfg.ConfigOpts()
        registered = set()
        for group, key in case["queries"]:
            if (group, key) in registered:
                continue
            registered.add((group, key))
            if group == "DEFAULT":
                conf.register_opt(opt_type(key))
            else:
                conf.register_opt(opt_type(key), group=group)
        conf(args=args, project="harness", default_config_files=[], default_config_dirs=[])
        values = []
        for group, key in case["queries"]:
            node = conf if group == "DEFAULT" else conf[group]
            v = node[key]
            if kind == "multi" and v is None:
                v = []
            values.append(v)
        out[kind] = values
    return out


def main():
    req = json.load(sys.stdin)
    with tempfile.TemporaryDirectory() as tmp:
        answer = {
            "parse": [parse_text(t, tmp, n) for n, t in enumerate(req.get("parse", []))],
            "layer": [layer_case(c, tmp, n) for n, c in enumerate(req.get("layer", []))],
        }
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
