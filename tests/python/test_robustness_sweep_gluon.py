"""A sweep of gluon, data, files, metrics, losses and kvstore with one bad input per case.

The second half of test_robustness_sweep.py (which covers pymx.np / npx / autograd and the first
gluon cases), with its harness: every case runs in one child interpreter, so that a crash or a
hang fails the case that caused it instead of killing pytest; a case expects an exception class
and the values its message must name, or (`gives`) runs asserts on a legal but unusual input.
After every case a small computation must still give the right answer. `strict(fn)` turns
warnings into exceptions where the documented answer to a bad input is a warning (as in MXNet).

Where MXNet answers a bad input silently and pymx does too, a `gives` case pins that answer:
SoftmaxCrossEntropyLoss clips sparse labels outside [0, classes) (npx.pick's default mode), and
losses reshape a label of the prediction's size to the prediction's shape.
"""
import pytest

import test_robustness_sweep as sweep_harness
from conftest import requires_gpu

gives, raises = sweep_harness.gives, sweep_harness.raises

# The first sweep's helpers (a, i, f, dense, Pair, One, TMP...), then this sweep's fixtures.
_PRELUDE = sweep_harness._PRELUDE + '''
from pymx import kvstore, lr_scheduler
from pymx._atomic_file import write_atomically
from pymx.gluon import loss, metric
from pymx.gluon.data import ArrayDataset, DataLoader, SimpleDataset, batchify
from pymx.gluon.data.vision import transforms

def strict(fn):
    """fn() with warnings raised as exceptions."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()

def path(name):
    return os.path.join(TMP, name)

def write(name, data):
    with open(path(name), "wb") as target:
        target.write(data)
    return path(name)

def read(name):
    with open(path(name), "rb") as source:
        return source.read()

def shared_dense(in_units):
    """A Dense(3) given DENSE's (3, 4) parameters."""
    return nn.Dense(3, in_units=in_units).share_parameters(DENSE.collect_params())

def trainer(optimizer="sgd", **kwargs):
    return gluon.Trainer(dense().collect_params(), optimizer, **kwargs)

def stepped_twice():
    block = dense()
    t = gluon.Trainer(block.collect_params(), "sgd")
    with autograd.record():
        block(a(2, 4)).sum().backward()
    t.step(2)
    t.step(2)  # no backward since the first step: every gradient is stale

def metric_of(m, labels, preds):
    m.update(labels, preds)
    return m.get()

def store(*keys):
    kv = kvstore.create("local")
    for key in keys:
        kv.init(key, a(3))
    return kv

class FailsAt(gluon.data.Dataset):
    """Six float32 pairs; item `bad` raises KeyError."""
    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 6

    def __getitem__(self, index):
        if index == self.bad:
            raise KeyError(f"item {index} is broken")
        return onp.full(2, index, dtype="float32")

HYBRID = hybridized(Pair())
HYBRID.initialize()
HYBRID(a(2, 4))
HYBRID.export(path("pair"))
DENSE_HYBRID = hybridized(dense())
DENSE_HYBRID(a(2, 4))
DENSE_HYBRID.export(path("dense"))
with open(path("pair-0000.params"), "rb") as source:
    write("pair-truncated.params", source.read()[:60])
write("broken-symbol.json", b"{not json")
STATES = trainer(optimizer_params={"momentum": 0.9})
STATES.save_states(path("good.states"))
write("truncated.states", read("good.states")[:len(read("good.states")) // 2])
write("garbage.states", b"\\x00garbage" * 8)
write("empty.states", b"")
npx.save(path("x.npy"), a(100))
write("truncated.npy", read("x.npy")[:len(read("x.npy")) // 2])
npx.savez(path("z.npz"), a=a(100), b=a(3))
corrupt = bytearray(read("z.npz"))
corrupt[100:140] = b"\\xff" * 40
write("corrupt.npz", bytes(corrupt))
write("text.npy", b"hello world " * 10)
os.makedirs(path("pictures/cat"))
from PIL import Image
Image.fromarray(onp.zeros((8, 8, 3), "uint8")).save(path("pictures/cat/ok.png"))
write("pictures/cat/truncated.png", read("pictures/cat/ok.png")[:40])
'''

