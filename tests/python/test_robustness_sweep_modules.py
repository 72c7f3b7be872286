"""A sweep with one bad input per case over the modules the first two sweeps leave out.

npx.image and gluon.data.vision.transforms, pymx.recordio, gluon.model_zoo, pymx.amp,
pymx.profiler, pymx.onnx.export_model (when onnx is installed), lr_scheduler, initializer and
optimizer constructors, SyncBatchNorm, the gluon.contrib Estimator, the kvstore's init of a key
it holds, np.linalg on singular and non-finite input and np.random with bad parameters. The
harness is test_robustness_sweep.py's: each case runs in one child interpreter and expects an
exception class with the values its message must name, or (`gives`) runs asserts; after every
case a small computation must still give the right answer.

Where NumPy answers non-finite input without raising (svd, eigh), a `gives` case pins the same
answer: NaN in the result, never a finite wrong value.
"""
import pytest

import test_robustness_sweep as sweep_harness
from conftest import requires_gpu

gives, raises = sweep_harness.gives, sweep_harness.raises

_PRELUDE = sweep_harness._PRELUDE + '''
from pymx import amp, initializer, kvstore, lr_scheduler, optimizer, profiler, recordio
from pymx.amp import loss_scaler
from pymx.gluon.contrib import estimator
from pymx.gluon.data.vision import transforms
from pymx.gluon.model_zoo import vision

def path(name):
    return os.path.join(TMP, name)

def image(height=8, width=8, dtype="uint8"):
    return np.ones((height, width, 3), dtype=dtype)

def reader(name):
    return recordio.MXRecordIO(path(name), "r")

def read_all(name):
    with reader(name) as record_file:
        return [record_file.read() for _ in range(3)]

def indexed(idx_name, rec_name="indexed.rec"):
    return recordio.MXIndexedRecordIO(path(idx_name), path(rec_name), "r")

def written_twice(key):
    record_file = recordio.MXIndexedRecordIO(path("twice.idx"), path("twice.rec"), "w")
    try:
        record_file.write_idx(key, b"first")
        record_file.write_idx(key, b"second")
    finally:
        record_file.close()

def exported_dense():
    block = nn.HybridSequential()
    block.add(nn.Dense(3, in_units=4))
    block.initialize()
    block.hybridize()
    block(a(2, 4))
    return block

def store(*keys):
    kv = kvstore.create("local")
    for key in keys:
        kv.init(key, a(3))
    return kv

def trained_once(trainer, block):
    with autograd.record():
        loss = block(a(1, 4)).sum()
    loss.backward()
    trainer.step(1)

def fit(train_data, **kwargs):
    return estimator.Estimator(dense(), loss=gluon.loss.L2Loss()).fit(train_data, **kwargs)

# A record file of two records, one truncated inside the second record's payload, one cut
# inside its header, and one whose first magic word is overwritten.
with recordio.MXRecordIO(path("two.rec"), "w") as record_file:
    record_file.write(b"hello")
    record_file.write(b"world!!")
with open(path("two.rec"), "rb") as source:
    TWO = source.read()
for name, data in [("cut-payload.rec", TWO[:-3]), ("cut-header.rec", TWO[:-14]),
                   ("bad-magic.rec", b"\\x00" * 4 + TWO[4:])]:
    with open(path(name), "wb") as target:
        target.write(data)
INDEXED = recordio.MXIndexedRecordIO(path("indexed.idx"), path("indexed.rec"), "w")
INDEXED.write_idx(0, b"zero")
INDEXED.write_idx(1, b"one")
INDEXED.close()
with open(path("past-the-end.idx"), "w") as target:
    target.write("0\\t0\\n1\\t9999\\n")
with open(path("garbage.idx"), "w") as target:
    target.write("zz\\tyy\\n")
DENSE_EXPORT = exported_dense()
DENSE_EXPORT.export(path("exported"))
'''

