"""A sweep of the public API with one bad input per case (DESIGN.md §5).

Each case calls one public function with one bad argument and expects the exception class
NumPy raises for the same call where pymx mirrors a NumPy function (MXNet's elsewhere), with a
message naming the offending value(s); a few cases instead check the documented answer where the
input is legal but unusual (MXNet clips embedding indices, for instance). After every case a small
computation must still give the right answer.

All cases run in one child interpreter (per device), so that a crash or a hang fails the case that
caused it, and the cases after it, instead of killing pytest; the child prints one JSON line per
case. test_robustness.py covers the every-operator fuzz, huge allocations, async failures,
settings and atomic saves; this file covers the public functions one argument at a time.
"""
import json
import subprocess
import textwrap

import pytest

from conftest import requires_gpu, run_python

# The child's helpers: a(...) makes float32 ones, i(...) int64 values, setitem(x, key, value)
# assigns in an expression, and the gluon fixtures below are the files and blocks cases load.
_PRELUDE = '''
import json, os, shutil, tempfile, traceback, warnings
import numpy as onp
import pymx
from pymx import autograd, gluon, np, npx
from pymx.gluon import nn

def a(*shape, dtype="float32"):
    return np.ones(shape, dtype=dtype)

def i(values):
    return np.array(values, dtype="int64")

def f(values):
    return np.array(values, dtype="float32")

def setitem(x, key, value):
    x[key] = value
    return x

def dense(units=3, in_units=4):
    block = nn.Dense(units, in_units=in_units)
    block.initialize()
    return block

def conv2d():
    block = nn.Conv2D(4, kernel_size=3, in_channels=2)
    block.initialize()
    return block

def called_twice(block, first, second):
    block(first)
    return block(second)

def hybridized(block):
    block.hybridize()
    return block

class Pair(nn.HybridBlock):
    """Two Dense layers; One below holds only the first, so their files differ by names."""
    def __init__(self):
        super().__init__()
        self.a = nn.Dense(3, in_units=4)
        self.b = nn.Dense(2, in_units=3)

    def forward(self, x):
        return self.b(self.a(x))

class One(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.a = nn.Dense(3, in_units=4)

    def forward(self, x):
        return self.a(x)

def saved(block, name):
    block.initialize()
    path = os.path.join(TMP, name)
    block.save_parameters(path)
    return block

def recorded(fn, x):
    x.attach_grad()
    with autograd.record():
        y = fn(x)
    return y

def backward_twice():
    y = recorded(lambda x: (x * x).sum(), a(3))
    y.backward()
    y.backward()

def trainer_step(batch_size):
    block = dense()
    trainer = gluon.Trainer(block.collect_params(), "sgd")
    with autograd.record():
        loss = block(a(2, 4)).sum()
    loss.backward()
    trainer.step(batch_size)

TMP = tempfile.mkdtemp()
PAIR, ONE, DENSE = saved(Pair(), "pair.params"), saved(One(), "one.params"), \\
    saved(nn.Dense(3, in_units=4), "dense.params")
with open(os.path.join(TMP, "dense.params"), "rb") as source:
    good = source.read()
with open(os.path.join(TMP, "truncated.params"), "wb") as target:
    target.write(good[:len(good) // 2])
os.makedirs(os.path.join(TMP, "images", "cat"))
with open(os.path.join(TMP, "images", "cat", "notes.jpg"), "w") as target:
    target.write("not an image")

def usable():
    try:
        return (np.array([1.0, 2.0]) * 3).asnumpy().tolist() == [3.0, 6.0]
    except Exception:
        return False

def run(case_id, kind, code):
    print(json.dumps({"started": case_id}), flush=True)
    outcome = {"id": case_id, "raised": None, "message": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a case's warnings are not its result
            if kind == "raises":
                result = eval(code)
                for r in (result if isinstance(result, (list, tuple)) else [result]):
                    if hasattr(r, "wait_to_read"):
                        r.wait_to_read()
            else:
                exec(code, dict(globals()))
    except BaseException as e:
        outcome["raised"] = [c.__name__ for c in type(e).__mro__]
        outcome["message"] = str(e) if kind == "raises" else traceback.format_exc()
    outcome["usable"] = usable()
    print(json.dumps(outcome), flush=True)
'''


def raises(case_id, code, exc, *fragments, gpu=True):
    """A case: `code` (an expression) raises `exc` (a class name in its MRO) with each fragment
    in its message. gpu=False keeps it off the gpu run (host-only or file cases)."""
    return pytest.param(("raises", code, exc, fragments, gpu), id=case_id)


def gives(case_id, code, gpu=True):
    """A case: `code` (statements with asserts) runs without an exception."""
    return pytest.param(("gives", textwrap.dedent(code), None, (), gpu), id=case_id)


