"""The CPU fast paths of softmax / log_softmax (forward and backward) and of the normal sampler:
exp, log and cos by libmvec over blocks, rows split over the intra-op threads (Note [Softmax on
vector spans] in engine/src/ops/nn_softmax.cc, Note [Normal draws in blocks] in random.cc).

Accuracy against float64 NumPy: float64 within 1e-12 relative; float32 within 1e-5 relative (a
few float ulp, plus |z| 2^-24 for an output exp(z) below the row's largest); float16 and bfloat16
within one ulp of their dtype. Special values (-inf logits as masks leave them, +inf, NaN, values
near float32's largest) give what the float64 formula gives; exponents below the exp floor (float
-87, double -708: Note [Softmax exp floor]) give exactly 0 where the formula gives less than the
smallest normal number. Results do not depend on the thread count or the engine. The normal
sampler still draws element i from the uniforms 2i and 2i + 1 of its stream, so it equals
Box-Muller over np.random.uniform's draws for the same seed."""

import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx
from pymx._op import invoke
from pymx.test_utils import assert_almost_equal, bfloat16, check_numeric_gradient

from conftest import assert_engines_agree, assert_thread_count_independent, requires_gpu

# (shape, axis): rows of 0, 1, 15, 16, 17 elements (around the vector widths), rows long enough
# to take several exp blocks and to split over threads, and axes with inner strides (a panel
# and a half, a narrow inner extent, the middle axis of three).
CASES = [((3, 0), -1), ((4, 1), -1), ((5, 15), -1), ((5, 16), -1), ((5, 17), -1),
         ((7, 2500), -1), ((40, 1031), 1), ((17, 100), 0), ((300, 70), 0), ((6, 9, 3), 1),
         ((2, 33, 130), 1), ((0, 5), -1), ((1,), 0)]

# dtype: (rtol, atol of softmax, atol of log_softmax). log_softmax near 0 (the row's largest
# element, when it dominates) is -log(sum) with the sum's rounding error, about n ulp absolute
# in the reference as much as in the op.
TOLERANCE = {"float32": (1e-5, 1e-7, 1e-6), "float64": (1e-12, 1e-300, 1e-14)}


def reference(x, axis, temperature=1.0, log=False):
    """softmax / log_softmax of x in float64, by the op's formula (NaN rows where it gives NaN)."""
    x = onp.asarray(x, onp.float64)
    with onp.errstate(all="ignore"):
        if x.size == 0:
            return x
        z = (x - onp.max(x, axis=axis, keepdims=True)) / temperature
        total = onp.sum(onp.exp(z), axis=axis, keepdims=True)
        return z - onp.log(total) if log else onp.exp(z) / total


def logits(shape, dtype, seed):
    return (onp.random.default_rng(seed).standard_normal(shape) * 4).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", CASES)
def test_forward_matches_float64_numpy(shape, axis, log, dtype):
    x = logits(shape, dtype, 1)
    fn = npx.log_softmax if log else npx.softmax
    rtol, atol, log_atol = TOLERANCE[dtype]
    for temperature in (1.0, 0.3, 2.5):
        got = fn(np.array(x), axis=axis, temperature=temperature).asnumpy()
        assert got.dtype == onp.dtype(dtype) and got.shape == x.shape
        want = reference(x, axis, temperature, log)
        assert_almost_equal(got, want, rtol=rtol, atol=log_atol if log else atol,
                            names=(f"pymx t={temperature}", "float64"))


