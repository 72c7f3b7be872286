"""Automatic mixed precision (MXNet 2.x's `mx.amp`): train and run in float16 or bfloat16.

    amp.init()                                    # before building the network
    net = ...; trainer = gluon.Trainer(net.collect_params(), 'sgd', {...})
    amp.init_trainer(trainer)
    with autograd.record():
        loss = loss_fn(net(data), label)
        with amp.scale_loss(loss, trainer) as scaled_loss:
            autograd.backward(scaled_loss)
    trainer.step(batch_size)                      # skipped when a gradient overflowed

What pymx implements, and where it differs from MXNet:
- init(target_dtype) makes the operators of list_lp16_ops run in the target dtype, and those
  of list_fp32_ops (and of list_conditional_fp32_ops when their attribute matches) in float32,
  by casting inputs at pymx's one operator entry point (Note [Where amp casts] in
  pymx/amp/_casts.py) rather than by wrapping the functions of every namespace. The lists name
  pymx's C++ operators (pymx/amp/lists/). Operators with mixed float inputs promote them to the
  widest dtype in C++, so list_widest_type_cast needs no casts. Parameters stay float32: a
  float32 weight is cast per use, and its gradient comes back float32. layout_optimization is
  not supported.
- init_trainer(trainer): for float16, dynamic loss scaling with MXNet's constants (LossScaler:
  scale 2**16, halved on overflow, doubled after 2000 clean steps, at most 2**24). The overflow
  check covers every gradient on every device after they were summed: one multi_all_finite op
  per device and one wait on the host per step. An overflowing step leaves weights, optimizer
  states and update counts unchanged.
  bfloat16 has float32's range, so it gets no loss scaling (MXNet scales it like float16):
  scale_loss yields the loss itself and steps are never skipped. update_on_kvstore=True is
  refused (the store would update before the check; MXNet does not check that case).
- convert_hybrid_block(block, data_example, ...) returns a converted copy of `block` of the same
  class, with its own parameters: casts run inside its forward pass (and are traced into its
  graph when hybridized). pymx has no Symbol, so convert_model / convert_symbol do not exist,
  and excluded_sym_names names child blocks (as in collect_params, e.g. 'features.3'), whose
  operators all run in float32.
- Trainers only: an Optimizer passed to init_trainer / scale_loss / unscale is a TypeError, as
  in MXNet.
"""
import contextlib
import copy

import numpy as _onp

from .. import autograd
from .._c import core as _core
from ..base import as_dtype, bfloat16, dtype_name
from ..device import current_device
from ..gluon import HybridBlock, Trainer
from ..ndarray import ndarray
from ..optimizer import Optimizer
from . import lists
from ._casts import CastPolicy, Float32Policy, applied
from .loss_scaler import LossScaler

__all__ = ["init", "init_trainer", "scale_loss", "unscale", "convert_hybrid_block",
           "list_lp16_ops", "list_fp32_ops", "list_lp16_fp32_ops", "list_conditional_fp32_ops",
           "list_widest_type_cast", "list_loss_output_functions", "LossScaler"]

_FLOAT16 = _onp.dtype(_onp.float16)
_TARGET_DTYPES = {"float16": _FLOAT16, "bfloat16": bfloat16}

_policy = None   # the CastPolicy amp.init installed; None while amp is off
_init_args = None  # what amp.init was called with, to compare a second call against


def _target_dtype(target_dtype, caller):
    """float16's or bfloat16's dtype object, or a ValueError naming the value."""
    try:
        name = dtype_name(as_dtype(target_dtype))
    except TypeError:
        name = None
    if name not in _TARGET_DTYPES:
        raise ValueError(f"{caller}: target_dtype must be 'float16' or 'bfloat16', got "
                         f"{target_dtype!r}")
    return _TARGET_DTYPES[name]


def _lists(target_dtype):
    return lists.symbol_fp16 if target_dtype == _FLOAT16 else lists.symbol_bf16


def list_lp16_ops(target_dtype):
    """The operators amp runs in `target_dtype` ('float16' or 'bfloat16')."""
    return list(_lists(_target_dtype(target_dtype, "list_lp16_ops")).LP16_FUNCS)


