"""Differential-test harness: what PyYAML's SafeLoader makes of YAML documents.

Reads one JSON request on stdin, {"docs": [text, ...]}, and prints one JSON answer, a list with
one entry per text, so a test pays Python's start-up once for thousands of cases:

  {"docs": [tree, ...]}   every document of the stream (yaml.load_all), or
  {"error": {"kind": "syntax" | "construct" | "crash", "message": str, "line": int | null}}

Trees keep every type PyYAML produces, so the test can apply Kubernetes' JSON conversion
itself and see exactly where the two YAML readers differ:

  {"null": null} {"bool": b} {"int": "123"} {"float": "1.5" | "inf" | "-inf" | "nan"}
  {"str": s} {"bytes": [0, 255, ...]} {"timestamp": iso} {"seq": [tree, ...]}
  {"map": [[tree, tree], ...]} {"set": [tree, ...]} {"recursive": null}
"""

import datetime
import json
import math
import sys

import yaml


def tree(value, seen):
    if id(value) in seen:
        return {"recursive": None}
    if value is None:
        return {"null": None}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        if math.isnan(value):
            return {"float": "nan"}
        if math.isinf(value):
            return {"float": "inf" if value > 0 else "-inf"}
        return {"float": repr(value)}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, bytes):
        return {"bytes": list(value)}
    if isinstance(value, (datetime.date, datetime.datetime)):
        return {"timestamp": value.isoformat()}
    seen = seen | {id(value)}
    if isinstance(value, list):
        return {"seq": [tree(v, seen) for v in value]}
    if isinstance(value, dict):
        return {"map": [[tree(k, seen), tree(v, seen)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((tree(v, seen) for v in value), key=json.dumps)}
    if isinstance(value, tuple):
        return {"seq": [tree(v, seen) for v in value]}
    return {"str": repr(value)}


def load(text):
    try:
        docs = list(yaml.load_all(text, Loader=yaml.SafeLoader))
    except yaml.constructor.ConstructorError as e:
        return {"error": {"kind": "construct", "message": str(e), "line": mark_line(e)}}
    except yaml.YAMLError as e:
        return {"error": {"kind": "syntax", "message": str(e), "line": mark_line(e)}}
    except Exception as e:  # PyYAML's own bugs: int('') for '0x_', and the like
        return {"error": {"kind": "crash", "message": "%s: %s" % (type(e).__name__, e), "line": None}}
    return {"docs": [tree(d, frozenset()) for d in docs]}


def mark_line(e):
    mark = getattr(e, "problem_mark", None)
    return mark.line + 1 if mark is not None else None


def main():
    request = json.load(sys.stdin)
    json.dump([load(t) for t in request["docs"]], sys.stdout)


if __name__ == "__main__":
    main()
