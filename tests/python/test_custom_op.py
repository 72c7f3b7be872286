"""pymx.operator: Python custom operators (CustomOp, CustomOpProp, register) run by npx.custom.

The operators are MXNet's classic examples: softmax with its own backward (checked against
npx.softmax and cross-entropy), sqr, an op with an aux state, an op with two outputs, and a
loss-style op with need_top_grad=False. Values are checked against float64 NumPy, gradients
against finite differences or the float64 derivative.
"""
import warnings

import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx, operator
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

from conftest import requires_gpu


# ---- the operators --------------------------------------------------------------------------

class Sqr(operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])


@operator.register("test_sqr")
class SqrProp(operator.CustomOpProp):
    def create_operator(self, ctx, in_shapes, in_dtypes):
        return Sqr()


class Softmax(operator.CustomOp):
    """Softmax of the scores; backward is that of cross-entropy with the labels (a loss head)."""

    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0]
        y = np.exp(x - x.max(axis=1, keepdims=True))
        self.assign(out_data[0], req[0], y / y.sum(axis=1, keepdims=True))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        label = in_data[1].astype("int32")
        y = out_data[0] - npx.one_hot(label, out_data[0].shape[1])
        self.assign(in_grad[0], req[0], y)


@operator.register("test_softmax")
class SoftmaxProp(operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], (in_shape[0][0],)], [in_shape[0]], []

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return Softmax()


