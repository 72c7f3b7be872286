"""Top-level MXNet conveniences: mx.random.seed, mx.kv, mx.context / Context / current_context,
mx.util and mx.runtime.Features."""
import ctypes
import importlib.util
import os

import numpy as onp
import pytest

import pymx as mx
from pymx import np, runtime, util
from pymx.test_utils import assert_almost_equal

from conftest import run_python


# -- mx.random.seed ----------------------------------------------------------------------------

def _draws(device):
    return (np.random.uniform(size=(5,), device=device).asnumpy(),
            np.random.normal(size=(3,), device=device).asnumpy())


@pytest.mark.parametrize("scope", ["all", "device"])
def test_random_seed_repeats_the_draws(device, scope):
    seed_device = "all" if scope == "all" else device
    mx.random.seed(123, device=seed_device)
    first = _draws(device)
    mx.random.seed(123, device=seed_device)
    second = _draws(device)
    for a, b in zip(first, second):
        onp.testing.assert_array_equal(a, b)
    mx.random.seed(124)
    assert not onp.array_equal(_draws(device)[0], first[0])


def test_random_seed_is_the_stream_np_and_npx_seed(device):
    # One stream per process: the three spellings start the same sequence.
    sequences = []
    for seed in (mx.random.seed, np.random.seed, mx.npx.random.seed):
        seed(7)
        sequences.append(np.random.uniform(size=(4,), device=device).asnumpy())
    onp.testing.assert_array_equal(sequences[0], sequences[1])
    onp.testing.assert_array_equal(sequences[0], sequences[2])


def test_random_seed_also_seeds_dropout():
    x = np.ones((64,))
    masks = []
    for _ in range(2):
        mx.random.seed(5)
        with mx.autograd.train_mode():
            masks.append(mx.npx.dropout(x, p=0.5).asnumpy())
    onp.testing.assert_array_equal(masks[0], masks[1])


@pytest.mark.parametrize("bad, message", [(1.5, "seed_state must be an int, got 1.5"),
                                          (True, "seed_state must be an int, got True"),
                                          ("3", "seed_state must be an int, got '3'"),
                                          (-1, r"seed_state must be in \[0, 2\*\*64\), got -1"),
                                          (2**64, "got 18446744073709551616")])
def test_random_seed_rejects_bad_seeds(bad, message):
    with pytest.raises(ValueError, match=message):
        mx.random.seed(bad)


def test_random_seed_rejects_bad_devices():
    with pytest.raises(ValueError, match="device must be 'all' or a Device, got 'gpu'"):
        mx.random.seed(1, device="gpu")


def test_random_seed_accepts_numpy_integers():
    mx.random.seed(onp.int64(9))
    a = np.random.uniform(size=(3,)).asnumpy()
    mx.random.seed(9)
    onp.testing.assert_array_equal(a, np.random.uniform(size=(3,)).asnumpy())


# -- mx.kv, mx.context -------------------------------------------------------------------------

def test_kv_is_kvstore():
    assert mx.kv is mx.kvstore
    store = mx.kv.create("local")
    store.init("w", np.array([1.0, 2.0]))
    out = np.zeros((2,))
    store.pull("w", out=out)
    assert_almost_equal(out, onp.array([1.0, 2.0]))


def test_context_builds_a_device_and_warns():
    with pytest.warns(DeprecationWarning, match="use pymx.Device"):
        device = mx.Context("cpu", 1)
    assert device == mx.cpu(1) and isinstance(device, mx.Device)
    with pytest.warns(DeprecationWarning):
        assert mx.context.Context(mx.gpu(2)) == mx.gpu(2)
    with pytest.warns(DeprecationWarning):
        with pytest.raises(ValueError, match="unknown device type 'tpu'"):
            mx.Context("tpu")


def test_current_context_is_current_device():
    with pytest.warns(DeprecationWarning, match="use pymx.current_device"):
        assert mx.current_context() == mx.cpu(0)
    with mx.cpu(3):
        with pytest.warns(DeprecationWarning):
            assert mx.context.current_context() == mx.cpu(3)


def test_context_module_reexports_device_helpers():
    assert mx.context.cpu is mx.cpu and mx.context.gpu is mx.gpu
    assert mx.context.num_gpus() == mx.num_gpus()


# -- mx.util -----------------------------------------------------------------------------------

def test_util_numpy_semantics_are_always_on():
    assert util.is_np_array() and util.is_np_shape() and not util.is_np_default_dtype()
    util.set_np()
    util.set_np(shape=True, array=True, dtype=False)
    util.reset_np()
    assert util.set_np_shape(True) is True
    assert util.set_np_default_dtype(False) is False
    with util.np_shape(), util.np_array(True):
        assert np.zeros((0, 3)).shape == (0, 3)
        assert np.array(2.0).shape == ()


def test_util_use_np_returns_the_function_or_class():
    def f(x):
        return x + 1

    class Net(mx.gluon.HybridBlock):
        pass

    assert util.use_np(f) is f and util.use_np(Net) is Net
    assert util.use_np_shape(f) is f and util.use_np_array(f) is f
    with pytest.raises(TypeError, match="expected a function or class, got 3"):
        util.use_np(3)


