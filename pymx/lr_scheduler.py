"""Learning-rate schedules (MXNet's `mx.lr_scheduler`).

A scheduler maps the optimizer's update count to a learning rate: ``lr = scheduler(num_update)``.
Every scheduler supports a warm-up phase of `warmup_steps` updates that ramps from
`warmup_begin_lr` to `base_lr` ('linear') or holds `warmup_begin_lr` ('constant').
"""
import math

__all__ = ['LRScheduler', 'FactorScheduler', 'MultiFactorScheduler', 'PolyScheduler',
           'CosineScheduler']


class LRScheduler:
    """Base class: warm-up handling. Subclasses implement ``__call__(num_update)``."""

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode='linear'):
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        if warmup_mode not in ('linear', 'constant'):
            raise ValueError(f"warmup_mode must be 'linear' or 'constant', got {warmup_mode!r}")
        if warmup_begin_lr > base_lr:
            raise ValueError(f"warmup_begin_lr ({warmup_begin_lr}) must not exceed base_lr "
                             f"({base_lr})")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_final_lr = base_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update):
        if self.warmup_mode == 'constant':
            return self.warmup_begin_lr
        increase = (self.warmup_final_lr - self.warmup_begin_lr) * num_update / self.warmup_steps
        return self.warmup_begin_lr + increase

    def __call__(self, num_update):
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")


class FactorScheduler(LRScheduler):
    """Multiplies the rate by `factor` every `step` updates, never going below `stop_factor_lr`."""

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode='linear'):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError(f"FactorScheduler: step must be >= 1, got {step}")
        if factor > 1.0:
            raise ValueError(f"FactorScheduler: factor must be <= 1 to decay the rate, got {factor}")
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr = max(self.base_lr * self.factor, self.stop_factor_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Multiplies the rate by `factor` each time the update count passes an entry of `step`."""

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode='linear'):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        step = list(step)
        if not step:
            raise ValueError("MultiFactorScheduler: step must be a non-empty list")
        for prev, cur in zip(step, step[1:]):
            if cur <= prev:
                raise ValueError(f"MultiFactorScheduler: steps must increase, got {step}")
        if step[0] < 1:
            raise ValueError(f"MultiFactorScheduler: steps must be >= 1, got {step}")
        if factor > 1.0:
            raise ValueError(f"MultiFactorScheduler: factor must be <= 1, got {factor}")
        self.step = step
        self.factor = factor
        self.cur_step_ind = 0
        self.count = 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
        return self.base_lr


class _DecayToFinalScheduler(LRScheduler):
    """The skeleton of PolyScheduler and CosineScheduler: after warm-up the rate falls from
    base_lr to final_lr as lr = final + (base - final) * decay(progress), progress going from 0 to
    1 over the max_update - warmup_steps updates after warm-up; then it stays at final_lr."""

    def __init__(self, max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if max_update < 1:
            raise ValueError(f"{type(self).__name__}: max_update must be >= 1, got {max_update}")
        self.base_lr_orig = base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = max_update - warmup_steps

    def decay(self, progress):
        """The fraction of (base_lr - final_lr) left at `progress` in [0, 1]: 1 at 0, 0 at 1."""
        raise NotImplementedError(f"{type(self).__name__} must implement decay")

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            progress = (num_update - self.warmup_steps) / self.max_steps
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * \
                self.decay(progress)
        return self.base_lr


class PolyScheduler(_DecayToFinalScheduler):
    """Polynomial decay from base_lr to final_lr over max_update updates:
    lr = final + (base - final) * (1 - t / T) ** pwr, with t and T counted after warm-up."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode='linear'):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = pwr

    def decay(self, progress):
        return (1 - progress) ** self.power


class CosineScheduler(_DecayToFinalScheduler):
    """Half-cosine decay from base_lr to final_lr over max_update updates (after warm-up)."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode='linear'):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if base_lr <= final_lr:
            raise ValueError(f"CosineScheduler: base_lr ({base_lr}) must exceed final_lr "
                             f"({final_lr})")

    def decay(self, progress):
        return (1 + math.cos(math.pi * progress)) / 2