def list_fp32_ops(target_dtype):
    """The operators amp runs in float32."""
    return list(_lists(_target_dtype(target_dtype, "list_fp32_ops")).FP32_FUNCS)


def list_lp16_fp32_ops(target_dtype):
    """The operators that run in whichever float dtype they receive."""
    return list(_lists(_target_dtype(target_dtype, "list_lp16_fp32_ops")).LP16_FP32_FUNCS)


def list_conditional_fp32_ops(target_dtype):
    """(operator, attribute, values): float32 when the attribute has one of the values."""
    return list(_lists(_target_dtype(target_dtype,
                                     "list_conditional_fp32_ops")).CONDITIONAL_FP32_FUNCS)


def list_widest_type_cast(target_dtype):
    """The operators that run in the widest float dtype of their inputs (C++ promotes)."""
    return list(_lists(_target_dtype(target_dtype, "list_widest_type_cast")).WIDEST_TYPE_CASTS)


def list_loss_output_functions(target_dtype):
    """MXNet's loss operators with a grad_scale argument: none in pymx."""
    return list(_lists(_target_dtype(target_dtype,
                                     "list_loss_output_functions")).LOSS_OUTPUT_FUNCTIONS)


def _make_policy(caller, target_dtype, lp16_ops, fp32_ops, conditional_fp32_ops):
    """The CastPolicy for these lists (None: the defaults), checked: every name must be an
    operator, and no operator may be in two lists."""
    defaults = _lists(target_dtype)
    lp16_ops = list(defaults.LP16_FUNCS if lp16_ops is None else lp16_ops)
    fp32_ops = list(defaults.FP32_FUNCS if fp32_ops is None else fp32_ops)
    conditional_fp32_ops = list(defaults.CONDITIONAL_FP32_FUNCS if conditional_fp32_ops is None
                                else conditional_fp32_ops)
    for entry in conditional_fp32_ops:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 3 and
                isinstance(entry[0], str) and isinstance(entry[1], str) and
                isinstance(entry[2], (list, tuple))):
            raise ValueError(f"{caller}: conditional_fp32_ops entries must be (operator name, "
                             f"attribute name, list of values), got {entry!r}")
    conditional_names = [entry[0] for entry in conditional_fp32_ops]
    if "cast" in lp16_ops + fp32_ops + conditional_names:
        raise ValueError(f"{caller}: the lists cannot name 'cast', the operator amp casts with")
    known = set(_core.op_names())
    for list_name, names in (("target_precision_ops", lp16_ops), ("fp32_ops", fp32_ops),
                             ("conditional_fp32_ops", conditional_names)):
        unknown = [name for name in names if not isinstance(name, str) or name not in known]
        if unknown:
            raise ValueError(f"{caller}: {list_name} names no pymx operator: {unknown} (see "
                             f"pymx._c.core.op_names())")
    for (name_a, a), (name_b, b) in ((("target_precision_ops", lp16_ops), ("fp32_ops", fp32_ops)),
                                     (("target_precision_ops", lp16_ops),
                                      ("conditional_fp32_ops", conditional_names)),
                                     (("fp32_ops", fp32_ops),
                                      ("conditional_fp32_ops", conditional_names))):
        common = sorted(set(a) & set(b))
        if common:
            raise ValueError(f"{caller}: operators {common} are in both {name_a} and {name_b}")
    return CastPolicy(target_dtype, lp16_ops, fp32_ops, conditional_fp32_ops)


def init(target_dtype='float16', target_precision_ops=None, conditional_fp32_ops=None,
         fp32_ops=None, layout_optimization=False):
    """Turns amp on for the rest of the process: from now on the operators of the lists run in
    `target_dtype` ('float16' or 'bfloat16') or float32 (see the module docstring).

    target_precision_ops, fp32_ops: operator names replacing the default lists;
    conditional_fp32_ops: (operator, attribute, values) entries replacing that list. Call it
    before hybridizing: graphs traced earlier keep the precisions they were traced with. A second
    call with the same arguments does nothing; with others it raises.
    """
    global _policy, _init_args
    if layout_optimization:
        raise ValueError("amp.init: layout_optimization=True is not supported by pymx")
    dtype = _target_dtype(target_dtype, "amp.init")
    args = (dtype_name(dtype), target_precision_ops, conditional_fp32_ops, fp32_ops)
    if _policy is not None:
        if args != _init_args:
            raise RuntimeError(f"amp.init was already called with (target_dtype, "
                               f"target_precision_ops, conditional_fp32_ops, fp32_ops) = "
                               f"{_init_args}; it cannot change to {args} in this process")
        return
    policy = _make_policy("amp.init", dtype, target_precision_ops, fp32_ops,
                          conditional_fp32_ops)
    _core.set_input_cast(policy)
    _policy, _init_args = policy, args