@pytest.mark.parametrize("dtype", ["float16", bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_16bit_floats_within_one_ulp(log, dtype):
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
    fn = npx.log_softmax if log else npx.softmax
    for shape, axis in [((5, 17), -1), ((3, 2500), -1), ((70, 9), 0), ((2, 33, 66), 1)]:
        data = np.array(logits(shape, "float32", 2), dtype=dtype)
        stored = data.asnumpy().astype(onp.float64)  # the 16-bit values pymx holds
        got = fn(data, axis=axis, temperature=0.7)
        assert got.dtype == data.dtype
        got = got.asnumpy().astype(onp.float64)
        want = reference(stored, axis, 0.7, log)
        # Softmax's outputs below float16's normal range keep only an absolute precision.
        assert_almost_equal(got, want, rtol=ulp, atol=0 if log else 2.0 ** -24,
                            names=(f"pymx {shape} axis {axis}", "float64"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_special_values(log, dtype):
    big = float(onp.finfo(dtype).max) * 0.9
    rows = [[0.0, -onp.inf, 1.0, -onp.inf, 2.0],           # masked positions
            [-onp.inf] * 5,                                  # nothing left: NaN
            [0.0, onp.inf, 1.0, 2.0, 3.0],                   # +inf: NaN
            [0.0, 1.0, onp.nan, 2.0, 3.0],                   # NaN: NaN
            [big, -big, 0.0, big, -1.0],                     # near the largest finite value
            [-big, -big, -big, -big, -big],                  # the fill value of masked_softmax
            [1e-30, -1e-30, 0.0, -0.0, 5e-324 if dtype == "float64" else 1e-45]]
    x = onp.array(rows, dtype=dtype)
    fn = npx.log_softmax if log else npx.softmax
    rtol, atol, log_atol = TOLERANCE[dtype]
    for axis, data in ((-1, x), (0, onp.ascontiguousarray(x.T))):
        for temperature in (1.0, 0.5):
            got = fn(np.array(data), axis=axis, temperature=temperature).asnumpy()
            with onp.errstate(over="ignore"):
                want = reference(data, axis, temperature, log).astype(dtype)
            assert_almost_equal(got, want, rtol=rtol, atol=log_atol if log else atol,
                                equal_nan=True,
                                names=(f"pymx axis {axis} t={temperature}", "float64"))


def test_masked_softmax_and_lengths_use_the_fast_path():
    rng = onp.random.default_rng(3)
    x = rng.standard_normal((4, 6, 37)).astype("float32")
    mask = rng.uniform(size=(4, 6, 37)) < 0.7
    mask[0, 0] = False  # a row with nothing valid
    got = npx.masked_softmax(np.array(x), np.array(mask), axis=-1, temperature=0.8).asnumpy()
    got_log = npx.masked_log_softmax(np.array(x), np.array(mask), axis=-1).asnumpy()
    kept = onp.where(mask, x.astype(onp.float64), -onp.inf)
    with onp.errstate(invalid="ignore"):
        want = onp.where(mask, reference(kept, -1, 0.8), 0.0)
        want_log = onp.where(mask, reference(kept, -1, 1.0, log=True), -onp.inf)
    want[0, 0] = 0.0
    assert_almost_equal(got, want, rtol=1e-5, atol=1e-7)
    assert_almost_equal(got_log, want_log, rtol=1e-5, atol=1e-6)

    length = rng.integers(1, 38, size=(4, 6))
    got = npx.softmax(np.array(x), np.array(length), axis=-1, use_length=True).asnumpy()
    valid = onp.arange(37) < length[..., None]
    want = onp.where(valid, reference(onp.where(valid, x.astype(onp.float64), -onp.inf), -1), 0)
    assert_almost_equal(got, want, rtol=1e-5, atol=1e-7)


# Exponents on both sides of the exp floor (Note [Softmax exp floor]: float -87, double -708),
# down to the lowest finite value masked_softmax fills padding with, and -inf.
FLOOR_EXPONENTS = {"float32": [-86.9, -87.0, -87.2, -90.0, -103.5, -104.5, -200.0, -3.4e38],
                   "float64": [-707.9, -708.0, -708.2, -740.0, -744.0, -746.0, -1e4, -1.7e308]}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axis", [((3, 37), -1), ((6, 5), -1), ((37, 3), 0)])
def test_exponents_below_the_exp_floor(shape, axis, dtype):
    floor = -87.0 if dtype == "float32" else -708.0
    tiny = onp.finfo(dtype).tiny * 1.5  # the largest exp(z) the floor sets to 0, with margin
    rng = onp.random.default_rng(5)
    x = rng.standard_normal(shape).astype(dtype)
    # Every row holds its maximum 0 plus exponents near, at and below the floor, at positions
    # that do not line up with the vector width; the rest stay ordinary.
    rows = onp.moveaxis(x, axis, -1)
    values = FLOOR_EXPONENTS[dtype] + [-onp.inf]
    for r in range(rows.shape[0]):
        rows[r, r % rows.shape[1]] = 0.0
        for i in range(min(len(values), rows.shape[1] - 1)):
            rows[r, (r + 1 + 2 * i) % rows.shape[1]] = values[(r + i) % len(values)]
        rows[r] -= rows[r].max()  # the row's largest exponent is exactly 0
    rtol, atol, log_atol = TOLERANCE[dtype]
    got = npx.softmax(np.array(x), axis=axis).asnumpy()
    with onp.errstate(under="ignore"):
        want = reference(x, axis)
        want_log = reference(x, axis, log=True)
    below = x < floor
    assert onp.all(got[below] == 0) and onp.all(want[below] < tiny)
    assert_almost_equal(got[~below], want[~below], rtol=rtol, atol=atol)
    got_log = npx.log_softmax(np.array(x), axis=axis).asnumpy()
    assert_almost_equal(got_log, want_log, rtol=rtol, atol=log_atol)
    # log_softmax's backward takes exp(y) through the same floor.
    dy = rng.standard_normal(shape).astype(dtype)
    got_grad = invoke("log_softmax_backward", [np.array(dy), np.array(got_log)],
                      {"axis": axis})[0].asnumpy()
    with onp.errstate(under="ignore", invalid="ignore"):
        want_grad = backward_reference(dy, got_log, axis, 1.0, log=True)
    assert_almost_equal(got_grad, want_grad, rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-13)


def test_masked_attention_scores_match_float64():
    # BERT's attention: (batch, heads, queries, keys) scores, padded keys masked per sample.
    rng = onp.random.default_rng(6)
    scores = (rng.standard_normal((3, 2, 5, 19)) * 4).astype("float32")
    valid_length = onp.array([19, 7, 1])
    mask = (onp.arange(19) < valid_length[:, None])[:, None, None, :]
    data = np.array(scores)
    data.attach_grad()
    with autograd.record():
        out = npx.masked_softmax(data, np.array(mask))
    dy = rng.standard_normal(scores.shape).astype("float32")
    out.backward(np.array(dy))
    kept = onp.where(mask, scores.astype(onp.float64), -onp.inf)
    want = onp.where(mask, reference(kept, -1), 0.0)
    assert_almost_equal(out.asnumpy(), want, rtol=1e-5, atol=1e-7)
    want_grad = onp.where(mask, backward_reference(dy, want, -1, 1.0, log=False), 0.0)
    assert_almost_equal(data.grad.asnumpy(), want_grad, rtol=1e-5, atol=1e-6)


def backward_reference(dy, y, axis, temperature, log):
    """The backward formulas in float64 from the forward's output y."""
    dy, y = dy.astype(onp.float64), y.astype(onp.float64)
    if log:
        return (dy - onp.exp(y) * dy.sum(axis=axis, keepdims=True)) / temperature
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True)) / temperature


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", bfloat16],
                         ids=["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", [((5, 17), -1), ((7, 2500), -1), ((300, 70), 0),
                                        ((2, 33, 130), 1), ((3, 0), -1)])
def test_backward_matches_float64_numpy(shape, axis, log, dtype):
    fn = npx.log_softmax if log else npx.softmax
    data = np.array(logits(shape, "float64", 4), dtype=dtype)
    head = np.array(onp.random.default_rng(5).standard_normal(shape), dtype=dtype)
    data.attach_grad()
    with autograd.record():
        y = fn(data, axis=axis, temperature=1.7)
    y.backward(head)
    assert data.grad.dtype == data.dtype
    got = data.grad.asnumpy().astype(onp.float64)
    # From the values pymx holds: out_grad and the forward's output in the data's dtype.
    want = backward_reference(head.asnumpy().astype(onp.float64),
                              y.asnumpy().astype(onp.float64), axis, 1.7, log)
    scale = float(onp.abs(want).max()) if want.size else 1.0
    rtol = {"float32": 1e-5, "float64": 1e-12, "float16": 2.0 ** -10}.get(dtype, 2.0 ** -7)
    assert_almost_equal(got, want, rtol=rtol, atol=rtol * 1e-2 * scale)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 1), (4, 7), (5, 16), (3, 33), (2, 130), (2, 3001)])
