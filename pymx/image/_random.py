"""Where pymx.image's random choices come from.

Note [Random draws in pymx.image]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Augmenters and iterators make their random choices (crop boxes, jitter factors, flips, shuffles)
on the host, but take their randomness from pymx's one generator stream, so pymx.random.seed
makes them repeat. Drawing each number through a device op would cost an op and a wait per
number, so a call draws one seed from the stream (one op) and makes all its choices from a
NumPy generator started from that seed.

An iterator instead draws one seed per batch and gives sample j of the batch its own generator,
started from (batch seed, j), installed for the current thread by `seeded`. The augmenters then
draw from it without touching the stream. The images of a batch are therefore augmented the same
way whichever thread processes them and in whatever order, so an ImageRecordIter with several
preprocess threads repeats its batches under a seed.
"""
import contextlib
import threading

import numpy as onp

from ..numpy import random as _np_random

_SEED_BOUND = 2**62
_current = threading.local()


def draw_seed():
    """A fresh seed from pymx's generator stream (one op)."""
    return int(_np_random.randint(0, _SEED_BOUND, size=1, dtype="int64").asnumpy()[0])


def generator():
    """The NumPy generator the calling thread's random choices come from: the one `seeded`
    installed, else a new one seeded from pymx's stream."""
    installed = getattr(_current, "generator", None)
    if installed is not None:
        return installed
    return onp.random.default_rng(draw_seed())


@contextlib.contextmanager
def seeded(*entropy):
    """Within the block, this thread's random choices come from a generator seeded by
    `entropy` (non-negative ints)."""
    previous = getattr(_current, "generator", None)
    _current.generator = onp.random.default_rng(list(entropy))
    try:
        yield
    finally:
        _current.generator = previous
