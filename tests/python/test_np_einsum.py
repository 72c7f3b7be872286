"""pymx.np.einsum against NumPy's (float64 reference) over the whole subscript grammar,
gradients against central differences, contraction order, NumPy's errors, and the operators
the common contractions run (no transposes or reshapes that copy where none are needed)."""

import numpy as onp
import pytest
from conftest import assert_engines_agree, ops_ran, requires_gpu

from pymx import autograd, gluon, np
from pymx.base import as_dtype
from pymx.device import Device
from pymx.ndarray import ndarray
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

# (subscripts, operand shapes)
CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),          # matrix product
    ("ij,jk", [(2, 3), (3, 4)]),              # implicit output
    ("ji,jk", [(3, 2), (3, 4)]),
    ("ij->ji", [(2, 3)]),                     # transpose
    ("ij", [(2, 3)]),
    ("ji", [(2, 3)]),                         # implicit output sorts the letters: a transpose
    ("ii->i", [(3, 3)]),                      # diagonal
    ("ii", [(3, 3)]),                         # trace
    ("iii->i", [(2, 2, 2)]),
    ("iji->j", [(2, 3, 2)]),
    ("bii->bi", [(2, 3, 3)]),
    ("ij->", [(2, 3)]),                       # total sum
    ("ij->i", [(2, 3)]),
    ("i,i", [(4,), (4,)]),                    # inner product
    ("i,j", [(2,), (3,)]),                    # outer product
    ("i,j->ji", [(2,), (3,)]),
    (",", [(), ()]),
    ("", [()]),
    (",ij", [(), (2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),          # elementwise
    ("ij,ij->ij", [(2, 1), (2, 3)]),          # a length-1 axis broadcasts
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),  # batched product
    ("...ij,...jk", [(5, 2, 3), (3, 4)]),     # ellipsis, broadcast over the batch
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
    ("i...->...", [(3, 2, 4)]),
    ("...i,...i->...", [(2, 3, 4), (4,)]),
    ("ij...,jk...->ik...", [(2, 3, 5), (3, 4, 5)]),
    ("...", [(2, 3)]),
    ("a...a->...", [(3, 2, 3)]),
    ("ijk,kl,lm->im", [(2, 3, 4), (4, 5), (5, 2)]),  # chain: greedy pairwise order
    ("ab,bc,cd,de->ae", [(2, 7), (7, 1), (1, 6), (6, 2)]),
    ("ij,jk,ki->", [(2, 3), (3, 4), (4, 2)]),         # trace of a product
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ijk,jil->kl", [(3, 2, 4), (2, 3, 5)]),
    ("aAb,Abc->ac", [(2, 3, 2), (3, 2, 4)]),  # upper- and lowercase letters are distinct
    ("ij,jk->ik", [(0, 3), (3, 4)]),          # empty operands
    ("ik,kj", [(2, 0), (0, 3)]),
    ("ii->i", [(0, 0)]),
    # Layouts a matmul reads as they are, or after transposing one operand, for either operand
    # on the left; diagonals with axes around and between the repeated ones.
    ("ij,kj->ik", [(3, 5), (4, 5)]),
    ("ji,jk->ik", [(5, 3), (5, 4)]),
    ("ji,kj->ik", [(5, 3), (4, 5)]),
    ("bij,bkj->bik", [(2, 3, 5), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),  # a batch of one broadcasts
    ("abc,cbd->ad", [(3, 5, 7), (7, 5, 2)]),  # summed letters in opposite orders
    ("abcd,cdbe->bae", [(2, 3, 4, 5), (4, 5, 3, 1)]),
    ("ij,j->i", [(2, 1), (3,)]),             # a summed axis of length 1 broadcasts
    ("ij,j->i", [(2, 1), (0,)]),
    ("ijkj->ik", [(2, 3, 4, 3)]),
    ("jii->ji", [(2, 3, 3)]),
    ("iij->ij", [(3, 3, 2)]),
    ("ii->i", [(1, 1)]),
    ("ii", [(7, 7)]),
    ("ij,jk,kl->il", [(1, 7), (7, 1), (1, 9)]),
]


@pytest.mark.parametrize("subscripts,shapes", CASES, ids=[c[0] or "scalar" for c in CASES])
def test_einsum_against_numpy(subscripts, shapes, device):
    operands = [onp.random.uniform(-1, 1, size=s) for s in shapes]
    got = np.einsum(subscripts, *[np.array(o, device=device) for o in operands])
    want = onp.einsum(subscripts, *operands)
    assert isinstance(got, ndarray) and got.device == device
    assert got.shape == want.shape and got.dtype == onp.float64
    assert_almost_equal(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 2)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("...ij,...jk", [(2, 2, 3), (3, 2)]), ("ijk,kl,lm->im", [(2, 3, 2), (2, 3), (3, 2)]),
    ("ij,ij->ij", [(2, 1), (2, 3)]), ("iji->j", [(2, 3, 2)]), ("i,j", [(2,), (3,)])])
