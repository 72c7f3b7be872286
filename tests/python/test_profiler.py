"""pymx.profiler: what is recorded (and when not), the trace file, the aggregate table, errors."""
import json
import os
import threading

import pytest

import pymx
from pymx import gluon, np, npx, profiler
from conftest import requires_gpu, run_python

_DEFAULTS = dict(profiler._config)


@pytest.fixture(autouse=True)
def fresh_profiler(tmp_path):
    profiler.set_config(**{**_DEFAULTS, "filename": str(tmp_path / "profile.json")})
    yield
    profiler.set_state("stop")
    profiler.resume()
    npx.waitall()
    profiler.dumps(reset=True)
    profiler.set_config(**_DEFAULTS)


def counts(device="cpu(0)", timeline="host"):
    entries = json.loads(profiler.dumps(format="json"))
    return {e["name"]: e["count"] for e in entries
            if e["device"] == device and e["timeline"] == timeline}


def add_chain(n, device=None):
    x = np.zeros((8,), device=device)
    for _ in range(n):
        x = x + 1
    return x


def test_records_each_operator_it_ran():
    profiler.set_state("run")
    x = add_chain(7)
    y = np.dot(np.ones((4, 3)), np.ones((3, 5)))
    npx.waitall()
    profiler.set_state("stop")
    recorded = counts()
    assert recorded["add_scalar"] == 7
    assert recorded["zeros"] == 1 and recorded["ones"] == 2 and recorded["matmul"] == 1
    assert float(x[0]) == 7.0 and float(y[0, 0]) == 3.0


def test_records_nothing_when_stopped_paused_or_operators_off():
    add_chain(3)
    npx.waitall()
    assert counts() == {}

    profiler.set_state("run")
    add_chain(2)
    npx.waitall()
    profiler.pause()
    add_chain(5)
    npx.waitall()
    profiler.resume()
    add_chain(4)
    npx.waitall()
    profiler.set_state("stop")
    add_chain(6)
    npx.waitall()
    assert counts()["add_scalar"] == 2 + 4

    profiler.dumps(reset=True)
    profiler.set_config(profile_all=False, profile_symbolic=False, profile_imperative=False)
    profiler.set_state("run")
    add_chain(3)
    npx.waitall()
    assert counts() == {}


def test_dumps_table_sorts_and_resets():
    profiler.set_state("run")
    add_chain(5)
    np.ones((2, 2))
    npx.waitall()
    profiler.set_state("stop")

    entries = json.loads(profiler.dumps(format="json", sort_by="count", ascending=True))
    assert [e["count"] for e in entries] == sorted(e["count"] for e in entries)
    slack = 1e-9  # ms: the report rounds to nanoseconds, so equal spans may give avg < min
    for e in entries:
        assert e["min_ms"] - slack <= e["avg_ms"] <= e["max_ms"] + slack
        assert e["max_ms"] <= e["total_ms"] + slack
        assert e["avg_ms"] == pytest.approx(e["total_ms"] / e["count"])

    table = profiler.dumps(reset=True)
    assert "operator on cpu(0)" in table
    row = next(line for line in table.splitlines() if line.startswith("add_scalar"))
    assert row.split()[1] == "5"
    assert counts() == {}


def test_trace_file_orders_a_dependency_chain(tmp_path):
    profiler.set_state("run")
    add_chain(20)
    npx.waitall()
    profiler.set_state("stop")
    profiler.dump()
    with open(tmp_path / "profile.json") as f:
        trace = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert list(names.values()) == ["cpu(0) workers"]
    adds = sorted((e for e in trace["traceEvents"] if e.get("name") == "add_scalar"),
                  key=lambda e: e["ts"])
    assert len(adds) == 20
    for earlier, later in zip(adds, adds[1:]):  # each add reads the previous one's result
        assert earlier["dur"] >= 0
        assert later["ts"] >= earlier["ts"] + earlier["dur"] - 1e-3


