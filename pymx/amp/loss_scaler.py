"""Dynamic loss scaling for float16 training (MXNet's amp.LossScaler).

A float16 gradient below 2**-24 rounds to zero. Scaling the loss by S scales every gradient by
S, so small gradients survive; the Trainer divides by S again (rescale_grad). Too large an S
makes some gradient overflow to inf: the step is then skipped and S halved, down to 1 (or
init_scale if smaller): below that a non-finite gradient is not an overflow of the scaling, and
each such step is skipped with a warning. After `scale_window` steps in a row without overflow S
doubles, up to `max_scale`. S is always a power of two, so scaling and unscaling are exact.
"""
import logging

import numpy as _onp

from .. import autograd
from .. import numpy as np
from .._op import invoke
from ..device import cpu

__all__ = ["LossScaler"]


def _all_finite(arrays):
    """Whether every element of every array is finite, with one wait on the host: one
    multi_all_finite op per device (engine/src/ops/all_finite.cc), whose flags meet on the
    CPU."""
    by_device = {}
    for array in arrays:
        by_device.setdefault(array.device, []).append(array)
    flags = [invoke("multi_all_finite", group)[0].to_device(cpu()) for group in by_device.values()]
    return not flags or bool(np.stack(flags).all().item())


class LossScaler:
    """LossScaler(init_scale=2**16, scale_factor=2., scale_window=2000, max_scale=2**24).

    `loss_scale` is the factor amp.scale_loss multiplies the loss by. has_overflow(params) is
    called by the Trainer once per step, after the gradients were summed over devices.
    """

    def __init__(self, init_scale=2.**16, scale_factor=2., scale_window=2000, max_scale=2.**24):
        for name, value in (("init_scale", init_scale), ("scale_factor", scale_factor),
                            ("max_scale", max_scale)):
            if not value > 0 or _onp.frexp(value)[0] != 0.5:
                raise ValueError(f"LossScaler: {name} must be a positive power of two (scaling "
                                 f"is then exact), got {value!r}")
        if scale_factor <= 1 or init_scale > max_scale:
            raise ValueError(f"LossScaler: need scale_factor > 1 and init_scale <= max_scale, got "
                             f"scale_factor={scale_factor!r}, init_scale={init_scale!r}, "
                             f"max_scale={max_scale!r}")
        if not isinstance(scale_window, int) or scale_window < 1:
            raise ValueError(f"LossScaler: scale_window must be a positive int, got "
                             f"{scale_window!r}")
        self.loss_scale = float(init_scale)
        self.scale_factor = float(scale_factor)
        self.scale_window = scale_window
        self.max_scale = float(max_scale)
        self.min_scale = min(1.0, self.loss_scale)
        self._clean_steps = 0  # steps since the last overflow or growth

    def has_overflow(self, params):
        """Whether a gradient of `params` (every device's copy) holds an inf or NaN; updates
        the scale for the next step: divided by scale_factor on overflow, multiplied by it after
        scale_window clean steps in a row."""
        grads = [g for p in params if p.grad_req != 'null' for g in p.list_grad()]
        with autograd.pause():
            overflow = not _all_finite(grads)
        if overflow:
            self._clean_steps = 0
            if self.loss_scale == self.min_scale:
                logging.warning("AMP: non-finite gradients at the smallest loss scale (%g), step "
                                "skipped", self.loss_scale)
                return True
            self.loss_scale = max(self.min_scale, self.loss_scale / self.scale_factor)
            logging.info("AMP: gradient overflow, step skipped; loss scale now %g",
                         self.loss_scale)
            return True
        self._clean_steps += 1
        if self._clean_steps == self.scale_window:
            self._clean_steps = 0
            self.loss_scale = min(self.max_scale, self.loss_scale * self.scale_factor)
            logging.info("AMP: increasing loss scale to %g", self.loss_scale)
        return False