class ScaleAndCount(operator.CustomOp):
    """out = scale * x; the aux state counts the training-mode forward calls."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * self.scale)
        if is_train:
            aux[0][:] += 1

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] * self.scale)


@operator.register("test_scale_count")
class ScaleAndCountProp(operator.CustomOpProp):
    def __init__(self, scale="1.0"):
        super().__init__()
        self.scale = float(scale)  # kwargs arrive as strings, as in MXNet

    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [(1,)]

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return ScaleAndCount(self.scale)


class MulDiv(operator.CustomOp):
    """(a * b, a / b): two arguments, two outputs."""

    def forward(self, is_train, req, in_data, out_data, aux):
        a, b = in_data
        self.assign(out_data[0], req[0], a * b)
        self.assign(out_data[1], req[1], a / b)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        a, b = in_data
        d_prod, d_quot = out_grad
        self.assign(in_grad[0], req[0], d_prod * b + d_quot / b)
        self.assign(in_grad[1], req[1], d_prod * a - d_quot * a / (b * b))


@operator.register("test_mul_div")
class MulDivProp(operator.CustomOpProp):
    def list_arguments(self):
        return ["a", "b"]

    def list_outputs(self):
        return ["product", "quotient"]

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return out_grad + in_data  # the outputs are not needed: not kept

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return MulDiv()


class Failing(operator.CustomOp):
    def __init__(self, where):
        super().__init__()
        self.where = where

    def forward(self, is_train, req, in_data, out_data, aux):
        if self.where == "forward":
            raise ArithmeticError("forward failed on purpose")
        self.assign(out_data[0], req[0], in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        raise ArithmeticError("backward failed on purpose")


@operator.register("test_failing")
class FailingProp(operator.CustomOpProp):
    def __init__(self, where):
        super().__init__()
        self.where = where

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return Failing(self.where)


def _softmax64(x):
    e = onp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ---- forward and backward -------------------------------------------------------------------

def test_sqr_forward_outside_record_and_gradient(device):
    x = onp.random.uniform(-2, 2, size=(3, 4))
    y = npx.custom(np.array(x, dtype="float32", device=device), op_type="test_sqr")
    assert y.shape == (3, 4) and y.dtype == onp.float32 and y.device == device
    assert_almost_equal(y, x * x)
    check_numeric_gradient(lambda a: npx.custom(a, op_type="test_sqr"), [x], device=device)


def test_softmax_matches_npx_softmax_and_cross_entropy_gradient(device):
    scores = onp.random.uniform(-3, 3, size=(4, 5))
    labels = onp.random.randint(0, 5, size=(4,))
    x = np.array(scores, dtype="float64", device=device)
    x.attach_grad()
    label = np.array(labels, dtype="float64", device=device)
    with autograd.record():
        y = npx.custom(x, label, op_type="test_softmax")
    y.backward()
    assert_almost_equal(y, npx.softmax(np.array(scores, device=device)), rtol=1e-12, atol=1e-12)
    assert_almost_equal(y, _softmax64(scores), rtol=1e-12, atol=1e-12)
    # d(-sum log softmax[label]) / dx: the loss's gradient, reference by pymx's own autograd.
    x_ref = np.array(scores, dtype="float64", device=device)
    x_ref.attach_grad()
    with autograd.record():
        loss = -(npx.log_softmax(x_ref) * npx.one_hot(label, 5)).sum()
    loss.backward()
    assert_almost_equal(x.grad, x_ref.grad, rtol=1e-12, atol=1e-12)
    assert_almost_equal(x.grad, _softmax64(scores) - onp.eye(5)[labels], rtol=1e-12, atol=1e-12)


def test_need_top_grad_false_ignores_head_gradient():
    scores = onp.random.uniform(-1, 1, size=(2, 3))
    x = np.array(scores)
    x.attach_grad()
    with autograd.record():
        y = npx.custom(x, np.array([0.0, 2.0]), op_type="test_softmax")
    y.backward(np.full((2, 3), 7.0))  # a loss head: its backward does not read out_grad
    assert_almost_equal(x.grad, _softmax64(scores) - onp.eye(3)[[0, 2]])
    assert SoftmaxProp().declare_backward_dependency([0], [1, 2], [3]) == [1, 2, 3]


def test_two_outputs_and_numeric_gradient(device):
    a = onp.random.uniform(-2, 2, size=(2, 3))
    b = onp.random.uniform(0.5, 2, size=(2, 3))
    product, quotient = npx.custom(np.array(a, device=device), np.array(b, device=device),
                                   op_type="test_mul_div")
    assert_almost_equal(product, a * b)
    assert_almost_equal(quotient, a / b)

    def both(x, y):
        p, q = npx.custom(x, y, op_type="test_mul_div")
        return p + 3 * q
    check_numeric_gradient(both, [a, b], device=device)


def test_gradient_reaches_one_output_only():
    a = np.array([1.0, 2.0])
    b = np.array([4.0, 8.0])
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        _, quotient = npx.custom(a, b, op_type="test_mul_div")
    quotient.backward()  # the product gets a zero out_grad
    assert_almost_equal(a.grad, [0.25, 0.125])
    assert_almost_equal(b.grad, [-1 / 16, -2 / 64])


def test_aux_state_updated_in_place_in_training_only():
    x = np.array([1.0, -2.0, 3.0])
    x.attach_grad()
    count = np.zeros((1,))
    y = npx.custom(x, count, op_type="test_scale_count", scale=2.5)  # predict mode
    assert_almost_equal(y, [2.5, -5.0, 7.5])
    assert float(count[0]) == 0
    for _ in range(2):
        with autograd.record():
            y = npx.custom(x, count, op_type="test_scale_count", scale=2.5)
        y.backward()
    assert float(count[0]) == 2
    assert_almost_equal(x.grad, [2.5, 2.5, 2.5])


def test_is_train_follows_training_mode_not_recording():
    count = np.zeros((1,))
    with autograd.train_mode():
        npx.custom(np.ones((2,)), count, op_type="test_scale_count")
    with autograd.record(train_mode=False):
        npx.custom(np.ones((2,)), count, op_type="test_scale_count")
    assert float(count[0]) == 1


def test_grad_req_add_accumulates():
    x = np.array([1.0, 2.0, 3.0])
    x.attach_grad(grad_req="add")
    for _ in range(3):
        with autograd.record():
            y = npx.custom(x, op_type="test_sqr")
        y.backward()
    assert_almost_equal(x.grad, 3 * 2 * onp.array([1.0, 2.0, 3.0]))


def test_input_without_gradient_and_integer_label_get_null_req():
    seen = {}

    class Record(Sqr):
        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            seen["req"] = req
            self.assign(in_grad[0], req[0], out_grad[0] * 2)

    @operator.register("test_req_record")
    class RecordProp(operator.CustomOpProp):
        def list_arguments(self):
            return ["data", "index"]

        def infer_type(self, in_type):
            return in_type, [in_type[0]], []

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Record()

    x = np.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = npx.custom(x, np.array([0, 1], dtype="int32"), op_type="test_req_record")
    y.backward()
    assert seen["req"] == ["write", "null"]
    assert_almost_equal(x.grad, [2.0, 2.0])


def test_undeclared_dependencies_are_not_kept():
    seen = {}

    class Spy(MulDiv):
        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            seen["out_data"] = out_data
            super().backward(req, out_grad, in_data, out_data, in_grad, aux)

    @operator.register("test_mul_div_spy")
    class SpyProp(MulDivProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Spy()

    a = np.array([3.0])
    a.attach_grad()
    with autograd.record():
        product, _ = npx.custom(a, np.array([2.0]), op_type="test_mul_div_spy")
    product.backward()
    assert seen["out_data"] == [None, None]
    assert_almost_equal(a.grad, [2.0])


def test_kwargs_reach_prop_as_strings_and_create_operator_arguments():
    seen = {}

    @operator.register("test_kwargs")
    class KwargsProp(operator.CustomOpProp):
        def __init__(self, **kwargs):
            super().__init__()
            seen["kwargs"] = kwargs

        def create_operator(self, ctx, in_shapes, in_dtypes):
            seen["create"] = (ctx, in_shapes, in_dtypes)
            return Sqr()

    npx.custom(np.ones((2, 3)), op_type="test_kwargs", alpha=0.5, flag=True, axes=(1, 2))
    assert seen["kwargs"] == {"alpha": "0.5", "flag": "True", "axes": "(1, 2)"}
    assert seen["create"] == (pymx.cpu(0), [[2, 3]], [onp.float32])


def test_assign_handles_each_req():
    op = operator.CustomOp()
    dst = np.array([1.0, 2.0])
    op.assign(dst, "null", np.array([5.0, 5.0]))
    assert_almost_equal(dst, [1.0, 2.0])
    op.assign(dst, "add", np.array([5.0, 5.0]))
    assert_almost_equal(dst, [6.0, 7.0])
    op.assign(dst, "inplace", np.array([0.5, 0.5]))
    assert_almost_equal(dst, [0.5, 0.5])
    with pytest.raises(ValueError, match="'copy'"):
        op.assign(dst, "copy", dst)


def test_registry_lists_names():
    names = operator.get_all_registered()
    assert "test_sqr" in names and "custom_op" in names
    assert names == sorted(names)


# ---- errors ---------------------------------------------------------------------------------

def test_unknown_op_type_names_the_registered_ones():
    with pytest.raises(ValueError, match=r"'no_such_op'.*registered: \[.*'test_sqr'"):
        npx.custom(np.ones((2,)), op_type="no_such_op")


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"'test_softmax' takes 2 arguments \['data', 'label'\]"):
        npx.custom(np.ones((2, 3)), op_type="test_softmax")
    with pytest.raises(TypeError, match="input 0 must be a pymx ndarray, got list"):
        npx.custom([1.0, 2.0], op_type="test_sqr")
    with pytest.raises(ValueError, match=r"infer_shape gives argument 'label' the shape \(2,\)"):
        npx.custom(np.ones((2, 3)), np.ones((3,)), op_type="test_softmax")
    with pytest.raises(TypeError, match="CustomOpProp"):
        operator.register("test_not_a_prop")(object)


def test_infer_shape_with_wrong_output_count_is_named():
    @operator.register("test_bad_infer")
    class BadInferProp(operator.CustomOpProp):
        def infer_shape(self, in_shape):
            return in_shape, [in_shape[0], in_shape[0]]

    with pytest.raises(ValueError, match="'test_bad_infer': infer_shape returned 2 output "
                                         "entries, expected 1"):
        npx.custom(np.ones((2,)), op_type="test_bad_infer")


def test_infer_shape_result_and_input_count_errors():
    @operator.register("test_infer_none")
    class InferNoneProp(operator.CustomOpProp):
        def infer_shape(self, in_shape):
            return None

    with pytest.raises(ValueError, match="infer_shape must return 2 or 3 lists"):
        npx.custom(np.ones((2,)), op_type="test_infer_none")

    @operator.register("test_no_inputs")
    class NoInputsProp(operator.CustomOpProp):
        def list_arguments(self):
            return []

    with pytest.raises(ValueError, match="'test_no_inputs' has no inputs"):
        npx.custom(op_type="test_no_inputs")
    with pytest.raises(ValueError, match=r"1 arguments \['data'\] and 1 auxiliary states "
                                         r"\['count'\], got 1 inputs"):
        npx.custom(np.ones((2,)), op_type="test_scale_count")


def test_default_custom_op_needs_forward():
    with pytest.raises(operator.CustomOpError, match="'custom_op': CustomOp.forward raised "
                                                     "NotImplementedError"):
        npx.custom(np.ones((2,)), op_type="custom_op")


def test_errors_in_user_code_name_the_op_and_leave_pymx_usable():
    with pytest.raises(operator.CustomOpError,
                       match="'test_failing': Failing.forward raised ArithmeticError: forward "
                             "failed on purpose") as info:
        npx.custom(np.ones((2,)), op_type="test_failing", where="forward")
    assert isinstance(info.value.__cause__, ArithmeticError)
    assert not autograd.is_recording()

    x = np.ones((2,))
    x.attach_grad()
    with autograd.record():
        y = npx.custom(x, op_type="test_failing", where="backward")
    with pytest.raises(operator.CustomOpError, match="'test_failing': Failing.backward raised"):
        y.backward()
    with pytest.raises(operator.CustomOpError, match=r"FailingProp\(\*\*\{\}\) raised TypeError"):
        npx.custom(np.ones((2,)), op_type="test_failing")
    # The process stays usable: another op records and differentiates.
    with autograd.record():
        z = npx.custom(x, op_type="test_sqr")
    z.backward()
    assert_almost_equal(x.grad, [2.0, 2.0])


# ---- Gluon ----------------------------------------------------------------------------------

class SqrDense(gluon.HybridBlock):
    """A dense layer whose output goes through the custom sqr, then a second dense layer."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(4, in_units=3)
        self.out = gluon.nn.Dense(2, in_units=4)

    def forward(self, x):
        return self.out(npx.custom(self.dense(x), op_type="test_sqr"))