CASES = [
    # --- creation -----------------------------------------------------------------------------
    raises("zeros-negative-shape", "np.zeros((-1, 2))", "ValueError", "(-1, 2)"),
    raises("full-negative-shape", "np.full((-2,), 1.0)", "ValueError", "(-2,)"),
    raises("empty-negative-shape", "np.empty((3, -2))", "ValueError", "(3, -2)"),
    raises("zeros-float-shape", "np.zeros((2.5,))", "TypeError", "2.5"),
    raises("zeros-huge-shape", "np.zeros((2 ** 62,))", "MemoryError", "(4611686018427387904,)"),
    raises("ones-huge-product", "np.ones((2 ** 40, 2 ** 40))", "MemoryError",
           "(1099511627776, 1099511627776)"),
    raises("zeros-unknown-dtype", "np.zeros(2, dtype='bogus')", "TypeError", "bogus"),
    raises("ones-object-dtype", "np.ones(2, dtype=object)", "TypeError", "object"),
    raises("arange-step-zero", "np.arange(0, 5, 0)", "ValueError", "step", "zero"),
    raises("linspace-negative-num", "np.linspace(0, 1, -1)", "ValueError", "-1"),
    raises("eye-negative-n", "np.eye(-1)", "ValueError", "N=-1"),
    raises("zeros-missing-cpu", "np.zeros(2, device=pymx.cpu(10 ** 6))", "ValueError",
           "cpu(1000000)", gpu=False),
    raises("zeros-missing-gpu", "np.zeros(2, device=pymx.gpu(64))", "ValueError", "gpu(64)",
           gpu=False),
    raises("to-device-missing-gpu", "a(2).to_device(pymx.gpu(64))", "ValueError", "gpu(64)",
           gpu=False),
    # --- elementwise and broadcasting ---------------------------------------------------------
    raises("add-incompatible", "a(2, 3) + a(4)", "ValueError", "(2, 3)", "(4,)"),
    raises("multiply-incompatible", "np.multiply(a(2, 3), a(2, 2))", "ValueError", "(2, 3)",
           "(2, 2)"),
    raises("subtract-transposed", "np.subtract(a(2, 3), a(3, 2))", "ValueError", "(2, 3)",
           "(3, 2)"),
    raises("where-incompatible", "np.where(a(2, 3) > 0, a(2, 3), a(4))", "ValueError", "(4,)"),
    raises("broadcast-to-incompatible", "np.broadcast_to(a(3), (2, 4))", "ValueError", "(3,)",
           "(2, 4)"),
    raises("copyto-incompatible", "np.copyto(a(2, 3), a(4))", "ValueError", "(4,)", "(2, 3)"),
    # --- reductions ---------------------------------------------------------------------------
    raises("sum-axis-out-of-range", "np.sum(a(2, 3), axis=2)", "AxisError", "axis 2",
           "dimension 2"),
    raises("sum-negative-axis-out-of-range", "np.sum(a(2, 3), axis=-3)", "AxisError", "axis -3"),
    raises("sum-repeated-axis", "np.sum(a(2, 3), axis=(0, 0))", "ValueError", "(0, 0)"),
    raises("sum-repeated-axis-negative", "np.sum(a(2, 3), axis=(1, -1))", "ValueError",
           "(1, -1)"),
    raises("prod-repeated-axis", "np.prod(a(2, 3), axis=(0, 0))", "ValueError", "(0, 0)"),
    raises("mean-axis-out-of-range", "np.mean(a(2, 3), axis=5)", "AxisError", "axis 5"),
    raises("max-axis-out-of-range", "np.max(a(2, 3), axis=2)", "AxisError", "axis 2"),
    raises("argmax-axis-out-of-range", "np.argmax(a(2, 3), axis=2)", "AxisError", "axis 2"),
    raises("argmin-axis-out-of-range", "np.argmin(a(2, 3), axis=-3)", "AxisError", "axis -3"),
    raises("std-axis-out-of-range", "np.std(a(2, 3), axis=3)", "AxisError", "axis 3"),
    raises("cumsum-axis-out-of-range", "np.cumsum(a(2, 3), axis=2)", "AxisError", "axis 2"),
    raises("sort-axis-out-of-range", "np.sort(a(2, 3), axis=2)", "AxisError", "axis 2"),
    raises("norm-axis-out-of-range", "np.linalg.norm(a(2, 3), axis=3)", "AxisError", "axis 3"),
    raises("norm-repeated-axis", "np.linalg.norm(a(2, 3), axis=(1, 1))", "ValueError",
           "(1, 1)"),
    # --- shape manipulation -------------------------------------------------------------------
    raises("reshape-wrong-size", "np.reshape(a(2, 3), (4, 2))", "ValueError", "6", "(4, 2)"),
    raises("reshape-two-unknowns", "np.reshape(a(2, 3), (-1, -1))", "ValueError", "(-1, -1)"),
    raises("reshape-float-dimension", "np.reshape(a(2, 3), (3.0, 2))", "TypeError", "(3.0, 2)"),
    raises("transpose-axis-out-of-range", "np.transpose(a(2, 3), (0, 2))", "AxisError",
           "axis 2"),
    raises("transpose-too-few-axes", "np.transpose(a(2, 3), (0,))", "ValueError", "(0,)"),
    raises("transpose-repeated-axis", "np.transpose(a(2, 3), (1, 1))", "ValueError", "(1, 1)"),
    raises("swapaxes-out-of-range", "np.swapaxes(a(2, 3), 0, 2)", "AxisError", "axis 2"),
    raises("moveaxis-destination-out-of-range", "np.moveaxis(a(2, 3), 0, 2)", "AxisError",
           "destination", "axis 2"),
    raises("moveaxis-source-out-of-range", "np.moveaxis(a(2, 3), -3, 0)", "AxisError",
           "source", "axis -3"),
    raises("moveaxis-repeated-source", "np.moveaxis(a(2, 3, 4), (0, 0), (1, 2))", "ValueError",
           "source", "(0, 0)"),
    raises("moveaxis-length-mismatch", "np.moveaxis(a(2, 3, 4), (0, 1), (1,))", "ValueError",
           "[0, 1]", "[1]"),
    raises("squeeze-axis-not-one", "np.squeeze(a(2, 3), axis=0)", "ValueError", "axis 0",
           "(2, 3)"),
    raises("squeeze-axis-out-of-range", "np.squeeze(a(1, 3), axis=2)", "AxisError", "axis 2"),
    raises("expand-dims-out-of-range", "np.expand_dims(a(2, 3), 3)", "AxisError", "axis 3"),
    raises("expand-dims-negative-out-of-range", "np.expand_dims(a(2, 3), -4)", "AxisError",
           "axis -4"),
    raises("trace-of-a-vector", "np.trace(a(3))", "ValueError", "(3,)"),
    raises("trace-same-axes", "np.trace(a(2, 2), axis1=1, axis2=-1)", "ValueError", "(1, -1)"),
    gives("moveaxis-matches-numpy", """
        x = onp.arange(24.0).reshape(2, 3, 4)
        for source, destination in [(0, 2), ((0, 1), (2, 0)), (-1, 0)]:
            got = np.moveaxis(np.array(x), source, destination).asnumpy()
            assert (got == onp.moveaxis(x, source, destination)).all(), (source, destination)
        assert (np.trace(np.array(x), axis1=1, axis2=2).asnumpy() ==
                onp.trace(x, axis1=1, axis2=2)).all()
        """),
    # --- indexing -----------------------------------------------------------------------------
    raises("getitem-int-out-of-range", "a(2, 3)[2]", "IndexError", "index 2", "size 2"),
    raises("getitem-negative-out-of-range", "a(2, 3)[-3]", "IndexError", "index -3"),
    raises("getitem-second-axis-out-of-range", "a(2, 3)[0, 3]", "IndexError", "index 3",
           "axis 1"),
    raises("getitem-too-many-indices", "a(2, 3)[0, 0, 0]", "IndexError", "2-dimensional",
           "3 were indexed"),
    raises("getitem-step-zero", "a(2, 3)[::0]", "ValueError", "step", "zero"),
    raises("getitem-float", "a(2, 3)[1.0]", "IndexError", "1.0"),
    raises("getitem-string", "a(2, 3)['x']", "IndexError", "'x'"),
    raises("getitem-two-ellipses", "a(2, 3)[..., ...]", "IndexError", "ellipsis"),
    raises("getitem-mask-wrong-length", "a(2, 3)[np.array([True, False, True])]", "IndexError",
           "(3,)", "(2, 3)"),
    raises("getitem-mask-wrong-shape", "a(2, 3)[np.array([[True, False], [False, True]])]",
           "IndexError", "(2, 2)", "(2, 3)"),
    raises("getitem-list-out-of-range", "a(2, 3)[[0, 5]]", "IndexError", "index 5"),
    raises("getitem-array-out-of-range", "a(2, 3)[i([0, -5])]", "IndexError", "index -5"),
    raises("getitem-float-list", "a(2, 3)[[0.5]]", "IndexError", "float64"),
    raises("getitem-numpy-float-array", "a(2, 3)[onp.array([0.0, 1.0])]", "IndexError",
           "float64"),
    gives("getitem-float-array-truncated-as-mxnet", """
        x = np.array(onp.arange(6.0).reshape(2, 3))
        assert x[np.array([1, 0])].asnumpy().tolist() == [[3, 4, 5], [0, 1, 2]]  # float32 index
        # MXNet truncates a float index array on the device; checking for fractions would make
        # every x[np.arange(n), label] wait for its index array.
        assert x[np.array([1.5, 0.25])].asnumpy().tolist() == [[3, 4, 5], [0, 1, 2]]
        """),
    raises("setitem-int-out-of-range", "setitem(a(2, 3), 2, 1.0)", "IndexError", "index 2"),
    raises("setitem-step-zero", "setitem(a(2, 3), slice(None, None, 0), 1.0)", "ValueError",
           "step"),
    raises("setitem-float", "setitem(a(2, 3), 1.0, 1.0)", "IndexError", "1.0"),
    raises("setitem-value-shape", "setitem(a(2, 3), 0, a(4))", "ValueError", "(4,)", "(3,)"),
    raises("setitem-value-rows", "setitem(a(2, 3), slice(None), a(3, 3))", "ValueError",
           "(3, 3)", "(2, 3)"),
    raises("setitem-mask-wrong-length", "setitem(a(2, 3), np.array([True, False, True]), 0.0)",
           "IndexError", "(3,)"),
    raises("setitem-list-out-of-range", "setitem(a(2, 3), [0, 5], 1.0)", "IndexError",
           "index 5"),
    # --- joining and splitting ----------------------------------------------------------------
    raises("concatenate-mismatch", "np.concatenate([a(2, 3), a(2, 4)])", "ValueError", "(2, 3)",
           "(2, 4)"),
    raises("concatenate-rank-mismatch", "np.concatenate([a(2, 3), a(3)])", "ValueError",
           "(3,)"),
    raises("concatenate-empty-list", "np.concatenate([])", "ValueError", "non-empty"),
    raises("concatenate-axis-out-of-range", "np.concatenate([a(2, 3), a(2, 3)], axis=2)",
           "AxisError", "axis 2"),
    raises("stack-mismatch", "np.stack([a(2, 3), a(2, 4)])", "ValueError", "(2, 3)", "(2, 4)"),
    raises("stack-empty-list", "np.stack([])", "ValueError", "non-empty"),
    raises("stack-axis-out-of-range", "np.stack([a(2, 3), a(2, 3)], axis=3)", "AxisError",
           "axis 3"),
    raises("vstack-mismatch", "np.vstack([a(2, 3), a(2, 4)])", "ValueError", "(2, 4)"),
    raises("hstack-empty-list", "np.hstack([])", "ValueError", "non-empty"),
    raises("split-uneven", "np.split(a(5, 3), 2)", "ValueError", "length 5", "2 sections"),
    raises("split-zero-sections", "np.split(a(4, 3), 0)", "ValueError", "0 sections"),
    raises("split-axis-out-of-range", "np.split(a(4, 3), 2, axis=2)", "AxisError", "axis 2"),
    raises("array-split-zero-sections", "np.array_split(a(4, 3), 0)", "ValueError", "got 0"),
    raises("hsplit-uneven", "np.hsplit(a(2, 3), 2)", "ValueError", "length 3"),
    # --- products -----------------------------------------------------------------------------
    raises("matmul-mismatch", "np.matmul(a(2, 3), a(2, 3))", "ValueError", "(2, 3)"),
    raises("matmul-vectors-mismatch", "np.matmul(a(3), a(4))", "ValueError", "(3,)", "(4,)"),
    raises("matmul-vector-matrix-mismatch", "np.matmul(a(3), a(4, 2))", "ValueError", "(3,)",
           "(4, 2)"),
    raises("matmul-batch-mismatch", "np.matmul(a(2, 2, 3), a(3, 3, 4))", "ValueError",
           "(2, 2, 3)", "(3, 3, 4)"),
    raises("dot-mismatch", "np.dot(a(2, 3), a(2, 3))", "ValueError", "(2, 3) and (2, 3)",
           "not aligned"),
    raises("dot-vectors-mismatch", "np.dot(a(3), a(4))", "ValueError", "(3,) and (4,)"),
    raises("tensordot-mismatch", "np.tensordot(a(2, 3), a(4, 5), axes=1)", "ValueError",
           "(2, 3)", "(4, 5)"),
    raises("tensordot-axis-out-of-range", "np.tensordot(a(2, 3), a(3, 5), axes=([2], [0]))",
           "AxisError", "axis 2", "(2, 3)"),
    raises("inner-mismatch", "np.inner(a(2, 3), a(2, 4))", "ValueError", "(2, 3)", "(2, 4)"),
    # --- linear algebra -----------------------------------------------------------------------
    raises("inv-not-square", "np.linalg.inv(a(2, 3))", "LinAlgError", "(2, 3)"),
    raises("inv-vector", "np.linalg.inv(a(3))", "LinAlgError", "1-dimensional"),
    raises("det-not-square", "np.linalg.det(a(2, 3))", "LinAlgError", "(2, 3)"),
    raises("slogdet-not-square", "np.linalg.slogdet(a(2, 3))", "LinAlgError", "(2, 3)"),
    raises("cholesky-not-square", "np.linalg.cholesky(a(2, 3))", "LinAlgError", "(2, 3)"),
    raises("eigh-not-square", "np.linalg.eigh(a(2, 3))", "LinAlgError", "(2, 3)"),
    raises("svd-vector", "np.linalg.svd(a(3))", "LinAlgError", "1-dimensional"),
    raises("qr-vector", "np.linalg.qr(a(3))", "LinAlgError", "1-dimensional"),
    raises("pinv-vector", "np.linalg.pinv(a(3))", "LinAlgError", "1-dimensional"),
    raises("solve-mismatch", "np.linalg.solve(a(3, 3), a(2))", "ValueError", "(3, 3)"),
    raises("lstsq-mismatch", "np.linalg.lstsq(a(3, 2), a(4), rcond=None)", "LinAlgError",
           "(4,)", "(3, 2)"),
    raises("norm-unknown-order", "np.linalg.norm(a(2, 3), ord='bogus')", "ValueError", "bogus"),
    # --- random -------------------------------------------------------------------------------
    raises("normal-negative-scale", "np.random.normal(0, -1, size=(2,))", "ValueError", "-1"),
    raises("uniform-negative-size", "np.random.uniform(size=(-1, 2))", "ValueError", "(-1, 2)"),
    raises("normal-negative-size", "np.random.normal(size=(2, -3))", "ValueError", "(2, -3)"),
    raises("binomial-p-above-one", "np.random.binomial(5, 1.5, size=(2,))", "ValueError", "1.5"),
    raises("binomial-negative-n", "np.random.binomial(-5, 0.5, size=(2,))", "ValueError", "-5"),
    raises("bernoulli-p-above-one", "npx.random.bernoulli(prob=1.5, size=(2,))", "ValueError",
           "1.5"),
    raises("choice-negative-p", "np.random.choice(3, size=2, p=[0.5, 0.7, -0.2])",
           "ValueError", "-0.2"),
    raises("choice-p-not-summing-to-one", "np.random.choice(3, size=2, p=[0.5, 0.2, 0.2])",
           "ValueError", "0.9"),
    raises("choice-p-wrong-length", "np.random.choice(3, size=2, p=[0.5, 0.5])", "ValueError",
           "(3,)", "(2,)"),
    raises("choice-sample-larger-than-population", "np.random.choice(3, size=5, replace=False)",
           "ValueError", "(5)", "(3)"),
    raises("exponential-negative-scale", "np.random.exponential(-1.0, size=(2,))", "ValueError",
           "-1.0"),
    raises("gamma-negative-shape", "np.random.gamma(-1.0, 1.0, size=(2,))", "ValueError",
           "-1.0"),
    raises("poisson-negative-lam", "np.random.poisson(-1.0, size=(2,))", "ValueError", "-1.0"),
    raises("beta-negative-a", "np.random.beta(-1.0, 1.0, size=(2,))", "ValueError", "-1.0"),
    raises("randint-low-above-high", "np.random.randint(5, 2, size=(2,))", "ValueError",
           "low=5", "high=2"),
    # --- npx: convolution and pooling ---------------------------------------------------------
    raises("convolution-kernel-larger-than-input",
           "npx.convolution(a(1, 1, 3, 3), a(2, 1, 5, 5), kernel=(5, 5), num_filter=2, "
           "no_bias=True)", "ValueError", "(5, 5)", "(1, 1, 3, 3)"),
    raises("convolution-wrong-weight-shape",
           "npx.convolution(a(1, 1, 5, 5), a(2, 3, 3, 3), kernel=(3, 3), num_filter=2, "
           "no_bias=True)", "ValueError", "(2, 3, 3, 3)", "(2, 1, 3, 3)"),
    raises("convolution-wrong-bias-shape",
           "npx.convolution(a(1, 1, 5, 5), a(2, 1, 3, 3), a(3), kernel=(3, 3), num_filter=2)",
           "ValueError", "(3,)", "num_filter=2"),
    raises("convolution-stride-zero",
           "npx.convolution(a(1, 1, 5, 5), a(2, 1, 3, 3), kernel=(3, 3), stride=(0, 1), "
           "num_filter=2, no_bias=True)", "ValueError", "stride (0, 1)"),
    raises("convolution-dilate-zero",
           "npx.convolution(a(1, 1, 5, 5), a(2, 1, 3, 3), kernel=(3, 3), dilate=(0, 0), "
           "num_filter=2, no_bias=True)", "ValueError", "dilate (0, 0)"),
    raises("convolution-negative-pad",
           "npx.convolution(a(1, 1, 5, 5), a(2, 1, 3, 3), kernel=(3, 3), pad=(-1, -1), "
           "num_filter=2, no_bias=True)", "ValueError", "pad (-1, -1)"),
    raises("convolution-data-rank",
           "npx.convolution(a(1, 5, 5), a(2, 1, 3, 3), kernel=(3, 3), num_filter=2, "
           "no_bias=True)", "ValueError", "(1, 5, 5)"),
    raises("convolution-groups-do-not-divide",
           "npx.convolution(a(1, 3, 5, 5), a(2, 1, 3, 3), kernel=(3, 3), num_filter=2, "
           "num_group=2, no_bias=True)", "ValueError", "channels 3", "num_group 2"),
    raises("pooling-kernel-larger-than-input",
           "npx.pooling(a(1, 1, 3, 3), kernel=(5, 5), pool_type='max')", "ValueError", "(5, 5)",
           "(1, 1, 3, 3)"),
    raises("pooling-stride-zero",
           "npx.pooling(a(1, 1, 4, 4), kernel=(2, 2), stride=(0, 0), pool_type='max')",
           "ValueError", "stride (0, 0)"),
    raises("pooling-kernel-zero", "npx.pooling(a(1, 1, 4, 4), kernel=(0, 0), pool_type='max')",
           "ValueError", "kernel (0, 0)"),
    raises("pooling-negative-pad",
           "npx.pooling(a(1, 1, 4, 4), kernel=(2, 2), pad=(-1, -1), pool_type='max')",
           "ValueError", "pad (-1, -1)"),
    raises("pooling-pad-not-below-kernel",
           "npx.pooling(a(1, 1, 4, 4), kernel=(2, 2), pad=(3, 3), pool_type='max')",
           "ValueError", "pad (3, 3)", "(2, 2)"),
    raises("pooling-unknown-type", "npx.pooling(a(1, 1, 4, 4), kernel=(2, 2), pool_type='bogus')",
           "ValueError", "bogus"),
    raises("pooling-data-rank", "npx.pooling(a(4, 4), kernel=(2, 2), pool_type='max')",
           "ValueError", "(4, 4)"),
    # --- npx: normalization, softmax, selection -----------------------------------------------
    raises("batch-norm-gamma-shape", "npx.batch_norm(a(2, 3, 4), a(2), a(3), a(3), a(3))",
           "ValueError", "gamma shape (2,)", "3 channels"),
    raises("batch-norm-moving-mean-shape", "npx.batch_norm(a(2, 3, 4), a(3), a(3), a(4), a(3))",
           "ValueError", "moving_mean shape (4,)"),
    raises("batch-norm-axis-out-of-range",
           "npx.batch_norm(a(2, 3, 4), a(3), a(3), a(3), a(3), axis=5)", "ValueError", "axis 5"),
    raises("layer-norm-gamma-shape", "npx.layer_norm(a(2, 3), a(4), a(3))", "ValueError",
           "(4,)", "(3,)"),
    raises("group-norm-groups-do-not-divide",
           "npx.group_norm(a(2, 4, 3), a(4), a(4), num_groups=3)", "ValueError", "num_groups 3",
           "4 channels"),
    raises("softmax-axis-out-of-range", "npx.softmax(a(2, 3), axis=2)", "ValueError", "axis 2"),
    raises("softmax-negative-axis-out-of-range", "npx.softmax(a(2, 3), axis=-3)", "ValueError",
           "axis -3"),
    raises("log-softmax-axis-out-of-range", "npx.log_softmax(a(2, 3), axis=5)", "ValueError",
           "axis 5"),
    raises("softmax-zero-temperature", "npx.softmax(a(2, 3), temperature=0.0)", "ValueError",
           "temperature", "0"),
    raises("softmax-length-shape", "npx.softmax(a(2, 3), length=i([1, 2, 3]), use_length=True)",
           "ValueError", "(2,)", "(3,)"),
    raises("pick-unknown-mode", "npx.pick(a(2, 3), f([0, 1]), mode='bogus')", "ValueError",
           "bogus"),
    raises("pick-axis-out-of-range", "npx.pick(a(2, 3), f([0, 1]), axis=2)", "ValueError",
           "axis 2"),
    raises("pick-index-shape", "npx.pick(a(2, 3), f([0, 1, 1]))", "ValueError", "(3,)",
           "(2, 3)"),
    raises("take-raise-out-of-range", "np.take(a(2, 3), i([0, 7]), axis=0, mode='raise')",
           "IndexError", "index 7", "size 2"),
    raises("take-default-mode-out-of-range", "np.take(a(2, 3), i([-3]), axis=0)", "IndexError",
           "index -3"),
    raises("take-unknown-mode", "np.take(a(2, 3), i([0]), axis=0, mode='bogus')", "ValueError",
           "bogus"),
    raises("take-axis-out-of-range", "np.take(a(2, 3), i([0]), axis=2)", "AxisError", "axis 2"),
    gives("pick-and-take-clip-and-wrap-out-of-range-indices", """
        x = np.array(onp.arange(6.0).reshape(2, 3))
        assert npx.pick(x, f([-5, 7]), mode="clip").asnumpy().tolist() == [0.0, 5.0]
        assert npx.pick(x, f([-1, 7]), mode="wrap").asnumpy().tolist() == [2.0, 4.0]
        reference = onp.arange(6.0).reshape(2, 3)
        for mode, index in [("clip", [0, 7, -4]), ("wrap", [0, -7, 5])]:
            got = np.take(x, i(index), axis=1, mode=mode).asnumpy()
            assert (got == onp.take(reference, index, axis=1, mode=mode)).all(), mode
        """),
    raises("one-hot-negative-depth", "npx.one_hot(i([0, 1]), -1)", "ValueError", "-1"),
    raises("one-hot-unknown-dtype", "npx.one_hot(i([0, 1]), 3, dtype='bogus')", "TypeError",
           "bogus"),
    raises("embedding-input-dim-mismatch",
           "npx.embedding(f([0, 1]), a(4, 3), input_dim=5, output_dim=3)", "ValueError",
           "(4, 3)", "input_dim=5"),
    gives("embedding-clips-indices-past-input-dim-as-mxnet", """
        weight = np.array(onp.arange(12.0).reshape(4, 3))
        got = npx.embedding(f([0, 5, -1]), weight, input_dim=4, output_dim=3).asnumpy()
        assert got.tolist() == [[0, 1, 2], [9, 10, 11], [0, 1, 2]], got
        """),
    raises("topk-k-larger-than-axis", "npx.topk(a(2, 3), k=5)", "ValueError", "k=5",
           "3 elements"),
    raises("topk-axis-out-of-range", "npx.topk(a(2, 3), axis=2)", "ValueError", "axis 2"),
    raises("topk-unknown-ret-typ", "npx.topk(a(2, 3), ret_typ='bogus')", "ValueError", "bogus"),
    raises("npx-reshape-unknown-code", "npx.reshape(a(2, 3), (-7, 3))", "ValueError", "-7"),
    raises("npx-reshape-wrong-size", "npx.reshape(a(2, 3), (-2, -2, 5))", "ValueError",
           "(2, 3)", "(-2, -2, 5)"),
    raises("npx-reshape-cannot-infer", "npx.reshape(a(2, 3), (4, -1))", "ValueError", "(4, -1)",
           "(2, 3)"),
    raises("npx-reshape-merge-past-the-end", "npx.reshape(a(2), (-5,))", "ValueError", "-5",
           "(2,)"),
    raises("npx-reshape-split-does-not-divide", "npx.reshape(a(2, 3), (-6, 4, -1, 3))",
           "ValueError", "-6", "(4, -1)"),
    raises("npx-reshape-skip-not-one", "npx.reshape(a(6), (-3,))", "ValueError", "-3", "6"),
    raises("fully-connected-num-hidden",
           "npx.fully_connected(a(2, 3), a(4, 3), num_hidden=5, no_bias=True)", "ValueError",
           "num_hidden=5", "(4, 3)"),
    raises("batch-dot-inner-mismatch", "npx.batch_dot(a(2, 3, 4), a(2, 5, 6))", "ValueError",
           "(2, 3, 4)", "(2, 5, 6)"),
    raises("sequence-mask-length-shape",
           "npx.sequence_mask(a(3, 2, 4), f([1, 2, 3]), use_sequence_length=True)", "ValueError",
           "(3,)", "(2,)"),
    raises("dropout-p-above-one", "npx.dropout(a(2, 3), p=1.5)", "ValueError", "1.5"),
    raises("activation-unknown-type", "npx.activation(a(2, 3), act_type='bogus')", "ValueError",
           "bogus"),
    # --- ops that need equal dtypes -----------------------------------------------------------
    raises("convolution-mixed-dtypes",
           "npx.convolution(a(1, 1, 5, 5), a(2, 1, 3, 3, dtype='float64'), kernel=(3, 3), "
           "num_filter=2, no_bias=True)", "ValueError", "float64", "float32"),
    raises("fully-connected-mixed-dtypes",
           "npx.fully_connected(a(2, 3), a(4, 3, dtype='float64'), num_hidden=4, no_bias=True)",
           "ValueError", "float64", "float32"),
    raises("batch-norm-mixed-parameter-dtypes",
           "npx.batch_norm(a(2, 3), a(3, dtype='float64'), a(3), a(3), a(3))", "ValueError",
           "float64", "float32"),
    raises("layer-norm-mixed-dtypes", "npx.layer_norm(a(2, 3), a(3, dtype='float64'), a(3))",
           "ValueError", "float64", "float32"),
    # --- gluon layers after initialization ----------------------------------------------------
    raises("dense-wrong-rank", "dense()(a(4))", "ValueError", "(3, 4)", "(4,)"),
    raises("dense-wrong-features", "dense()(a(2, 5))", "ValueError", "(3, 4)", "(2, 5)"),
    raises("dense-deferred-then-wrong-features",
           "called_twice(dense(3, 0), a(2, 4), a(2, 5))", "ValueError", "(3, 4)", "(2, 5)"),
    raises("dense-hybridized-wrong-features",
           "called_twice(hybridized(dense(3, 0)), a(2, 4), a(2, 5))", "ValueError", "(3, 4)",
           "(2, 5)"),
    raises("conv2d-wrong-rank", "conv2d()(a(2, 5, 5))", "ValueError", "(2, 5, 5)"),
    raises("conv2d-wrong-channels", "conv2d()(a(1, 3, 5, 5))", "ValueError", "(4, 2, 3, 3)",
           "(1, 3, 5, 5)"),
    raises("conv2d-hybridized-wrong-channels",
           "called_twice(hybridized(conv2d()), a(1, 2, 5, 5), a(1, 3, 5, 5))", "ValueError",
           "(1, 3, 5, 5)"),
    # --- gluon parameter files ----------------------------------------------------------------
    raises("load-missing-file", "dense().load_parameters(os.path.join(TMP, 'absent.params'))",
           "FileNotFoundError", "absent.params", gpu=False),
    raises("load-directory", "dense().load_parameters(TMP)", "IsADirectoryError",
           "is a directory", gpu=False),
    raises("load-truncated-file",
           "dense().load_parameters(os.path.join(TMP, 'truncated.params'))", "ValueError",
           "truncated.params", gpu=False),
    raises("load-wrong-shapes", "dense(3, 5).load_parameters(os.path.join(TMP, 'dense.params'))",
           "ValueError", "(3, 5)", "(3, 4)", gpu=False),
    raises("load-missing-names", "Pair().load_parameters(os.path.join(TMP, 'one.params'))",
           "ValueError", "b.weight", "allow_missing", gpu=False),
    raises("load-extra-names", "One().load_parameters(os.path.join(TMP, 'pair.params'))",
           "ValueError", "b.weight", "ignore_extra", gpu=False),
    gives("load-with-allow-missing-and-ignore-extra", """
        pair = Pair()
        pair.load_parameters(os.path.join(TMP, "one.params"), allow_missing=True)
        assert (pair.a.weight.data().asnumpy() == ONE.a.weight.data().asnumpy()).all()
        one = One()
        one.load_parameters(os.path.join(TMP, "pair.params"), ignore_extra=True)
        assert (one.a.weight.data().asnumpy() == PAIR.a.weight.data().asnumpy()).all()
        """, gpu=False),
    # --- trainer ------------------------------------------------------------------------------
    raises("trainer-unknown-optimizer", "gluon.Trainer(dense().collect_params(), 'bogus_opt')",
           "ValueError", "bogus_opt", gpu=False),
    raises("trainer-not-parameters", "gluon.Trainer(5, 'sgd')", "ValueError", "int", gpu=False),
    raises("trainer-step-batch-size-zero", "trainer_step(0)", "ValueError", "got 0", gpu=False),
    raises("trainer-step-negative-batch-size", "trainer_step(-4)", "ValueError", "got -4",
           gpu=False),
    raises("trainer-step-without-gradients",
           "gluon.Trainer(dense().collect_params(), 'sgd').step(1)", "UserWarning", "Parameter",
           "has not been updated by backward", gpu=False),
    gives("trainer-step-skips-parameters-without-gradients", """
        block = dense()
        block.collect_params().setattr("grad_req", "null")
        before = block.weight.data().asnumpy().copy()
        gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 1.0}).step(1)
        assert (block.weight.data().asnumpy() == before).all()
        """, gpu=False),
    # --- data ---------------------------------------------------------------------------------
    raises("dataloader-batch-size-zero",
           "gluon.data.DataLoader(gluon.data.ArrayDataset(a(4, 2)), batch_size=0)", "ValueError",
           "got 0", gpu=False),
    raises("dataloader-negative-batch-size",
           "gluon.data.DataLoader(gluon.data.ArrayDataset(a(4, 2)), batch_size=-1)",
           "ValueError", "got -1", gpu=False),
    raises("dataloader-negative-num-workers",
           "gluon.data.DataLoader(gluon.data.ArrayDataset(a(4, 2)), batch_size=2, "
           "num_workers=-1)", "ValueError", "num_workers", "-1", gpu=False),
    raises("dataloader-unknown-last-batch",
           "gluon.data.DataLoader(gluon.data.ArrayDataset(a(4, 2)), batch_size=2, "
           "last_batch='bogus')", "ValueError", "bogus", gpu=False),
    raises("split-and-load-more-devices-than-samples",
           "gluon.utils.split_and_load(a(2, 3), [pymx.cpu(0), pymx.cpu(1), pymx.cpu(2)])",
           "ValueError", "(2, 3)", "3 slices", gpu=False),
    raises("split-and-load-uneven-with-even-split",
           "gluon.utils.split_and_load(a(5, 3), [pymx.cpu(0), pymx.cpu(1)], even_split=True)",
           "ValueError", "(5, 3)", "2 slices", gpu=False),
    raises("split-and-load-batch-axis-out-of-range",
           "gluon.utils.split_and_load(a(4, 3), [pymx.cpu(0), pymx.cpu(1)], batch_axis=2)",
           "AxisError", "batch_axis 2", "(4, 3)", gpu=False),
    gives("split-and-load-more-devices-than-samples-uneven", """
        devices = [pymx.cpu(0), pymx.cpu(1), pymx.cpu(2)]
        parts = gluon.utils.split_and_load(np.array(onp.arange(6.0).reshape(2, 3)), devices,
                                           even_split=False)
        assert [p.shape for p in parts] == [(1, 3), (1, 3), (0, 3)]  # as MXNet 2
        assert [p.device for p in parts] == devices
        assert parts[1].asnumpy().tolist() == [[3.0, 4.0, 5.0]]
        """, gpu=False),
    raises("image-folder-missing-directory",
           "gluon.data.vision.ImageFolderDataset(os.path.join(TMP, 'nowhere'))", "ValueError",
           "nowhere", gpu=False),
    raises("image-folder-root-is-a-file",
           "gluon.data.vision.ImageFolderDataset(os.path.join(TMP, 'dense.params'))",
           "ValueError", "dense.params", gpu=False),
    raises("image-folder-file-not-an-image",
           "gluon.data.vision.ImageFolderDataset(os.path.join(TMP, 'images'))[0]", "ValueError",
           "notes.jpg", gpu=False),
    # --- autograd -----------------------------------------------------------------------------
    raises("backward-twice-without-retain-graph", "backward_twice()", "ValueError",
           "retain_graph"),
    raises("backward-head-gradient-shape", "recorded(lambda x: x * 2, a(3)).backward(a(4))",
           "ValueError", "(4,)", "(3,)"),
    raises("backward-of-unrecorded-array", "(a(3) * 2).sum().backward()", "ValueError",
           "autograd.record()"),
    raises("grad-of-unmarked-array",
           "autograd.grad(recorded(lambda x: (x * a(3)).sum(), a(3)), [a(3)])", "ValueError",
           "does not require gradient"),
    gives("backward-after-the-variable-was-dropped", """
        x = a(3)
        x.attach_grad()
        grad = x.grad
        with autograd.record():
            y = (x * x).sum()
        del x  # the tape now holds the only reference to the variable (it once wrote freed memory)
        y.backward()
        assert grad.asnumpy().tolist() == [2.0, 2.0, 2.0]
        """),
    gives("backward-of-non-scalar-uses-ones-as-mxnet", """
        x = a(3)
        recorded(lambda v: v * np.array([1.0, 2.0, 3.0]), x).backward()
        assert x.grad.asnumpy().tolist() == [1.0, 2.0, 3.0]
        assert a(2).grad is None  # an array never marked has no gradient buffer
        """),
]