@pytest.mark.parametrize("call, message", [
    (lambda: util.set_np(shape=False), "set_np: shape=False asks for MXNet's legacy"),
    (lambda: util.set_np(array=False), "set_np: array=False asks for MXNet's legacy"),
    (lambda: util.set_np(dtype=True), "default dtype is float32 only"),
    (lambda: util.set_np_shape(False), "set_np_shape: active=False"),
    (lambda: util.np_shape(False).__enter__(), "np_shape: active=False"),
    (lambda: util.np_array(False).__enter__(), "np_array: active=False"),
    (lambda: util.set_np_default_dtype(True), "default dtype is float32 only"),
])
def test_util_legacy_modes_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_util_flags_must_be_booleans():
    with pytest.raises(TypeError, match="shape must be True or False, got 1"):
        util.set_np(shape=1)
    with pytest.raises(TypeError, match="expected True or False, got 'yes'"):
        util.set_np_default_dtype("yes")


def test_util_getenv_setenv(monkeypatch):
    name = "PYMX_TEST_UTIL_ENV"
    monkeypatch.delenv(name, raising=False)
    assert util.getenv(name) is None
    util.setenv(name, "42")
    assert util.getenv(name) == "42" and os.environ[name] == "42"
    # The C runtime sees it as well (native code reads settings with getenv(3)).
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    assert libc.getenv(name.encode()) == b"42"
    util.setenv(name, None)
    assert util.getenv(name) is None and name not in os.environ
    util.setenv(name, None)  # removing an unset variable is fine


def test_util_getenv_setenv_reject_bad_arguments():
    with pytest.raises(TypeError, match="name must be a str, got 3"):
        util.getenv(3)
    with pytest.raises(ValueError, match="name must be a non-empty str without '=', got 'A=B'"):
        util.setenv("A=B", "1")
    with pytest.raises(TypeError, match="value must be a str or None, got 1"):
        util.setenv("PYMX_TEST_UTIL_ENV", 1)


def test_util_makedirs_and_gpu_helpers(tmp_path):
    target = tmp_path / "a" / "b"
    util.makedirs(str(target))
    util.makedirs(str(target))
    assert target.is_dir()
    assert util.get_gpu_count() == mx.num_gpus()
    if mx.num_gpus():
        free, total = util.get_gpu_memory(0)
        assert 0 < free <= total


# -- mx.runtime --------------------------------------------------------------------------------

def _cuda_compiled():
    # The C API's own answer: gpu_memory_info raises "built without CUDA" only in such a build.
    try:
        mx.gpu_memory_info(0)
    except mx.PymxError as error:
        return "built without CUDA" not in str(error)
    return True


def test_features_report_this_build():
    features = runtime.Features()
    assert features is runtime.Features()  # one instance per process, as MXNet's
    assert features.is_enabled("CUDA") == _cuda_compiled()
    assert features.is_enabled("cuda") == features.is_enabled("CUDA")
    assert features.is_enabled("BLAS_OPEN") and features.is_enabled("LAPACK")
    assert features.is_enabled("INT64_TENSOR_SIZE")
    for absent in ("OPENMP", "ONEDNN", "MKLDNN", "TENSORRT", "SIGNAL_HANDLER", "BLAS_MKL"):
        assert not features.is_enabled(absent)
    assert features.is_enabled("DIST_KVSTORE") == (importlib.util.find_spec("mpi4py") is not None)
    if not features.is_enabled("CUDA"):
        for library in ("CUDNN", "CUBLAS", "CUSOLVER", "NCCL"):
            assert not features.is_enabled(library)


def test_features_cuda_libraries_follow_their_files(monkeypatch, tmp_path):
    # A found library file counts only in a CUDA build; finding it opens nothing.
    (tmp_path / "libcudnn.so.9").write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert runtime._library_found("libcudnn.so.9", "nvidia/cudnn/lib")
    assert not runtime._library_found("libpymx_no_such_library.so.1", "nvidia/none/lib")
    by_name = {f.name: f.enabled for f in runtime.feature_list()}
    assert by_name["CUDNN"] == by_name["CUDA"]


def test_feature_list_and_repr():
    features = runtime.feature_list()
    names = [f.name for f in features]
    assert len(names) == len(set(names)) and names[0] == "CUDA"
    assert list(runtime.Features().keys()) == names
    assert repr(runtime.Feature("X", True)) == "✔ X"
    assert repr(runtime.Feature("Y", False)) == "✖ Y"
    assert repr(runtime.Features()).startswith("[")


def test_features_unknown_name_lists_the_known_ones():
    with pytest.raises(RuntimeError, match=r"Feature 'NOPE' is unknown, known features are: "
                                           r"\['CUDA'"):
        runtime.Features().is_enabled("NOPE")
    with pytest.raises(TypeError, match="feature_name must be a str, got 1"):
        runtime.Features().is_enabled(1)


def test_features_need_no_gpu_context():
    # Asking for the features initialises no GPU: a fresh process with no GPU visible answers.
    done = run_python("import pymx as mx; f = mx.runtime.Features(); "
                      "print(f.is_enabled('CUDA'), mx.num_gpus())",
                      env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert done.returncode == 0, done.stderr
    cuda, gpus = done.stdout.split()
    assert cuda == str(runtime.Features().is_enabled("CUDA")) and gpus == "0"


def test_exports():
    for name in ("random", "util", "runtime", "context", "kv", "Context", "current_context"):
        assert name in mx.__all__ and hasattr(mx, name)