def _reset():
    """Turns amp off again, as in a fresh process (for tests; MXNet has no such call)."""
    global _policy, _init_args
    _core.set_input_cast(None)
    _policy = _init_args = None


def _check_trainer(trainer, caller):
    if isinstance(trainer, Optimizer):
        raise TypeError(f"{caller}: amp works with a gluon.Trainer, not an Optimizer "
                        f"({type(trainer).__name__}); pass the Trainer that owns it")
    if not isinstance(trainer, Trainer):
        raise TypeError(f"{caller}: expected a gluon.Trainer, got {type(trainer).__name__}")


def _check_prepared(trainer, caller):
    _check_trainer(trainer, caller)
    if trainer._amp_original_scale is None:
        raise RuntimeError(f"{caller}: the trainer is not prepared for amp; call "
                           f"amp.init_trainer(trainer) first")


def init_trainer(optimizer_or_trainer):
    """Prepares a Trainer for amp: with target dtype float16 it gets a LossScaler (dynamic loss
    scaling), with bfloat16 no scaling. Call amp.init first. Parameters cast to float16 or
    bfloat16 (net.cast) need an optimizer with multi_precision=True (float32 master weights)."""
    trainer = optimizer_or_trainer
    _check_trainer(trainer, "amp.init_trainer")
    if _policy is None:
        raise RuntimeError("amp.init_trainer: amp is not initialized; call amp.init() first")
    if trainer._update_on_kvstore_arg:
        raise ValueError("amp.init_trainer: a trainer with update_on_kvstore=True updates the "
                         "weights inside the kvstore before amp can skip an overflowing step; "
                         "create the Trainer with update_on_kvstore=False")
    low = [p for p in trainer._params if p.dtype in ("float16", "bfloat16")]
    if low and not trainer.optimizer.multi_precision:
        raise ValueError(f"amp.init_trainer: {len(low)} of the trainer's {len(trainer._params)} "
                         f"parameters are {sorted({p.dtype for p in low})} but the optimizer "
                         f"{type(trainer.optimizer).__name__} has multi_precision=False: create "
                         f"it with multi_precision=True to update float32 master copies")
    trainer._amp_original_scale = trainer._scale
    trainer._amp_loss_scaler = LossScaler() if _policy.target_dtype == _FLOAT16 else None


@contextlib.contextmanager
def scale_loss(loss, optimizer_or_trainer):
    """Yields `loss` (an ndarray or a list of them) times the trainer's loss scale, and makes
    the trainer's next step divide the gradients by that scale."""
    trainer = optimizer_or_trainer
    _check_prepared(trainer, "amp.scale_loss")
    scaler = trainer._amp_loss_scaler
    if scaler is None:  # bfloat16: no scaling (and no unscale of an earlier step left over)
        trainer._scale = trainer._amp_original_scale
        yield loss
        return
    scale = scaler.loss_scale
    trainer._scale = trainer._amp_original_scale / scale
    yield [item * scale for item in loss] if isinstance(loss, (list, tuple)) else loss * scale


def unscale(optimizer_or_trainer):
    """Divides every gradient (every device's) by the loss scale now, exactly (the scale is a
    power of two), so that they can be inspected or clipped before trainer.step."""
    trainer = optimizer_or_trainer
    _check_prepared(trainer, "amp.unscale")
    scale = trainer._scale
    with autograd.pause():
        for param in trainer._params:
            if param.grad_req != 'null':
                for grad in param.list_grad():
                    grad *= scale
    trainer._scale = 1.0


class _CastingForward:
    """A block's forward run with `policy` casting operator inputs. Set as the `forward`
    attribute of a block that convert_hybrid_block copied: hybridize traces `block.forward`, so
    the casts go into the graph."""

    def __init__(self, forward, policy):
        self.forward = forward
        self.policy = policy

    def __call__(self, *args):
        with applied(self.policy):
            return self.forward(*args)


