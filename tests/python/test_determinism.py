"""The deterministic mode (Note [Deterministic mode] in engine/src/determinism.h): its switch
(npx.set_deterministic, PYMX_ENFORCE_DETERMINISM) and, on the CPU, training that gives bitwise
the same parameters under the threaded engine, run after run, as under the naive engine. The
GPU kernels it changes are tested in test_gpu_determinism.py."""
import os

import pytest

from conftest import run_python
from determinism_net import training_script
from pymx import np, npx

_PROBE = "from pymx import npx; print(npx.is_deterministic())"


def _env(**settings):
    env = {k: v for k, v in os.environ.items() if k != "PYMX_ENFORCE_DETERMINISM"}
    env.update(settings)
    return env


@pytest.fixture
def restore_mode():
    before = npx.is_deterministic()
    yield
    npx.set_deterministic(before)


def test_set_deterministic_switches_and_returns_the_previous_state(restore_mode):
    before = npx.is_deterministic()
    assert npx.set_deterministic(True) is before
    assert npx.is_deterministic() is True
    assert npx.set_deterministic(False) is True
    assert npx.is_deterministic() is False
    assert npx.set_deterministic(False) is False


def test_set_deterministic_waits_for_pushed_work_and_ops_still_run(restore_mode):
    x = np.arange(12.0).reshape(3, 4)
    y = (x * 2).sum(axis=0)  # pushed before the switch
    npx.set_deterministic(True)
    assert (y.asnumpy() == [24.0, 30.0, 36.0, 42.0]).all()
    assert float((x + 1).sum()) == 78.0


@pytest.mark.parametrize("flag", [1, 0, "yes", None])
def test_set_deterministic_takes_only_a_bool(flag, restore_mode):
    with pytest.raises(TypeError, match=f"flag must be True or False, got {flag!r}"):
        npx.set_deterministic(flag)


@pytest.mark.parametrize("value, on", [(None, False), ("", False), ("0", False), ("1", True)])
def test_environment_variable_sets_the_start_value(value, on):
    env = _env() if value is None else _env(PYMX_ENFORCE_DETERMINISM=value)
    done = run_python(_PROBE, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(on)]


@pytest.mark.parametrize("value, message", [
    ("2", 'PYMX_ENFORCE_DETERMINISM="2" is not 0 or 1'),
    ("yes", 'PYMX_ENFORCE_DETERMINISM="yes" is not an integer'),
    ("-1", 'PYMX_ENFORCE_DETERMINISM="-1" is not an integer >= 0'),
])
def test_environment_variable_rejects_other_values_naming_them(value, message):
    done = run_python(_PROBE, env=_env(PYMX_ENFORCE_DETERMINISM=value))
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_the_switch_overrides_the_environment_variable():
    done = run_python("from pymx import npx; print(npx.set_deterministic(False), "
                      "npx.is_deterministic())", env=_env(PYMX_ENFORCE_DETERMINISM="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]


def test_training_is_bitwise_reproducible_and_equal_to_the_naive_engine():
    """Data parallel over cpu(0) and cpu(1), whose workers run at once under the threaded engine
    and contend for the intra-op pool; the naive engine runs every op alone, in push order."""
    script = training_script("[cpu(0), cpu(1)]")
    runs = {}
    for name, settings in [("threaded", {}), ("threaded again", {}),
                           ("threaded, 2 workers per device", {"PYMX_CPU_WORKERS": "2"}),
                           ("naive", {"PYMX_ENGINE": "naive"})]:
        done = run_python(script, env=_env(**settings), timeout=300)
        assert done.returncode == 0, f"{name}: {done.stderr}"
        runs[name] = done.stdout.split()
    assert len(set(map(tuple, runs.values()))) == 1, runs
