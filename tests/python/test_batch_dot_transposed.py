"""matmul's transpose_a / transpose_b attributes (operands read transposed in place) and
npx.batch_dot on top of them: every flag combination against float64 NumPy, with broadcast batch
axes, 1-row / 1-column / 1-deep products (the vector-product path), sizes that reach pymx's
small-GEMM kernels and OpenBLAS, integers (exact), float16 / bfloat16 (one rounding); gradients
against central differences, and the backward reading operands in place (no swapaxes copies);
hybridized == imperative; MXNet symbol export as batch_dot and back; ONNX export as Transpose +
MatMul; the error; the GPU (cuBLAS and the plain kernel) against the CPU."""
import itertools
import json

import numpy as onp
import pytest

from pymx import autograd, np, npx
from pymx._op import invoke
from pymx.device import cpu, gpu
from pymx.gluon import SymbolBlock, nn
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import ops_ran, requires_gpu

FLAGS = list(itertools.product([False, True], repeat=2))
# (batch of a, batch of b, n, k, m): broadcasting batches, vector products (n, m or k of 1),
# small-GEMM sizes and ones OpenBLAS takes.
CASES = [((2,), (2,), 3, 4, 5), ((2, 1), (1, 3), 4, 2, 3), ((), (3,), 1, 5, 7),
         ((2,), (), 6, 5, 1), ((1,), (2,), 5, 1, 4), ((2,), (2,), 1, 1, 1),
         ((3,), (3,), 17, 33, 9), ((2,), (2,), 70, 40, 65)]


def stored(batch, rows, cols, transposed, dtype="float64"):
    """Random operand with op(x) of shape batch + (rows, cols): stored with its last two axes
    swapped when `transposed`."""
    shape = batch + ((cols, rows) if transposed else (rows, cols))
    return onp.random.uniform(-1, 1, size=shape).astype(dtype)


def reference(a, b, ta, tb):
    a, b = a.astype(onp.float64), b.astype(onp.float64)
    return onp.matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b)


def matmul(a, b, ta, tb):
    flags = {"transpose_a": ta, "transpose_b": tb}
    return invoke("matmul", [a, b], {k: v for k, v in flags.items() if v})[0]