def test_softmax_backward_where_out_grad_nearly_cancels_its_mean(shape, dtype):
    # out_grad = 1000 + small noise: dy - sum(dy * y) keeps only the noise's part, about 1e-3, so
    # a sum rounded once to float32 (3e-5 off at 1000) would be 3% off; the split sum keeps the
    # double sum's accuracy (Note [Softmax backward in float]). Row lengths around and between
    # the vector widths and the four chains of lanes; a row of one gives exactly 0.
    rng = onp.random.default_rng(8)
    y = npx.softmax(np.array(logits(shape, dtype, 9)), axis=-1)
    dy = (1000 + rng.standard_normal(shape) * 1e-3).astype(dtype)
    got = invoke("softmax_backward", [np.array(dy), y], {"axis": -1, "temperature": 1.3})[0]
    assert got.dtype == onp.dtype(dtype)
    want = backward_reference(dy, y.asnumpy(), -1, 1.3, log=False)
    scale = float(onp.abs(want).max())
    if dtype == "float64":  # the double sum's own rounding, n ulp of 1000, in both
        rtol, atol = 1e-12, 1000 * shape[-1] * 2.0 ** -52
    else:
        rtol, atol = 1e-5, 1e-7 * scale
    assert_almost_equal(got.asnumpy(), want, rtol=rtol, atol=atol)
    if shape[-1] == 1:
        assert not got.asnumpy().any()


