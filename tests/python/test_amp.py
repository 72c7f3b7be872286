"""pymx.amp: the op lists take effect (and nothing changes while amp is off), multi_all_finite
agrees with NumPy, a conv net trains under amp in float16 and bfloat16 on one and two devices to
a loss close to float32's, dynamic loss scaling skips overflowing steps without touching weights,
states or counts, halves and grows the scale, unscale is exact, convert_hybrid_block matches the
float32 net and its hybridized form, and misuse raises errors naming the values."""
import numpy as onp
import pytest
from small_leafnet import leaf_network

from pymx import amp, autograd, gluon, np, npx
from pymx._op import invoke
from pymx.base import bfloat16
from pymx.device import cpu

LOW = ("float16", "bfloat16")


@pytest.fixture(autouse=True)
def amp_off():
    """Every test starts and ends with amp off (amp.init is process-wide)."""
    amp._reset()
    yield
    amp._reset()


# ---- op lists ---------------------------------------------------------------------------------

def dtypes_of_listed_ops(low):
    x = np.ones((2, 3))
    w = np.ones((4, 3))
    half = np.ones((2, 3), dtype=low)
    return {
        "fully_connected": npx.fully_connected(x, w, no_bias=True).dtype,
        "matmul": np.matmul(x, w.T).dtype,
        "softmax of low": npx.softmax(half).dtype,
        "exp of low": np.exp(half).dtype,
        "sum of low": np.sum(half).dtype,
        "relu of low": npx.relu(half).dtype,
        "softrelu of low": npx.activation(half, act_type="softrelu").dtype,
        "tanh activation of low": npx.activation(half, act_type="tanh").dtype,
        "low + float32": (half + x).dtype,
        "np.add(low, float32)": np.add(half, x).dtype,
        "fully_connected of float64": npx.fully_connected(x.astype("float64"),
                                                          w.astype("float64"), no_bias=True).dtype,
    }


@pytest.mark.parametrize("target", LOW)
def test_op_lists_take_effect(target):
    low = bfloat16 if target == "bfloat16" else onp.dtype("float16")
    f32, f64 = onp.dtype("float32"), onp.dtype("float64")
    without_amp = dtypes_of_listed_ops(low)
    assert without_amp["fully_connected"] == f32 and without_amp["softmax of low"] == low
    amp.init(target)
    assert dtypes_of_listed_ops(low) == {
        "fully_connected": low, "matmul": low, "softmax of low": f32, "exp of low": f32,
        "sum of low": f32, "relu of low": low, "softrelu of low": f32,
        "tanh activation of low": low, "low + float32": f32, "np.add(low, float32)": f32,
        "fully_connected of float64": f64}
    amp._reset()
    assert dtypes_of_listed_ops(low) == without_amp  # off again


def test_lists_can_be_overridden():
    amp.init("float16", target_precision_ops=["matmul"], fp32_ops=["relu"],
             conditional_fp32_ops=[("activation", "act_type", ["tanh"])])
    x = np.ones((2, 3))
    half = np.ones((2, 3), dtype="float16")
    assert np.matmul(x, x.T).dtype == onp.float16
    assert npx.fully_connected(x, x, no_bias=True).dtype == onp.float32  # no longer listed
    assert npx.relu(half).dtype == onp.float32
    assert npx.activation(half, act_type="tanh").dtype == onp.float32
    assert npx.activation(half, act_type="softrelu").dtype == onp.float16
    assert set(amp.list_lp16_ops("float16")) >= {"convolution", "fully_connected"}
    assert "softmax" in amp.list_fp32_ops("bfloat16")


