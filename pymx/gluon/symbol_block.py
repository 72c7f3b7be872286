"""SymbolBlock: a HybridBlock that runs the graph of a symbol file.

`SymbolBlock.imports('net-symbol.json', ['data'], 'net-0000.params')` loads a model written by
`HybridBlock.export`, pymx's or MXNet's (MXNet 0.x-2.x symbol JSON, with its legacy binary or
.npz parameter file). The block's forward walks the graph, running each node with the pymx
operation of the same meaning (see _mxnet_symbol and _pymx_symbol), so it runs on any device,
records for autograd, and can be hybridized like any other block.

Its parameters are the graph's variables that are not inputs, named as in the file (the
parameter file's 'arg:' / 'aux:' prefixes are stripped on loading). Variables an operator
updates as state (BatchNorm's running mean and variance) and those the parameter file saves
under 'aux:' get grad_req 'null', so training changes them only through the operator itself,
never through the optimizer. Parameters the file does not provide can be initialised with
`initialize()`: their shapes come from the symbol file's `__shape__` annotations or, at the
first forward pass, from their layer's input.

Deliberate differences from MXNet 2.x:
- the constructor takes a symbol graph (a parsed symbol file or its JSON text) and input names
  instead of Symbol objects, as pymx has no Symbol class;
- a parameter the parameter file saves under an 'aux:' key gets grad_req 'null' (in MXNet's
  files these are the operators' state anyway; in pymx's, frozen parameters and constants);
- the label variables of MXNet's training heads (SoftmaxOutput's 'softmax_label', ...) are
  neither inputs nor parameters unless named in `input_names`: inference never reads them;
- in _mxnet_symbol's docstring: the training heads' gradients, LeakyReLU's rrelu and gelu,
  elemwise_* broadcasting.
"""
from collections import Counter

from .. import autograd
from ..device import current_device
from . import _mxnet_symbol, _pymx_symbol
from ._params_file import load_into, load_params_file
from ._symbol_json import SymbolGraph, load_symbol_file, parse_symbol_json
from ._symbol_shapes import PARAM_SHAPES
from .block import HybridBlock, _flatten
from .parameter import Parameter

__all__ = ['SymbolBlock']

# mshadow's type flags, as MXNet writes a variable's `__dtype__`.
_MSHADOW_DTYPES = {'0': 'float32', '1': 'float64', '2': 'float16', '3': 'uint8', '4': 'int32',
                   '5': 'int8', '6': 'int64', '7': 'bool', '8': 'int16', '9': 'uint16',
                   '10': 'uint32', '11': 'uint64', '12': 'bfloat16'}


def _annotated_shape(text):
    """A variable's `__shape__` ("(64, 0, 7, 7)"; 0 or -1 = unknown) as a Parameter shape, or
    None when it says nothing."""
    try:
        dims = tuple(int(d) for d in text.strip('()[] ').split(',') if d.strip())
    except ValueError:
        return None
    return dims if dims else None


