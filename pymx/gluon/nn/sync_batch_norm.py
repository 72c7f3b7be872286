"""SyncBatchNorm: batch normalisation whose training statistics cover the batch of every device
of a data-parallel step (MXNet 2.x's `gluon.nn.SyncBatchNorm`).

Differences from MXNet 2.x:
- Training mode with num_devices > 1 raises NotImplementedError naming num_devices and the
  device (see Note [Why cross-device statistics need an asynchronous engine op]); MXNet blocks
  engine workers in a barrier inside its `_contrib_SyncBatchNorm` kernel. Inference,
  use_global_stats=True and num_devices=1 are complete and equal BatchNorm's.
- num_devices=None counts the visible GPUs (at least 1) as MXNet does, and warns only when
  that count is above 1 (MXNet warns on every construction).
- `in_channels` is checked against the input's channel axis at every call, naming both values.
"""
import warnings

from ... import autograd
from ... import device as _device
from .basic_layers import BatchNorm

__all__ = ['SyncBatchNorm']

# Note [Why cross-device statistics need an asynchronous engine op]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Data-parallel training calls the network once per device, one after another, from one Python
# thread (`for x in xs: outs.append(net(x))`). The output of device 0 depends on the statistics
# of every device, but devices 1.. have not been called when device 0's call must return.
# - A barrier in the Python call deadlocks at once: device 0 waits for a call that its own
#   waiting prevents.
# - Returning device 0's output and writing it later is wrong with the engine's ordering: the
#   ops that read it (the rest of device 0's network) are pushed before the write, and a var
#   orders its ops by push order, so they would read the array before it is written.
# - A barrier inside the kernel (MXNet's design) blocks an engine worker of each device until
#   all devices arrive. pymx serves each device with one worker by default, and a step's other
#   work on that device (the Trainer's copies of reduced gradients, the next split_and_load)
#   can be queued behind the blocked kernel while another device's statistics depend on it: a
#   deadlock that depends on scheduling; the naive engine deadlocks always.
# What works with the engine is an asynchronous op (FnProperty::kAsync): each device's call
# pushes, at once, an op that writes its output and registers its local sums (sum x, sum x^2
# per channel) with a rendezvous keyed by the layer; the op of the last device to arrive
# computes the global statistics and completes every device's op through its on_complete. No
# worker waits, pushes keep their order, and the backward does the same with sum dy and
# sum dy*x_hat. The registry runs kernels synchronously today, so this layer uses the
# synchronous batch_norm where it is exact (inference, use_global_stats, one device) and
# refuses cross-device training rather than give per-device statistics silently.


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
        training = autograd.is_training() and not self._kwargs['use_global_stats']
        if training and self._num_devices > 1:
            # See Note [Why cross-device statistics need an asynchronous engine op].
            raise NotImplementedError(
                f'SyncBatchNorm(num_devices={self._num_devices}) in training mode on '
                f'{x.device}: exchanging batch statistics across devices needs an asynchronous '
                f'engine op that pymx does not have yet; use num_devices=1 (BatchNorm over each '
                f'device\'s batch), use_global_stats=True, or nn.BatchNorm')
        return super().forward(x)

    def __repr__(self):
        channels = self.gamma.shape[0]
        return (f'SyncBatchNorm(eps={self._kwargs["eps"]}, momentum={self._kwargs["momentum"]}, '
                f'fix_gamma={self._kwargs["fix_gamma"]}, '
                f'use_global_stats={self._kwargs["use_global_stats"]}, '
                f'num_devices={self._num_devices}, '
                f'in_channels={channels if channels > 0 else None})')
