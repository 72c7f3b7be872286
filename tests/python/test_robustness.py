"""Robustness: bad input raises a clear exception naming the offending values, and the process
stays usable afterwards (no crash, no hang, no silent wrong answer, nothing lost on disk).

Risky probes run in a child interpreter (run_probes), so a segfault or abort fails one test
instead of killing pytest. Each probe asserts the exception type and that the message names the
offending value(s); each child ends by checking that a small op still gives the right answer.
"""
import os
import textwrap

import numpy as onp
import pytest

import pymx
from pymx import gluon, np
from pymx.gluon import nn
from conftest import run_python

# Helpers every child interpreter starts with.
_PRELUDE = '''
import numpy as onp
import pymx
from pymx import np, npx, gluon
from pymx._op import invoke, waitall

def expect(exc_type, fragments, fn):
    """fn() raises exc_type (synchronously or at the wait) with every fragment in the message."""
    try:
        result = fn()
        for r in (result if isinstance(result, (list, tuple)) else [result]):
            if hasattr(r, "wait_to_read"):
                r.wait_to_read()
    except exc_type as e:
        for fragment in fragments:
            assert fragment in str(e), f"{fragment!r} not in message {str(e)!r}"
        return
    raise AssertionError(f"no {exc_type.__name__} raised (expected one naming {fragments})")

def check_usable():
    waitall()
    assert (np.array([1.0, 2.0]) * 3).asnumpy().tolist() == [3.0, 6.0]
'''


def run_probes(body, timeout=120, env=None):
    """Runs _PRELUDE + body + check_usable() in a fresh interpreter; fails with its output when
    it crashes, hangs or raises."""
    code = _PRELUDE + textwrap.dedent(body) + "\ncheck_usable()\nprint('PROBES-OK')\n"
    proc = run_python(code, env=env, timeout=timeout)
    assert proc.returncode == 0 and "PROBES-OK" in proc.stdout, (
        f"child exited with {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\n"
        f"stderr:\n{proc.stderr[-4000:]}")


# ---------------------------------------------------------------------------------------------
# Every registered operator
# ---------------------------------------------------------------------------------------------

def test_every_operator_survives_wrong_arity_and_unparseable_attributes():
    """For each op: 0..4 float32 (2, 3) inputs, with no attrs and with each common attribute
    set to text that does not parse. Each call must either succeed (results readable) or raise
    a ValueError/TypeError/IndexError with a message; nothing may crash. Progress is printed so
    a crash names the probe."""
    run_probes('''
        from pymx._c import core
        garbage = [{}] + [{key: "not-a-value"} for key in (
            "axis", "shape", "kernel", "stride", "pad", "num_filter", "num_hidden", "scalar",
            "dtype", "p", "k", "reps", "repeats", "depth", "begin", "axes", "size", "value",
            "low", "start", "N", "mode", "act_type", "pool_type", "eps", "lr")]
        names = core.op_names()
        assert len(names) > 100 and "add" in names and "convolution" in names
        for name in names:
            for n_inputs in range(5):
                inputs = [np.array(onp.arange(6.0).reshape(2, 3) % 2) for _ in range(n_inputs)]
                for attrs in garbage:
                    print("probe", name, n_inputs, attrs, flush=True)
                    try:
                        for out in invoke(name, inputs, attrs):
                            out.wait_to_read()
                    except (ValueError, TypeError, IndexError) as e:
                        assert len(str(e)) > 10, (name, attrs, str(e))
        ''', timeout=240)


def test_unknown_operator_and_bad_attribute_types_name_the_values():
    run_probes('''
        expect(ValueError, ["no_such_op"], lambda: invoke("no_such_op", []))
        expect(TypeError, ["axis"], lambda: invoke("sum", [np.ones(3)], {"axis": object()}))
        expect(ValueError, ["axis", "abc"], lambda: invoke("sum", [np.ones(3)], {"axis": "abc"}))
        expect(ValueError, ["shape", "x"], lambda: invoke("zeros", [], {"shape": "(x, 2)"}))
        ''')