class SymbolBlock(HybridBlock):
    """Runs a symbol graph: `symbol` is a parsed symbol file (what _symbol_json.load_symbol_file
    returns) or the JSON text of one; `input_names` (a name or a list) are the variables fed by
    forward's arguments, in order; every other variable is a parameter. `params` ({name:
    Parameter}) shares existing parameters instead of creating new ones.
    """

    def __init__(self, symbol, input_names, params=None):
        super().__init__()
        graph = symbol if isinstance(symbol, SymbolGraph) else parse_symbol_json(symbol)
        self._graph = graph
        self._dialect = _pymx_symbol if graph.dialect == 'pymx' else _mxnet_symbol
        self._input_names = [input_names] if isinstance(input_names, str) else list(input_names)
        self._check_ops()
        # Each node's attribute reader, made once: forward runs every node on every call.
        self._attrs = [_mxnet_symbol.Attrs(node.attrs, node.name, node.op, graph.filename)
                       for node in graph.nodes]
        self._input_slots = self._find_inputs()
        self._variable_params = self._create_params(dict(params) if params else {})
        self._last_use = self._find_last_uses()

    # ---- construction -------------------------------------------------------------------------

    def _check_ops(self):
        graph = self._graph
        for node in graph.nodes:
            if node.op == 'null':
                continue
            if graph.dialect == 'pymx':
                _pymx_symbol.check_op(node.op, node.name, graph.filename)
            elif node.op not in _mxnet_symbol.OPS:
                raise ValueError(f"Operator '{node.op}' of node '{node.name}' in symbol file "
                                 f"'{graph.filename}' is not supported by SymbolBlock")

    def _find_inputs(self):
        """{variable node index: position among forward's arguments}."""
        graph = self._graph
        duplicates = [n for n, count in Counter(self._input_names).items() if count > 1]
        if duplicates:
            raise ValueError(f"input_names {self._input_names} repeat {duplicates}")
        by_name = {graph.nodes[i].name: i for i in graph.variables()}
        unknown = [n for n in self._input_names if n not in by_name]
        if unknown:
            raise ValueError(f"input_names {unknown} are not variables of symbol file "
                             f"'{graph.filename}', whose variables are {sorted(by_name)}")
        return {by_name[name]: position for position, name in enumerate(self._input_names)}

    def _variable_roles(self):
        """(variables that are operator state, variables only ever read as labels)."""
        graph, dialect = self._graph, self._dialect
        aux, label_uses, other_uses = set(), Counter(), Counter()
        for node in graph.nodes:
            aux_slots = dialect.AUX_INPUTS.get(node.op, ())
            label_slots = dialect.LABEL_INPUTS.get(node.op, ())
            for slot, (source, _) in enumerate(node.inputs):
                if graph.nodes[source].op != 'null':
                    continue
                if slot in aux_slots:
                    aux.add(source)
                (label_uses if slot in label_slots else other_uses)[source] += 1
        for source, _ in graph.heads:
            other_uses[source] += 1
        labels = {i for i in label_uses if not other_uses[i]}
        return aux, labels

    def _create_params(self, shared):
        """{variable node index: Parameter}; label-only variables map to None."""
        aux, labels = self._variable_roles()
        variable_params = {}
        for index in self._graph.variables():
            if index in self._input_slots:
                continue
            node = self._graph.nodes[index]
            if index in labels:
                variable_params[index] = None
                continue
            param = shared.get(node.name)
            if param is None:
                notes = node.annotations
                param = Parameter(node.name, grad_req='null' if index in aux else 'write',
                                  shape=_annotated_shape(notes.get('__shape__', '')),
                                  dtype=_MSHADOW_DTYPES.get(notes.get('__dtype__'),
                                                            notes.get('__dtype__', 'float32')),
                                  lr_mult=float(notes.get('__lr_mult__', 1.0)),
                                  wd_mult=float(notes.get('__wd_mult__', 1.0)),
                                  allow_deferred_init=True)
            self._reg_params[node.name] = param
            variable_params[index] = param
        return variable_params

    def _find_last_uses(self):
        """{node index: the last node reading it}, so that forward drops what it no longer
        needs; graph outputs are never dropped."""
        last_use = {}
        for index, node in enumerate(self._graph.nodes):
            for source, _ in node.inputs:
                last_use[source] = index
        for source, _ in self._graph.heads:
            last_use.pop(source, None)
        return last_use

    # ---- loading ------------------------------------------------------------------------------

    @staticmethod
    def imports(symbol_file, input_names, param_file=None, device=None, allow_missing=False,
                ignore_extra=False, ctx=None):
        """A SymbolBlock from a symbol file written by `HybridBlock.export` (pymx's or MXNet's)
        and, when given, its parameter file loaded onto `device` (`ctx` is MXNet 1.x's name for
        it). Parameters keep the dtypes the file saved them in."""
        if ctx is not None:
            if device is not None:
                raise ValueError(f"Give either device or its alias ctx, not both "
                                 f"(device={device}, ctx={ctx})")
            device = ctx
        block = SymbolBlock(load_symbol_file(symbol_file), input_names)
        if param_file is not None:
            loaded = load_params_file(param_file)
            load_into(block.collect_params(), loaded, param_file, device, allow_missing,
                      ignore_extra, cast_dtype=True, dtype_source='saved')
            # What the file keeps as state stays untrained: MXNet's running statistics, and
            # the frozen parameters and captured constants of pymx's exports.
            for key in loaded:
                param = block.params.get(key[4:]) if key.startswith('aux:') else None
                if param is not None:
                    param.grad_req = 'null'
        return block

    # ---- running ------------------------------------------------------------------------------

    def forward(self, *args):
        return self._run(args, self._param_value)

    def _param_value(self, param, node, inputs, slot, device):
        return param.data(device)

    def _run(self, args, param_value):
        """Walks the graph on `args`; `param_value(param, node, inputs, slot, device)` gives the
        value of a parameter read as input `slot` of `node` whose earlier inputs are known."""
        flat, _ = _flatten(list(args), 'input')
        if len(flat) != len(self._input_names) or any(a is None for a in flat):
            raise ValueError(f"SymbolBlock expects {len(self._input_names)} input arrays "
                             f"{self._input_names}, got {len(flat)}")
        graph = self._graph
        device = flat[0].device if flat else current_device()
        with device:  # where nodes without inputs (zeros, ones, ...) create their arrays
            outputs = self._walk(graph, flat, param_value, device)
        return outputs[0] if len(outputs) == 1 else outputs

    def _walk(self, graph, flat, param_value, device):
        values = {}
        for index, node in enumerate(graph.nodes):
            if node.op == 'null':
                slot = self._input_slots.get(index)
                # A parameter is read when a node needs it, once its layer's input is known.
                values[index] = [flat[slot]] if slot is not None else None
                continue
            inputs = []
            for slot, (source, output) in enumerate(node.inputs):
                if values[source] is None:
                    param = self._variable_params[source]
                    inputs.append(None if param is None else
                                  param_value(param, node, inputs, slot, device))
                else:
                    inputs.append(self._output(values, source, output))
            values[index] = self._run_node(index, node, inputs, device)
            for source, _ in node.inputs:
                if self._last_use.get(source) == index:
                    values.pop(source, None)
        return [self._output(values, source, output) if values.get(source) is not None else
                self._variable_params[source].data(device) for source, output in graph.heads]

    def _output(self, values, source, output):
        produced = values[source]
        if output >= len(produced):
            node = self._graph.nodes[source]
            raise ValueError(f"Symbol file '{self._graph.filename}' reads output {output} of "
                             f"node '{node.name}' (op {node.op}), which has {len(produced)}")
        return produced[output]

    def _run_node(self, index, node, inputs, device):
        if self._dialect is _pymx_symbol:
            return _pymx_symbol.run_node(node, inputs, device)
        return _mxnet_symbol.OPS[node.op](inputs, self._attrs[index])

    # ---- deferred initialisation --------------------------------------------------------------

    def infer_shape(self, *args):
        """Runs the graph once in predict mode, without recording, finishing each parameter's
        deferred initialisation when its layer is reached: its shape comes from the layer's
        data input (see _symbol_shapes)."""
        with autograd.pause(train_mode=False):
            self._run(args, self._initialised_param_value)

    def _initialised_param_value(self, param, node, inputs, slot, device):
        if param._deferred_init and (param.shape is None or any(d <= 0 for d in param.shape)):
            rule = PARAM_SHAPES.get(node.op)
            attrs = _mxnet_symbol.Attrs(node.attrs, node.name, node.op, self._graph.filename)
            shape = rule(inputs[0].shape, attrs).get(slot) if rule and inputs else None
            if shape is None:
                raise ValueError(f"The shape of parameter '{param.name}' (input {slot} of node "
                                 f"'{node.name}', op {node.op}) is not in the symbol file and "
                                 f"cannot be inferred; load it from a parameter file")
            param.shape = shape
        param._finish_deferred_init()
        return param.data(device)