def test_gradients_flow_through_casts_in_the_parameter_dtype():
    amp.init("float16")
    x = np.array(onp.random.default_rng(0).standard_normal((4, 3)), dtype="float32")
    w = np.array(onp.random.default_rng(1).standard_normal((5, 3)), dtype="float32")
    w.attach_grad()
    with autograd.record():
        y = npx.fully_connected(x, w, no_bias=True)
        loss = (y * y).sum()
    loss.backward()
    assert y.dtype == onp.float16 and w.grad.dtype == onp.float32
    x16, w16 = x.asnumpy().astype("float16"), w.asnumpy().astype("float16")
    expected = 2 * (x16.astype("float32") @ w16.T.astype("float32")).T @ x16.astype("float32")
    onp.testing.assert_allclose(w.grad.asnumpy(), expected, rtol=1e-2, atol=1e-2)


def test_hybridize_traces_the_casts(start):
    amp.init("float16")
    images, labels = (np.array(a) for a in task())
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    results = []
    for mode in ("imperative", "traced", "replayed"):
        net = small_net(start)
        net.hybridize(mode != "imperative")
        if mode == "replayed":
            net(images)  # traces; the call below replays
        with autograd.record():
            out = net(images)
            loss = loss_fn(out, labels)
        loss.backward()
        weight = net.collect_params()["0.weight"]
        results.append((out.asnumpy(), weight.grad().asnumpy()))
        assert out.dtype == onp.float16 and weight.grad().dtype == onp.float32
    for out, grad in results[1:]:
        onp.testing.assert_array_equal(out, results[0][0])
        onp.testing.assert_array_equal(grad, results[0][1])


# ---- the overflow check's operator --------------------------------------------------------------

def all_finite_cases():
    """(name, NumPy arrays) for multi_all_finite: mixed dtypes and shapes, empty arrays, more
    arrays than a GPU launch takes (32), and one inf or NaN hidden in various places."""
    rng = onp.random.default_rng(0)
    many = [rng.standard_normal(n).astype("float32") for n in range(1, 71)]
    cases = {"finite mixed": [rng.standard_normal((3, 4)).astype("float16"), onp.zeros((0,)),
                              onp.arange(5, dtype="int32"), onp.ones(2, dtype=bool),
                              rng.standard_normal(7)],
             "finite many": many}
    for bad in (onp.inf, -onp.inf, onp.nan):
        for index, dtype in ((0, "float16"), (39, "float32"), (69, "float64")):
            arrays = [a.copy() for a in many]
            arrays[index] = arrays[index].astype(dtype)
            arrays[index][-1] = bad
            cases[f"{bad} in array {index} ({dtype})"] = arrays
    return cases


def test_multi_all_finite_matches_numpy():
    for name, arrays in all_finite_cases().items():
        expected = all(onp.isfinite(a).all() for a in arrays)
        result = invoke("multi_all_finite", [np.array(a) for a in arrays])[0]
        assert result.dtype == onp.bool_ and result.shape == () and bool(result) == expected, name
    bits = onp.full(3, 0x7F80, dtype=onp.uint16).view(bfloat16)  # bfloat16 inf
    assert not bool(invoke("multi_all_finite", [np.array(bits)])[0])
    with pytest.raises(ValueError, match="multi_all_finite: needs at least one input"):
        invoke("multi_all_finite", [])


# ---- training ---------------------------------------------------------------------------------

STEPS = 12
BATCH = 16


def task():
    """A learnable task: the label says whether channel 0 of the image is bright on average."""
    rng = onp.random.default_rng(0)
    images = rng.standard_normal((BATCH, 3, 32, 32)).astype("float32")
    images[:, 0] += rng.choice([-0.5, 0.5], (BATCH, 1, 1))
    labels = (images[:, 0].mean(axis=(1, 2)) > 0).astype("float32")
    return images, labels


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """The starting parameters every training run loads (always the same ones)."""
    path = str(tmp_path_factory.mktemp("amp") / "start.params")
    npx.random.seed(0)
    net = leaf_network(filters=(8, 16), hidden=32)
    net.initialize(device=cpu(0))
    net(np.zeros((2, 3, 32, 32)))
    net.save_parameters(path)
    return path