# ---------------------------------------------------------------------------------------------
# Sizes: huge, overflowing, empty, 0-d
# ---------------------------------------------------------------------------------------------

def test_huge_allocations_raise_memory_error_naming_the_size():
    """2**62 bytes fails at the allocator; a shape whose byte count overflows 64 bits used to
    wrap to a tiny allocation and return garbage (or crash): now refused before allocating."""
    run_probes('''
        expect(MemoryError, ["4611686018427387904 bytes"], lambda: np.zeros((2 ** 60,)))
        expect(MemoryError, ["(2147483648, 2147483648)", "float32"],
               lambda: np.zeros((2 ** 31, 2 ** 31)))
        expect(MemoryError, ["(4611686018427387904,)"], lambda: np.ones((2 ** 62,)))
        expect(MemoryError, ["(1099511627776, 1099511627776)"],
               lambda: np.random.uniform(size=(2 ** 40, 2 ** 40)))
        expect(MemoryError, ["1e+30"], lambda: np.arange(1e30))
        # An empty array needs no memory however large its other extents are.
        assert np.zeros((0, 2 ** 62)).shape == (0, 2 ** 62)
        ''')


def test_empty_and_zero_d_arrays():
    x = np.zeros((0, 3))
    assert np.sum(x, axis=0).asnumpy().tolist() == [0.0, 0.0, 0.0]
    assert (x + 1).shape == (0, 3)
    assert np.concatenate([x, np.ones((2, 3))]).shape == (2, 3)
    s = np.array(5.0)
    assert s.shape == () and (s * 2).item() == 10.0
    with pytest.raises(ValueError, match=r"0-d"):
        np.matmul(s, s)
    with pytest.raises(ValueError, match=r"empty sequence"):
        np.argmax(x.reshape(-1)).wait_to_read()
    with pytest.raises(ValueError, match=r"shape \(0,\)"):
        np.max(np.zeros((0,))).wait_to_read()
    with pytest.raises(ValueError, match=r"empty image 0x4"):
        pymx.npx.image.resize(np.ones((0, 4, 3)), (2, 2))


# ---------------------------------------------------------------------------------------------
# Attributes checked when the op is invoked, not later in the kernel
# ---------------------------------------------------------------------------------------------

def test_creation_ops_reject_bad_attributes_when_invoked():
    from pymx._op import invoke
    with pytest.raises(ValueError, match=r"stop=inf"):
        np.arange(float("inf"))
    with pytest.raises(ValueError, match=r"stop=nan"):
        np.arange(0, float("nan"))
    with pytest.raises(ValueError, match=r"'value'.*'abc'"):
        invoke("full", [], {"shape": (2,), "value": "abc"})
    with pytest.raises(ValueError, match=r"'value'"):
        invoke("full", [], {"shape": (2,)})
    with pytest.raises(ValueError, match=r"'start'"):
        invoke("linspace", [], {"stop": 1.0, "num": 3})
    with pytest.raises(ValueError, match=r"'k'.*'abc'"):
        invoke("eye", [], {"N": 2, "k": "abc"})
    with pytest.raises(ValueError, match=r"'low'.*'abc'"):
        invoke("uniform", [], {"shape": (2,), "low": "abc"})
    with pytest.raises(ValueError, match=r"'loc'.*'abc'"):
        invoke("normal", [], {"shape": (2,), "loc": "abc"})
    # The range must fit the dtype: int32 values would otherwise silently wrap around.
    with pytest.raises(ValueError, match=r"\[0, 1099511627776\).*int32"):
        np.random.randint(0, 2 ** 40, size=(2,), dtype="int32")
    with pytest.raises(ValueError, match=r"\[-1, 3\).*uint8"):
        np.random.randint(-1, 3, size=(2,), dtype="uint8")
    wide = np.random.randint(-2 ** 62, 2 ** 62 + 1, size=(1000,)).asnumpy()
    assert wide.min() >= -2 ** 62 and wide.max() <= 2 ** 62
    # Integers beyond 2**53 are drawn exactly, not rounded through a double.
    high = np.random.randint(2 ** 60, 2 ** 60 + 10, size=(1000,)).asnumpy() - 2 ** 60
    assert high.min() >= 0 and high.max() <= 9 and len(set(high.tolist())) == 10
    # NaN bounds are not an error for linspace: NumPy returns NaN, and so do we.
    assert onp.isnan(np.linspace(0, float("nan"), 3).asnumpy()).all()
    assert (np.ones(2) + 1).asnumpy().tolist() == [2.0, 2.0]


