"""Regression tests for divergences from MXNet found by running the same scripts under MXNet and
pymx (gluon losses and layers, Trainer, optimizers, autograd). Each expected value is a float64
NumPy reference or a rule stated in the test."""
import numpy as onp
import pytest

from pymx import np, optimizer as opt


def _one_update(name, weight, grad, **kwargs):
    updater = opt.get_updater(opt.create(name, **kwargs))
    w = np.array(weight, dtype='float32')
    updater(0, np.array(grad, dtype='float32'), w)
    return w.asnumpy().astype('float64')


W0 = onp.array([1.0, -1.0, 0.5])
G0 = onp.array([0.5, -2.0, 3.0])


@pytest.mark.parametrize('clip', [0, 0.0, -1.0])
def test_clip_gradient_zero_or_negative_turns_clipping_off(clip):
    # MXNet's fused rules pass clip_gradient to their kernels only when it is truthy, and the
    # kernels clip only when it is >= 0: clip_gradient=0 trains like no clipping, where clipping
    # to [0, 0] would zero every gradient and never move the weights.
    got = _one_update('sgd', W0, G0, learning_rate=0.1, clip_gradient=clip)
    onp.testing.assert_allclose(got, W0 - 0.1 * G0, rtol=1e-6)
    got = _one_update('adagrad', W0, G0, learning_rate=0.1, clip_gradient=clip)
    onp.testing.assert_allclose(got, W0 - 0.1 * G0 / (onp.abs(G0) + 1e-6), rtol=1e-5)
    got = _one_update('adabelief', W0, G0, learning_rate=0.1, clip_gradient=clip)
    onp.testing.assert_allclose(got, _one_update('adabelief', W0, G0, learning_rate=0.1),
                                rtol=1e-6)


@pytest.mark.parametrize('centered', [False, True])
def test_rmsprop_clip_weights_zero_turns_weight_clipping_off(centered):
    got = _one_update('rmsprop', W0, G0, learning_rate=0.1, centered=centered, clip_weights=0)
    want = _one_update('rmsprop', W0, G0, learning_rate=0.1, centered=centered)
    onp.testing.assert_allclose(got, want, rtol=1e-6)
    assert onp.abs(got).max() > 0.5  # not clipped to [0, 0]
    # A positive bound still clips.
    clipped = _one_update('rmsprop', W0, G0, learning_rate=0.1, centered=centered,
                          clip_weights=0.3)
    onp.testing.assert_allclose(clipped, onp.clip(want, -0.3, 0.3), rtol=1e-6)