def train(start, devices, target=None, steps=STEPS):
    """(losses, trainer) of `steps` SGD steps on task() (split over `devices`), under
    amp.init(target) unless target is None; amp is turned off again after. trainer.skipped
    lists, per step, whether amp skipped it (the loss scale went down)."""
    if target is not None:
        amp.init(target)
    try:
        net = leaf_network(filters=(8, 16), hidden=32)
        net.load_parameters(start, device=devices)
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.1, "momentum": 0.9})
        if target is not None:
            amp.init_trainer(trainer)
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        images, labels = task()
        data = gluon.utils.split_and_load(np.array(images), devices)
        label = gluon.utils.split_and_load(np.array(labels), devices)
        history = []
        trainer.skipped = []
        for _ in range(steps):
            scale = trainer.amp_loss_scale
            with autograd.record():
                losses = [loss_fn(net(x), y) for x, y in zip(data, label)]
                if target is None:
                    autograd.backward(losses)
                else:
                    with amp.scale_loss(losses, trainer) as scaled:
                        autograd.backward(scaled)
            trainer.step(BATCH)
            trainer.skipped.append(trainer.amp_loss_scale < scale)
            history.append(sum(float(loss.mean()) for loss in losses) / len(losses))
        return history, trainer
    finally:
        amp._reset()


def assert_follows(reference, history, trainer, target):
    """The amp run `history` (of `trainer`) follows the float32 run `reference`. float16 starts
    at MXNet's scale 2**16, where the first steps overflow: each skipped step leaves the weights
    (the next loss is the same) and halves the scale. bfloat16 is not scaled. The loss at step i
    is then float32's after the updates made before i."""
    skipped = trainer.skipped
    assert (1 <= sum(skipped) <= 6) if target == "float16" else not any(skipped)
    updates = [i - sum(skipped[:i]) for i in range(STEPS)]
    # Tolerance: float16 keeps 11 significant bits and bfloat16 8, in every product; the loss
    # curves stay within 0.02 (float16) / 0.05 (bfloat16) of float32's (seen: 0.008 / 0.012).
    tolerance = 0.02 if target == "float16" else 0.05
    onp.testing.assert_allclose(history, [reference[k] for k in updates], atol=tolerance)


@pytest.mark.parametrize("devices", [[cpu(0)], [cpu(0), cpu(1)]], ids=["1dev", "2dev"])
@pytest.mark.parametrize("target", LOW)
def test_training_under_amp_follows_float32(start, target, devices):
    reference, _ = train(start, devices)
    assert reference[-1] < 0.01 * reference[0], reference  # the task is learnt
    history, trainer = train(start, devices, target)
    assert_follows(reference, history, trainer, target)


# ---- dynamic loss scaling ---------------------------------------------------------------------

SCALE = 2.0 ** 10


def amp_trainer(start, devices, kvstore="device"):
    """A float16 amp net on `devices` and its momentum-SGD trainer, at loss scale SCALE."""
    amp.init("float16")
    net = leaf_network(filters=(8, 16), hidden=32)
    net.load_parameters(start, device=devices)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore=kvstore)
    amp.init_trainer(trainer)
    trainer._amp_loss_scaler = amp.LossScaler(init_scale=SCALE)  # no overflow at the start
    return net, trainer


def backward(net, trainer, devices):
    images, labels = task()
    data = gluon.utils.split_and_load(np.array(images), devices)
    label = gluon.utils.split_and_load(np.array(labels), devices)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        losses = [loss_fn(net(x), y) for x, y in zip(data, label)]
        with amp.scale_loss(losses, trainer) as scaled:
            autograd.backward(scaled)


def snapshot(trainer):
    """Host copies of every trained weight and optimizer state on every device, and the update
    counts (batch norm's running statistics change in the forward pass, not in the step)."""
    weights = [d.asnumpy() for p in trainer._params if p.grad_req != "null"
               for d in p.list_data()]
    states = [s.asnumpy() for u in trainer._updaters for s in u.states.values()
              if s is not None]
    counts = {k: dict(v) for k, v in trainer.optimizer._all_index_update_counts.items()}
    return weights, states, counts