def test_two_devices_from_two_threads():
    profiler.set_state("run")
    results = {}

    def work(device):
        results[device.device_id] = add_chain(50, device=device)

    threads = [threading.Thread(target=work, args=(pymx.cpu(i),)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    npx.waitall()
    profiler.set_state("stop")
    assert counts("cpu(0)")["add_scalar"] == 50
    assert counts("cpu(1)")["add_scalar"] == 50
    assert float(results[1][0]) == 50.0
    trace = json.loads(pymx._c.core.profiler_trace_json())
    processes = sorted(e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M")
    assert processes == ["cpu(0) workers", "cpu(1) workers"]


def test_hybridized_graph_operators_are_recorded():
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    net.hybridize()
    x = np.ones((2, 4))
    net(x)  # the first call traces the graph
    npx.waitall()
    profiler.set_state("run")
    for _ in range(3):
        net(x)
    npx.waitall()
    profiler.set_state("stop")
    assert counts()["fully_connected"] == 3


_ENGINE_SCRIPT = """
import json
from pymx import np, npx, profiler
profiler.set_state("run")
x = np.zeros((8,))
for _ in range(25):
    x = x * 2 + 1
npx.waitall()
profiler.set_state("stop")
print(json.dumps({e["name"]: e["count"] for e in json.loads(profiler.dumps(format="json"))
                  if e["name"] != "delete_var"}))
"""


def test_threaded_and_naive_engines_record_the_same_operators():
    recorded = {}
    for engine in ("threaded", "naive"):
        out = run_python(_ENGINE_SCRIPT, env={**os.environ, "PYMX_ENGINE": engine})
        assert out.returncode == 0, out.stderr
        recorded[engine] = json.loads(out.stdout)
    assert recorded["threaded"] == recorded["naive"] == {"zeros": 1, "multiply_scalar": 25,
                                                          "add_scalar": 25}


def test_bad_arguments_name_the_values():
    with pytest.raises(ValueError, match="'go'"):
        profiler.set_state("go")
    with pytest.raises(ValueError, match="bogus"):
        profiler.set_config(bogus=1)
    with pytest.raises(ValueError, match="'xml'"):
        profiler.dumps(format="xml")
    with pytest.raises(ValueError, match="'median'"):
        profiler.dumps(sort_by="median")
    with pytest.raises(ValueError, match="'server'"):
        profiler.set_state("run", profile_process="server")
    with pytest.raises(ValueError, match="filename"):
        profiler.set_config(filename="")
    with pytest.raises(ValueError, match="dump_period"):
        profiler.set_config(dump_period=0)
    # Still usable after the errors.
    profiler.set_state("run")
    add_chain(2)
    npx.waitall()
    assert counts()["add_scalar"] == 2


def test_failed_dump_names_the_path_and_keeps_the_previous_file(tmp_path, monkeypatch):
    profiler.set_state("run")
    add_chain(1)
    npx.waitall()
    profiler.dump()
    path = tmp_path / "profile.json"
    previous = path.read_text()

    add_chain(3)
    npx.waitall()

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(profiler.os, "replace", refuse)
    with pytest.raises(OSError, match="profile.json"):
        profiler.dump()
    assert path.read_text() == previous
    assert os.listdir(tmp_path) == ["profile.json"]  # no staging file left behind

    missing = tmp_path / "no" / "such" / "dir" / "p.json"
    profiler.set_config(filename=str(missing))
    monkeypatch.undo()
    with pytest.raises(OSError, match="p.json"):
        profiler.dump()


@requires_gpu
def test_gpu_operators_have_host_and_gpu_times():
    profiler.set_state("run")
    x = add_chain(10, device=pymx.gpu(0))
    npx.waitall()
    profiler.set_state("stop")
    assert counts("gpu(0)", "host")["add_scalar"] == 10
    assert counts("gpu(0)", "gpu")["add_scalar"] == 10
    assert float(x[0]) == 10.0
    trace = json.loads(pymx._c.core.profiler_trace_json())
    gpu_pid = next(e["pid"] for e in trace["traceEvents"]
                   if e["ph"] == "M" and e["args"]["name"] == "gpu(0) GPU")
    gpu_adds = sorted((e for e in trace["traceEvents"]
                       if e["pid"] == gpu_pid and e.get("name") == "add_scalar"),
                      key=lambda e: e["ts"])
    assert len(gpu_adds) == 10
    for earlier, later in zip(gpu_adds, gpu_adds[1:]):
        assert earlier["dur"] >= 0
        assert later["ts"] >= earlier["ts"] + earlier["dur"] - 2.0  # event resolution, µs
