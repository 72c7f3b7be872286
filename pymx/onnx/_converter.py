"""The state of one export: the ONNX nodes and initializers built so far, and the helpers that
operator translations use to add to them.

A translation is `fn(cv, node, inputs)`: `cv` is the Converter, `node` the SymbolNode (MXNet
operator name and string attributes), `inputs` the ONNX tensor names of its inputs; it adds
nodes through `cv` and returns the ONNX names of the node's outputs, in MXNet's order.
Translations register under their MXNet operator names with `@translates(...)`.
"""
import numpy as _onp

__all__ = ['Converter', 'translates', 'TRANSLATIONS', 'attr_ints', 'attr_bool', 'attr_float',
           'attr_int', 'attr_axes']

# MXNet operator name -> translation.
TRANSLATIONS = {}
INT64_MAX = 2 ** 63 - 1
INT64_MIN = -2 ** 63
# Tensors up to this many elements keep their values in the model that shape inference sees
# (shape, axes and scalar constants); larger ones (weights) are given by type and shape only.
_INFERENCE_VALUE_LIMIT = 64


def translates(*mx_ops):
    """Registers the decorated function as the translation of MXNet operators `mx_ops`."""
    def register(fn):
        for op in mx_ops:
            TRANSLATIONS[op] = fn
        return fn
    return register


def _is_none(text):
    return text is None or text in ('None', '')


def attr_ints(attrs, key, default=None):
    """A tuple of ints from a '(1, 2)' attribute; `default` when absent or 'None'; the
    entries 'None' become None."""
    text = attrs.get(key)
    if _is_none(text):
        return default
    parts = [p.strip() for p in text.strip('()[]').split(',') if p.strip()]
    return tuple(None if p == 'None' else int(p) for p in parts)


def attr_axes(attrs, key):
    """An axis attribute as a tuple of ints, or None when absent or 'None' (all axes)."""
    text = attrs.get(key)
    if _is_none(text):
        return None
    return attr_ints(attrs, key)


def attr_int(attrs, key, default=None):
    text = attrs.get(key)
    return default if _is_none(text) else int(text)


def attr_float(attrs, key, default=None):
    text = attrs.get(key)
    return default if _is_none(text) else float(text)


def attr_bool(attrs, key, default=False):
    text = attrs.get(key)
    if _is_none(text):
        return default
    return text.strip().lower() in ('true', '1')


