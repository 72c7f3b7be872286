"""The operator profiler, with MXNet's `mx.profiler` interface.

    from pymx import profiler
    profiler.set_config(profile_all=True, aggregate_stats=True, filename="profile.json")
    profiler.set_state("run")
    ...                                   # the work to look at
    npx.waitall()
    profiler.set_state("stop")
    profiler.dump()                       # a Chrome trace: chrome://tracing or ui.perfetto.dev
    print(profiler.dumps())               # total / min / max / mean time per operator

Every operator the engine runs while the profiler records is timed on the worker that runs it.
A GPU operator is timed twice: on its worker (the host time of launching it) and on the GPU
itself (CUDA events on its stream), so the table and the trace show both timelines. pymx records
operators only: `profile_memory` and `profile_api` are accepted for MXNet scripts and record
nothing.
"""
import json
import numbers
import os

import numpy as onp

from pymx._c import core as _core

__all__ = ["set_config", "set_state", "pause", "resume", "dump", "dumps"]

_FLAGS = ("profile_all", "profile_symbolic", "profile_imperative", "profile_memory", "profile_api",
          "aggregate_stats", "continuous_dump")
_FLAG_WORDS = {"true": True, "false": False, "1": True, "0": False}
_SORT_KEYS = {"total": "total_ms", "avg": "avg_ms", "min": "min_ms", "max": "max_ms",
              "count": "count"}

# MXNet's defaults: operators are recorded unless every operator flag is turned off.
_config = {"filename": "profile.json", "profile_all": False, "profile_symbolic": True,
           "profile_imperative": True, "profile_memory": True, "profile_api": True,
           "aggregate_stats": False, "continuous_dump": False, "dump_period": 1.0}
_running = False


def _check_process(profile_process):
    if profile_process != "worker":
        raise ValueError(f"profile_process must be 'worker' (pymx has no parameter-server "
                         f"processes), got {profile_process!r}")


def _as_flag(name, value):
    """`value` as a bool: a bool, 0 or 1, or the strings MXNet's option parser takes ('true',
    'false', '1', '0'). Anything else (bool('False') is True) raises ValueError naming it."""
    if isinstance(value, str) and value.strip().lower() in _FLAG_WORDS:
        return _FLAG_WORDS[value.strip().lower()]
    if isinstance(value, (numbers.Integral, onp.bool_)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"profiler option {name} must be True or False, got {value!r}")


def _records_operators():
    return _config["profile_all"] or _config["profile_symbolic"] or _config["profile_imperative"]


def set_config(profile_process="worker", **kwargs):
    """Sets profiler options (MXNet's names): `filename` (where `dump` writes the trace),
    `profile_all`, `profile_symbolic`, `profile_imperative` (operators are recorded when any is
    true), `profile_memory`, `profile_api`, `aggregate_stats`, `continuous_dump`, `dump_period`
    (accepted; `dumps` always has the aggregate statistics and `dump` always writes a whole file).
    Unknown options raise ValueError naming them."""
    _check_process(profile_process)
    unknown = sorted(set(kwargs) - set(_config))
    if unknown:
        raise ValueError(f"unknown profiler option(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(_config))}")
    if "filename" in kwargs:
        filename = kwargs["filename"]
        if not isinstance(filename, (str, os.PathLike)) or not os.fspath(filename):
            raise ValueError(f"profiler filename must be a non-empty path, got {filename!r}")
        kwargs["filename"] = os.fspath(filename)
    if "dump_period" in kwargs:
        period = kwargs["dump_period"]
        if isinstance(period, (bool, str)) or not isinstance(period, numbers.Real) or \
                not period > 0:
            raise ValueError(f"dump_period must be a number of seconds > 0, got {period!r}")
    for flag in _FLAGS:
        if flag in kwargs:
            kwargs[flag] = _as_flag(flag, kwargs[flag])
    _config.update(kwargs)
    _core.profiler_set_running(_running and _records_operators())


def set_state(state="stop", profile_process="worker"):
    """'run' starts recording, 'stop' stops it; what was recorded is kept for `dump`/`dumps`."""
    global _running
    _check_process(profile_process)
    if state not in ("run", "stop"):
        raise ValueError(f"profiler state must be 'run' or 'stop', got {state!r}")
    _running = state == "run"
    _core.profiler_set_running(_running and _records_operators())


def pause(profile_process="worker"):
    """Stops recording until `resume`, without changing the state set by `set_state`."""
    _check_process(profile_process)
    _core.profiler_set_paused(True)


def resume(profile_process="worker"):
    _check_process(profile_process)
    _core.profiler_set_paused(False)


def dump(finished=True, profile_process="worker"):
    """Writes everything recorded so far as a Chrome trace to the configured filename. The file is
    replaced whole (written aside, then renamed), so a failed dump leaves the previous one intact.
    `finished` is accepted for MXNet scripts: every dump is a complete file."""
    _check_process(profile_process)
    trace = _core.profiler_trace_json()
    path = _config["filename"]
    staging = f"{path}.{os.getpid()}.tmp"
    try:
        with open(staging, "w") as f:
            f.write(trace)
        os.replace(staging, path)
    except OSError as error:
        try:
            os.remove(staging)
        except OSError:
            pass
        raise OSError(error.errno, f"cannot write the profile to {path!r}: {error.strerror}") \
            from error


def dumps(reset=False, format="table", sort_by="total", ascending=False):
    """Aggregate statistics of the recorded operators, per device and timeline: count, total,
    min, max and mean time in ms. `format` is 'table' (text) or 'json' (a JSON list of entries);
    `sort_by` one of 'total', 'avg', 'min', 'max', 'count'; `reset` forgets the recorded spans
    afterwards (the trace's too)."""
    if format not in ("table", "json"):
        raise ValueError(f"format must be 'table' or 'json', got {format!r}")
    if sort_by not in _SORT_KEYS:
        raise ValueError(f"sort_by must be one of {', '.join(_SORT_KEYS)}, got {sort_by!r}")
    entries = json.loads(_core.profiler_aggregate_json(reset))
    for entry in entries:
        entry["avg_ms"] = entry["total_ms"] / entry["count"]
    entries.sort(key=lambda e: e[_SORT_KEYS[sort_by]], reverse=not ascending)
    if format == "json":
        return json.dumps(entries, indent=1)
    return _table(entries)


def _table(entries):
    sections = {}
    for entry in entries:
        sections.setdefault((entry["device"], entry["timeline"]), []).append(entry)
    lines = ["Profile Statistics (times in ms)"]
    for (device, timeline), rows in sorted(sections.items()):
        if device.startswith("gpu"):
            title = f"operator on {device}, " + ("GPU time" if timeline == "gpu"
                                                  else "worker time (launch)")
        else:
            title = f"operator on {device}"
        width = max(28, max(len(row["name"]) for row in rows) + 2)
        lines += ["", title, "=" * len(title),
                  f"{'Name':<{width}}{'Total Count':>12}{'Time (ms)':>14}{'Min Time (ms)':>15}"
                  f"{'Max Time (ms)':>15}{'Avg Time (ms)':>15}",
                  f"{'----':<{width}}{'-----------':>12}{'---------':>14}{'-------------':>15}"
                  f"{'-------------':>15}{'-------------':>15}"]
        for row in rows:
            lines.append(f"{row['name']:<{width}}{row['count']:>12}{row['total_ms']:>14.4f}"
                         f"{row['min_ms']:>15.4f}{row['max_ms']:>15.4f}{row['avg_ms']:>15.4f}")
    return "\n".join(lines) + "\n"