CASES = [
    # --- npx.image -----------------------------------------------------------------------------
    raises("image-to-tensor-2d", "npx.image.to_tensor(np.ones((8, 8), dtype='uint8'))",
           "ValueError", "(8, 8)"),
    raises("image-resize-zero-size", "npx.image.resize(image(), size=(0, 4))", "ValueError",
           "(0, 4)"),
    raises("image-resize-negative-size", "npx.image.resize(image(), size=(-1, 4))",
           "ValueError", "(-1, 4)"),
    raises("image-resize-unknown-interpolation", "npx.image.resize(image(), size=4, interp=99)",
           "ValueError", "99"),
    raises("image-crop-larger-than-image", "npx.image.crop(image(), 0, 0, 10, 10)",
           "ValueError", "width=10", "height=10", "8x8"),
    raises("image-crop-negative-corner", "npx.image.crop(image(), -1, 0, 4, 4)", "ValueError",
           "x=-1"),
    raises("image-crop-zero-width", "npx.image.crop(image(), 0, 0, 0, 4)", "ValueError",
           "width=0"),
    raises("image-normalize-zero-std",
           "npx.image.normalize(a(3, 4, 4), mean=(0.1, 0.2, 0.3), std=(0, 1, 1))", "ValueError",
           "std"),
    raises("image-normalize-channel-count",
           "npx.image.normalize(a(4, 4, 3), mean=(0.1, 0.2, 0.3), std=(1, 1, 1))",
           "ValueError", "3 values", "4 channels"),
    raises("image-flip-vector", "npx.image.flip_left_right(np.ones((8,), dtype='uint8'))",
           "ValueError", "(8,)"),
    gives("image-to-tensor-of-an-empty-image", """
        assert npx.image.to_tensor(np.ones((0, 8, 3), dtype="uint8")).shape == (3, 0, 8)
        """),
    # --- gluon.data.vision.transforms ----------------------------------------------------------
    raises("center-crop-zero", "transforms.CenterCrop(0)(image())", "ValueError", "width=0"),
    raises("resize-zero", "transforms.Resize(0)(image())", "ValueError", "(0, 0)"),
    raises("crop-resize-larger-than-image", "transforms.CropResize(0, 0, 10, 10)(image())",
           "ValueError", "width=10", "8x8"),
    raises("random-resized-crop-reversed-scale",
           "transforms.RandomResizedCrop(4, scale=(0.9, 0.1))", "ValueError", "scale",
           "(0.9, 0.1)"),
    raises("random-resized-crop-negative-scale",
           "transforms.RandomResizedCrop(4, scale=(-1, 0.5))", "ValueError", "(-1, 0.5)"),
    raises("random-resized-crop-reversed-ratio", "transforms.RandomResizedCrop(4, ratio=(2, 0.5))",
           "ValueError", "ratio", "(2, 0.5)"),
    raises("random-resized-crop-zero-size", "transforms.RandomResizedCrop(0)(image())",
           "ValueError", "(0, 0)"),
    raises("random-brightness-negative", "transforms.RandomBrightness(-1)", "ValueError",
           "brightness", "-1"),
    raises("random-contrast-negative", "transforms.RandomContrast(-0.5)", "ValueError",
           "contrast", "-0.5"),
    raises("random-saturation-not-a-number", "transforms.RandomSaturation('x')", "ValueError",
           "saturation", "'x'"),
    raises("random-hue-negative", "transforms.RandomHue(-0.1)", "ValueError", "hue", "-0.1"),
    raises("color-jitter-negative-hue", "transforms.RandomColorJitter(hue=-0.2)", "ValueError",
           "hue", "-0.2"),
    raises("random-flip-vector", "transforms.RandomFlipLeftRight(p=1)(np.ones((8,), 'uint8'))",
           "ValueError", "(8,)"),
    raises("cast-unknown-dtype", "transforms.Cast('bogus')(image())", "TypeError", "bogus"),
    gives("center-crop-larger-than-image-resizes-up-as-mxnet", """
        assert transforms.CenterCrop(10)(image()).shape == (10, 10, 3)
        assert transforms.RandomCrop(10)(image()).shape == (10, 10, 3)
        """),
    # --- recordio ------------------------------------------------------------------------------
    raises("record-write-into-missing-directory",
           "recordio.MXRecordIO(path('nowhere/x.rec'), 'w')", "FileNotFoundError", "nowhere",
           gpu=False),
    raises("record-read-missing-file", "reader('absent.rec')", "FileNotFoundError",
           "absent.rec", gpu=False),
    raises("record-unknown-flag", "recordio.MXRecordIO(path('two.rec'), 'a')", "ValueError",
           "'a'", gpu=False),
    raises("record-truncated-payload", "read_all('cut-payload.rec')", "ValueError",
           "cut-payload.rec", "byte 16", "5 left", gpu=False),
    raises("record-truncated-header", "read_all('cut-header.rec')", "ValueError",
           "cut-header.rec", "part header", gpu=False),
    raises("record-bad-magic", "reader('bad-magic.rec').read()", "ValueError", "bad-magic.rec",
           "magic", gpu=False),
    raises("record-write-on-a-reader", "reader('two.rec').write(b'x')", "ValueError",
           "two.rec", "'r'", gpu=False),
    gives("record-read-past-the-end-returns-none-as-mxnet", """
        assert read_all("two.rec") == [b"hello", b"world!!", None]
        record_file = reader("two.rec")
        record_file.close()
        try:
            record_file.read()
        except ValueError as e:
            assert "closed" in str(e), str(e)
        else:
            raise AssertionError("reading a closed file did not raise")
        """, gpu=False),
    raises("record-index-unknown-key", "indexed('indexed.idx').read_idx(5)", "KeyError", "5",
           "indexed.idx", gpu=False),
    raises("record-index-past-the-end", "indexed('past-the-end.idx').read_idx(1)", "ValueError",
           "past-the-end.idx", "9999", gpu=False),
    raises("record-index-garbage", "indexed('garbage.idx')", "ValueError", "garbage.idx",
           "line 1", gpu=False),
    raises("record-index-missing", "indexed('absent.idx')", "FileNotFoundError", "absent.idx",
           gpu=False),
    raises("record-index-key-written-twice", "written_twice(0)", "ValueError", "Key 0",
           gpu=False),
    raises("record-unpack-short", "recordio.unpack(b'abc')", "ValueError", "3 bytes",
           gpu=False),
    raises("record-unpack-img-not-an-image",
           "recordio.unpack_img(recordio.pack(recordio.IRHeader(0, 1.0, 7, 0), b'notimg'))",
           "ValueError", "id 7", gpu=False),
    # --- model zoo -----------------------------------------------------------------------------
    raises("model-zoo-unknown-name", "vision.get_model('resnet9000')", "ValueError",
           "resnet9000", "resnet18_v1", gpu=False),
    raises("model-zoo-pretrained-without-a-file",
           "vision.get_model('resnet18_v1', pretrained=True, root=path('models'))",
           "FileNotFoundError", "resnet18_v1", "does not download", gpu=False),
    # --- profiler ------------------------------------------------------------------------------
    raises("profiler-unknown-option", "profiler.set_config(bogus=True)", "ValueError", "bogus",
           "profile_all"),
    raises("profiler-flag-not-a-bool", "profiler.set_config(profile_all='yes')", "ValueError",
           "profile_all", "'yes'"),
    raises("profiler-flag-two", "profiler.set_config(aggregate_stats=2)", "ValueError",
           "aggregate_stats", "2"),
    raises("profiler-dump-period-text", "profiler.set_config(dump_period='x')", "ValueError",
           "dump_period", "'x'"),
    raises("profiler-filename-not-a-path", "profiler.set_config(filename=5)", "ValueError",
           "filename", "5"),
    raises("profiler-unknown-state", "profiler.set_state('go')", "ValueError", "'go'"),
    raises("profiler-unknown-process", "profiler.set_state('run', profile_process='server')",
           "ValueError", "'server'"),
    raises("profiler-dumps-unknown-format", "profiler.dumps(format='xml')", "ValueError",
           "'xml'"),
    raises("profiler-dumps-unknown-sort", "profiler.dumps(sort_by='bogus')", "ValueError",
           "'bogus'"),
    gives("profiler-flags-parse-as-mxnet-and-dump-without-records", """
        profiler.set_config(profile_all="False", profile_symbolic="0", profile_imperative=False,
                            filename=path("nothing.json"))
        profiler.set_state("run")
        (a(3) + 1).wait_to_read()  # no operator flag is on: nothing is recorded
        profiler.set_state("stop")
        profiler.dump()
        with open(path("nothing.json")) as source:
            json.load(source)  # a valid trace, however empty
        profiler.set_config(profile_symbolic=True, profile_imperative=True)
        """, gpu=False),
    gives("profiler-dump-into-missing-directory", """
        profiler.set_config(profile_all=True, filename=path("nowhere/profile.json"))
        profiler.set_state("run")
        (a(3) + 1).wait_to_read()
        profiler.set_state("stop")
        try:
            profiler.dump()
        except FileNotFoundError as e:
            assert "nowhere/profile.json" in str(e), str(e)
        else:
            raise AssertionError("dump into a missing directory did not raise")
        profiler.set_config(profile_all=False, filename=path("profile.json"))
        profiler.dump()  # the records were kept: a dump to a good path still works
        assert os.path.getsize(path("profile.json")) > 0
        """, gpu=False),
    # --- schedules, initializers, optimizers ---------------------------------------------------
    raises("poly-scheduler-negative-max-update", "lr_scheduler.PolyScheduler(-1)", "ValueError",
           "max_update", "-1", gpu=False),
    raises("cosine-scheduler-zero-max-update", "lr_scheduler.CosineScheduler(0)", "ValueError",
           "max_update", "0", gpu=False),
    raises("cosine-scheduler-final-above-base",
           "lr_scheduler.CosineScheduler(10, base_lr=0.1, final_lr=1.0)", "ValueError", "0.1",
           "1.0", gpu=False),
    raises("multi-factor-scheduler-step-zero", "lr_scheduler.MultiFactorScheduler([0, 3])",
           "ValueError", "[0, 3]", gpu=False),
    raises("multi-factor-scheduler-growing-factor",
           "lr_scheduler.MultiFactorScheduler([1, 3], factor=2)", "ValueError", "factor", "2",
           gpu=False),
    raises("factor-scheduler-negative-warmup", "lr_scheduler.FactorScheduler(2, warmup_steps=-1)",
           "ValueError", "warmup_steps", "-1", gpu=False),
    raises("initializer-unknown-name", "initializer.create('bogus')", "ValueError", "'bogus'",
           "xavier", gpu=False),
    raises("xavier-unknown-rnd-type", "initializer.Xavier(rnd_type='bogus')", "ValueError",
           "rnd_type", "'bogus'", gpu=False),
    raises("xavier-unknown-factor-type", "initializer.Xavier(factor_type='bogus')", "ValueError",
           "factor_type", "'bogus'", gpu=False),
    raises("orthogonal-unknown-rand-type", "initializer.Orthogonal(rand_type='bogus')",
           "ValueError", "rand_type", "'bogus'", gpu=False),
    raises("mixed-patterns-and-initializers-differ", "initializer.Mixed(['.*'], [])",
           "ValueError", "1 patterns", "0 initializers", gpu=False),
    raises("bilinear-on-a-matrix",
           "nn.Dense(2, in_units=2, weight_initializer=initializer.Bilinear()).initialize()",
           "ValueError", "Bilinear", "(2, 2)"),
    raises("optimizer-unknown-name", "optimizer.create('bogus')", "ValueError", "'bogus'",
           "sgd", gpu=False),
    raises("optimizer-unknown-argument", "optimizer.SGD(bogus=1)", "TypeError", "bogus",
           gpu=False),
    raises("optimizer-scheduler-not-callable", "optimizer.SGD(lr_scheduler=5)", "TypeError",
           "lr_scheduler", "int", gpu=False),
    # --- SyncBatchNorm, Estimator --------------------------------------------------------------
    raises("sync-batch-norm-zero-devices", "nn.SyncBatchNorm(num_devices=0)", "ValueError",
           "num_devices", "0"),
    raises("sync-batch-norm-negative-devices", "nn.SyncBatchNorm(num_devices=-2)", "ValueError",
           "-2"),
    raises("sync-batch-norm-fractional-devices", "nn.SyncBatchNorm(num_devices=1.5)",
           "ValueError", "1.5"),
    raises("sync-batch-norm-devices-as-text", "nn.SyncBatchNorm(num_devices='2')", "ValueError",
           "'2'"),
    raises("estimator-net-not-a-block", "estimator.Estimator(5, loss=gluon.loss.L2Loss())",
           "ValueError", "net", "int", gpu=False),
    raises("estimator-no-loss", "estimator.Estimator(dense(), loss=None)", "ValueError", "loss",
           "None", gpu=False),
    raises("estimator-metrics-not-metrics",
           "estimator.Estimator(dense(), loss=gluon.loss.L2Loss(), train_metrics=5)",
           "ValueError", "EvalMetric", "int", gpu=False),
    raises("estimator-trainer-not-a-trainer",
           "estimator.Estimator(dense(), loss=gluon.loss.L2Loss(), trainer=5)", "ValueError",
           "trainer", "int", gpu=False),
    raises("estimator-device-not-a-device",
           "estimator.Estimator(dense(), loss=gluon.loss.L2Loss(), device=5)", "ValueError",
           "device", "5", gpu=False),
    raises("estimator-fit-on-a-list", "fit([(a(2, 4), a(2, 3))], epochs=1)", "ValueError",
           "DataLoader", "list", gpu=False),
    # --- kvstore -------------------------------------------------------------------------------
    raises("kvstore-init-of-a-held-key", "store('w').init('w', a(3))", "ValueError", "'w'",
           "already"),
    raises("kvstore-init-of-a-pushed-key",
           "[kv := store(), kv.push('v', a(3)), kv.init('v', a(3))]", "ValueError", "'v'",
           "already"),
    gives("kvstore-broadcast-sets-a-held-key-and-trainer-sets-up-again", """
        kv = store("w")
        out = np.zeros(3)
        kv.broadcast("w", a(3) * 4, out=out)
        assert out.asnumpy().tolist() == [4.0, 4.0, 4.0]
        # A Trainer given a store sets its parameters up again after initialize(force_reinit)
        block = dense()
        trainer = gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 1.0},
                                kvstore=kvstore.create("local"), update_on_kvstore=True)
        trained_once(trainer, block)
        block.initialize(init="zeros", force_reinit=True)
        trained_once(trainer, block)  # the store took the zeros: one step of lr 1 from zero
        assert (block.weight.data().asnumpy() == -1.0).all()
        """),
    # --- np.linalg -----------------------------------------------------------------------------
    raises("inv-singular", "np.linalg.inv(np.zeros((2, 2)))", "LinAlgError", "singular"),
    raises("inv-non-finite", "np.linalg.inv(f([[onp.nan, 1.0], [1.0, 1.0]]))", "LinAlgError",
           "singular"),
    raises("solve-singular", "np.linalg.solve(np.zeros((2, 2)), a(2))", "LinAlgError",
           "singular"),
    raises("cholesky-not-positive-definite", "np.linalg.cholesky(f([[1.0, 2.0], [2.0, 1.0]]))",
           "LinAlgError", "positive definite"),
    raises("matrix-power-negative-of-singular", "np.linalg.matrix_power(np.zeros((2, 2)), -1)",
           "LinAlgError", "singular"),
    raises("tensorinv-not-square", "np.linalg.tensorinv(a(2, 3), ind=1)", "ValueError", "2",
           "3"),
    gives("svd-and-eigh-of-non-finite-input-give-nan-as-numpy", """
        singular = np.linalg.svd(f([[onp.inf, 1.0], [1.0, 1.0]]))[1].asnumpy()
        assert onp.isnan(singular).all(), singular
        vectors = np.linalg.eigh(f([[onp.nan, 1.0], [1.0, 1.0]]))[1].asnumpy()
        assert onp.isnan(vectors).all(), vectors
        """),
    # --- np.random -----------------------------------------------------------------------------
    raises("logistic-negative-scale", "np.random.logistic(0, -1, size=2)", "ValueError",
           "scale", "-1"),
    raises("gumbel-negative-scale", "np.random.gumbel(0, -1, size=2)", "ValueError", "-1"),
    raises("laplace-negative-scale", "np.random.laplace(0, -1, size=2)", "ValueError", "-1"),
    raises("lognormal-negative-sigma", "np.random.lognormal(0, -1, size=2)", "ValueError",
           "sigma", "-1"),
    raises("rayleigh-negative-scale", "np.random.rayleigh(-1, size=2)", "ValueError", "-1"),
    raises("weibull-negative-a", "np.random.weibull(-1, size=2)", "ValueError", "-1"),
    raises("pareto-negative-a", "np.random.pareto(-1, size=2)", "ValueError", "-1"),
    raises("power-negative-a", "np.random.power(-1, size=2)", "ValueError", "-1"),
    raises("chisquare-negative-df", "np.random.chisquare(-1, size=2)", "ValueError", "-1"),
    raises("negative-binomial-p-above-one", "np.random.negative_binomial(3, 1.5, size=2)",
           "ValueError", "1.5"),
    raises("multinomial-negative-n", "np.random.multinomial(-3, [0.5, 0.5])", "ValueError",
           "-3"),
    raises("multinomial-p-summing-above-one", "np.random.multinomial(3, [0.7, 0.7, 0.1])",
           "ValueError", "1.4"),
    raises("multivariate-normal-cov-shape",
           "np.random.multivariate_normal(np.zeros(2), np.ones((3, 3)))", "ValueError", "(2,)",
           "(3, 3)"),
    raises("permutation-negative", "np.random.permutation(-3)", "ValueError", "-3"),
    raises("shuffle-not-an-array", "np.random.shuffle(5)", "TypeError", "int"),
    # --- amp: last, since amp.init changes this process for good -------------------------------
    raises("amp-init-unknown-dtype", "amp.init(target_dtype='int8')", "ValueError", "'int8'",
           gpu=False),
    raises("amp-convert-not-a-block", "amp.convert_hybrid_block(5, a(1, 4))", "TypeError",
           "HybridBlock", "int", gpu=False),
    raises("amp-convert-unknown-dtype",
           "amp.convert_hybrid_block(exported_dense(), a(2, 4), target_dtype='float64')",
           "ValueError", "'float64'", gpu=False),
    raises("amp-convert-unknown-fp32-op",
           "amp.convert_hybrid_block(exported_dense(), a(2, 4), fp32_ops=['bogus_op'])",
           "ValueError", "bogus_op", gpu=False),
    raises("amp-convert-bad-data-example", "amp.convert_hybrid_block(exported_dense(), 'x')",
           "TypeError", "data_example", gpu=False),
    raises("amp-init-trainer-not-a-trainer", "amp.init_trainer(5)", "TypeError", "Trainer",
           "int", gpu=False),
    raises("amp-unscale-not-a-trainer", "amp.unscale(5)", "TypeError", "Trainer", "int",
           gpu=False),
    raises("amp-loss-scaler-negative-scale", "loss_scaler.LossScaler(init_scale=-1)",
           "ValueError", "init_scale", "-1", gpu=False),
    raises("amp-init-twice-with-another-dtype",
           "[amp.init(), amp.init(), amp.init(target_dtype='bfloat16')]", "RuntimeError",
           "'float16'", "'bfloat16'", gpu=False),
]

