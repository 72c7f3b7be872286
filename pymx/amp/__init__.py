"""pymx.amp: automatic mixed precision, MXNet 2.x's `mx.amp` (see pymx/amp/amp.py)."""
from . import lists
from .amp import *  # noqa: F401,F403
from .amp import __all__ as _amp_all
from .amp import _reset  # noqa: F401  (for tests: amp off again)

__all__ = list(_amp_all) + ["lists"]