def test_python_arguments_raise_type_errors_naming_them():
    for shape in ("x", 2.5, None, (2, "3"), (2.0,), True):
        with pytest.raises(TypeError, match=r"shape must be an int or a tuple of ints, got"):
            np.zeros(shape)
    with pytest.raises(TypeError, match=r"complex128"):
        np.array([1j, 2.0])  # used to drop the imaginary part with only a warning
    with pytest.raises(TypeError, match=r"data type 'bogus'"):
        np.ones(2).astype("bogus")
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        np.ones(2).item()
    assert np.zeros((2, 3)).shape == (2, 3) and np.zeros([onp.int64(2)]).shape == (2,)


def test_mismatched_shapes_name_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)"):
        np.matmul(np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 4\)"):
        np.broadcast_to(np.ones(3), (2, 4))
    with pytest.raises(ValueError, match=r"axis 3.*dimension 2"):
        np.ones((2, 3)).sum(axis=3)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        np.concatenate([np.ones((2, 3)), np.ones((2, 4))])
    with pytest.raises(IndexError, match=r"index 5.*size 2"):
        np.ones((2, 3))[5]
    with pytest.raises(ValueError, match=r"\(4,\).*\(3,\)"):
        np.ones((2, 3))[0] = np.ones(4)


def test_nan_and_inf_propagate():
    nan, inf = float("nan"), float("inf")
    assert onp.isnan((np.array([nan, 1.0]) * 2).sum().item())
    assert onp.isnan(np.max(np.array([inf, nan])).item())
    assert onp.isnan(np.maximum(np.array([nan, 1.0]), np.array([0.0, nan])).asnumpy()).all()
    assert onp.isnan(pymx.npx.softmax(np.array([nan, 1.0])).asnumpy()).all()
    assert np.argmax(np.array([1.0, nan, 3.0])).item() == 1  # NumPy: the first NaN
    assert (np.exp(np.array([inf, -inf])).asnumpy() == [inf, 0.0]).all()
    assert onp.isnan(np.full((2,), nan).asnumpy()).all()


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------

def test_devices_that_do_not_exist():
    run_probes('''
        if pymx.device.num_gpus() == 0:
            expect(ValueError, ["gpu(0)", "0 GPU(s)"], lambda: np.zeros(2, device=pymx.gpu(0)))
            expect(ValueError, ["gpu(0)"], lambda: np.ones(2).to_device(pymx.gpu(0)))
            expect(ValueError, ["gpu(0)"], lambda: np.ones(2).copyto(pymx.gpu(0)))
            expect(ValueError, ["gpu(0)"], lambda: gluon.utils.split_and_load(
                np.ones((4, 2)), [pymx.gpu(0)]))
        expect(ValueError, ["-1"], lambda: pymx.cpu(-1))
        # An id past the engine's CPU pools used to abort the process (the throw escaped the
        # destructor of the half-made array).
        expect(ValueError, ["cpu(1000000)", "0 to 63"],
               lambda: np.zeros(2, device=pymx.cpu(10 ** 6)))
        expect(ValueError, ["cpu(64)"], lambda: np.ones(2).to_device(pymx.cpu(64)))
        expect(TypeError, ["str", "'cpu'"], lambda: np.zeros(2, device="cpu"))
        expect(ValueError, ["cpu(0)", "cpu(1)"],
               lambda: np.ones(2, device=pymx.cpu(0)) + np.ones(2, device=pymx.cpu(1)))
        assert (np.ones(2, device=pymx.cpu(1)).to_device(pymx.cpu(0)) + 1).asnumpy().tolist() \\
            == [2.0, 2.0]
        ''')