def test_einsum_gradient(subscripts, shapes, device):
    operands = [onp.random.uniform(-1, 1, size=s) for s in shapes]
    check_numeric_gradient(lambda *xs: np.einsum(subscripts, *xs), operands, device=device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int32"])
def test_einsum_dtypes(dtype, device):
    a = onp.random.uniform(-3, 3, size=(2, 3, 4)).astype(dtype)
    b = onp.random.uniform(-3, 3, size=(4, 5)).astype(dtype)
    got = np.einsum("bij,jk->bik", np.array(a, device=device), np.array(b, device=device))
    assert got.dtype == onp.dtype(dtype)
    want = onp.einsum("bij,jk->bik", a.astype(onp.float64), b.astype(onp.float64))
    assert_almost_equal(got, want.astype(dtype) if dtype.startswith("int") else want,
                        rtol={"float16": 1e-2}.get(dtype, 1e-5),
                        atol={"float16": 5e-2}.get(dtype, 1e-5))
    mixed = np.einsum("ij,jk", np.array(a[0], device=device),
                      np.array(b.astype(onp.float64), device=device))
    assert mixed.dtype == onp.result_type(a.dtype, onp.float64)
    # Summing subscripts away keeps the dtype too (sum alone widens small integers to int64).
    for subscripts in ("bij->", "bij->j", "iij->j"):
        operand = a[:, :2] if subscripts == "iij->j" else a
        got = np.einsum(subscripts, np.array(operand, device=device))
        assert got.dtype == onp.dtype(dtype), subscripts
        assert_almost_equal(got, onp.einsum(subscripts, operand), rtol=1e-2, atol=5e-2)


def test_einsum_bool_and_bfloat16_dtypes(device):
    mask = onp.array([[True, False, True], [False, False, True]])
    got = np.einsum("ij->i", np.array(mask, device=device))
    assert got.dtype == onp.bool_
    assert_almost_equal(got, onp.einsum("ij->i", mask))
    # bfloat16 promotes as pymx's operators do: to the other float (at least float32), and
    # stays bfloat16 beside integers; whichever operand comes first.
    halves = np.ones((2, 3), dtype="bfloat16", device=device)
    others = {"float32": "float32", "float16": "float32", "float64": "float64",
              "int32": "bfloat16", "bfloat16": "bfloat16"}
    for other, expected in others.items():
        operand = np.ones((3, 2), dtype=other, device=device)
        for pair in ((halves, operand), (operand.T, halves.T)):
            got = np.einsum("ij,jk->ik", *pair)
            assert got.dtype == as_dtype(expected), (other, got.dtype)
            assert_almost_equal(got, onp.full(got.shape, 3.0))


def test_einsum_contracts_smallest_pair_first():
    """'ab,cd,bc->ad' never starts with the outer product of operands 0 and 1 (a x b x c x d):
    with c of length 1 it contracts 0 and 2 (an a x c result of 100 elements), with c of
    length 1000 it contracts 1 and 2 (b x d, 10**4 elements, not a x c's 10**5). The answer
    does not depend on the order."""
    from pymx.numpy._einsum import _greedy_pair

    sizes = {"a": 100, "b": 100, "c": 1, "d": 100, "e": 100}
    assert _greedy_pair([["a", "b"], ["c", "d"], ["b", "c"]], ["a", "d"], sizes) == (0, 2)
    sizes["c"] = 1000
    assert _greedy_pair([["a", "b"], ["c", "d"], ["b", "c"]], ["a", "d"], sizes) == (1, 2)
    a, b, c = (onp.random.uniform(-1, 1, size=s) for s in [(6, 5), (5, 1), (1, 6)])
    assert_almost_equal(np.einsum("ab,bc,cd->ad", *[np.array(x) for x in (a, b, c)]),
                        onp.einsum("ab,bc,cd->ad", a, b, c), rtol=1e-12, atol=1e-12)


def test_einsum_out_and_hybridize(device):
    a, b = (onp.random.uniform(-1, 1, size=s) for s in [(3, 4), (4, 2)])
    out = np.zeros((3, 2), dtype="float64", device=device)
    result = np.einsum("ij,jk", np.array(a, device=device), np.array(b, device=device), out=out)
    assert result is out
    assert_almost_equal(out, a @ b, rtol=1e-12, atol=1e-12)

    class Block(gluon.HybridBlock):
        def forward(self, x, y):
            return np.einsum("bij,jk->bk", x, y) + np.einsum("bii->b", x)[:, None]

    block = Block()
    block.hybridize()
    x, y = np.random.uniform(size=(2, 4, 4), device=device), np.random.uniform(size=(4, 3),
                                                                               device=device)
    block(x, y)
    x2 = np.random.uniform(size=(2, 4, 4), device=device)
    assert_almost_equal(block(x2, y), Block()(x2, y), rtol=0, atol=0)


@pytest.mark.parametrize("subscripts,shapes,message", [
    ("ij,jk", [(2, 3)], r"name 2 operand\(s\) but 1 were given"),
    ("ij", [(2, 3, 4)], r"shape \(2, 3, 4\) \(3 dimensions\) does not match its subscripts 'ij'"),
    ("ijk", [(2, 3)], "does not match its subscripts 'ijk'"),
    ("ij,jk", [(2, 3), (4, 5)], "'j' has inconsistent lengths 3 and 4"),
    ("...i,...i", [(2, 3), (4, 3)], r"'\.\.\.' has inconsistent lengths 2 and 4"),
    ("ij->ik", [(2, 3)], "output subscript 'k' does not appear in the inputs"),
    ("ij->ii", [(2, 3)], "output subscript 'i' appears more than once"),
    ("i1", [(2, 3)], "invalid subscript '1'"),
    ("i....j", [(2, 3)], "invalid ellipsis"),
    ("i..j", [(2, 3)], "invalid ellipsis"),
    ("ij->i->j", [(2, 3)], "at most one '->'"),
    ("...ij->ij", [(4, 2, 3)], "the output names no '...'"),
    ("ii", [(1, 3)], r"'i' is repeated in an operand of shape \(1, 3\) over axes of different "
                     r"lengths \[1, 3\]"),
])
def test_einsum_errors(subscripts, shapes, message):
    operands = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError, match=message):
        np.einsum(subscripts, *operands)
    with pytest.raises(ValueError):  # NumPy rejects the same subscripts
        onp.einsum(subscripts, *[onp.ones(s) for s in shapes])