@pytest.mark.parametrize("bad", [onp.inf, -onp.inf, onp.nan])
@pytest.mark.parametrize("devices,kvstore", [([cpu(0)], "device"),
                                             ([cpu(0), cpu(1)], "device"),
                                             ([cpu(0), cpu(1)], "local"),
                                             ([cpu(0), cpu(1)], None)],
                         ids=["1dev", "2dev-device", "2dev-local", "2dev-no-kvstore"])
def test_overflow_skips_the_step_and_halves_the_scale(start, devices, kvstore, bad):
    net, trainer = amp_trainer(start, devices, kvstore)
    backward(net, trainer, devices)
    trainer.step(BATCH)  # a clean step first, so that optimizer states exist
    before = snapshot(trainer)
    assert before[1], "momentum states were created"
    backward(net, trainer, devices)
    # One element of one gradient on the last device only: without a kvstore the devices
    # update from their own gradients, so the check must see every device.
    grad = net.collect_params()["3.weight"].list_grad()[-1]
    grad[(0,) * grad.ndim] = bad
    trainer.step(BATCH)
    after = snapshot(trainer)
    for a, b in zip(before[0] + before[1], after[0] + after[1]):
        assert a.tobytes() == b.tobytes()
    assert before[2] == after[2]
    assert trainer.amp_loss_scale == SCALE / 2
    backward(net, trainer, devices)  # training goes on at the lower scale
    trainer.step(BATCH)
    assert snapshot(trainer)[0][1].tobytes() != after[0][1].tobytes()
    assert trainer.amp_loss_scale == SCALE / 2


def test_scale_grows_after_the_window_and_stays_capped(start):
    devices = [cpu(0)]
    net, trainer = amp_trainer(start, devices)
    trainer._amp_loss_scaler = amp.LossScaler(init_scale=2.0 ** 10, scale_window=3,
                                              max_scale=2.0 ** 11)
    scales = []
    for _ in range(7):
        backward(net, trainer, devices)
        trainer.step(BATCH)
        scales.append(trainer.amp_loss_scale)
    assert scales == [2.0 ** 10] * 2 + [2.0 ** 11] * 5


def test_unscale_divides_gradients_exactly(start):
    devices = [cpu(0), cpu(1)]
    net, trainer = amp_trainer(start, devices)
    backward(net, trainer, devices)

    def grads():
        return [g.asnumpy() for p in trainer._params if p.grad_req != "null"
                for g in p.list_grad()]
    scaled = grads()
    amp.unscale(trainer)
    for s, u in zip(scaled, grads()):
        assert (s * onp.float32(1 / SCALE)).tobytes() == u.tobytes()
    # The step then divides by the batch size only: the same update as without unscale
    # (powers of two throughout, so bitwise the same).
    trainer.step(BATCH)
    after_unscale = snapshot(trainer)[0]
    net2, trainer2 = amp_trainer(start, devices)
    backward(net2, trainer2, devices)
    trainer2.step(BATCH)
    for a, b in zip(after_unscale, snapshot(trainer2)[0]):
        assert a.tobytes() == b.tobytes()


def test_bfloat16_unscale_applies_to_its_own_step_only(start):
    devices = [cpu(0)]
    amp.init("bfloat16")

    def trained(unscale_first):
        net = small_net(start)
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.1, "rescale_grad": 0.5})
        amp.init_trainer(trainer)
        for step in range(2):
            backward(net, trainer, devices)
            if unscale_first and step == 0:
                amp.unscale(trainer)  # multiplies the gradients by rescale_grad now
            trainer.step(BATCH)
        return snapshot(trainer)[0]

    # Step 1 is the same update either way; step 2 (no unscale) must use rescale_grad again.
    for a, b in zip(trained(True), trained(False)):
        onp.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_the_scale_stops_at_one_and_steps_stay_skipped(start, caplog):
    devices = [cpu(0)]
    net, trainer = amp_trainer(start, devices)
    trainer._amp_loss_scaler = amp.LossScaler(init_scale=4.0)
    scales = []
    for _ in range(4):
        backward(net, trainer, devices)
        grad = net.collect_params()["3.weight"].list_grad()[0]
        grad[(0,) * grad.ndim] = onp.nan
        trainer.step(BATCH)
        scales.append(trainer.amp_loss_scale)
    assert scales == [2.0, 1.0, 1.0, 1.0]
    assert "non-finite gradients at the smallest loss scale (1)" in caplog.text


