"""npx.random: MXNet's npx.random.seed, the same generator state as np.random."""


def seed(seed, device="all"):
    """Seeds pymx's random number generators (np.random and the ops that draw numbers, such as
    dropout). `device` is accepted for MXNet compatibility: all devices share one seed."""
    from pymx.numpy import random as _random
    return _random.seed(seed)
