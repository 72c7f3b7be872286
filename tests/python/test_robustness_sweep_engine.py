"""A third sweep with one bad input per case: the engine's failure paths, as a user meets them.

The harness of test_robustness_sweep.py: every case runs in one child interpreter, so that a
crash or a hang fails the case that caused it instead of killing pytest; a case expects an
exception class and the values its message must name, or (`gives`) runs asserts. After every
case a small computation must still give the right answer.

Covered here: an op that fails at run time (not at shape inference) in a long asynchronous chain
and in a hybridized graph's replay (with and without static_alloc); waitall after a failure;
huge allocations, shape products that overflow int64 and dimensions beyond it; negative and
non-integer shapes; dtype names that do not exist; exceptions raised by an autograd.Function, a
CustomOp and a HybridBlock's forward halfway through tracing. Every case runs under the threaded
engine and again under the naive one (PYMX_ENGINE=naive in the child's environment), which keeps
the threaded engine's contract (Note [Naive engine errors] in engine/src/naive_engine.cc).

The failure contract (MXNet's): an op's error is stored on the arrays it writes and, through the
ops skipped because of it, on everything that depends on them; it is raised once, at the first
wait that reaches it (wait_to_read, asnumpy or waitall), and names the op. An array written
again afterwards is usable; arrays that never depended on the failure are unaffected.
test_robustness_sweep_modules.py sweeps the remaining modules.
"""
import pytest

import test_robustness_sweep as sweep_harness
from conftest import requires_gpu

gives, raises = sweep_harness.gives, sweep_harness.raises

_PRELUDE = sweep_harness._PRELUDE + '''
from pymx import operator
from pymx._c import core

def expect(fn, exc, *fragments):
    """fn() raises `exc` (at once or at its wait) with every fragment in its message."""
    try:
        result = fn()
        for r in (result if isinstance(result, (list, tuple)) else [result]):
            if hasattr(r, "wait_to_read"):
                r.wait_to_read()
    except exc as e:
        for fragment in fragments:
            assert fragment in str(e), (fragment, str(e))
        return
    raise AssertionError(f"no {exc.__name__} raised")

def out_of_range_take(x, index):
    """take(mode='raise') checks its indices in the kernel: the failure is asynchronous."""
    return np.take(x, i([0, index]), axis=0, mode="raise")

class TakeTwice(nn.HybridBlock):
    """Ops before and after a run-time failure, so the failing op is inside the graph."""
    def forward(self, x, index):
        return np.take(x * 2, index, axis=0, mode="raise") + 1

class InverseBlock(nn.HybridBlock):
    def forward(self, x):
        return np.linalg.inv(x * 1) + 1

class FailsWhileTracing(nn.HybridBlock):
    """Raises after its first layer ran, while `fail` is set."""
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(2, in_units=3)
        self.fail = True

    def forward(self, x):
        h = self.dense(x)
        if self.fail:
            raise RuntimeError("forward failed halfway")
        return h * 2

class Doubles(autograd.Function):
    """y = 2x; `fail_in` names the method that raises instead."""
    def __init__(self, fail_in=None):
        super().__init__()
        self.fail_in = fail_in

    def forward(self, x):
        if self.fail_in == "forward":
            raise ValueError("Function forward failed")
        return x * 2

    def backward(self, dy):
        if self.fail_in == "backward":
            raise ValueError("Function backward failed")
        return dy * 2

def function_gradient(fail_in=None):
    x = a(3)
    x.attach_grad()
    with autograd.record():
        y = Doubles(fail_in)(x)
    y.backward()
    return x.grad

class Triple(operator.CustomOp):
    def __init__(self, fail_in):
        self.fail_in = fail_in

    def forward(self, is_train, req, in_data, out_data, aux):
        if self.fail_in == "forward":
            raise ValueError("CustomOp forward failed")
        self.assign(out_data[0], req[0], in_data[0] * 3)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        if self.fail_in == "backward":
            raise ValueError("CustomOp backward failed")
        self.assign(in_grad[0], req[0], out_grad[0] * 3)

@operator.register("sweep_triple")
class TripleProp(operator.CustomOpProp):
    def __init__(self, fail_in="nowhere"):
        super().__init__(need_top_grad=True)
        self.fail_in = fail_in

    def create_operator(self, device, in_shapes, in_dtypes):
        return Triple(self.fail_in)

def custom_gradient(fail_in="nowhere"):
    x = a(3)
    x.attach_grad()
    with autograd.record():
        y = npx.custom(x, op_type="sweep_triple", fail_in=fail_in)
    y.backward()
    return x.grad
'''

