"""pymx.random (MXNet's mx.random): seeding the random number generators.

pymx has one generator stream per process, shared by every device: np.random's samplers,
npx.random's, and the ops that draw numbers (dropout, ...) all take their seeds from it (Note
[RNG seeds] in engine/src/invoke.cc). mx.random.seed, np.random.seed and npx.random.seed all
seed that stream; they differ only in the arguments they accept.

Deliberate differences from MXNet 2.x:
  - `device` selects which generator to seed in MXNet (each device has its own); pymx's devices
    share one stream, so seed(s, device=d) seeds all devices, as seed(s) does. `device` is
    still checked ('all' or a Device).
  - The legacy samplers MXNet re-exports here from mx.nd.random (uniform, normal, ...) are not
    provided: pymx has no mx.nd; use np.random / npx.random.
  - seed_state must be a non-negative integer below 2**64 (MXNet takes a C int).
"""
import numbers

import numpy as _onp

from pymx.device import Device
from pymx.numpy import random as _np_random

__all__ = ["seed"]


def seed(seed_state, device="all"):
    """Seeds pymx's random number generators: every later random op of this process draws from
    the stream this seed starts, so a program that seeds, then samples, repeats its numbers.

    Parameters
    ----------
    seed_state : int
        A non-negative integer.
    device : 'all' or Device
        Accepted for MXNet compatibility: all devices share pymx's one stream (see the module
        docstring), so every value seeds all of them.
    """
    if not isinstance(seed_state, (numbers.Integral, _onp.integer)) or isinstance(seed_state, bool):
        raise ValueError(f"seed: seed_state must be an int, got {seed_state!r}")
    if not 0 <= seed_state < 2**64:
        raise ValueError(f"seed: seed_state must be in [0, 2**64), got {seed_state}")
    if device != "all" and not isinstance(device, Device):
        raise ValueError(f"seed: device must be 'all' or a Device, got {device!r}")
    _np_random.seed(int(seed_state))