def _run_cases(cases, device, prelude=_PRELUDE):
    """Runs `cases` (id -> (kind, code)) in one child on `device` after `prelude`; returns
    (id -> outcome, the id of the case running when the child died or None, the child's output
    tail)."""
    calls = "\n".join(f"run({case_id!r}, {kind!r}, {code!r})" for case_id, (kind, code) in
                      cases.items())
    body = f"with pymx.device.Device({device!r}):\n" + textwrap.indent(calls, "    ")
    code = prelude + body + "\nshutil.rmtree(TMP)\n"
    try:
        proc = run_python(code, timeout=120)
        stdout, stderr, died = proc.stdout, proc.stderr, proc.returncode != 0
    except subprocess.TimeoutExpired as e:
        stdout, stderr, died = e.stdout or "", "timed out after 120 s", True
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
    outcomes, running = {}, None
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue  # anything else a case printed
        record = json.loads(line)
        if "started" in record:
            running = record["started"]
        else:
            outcomes[record["id"]] = record
            running = None
    return outcomes, running if died else None, (stdout[-2000:] + "\n" + (stderr or "")[-3000:])


def outcomes_per_device(cases, prelude=_PRELUDE):
    """device -> the child's outcomes for `cases` (pytest params of CASES' form) after
    `prelude`, each device's child run on first use: what a sweep's module fixture returns."""
    results = {}

    def outcomes_on(device):
        if device not in results:
            chosen = {param.id: param.values[0][:2] for param in cases
                      if device == "cpu" or param.values[0][4]}
            results[device] = _run_cases(chosen, device, prelude)
        return results[device]
    return outcomes_on


