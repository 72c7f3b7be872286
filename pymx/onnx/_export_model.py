"""`export_model`: a symbol graph and its parameters to an ONNX model file."""
import logging
import numbers
import os

import numpy as _onp

from .._atomic_file import write_atomically
from ..base import __version__
from ..gluon._params_file import load_params_file
from ._converter import Converter, TRANSLATIONS
from ._symbol import load_graph
from . import _nn_ops, _tensor_ops  # noqa: F401  (they register the translations)

__all__ = ['export_model', 'get_operator_support']

_log = logging.getLogger(__name__)
DEFAULT_OPSET = 13
MIN_OPSET = 13
# large_model: initializers of at least this many bytes go to the external data file.
_EXTERNAL_DATA_MIN_BYTES = 1024


def _import_onnx():
    try:
        import onnx
        import onnx.checker
        import onnx.external_data_helper
        import onnx.numpy_helper
        import onnx.shape_inference
    except ImportError as err:
        raise ImportError("pymx.onnx needs the 'onnx' package: pip install 'pymx[onnx]' "
                          f"(import failed: {err})") from err
    return onnx


def get_operator_support(opset_version=None):
    """The sorted names of the MXNet operators export_model translates. `opset_version` is
    MXNet's argument; every opset export_model writes translates the same operators."""
    return sorted(TRANSLATIONS)


def _as_numpy(name, value):
    if isinstance(value, _onp.ndarray):
        return value
    if hasattr(value, 'asnumpy'):
        return value.asnumpy()
    raise TypeError(f"export_model: parameter '{name}' is a {type(value).__name__}; expected a "
                    f"pymx or numpy array")


def _load_params(params):
    """{name: numpy array} from a params file path, a dict or an [arg_params, aux_params]
    pair; MXNet's 'arg:' and 'aux:' prefixes are dropped."""
    if isinstance(params, (str, os.PathLike)):
        raw = load_params_file(params)
    elif isinstance(params, dict):
        raw = params
    elif isinstance(params, (list, tuple)) and len(params) == 2 and \
            all(isinstance(p, dict) for p in params):
        raw = {**params[0], **params[1]}
    else:
        raise TypeError(f"export_model: params must be a params file path, a dict of name -> "
                        f"array or [arg_params, aux_params]; got {type(params).__name__}")
    out = {}
    for key, value in raw.items():
        name = key[4:] if key.startswith(('arg:', 'aux:')) else key
        out[name] = _as_numpy(key, value)
    return out


def _opset(onnx, opset_version):
    newest = onnx.defs.onnx_opset_version()
    opset = DEFAULT_OPSET if opset_version is None else opset_version
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise ValueError(f"export_model: opset_version={opset_version!r}; this exporter writes "
                         f"opsets {MIN_OPSET} to {newest} (the installed onnx's newest)")
    return opset


def _input_specs(graph, params, in_shapes, in_types, dynamic, dynamic_input_shapes):
    """[(name, concrete shape, declared shape, numpy dtype)] for the graph inputs: the
    variables that `params` does not hold, in file order."""
    names = [graph.nodes[i].name for i in graph.variables() if graph.nodes[i].name not in params]
    if in_shapes is None:
        raise ValueError(f"export_model: in_shapes is required; the graph's inputs are {names}")
    in_shapes = [_checked_shape(s) for s in in_shapes]
    if len(in_shapes) != len(names):
        raise ValueError(f"export_model: in_shapes has {len(in_shapes)} shape(s) {in_shapes} but "
                         f"the graph has {len(names)} input(s) not in params: {names}; a "
                         f"parameter missing from params counts as an input")
    if not isinstance(in_types, (list, tuple)):
        in_types = [in_types] * len(names)
    if len(in_types) != len(names):
        raise ValueError(f"export_model: in_types has {len(in_types)} entries but the graph has "
                         f"{len(names)} input(s): {names}")
    declared = in_shapes
    if dynamic:
        declared = [(None,) * len(s) for s in in_shapes] if dynamic_input_shapes is None \
            else [tuple(s) for s in dynamic_input_shapes]
        if len(declared) != len(names) or \
                any(len(d) != len(s) for d, s in zip(declared, in_shapes)):
            raise ValueError(f"export_model: dynamic_input_shapes {declared} must give one shape "
                             f"of the same rank for each of in_shapes {in_shapes}")
    return [(name, shape, decl, _onp.dtype(dtype))
            for name, shape, decl, dtype in zip(names, in_shapes, declared, in_types)]


