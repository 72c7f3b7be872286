"""SyncBatchNorm: batch normalisation whose training statistics cover the batch of every device
of a data-parallel step (MXNet 2.x's `gluon.nn.SyncBatchNorm`).

Each device's call runs the operator `_contrib_SyncBatchNorm`, which completes once every device
of the step has contributed its statistics, without blocking the caller or an engine worker
(Note [Cross-device batch statistics] in engine/src/ops/nn_sync_batch_norm.cc), so the usual
loop `for x in split_and_load(...): outs.append(net(x))` works, imperatively and hybridized.
Until all num_devices devices of a step have run the layer, the outputs of those that did are
pending: waiting on one of them (asnumpy, waitall) before the other devices' calls blocks.
The gradients of gamma and beta on each device are that device's part; their sum over the
devices, which the Trainer forms, is the gradient of the whole batch.

Differences from MXNet 2.x:
- Devices may hold batches of different sizes: statistics are weighted by each device's count
  (MXNet averages the devices' means and mean squares with equal weights).
- Training with num_devices > 1 takes float32 or float64 data with parameters of the same dtype
  (float16 data raises a TypeError naming its dtype); num_devices=1 is BatchNorm, float16 too.
- A step that runs the layer on fewer devices than num_devices fails, naming num_devices and the
  devices, when a device runs it again (MXNet waits forever). Training with num_devices > 1
  needs the threaded engine (PYMX_ENGINE=naive raises an error naming num_devices).
- num_devices=None counts the visible GPUs (at least 1) as MXNet does, and warns only when
  that count is above 1 (MXNet warns on every construction).
- With num_devices=1 the layer is BatchNorm (the same operator, bitwise equal results).
- `in_channels` is checked against the input's channel axis at every call, naming both values.
"""
import itertools
import warnings

from ... import device as _device
from ... import numpy_extension as npx
from ..._op import invoke
from .basic_layers import BatchNorm

__all__ = ['SyncBatchNorm']

# One rendezvous per layer: every device copy of a layer runs with its key.
_keys = itertools.count()


def _default_num_devices():
    count = max(_device.num_gpus(), 1)
    if count > 1:
        warnings.warn(f'SyncBatchNorm: num_devices defaults to the {count} visible GPUs; set '
                      f'num_devices when training on fewer', UserWarning, stacklevel=3)
    return count


class SyncBatchNorm(BatchNorm):
    """Batch normalisation over the channel axis (axis 1) with the statistics of the whole
    data-parallel batch: in training, the mean and variance over every device's batch, so the
    result equals BatchNorm over the concatenated batch. In inference, or with
    use_global_stats=True, it is BatchNorm with the running statistics.

    Parameters (gamma, beta, running_mean, running_var, each of shape (in_channels,)) are
    BatchNorm's, so checkpoints of either layer load into the other. `num_devices` is the number
    of devices that run the layer in each step (None: the visible GPUs, at least 1)."""

    def __init__(self, in_channels=0, num_devices=None, momentum=0.9, epsilon=1e-5, center=True,
                 scale=True, use_global_stats=False, beta_initializer='zeros',
                 gamma_initializer='ones', running_mean_initializer='zeros',
                 running_variance_initializer='ones', **kwargs):
        if kwargs:
            raise TypeError(f'SyncBatchNorm got unexpected keyword arguments {sorted(kwargs)}')
        if not isinstance(in_channels, int) or isinstance(in_channels, bool) or in_channels < 0:
            raise ValueError(f'SyncBatchNorm: in_channels must be an int >= 0 (0: inferred from '
                             f'the first input), got {in_channels!r}')
        if num_devices is None:
            num_devices = _default_num_devices()
        if not isinstance(num_devices, int) or isinstance(num_devices, bool) or num_devices < 1:
            raise ValueError(f'SyncBatchNorm: num_devices must be an int >= 1, got '
                             f'{num_devices!r}')
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                         use_global_stats=use_global_stats, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels)
        self._num_devices = num_devices
        self._key = f'syncbatchnorm{next(_keys)}'

    @property
    def num_devices(self):
        return self._num_devices

    def _check_input(self, x):
        if x.ndim < 2:
            raise ValueError(f'SyncBatchNorm: the input needs a channel axis (axis 1), got shape '
                             f'{tuple(x.shape)}')
        channels = self.gamma.shape[0]
        if channels > 0 and x.shape[1] != channels:
            raise ValueError(f'SyncBatchNorm: the input has {x.shape[1]} channels (axis 1 of '
                             f'shape {tuple(x.shape)}), the layer has in_channels={channels}')

    def infer_shape(self, x, *args):
        self._check_input(x)
        super().infer_shape(x, *args)

    def forward(self, x):
        self._check_input(x)
        device = x.device
        params = [self.gamma.data(device), self.beta.data(device),
                  self.running_mean.data(device), self.running_var.data(device)]
        if self._num_devices == 1:
            return npx.batch_norm(x, *params, **self._kwargs)
        attrs = {k: v for k, v in self._kwargs.items() if k != 'axis'}
        return invoke('_contrib_SyncBatchNorm', [x] + params,
                      dict(attrs, ndev=self._num_devices, key=self._key))[0]

    def __repr__(self):
        channels = self.gamma.shape[0]
        return (f'SyncBatchNorm(eps={self._kwargs["eps"]}, momentum={self._kwargs["momentum"]}, '
                f'fix_gamma={self._kwargs["fix_gamma"]}, '
                f'use_global_stats={self._kwargs["use_global_stats"]}, '
                f'num_devices={self._num_devices}, '
                f'in_channels={channels if channels > 0 else None})')
