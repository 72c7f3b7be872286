"""The cast rules amp applies to an operator's inputs, and the one place they take effect.

Note [Where amp casts]
~~~~~~~~~~~~~~~~~~~~~~
Every operator pymx runs from Python goes through `pymx._c.core.invoke` (np, npx, gluon layers
and losses, ndarray methods), except the arithmetic fast path of + - * / (whose kernels promote
mixed dtypes themselves). So amp installs one function there (`core.set_input_cast`) that looks
the operator's name up in a dict and casts its float inputs as the lists say, instead of
wrapping hundreds of functions in several namespaces as MXNet does. While amp is off nothing is
installed, and `invoke` pays one pointer comparison. The casts are ordinary `cast` operators:
autograd records them (a gradient flows back through them in its input's dtype, so float32
parameters get float32 gradients) and hybridize traces them into the graph, whose replays then
run without this Python code. Only float32 and the target dtype are cast (MXNet's amp_cast):
float64 and integer inputs pass through. amp.init's policy is process-wide; a converted block's
(amp.convert_hybrid_block) is installed for its forward pass on the thread running it only
(`core.set_thread_input_cast`, which takes precedence there), so other threads' operators keep
theirs.
"""
import contextlib

import numpy as _onp

from .._c import core as _core

__all__ = ["CastPolicy", "Float32Policy", "applied"]


_FLOAT32 = _onp.dtype(_onp.float32)


class CastPolicy:
    """For one target dtype, the cast rule of every listed operator:
    policy(name, inputs, attrs) -> inputs, the inputs cast for operator `name`."""

    def __init__(self, target_dtype, lp16_ops, fp32_ops, conditional_fp32_ops):
        self.target_dtype = target_dtype
        self._castable = (_FLOAT32, target_dtype)
        self._rules = {}  # name -> (dtype, None or (attribute, values))
        for name in lp16_ops:
            self._rules[name] = (target_dtype, None)
        for name in fp32_ops:
            self._rules[name] = (_FLOAT32, None)
        for name, attr, values in conditional_fp32_ops:
            self._rules[name] = (_FLOAT32, (attr, frozenset(values)))

    def cast_dtype(self, name, inputs, attrs):
        """The dtype operator `name` runs in with these inputs and attributes (None: as given)."""
        rule = self._rules.get(name)
        if rule is None:
            return None
        dtype, condition = rule
        if condition is not None and not (attrs and attrs.get(condition[0]) in condition[1]):
            return None
        return dtype

    def __call__(self, name, inputs, attrs):
        dtype = self.cast_dtype(name, inputs, attrs)
        if dtype is None:
            return inputs
        castable = self._castable
        return [x.astype(dtype) if x.dtype != dtype and x.dtype in castable else x
                for x in inputs]


class Float32Policy(CastPolicy):
    """Every operator in float32 (the children amp.convert_hybrid_block excludes), but `cast`:
    the policy's own casts, and the user's, keep their inputs."""

    def __init__(self, target_dtype):
        super().__init__(target_dtype, [], [], [])

    def cast_dtype(self, name, inputs, attrs):
        return None if name == "cast" else _FLOAT32


def _unchanged(name, inputs, attrs):
    return inputs


@contextlib.contextmanager
def applied(policy):
    """Runs the body with `policy` casting the inputs of every operator this thread runs (None:
    no casts, amp.init's neither); restores what was there."""
    previous = _core.set_thread_input_cast(_unchanged if policy is None else policy)
    try:
        yield
    finally:
        _core.set_thread_input_cast(previous)