def _checked_shape(shape):
    """`shape` as a tuple of ints >= 0; anything else raises ValueError naming it."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"export_model: each of in_shapes must be a tuple of sizes, got "
                         f"{shape!r}") from None
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0
               for d in dims):
        raise ValueError(f"export_model: in_shapes holds {dims}; sizes must be integers >= 0")
    return tuple(int(d) for d in dims)


def _value_info(onnx, name, shape, dtype):
    dims = None if shape is None else \
        [f'{name}_dim{j}' if d is None else int(d) for j, d in enumerate(shape)]
    return onnx.helper.make_tensor_value_info(
        name, onnx.helper.np_dtype_to_tensor_dtype(_onp.dtype(dtype)), dims)


def _translate(cv, graph, params, input_names):
    """Adds every operator node of `graph` to `cv`; returns the ONNX names of the heads and
    the parameter names the graph reads."""
    names = {}  # (node index, output index) -> ONNX tensor name
    used_params = []
    for index, node in enumerate(graph.nodes):
        if node.op == 'null':
            names[(index, 0)] = node.name
            if node.name in params:
                used_params.append(node.name)
            continue
        translate = TRANSLATIONS.get(node.op)
        if translate is None:
            raise NotImplementedError(
                f"export_model: node '{node.name}' runs operator '{node.op}', which has no ONNX "
                f"translation (pymx.onnx.get_operator_support() lists those that have)")
        inputs = []
        for source, output in node.inputs:
            if (source, output) not in names:
                raise NotImplementedError(
                    f"export_model: node '{node.name}' reads output {output} of node "
                    f"'{graph.nodes[source].name}' ({graph.nodes[source].op}), which the ONNX "
                    f"translation does not produce")
            inputs.append(names[(source, output)])
        outputs = translate(cv, node, inputs)
        _log.info("export_model: %s '%s' -> %s", node.op, node.name, outputs)
        for output, name in enumerate(outputs):
            names[(index, output)] = name
    heads = []
    for source, output in graph.heads:
        if (source, output) not in names:
            raise NotImplementedError(f"export_model: the graph outputs output {output} of node "
                                      f"'{graph.nodes[source].name}', which the ONNX translation "
                                      f"does not produce")
        head = names[(source, output)]
        # ONNX outputs need distinct names made by nodes; a repeated or variable head gets one.
        if head in heads or head in params or head in input_names:
            head = cv.add('Identity', [head], f'{head}_output')
        heads.append(head)
    return heads, used_params


def _externalize(onnx, model, data_location):
    """Moves the initializers of at least _EXTERNAL_DATA_MIN_BYTES into one blob, pointing
    each at its offset in `data_location` (ONNX's external data); returns the blob."""
    blob = bytearray()
    for tensor in model.graph.initializer:
        if tensor.HasField('raw_data') and len(tensor.raw_data) >= _EXTERNAL_DATA_MIN_BYTES:
            raw = tensor.raw_data
            onnx.external_data_helper.set_external_data(tensor, data_location, offset=len(blob),
                                                        length=len(raw))
            tensor.data_location = onnx.TensorProto.EXTERNAL
            tensor.ClearField('raw_data')
            blob += raw
    return bytes(blob)


def export_model(sym, params, in_shapes=None, in_types=_onp.float32,
                 onnx_file_path='model.onnx', verbose=False, dynamic=False,
                 dynamic_input_shapes=None, run_shape_inference=False, input_type=None,
                 input_shape=None, large_model=False, opset_version=None):
    """Writes the model `sym` with parameters `params` to `onnx_file_path` as ONNX; returns
    the path.

    Parameters
    ----------
    sym : str, path, dict or SymbolGraph
        The symbol file `HybridBlock.export` wrote (`<prefix>-symbol.json`), its JSON text or
        parsed document, or a SymbolGraph.
    params : str, path, dict or [dict, dict]
        The params file `HybridBlock.export` wrote, or {name: array} (pymx or numpy arrays; the
        `arg:` and `aux:` prefixes are accepted), or [arg_params, aux_params].
    in_shapes : list of tuple
        The shape of each graph input (the variables not in `params`, in file order).
    in_types : dtype or list of dtype
        The element type of each input (one for all, or one each).
    onnx_file_path : str
        Where to write the model. The file is replaced atomically: a failed export leaves an
        existing file as it was.
    verbose : bool
        Logs each translated node (logging.INFO, logger 'pymx.onnx._export_model').
    dynamic : bool
        Declares the inputs with the dimensions `dynamic_input_shapes` gives, None being a
        dynamic one (all of them when dynamic_input_shapes is None). Translations that need
        shapes (MXNet's reshape codes, split sizes) resolve them from `in_shapes`.
    dynamic_input_shapes : list of tuple
        One shape per input, None for a dynamic dimension.
    run_shape_inference : bool
        Stores the shapes ONNX shape inference finds for every tensor in the model.
    input_type, input_shape :
        The older names of in_types and in_shapes.
    large_model : bool
        Stores the weights (initializers of 1 KiB or more) in `<onnx_file_path>.data` beside
        the model, as ONNX external data, which lifts protobuf's 2 GiB limit.
    opset_version : int
        The ONNX opset to write, 13 (the default) to the installed onnx's newest.
    """
    onnx = _import_onnx()
    if input_type is not None:
        in_types = input_type
    if input_shape is not None:
        in_shapes = input_shape
    if verbose:
        logging.basicConfig(level=logging.INFO)
        _log.setLevel(logging.INFO)
    opset = _opset(onnx, opset_version)
    graph = load_graph(sym)
    params = _load_params(params)
    specs = _input_specs(graph, params, in_shapes, in_types, dynamic, dynamic_input_shapes)
    input_names = [name for name, _, _, _ in specs]
    cv = Converter(onnx, opset, params,
                   [_value_info(onnx, name, shape, dtype) for name, shape, _, dtype in specs])
    heads, used_params = _translate(cv, graph, params, input_names)

    # A dynamic model's outputs have their rank, their sizes unnamed.
    outputs = [_value_info(onnx, head, cv.shape(head), cv.dtype(head)) if not dynamic else
               onnx.helper.make_tensor_value_info(
                   head, onnx.helper.np_dtype_to_tensor_dtype(cv.dtype(head)),
                   [None] * cv.rank(head))
               for head in heads]
    # A parameter a translation replaced (BatchNorm's gamma under fix_gamma) is left out.
    read = {name for node in cv.nodes for name in node.input} | set(heads)
    initializers = [onnx.numpy_helper.from_array(params[name], name) for name in used_params
                    if name in read]
    onnx_graph = onnx.helper.make_graph(
        cv.nodes, os.path.splitext(os.path.basename(os.fspath(onnx_file_path)))[0] or 'pymx',
        [_value_info(onnx, name, declared, dtype) for name, _, declared, dtype in specs],
        outputs, initializer=initializers + cv.initializers)
    model = onnx.helper.make_model(onnx_graph, producer_name='pymx',
                                   producer_version=__version__,
                                   opset_imports=[onnx.helper.make_opsetid('', opset)])
    if run_shape_inference:
        model = onnx.shape_inference.infer_shapes(model)
    if not large_model:
        onnx.checker.check_model(model)
        write_atomically(onnx_file_path, lambda f: f.write(model.SerializeToString()))
        return onnx_file_path
    data_path = os.fspath(onnx_file_path) + '.data'
    blob = _externalize(onnx, model, os.path.basename(data_path))
    write_atomically(data_path, lambda f: f.write(blob))
    write_atomically(onnx_file_path, lambda f: f.write(model.SerializeToString()))
    return onnx_file_path
