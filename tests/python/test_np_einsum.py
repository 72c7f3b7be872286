"""pymx.np.einsum against NumPy's (float64 reference) over the whole subscript grammar,
gradients against central differences, contraction order, and NumPy's errors."""
import numpy as onp
import pytest

from pymx import gluon, np
from pymx.base import as_dtype
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