def _copy_block(block, device):
    """A deep copy of `block` with fresh parameters on `device`, no cached graphs and no
    trainer."""
    memo = {}
    for param in block.collect_params().values():
        if id(param) not in memo:
            clone = copy.copy(param)
            clone._trainer = None
            clone._data = clone._grad = None
            clone._init_impl(param._reduce(), [device])
            memo[id(param)] = clone

    def forget_graphs(b):
        if isinstance(b, HybridBlock):
            memo[id(b._cached_graphs)] = {}
    block.apply(forget_graphs)
    net = copy.deepcopy(block, memo)
    net.hybridize(False)
    return net


def _child(net, name):
    """The descendant block at structural name `name` ('features.3'), or a ValueError."""
    block = net
    for part in name.split('.'):
        block = block._children.get(part)
        if block is None:
            raise ValueError(f"convert_hybrid_block: excluded_sym_names has {name!r}, which "
                             f"names no child block of {type(net).__name__} (children are "
                             f"named as in collect_params, e.g. 'features.3')")
    return block


def _params_used_in(policy, net, data_example):
    """{id of a parameter array: the set of dtypes its consuming operators ran in (None: as
    given)}, from one forward pass in predict mode."""
    dtypes = {}
    casting = False  # the policy's own cast operators are not consumers

    def record(name, inputs, attrs):
        nonlocal casting
        if casting:
            return inputs
        dtype = policy.cast_dtype(name, inputs, attrs)
        for x in inputs:
            dtypes.setdefault(id(x), set()).add(dtype)
        casting = True
        try:
            return policy(name, inputs, attrs)
        finally:
            casting = False

    with autograd.pause(train_mode=False), applied(record):
        net(*data_example)
    return dtypes


def convert_hybrid_block(block, data_example, target_dtype='float16', target_dtype_ops=None,
                         fp32_ops=None, conditional_fp32_ops=None, excluded_sym_names=None,
                         device=None, cast_params_offline=False):
    """A mixed-precision copy of the float32 HybridBlock `block`, for inference: its operators
    run in `target_dtype` or float32 as the lists say (the defaults of amp.init, or these
    overrides). The copy has its own parameters on `device` (default current_device()) and
    `block` is left unchanged; hybridize the copy to trace the casts into its graph.

    data_example: an ndarray or a list of them, as the block takes; it runs the block once
    (finishing deferred initialization). excluded_sym_names: child blocks (structural names,
    e.g. 'features.3') whose operators all run in float32. cast_params_offline: parameters that
    feed only operators running in `target_dtype` are stored in it, instead of cast at every
    call; parameters of batch_norm and layer_norm stay float32.
    """
    if not isinstance(block, HybridBlock):
        raise TypeError(f"convert_hybrid_block: block must be a HybridBlock, got "
                        f"{type(block).__name__}")
    data_example = list(data_example) if isinstance(data_example, (list, tuple)) \
        else [data_example]
    if not data_example or not all(isinstance(x, ndarray) for x in data_example):
        raise TypeError(f"convert_hybrid_block: data_example must be an ndarray or a non-empty "
                        f"list of ndarrays, got {[type(x).__name__ for x in data_example]}")
    dtype = _target_dtype(target_dtype, "convert_hybrid_block")
    policy = _make_policy("convert_hybrid_block", dtype, target_dtype_ops, fp32_ops,
                          conditional_fp32_ops)
    device = device or current_device()
    with autograd.pause(train_mode=False), applied(None):
        block(*data_example)  # deferred initialization
    net = _copy_block(block, device)
    data_example = [x.to_device(device) for x in data_example]
    kept = set()
    for name in excluded_sym_names or []:
        child = _child(net, name)
        child.forward = _CastingForward(child.forward, Float32Policy(dtype))
        kept.update(id(p) for p in child.collect_params().values())
    if cast_params_offline:
        used = _params_used_in(policy, net, data_example)
        for param in net.collect_params().values():
            if id(param) not in kept and used.get(id(param.data(device))) == {dtype}:
                param.cast(dtype)
    net.forward = _CastingForward(net.forward, policy)
    return net