def test_multi_precision_parameters_train_with_master_copies(start):
    amp.init("float16")
    net = leaf_network(filters=(8, 16), hidden=32)
    net.load_parameters(start, device=cpu(0))
    net.cast("float16")
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "multi_precision": True})
    amp.init_trainer(trainer)
    trainer._amp_loss_scaler = amp.LossScaler(init_scale=SCALE)
    backward(net, trainer, [cpu(0)])
    weight = net.collect_params()["0.weight"]
    before = weight.data().asnumpy()
    trainer.step(BATCH)
    assert weight.dtype == "float16"
    assert not onp.array_equal(weight.data().asnumpy(), before)
    assert onp.isfinite(weight.data().asnumpy()).all()


# ---- convert_hybrid_block ---------------------------------------------------------------------

def small_net(start):
    net = leaf_network(filters=(8, 16), hidden=32)
    net.load_parameters(start, device=cpu(0))
    return net


@pytest.mark.parametrize("offline", [False, True], ids=["cast_per_call", "cast_params_offline"])
@pytest.mark.parametrize("target", LOW)
def test_convert_hybrid_block_matches_float32(start, target, offline):
    net = small_net(start)
    images = np.array(task()[0])
    reference = net(images).asnumpy()
    converted = amp.convert_hybrid_block(net, images, target_dtype=target,
                                         cast_params_offline=offline)
    assert isinstance(converted, type(net)) and converted is not net
    out = converted(images)
    assert out.dtype == (bfloat16 if target == "bfloat16" else onp.float16)
    # Tolerance: float16 rounds each product's operands to 11 bits, bfloat16 to 8; the logits
    # of this net are O(1).
    tolerance = 2e-2 if target == "float16" else 1e-1
    onp.testing.assert_allclose(out.asnumpy().astype("float32"), reference, atol=tolerance)
    params = converted.collect_params()
    low = "bfloat16" if target == "bfloat16" else "float16"
    assert params["0.weight"].dtype == (low if offline else "float32")  # convolution
    assert params["2.gamma"].dtype == "float32"  # batch norm stays float32
    assert all(p.dtype == "float32" for p in net.collect_params().values())  # net unchanged
    onp.testing.assert_array_equal(net(images).asnumpy(), reference)
    converted.hybridize()
    hybrid = converted(images)  # traced
    onp.testing.assert_array_equal(hybrid.asnumpy(), out.asnumpy())
    onp.testing.assert_array_equal(converted(images).asnumpy(), out.asnumpy())  # replayed


