"""dropout's CPU kernel against the counter-based generator it documents (Note [Counter-based
random numbers], Note [Dropout draws] in engine/src/ops/nn_dropout.cc), recomputed here in NumPy
uint64 arithmetic: the mask and the output to the bit for every float dtype, with and without
shared axes, on arrays large enough to be split over the intra-op threads (the draws must not
depend on the split); the backward; the inactive and edge cases; naive engine == threaded engine;
the GPU kernel equals the CPU one."""
import numpy as onp
import pytest

from pymx import autograd, np
from pymx._c import core as _core
from pymx._op import invoke
from pymx.device import cpu, gpu
from pymx.test_utils import assert_almost_equal
from conftest import assert_engines_agree, requires_gpu

FLOATS = ("float32", "float64", "float16", "bfloat16")
SEED = 1234
_M64 = onp.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(x):
    """SplitMix64's finaliser on a uint64 array (the engine's mix64 / splitmix64)."""
    with onp.errstate(over="ignore"):
        x = x + onp.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> onp.uint64(30))) * onp.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> onp.uint64(27))) * onp.uint64(0x94D049BB133111EB)
        return (x ^ (x >> onp.uint64(31))) & _M64


def reference_mask(shape, p, axes=()):
    """The float64 mask dropout draws for the first random op after random_seed(SEED): element
    i is kept when uniform01(op seed, draw index) < float32(1 - p), the draw index counting only
    the axes not shared."""
    op_seed = mix64(onp.array([SEED], onp.uint64) ^ mix64(onp.array([0], onp.uint64)))[0]
    shared = {a % len(shape) for a in axes}
    draw = onp.zeros(shape, onp.uint64)
    stride = 1
    for d in reversed(range(len(shape))):
        if d in shared:
            continue
        index = onp.arange(shape[d], dtype=onp.uint64).reshape(
            [shape[d] if e == d else 1 for e in range(len(shape))])
        draw = draw + index * onp.uint64(stride)
        stride *= shape[d]
    bits = mix64(onp.uint64(op_seed) ^ mix64(draw)) >> onp.uint64(40)
    uniform = bits.astype(onp.float32) * onp.float32(1.0 / 16777216.0)
    kept = uniform < onp.float32(1 - p)
    return onp.where(kept, 1.0 / (1 - p) if p < 1 else 0.0, 0.0)


def dropout(x, device=cpu(0), **attrs):
    """(out, mask) of the op in mode 'always', the first random op after seeding."""
    _core.random_seed(SEED)
    return invoke("dropout", [x], dict(mode="always", **attrs), device=device)


def rounded(values, dtype):
    """float64 `values` rounded once to `dtype` by pymx's cast."""
    return np.array(values, dtype="float64").astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.75])
def test_mask_and_output_match_the_generator(dtype, p):
    shape = (3, 40009)  # several parallel chunks, none ending on a row
    x = np.random.uniform(-2, 2, size=shape).astype(dtype)
    out, mask = dropout(x, p=p)
    want_mask = reference_mask(shape, p)
    assert_almost_equal(mask, rounded(want_mask, dtype), rtol=0, atol=0)
    # out = x * mask rounded once (the product of two values of a 16-bit float is exact in float)
    want_out = rounded(x.astype("float64").asnumpy() * mask.astype("float64").asnumpy(), dtype)
    assert_almost_equal(out, want_out, rtol=0, atol=0)
    assert abs((want_mask == 0).mean() - p) < 0.01


@pytest.mark.parametrize("shape, axes", [((3, 7, 5711), (1,)), ((5, 24001), (0,)),
                                         ((40003, 3), (-1,)), ((2, 3, 4001, 3), (0, 3))])
def test_shared_axes_reuse_one_draw(shape, axes):
    x = np.random.uniform(-1, 1, size=shape).astype("float64")
    out, mask = dropout(x, p=0.3, axes=axes)
    want = reference_mask(shape, 0.3, axes)
    assert_almost_equal(mask, want, rtol=0, atol=0)
    assert_almost_equal(out, x.asnumpy() * want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_backward_multiplies_by_the_mask(dtype):
    x = np.random.uniform(-1, 1, size=(2, 33001)).astype(dtype)
    head = np.random.uniform(-1, 1, size=x.shape).astype(dtype)
    x.attach_grad()
    _core.random_seed(SEED)
    with autograd.record():
        out = invoke("dropout", [x], {"p": 0.4, "mode": "always"})[0]
    out.backward(head)
    mask = rounded(reference_mask(x.shape, 0.4), dtype)
    want = rounded(head.astype("float64").asnumpy() * mask.astype("float64").asnumpy(), dtype)
    assert_almost_equal(x.grad, want, rtol=0, atol=0)


def test_inactive_and_edge_cases():
    x = np.random.uniform(-1, 1, size=(4, 20011)).astype("float64")
    with autograd.predict_mode():
        out, mask = invoke("dropout", [x], {"p": 0.5})
    assert_almost_equal(out, x, rtol=0, atol=0)
    assert_almost_equal(mask, onp.ones(x.shape), rtol=0, atol=0)
    out, mask = dropout(x, p=1.0)  # nothing kept, scale 0
    assert_almost_equal(out, onp.zeros(x.shape), rtol=0, atol=0)
    assert_almost_equal(mask, onp.zeros(x.shape), rtol=0, atol=0)
    out, mask = dropout(x, p=1e-9)  # float32(1 - p) == 1: everything kept
    assert_almost_equal(mask, onp.full(x.shape, 1 / (1 - 1e-9)), rtol=0, atol=0)
    for shape in [(0,), (1,), (0, 3)]:
        x = np.ones(shape, dtype="float64")
        out, mask = dropout(x, p=0.5)
        assert out.shape == mask.shape == shape
        assert_almost_equal(mask, reference_mask(shape, 0.5), rtol=0, atol=0)


def test_p_out_of_range_is_refused():
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 1.5"):
        dropout(np.ones((3,)), p=1.5)


def test_naive_and_threaded_engines_agree(tmp_path):
    assert_engines_agree("""
import numpy as onp
from pymx import autograd, np
from pymx._c import core
from pymx._op import invoke
core.random_seed(7)
x = np.array(onp.random.default_rng(0).uniform(-1, 1, (4, 30011)).astype('float32'))
x.attach_grad()
with autograd.record():
    out, mask = invoke('dropout', [x], {'p': 0.2, 'mode': 'always'})
    shared = invoke('dropout', [x], {'p': 0.6, 'mode': 'always', 'axes': (0,)})[0]
    total = out + shared
total.backward()
onp.savez(OUT, out=out.asnumpy(), mask=mask.asnumpy(), shared=shared.asnumpy(),
          grad=x.grad.asnumpy())
""", tmp_path)


@requires_gpu
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axes", [(), (1,)])
def test_gpu_equals_cpu(dtype, axes):
    x = np.random.uniform(-1, 1, size=(3, 7, 5711)).astype(dtype)
    want = dropout(x, p=0.3, axes=axes)
    got = dropout(x.to_device(gpu(0)), device=gpu(0), p=0.3, axes=axes)
    for w, g in zip(want, got):
        assert_almost_equal(g.to_device(cpu(0)), w, rtol=0, atol=0)
