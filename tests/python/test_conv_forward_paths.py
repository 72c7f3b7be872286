"""The forward paths of npx.convolution on the CPU against a float64 NumPy reference: the direct
kernel with stride 2 across (each input row split into its even and odd columns, Note [Strided
direct convolution], conv_direct.cc) and any stride down; the direct kernel for output rows 7 to
15 wide, vectorised over output channels (Note [Narrow direct convolution],
conv_direct_narrow.cc); im2col + GEMM with several images' columns side by side in one product
(Note [Images side by side], nn_convolution.cc). Odd and even input sizes, pad 0/1/2/3, output
widths below, at and above the AVX-512 vector (16) and the narrow kernel's tiles (14 and 7),
channels not a multiple of the channel blocks, batches of 0, 1 and more than one block of images,
bias and the fused relu (NaN kept), groups, dilation, channel-last, every float dtype (float16
and bfloat16 run through float32); the naive engine equals the threaded one bitwise; GPU against
CPU."""
import itertools

import numpy as onp
import pytest

import pymx
from pymx import npx
from pymx._op import invoke
from pymx.ndarray import from_numpy
from conftest import assert_engines_agree, requires_gpu, run_python

RNG = onp.random.default_rng(7)


def ref_conv2d(x, w, b, stride, pad, dilate=(1, 1), groups=1):
    """Channel-first 2-D convolution in float64: y[n, f] = sum over c, ky, kx of
    x_pad[n, c, oy * sh + ky * dh, ox * sw + kx * dw] * w[f, c, ky, kx] (+ b[f])."""
    x, w = x.astype(onp.float64), w.astype(onp.float64)
    (sh, sw), (ph, pw), (dh, dw) = stride, pad, dilate
    kh, kw = w.shape[2:]
    xp = onp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    y = onp.zeros((x.shape[0], w.shape[0], oh, ow))
    for ky, kx in itertools.product(range(kh), range(kw)):
        window = xp[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh,
                    kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
        for g in range(groups):
            y[:, g * fg:(g + 1) * fg] += onp.einsum(
                "nchw,fc->nfhw", window[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg, :, ky, kx])
    if b is not None:
        y += b.astype(onp.float64)[None, :, None, None]
    return y


def pymx_conv(x, w, b, dtype, stride, pad, dilate=(1, 1), groups=1, act_type=None,
              device=None):
    device = device or pymx.cpu(0)
    inputs = [from_numpy(a, dtype=dtype, device=device) for a in (x, w)]
    if b is not None:
        inputs.append(from_numpy(b, dtype=dtype, device=device))
    y = npx.convolution(*inputs, kernel=w.shape[2:], stride=stride, pad=pad, dilate=dilate,
                        num_filter=w.shape[0], num_group=groups, no_bias=b is None,
                        act_type=act_type)
    return y.asnumpy().astype(onp.float64)


def check(x_shape, filters, kernel, stride, pad, dilate=(1, 1), groups=1, use_bias=True,
          act_type=None, dtype="float32"):
    x = RNG.standard_normal(x_shape)
    w = RNG.standard_normal((filters, x_shape[1] // groups) + tuple(kernel))
    b = RNG.standard_normal(filters) if use_bias else None
    if dtype in ("float16", "bfloat16"):  # the reference sees the rounded inputs
        x, w = (from_numpy(a, dtype=dtype).asnumpy().astype(onp.float64) for a in (x, w))
        if use_bias:
            b = from_numpy(b, dtype=dtype).asnumpy().astype(onp.float64)
    expected = ref_conv2d(x, w, b, stride, pad, dilate, groups)
    if act_type == "relu":
        expected = onp.maximum(expected, 0)
    got = pymx_conv(x, w, b, dtype, stride, pad, dilate, groups, act_type)
    assert got.shape == expected.shape
    # Sums of K = C * kh * kw products of standard normals: errors grow like sqrt(K).
    taps = (x_shape[1] // groups) * kernel[0] * kernel[1]
    rtol, atol = {"float32": (1e-5, 2e-6), "float64": (1e-12, 1e-12),
                  "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}[dtype]
    onp.testing.assert_allclose(got, expected, rtol=rtol, atol=atol * onp.sqrt(taps) * 4)


# The direct kernel with stride 2 across: (x shape, filters, kernel, stride, pad). Output widths
# of 15 (below the vector: im2col + GEMM), 16 (one vector), 17 (the last vector overlaps the one
# before), 28 and 112 (resnet's), from odd and even input widths.
STRIDED_CASES = [
    ((2, 5, 9, 33), 11, (3, 3), (2, 2), (1, 1)),       # width 33 -> 17 outputs, odd
    ((1, 3, 15, 34), 9, (3, 3), (2, 2), (1, 1)),       # width 34 -> 17, even
    ((3, 4, 8, 32), 8, (3, 3), (2, 2), (1, 1)),        # exactly one vector per row
    ((1, 2, 7, 29), 3, (3, 3), (2, 2), (1, 1)),        # 15 outputs: below the vector
    ((1, 3, 23, 61), 64, (7, 7), (2, 2), (3, 3)),      # the stem's kernel, pad 3, 31 outputs
    ((2, 6, 12, 36), 13, (3, 3), (2, 2), (0, 0)),      # no padding: still split into phases
    ((1, 16, 11, 56), 20, (3, 3), (2, 2), (1, 1)),     # resnet's 3x3/2 at 56: 28 outputs
    ((2, 3, 10, 40), 7, (4, 4), (2, 2), (1, 1)),       # an even kernel: two taps per phase
    ((1, 4, 13, 36), 9, (3, 2), (3, 2), (2, 0)),       # stride 3 down, 2 across
    ((2, 3, 11, 20), 5, (3, 3), (3, 1), (1, 1)),       # stride 3 down, 1 across
    ((1, 10, 9, 36), 12, (1, 1), (2, 2), (0, 0)),      # a 1-wide kernel: im2col + GEMM
]


@pytest.mark.parametrize("case", STRIDED_CASES)
@pytest.mark.parametrize("act_type", [None, "relu"])
def test_strided_direct_convolution_matches_numpy(case, act_type):
    check(*case, act_type=act_type)


@pytest.mark.parametrize("case", [STRIDED_CASES[0], STRIDED_CASES[4]])
def test_strided_direct_convolution_without_bias(case):
    check(*case, use_bias=False)


# The direct kernel vectorised over output channels (AVX-512), for output rows 7 to 15 wide:
# (x shape, filters, kernel, stride, pad). Channel counts not a multiple of the 32- or 64-channel
# block, rows of 14 and 7 (one tile), 15 and 8 to 13 (the last tile overlaps), stride 2 across and
# 3 down, no padding; a 1x1 stride-2 downsample, which the kernel leaves to the GEMM.
NARROW_CASES = [
    ((2, 12, 14, 14), 40, (3, 3), (1, 1), (1, 1)),    # resnet's 3x3 at 14x14, smaller
    ((3, 9, 7, 7), 70, (3, 3), (1, 1), (1, 1)),       # at 7x7: blocks of 64 channels
    ((3, 5, 28, 28), 33, (3, 3), (2, 2), (1, 1)),     # 3x3/2 from 28 to 14
    ((2, 6, 15, 15), 17, (3, 3), (2, 2), (1, 1)),     # odd input, 8 outputs: tiles overlap
    ((1, 4, 13, 17), 9, (3, 3), (1, 1), (0, 0)),      # 15 outputs, no padding
    ((2, 8, 28, 28), 20, (1, 1), (2, 2), (0, 0)),     # 1x1/2 downsample to 14: GEMM instead
    ((1, 3, 20, 30), 8, (3, 3), (3, 2), (1, 1)),      # stride 3 down, 2 across: 15 outputs
    ((1, 4, 12, 12), 5, (5, 5), (1, 1), (2, 2)),      # 5x5, pad 2: 12 outputs
    ((1, 2, 7, 16), 3, (3, 4), (1, 1), (3, 0)),       # uneven kernel and padding: 13 outputs
]


@pytest.mark.parametrize("case", NARROW_CASES)
@pytest.mark.parametrize("act_type", [None, "relu"])
def test_narrow_direct_convolution_matches_numpy(case, act_type):
    check(*case, act_type=act_type)


@pytest.mark.parametrize("case", [NARROW_CASES[1], NARROW_CASES[2]])
def test_narrow_direct_convolution_without_bias(case):
    check(*case, use_bias=False)


# The narrow kernel with many input channels (not a multiple of 8, 16 or 32), at batch 1 and
# more: 7 and 14 rows, 15 rows, stride 2, a 5x5 kernel with overlapping tiles.
WIDE_INPUT_NARROW_CASES = [
    ((1, 33, 7, 7), 70, (3, 3), (1, 1), (1, 1)),      # 7x7, 64-channel blocks
    ((2, 61, 14, 14), 40, (3, 3), (1, 1), (1, 1)),    # 14x14, 32-channel blocks
    ((1, 45, 28, 28), 33, (3, 3), (2, 2), (1, 1)),    # 3x3/2 from 28 to 14
    ((1, 30, 15, 15), 20, (3, 3), (1, 1), (1, 1)),    # 15 rows and columns
    ((3, 12, 9, 11), 65, (5, 5), (1, 1), (2, 2)),     # 5x5, 9 outputs in 2 tiles
    # a padded input of more than 2^18 floats (5 x 210 x 16 x 16), which the intra-op threads
    # copy (the smaller ones above are copied by the calling thread)
    ((5, 210, 14, 14), 40, (3, 3), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("case", WIDE_INPUT_NARROW_CASES)
@pytest.mark.parametrize("act_type", [None, "relu"])
def test_narrow_convolution_many_input_channels_matches_numpy(case, act_type):
    check(*case, act_type=act_type)


WIDE_INPUT_NARROW_SCRIPT = """
import numpy as onp
from pymx import npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(5)
results = {}
for name, shape, filters, stride in [("7x7", (1, 33, 7, 7), 70, 1),
                                     ("14x14", (1, 61, 14, 14), 40, 1),
                                     ("strided", (2, 45, 28, 28), 33, 2),
                                     ("padded by the threads", (5, 210, 14, 14), 40, 1)]:
    x = from_numpy(rng.standard_normal(shape), dtype="float32")
    w = from_numpy(rng.standard_normal((filters, shape[1], 3, 3)), dtype="float32")
    b = from_numpy(rng.standard_normal(filters), dtype="float32")
    results[name] = npx.convolution(x, w, b, kernel=(3, 3), stride=(stride, stride),
                                    pad=(1, 1), num_filter=filters).asnumpy()
onp.savez(OUT, **results)
"""


def test_narrow_convolution_many_input_channels_independent_of_thread_count(tmp_path):
    outputs = []
    for cpus in ("{0}", "set(list(os.sched_getaffinity(0))[:2])"):
        path = str(tmp_path / f"{len(outputs)}.npz")
        done = run_python(f"import os\nos.sched_setaffinity(0, {cpus})\nOUT = {path!r}\n"
                          + WIDE_INPUT_NARROW_SCRIPT)
        assert done.returncode == 0, done.stderr
        outputs.append(onp.load(path))
    one, two = outputs
    for key in one.files:
        onp.testing.assert_array_equal(two[key], one[key], err_msg=key)


def test_narrow_convolution_many_input_channels_naive_engine_equals_threaded(tmp_path):
    assert_engines_agree(WIDE_INPUT_NARROW_SCRIPT, tmp_path)


@pytest.mark.parametrize("shape, stride", [((2, 3, 14, 14), 1), ((1, 3, 9, 9), 1),
                                           ((2, 3, 30, 30), 2), ((1, 3, 33, 40), 2)])
def test_relu_keeps_nan(shape, stride):
    """A NaN input makes NaN outputs under its window, which the fused relu keeps (as
    std::max(v, 0) and the GEMM path do); the other outputs are unaffected."""
    x = RNG.standard_normal(shape)
    x[0, 1, 4, 5] = onp.nan
    w = RNG.standard_normal((6, 3, 3, 3))
    got = pymx_conv(x, w, None, "float32", (stride, stride), (1, 1), act_type="relu")
    expected = onp.maximum(ref_conv2d(x, w, None, (stride, stride), (1, 1)), 0)
    assert onp.isnan(got).sum() > 0
    onp.testing.assert_array_equal(onp.isnan(got), onp.isnan(expected))
    ok = ~onp.isnan(expected)
    onp.testing.assert_allclose(got[ok], expected[ok], rtol=1e-5, atol=1e-4)


# Images side by side (float64, and float32 below 7 outputs wide, with groups or dilation):
# outputs of at most 100 (7x7 and below), or any number below 256 when the
# batch is smaller than the thread count. (x shape, filters, kernel, stride, pad, dilate, groups)
SIDE_BY_SIDE_CASES = [
    ((8, 12, 7, 7), 20, (3, 3), (1, 1), (1, 1), (1, 1), 1),     # resnet's 7x7 layer, smaller
    ((3, 10, 14, 14), 9, (3, 3), (2, 2), (1, 1), (1, 1), 1),    # 3x3/2 to 7x7, odd batch
    ((25, 4, 5, 5), 6, (3, 3), (1, 1), (1, 1), (1, 1), 1),      # 25 images, blocks of 40
    ((45, 3, 6, 6), 5, (2, 2), (1, 1), (0, 0), (1, 1), 1),      # 25 outputs: blocks of 40 and 5
    ((2, 8, 14, 14), 10, (1, 1), (2, 2), (0, 0), (1, 1), 1),    # 1x1/2 downsample to 7x7
    ((1, 6, 16, 16), 12, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # batch 1, 256 outputs: per image
    ((1, 6, 14, 14), 12, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # batch 1, 196 outputs
    ((4, 6, 9, 9), 8, (3, 3), (1, 1), (2, 2), (2, 2), 2),       # dilation and groups
    ((5, 3, 3, 4), 4, (3, 4), (1, 1), (0, 0), (1, 1), 1),       # one output per image
]


@pytest.mark.parametrize("case", SIDE_BY_SIDE_CASES)
@pytest.mark.parametrize("act_type", [None, "relu"])
def test_images_side_by_side_forward_matches_numpy(case, act_type):
    check(*case, act_type=act_type)


@pytest.mark.parametrize("use_bias", [True, False])
def test_images_side_by_side_without_bias_or_relu(use_bias):
    check((6, 5, 7, 7), 9, (3, 3), (1, 1), (1, 1), use_bias=use_bias)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", [STRIDED_CASES[0], NARROW_CASES[2], SIDE_BY_SIDE_CASES[1]])
def test_forward_paths_every_dtype(case, dtype):
    check(*case, dtype=dtype)


def test_channel_last_side_by_side_matches_channel_first():
    x = RNG.standard_normal((5, 6, 6, 4))  # NHWC
    w = RNG.standard_normal((7, 3, 3, 4))  # (F, kh, kw, C)
    b = RNG.standard_normal(7)
    y = npx.convolution(from_numpy(x, dtype="float32"), from_numpy(w, dtype="float32"),
                        from_numpy(b, dtype="float32"), kernel=(3, 3), pad=(1, 1),
                        num_filter=7, layout="NHWC").asnumpy()
    expected = ref_conv2d(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), b, (1, 1), (1, 1))
    onp.testing.assert_allclose(y, expected.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, stride", [((0, 3, 33, 33), (2, 2)), ((0, 3, 7, 7), (1, 1))])
def test_empty_batch(x_shape, stride):
    w = RNG.standard_normal((4, 3, 3, 3))
    y = pymx_conv(onp.zeros(x_shape), w, None, "float32", stride, (1, 1))
    assert y.shape == (0, 4) + ref_conv2d(onp.zeros((1,) + x_shape[1:]), w, None, stride,
                                          (1, 1)).shape[2:]


def test_naive_engine_equals_threaded_bitwise(tmp_path):
    assert_engines_agree("""
import numpy as onp
from pymx import npx
from pymx._op import invoke
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(3)
results = {}
for name, shape, filters, kernel, stride, pad in [
        ("strided", (3, 5, 17, 40), 12, 3, 2, 1),
        ("stem", (2, 3, 30, 64), 16, 7, 2, 3),
        ("narrow", (9, 8, 7, 7), 70, 3, 1, 1),
        ("narrow_strided", (3, 8, 28, 28), 40, 3, 2, 1),
        ("side_by_side", (9, 8, 5, 5), 10, 3, 1, 1),
        ("side_by_side_batch1", (1, 8, 10, 10), 10, 5, 1, 0)]:
    x = from_numpy(rng.standard_normal(shape), dtype="float32")
    w = from_numpy(rng.standard_normal((filters, shape[1], kernel, kernel)), dtype="float32")
    b = from_numpy(rng.standard_normal(filters), dtype="float32")
    results[name] = npx.convolution(x, w, b, kernel=(kernel, kernel), stride=(stride, stride),
                                    pad=(pad, pad), num_filter=filters,
                                    act_type="relu").asnumpy()
onp.savez(OUT, **results)
""", tmp_path)


@requires_gpu
@pytest.mark.parametrize("case", [STRIDED_CASES[0], STRIDED_CASES[4], NARROW_CASES[1],
                                  NARROW_CASES[3], WIDE_INPUT_NARROW_CASES[0],
                                  SIDE_BY_SIDE_CASES[2], SIDE_BY_SIDE_CASES[7]])
def test_gpu_matches_cpu(case):
    x_shape, filters, kernel, stride, pad = case[:5]
    dilate, groups = case[5:] if len(case) > 5 else ((1, 1), 1)
    x = RNG.standard_normal(x_shape)
    w = RNG.standard_normal((filters, x_shape[1] // groups) + tuple(kernel))
    b = RNG.standard_normal(filters)
    cpu, gpu = (pymx_conv(x, w, b, "float32", stride, pad, dilate, groups, "relu", device=dev)
                for dev in (pymx.cpu(0), pymx.gpu(0)))
    onp.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-4)


def test_fused_conv_relu_max_pool_takes_a_stride_2_convolution():
    """_conv_relu_max_pool computes its convolution rows with the direct kernel, so a stride-2
    convolution now runs fused: the same floats as the separate ops, near the float64 reference."""
    x = RNG.standard_normal((2, 5, 41, 69))
    w = RNG.standard_normal((11, 5, 3, 3)) / onp.sqrt(45)
    b = RNG.standard_normal(11) * 0.1
    xs, ws, bs = (from_numpy(a, dtype="float32") for a in (x, w, b))
    attrs = {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "num_filter": 11,
             "pool_kernel": (4, 4), "pool_stride": (2, 2)}
    fused = invoke("_conv_relu_max_pool", [xs, ws, bs], attrs)[0].asnumpy()
    conv = npx.convolution(xs, ws, bs, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=11,
                           act_type="relu")
    apart = npx.pooling(conv, kernel=(4, 4), stride=(2, 2)).asnumpy()
    onp.testing.assert_array_equal(fused, apart)
    y = onp.maximum(ref_conv2d(x, w, b, (2, 2), (1, 1)), 0)  # 21 x 35
    oh, ow = (y.shape[2] - 4) // 2 + 1, (y.shape[3] - 4) // 2 + 1
    expected = onp.stack([onp.stack([y[:, :, 2 * i:2 * i + 4, 2 * j:2 * j + 4].max(axis=(2, 3))
                                     for j in range(ow)], axis=-1) for i in range(oh)], axis=-2)
    onp.testing.assert_allclose(fused, expected, rtol=1e-5, atol=1e-5)