class Converter:
    """Builds the ONNX graph node by node. `params` maps parameter names to numpy arrays;
    `inference_inputs` are the graph inputs as ValueInfoProtos with the concrete `in_shapes`,
    which shape inference uses whatever axes the exported model leaves dynamic."""

    def __init__(self, onnx, opset, params, inference_inputs):
        self.onnx = onnx
        self.opset = opset
        self.params = params
        self.nodes = []
        self.initializers = []
        self._inference_inputs = inference_inputs
        self._names = set(params) | {v.name for v in inference_inputs}
        self._inferred = {}  # tensor name -> (shape tuple, numpy dtype)
        self._inferred_upto = -1  # shape inference saw nodes [0, _inferred_upto)

    # -- names, nodes, constants ---------------------------------------------------------
    def fresh(self, hint):
        """A tensor name not used yet, built from `hint`."""
        name, k = hint, 0
        while name in self._names:
            k += 1
            name = f'{hint}_{k}'
        self._names.add(name)
        return name

    def add(self, op_type, inputs, hint, num_outputs=1, **attrs):
        """Adds an ONNX node; returns its output name (or the list, if num_outputs > 1)."""
        outputs = [self.fresh(hint if num_outputs == 1 else f'{hint}_out{i}')
                   for i in range(num_outputs)]
        node = self.onnx.helper.make_node(op_type, list(inputs), list(outputs),
                                          name=self.fresh(f'{hint}__{op_type}'), **attrs)
        self.nodes.append(node)
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def const(self, values, dtype, hint='const'):
        """An initializer holding `values` as `dtype`; returns its name."""
        array = _onp.asarray(values, dtype=dtype)
        name = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def const_like(self, values, tensor, hint='const'):
        """An initializer holding `values` in the element type of `tensor`."""
        return self.const(values, self.dtype(tensor), hint)

    # -- shapes and dtypes -------------------------------------------------------------
    def shape(self, tensor):
        """The shape of `tensor` for the export's concrete in_shapes (ONNX shape inference)."""
        return self._infer(tensor)[0]

    def rank(self, tensor):
        return len(self.shape(tensor))

    def dtype(self, tensor):
        """The numpy dtype of `tensor`."""
        if tensor in self.params:
            return self.params[tensor].dtype
        return self._infer(tensor)[1]

    def _infer(self, tensor):
        if tensor not in self._inferred and self._inferred_upto < len(self.nodes):
            self._run_shape_inference()
        if tensor not in self._inferred:
            raise ValueError(f"export_model: ONNX shape inference could not tell the shape of "
                             f"'{tensor}', which the translation needs")
        return self._inferred[tensor]

    def _run_shape_inference(self):
        onnx = self.onnx
        small = [t for t in self.initializers if _onp.prod(t.dims) <= _INFERENCE_VALUE_LIMIT]
        shapes_only = [onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                       for t in self.initializers if _onp.prod(t.dims) > _INFERENCE_VALUE_LIMIT]
        shapes_only += [onnx.helper.make_tensor_value_info(
            name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape))
            for name, value in self.params.items()]
        graph = onnx.helper.make_graph(self.nodes, 'inference', self._inference_inputs +
                                       shapes_only, [], initializer=small)
        model = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid('', self.opset)])
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        except onnx.shape_inference.InferenceError as e:  # inputs the parameters do not fit
            inputs = {v.name: tuple(d.dim_value if d.HasField('dim_value') else None
                                    for d in v.type.tensor_type.shape.dim)
                      for v in self._inference_inputs}
            raise ValueError(f"export_model: the graph does not accept inputs of shapes "
                             f"{inputs}: {e}") from e
        values = list(inferred.graph.value_info) + list(inferred.graph.input)
        for value in values:
            tensor_type = value.type.tensor_type
            if not tensor_type.HasField('shape') or \
                    any(not d.HasField('dim_value') for d in tensor_type.shape.dim):
                continue
            self._inferred[value.name] = (
                tuple(d.dim_value for d in tensor_type.shape.dim),
                onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        for t in small:
            self._inferred[t.name] = (tuple(t.dims), onnx.helper.tensor_dtype_to_np_dtype(
                t.data_type))
        self._inferred_upto = len(self.nodes)

    # -- opset-dependent forms --------------------------------------------------------
    def reduce(self, op_type, data, axes, keepdims, hint):
        """ONNX reduction `op_type` over `axes` (None: all); axes are an input from opset 18
        (ReduceSum: 13) and an attribute before."""
        keep = int(bool(keepdims))
        if axes is None:
            return self.add(op_type, [data], hint, keepdims=keep)
        axes = [int(a) for a in axes]
        if op_type == 'ReduceSum' or self.opset >= 18:
            return self.add(op_type, [data, self.const(axes, _onp.int64, f'{hint}_axes')], hint,
                            keepdims=keep)
        return self.add(op_type, [data], hint, axes=axes, keepdims=keep)

    def unsqueeze(self, data, axes, hint):
        return self.add('Unsqueeze', [data, self.const(list(axes), _onp.int64, f'{hint}_axes')],
                        hint)

    def squeeze(self, data, axes, hint):
        inputs = [data] if axes is None else \
            [data, self.const(list(axes), _onp.int64, f'{hint}_axes')]
        return self.add('Squeeze', inputs, hint)

    def reshape(self, data, shape, hint):
        return self.add('Reshape', [data, self.const(list(shape), _onp.int64, f'{hint}_shape')],
                        hint)