def _train_step(net, x, label, device):
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.L2Loss()
    with autograd.record():
        loss = loss_fn(net(x), label)
    loss.backward()
    grads = {name: p.grad(device).asnumpy().copy() for name, p in net.collect_params().items()}
    trainer.step(x.shape[0])
    return loss.asnumpy(), grads


def test_hybrid_block_imperative_and_hybridized_train_alike(device):
    x = np.array(onp.random.uniform(-1, 1, size=(5, 3)), dtype="float32", device=device)
    label = np.array(onp.random.uniform(-1, 1, size=(5, 2)), dtype="float32", device=device)
    nets = []
    for _ in range(2):
        net = SqrDense()
        net.initialize(pymx.init.Constant(0.0), device=device)
        nets.append(net)
    for p, q in zip(nets[0].collect_params().values(), nets[1].collect_params().values()):
        value = onp.random.uniform(-1, 1, size=p.shape).astype("float32")
        p.set_data(np.array(value, device=device))
        q.set_data(np.array(value, device=device))
    nets[1].hybridize()
    with pytest.warns(UserWarning, match=r"SqrDense runs imperatively.*'test_sqr'"):
        hybrid_first = _train_step(nets[1], x, label, device)
    imperative_first = _train_step(nets[0], x, label, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per signature
        hybrid_second = _train_step(nets[1], x, label, device)
    imperative_second = _train_step(nets[0], x, label, device)
    for imperative, hybrid in ((imperative_first, hybrid_first),
                               (imperative_second, hybrid_second)):
        assert_almost_equal(hybrid[0], imperative[0])
        for name in imperative[1]:
            assert_almost_equal(hybrid[1][name], imperative[1][name])
    assert not onp.allclose(imperative_first[0], imperative_second[0])  # the step trained
    # Children that do not call the custom op are hybridized on their own.
    assert nets[1].dense._cached_graphs and nets[1].out._cached_graphs
    assert not nets[1]._cached_graphs


def test_hybridized_forward_matches_numpy_reference():
    net = SqrDense()
    net.initialize()
    x = onp.random.uniform(-1, 1, size=(2, 3)).astype("float32")
    w1, b1 = net.dense.weight.data().asnumpy(), net.dense.bias.data().asnumpy()
    w2, b2 = net.out.weight.data().asnumpy(), net.out.bias.data().asnumpy()
    expected = ((x @ w1.T + b1) ** 2) @ w2.T + b2
    net.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(2):
            assert_almost_equal(net(np.array(x)), expected)


def test_export_of_untraced_block_names_the_custom_op(tmp_path):
    net = SqrDense()
    net.initialize()
    net.hybridize()
    with pytest.warns(UserWarning):
        net(np.ones((1, 3)))
    with pytest.raises(RuntimeError, match=r"SqrDense cannot be exported.*'test_sqr'"):
        net.export(str(tmp_path / "net"))


def test_autograd_trace_refuses_custom_op():
    with pytest.raises(RuntimeError, match=r"npx.custom\(op_type='test_sqr'\)"):
        autograd._trace(lambda a: npx.custom(a, op_type="test_sqr"), [np.ones((2,))])
    y = npx.custom(np.ones((2,)), op_type="test_sqr")  # no trace left behind
    assert_almost_equal(y, [1.0, 1.0])


# ---- GPU ------------------------------------------------------------------------------------

@requires_gpu
def test_gpu_matches_cpu_and_user_code_sees_gpu_arrays():
    seen = []

    class Where(Sqr):
        def forward(self, is_train, req, in_data, out_data, aux):
            seen.append((in_data[0].device, out_data[0].device, pymx.current_device()))
            super().forward(is_train, req, in_data, out_data, aux)

    @operator.register("test_where")
    class WhereProp(operator.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            seen.append(ctx)
            return Where()

    values = onp.random.uniform(-1, 1, size=(3, 4))
    results = {}
    for device in (pymx.cpu(0), pymx.gpu(0)):
        x = np.array(values, device=device)
        x.attach_grad()
        with autograd.record():
            y = npx.custom(x, op_type="test_where")
        y.backward()
        results[device.device_type] = (y.asnumpy(), x.grad.asnumpy())
    gpu = pymx.gpu(0)
    assert seen[-2:] == [gpu, (gpu, gpu, gpu)]
    assert_almost_equal(results["gpu"][0], results["cpu"][0])
    assert_almost_equal(results["gpu"][1], results["cpu"][1])