CASES = [
    # --- run-time failures: asynchronous chains ------------------------------------------------
    gives("async-failure-surfaces-once-naming-the-op", """
        x = np.array(onp.arange(6.0).reshape(3, 2))
        chain = out_of_range_take(x, 7)
        for _ in range(30):  # a long chain of dependents, all skipped
            chain = chain * 1.5 + 1
        # a dependent that would fail with its own message if it ran: it is skipped instead
        dependent = out_of_range_take(chain, 9)
        other = a(3) * 2  # no dependency on the failure
        expect(dependent.asnumpy, IndexError, "take", "index 7", "size 3")
        chain.wait_to_read()  # reported once: the failure's other arrays do not raise again
        npx.waitall()
        assert other.asnumpy().tolist() == [2.0, 2.0, 2.0]
        assert x.asnumpy().tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]  # inputs intact
        chain[:] = 3  # an array written again is usable
        assert (chain + 1).asnumpy().tolist() == [[4.0, 4.0], [4.0, 4.0]]
        """),
    gives("waitall-raises-a-pending-failure-once", """
        failed = out_of_range_take(a(3), 5)
        expect(npx.waitall, IndexError, "take", "index 5")
        npx.waitall()
        failed.wait_to_read()
        failed[:] = 1
        assert failed.asnumpy().tolist() == [1.0, 1.0]
        """),
    gives("two-independent-failures-each-surface-at-their-own-wait", """
        first, second = out_of_range_take(a(3), 4), out_of_range_take(a(2), -6)
        expect(second.asnumpy, IndexError, "index -6", "size 2")
        expect(first.asnumpy, IndexError, "index 4", "size 3")
        npx.waitall()
        """),
    raises("singular-matrix-in-a-chain", "(np.linalg.inv(np.zeros((2, 2))) + 1) * 2",
           "LinAlgError", "inv", "singular"),
    # --- run-time failures inside a hybridized graph's replay ----------------------------------
    gives("failure-inside-a-hybridized-replay", """
        x = np.array(onp.arange(6.0).reshape(3, 2))
        expected = TakeTwice()(x, i([2, 0])).asnumpy()
        for options in ({}, {"static_alloc": True, "static_shape": True}):
            block = TakeTwice()
            block.hybridize(**options)
            assert (block(x, i([2, 0])).asnumpy() == expected).all(), options
            expect(lambda: block(x, i([2, 5])), IndexError, "take", "index 5", "size 3")
            npx.waitall()
            # the next replay runs normally, and so does one with the same (now valid) indices
            assert (block(x, i([2, 0])).asnumpy() == expected).all(), options
        """),
    gives("singular-matrix-inside-a-hybridized-replay", """
        for options in ({}, {"static_alloc": True, "static_shape": True}):
            block = InverseBlock()
            block.hybridize(**options)
            assert block(np.eye(2) * 2).asnumpy().tolist() == [[1.5, 1.0], [1.0, 1.5]]
            expect(lambda: block(np.zeros((2, 2))), onp.linalg.LinAlgError, "inv", "singular")
            assert block(np.eye(2) * 2).asnumpy().tolist() == [[1.5, 1.0], [1.0, 1.5]]
        """),
    # --- huge allocations, overflowing and bad shapes ------------------------------------------
    raises("zeros-of-2-pow-40-elements", "np.zeros((1 << 40,))", "MemoryError",
           "4398046511104 bytes"),
    raises("empty-of-a-huge-shape", "np.empty((1 << 40, 1 << 10))", "MemoryError",
           "4503599627370496 bytes"),
    raises("broadcast-with-a-huge-result", "a(1 << 20, 1) + a(1, 1 << 20)", "MemoryError",
           "4398046511104 bytes"),
    raises("broadcast-to-a-huge-shape", "np.broadcast_to(a(1, 1), (1 << 20, 1 << 30))",
           "MemoryError", "4503599627370496 bytes"),
    raises("ones-2-pow-31-squared", "np.ones((2 ** 31, 2 ** 31))", "MemoryError",
           "(2147483648, 2147483648)", "float32"),
    raises("shape-product-overflows-int64", "np.zeros((2 ** 40, 2 ** 40, 2 ** 40))",
           "MemoryError", "(1099511627776, 1099511627776, 1099511627776)"),
    raises("random-shape-product-overflows-int64", "np.random.normal(size=(2 ** 32, 2 ** 32))",
           "MemoryError", "(4294967296, 4294967296)"),
    raises("dimension-beyond-int64", "np.zeros((2 ** 63,))", "ValueError",
           "(9223372036854775808,)", "maximum allowed dimension"),
    raises("reshape-dimension-beyond-int64", "np.reshape(a(4), (2 ** 64, 1))", "ValueError",
           "(18446744073709551616, 1)", "maximum allowed dimension"),
    raises("ones-negative-shape", "np.ones((-3,))", "ValueError", "(-3,)"),
    raises("empty-string-dimension", "np.empty(('a', 2))", "TypeError", "('a', 2)"),
    raises("random-float-size", "np.random.normal(size=(2.5,))", "TypeError", "2.5"),
    raises("random-negative-size", "np.random.randint(0, 3, size=(2, -1))", "ValueError",
           "(2, -1)"),
    gives("memory-is-usable-after-failed-huge-allocations", """
        for shape in [(1 << 40,), (2 ** 31, 2 ** 31)]:
            try:
                np.zeros(shape)
            except MemoryError:
                pass
        big = np.ones((1 << 20,))  # 4 MiB still allocates, and reads back right
        assert float(big.sum()) == float(1 << 20)
        """),
    # --- dtype names ---------------------------------------------------------------------------
    raises("array-unknown-dtype", "np.array([1, 2], dtype='floaty')", "TypeError", "floaty"),
    raises("astype-unknown-dtype", "a(2).astype('floaty')", "TypeError", "floaty"),
    raises("arange-unknown-dtype", "np.arange(3, dtype='int33')", "TypeError", "int33"),
    raises("full-unknown-dtype", "np.full((2,), 1.0, dtype='bogus')", "TypeError", "bogus"),
    # --- exceptions from user code: autograd.Function, CustomOp, tracing -----------------------
    raises("function-forward-raises", "function_gradient('forward')", "ValueError",
           "Function forward failed"),
    raises("function-backward-raises", "function_gradient('backward')", "ValueError",
           "Function backward failed"),
    gives("function-works-after-its-failures", """
        for fail_in in ("forward", "backward"):
            try:
                function_gradient(fail_in)
            except ValueError:
                pass
            assert not autograd.is_recording()  # the failed record() scope was left
        assert function_gradient().asnumpy().tolist() == [2.0, 2.0, 2.0]
        """),
    raises("custom-op-forward-raises", "custom_gradient('forward')", "CustomOpError",
           "'sweep_triple'", "forward", "CustomOp forward failed"),
    raises("custom-op-backward-raises", "custom_gradient('backward')", "CustomOpError",
           "'sweep_triple'", "backward", "CustomOp backward failed"),
    gives("custom-op-works-after-its-failures", """
        for fail_in in ("forward", "backward"):
            try:
                custom_gradient(fail_in)
            except operator.CustomOpError as e:
                assert isinstance(e.__cause__, ValueError)  # chained to the user's exception
        assert not autograd.is_recording()
        assert custom_gradient().asnumpy().tolist() == [3.0, 3.0, 3.0]
        """),
    gives("hybridized-forward-raising-while-tracing-traces-again", """
        block = FailsWhileTracing()
        block.initialize()
        block.hybridize()
        x = np.array(onp.arange(6.0).reshape(2, 3), dtype="float32")
        try:
            block(x)
        except RuntimeError as e:
            assert "forward failed halfway" in str(e)
        else:
            raise AssertionError("the tracing forward did not raise")
        assert not block._cached_graphs  # nothing half-traced is kept
        block.fail = False
        expected = (block.dense(x) * 2).asnumpy()
        assert onp.allclose(block(x).asnumpy(), expected, rtol=1e-6)
        assert block._cached_graphs  # traced this time, and the replay agrees
        assert onp.allclose(block(x).asnumpy(), expected, rtol=1e-6)
        """),
]

