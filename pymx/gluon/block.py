"""Block and HybridBlock: the Gluon 2 model containers.

A Block registers the Blocks and Parameters assigned to its attributes; `collect_params()` names
them structurally ('conv1.0.weight'). A HybridBlock can be hybridized: its `forward` is traced once
per input signature into a native graph and replayed from then on (see Note [Hybridize]).
"""
import json
import re
import threading
import warnings
from collections import OrderedDict

from .. import autograd
from .. import initializer as _init
from ..base import dtype_name
from .._c import autograd as _c_graph
from ..ndarray import ndarray
from ._mxnet_export import NoMxnetEquivalent, to_mxnet
from ._params_file import load_into, load_params_file, save_npz
from .parameter import Parameter, ParameterDict

__all__ = ['Block', 'HybridBlock']


class _HookHandle:
    """Returned by register_forward_hook; `detach()` removes the hook."""

    def __init__(self, hooks, hook):
        self._hooks = hooks
        self._id = id(hook)
        hooks[self._id] = hook

    def detach(self):
        self._hooks.pop(self._id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()


def _flatten(args, what):
    """Flattens nested lists/tuples of arrays into (flat list, format) for regrouping."""
    if isinstance(args, ndarray):
        return [args], int(0)
    if args is None:
        return [None], int(-1)
    if not isinstance(args, (list, tuple)):
        raise ValueError(f"HybridBlock {what} must be (nested) list of ndarray, but got {args} of "
                         f"type {type(args).__name__}")
    flat, fmts = [], []
    for item in args:
        sub, fmt = _flatten(item, what)
        flat.extend(sub)
        fmts.append(fmt)
    return flat, fmts


def _regroup(flat, fmt):
    """Inverse of _flatten: returns (structure, remaining flat items)."""
    if isinstance(fmt, int):
        if fmt == 0:
            return flat[0], flat[1:]
        return None, flat[1:]
    out = []
    for sub in fmt:
        item, flat = _regroup(flat, sub)
        out.append(item)
    return out, flat


def _shapes_agree(a, b):
    """Whether two Parameter shapes can describe the same array (-1: not known yet)."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


class _TraceState(threading.local):
    active = False  # a class default: reading it on a new thread needs no getattr fallback


_trace_state = _TraceState()


def _is_tracing():
    return _trace_state.active


class _CachedGraph:
    """A traced forward pass: a native graph over [data arrays..., parameter arrays...].

    See Note [Hybridize]."""

    def __init__(self, graph, num_data, params, out_format, device):
        self.graph = graph
        self.num_data = num_data
        self.params = params
        self.out_format = out_format
        self.device = device
        self._param_lists = None  # each parameter's `_data` list when _param_arrays was built
        self._param_arrays = None

    @classmethod
    def trace(cls, block, args, arrays, params, device, static_alloc):
        """Runs block's forward imperatively while tracing it; returns (cached graph, outputs),
        or (the reason, outputs) when an operation in forward stopped the trace."""
        param_arrays = [p.data(device) for p in params]
        _c_graph.trace_begin(list(arrays) + param_arrays)
        _trace_state.active = True
        try:
            out = block.forward(*args)
            flat, out_format = _flatten(out, 'output')
            if any(o is None for o in flat):
                raise ValueError("HybridBlock outputs must be ndarrays (or nested lists of them), "
                                 "got None")
        except BaseException:
            _trace_state.active = False
            _c_graph.trace_abort()
            autograd._take_trace_stop()
            raise
        _trace_state.active = False
        stopped = autograd._take_trace_stop()
        if stopped is not None:  # forward ran on imperatively (see Note [Hybridize])
            return stopped, out
        graph = _c_graph.trace_end(flat)
        graph.static_alloc = static_alloc
        return cls(graph, len(arrays), params, out_format, device), out

    def param_arrays(self):
        """The parameters' arrays on this graph's device, cached: a Parameter replaces its
        `_data` list whenever its arrays change (initialisation, reset_device, cast, loading,
        detach), so an unchanged list means unchanged arrays."""
        lists = self._param_lists
        if lists is None or any(p._data is not d for p, d in zip(self.params, lists)):
            self._param_arrays = [p.data(self.device) for p in self.params]
            self._param_lists = [p._data for p in self.params]
        return self._param_arrays

    def run(self, arrays):
        outputs = self.graph.run(arrays + self.param_arrays())
        if self.out_format == 0:
            return outputs[0]
        return _regroup(outputs, self.out_format)[0]


class Block:
    """Base class of all layers and models. Override `forward(self, *args)`."""

    def __init__(self):
        self._children = OrderedDict()
        self._reg_params = OrderedDict()
        self._forward_hooks = OrderedDict()
        self._forward_pre_hooks = OrderedDict()

    def __repr__(self):
        lines = [f'{self.__class__.__name__}(']
        for key, block in self._children.items():
            child = repr(block).replace('\n', '\n  ')
            lines.append(f'  ({key}): {child}')
        return '\n'.join(lines) + '\n)' if self._children else f'{self.__class__.__name__}()'

    def __setattr__(self, name, value):
        """Registers Blocks and Parameters assigned as attributes."""
        existing = self.__dict__.get(name)
        if existing is not None and isinstance(existing, (Block, Parameter)) and \
                not isinstance(value, type(existing)):
            raise TypeError(f"Changing attribute type for {name} from {type(existing)} to "
                            f"{type(value)} is not allowed.")
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            self._reg_params[name] = value
        super().__setattr__(name, value)

    def register_child(self, block, name=None):
        """Registers `block` as a child named `name` (default: its position)."""
        if not isinstance(block, Block):
            raise TypeError(f"{type(self).__name__}: a child must be a Block, got "
                            f"{type(block).__name__} {block!r}")
        if name is None:
            name = str(len(self._children))
        self._children[name] = block

    @property
    def params(self):
        """This block's own Parameters (not its children's)."""
        return self._reg_params

    def _check_container_with_block(self):
        def has_block(value):
            if isinstance(value, (list, tuple)):
                return any(isinstance(v, Block) or has_block(v) for v in value)
            if isinstance(value, dict):
                return any(isinstance(v, Block) or has_block(v) for v in value.values())
            return False

        for name, value in self.__dict__.items():
            if not name.startswith('_') and has_block(value):
                warnings.warn(f'"{name}" is an unregistered container with Blocks. Note that '
                              f'Blocks inside the list, tuple or dict will not be registered '
                              f'automatically. Make sure to register them using register_child() '
                              f'or switching to nn.Sequential/nn.HybridSequential instead. ',
                              stacklevel=3)

    def collect_params(self, select=None):
        """{structural name: Parameter} of this block and its descendants.

        `select` is a regular expression matched (re.match) against the full name.
        """
        self._check_container_with_block()
        try:
            pattern = re.compile(select) if select else None
        except re.error as e:
            raise ValueError(f"collect_params: select {select!r} is not a valid regular "
                             f"expression: {e}") from None
        out = ParameterDict()
        self._collect_params_with_prefix('', pattern, out)
        return out

    def _collect_params_with_prefix(self, prefix, pattern, out):
        for key, param in self._reg_params.items():
            name = prefix + key
            if pattern is None or pattern.match(name):
                out[name] = param
        for key, child in self._children.items():
            child._collect_params_with_prefix(prefix + key + '.', pattern, out)

    def share_parameters(self, shared):
        """Uses the Parameters of `shared` ({structural name: Parameter}, as collect_params()
        returns) in place of this block's own of the same names; returns self.

        A shared Parameter's shape must agree with the one it replaces (dims still unknown agree
        with any); names that match nothing here are warned about, as MXNet does.
        """
        if shared is None:
            return self
        if not isinstance(shared, dict):
            raise ValueError(f"'shared' should be in type of Dict. Get type {type(shared)}!")
        unused = set(shared)
        self._share_parameters_with_prefix('', shared, unused)
        for name in sorted(unused):
            warnings.warn(f"Parameter name {name} is not in the current model!", stacklevel=2)
        self.apply(lambda block: isinstance(block, HybridBlock) and block._clear_cached_op())
        return self

    def _share_parameters_with_prefix(self, prefix, shared, unused):
        for key, own in list(self._reg_params.items()):
            name = prefix + key
            if shared.get(name) is None:
                continue
            other = shared[name]
            if not isinstance(other, Parameter):
                raise TypeError(f"share_parameters: '{name}' must map to a Parameter, got "
                                f"{type(other).__name__}")
            if not _shapes_agree(own.shape, other.shape):
                raise ValueError(f"share_parameters: Parameter '{name}' has shape {own.shape} "
                                 f"here but the shared one has shape {other.shape}")
            setattr(self, key, other)
            unused.discard(name)
        for key, child in self._children.items():
            child._share_parameters_with_prefix(prefix + key + '.', shared, unused)

    def apply(self, fn):
        """Calls fn(block) on every descendant, then on this block."""
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    def initialize(self, init=None, device=None, verbose=False, force_reinit=False):
        """Initialises every parameter (a parameter's own initializer takes precedence).

        `device` is a Device or a list of Devices (one copy each); default current_device().
        """
        self.collect_params().initialize(init if init is not None else _init.Uniform(), device,
                                         verbose, force_reinit)

    def zero_grad(self):
        """Sets every gradient buffer to 0."""
        self.collect_params().zero_grad()

    def reset_device(self, device):
        """Moves every parameter to `device` (a Device or list)."""
        self.collect_params().reset_device(device)

    reset_ctx = reset_device

    def cast(self, dtype):
        """Casts every parameter to `dtype`."""
        for child in self._children.values():
            child.cast(dtype)
        for param in self._reg_params.values():
            param.cast(dtype)

    def hybridize(self, active=True, **kwargs):
        """A plain Block cannot be traced; hybridizes its HybridBlock descendants."""
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def register_forward_pre_hook(self, hook):
        """hook(block, inputs) runs before forward. Returns a handle with detach()."""
        return _HookHandle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        """hook(block, inputs, outputs) runs after forward. Returns a handle with detach()."""
        return _HookHandle(self._forward_hooks, hook)

    def __call__(self, *args):
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, args)
        out = self.forward(*args)
        for hook in list(self._forward_hooks.values()):
            hook(self, args, out)
        return out

    def forward(self, *args):
        raise NotImplementedError(f"{self.__class__.__name__} must implement forward")

    # ---- files --------------------------------------------------------------------------------

    def save_parameters(self, filename, deduplicate=False):
        """Writes every parameter (averaged over devices, on the CPU) to an .npz file, atomically.

        With `deduplicate`, a shared Parameter is written once, under its first name.
        """
        params = self.collect_params()
        if deduplicate:
            first_names = {}
            for name, param in params.items():
                first_names.setdefault(id(param), name)
            params = {name: p for name, p in params.items() if first_names[id(p)] == name}
        arrays = {name: param._reduce()._host_values() for name, param in params.items()}
        save_npz(filename, arrays)

    def load_parameters(self, filename, device=None, allow_missing=False, ignore_extra=False,
                        cast_dtype=False, dtype_source='current'):
        """Loads parameters saved by save_parameters (.npz) or by MXNet (.npz or legacy binary).

        `device`: a Device or list to place uninitialised parameters on (default
        current_device()); initialised parameters keep their devices when it is None.
        """
        loaded = load_params_file(filename)
        self._rename_loaded_parameters(loaded, '')
        load_into(self.collect_params(), loaded, filename, device, allow_missing, ignore_extra,
                  cast_dtype, dtype_source)

    def load_dict(self, param_dict, device=None, allow_missing=False, ignore_extra=False,
                  cast_dtype=False, dtype_source='current'):
        """Loads {structural name: array} (pymx or NumPy arrays, e.g. what npx.load returns)
        into this block's parameters, with load_parameters' checks and arguments. A bfloat16
        array arrives as its float32 values, so loading it into a bfloat16 parameter needs
        cast_dtype=True."""
        if not isinstance(param_dict, dict):
            raise TypeError(f"load_dict: param_dict must be a dict of arrays, got "
                            f"{type(param_dict).__name__}")
        loaded = {name: value.asnumpy() if isinstance(value, ndarray) else value
                  for name, value in param_dict.items()}
        self._rename_loaded_parameters(loaded, '')
        load_into(self.collect_params(), loaded, '<dict>', device, allow_missing, ignore_extra,
                  cast_dtype, dtype_source)

    def _rename_loaded_parameters(self, loaded, prefix):
        """Renames, in place, the entries of `loaded` ({structural name: numpy array}) that
        files written by MXNet name differently from this block; `prefix` is this block's
        structural name prefix. Blocks whose MXNet twins store their parameters under other
        names (the recurrent layers) override it."""
        for key, child in self._children.items():
            child._rename_loaded_parameters(loaded, prefix + key + '.')

    # ---- summary ------------------------------------------------------------------------------

    def summary(self, *inputs):
        """Runs `inputs` through the network and prints each layer's output shape and parameter
        count (MXNet's table). The block must not be hybridized."""
        summary = OrderedDict()
        seen = set()
        hooks = []

        def shape_str(value):
            if isinstance(value, ndarray):
                return str(value.shape)
            if isinstance(value, (list, tuple)):
                return ', '.join(shape_str(v) for v in value)
            return str(value)

        def register(block):
            if isinstance(block, HybridBlock) and block._active:
                raise RuntimeError(f'"{block.__class__.__name__}" must not be hybridized to print '
                                   f'summary.')

            def hook(block, _, outputs):
                key = f'{block.__class__.__name__}-{len(summary)}'
                entry = summary[key] = {'output_shape': shape_str(outputs), 'n_params': 0,
                                        'trainable': 0, 'shared': 0}
                for param in block.params.values():
                    size = param.list_data()[0].size  # any copy: the net may be on several devices
                    entry['n_params'] += size
                    entry['trainable'] += 0 if param.grad_req == 'null' else size
                    if id(param) in seen:
                        entry['shared'] += size
                    seen.add(id(param))

            from .nn.basic_layers import HybridSequential, Sequential
            if not isinstance(block, (Sequential, HybridSequential)):
                hooks.append(block.register_forward_hook(hook))

        summary['Input'] = {'output_shape': shape_str(list(inputs) if len(inputs) > 1
                                                      else inputs[0]),
                            'n_params': 0, 'trainable': 0, 'shared': 0}
        try:
            self.apply(register)
            self(*inputs)
            line_format = '{:>20}  {:>42} {:>15}'
            print('-' * 80)
            print(line_format.format('Layer (type)', 'Output Shape', 'Param #'))
            print('=' * 80)
            total = trainable = shared = 0
            for layer, entry in summary.items():
                print(line_format.format(layer, entry['output_shape'], entry['n_params']))
                total += entry['n_params']
                trainable += entry['trainable']
                shared += entry['shared']
            print('=' * 80)
            print('Parameters in forward computation graph, duplicate included')
            print('   Total params: ' + str(total))
            print('   Trainable params: ' + str(trainable))
            print('   Non-trainable params: ' + str(total - trainable))
            print('Shared params in forward computation graph: ' + str(shared))
            print('Unique parameters in model: ' + str(total - shared))
            print('-' * 80)
        finally:
            for handle in hooks:
                handle.detach()


class HybridBlock(Block):
    """A Block whose `forward` uses only pymx.np / npx operations, so it can be hybridized."""

    def __init__(self):
        if hasattr(self, 'hybrid_forward'):
            raise ValueError("'forward' instead of 'hybrid_forward' interface needs to be used "
                             "starting from Gluon2.0.")
        super().__init__()
        self._active = False
        self._flags = {}
        self._called_infer_shape_already = False
        self._cached_graphs = {}
        self._untraced = {}  # input signature -> why forward cannot be traced for it

    def register_child(self, block, name=None):
        if not isinstance(block, HybridBlock):
            raise ValueError(f"Children of HybridBlock must also be HybridBlock, but {block} has "
                             f"type {type(block)}. If you are using Sequential, please try "
                             f"HybridSequential instead.")
        super().register_child(block, name)
        self._clear_cached_op()

    def _clear_cached_op(self):
        self._cached_graphs = {}
        self._untraced = {}

    def hybridize(self, active=True, static_alloc=False, static_shape=False, **kwargs):
        """Traces `forward` into a native graph at the next call (per input signature) and
        replays it afterwards. With `static_alloc` the graph keeps its output buffers between
        calls and reuses those nothing else holds (no allocation in a steady loop; memory stays
        reserved). `static_shape` is accepted for compatibility: a graph is traced per input
        shape anyway."""
        self._active = active
        self._flags = dict(static_alloc=static_alloc, static_shape=static_shape, **kwargs)
        self._clear_cached_op()
        if active and (self._forward_hooks or self._forward_pre_hooks):
            warnings.warn(f'"{self.__class__.__name__}" is being hybridized while still having '
                          f'forward hook/pre-hook. If "{self.__class__.__name__}" is a child of '
                          f'HybridBlock, the hooks will not take effect.', stacklevel=2)
        super().hybridize(active, static_alloc=static_alloc, static_shape=static_shape, **kwargs)

    def cast(self, dtype):
        self._clear_cached_op()
        super().cast(dtype)

    def reset_device(self, device):
        self._clear_cached_op()
        super().reset_device(device)

    reset_ctx = reset_device

    def infer_shape(self, *args):
        """Sets unknown parameter shapes from the inputs. Layers with deferred parameters
        override it; the default fails when a parameter's shape is unknown."""
        unknown = [p.name for p in self._reg_params.values()
                   if p.shape is None or any(d <= 0 for d in p.shape)]
        if unknown:
            raise RuntimeError(f"{self.__class__.__name__} has parameters with unknown shape "
                               f"({', '.join(unknown)}). You need to either specify the shape in "
                               f"__init__ or implement {self.__class__.__name__}.infer_shape to "
                               f"set the parameter shapes based on the first input.")

    def _finish_own_deferred_init(self, args):
        unknown = any(p.shape is None or any(d <= 0 for d in p.shape)
                      for p in self._reg_params.values())
        if unknown:
            try:
                self.infer_shape(*args)
            except Exception as err:
                raise ValueError(f"Deferred initialization failed because shape cannot be "
                                 f"inferred. {err}") from err
        for param in self._reg_params.values():
            param._finish_deferred_init()
        self._called_infer_shape_already = True

    def __call__(self, *args):
        if not self._called_infer_shape_already:
            self._finish_own_deferred_init(args)
        if not self._active or _is_tracing():
            return super().__call__(*args)
        return self._call_cached_graph(*args)

    # ---- hybridize ----------------------------------------------------------------------------

    # Note [Hybridize]
    # ~~~~~~~~~~~~~~~~
    # The first call with a given input signature (the nesting of the arguments (arrays, lists
    # of arrays, None) and each array's shape, dtype and device) traces `forward` into a
    # native graph: the graph's inputs are the argument arrays followed by the arrays of every
    # parameter on that device, and its outputs are forward's (flattened) outputs. Later calls
    # with that signature replay the graph with the current argument and parameter arrays, so
    # reset_device / load_parameters / optimizer updates are seen. Train mode is not part of the
    # signature: the replay runs dropout and batch norm in the mode current at the call, and
    # records itself for autograd when recording. Parameters still waiting for deferred
    # initialisation are finished first by one imperative pass in predict mode (no running-stat
    # updates, no dropout), so no initialisation op ends up inside a graph. A replay is the
    # per-call hot path (batch-1 inference): a single-array call skips the generic signature
    # walk, and the parameter arrays are cached per graph (see _CachedGraph.param_arrays).
    # hybridize(static_alloc=True) lets the native graph keep and reuse its output buffers
    # across calls (Note [Static allocation] in engine/src/graph.cc). An operation that runs
    # Python code (npx.custom), and reading an array's values on the host (asnumpy, item,
    # bool(): data-dependent control flow, or results such as np.unique's computed on the host,
    # which a graph would replay as constants), stop the trace when they are reached
    # (autograd._stop_tracing): forward goes on imperatively, and the block runs imperatively
    # for that signature from then on, with a warning; its children are still called through
    # their own __call__, so those that do not reach such an operation are hybridized on their
    # own. Printing an array leaves the trace running.

    def _signature(self, args):
        """(cache key, flat list of the argument arrays, their device)."""
        if len(args) == 1 and isinstance(args[0], ndarray):  # the common case, kept cheap
            array = args[0]
            device = array.device
            return (0, array.shape, array.dtype, device), [array], device
        for value in args:
            if value is not None and not isinstance(value, (ndarray, list, tuple)):
                raise ValueError(f"HybridBlock inputs must be ndarrays (or nested lists of "
                                 f"them), got {type(value).__name__}")
        flat, fmt = _flatten(list(args), 'input')
        arrays = [a for a in flat if a is not None]
        if not arrays:
            raise ValueError(f"All args are None and we do not support such a case. Received "
                             f"args={args}")
        devices = {a.device for a in arrays}
        if len(devices) > 1:
            raise ValueError(f"Find multiple devices in the input, After hybridized, the "
                             f"HybridBlock only supports one input device. Found devices "
                             f"{sorted(str(d) for d in devices)}")
        device = arrays[0].device
        key = (repr(fmt), tuple((a.shape, a.dtype) for a in arrays), device)
        return key, arrays, device

    def _pending_deferred(self):
        return any(p._deferred_init for p in self.collect_params().values())

    def _call_cached_graph(self, *args):
        key, arrays, device = self._signature(args)
        cached = self._cached_graphs.get(key)
        if cached is not None:
            return cached.run(arrays)
        if key in self._untraced:
            return Block.__call__(self, *args)
        if self._pending_deferred():
            with autograd.pause(train_mode=False):
                with device:
                    Block.__call__(self, *args)
        params = self._unique_params()
        with device:
            cached, out = _CachedGraph.trace(self, args, arrays, params, device,
                                             bool(self._flags.get('static_alloc', False)))
        if isinstance(cached, str):
            self._untraced[key] = cached
            warnings.warn(f"{self.__class__.__name__} runs imperatively although hybridized: "
                          f"its forward calls {cached}", stacklevel=3)
            return out
        self._cached_graphs[key] = cached
        return out

    def _unique_params(self):
        seen, params = set(), []
        for p in self.collect_params().values():
            if id(p) not in seen and p._data is not None:
                seen.add(id(p))
                params.append(p)
        return params

    def export(self, path, epoch=0):
        """Writes `path-symbol.json` (the traced graph) and `path-%04d.params` (arg:/aux:
        prefixed parameters). Needs a hybridized block that has run forward once.

        The graph is written as MXNet symbol JSON (MXNet 1.9's operator names and attributes,
        see _mxnet_export), which MXNet and gluon.SymbolBlock.imports both load; a graph with
        an operation MXNet cannot express is written in pymx's own graph format instead, with
        a warning, and only SymbolBlock.imports loads it. Arrays the trace read without
        computing them (captured constants) are saved as 'aux:const<i>'. The parameter file is
        an .npz, as MXNet 2.x writes."""
        if not self._cached_graphs and self._untraced:
            raise RuntimeError(f"{self.__class__.__name__} cannot be exported: its forward "
                               f"calls {next(iter(self._untraced.values()))}, which a graph "
                               f"cannot hold, so it runs imperatively")
        if not self._cached_graphs:
            raise RuntimeError("Please first call block.hybridize() and then run forward with "
                               "this block at least once before calling export.")
        cached = next(iter(self._cached_graphs.values()))
        names = {id(p): name for name, p in self.collect_params().items()}
        input_names = ['data'] if cached.num_data == 1 else \
            [f'data{i}' for i in range(cached.num_data)]
        param_names = [names[id(p)] for p in cached.params]
        constants = cached.graph.constants
        constant_names = [f'const{i}' for i in range(len(constants))]
        clashes = sorted(set(constant_names) & set(param_names))
        if clashes:
            raise ValueError(f"export names the graph's captured constants {clashes}, which are "
                             f"also parameter names; rename those parameters")
        # The native JSON names graph input i 'data<i>'; give inputs MXNet's names.
        symbol = json.loads(cached.graph.to_json())
        renames = {f'data{i}': name for i, name in enumerate(input_names + param_names)}
        for node in symbol['nodes']:
            if node['op'] == 'null' and node['name'] in renames:
                node['name'] = renames[node['name']]
        arrays = {}
        for name, p in zip(param_names, cached.params):
            prefix = 'aux:' if p.grad_req == 'null' else 'arg:'
            arrays[prefix + name] = p._reduce()._host_values()
        for name, constant in zip(constant_names, constants):
            arrays['aux:' + name] = constant.asnumpy()
        variables = {key[4:]: (value.shape, dtype_name(value.dtype))
                     for key, value in arrays.items()}
        try:
            symbol = to_mxnet(symbol, variables)
        except NoMxnetEquivalent as err:
            warnings.warn(f"HybridBlock.export: {err}; '{path}-symbol.json' is written in pymx's "
                          f"own graph format, which gluon.SymbolBlock.imports reads and MXNet "
                          f"does not", stacklevel=2)
        with open(f'{path}-symbol.json', 'w') as f:
            json.dump(symbol, f, indent=2)
        save_npz(f'{path}-{epoch:04d}.params', arrays)