@pytest.mark.parametrize("ta, tb", FLAGS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_flag_combination(device, ta, tb, dtype):
    for batch_a, batch_b, n, k, m in CASES:
        a, b = stored(batch_a, n, k, ta, dtype), stored(batch_b, k, m, tb, dtype)
        out = matmul(np.array(a, device=device), np.array(b, device=device), ta, tb)
        tol = 1e-12 if dtype == "float64" else 1e-5
        assert_almost_equal(out, reference(a, b, ta, tb), rtol=tol, atol=tol)


@pytest.mark.parametrize("ta, tb", FLAGS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_integer_products_are_exact(ta, tb, dtype):
    for batch_a, batch_b, n, k, m in CASES[:6]:
        shape_a = batch_a + ((k, n) if ta else (n, k))
        shape_b = batch_b + ((m, k) if tb else (k, m))
        a = onp.random.randint(0, 5, size=shape_a).astype(dtype)
        b = onp.random.randint(0, 5, size=shape_b).astype(dtype)
        out = matmul(np.array(a), np.array(b), ta, tb)
        want = onp.matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b)
        assert out.dtype == want.dtype
        onp.testing.assert_array_equal(out.asnumpy(), want)


@pytest.mark.parametrize("ta, tb", FLAGS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_floats_round_once(ta, tb, dtype):
    # float accumulation and one rounding of the result: within a 16-bit step of float64's
    for batch_a, batch_b, n, k, m in CASES[:7]:
        a = np.array(stored(batch_a, n, k, ta), dtype=dtype)
        b = np.array(stored(batch_b, k, m, tb), dtype=dtype)
        want = reference(a.astype("float64").asnumpy(), b.astype("float64").asnumpy(), ta, tb)
        step = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
        assert_almost_equal(matmul(a, b, ta, tb), want, rtol=step, atol=step * 1e-2)


def test_empty_products():
    for ta, tb in FLAGS:
        a = np.ones((2, 0, 3) if ta else (2, 3, 0))  # k == 0: zeros
        b = np.ones((2, 4, 0) if tb else (2, 0, 4))
        assert_almost_equal(matmul(a, b, ta, tb), onp.zeros((2, 3, 4)), rtol=0, atol=0)
        a = np.ones((2, 5, 0) if ta else (2, 0, 5))  # n == 0: empty
        assert matmul(a, np.ones((2, 4, 5) if tb else (2, 5, 4)), ta, tb).shape == (2, 0, 4)


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_gradients(device, ta, tb):
    for batch_a, batch_b, n, k, m in [((2, 1), (3,), 2, 3, 4), ((), (2,), 1, 3, 2),
                                      ((2,), (2,), 3, 1, 1)]:
        a, b = stored(batch_a, n, k, ta), stored(batch_b, k, m, tb)
        check_numeric_gradient(lambda x, y: matmul(x, y, ta, tb), [a, b], device=device)
    a, b = stored((2,), 3, 4, ta), stored((2,), 4, 2, tb)
    check_numeric_gradient(lambda x, y: npx.batch_dot(x, y, ta, tb), [a, b], device=device)


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_backward_reads_operands_in_place(ta, tb):
    a = np.array(stored((4,), 8, 6, ta))
    b = np.array(stored((4,), 6, 5, tb))
    a.attach_grad()
    b.attach_grad()

    def step():
        with autograd.record():
            out = npx.batch_dot(a, b, transpose_a=ta, transpose_b=tb)
        out.backward()

    ran = ops_ran(step)
    assert "swapaxes" not in ran and "transpose" not in ran, ran
    assert ran.get("matmul") == 3, ran
    ones = onp.ones((4, 8, 5))
    a64, b64 = a.asnumpy(), b.asnumpy()
    op_b = b64.swapaxes(1, 2) if tb else b64
    op_a = a64.swapaxes(1, 2) if ta else a64
    grad_op_a, grad_op_b = ones @ op_b.swapaxes(1, 2), op_a.swapaxes(1, 2) @ ones
    assert_almost_equal(a.grad, grad_op_a.swapaxes(1, 2) if ta else grad_op_a, rtol=1e-12, atol=1e-12)
    assert_almost_equal(b.grad, grad_op_b.swapaxes(1, 2) if tb else grad_op_b, rtol=1e-12, atol=1e-12)


class _Scores(nn.HybridBlock):
    """Attention-style scores a . b^T and a product with a transposed first operand."""

    def forward(self, a, b):
        return npx.batch_dot(npx.batch_dot(a, b, transpose_b=True), a, transpose_a=True) + 1


def test_hybridized_equals_imperative_and_exports_as_batch_dot(tmp_path):
    a, b = np.random.uniform(-1, 1, size=(2, 3, 4)), np.random.uniform(-1, 1, size=(2, 5, 4))
    block = _Scores()
    want = block(a, b)
    block.hybridize()
    assert_almost_equal(block(a, b), want, rtol=0, atol=0)
    block.export(str(tmp_path / "scores"))
    nodes = json.loads((tmp_path / "scores-symbol.json").read_text())["nodes"]
    products = [(node["op"], node.get("attrs", {})) for node in nodes if node["op"] != "null"
                and "dot" in node["op"]]
    assert products == [("batch_dot", {"transpose_b": "True"}),
                        ("batch_dot", {"transpose_a": "True"})], products
    loaded = SymbolBlock.imports(str(tmp_path / "scores-symbol.json"), ["data0", "data1"])
    assert_almost_equal(loaded(a, b), want, rtol=0, atol=0)


def test_onnx_export_transposes_then_multiplies(tmp_path):
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    import pymx.onnx
    a = onp.random.uniform(-1, 1, size=(2, 3, 4)).astype("float32")
    b = onp.random.uniform(-1, 1, size=(2, 5, 4)).astype("float32")
    block = _Scores()
    block.hybridize()
    want = block(np.array(a), np.array(b)).asnumpy()
    block.export(str(tmp_path / "scores"))
    path = pymx.onnx.export_model(str(tmp_path / "scores-symbol.json"), {},
                                  [a.shape, b.shape], [a.dtype, b.dtype],
                                  onnx_file_path=str(tmp_path / "scores.onnx"))
    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node].count("Transpose") == 2
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    got = session.run(None, dict(zip(names, [a, b])))[0]
    assert_almost_equal(got, want, rtol=1e-5, atol=1e-6, names=("onnxruntime", "pymx"))


def test_mismatched_inner_dimension_names_shapes_and_flags():
    with pytest.raises(ValueError, match=r"size 3 is different from 4\); shapes \(2, 4, 3\) and "
                                         r"\(2, 3, 5\) \(transpose_a=True, transpose_b=False\)"):
        matmul(np.ones((2, 4, 3)), np.ones((2, 3, 5)), True, False)
    with pytest.raises(ValueError, match=r"inner dimensions differ: a \(2, 3, 4\) "
                                         r"\(transpose_a=False\) and b \(2, 5, 3\)"):
        npx.batch_dot(np.ones((2, 3, 4)), np.ones((2, 5, 3)), transpose_b=True)


@requires_gpu
@pytest.mark.parametrize("ta, tb", FLAGS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32"])
def test_gpu_equals_cpu(ta, tb, dtype):
    # broadcast batches whose walk is not affine go to the plain kernel, the others to cuBLAS
    for batch_a, batch_b, n, k, m in CASES[:7] + [((2, 3), (2, 1), 4, 5, 6)]:
        if dtype == "int32":
            a = onp.random.randint(-4, 5, size=batch_a + ((k, n) if ta else (n, k)))
            b = onp.random.randint(-4, 5, size=batch_b + ((m, k) if tb else (k, m)))
        else:
            a, b = stored(batch_a, n, k, ta), stored(batch_b, k, m, tb)
        a, b = np.array(a, dtype=dtype), np.array(b, dtype=dtype)
        want = matmul(a, b, ta, tb)
        got = matmul(a.to_device(gpu(0)), b.to_device(gpu(0)), ta, tb).to_device(cpu(0))
        tol = {"float16": 2e-2, "bfloat16": 2.0 ** -5, "float32": 1e-4, "float64": 1e-10,
               "int32": 0}[dtype]
        assert_almost_equal(got, want, rtol=tol, atol=tol)