@pytest.fixture(scope="module")
def sweep():
    return outcomes_per_device(CASES)


def _check(sweep, device, case_id, case):
    kind, _, exc, fragments, _ = case
    outcomes, died_in, tail = sweep(device)
    assert died_in != case_id, f"the child crashed or hung in this case:\n{tail}"
    assert case_id in outcomes, f"the child died before this case (in {died_in}):\n{tail}"
    outcome = outcomes[case_id]
    if kind == "gives":
        assert outcome["raised"] is None, outcome["message"]
    else:
        assert outcome["raised"] is not None, f"no {exc} raised"
        assert exc in outcome["raised"], f"raised {outcome['raised'][0]}, not {exc}: " \
                                         f"{outcome['message']}"
        for fragment in fragments:
            assert fragment in outcome["message"], \
                f"{fragment!r} not in the message {outcome['message']!r}"
    assert outcome["usable"], "a small computation failed after this case"


@pytest.mark.parametrize("case", CASES)
def test_bad_input_on_cpu(sweep, case, request):
    _check(sweep, "cpu", request.node.callspec.id, case)


@requires_gpu
@pytest.mark.parametrize("case", [c for c in CASES if c.values[0][4]])
def test_bad_input_on_gpu(sweep, case, request):
    """The same op-level cases with gpu(0) as the default device: the same exception and
    message as on the cpu, and a usable process afterwards."""
    _check(sweep, "gpu", request.node.callspec.id, case)