def test_split_and_load_bad_arguments():
    cpus = [pymx.cpu(0), pymx.cpu(1)]
    with pytest.raises(ValueError, match=r"\(3, 2\).*2 slices"):
        gluon.utils.split_and_load(np.ones((3, 2)), cpus, even_split=True)
    with pytest.raises(ValueError, match=r"got 0"):
        gluon.utils.split_and_load(np.ones((4, 2)), [])
    parts = gluon.utils.split_and_load(np.ones((4, 2)), cpus)
    assert [p.device for p in parts] == cpus and [p.shape for p in parts] == [(2, 2), (2, 2)]


# ---------------------------------------------------------------------------------------------
# Asynchronous failures
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["threaded", "naive"])
def test_ops_after_an_async_failure(engine):
    run_probes('''
        from pymx._c import core
        a = np.ones(3)
        core._push_failing_op(a, "boom from the robustness test")
        b = a + 1   # depends on the failed write
        c = np.ones(3) * 2  # independent
        expect(ValueError, ["boom from the robustness test"], lambda: b.asnumpy())
        assert c.asnumpy().tolist() == [2.0, 2.0, 2.0]
        a[:] = 5  # overwriting the failed array makes it usable again
        assert (a + 1).asnumpy().tolist() == [6.0, 6.0, 6.0]
        ''', env={**os.environ, "PYMX_ENGINE": engine})


# ---------------------------------------------------------------------------------------------
# Gluon layers, parameter files, data
# ---------------------------------------------------------------------------------------------

def test_gluon_layers_reject_bad_arguments():
    with pytest.raises(ValueError, match=r"units must be a positive int, got -1"):
        nn.Dense(-1)
    with pytest.raises(ValueError, match=r"Conv2D: channels must be a positive int, got -4"):
        nn.Conv2D(-4, kernel_size=3)
    with pytest.raises(ValueError, match=r"1\.5"):
        nn.Dropout(1.5)
    dense = nn.Dense(3, in_units=4)
    dense.initialize()
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 5\)"):
        dense(np.ones((2, 5)))
    conv = nn.Conv2D(4, kernel_size=5)
    conv.initialize()
    with pytest.raises(ValueError, match=r"kernel \(5, 5\).*\(1, 1, 3, 3\)"):
        conv(np.ones((1, 1, 3, 3)))
    with pytest.raises(ValueError, match=r"stride \(0, 0\)"):
        pymx.npx.convolution(np.ones((1, 1, 5, 5)), np.ones((2, 1, 3, 3)), kernel=(3, 3),
                             stride=(0, 0), num_filter=2, no_bias=True)
    with pytest.raises(ValueError, match=r"kernel \(9, 9\)"):
        nn.MaxPool2D(pool_size=9)(np.ones((1, 1, 3, 3)))
    assert dense(np.ones((2, 4))).shape == (2, 3)


def _saved_dense(path):
    net = nn.Dense(3, in_units=4)
    net.initialize()
    net.save_parameters(str(path))
    return net