ONNX_CASES = [
    raises("onnx-missing-symbol-file",
           "onnx_export(path('absent-symbol.json'), path('exported-0000.params'), [(2, 4)])",
           "FileNotFoundError", "absent-symbol.json"),
    raises("onnx-missing-params-file",
           "onnx_export(path('exported-symbol.json'), path('absent.params'), [(2, 4)])",
           "FileNotFoundError", "absent.params"),
    raises("onnx-into-missing-directory",
           "onnx_export(path('exported-symbol.json'), path('exported-0000.params'), [(2, 4)], "
           "'nowhere/model.onnx')", "FileNotFoundError", "nowhere"),
    raises("onnx-input-shape-the-weights-do-not-fit",
           "onnx_export(path('exported-symbol.json'), path('exported-0000.params'), [(2, 5)])",
           "ValueError", "'data': (2, 5)", "Gemm"),
    raises("onnx-negative-input-shape",
           "onnx_export(path('exported-symbol.json'), path('exported-0000.params'), [(-2, 4)])",
           "ValueError", "(-2, 4)"),
    raises("onnx-input-shape-count",
           "onnx_export(path('exported-symbol.json'), path('exported-0000.params'), "
           "[(2, 4), (1,)])", "ValueError", "2 shape(s)", "['data']"),
    raises("onnx-unknown-input-dtype",
           "onnx_export(path('exported-symbol.json'), path('exported-0000.params'), [(2, 4)], "
           "in_types='bogus')", "TypeError", "bogus"),
    raises("onnx-unsupported-op-names-the-node",
           "onnx_export(path('renamed-symbol.json'), path('exported-0000.params'), [(2, 4)])",
           "NotImplementedError", "'fully_connected0'", "'_bogus_op'"),
    gives("onnx-failed-export-keeps-the-previous-file", """
        onnx_export(path("exported-symbol.json"), path("exported-0000.params"), [(2, 4)])
        with open(path("model.onnx"), "rb") as source:
            before = source.read()
        try:
            onnx_export(path("exported-symbol.json"), path("exported-0000.params"), [(2, 5)])
        except ValueError:
            pass
        with open(path("model.onnx"), "rb") as source:
            assert source.read() == before
        """),
]

_ONNX_PRELUDE = '''
from pymx import onnx as pymx_onnx

def onnx_export(symbol, params, shapes, target="model.onnx", **kwargs):
    return pymx_onnx.export_model(symbol, params, shapes, onnx_file_path=path(target), **kwargs)

with open(path("exported-symbol.json")) as source:
    document = json.load(source)
next(node for node in document["nodes"] if node["op"] != "null")["op"] = "_bogus_op"
with open(path("renamed-symbol.json"), "w") as target:
    json.dump(document, target)
'''


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


@pytest.fixture(scope="module")
def onnx_sweep():
    pytest.importorskip("onnx")
    cases = {param.id: param.values[0][:2] for param in ONNX_CASES}
    outcomes = sweep_harness._run_cases(cases, "cpu", _PRELUDE + _ONNX_PRELUDE)
    return lambda device: outcomes


@pytest.mark.parametrize("case", ONNX_CASES)
def test_onnx_export_bad_input(onnx_sweep, case, request):
    sweep_harness._check(onnx_sweep, "cpu", request.node.callspec.id, case)