ENGINES = ["threaded", "naive"]


@pytest.fixture(scope="module")
def sweep():
    """The child's outcomes per (device, engine), run on first use."""
    per_engine = {}
    for engine in ENGINES:
        # The engine is chosen when pymx starts, so the child sets it before the import.
        prelude = f"import os\nos.environ['PYMX_ENGINE'] = {engine!r}\n" + _PRELUDE + \
            f"assert core.engine_dump().startswith({engine!r}), core.engine_dump()\n"
        per_engine[engine] = sweep_harness.outcomes_per_device(CASES, prelude)
    return lambda device, engine: per_engine[engine](device)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", CASES)
def test_engine_failure_on_cpu(sweep, case, engine, request):
    sweep_harness._check(lambda device: sweep(device, engine), "cpu",
                         request.node.callspec.id.rsplit("-", 1)[0], case)


@requires_gpu
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", [c for c in CASES if c.values[0][4]])
def test_engine_failure_on_gpu(sweep, case, engine, request):
    """The same cases with gpu(0) as the default device: the same exception and message (the
    GPU's take checks its indices on the host, its linalg reports singular matrices), and a
    usable process afterwards."""
    sweep_harness._check(lambda device: sweep(device, engine), "gpu",
                         request.node.callspec.id.rsplit("-", 1)[0], case)