def test_corrupt_and_truncated_parameter_files(tmp_path):
    path = tmp_path / "net.params"
    net = _saved_dense(path)
    good = path.read_bytes()
    fresh = nn.Dense(3, in_units=4)
    with pytest.raises(FileNotFoundError, match=r"missing\.params"):
        fresh.load_parameters(str(tmp_path / "missing.params"))
    for name, data in [("empty", b""), ("garbage", b"garbage" * 10), ("half", good[:len(good) // 2]),
                       ("tail", good[:-7])]:
        bad = tmp_path / f"{name}.params"
        bad.write_bytes(data)
        with pytest.raises(ValueError, match=name):
            fresh.load_parameters(str(bad))
    wide = nn.Dense(3, in_units=5)
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(3, 4\)"):
        wide.load_parameters(str(path))
    fresh.load_parameters(str(path))
    onp.testing.assert_array_equal(fresh.weight.data().asnumpy(), net.weight.data().asnumpy())


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_interrupted_save_keeps_the_old_file(tmp_path, monkeypatch, failing):
    """The save fails after the new bytes were written (fsync) or at the final rename."""
    path = tmp_path / "net.params"
    _saved_dense(path)
    before = path.read_bytes()
    other = nn.Dense(3, in_units=4)
    other.initialize()

    def fail(*args, **kwargs):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match="simulated"):
        other.save_parameters(str(path))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["net.params"]  # no temp file left behind


def test_image_folder_with_corrupt_and_truncated_images(tmp_path):
    from PIL import Image
    with pytest.raises(ValueError, match=r"nonexistent_dir"):
        gluon.data.vision.ImageFolderDataset(str(tmp_path / "nonexistent_dir"))
    (tmp_path / "cat").mkdir()
    Image.fromarray(onp.full((6, 5, 3), 7, "uint8")).save(tmp_path / "cat" / "good.png")
    png = (tmp_path / "cat" / "good.png").read_bytes()
    (tmp_path / "cat" / "trunc.png").write_bytes(png[:40])
    (tmp_path / "cat" / "zjunk.jpg").write_bytes(b"\xff\xd8\xffgarbage")
    dataset = gluon.data.vision.ImageFolderDataset(str(tmp_path))
    names = [os.path.basename(f) for f, _ in dataset.items]
    for index, name in enumerate(names):
        if name == "good.png":
            image, label = dataset[index]
            assert image.shape == (6, 5, 3) and label == 0 and int(image.asnumpy()[0, 0, 0]) == 7
        else:
            with pytest.raises(ValueError, match=name):
                dataset[index]


def test_dataloader_bad_arguments_and_failing_items():
    dataset = gluon.data.ArrayDataset(np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"got 0"):
        gluon.data.DataLoader(dataset, batch_size=0)
    with pytest.raises(ValueError, match=r"length 4.*3"):
        gluon.data.ArrayDataset(np.ones((4, 2)), np.ones((3,)))

    class Failing(gluon.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                raise KeyError("item 2 is broken")
            return onp.ones(2, "float32")

    for workers in (0, 2):
        with pytest.raises(KeyError, match="item 2 is broken"):
            list(gluon.data.DataLoader(Failing(), batch_size=1, num_workers=workers))
    batches = list(gluon.data.DataLoader(dataset, batch_size=3, num_workers=2))
    assert [b.shape for b in batches] == [(3, 2), (1, 2)]


# ---------------------------------------------------------------------------------------------
# Backward operators: shapes, attributes and dtypes checked when invoked
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
def test_softmax_of_an_empty_array(op, shape):
    """An empty softmax axis once made the kernel read x[0] of an empty buffer (a segfault)."""
    run_probes(f'''
        out = invoke("{op}", [np.ones({shape!r})])[0]
        assert out.shape == {shape!r} and out.asnumpy().size == 0
        ''')


def test_backward_ops_validate_their_input_shapes():
    """Each *_backward op checks its inputs' shapes against each other before the kernel indexes
    them (these probes once segfaulted or overran the heap). Run in a child: a regression
    crashes."""
    run_probes('''
        def a(*shape, dtype="float32"):
            return np.array(onp.ones(shape, dtype))
        expect(ValueError, ["fully_connected_backward", "()"],
               lambda: invoke("fully_connected_backward", [a(2, 3), a(2, 3), a()]))
        expect(ValueError, ["fully_connected_backward", "out_grad shape (2, 3)", "(2, 5)"],
               lambda: invoke("fully_connected_backward", [a(2, 3), a(2, 3), a(5, 3)]))
        expect(ValueError, ["pick_backward", "(0,)"],
               lambda: invoke("pick_backward", [a(2, 3), a(2, 3), a(0)]))
        expect(ValueError, ["pick_backward", "out_grad shape (2, 3)", "(2,)"],
               lambda: invoke("pick_backward", [a(2, 3), a(2, 3), a(2)]))
        expect(ValueError, ["topk_backward", "(0,)", "(2, 1)"],
               lambda: invoke("topk_backward", [a(2, 3), a(2, 3), a(0)]))
        # Indices are data: out of range they are reported when the kernel reads them.
        expect(ValueError, ["topk_backward", "index 7", "[0, 3)"],
               lambda: invoke("topk_backward", [a(2, 1), a(2, 3), a(2, 1, dtype="int64") * 7]))
        for _ in range(20):  # an overrun corrupts the heap; repeat so that it shows
            expect(ValueError, ["embedding_backward", "(3,)"],
                   lambda: invoke("embedding_backward", [a(2, 3), a(2, 3), a(3)]))
        expect(ValueError, ["embedding_backward", "(2, 4)", "(2, 5)"],
               lambda: invoke("embedding_backward", [a(2, 4), a(2), a(6, 5)]))
        expect(ValueError, ["convolution_backward", "weight shape (4, 1, 1, 1)", "(4, 3, 3, 3)"],
               lambda: invoke("convolution_backward", [a(1, 4, 3, 3), a(1, 3, 5, 5),
                                                       a(4, 1, 1, 1)], {"kernel": (3, 3)}))
        expect(ValueError, ["batch_norm_backward", "gamma (2,)", "(3,)"],
               lambda: invoke("batch_norm_backward", [a(2, 3), a(2, 3), a(2), a(3), a(3)]))
        expect(ValueError, ["batch_norm_backward", "axis 4"],
               lambda: invoke("batch_norm_backward", [a(2, 3), a(2, 3), a(3), a(3), a(3)],
                              {"axis": 4}))
        expect(ValueError, ["layer_norm_backward", "mean (3, 1)", "(2, 1)"],
               lambda: invoke("layer_norm_backward", [a(2, 3), a(2, 3), a(3), a(3, 1), a(2, 1)]))
        ''')


@pytest.mark.parametrize("op,attrs", [
    ("activation_backward", {"act_type": "bogus"}),
    ("leaky_relu_backward", {"act_type": "bogus"}),
    ("leaky_relu_backward", {"slope": "steep"}),
    ("log_softmax_backward", {"axis": "abc"}),
    ("softmax_backward", {"axis": 5}),
    ("softmax_backward", {"temperature": -2}),
])
def test_backward_ops_reject_bad_attributes_when_invoked(op, attrs):
    """The infer function validates the attributes, so the error is raised at the call instead
    of at the next wait (where it would also poison the output)."""
    from pymx._op import invoke
    inputs = [np.ones((2, 3)) for _ in range(3 if op == "activation_backward" else 2)]
    with pytest.raises(ValueError, match=str(list(attrs.values())[0])):
        invoke(op, inputs, attrs)


_BACKWARD_OPS_OF_SAME_SHAPED_INPUTS = {
    "activation_backward": 3, "leaky_relu_backward": 2, "dropout_backward": 2,
    "softmax_backward": 2, "log_softmax_backward": 2}


@pytest.mark.parametrize("op", sorted(_BACKWARD_OPS_OF_SAME_SHAPED_INPUTS))
def test_backward_ops_reject_integer_dtypes_when_invoked(op):
    from pymx._op import invoke
    n = _BACKWARD_OPS_OF_SAME_SHAPED_INPUTS[op]
    with pytest.raises(TypeError, match=f"{op}.*int32"):
        invoke(op, [np.ones((2, 3), dtype="int32") for _ in range(n)])


def test_backward_ops_reject_mixed_dtypes_when_invoked():
    """The kernels read every input as the first one's type: a float32 input next to a float64
    out_grad would be read past its end."""
    run_probes('''
        def a(*shape, dtype="float32"):
            return np.array(onp.ones(shape, dtype))
        for op, n in [("activation_backward", 3), ("leaky_relu_backward", 2),
                      ("dropout_backward", 2), ("softmax_backward", 2)]:
            expect(TypeError, [op, "float32", "float64"],
                   lambda: invoke(op, [a(2, 3, dtype="float64")] + [a(2, 3)] * (n - 1)))
        expect(TypeError, ["fully_connected_backward", "float64"],
               lambda: invoke("fully_connected_backward",
                              [a(2, 4, dtype="float64"), a(2, 3), a(4, 3)]))
        expect(TypeError, ["pooling_backward", "float64"],
               lambda: invoke("pooling_backward", [a(1, 1, 2, 2), a(1, 1, 4, 4, dtype="float64"),
                                                   a(1, 1, 2, 2)], {"kernel": (2, 2),
                                                                    "stride": (2, 2)}))
        expect(TypeError, ["embedding_backward", "float64"],
               lambda: invoke("embedding_backward", [a(2, 5, dtype="float64"), a(2), a(6, 5)]))
        expect(TypeError, ["layer_norm_backward", "float64"],
               lambda: invoke("layer_norm_backward", [a(2, 3), a(2, 3), a(3, dtype="float64"),
                                                      a(2, 1), a(2, 1)]))
        ''')


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------

def _settings():
    """Every PYMX_* variable engine/src/config.cc lists (the one place that reads them)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "engine", "src", "config.cc")
    with open(path) as f:
        names = [line.split()[1] for line in f if line.startswith("//   PYMX_")]
    assert len(names) >= 10, names
    return names


@pytest.mark.parametrize("name", _settings())
@pytest.mark.parametrize("value", ["bogus", "-3"])
def test_every_setting_refuses_a_bad_value_naming_it(name, value):
    result = run_python("import pymx\nfrom pymx import np\nprint(np.ones(2).asnumpy())",
                        env={**os.environ, name: value})
    assert result.returncode == 1, result.stdout + result.stderr  # an exception, not a crash
    assert f'{name}="{value}"' in result.stderr, result.stderr


# ---------------------------------------------------------------------------------------------
# NumPy's answers at the edges
# ---------------------------------------------------------------------------------------------

def test_clip_with_min_above_max_matches_numpy():
    """NumPy's clip is minimum(maximum(a, a_min), a_max): a_min > a_max gives a_max everywhere."""
    x = onp.array([0.0, 2.0, 5.0, onp.nan], "float32")
    onp.testing.assert_array_equal(np.clip(np.array(x), 3, 1).asnumpy(), onp.clip(x, 3, 1))
    onp.testing.assert_array_equal(np.clip(np.array(x), 1, 3).asnumpy(), onp.clip(x, 1, 3))


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("ddof", [2, 5])
def test_var_std_with_ddof_at_least_n_matches_numpy(op, ddof):
    """NumPy divides by max(n - ddof, 0): inf for a nonzero sum of squares, nan for a zero one."""
    x = onp.array([[1.0, 3.0], [2.0, 2.0]], "float32")
    with pytest.warns(RuntimeWarning), onp.errstate(divide="ignore", invalid="ignore"):
        expected = getattr(onp, op)(x, axis=1, ddof=ddof)
    onp.testing.assert_array_equal(getattr(np, op)(np.array(x), axis=1, ddof=ddof).asnumpy(),
                                   expected)


def test_transpose_method_takes_axes_like_numpy():
    x = onp.arange(6.0).reshape(2, 3)
    a = np.array(x)
    for axes in [(1, 0), ((1, 0),), ([1, 0],), (), (None,)]:
        onp.testing.assert_array_equal(a.transpose(*axes).asnumpy(), x.transpose(*axes))
    for axes in [(0, 0), ((1, 1),)]:
        with pytest.raises(ValueError, match=r"repeated axis in \((0, 0|1, 1)\)"):
            a.transpose(*axes)