def test_einsum_argument_errors():
    with pytest.raises(ValueError, match="at least one operand"):
        np.einsum("ij")
    with pytest.raises(TypeError, match="subscripts must be a string, got list"):
        np.einsum([0, 1], np.ones((2, 2)))


def _compute_ops(fn, device):
    """{op: count} that fn() ran on `device`, without the engine's bookkeeping (freeing arrays)
    and the upload of small host-built index arrays (a diagonal with axes between its two)."""
    return {name: count for name, count in ops_ran(fn, device=str(device)).items()
            if name not in ("delete_var", "sync_copy_from_cpu")}


# (subscripts, operand shapes, the ops one call runs): operands already in a matmul's layout are
# never transposed, reshapes are views, diagonals are one gather of the diagonal.
OP_COUNTS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], {"matmul": 1}),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], {"matmul": 2}),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)], {"matmul": 1, "transpose": 1}),
    ("ij,kj->ik", [(3, 5), (4, 5)], {"matmul": 1, "transpose": 1}),
    ("ji,jk->ki", [(5, 3), (5, 4)], {"matmul": 1, "transpose": 1}),
    ("...ij,...jk", [(5, 2, 3), (3, 4)], {"matmul": 1}),   # rows merged by a view
    ("bij,jk->bk", [(2, 3, 4), (4, 5)], {"matmul": 1, "sum": 1}),
    ("i,i", [(4,), (4,)], {"matmul": 1}),
    ("i,j", [(2,), (3,)], {"matmul": 1}),
    ("ii->i", [(4, 4)], {"arange": 1, "take": 1}),
    ("bii->bi", [(2, 4, 4)], {"arange": 1, "take": 1}),
    ("iji->j", [(2, 3, 2)], {"take": 1, "sum": 1}),
    ("ii", [(4, 4)], {"arange": 1, "take": 1, "sum": 1}),
    ("ij->", [(2, 3)], {"sum": 1}),
    ("ij->j", [(2, 3)], {"sum": 1}),
    ("ij->ji", [(2, 3)], {"transpose": 1}),
    ("ij", [(2, 3)], {"copy": 1}),
]