def test_a_converted_block_casts_only_on_the_thread_running_it(start):
    # Its policy is the running thread's: two threads running it at once must not leave it
    # installed, nor cast the operators of a thread outside it.
    import threading

    net = small_net(start)
    images = np.array(task()[0])
    converted = amp.convert_hybrid_block(net, images)
    inside = threading.Event()
    release = threading.Event()
    dtypes = []

    class Pausing(gluon.HybridBlock):
        def forward(self, x):
            inside.set()
            release.wait(10)
            return x

    converted.register_child(Pausing(), "pause")  # runs last, while the policy is installed
    worker = threading.Thread(target=lambda: dtypes.append(converted(images).dtype))
    worker.start()
    assert inside.wait(10)
    # This thread runs a float32 dense layer meanwhile: not cast.
    dtypes.append(npx.fully_connected(np.ones((2, 3)), np.ones((4, 3)), no_bias=True).dtype)
    release.set()
    worker.join(10)
    assert dtypes == [onp.float32, onp.float16]
    threads = [threading.Thread(target=converted, args=(images,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert npx.fully_connected(np.ones((2, 3)), np.ones((4, 3)), no_bias=True).dtype == \
        onp.float32


def test_convert_hybrid_block_excludes_children(start):
    net = small_net(start)
    images = np.array(task()[0])
    converted = amp.convert_hybrid_block(net, images, excluded_sym_names=["8"],
                                         cast_params_offline=True)
    assert converted(images).dtype == onp.float32  # the last Dense ran uncast
    assert converted.collect_params()["8.weight"].dtype == "float32"
    assert converted.collect_params()["7.weight"].dtype == "float16"
    with pytest.raises(ValueError, match="'features.3'.*no child block"):
        amp.convert_hybrid_block(net, images, excluded_sym_names=["features.3"])


# ---- errors -----------------------------------------------------------------------------------

def test_init_errors_name_the_values():
    with pytest.raises(ValueError, match="'float64'"):
        amp.init("float64")
    with pytest.raises(ValueError, match=r"no pymx operator: \['Convolution'\]"):
        amp.init(target_precision_ops=["Convolution"])
    with pytest.raises(ValueError, match=r"\['exp'\] are in both target_precision_ops and fp32"):
        amp.init(target_precision_ops=["exp"], fp32_ops=["exp"])
    with pytest.raises(ValueError, match="conditional_fp32_ops entries"):
        amp.init(conditional_fp32_ops=[("activation", "act_type")])
    with pytest.raises(ValueError, match="layout_optimization"):
        amp.init(layout_optimization=True)
    with pytest.raises(ValueError, match="cannot name 'cast'"):
        amp.init(fp32_ops=["cast"])
    # None of those turned amp on.
    assert npx.fully_connected(np.ones((2, 3)), np.ones((4, 3)), no_bias=True).dtype == \
        onp.float32
    amp.init("bfloat16")
    amp.init("bfloat16")  # the same call again does nothing
    with pytest.raises(RuntimeError, match="'bfloat16'.*cannot change.*'float16'"):
        amp.init("float16")


def test_trainer_errors_name_the_values(start):
    net = small_net(start)
    trainer = gluon.Trainer(net.collect_params(), "sgd")
    with pytest.raises(RuntimeError, match=r"call amp.init\(\) first"):
        amp.init_trainer(trainer)
    amp.init("float16")
    with pytest.raises(TypeError, match="not an Optimizer"):
        amp.init_trainer(trainer.optimizer)
    with pytest.raises(TypeError, match="expected a gluon.Trainer, got str"):
        amp.unscale("sgd")
    with pytest.raises(RuntimeError, match=r"amp.unscale: .*amp.init_trainer\(trainer\) first"):
        amp.unscale(trainer)
    with pytest.raises(RuntimeError, match=r"amp.init_trainer\(trainer\) first"):
        with amp.scale_loss(np.ones(()), trainer):
            pass
    with pytest.raises(ValueError, match="update_on_kvstore=False"):
        amp.init_trainer(gluon.Trainer(net.collect_params(), "sgd", update_on_kvstore=True))
    net.cast("float16")
    with pytest.raises(ValueError, match=r"8 of the trainer's 16 parameters are \['float16'\] "
                                         r"but the optimizer SGD has multi_precision=False"):
        amp.init_trainer(gluon.Trainer(net.collect_params(), "sgd"))


def test_loss_scaler_errors_name_the_values():
    with pytest.raises(ValueError, match="init_scale must be a positive power of two.*1000"):
        amp.LossScaler(init_scale=1000)
    with pytest.raises(ValueError, match="scale_window must be a positive int, got 0"):
        amp.LossScaler(scale_window=0)
    with pytest.raises(ValueError, match="init_scale=1024.0, max_scale=512"):
        amp.LossScaler(init_scale=1024.0, max_scale=512)