CASES = [
    # --- Block / HybridBlock forward --------------------------------------------------------
    raises("forward-too-many-inputs", "dense()(a(2, 4), a(2, 4))", "TypeError",
           "takes 2 positional arguments but 3 were given"),
    raises("hybridized-forward-too-many-inputs", "hybridized(dense())(a(2, 4), a(2, 4))",
           "TypeError", "takes 2 positional arguments but 3 were given"),
    raises("forward-other-dtype", "dense()(a(2, 4, dtype='float64'))", "ValueError", "float64",
           "float32"),
    raises("hybridized-forward-then-other-dtype",
           "called_twice(hybridized(dense()), a(2, 4), a(2, 4, dtype='float64'))", "ValueError",
           "float64", "float32"),
    raises("hybridized-forward-then-other-ndim",
           "called_twice(hybridized(conv2d()), a(1, 2, 5, 5), a(2, 5, 5))", "ValueError",
           "(2, 5, 5)"),
    gives("hybridized-forward-with-another-ndim-equals-imperative", """
        block = dense()
        x = np.array(onp.arange(8.0).reshape(2, 1, 4), dtype="float32")
        expected = block(x).asnumpy()  # Dense flattens the trailing axes
        block.hybridize()
        block(a(2, 4))
        assert onp.allclose(block(x).asnumpy(), expected, rtol=1e-6)
        """),
    raises("forward-parameters-on-another-device", "dense()(a(2, 4).to_device(pymx.cpu(1)))",
           "RuntimeError", "cpu(1)", "[cpu(0)]", gpu=False),
    # --- parameters ---------------------------------------------------------------------------
    raises("initialize-twice-warns", "strict(lambda: dense().initialize())", "UserWarning",
           "'weight' is already initialized", "force_reinit=True"),
    raises("data-before-initialize", "nn.Dense(3, in_units=4).weight.data()", "RuntimeError",
           "'weight' has not been initialized"),
    raises("forward-before-initialize", "nn.Dense(3, in_units=4)(a(2, 4))", "RuntimeError",
           "has not been initialized"),
    raises("deferred-data-before-forward", "dense(3, 0).weight.data()",
           "DeferredInitializationError", "'weight'", "deferred"),
    raises("set-data-other-shape", "dense().weight.set_data(a(5, 5))", "ValueError", "(5, 5)",
           "(3, 4)", "'weight'"),
    raises("set-data-broadcastable-shape", "dense().weight.set_data(a(4))", "ValueError", "(4,)",
           "(3, 4)", "'weight'"),
    raises("set-data-before-initialize", "nn.Dense(3, in_units=4).weight.set_data(a(3, 4))",
           "RuntimeError", "'weight' has not been initialized"),
    gives("set-data-deferred-takes-the-shape", """
        block = nn.Dense(3)
        block.initialize()
        block.weight.set_data(np.array(onp.arange(12.0).reshape(3, 4), dtype="float32"))
        block.bias.set_data(np.zeros(3))
        assert block.weight.shape == (3, 4)
        assert block(a(1, 4)).asnumpy().tolist() == [[6.0, 22.0, 38.0]]
        """),
    raises("cast-unknown-dtype", "dense().cast('bogus')", "TypeError", "bogus"),
    raises("cast-object-dtype", "dense().cast(object)", "TypeError", "object"),
    raises("share-parameters-other-shape", "shared_dense(5)", "ValueError", "'weight'",
           "(3, 5)", "(3, 4)"),
    raises("share-parameters-not-a-dict", "nn.Dense(3).share_parameters([DENSE.weight])",
           "ValueError", "list"),
    raises("share-parameters-not-a-parameter", "nn.Dense(3).share_parameters({'weight': a(3)})",
           "TypeError", "'weight'", "ndarray"),
    raises("share-parameters-unknown-name",
           "strict(lambda: nn.Dense(3).share_parameters({'zz.weight': DENSE.weight}))",
           "UserWarning", "zz.weight"),
    gives("share-parameters-shares-the-arrays", """
        block = nn.Dense(3).share_parameters(DENSE.collect_params())
        assert block.weight is DENSE.weight and block.bias is DENSE.bias
        assert (block(a(2, 4)).asnumpy() == DENSE(a(2, 4)).asnumpy()).all()
        """),
    raises("sequential-add-not-a-block", "nn.Sequential().add(5)", "TypeError", "int", "5"),
    raises("hybrid-sequential-add-plain-block", "nn.HybridSequential().add(nn.Sequential())",
           "ValueError", "HybridBlock"),
    raises("collect-params-bad-regex", "Pair().collect_params('a.(')", "ValueError", "'a.('"),
    # --- export / imports / parameter files ---------------------------------------------------
    raises("export-before-forward", "hybridized(dense()).export(path('never'))", "RuntimeError",
           "hybridize()", gpu=False),
    raises("export-into-missing-directory", "DENSE_HYBRID.export(path('nowhere/dense'))",
           "FileNotFoundError", "nowhere", gpu=False),
    raises("imports-missing-symbol-file",
           "gluon.SymbolBlock.imports(path('absent-symbol.json'), ['data'], "
           "path('pair-0000.params'))", "FileNotFoundError", "absent-symbol.json", gpu=False),
    raises("imports-missing-params-file",
           "gluon.SymbolBlock.imports(path('pair-symbol.json'), ['data'], path('absent.params'))",
           "FileNotFoundError", "absent.params", gpu=False),
    raises("imports-params-of-another-model",
           "gluon.SymbolBlock.imports(path('pair-symbol.json'), ['data'], "
           "path('dense-0000.params'))", "ValueError", "'a.weight'", "dense-0000.params",
           gpu=False),
    raises("imports-unknown-input-name",
           "gluon.SymbolBlock.imports(path('pair-symbol.json'), ['bogus'], "
           "path('pair-0000.params'))", "ValueError", "bogus", "pair-symbol.json", gpu=False),
    raises("imports-corrupt-symbol-file",
           "gluon.SymbolBlock.imports(path('broken-symbol.json'), ['data'], "
           "path('pair-0000.params'))", "ValueError", "broken-symbol.json", "not valid JSON",
           gpu=False),
    raises("imports-truncated-params-file",
           "gluon.SymbolBlock.imports(path('pair-symbol.json'), ['data'], "
           "path('pair-truncated.params'))", "ValueError", "pair-truncated.params", gpu=False),
    raises("imported-block-wrong-input-count",
           "gluon.SymbolBlock.imports(path('pair-symbol.json'), ['data'], "
           "path('pair-0000.params'))(a(2, 4), a(2, 4))", "ValueError", "1 input", "got 2",
           gpu=False),
    raises("load-parameters-not-a-parameter-file",
           "dense().load_parameters(path('pair-symbol.json'))", "ValueError", "pair-symbol.json", gpu=False),
    raises("save-parameters-into-missing-directory",
           "dense().save_parameters(path('nowhere/dense.params'))", "FileNotFoundError",
           "nowhere/dense.params", "does not exist", gpu=False),
    gives("failed-saves-leave-the-previous-file", """
        target = path("kept.params")
        DENSE.save_parameters(target)
        before = read("kept.params")

        def half_then_fail(f):
            f.write(b"partial")
            raise OSError("disk full")
        try:
            write_atomically(target, half_then_fail)
        except OSError as e:
            assert "disk full" in str(e)
        else:
            raise AssertionError("the failing writer did not raise")
        unfinished = nn.Dense(3, in_units=4)  # no values to write: fails before writing
        try:
            unfinished.save_parameters(target)
        except RuntimeError:
            pass
        assert read("kept.params") == before
        assert [n for n in os.listdir(TMP) if n.endswith(".tmp")] == []
        dense().load_parameters(target)
        """, gpu=False),
    # --- Trainer and learning-rate schedules --------------------------------------------------
    raises("trainer-unknown-optimizer-argument",
           "trainer(optimizer_params={'bogus_arg': 1})", "TypeError", "bogus_arg", gpu=False),
    raises("trainer-optimizer-instance-and-params",
           "trainer(pymx.optimizer.SGD(), optimizer_params={'learning_rate': 1})", "ValueError",
           "optimizer_params", gpu=False),
    raises("trainer-unknown-kvstore", "trainer(kvstore='bogus')", "ValueError", "'bogus'",
           gpu=False),
    raises("trainer-step-with-stale-gradients", "strict(stepped_twice)", "UserWarning",
           "has not been updated by backward", "ignore_stale_grad", gpu=False),
    raises("trainer-uninitialized-parameters",
           "gluon.Trainer(nn.Dense(3, in_units=4).collect_params(), 'sgd').step(1)",
           "RuntimeError", "has not been initialized", gpu=False),
    raises("factor-scheduler-step-zero", "lr_scheduler.FactorScheduler(0)", "ValueError",
           "got 0", gpu=False),
    raises("factor-scheduler-growing-factor", "lr_scheduler.FactorScheduler(2, factor=1.5)",
           "ValueError", "1.5", gpu=False),
    raises("multi-factor-scheduler-unsorted-steps", "lr_scheduler.MultiFactorScheduler([5, 3])",
           "ValueError", "[5, 3]", gpu=False),
    raises("scheduler-unknown-warmup-mode",
           "lr_scheduler.FactorScheduler(2, warmup_mode='bogus')", "ValueError", "bogus",
           gpu=False),
    raises("scheduler-warmup-above-base",
           "lr_scheduler.CosineScheduler(10, base_lr=0.1, warmup_begin_lr=1.0, warmup_steps=2)",
           "ValueError", "1.0", "0.1", gpu=False),
    raises("load-states-missing-file", "STATES.load_states(path('absent.states'))",
           "FileNotFoundError", "absent.states", gpu=False),
    raises("load-states-truncated-file", "STATES.load_states(path('truncated.states'))",
           "ValueError", "truncated.states", "corrupt or truncated", gpu=False),
    raises("load-states-garbage-file", "STATES.load_states(path('garbage.states'))",
           "ValueError", "garbage.states", gpu=False),
    raises("load-states-empty-file", "STATES.load_states(path('empty.states'))", "ValueError",
           "empty.states", gpu=False),
    raises("load-states-not-states", "STATES.load_states(path('x.npy'))", "ValueError",
           "x.npy", gpu=False),
    raises("save-states-into-missing-directory",
           "STATES.save_states(path('nowhere/t.states'))", "FileNotFoundError",
           "nowhere/t.states", gpu=False),
    gives("load-states-after-a-failed-load-still-works", """
        try:
            STATES.load_states(path("truncated.states"))
        except ValueError:
            pass
        STATES.load_states(path("good.states"))
        assert STATES.optimizer.momentum == 0.9
        """, gpu=False),
    # --- data ---------------------------------------------------------------------------------
    raises("dataloader-sampler-and-shuffle",
           "DataLoader(ArrayDataset(a(6, 2)), batch_size=2, shuffle=True, "
           "sampler=gluon.data.SequentialSampler(6))", "ValueError", "shuffle", "sampler",
           gpu=False),
    raises("dataloader-batch-sampler-and-batch-size",
           "DataLoader(ArrayDataset(a(6, 2)), batch_size=2, batch_sampler="
           "gluon.data.BatchSampler(gluon.data.SequentialSampler(6), 2))", "ValueError",
           "batch_sampler", gpu=False),
    raises("dataloader-no-batch-size", "DataLoader(ArrayDataset(a(6, 2)))", "ValueError",
           "batch_size", gpu=False),
    raises("dataloader-fractional-num-workers",
           "DataLoader(ArrayDataset(a(6, 2)), batch_size=2, num_workers=1.5)", "ValueError",
           "num_workers", "1.5", gpu=False),
    raises("sequential-sampler-negative-length", "gluon.data.SequentialSampler(-1)",
           "ValueError", "-1", gpu=False),
    raises("random-sampler-negative-length", "gluon.data.RandomSampler(-2)", "ValueError", "-2",
           gpu=False),
    raises("array-dataset-lengths-differ", "ArrayDataset(a(6, 2), a(5))", "ValueError", "6",
           "5", gpu=False),
    raises("stack-ragged-samples", "batchify.Stack()([onp.ones(2), onp.ones(3)])", "ValueError",
           "(2,)", "(3,)", "Pad", gpu=False),
    raises("stack-no-samples", "batchify.Stack()([])", "ValueError", "no samples", gpu=False),
    raises("dataloader-ragged-samples",
           "list(DataLoader(SimpleDataset([onp.ones(2, 'float32'), onp.ones(3, 'float32')]), "
           "batch_size=2))", "ValueError", "sample 1 has shape (3,)", gpu=False),
    raises("pad-samples-of-different-ranks", "batchify.Pad()([onp.ones(2), onp.ones((3, 2))])",
           "ValueError", "[1, 2]", gpu=False),
    raises("group-wrong-field-count",
           "batchify.Group(batchify.Stack(), batchify.Stack())([(onp.ones(2),), (onp.ones(2),)])",
           "ValueError", "2", gpu=False),
    gives("dataloader-worker-exception-reaches-the-caller", """
        import multiprocessing
        for workers in (0, 2):
            loader = DataLoader(FailsAt(3), batch_size=2, num_workers=workers)
            for attempt in range(2):  # the loader stays usable: a second pass fails the same way
                try:
                    list(loader)
                except KeyError as e:
                    trace = "".join(traceback.format_exception(e))
                    assert "item 3 is broken" in trace and "__getitem__" in trace, trace
                else:
                    raise AssertionError(f"num_workers={workers}: the worker's KeyError was lost")
            loader.close()
            good = DataLoader(FailsAt(-1), batch_size=2, num_workers=workers)
            assert [b.asnumpy()[:, 0].tolist() for b in good] == [[0, 1], [2, 3], [4, 5]]
            good.close()
        assert multiprocessing.active_children() == []  # no worker left behind
        """, gpu=False),
    raises("image-folder-truncated-image",
           "[x for x in gluon.data.vision.ImageFolderDataset(path('pictures'))]", "ValueError",
           "truncated.png", gpu=False),
    raises("to-tensor-wrong-rank", "transforms.ToTensor()(np.ones((8,), dtype='uint8'))",
           "ValueError", "(8,)"),
    raises("normalize-wrong-channel-count",
           "transforms.Normalize(mean=(0.1, 0.2), std=(1, 1))(a(3, 4, 4))", "ValueError",
           "2 values", "3 channels"),
    raises("normalize-integer-image",
           "transforms.Normalize(0.5, 0.5)(np.ones((4, 4, 3), dtype='uint8'))", "TypeError",
           "uint8"),
    raises("resize-negative-size", "transforms.Resize(-2)(np.ones((8, 8, 3), dtype='uint8'))",
           "ValueError", "-2"),
    # --- array files --------------------------------------------------------------------------
    raises("npx-save-into-missing-directory", "npx.save(path('nowhere/x.npy'), a(2))",
           "FileNotFoundError", "nowhere/x.npy", gpu=False),
    raises("npx-savez-into-missing-directory", "npx.savez(path('nowhere/z.npz'), a(2))",
           "FileNotFoundError", "nowhere/z.npz", gpu=False),
    raises("npx-save-not-an-array", "npx.save(path('list.npy'), [1, 2])", "ValueError", "list",
           gpu=False),
    raises("npx-load-missing-file", "npx.load(path('absent.npy'))", "FileNotFoundError",
           "absent.npy", gpu=False),
    raises("npx-load-truncated-npy", "npx.load(path('truncated.npy'))", "ValueError",
           "truncated.npy", gpu=False),
    raises("npx-load-corrupt-npz", "npx.load(path('corrupt.npz'))", "ValueError", "corrupt.npz",
           gpu=False),
    raises("npx-load-text-file", "npx.load(path('text.npy'))", "ValueError", "text.npy",
           gpu=False),
    # --- metrics and losses -------------------------------------------------------------------
    raises("accuracy-shape-mismatch", "metric_of(metric.Accuracy(), [i([0, 1, 2])], [a(2, 3)])",
           "ValueError", "(3,)", "(2,)"),
    raises("accuracy-count-mismatch",
           "metric_of(metric.Accuracy(), [i([0, 1])], [a(2, 3), a(2, 3)])", "ValueError", "1",
           "2"),
    raises("mse-batch-mismatch", "metric_of(metric.MSE(), [a(4)], [a(3)])", "ValueError",
           "(4, 1)", "(3, 1)"),
    raises("mae-transposed", "metric_of(metric.MAE(), [a(2, 3)], [a(3, 2)])", "ValueError",
           "(2, 3)", "(3, 2)"),
    raises("rmse-row-against-column", "metric_of(metric.RMSE(), [a(4)], [a(1, 4)])",
           "ValueError", "(4, 1)", "(1, 4)"),
    raises("top-k-label-count", "metric_of(metric.TopKAccuracy(2), [i([0, 1, 2])], [a(2, 3)])",
           "ValueError", "3 labels", "(2, 3)"),
    raises("cross-entropy-label-out-of-range",
           "metric_of(metric.CrossEntropy(), [i([0, 5])], [a(2, 3) / 3])", "IndexError",
           "index 5", "size 3"),
    raises("unknown-metric", "metric.create('bogus')", "ValueError", "'bogus'"),
    gives("metric-without-updates-is-nan-as-mxnet", """
        name, value = metric.Accuracy().get()
        assert name == "accuracy" and onp.isnan(value)
        """),
    raises("softmax-ce-label-count", "loss.SoftmaxCrossEntropyLoss()(a(2, 3), i([0, 1, 2]))",
           "ValueError", "(3,)", "(2, 3)"),
    raises("l1-label-size", "loss.L1Loss()(a(2, 3), a(2, 4))", "ValueError", "size 8",
           "(2, 3)"),
    raises("sample-weight-shape", "loss.L2Loss()(a(2, 3), a(2, 3), a(4))", "ValueError",
           "(2, 3)", "(4,)"),
    gives("softmax-ce-clips-labels-out-of-range-as-mxnet", """
        pred = np.array([[0.0, 1.0, 2.0], [3.0, 1.0, 0.0]])
        sce = loss.SoftmaxCrossEntropyLoss()
        clipped = sce(pred, i([5, -1])).asnumpy()
        assert onp.allclose(clipped, sce(pred, i([2, 0])).asnumpy())
        logp = onp.log(onp.exp([[0, 1, 2], [3, 1, 0]]) /
                       onp.exp([[0, 1, 2], [3, 1, 0]]).sum(1, keepdims=True))
        assert onp.allclose(clipped, [-logp[0, 2], -logp[1, 0]], rtol=1e-5)
        """),
    gives("l2-reshapes-a-label-of-the-same-size-as-mxnet", """
        label = np.array(onp.arange(6.0).reshape(3, 2))
        got = loss.L2Loss()(np.zeros((2, 3)), label).asnumpy()
        assert onp.allclose(got, [0.5 * (0 + 1 + 4) / 3, 0.5 * (9 + 16 + 25) / 3])
        """),
    # --- kvstore ------------------------------------------------------------------------------
    raises("kvstore-unknown-type", "kvstore.create('bogus')", "ValueError", "'bogus'"),
    raises("kvstore-name-not-a-string", "kvstore.create(3)", "TypeError", "int"),
    raises("kvstore-push-other-shape", "store('w').push('w', a(4))", "ValueError", "'w'", "(3,)",
           "(4,)"),
    raises("kvstore-push-devices-disagree", "store().push('w', [a(3), a(4)])", "ValueError",
           "'w'", "(3,)", "(4,)"),
    raises("kvstore-pull-other-shape", "store('w').pull('w', out=a(4))", "ValueError", "'w'",
           "(3,)", "(4,)"),
    raises("kvstore-pull-unknown-key", "store('w').pull('v', out=a(3))", "ValueError", "'v'"),
    raises("kvstore-init-fewer-values", "store().init(['x', 'y'], [a(3)])", "ValueError",
           "2 keys", "1 values"),
    raises("kvstore-push-fewer-values", "store('x', 'y').push(['x', 'y'], [a(3)])",
           "ValueError", "2 keys", "1 values"),
    raises("kvstore-float-key", "store().init(3.5, a(3))", "TypeError", "float", "3.5"),
    raises("kvstore-optimizer-name", "store().set_optimizer('sgd')", "TypeError", "'sgd'"),
    gives("kvstore-list-keys-push-and-pull", """
        kv = store("x", "y")
        kv.push(["x", "y"], [[a(3), a(3)], a(3) * 5])
        out = [np.zeros(3), np.zeros(3)]
        kv.pull(["x", "y"], out=out)
        assert [o.asnumpy().tolist() for o in out] == [[2.0] * 3, [5.0] * 3]
        """),
]


@pytest.fixture(scope="module")
def sweep():
    return sweep_harness.outcomes_per_device(CASES, _PRELUDE)


@pytest.mark.parametrize("case", CASES)
def test_bad_input_on_cpu(sweep, case, request):
    sweep_harness._check(sweep, "cpu", request.node.callspec.id, case)


@requires_gpu
@pytest.mark.parametrize("case", [c for c in CASES if c.values[0][4]])
def test_bad_input_on_gpu(sweep, case, request):
    """The device-independent cases with gpu(0) as the default device: the same exception and
    message as on the cpu, and a usable process afterwards."""
    sweep_harness._check(sweep, "gpu", request.node.callspec.id, case)