@pytest.mark.parametrize("subscripts,shapes,expected", OP_COUNTS,
                         ids=[c[0] for c in OP_COUNTS])
def test_einsum_runs_no_needless_copies(subscripts, shapes, expected, device):
    operands = [np.array(onp.random.uniform(-1, 1, size=s), device=device) for s in shapes]
    assert _compute_ops(lambda: np.einsum(subscripts, *operands), device) == expected
    want = onp.einsum(subscripts, *[o.asnumpy().astype(onp.float64) for o in operands])
    assert_almost_equal(np.einsum(subscripts, *operands), want, rtol=1e-5, atol=1e-6)


def test_einsum_result_is_a_new_array(device):
    """Where no op is needed ('ij', 'ij->ij') the result still owns its memory, and a result
    computed through views of an operand does not change when the operand does."""
    x = np.array(onp.arange(6.0).reshape(2, 3), device=device)
    same = np.einsum("ij->ij", x)
    rows = np.einsum("...ij,jk", x.reshape(1, 2, 3), np.ones((3, 1), device=device))
    x[:] = 0
    assert_almost_equal(same, onp.arange(6.0).reshape(2, 3))
    assert_almost_equal(rows, onp.array([[[3.0], [12.0]]]))
    same[0, 0] = 7
    assert float(x[0, 0]) == 0


@pytest.mark.parametrize("subscripts,shapes", [
    ("...ij,...jk", [(2, 2, 3), (3, 2)]), ("bhqd,bhkd->bhqk", [(2, 1, 3, 2), (2, 1, 2, 2)]),
    ("ijkj->ik", [(2, 3, 2, 3)]), ("abc,cbd->ad", [(2, 3, 2), (2, 3, 2)]),
    ("ij,j->i", [(2, 1), (3,)])])
def test_einsum_gradient_through_merged_axes(subscripts, shapes, device):
    """Gradients where rows, summed or column axes are merged (reshape ops while recording,
    views otherwise) and where diagonals are gathered."""
    operands = [onp.random.uniform(-1, 1, size=s) for s in shapes]
    check_numeric_gradient(lambda *xs: np.einsum(subscripts, *xs), operands, device=device)


