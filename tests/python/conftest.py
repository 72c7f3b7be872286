"""Shared fixtures: a printed seed for every test, npx.waitall() after each module, and the
`device` fixture that runs a test on the CPU and, when one is visible, on a GPU.

    from conftest import requires_gpu          # mark GPU-only tests
    def test_x(device): ...                    # runs on cpu(0), and gpu(0) when there is one
    from conftest import run_python            # a script in a fresh interpreter
    from conftest import assert_engines_agree  # a script's arrays, naive vs threaded engine
    from conftest import ops_ran               # which ops the engine ran during a call
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as onp
import pytest

import pymx
from pymx import npx, profiler
from pymx._c import core as _core

# Computed once; every GPU test in the suite skips through this marker.
requires_gpu = pytest.mark.skipif(pymx.device.num_gpus() == 0, reason="no GPU visible")


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter (its CompletedProcess, text output captured) from outside
    the source tree, whose pymx/ has no compiled core, so that the child imports the installed
    pymx; `env` defaults to this process's environment."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tempfile.gettempdir())


def assert_engines_agree(script, tmp_path):
    """Runs `script`, which saves arrays to the .npz path in its variable OUT, once under the
    naive engine and once under the threaded one, and asserts the arrays bitwise equal."""
    outputs = {}
    for engine in ("naive", "threaded"):
        path = str(tmp_path / f"{engine}.npz")
        done = run_python(f"OUT = {path!r}\n" + script, env=dict(os.environ, PYMX_ENGINE=engine))
        assert done.returncode == 0, done.stderr
        outputs[engine] = onp.load(path)
    for key in outputs["naive"].files:
        onp.testing.assert_array_equal(outputs["threaded"][key], outputs["naive"][key],
                                       err_msg=key)


def assert_thread_count_independent(script, tmp_path):
    """Runs `script` (as for assert_engines_agree) on one core, where the operators have no
    helper threads, and on all cores, and asserts the arrays bitwise equal."""
    one_core = "import os\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
    outputs = {}
    for label, prefix in (("one core", one_core), ("all cores", "")):
        path = str(tmp_path / f"{label}.npz")
        done = run_python(prefix + f"OUT = {path!r}\n" + script)
        assert done.returncode == 0, done.stderr
        outputs[label] = onp.load(path)
    for key in outputs["one core"].files:
        onp.testing.assert_array_equal(outputs["all cores"][key], outputs["one core"][key],
                                       err_msg=key)


def ops_ran(fn, device="cpu(0)"):
    """{op name: count} of the ops the engine ran on `device` while fn() ran, from the profiler
    (host timeline). Waits for earlier work first, so that only fn()'s ops are counted."""
    npx.waitall()
    profiler.set_state("run")
    try:
        fn()
        npx.waitall()
    finally:
        profiler.set_state("stop")
    entries = json.loads(profiler.dumps(reset=True, format="json"))
    return {e["name"]: e["count"] for e in entries
            if e["device"] == device and e["timeline"] == "host"}


@pytest.fixture(autouse=True)
def seed():
    """Seeds Python, NumPy and pymx; set PYMX_TEST_SEED to reproduce a failure."""
    value = int(os.environ.get("PYMX_TEST_SEED", random.SystemRandom().randrange(2**31)))
    print(f"\nPYMX_TEST_SEED={value}")
    random.seed(value)
    onp.random.seed(value)
    _core.random_seed(value)
    return value


@pytest.fixture(autouse=True, scope="module")
def _wait_for_module_work():
    yield
    npx.waitall()


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=requires_gpu)])
def device(request):
    return pymx.device.Device(request.param, 0)