@pytest.mark.parametrize("shape", [(3, 1), (4, 7), (5, 16), (3, 33), (2, 130), (2, 3001)])
def test_log_softmax_backward_where_out_grad_nearly_cancels(shape):
    # out_grad = 1000 * softmax + small noise: sum(dy) is about 1000 and exp(y) * sum(dy) about
    # dy, their difference only the noise's part. float64 only: in float32, exp(y) of the float
    # output (libmvec's few ulp, times 1000) already errs by a fraction of that difference,
    # before any rounding of the combination.
    dtype = "float64"
    rng = onp.random.default_rng(10)
    x = np.array(logits(shape, dtype, 11))
    y = npx.log_softmax(x, axis=-1)
    p = npx.softmax(x, axis=-1).asnumpy().astype(onp.float64)
    dy = (1000 * p + rng.standard_normal(shape) * 1e-3).astype(dtype)
    got = invoke("log_softmax_backward", [np.array(dy), y], {"axis": -1, "temperature": 0.7})[0]
    assert got.dtype == onp.dtype(dtype)
    want = backward_reference(dy, y.asnumpy(), -1, 0.7, log=True)
    # the double sum's and exp's own rounding, n + 4 ulp of 1000, in both
    assert_almost_equal(got.asnumpy(), want, rtol=1e-12, atol=1000 * (shape[-1] + 4) * 2.0 ** -52)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", [((3, 17), -1), ((17, 3), 0), ((2, 5, 3), 1)])
def test_gradient_by_finite_differences(shape, axis, log):
    fn = npx.log_softmax if log else npx.softmax
    x = logits(shape, "float64", 6)
    check_numeric_gradient(lambda v: fn(v, axis=axis, temperature=0.6), [x], rtol=1e-4,
                           atol=1e-6)


def test_hybridized_equals_imperative():
    class Attention(gluon.HybridBlock):
        def forward(self, scores, mask):
            return (npx.softmax(scores, axis=-1) + npx.log_softmax(scores, axis=1) +
                    npx.masked_softmax(scores, mask, axis=-1, temperature=2.0))

    rng = onp.random.default_rng(7)
    scores = np.array(rng.standard_normal((3, 20, 33)).astype("float32"))
    mask = np.array(rng.uniform(size=(3, 20, 33)) < 0.8)
    block = Attention()
    imperative = block(scores, mask).asnumpy()
    block.hybridize()
    assert block(scores, mask).asnumpy().tobytes() == imperative.tobytes()


@pytest.mark.parametrize("kwargs,error", [
    ({"temperature": 0.0}, "temperature must be > 0, got 0"),
    ({"temperature": -2.0}, "temperature must be > 0, got -2"),
    ({"axis": 2}, "axis 2"),
])
def test_bad_attributes_are_refused(kwargs, error):
    for fn in (npx.softmax, npx.log_softmax):
        with pytest.raises(ValueError, match=error):
            fn(np.ones((2, 3)), **kwargs).wait_to_read()


def test_integer_data_is_refused():
    with pytest.raises(TypeError, match="softmax"):
        npx.softmax(np.ones((2, 3), dtype="int32")).wait_to_read()


# The arrays a script saves for the thread-count and engine checks.
_ARRAYS_SCRIPT = r"""
import numpy as onp
from pymx import autograd, np, npx
out = {}
rng = onp.random.default_rng(11)
for name, (shape, axis) in {"rows": ((40, 1031), -1), "strided": ((300, 130), 0),
                            "middle": ((4, 257, 70), 1)}.items():
    for dtype in ("float32", "float64", "float16"):
        x = np.array((rng.standard_normal(shape) * 5).astype(dtype))
        dy = np.array(rng.standard_normal(shape).astype(dtype))
        for fn in (npx.softmax, npx.log_softmax):
            x.attach_grad()
            with autograd.record():
                y = fn(x, axis=axis, temperature=0.9)
            y.backward(dy)
            key = f"{name} {dtype} {fn.__name__}"
            out[key] = y.asnumpy()
            out[key + " grad"] = x.grad.asnumpy()
np.random.seed(21)
out["normal"] = np.random.normal(0.5, 2.0, size=(100003,)).asnumpy()
out["normal64"] = np.random.normal(size=(40001,), dtype="float64").asnumpy()
onp.savez(OUT, **out)
"""