def test_einsum_hybridized_gradient_equals_imperative(device):
    """A traced einsum (reshape ops, not views) gives the imperative result and gradients."""
    class Block(gluon.HybridBlock):
        def forward(self, x, y):
            return np.einsum("...ij,jk->...k", x, y) + np.einsum("ijj->i", x)[:, None, None]

    x = np.random.uniform(size=(2, 3, 3), device=device)
    y = np.random.uniform(size=(3, 2), device=device)
    results = []
    for hybridize in (False, True):
        block = Block()
        if hybridize:
            block.hybridize()
            block(x, y)
        xg, yg = x.copy(), y.copy()
        xg.attach_grad()
        yg.attach_grad()
        with autograd.record():
            out = block(xg, yg)
        out.backward()
        results.append((out.asnumpy(), xg.grad.asnumpy(), yg.grad.asnumpy()))
    for imperative, traced in zip(*results):
        assert_almost_equal(traced, imperative, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "uint8", "int32",
                                   "int64"])
@pytest.mark.parametrize("subscripts,shapes", [
    ("bij,bkj->bik", [(2, 3, 5), (2, 4, 5)]), ("...ij,...jk", [(2, 3, 5), (5, 7)]),
    ("iji->j", [(3, 5, 3)]), ("ij,ij->ij", [(3, 1), (3, 5)]), ("ij,j->i", [(17, 1), (9,)])])
def test_einsum_layouts_every_dtype(subscripts, shapes, dtype, device):
    """Each layout path (transposed operand, merged rows, gathered diagonal, broadcast axes)
    over every dtype einsum takes, on sizes that are not multiples of a vector width."""
    operands = [onp.random.randint(0, 4, size=s).astype(dtype) for s in shapes]
    got = np.einsum(subscripts, *[np.array(o, device=device) for o in operands])
    want = onp.einsum(subscripts, *[o.astype(onp.float64) for o in operands])
    assert got.dtype == onp.dtype(dtype)
    # small integers: exact in float16 (the products stay below 2048) and in the integer types
    # (below 128), so every dtype gives NumPy's float64 answer exactly.
    assert_almost_equal(got, want.astype(dtype), rtol=0, atol=0)


# Views of operands read by later ops, and an operand overwritten right after the einsum calls
# that read it: the threaded engine must order them as the naive one runs them.
ENGINE_SCRIPT = """
import numpy as onp
from pymx import np
rng = onp.random.default_rng(7)
x = np.array(rng.uniform(-1, 1, (4, 3, 33, 65)), dtype="float32")
y = np.array(rng.uniform(-1, 1, (4, 3, 17, 65)), dtype="float32")
outs = [np.einsum("bhqd,bhkd->bhqk", x, y), np.einsum("...ij,...kj", x, y[0, 0]),
        np.einsum("bhqd,d->bq", x, y[0, 0, 0]), np.einsum("ii->i", x[0, 0, :, :33]),
        np.einsum("bhqd->", x)]
x[:] = 0
outs.append(np.einsum("bhqd,bhkd->bhqk", x, y))
onp.savez(OUT, *[o.asnumpy() for o in outs])
"""


def test_threaded_engine_equals_naive_engine(tmp_path):
    assert_engines_agree(ENGINE_SCRIPT, tmp_path)


@pytest.mark.parametrize("subscripts,shapes", [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("iji->j", [(3, 5, 3)]),
    ("...ij,...jk", [(2, 3, 5), (5, 7)]), ("ij,kj->ik", [(3, 5), (4, 5)])])
@requires_gpu
def test_einsum_gpu_equals_cpu(subscripts, shapes):
    operands = [onp.random.uniform(-1, 1, size=s).astype(onp.float32) for s in shapes]
    gpu = Device("gpu", 0)
    on_cpu = np.einsum(subscripts, *[np.array(o) for o in operands])
    on_gpu = np.einsum(subscripts, *[np.array(o, device=gpu) for o in operands])
    assert on_gpu.device == gpu
    assert_almost_equal(on_gpu, on_cpu, rtol=1e-5, atol=1e-6)