def test_naive_and_threaded_engines_agree(tmp_path):
    assert_engines_agree(_ARRAYS_SCRIPT, tmp_path)


def test_one_thread_gives_the_same_bits(tmp_path):
    assert_thread_count_independent(_ARRAYS_SCRIPT, tmp_path)


def box_muller(uniforms):
    """Box-Muller over NumPy's float64 arithmetic, element i from the uniforms 2i and 2i + 1."""
    u1, u2 = 1.0 - uniforms[0::2], uniforms[1::2]
    return onp.sqrt(-2.0 * onp.log(u1)) * onp.cos(2.0 * onp.pi * u2)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 513, 40001])
def test_normal_is_box_muller_over_the_same_uniforms(n):
    # The first op after a seed gets the same stream whatever it samples (Note [RNG seeds]).
    np.random.seed(31)
    uniforms = np.random.uniform(size=(2 * n,), dtype="float64").asnumpy()
    np.random.seed(31)
    got = np.random.normal(size=(n,), dtype="float64").asnumpy()
    assert_almost_equal(got, box_muller(uniforms), rtol=1e-13, atol=1e-13)
    np.random.seed(31)
    got32 = np.random.normal(1.5, 0.5, size=(n,)).asnumpy()
    assert got32.dtype == onp.float32
    assert_almost_equal(got32, 1.5 + 0.5 * box_muller(uniforms), rtol=1e-6, atol=1e-6)


def test_normal_seed_reproducibility_and_prefixes():
    np.random.seed(41)
    whole = np.random.normal(size=(50000,)).asnumpy()
    np.random.seed(41)
    again = np.random.normal(size=(50000,)).asnumpy()
    assert whole.tobytes() == again.tobytes()
    for n in (1, 15, 16, 17, 16385):  # element i depends on i alone, not on the block it is in
        np.random.seed(41)
        assert np.random.normal(size=(n,)).asnumpy().tobytes() == whole[:n].tobytes(), n
    assert np.random.normal(size=(50000,)).asnumpy().tobytes() != whole.tobytes()


def test_normal_moments():
    # 400k draws: each bound below is 5 standard errors of its statistic, so a correct sampler
    # fails with probability below 1e-5.
    n = 400_000
    np.random.seed(51)
    x = np.random.normal(2.0, 3.0, size=(n,), dtype="float64").asnumpy()
    z = (x - 2.0) / 3.0
    assert abs(z.mean()) < 5 / onp.sqrt(n)
    assert abs(z.var() - 1) < 5 * onp.sqrt(2 / n)
    assert abs((z ** 3).mean()) < 5 * onp.sqrt(15 / n)        # skewness
    assert abs((z ** 4).mean() - 3) < 5 * onp.sqrt(96 / n)    # kurtosis
    # The fraction below each quantile of N(0, 1), against its binomial standard error.
    for q, p in ((-2.0, 0.022750131948179), (-1.0, 0.158655253931457), (0.0, 0.5),
                 (0.5, 0.691462461274013), (2.5, 0.993790334674224)):
        assert abs((z < q).mean() - p) < 5 * onp.sqrt(p * (1 - p) / n), q


def test_normal_negative_scale_is_refused():
    with pytest.raises(ValueError, match="scale"):
        np.random.normal(0.0, -1.0, size=(3,))


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gpu_equals_cpu(dtype):
    tolerance = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3}[dtype]
    for shape, axis in [((7, 2500), -1), ((300, 70), 0), ((2, 33, 130), 1), ((5, 17), -1)]:
        x = logits(shape, dtype, 12)
        dy = onp.random.default_rng(13).standard_normal(shape).astype(dtype)
        for fn in (npx.softmax, npx.log_softmax):
            results = []
            for device in (pymx.cpu(), pymx.gpu(0)):
                data = np.array(x, device=device)
                data.attach_grad()
                with autograd.record():
                    y = fn(data, axis=axis, temperature=0.8)
                y.backward(np.array(dy, device=device))
                results.append((y.asnumpy(), data.grad.asnumpy()))
            (cpu_y, cpu_dx), (gpu_y, gpu_dx) = results
            names = (f"gpu {fn.__name__} {shape}", f"cpu {fn.__name__} {shape}")
            assert_almost_equal(gpu_y, cpu_y, rtol=tolerance, atol=tolerance, names=names)
            assert_almost_equal(gpu_dx, cpu_dx, rtol=tolerance, atol=tolerance, names=names)
