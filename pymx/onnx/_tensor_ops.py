"""ONNX translations of MXNet's tensor operators: arithmetic (array and scalar), unary math,
comparisons, reductions, shape manipulation (reshape with MXNet's special codes, transpose,
squeeze, expand_dims, slicing, concatenation, split, stack), clip, cast, where, matmul and batch_dot."""
import math

import numpy as _onp

from ._converter import (INT64_MAX, INT64_MIN, translates, attr_ints, attr_int, attr_float,
                         attr_bool, attr_axes)

_BINARY = {'Add': ('_npi_add', 'elemwise_add', 'broadcast_add', 'broadcast_plus', '_plus',
                   '_Plus'),
           'Sub': ('_npi_subtract', 'elemwise_sub', 'broadcast_sub', 'broadcast_minus', '_minus',
                   '_Minus'),
           'Mul': ('_npi_multiply', 'elemwise_mul', 'broadcast_mul', '_mul', '_Mul'),
           'Div': ('_npi_true_divide', 'elemwise_div', 'broadcast_div', '_div', '_Div'),
           'Max': ('_npi_maximum', 'broadcast_maximum', '_maximum'),
           'Min': ('_npi_minimum', 'broadcast_minimum', '_minimum'),
           'Pow': ('_npi_power', 'broadcast_power', '_power'),
           'Equal': ('_npi_equal', 'broadcast_equal', '_equal'),
           'Greater': ('_npi_greater', 'broadcast_greater', '_greater'),
           'GreaterOrEqual': ('_npi_greater_equal', 'broadcast_greater_equal', '_greater_equal'),
           'Less': ('_npi_less', 'broadcast_lesser', '_lesser'),
           'LessOrEqual': ('_npi_less_equal', 'broadcast_lesser_equal', '_lesser_equal'),
           'MatMul': ('_npi_matmul',)}


def _binary(onnx_op):
    def translate(cv, node, inputs):
        return [cv.add(onnx_op, inputs[:2], node.name)]
    return translate


for _onnx_op, _mx_ops in _BINARY.items():
    translates(*_mx_ops)(_binary(_onnx_op))


@translates('_npi_not_equal', 'broadcast_not_equal', '_not_equal')
def _not_equal(cv, node, inputs):
    return [cv.add('Not', [cv.add('Equal', inputs[:2], f'{node.name}_eq')], node.name)]


@translates('add_n', 'ElementWiseSum')
def _add_n(cv, node, inputs):
    return [cv.add('Sum', inputs, node.name)]


# MXNet scalar operator -> (ONNX op, whether the scalar is the left operand).
_SCALAR = {'_npi_add_scalar': ('Add', False), '_plus_scalar': ('Add', False),
           '_npi_subtract_scalar': ('Sub', False), '_minus_scalar': ('Sub', False),
           '_npi_rsubtract_scalar': ('Sub', True), '_rminus_scalar': ('Sub', True),
           '_npi_multiply_scalar': ('Mul', False), '_mul_scalar': ('Mul', False),
           '_npi_true_divide_scalar': ('Div', False), '_div_scalar': ('Div', False),
           '_npi_rtrue_divide_scalar': ('Div', True), '_rdiv_scalar': ('Div', True),
           '_npi_power_scalar': ('Pow', False), '_power_scalar': ('Pow', False),
           '_npi_rpower_scalar': ('Pow', True), '_rpower_scalar': ('Pow', True),
           '_maximum_scalar': ('Max', False), '_npi_maximum_scalar': ('Max', False),
           '_minimum_scalar': ('Min', False), '_npi_minimum_scalar': ('Min', False),
           '_npi_equal_scalar': ('Equal', False), '_equal_scalar': ('Equal', False),
           '_npi_greater_scalar': ('Greater', False), '_greater_scalar': ('Greater', False),
           '_npi_greater_equal_scalar': ('GreaterOrEqual', False),
           '_greater_equal_scalar': ('GreaterOrEqual', False),
           '_npi_less_scalar': ('Less', False), '_lesser_scalar': ('Less', False),
           '_npi_less_equal_scalar': ('LessOrEqual', False),
           '_lesser_equal_scalar': ('LessOrEqual', False)}


def _scalar_operand(cv, node, data):
    """(data, scalar constant) in one element type: an integer array meets a non-integer
    scalar as float32, as MXNet's numpy-mode promotion does."""
    scalar = attr_float(node.attrs, 'scalar')
    dtype = cv.dtype(data)
    if _onp.issubdtype(dtype, _onp.integer) or dtype == _onp.bool_:
        if scalar != int(scalar) or not attr_bool(node.attrs, 'is_int', True):
            data = cv.add('Cast', [data], f'{node.name}_float', to=cv.onnx.TensorProto.FLOAT)
            dtype = _onp.float32
    return data, cv.const(scalar, dtype, f'{node.name}_scalar')


def _scalar_op(onnx_op, scalar_left):
    def translate(cv, node, inputs):
        data, scalar = _scalar_operand(cv, node, inputs[0])
        return [cv.add(onnx_op, [scalar, data] if scalar_left else [data, scalar], node.name)]
    return translate


for _mx_op, (_onnx_op, _left) in _SCALAR.items():
    translates(_mx_op)(_scalar_op(_onnx_op, _left))


@translates('_npi_not_equal_scalar', '_not_equal_scalar')
def _not_equal_scalar(cv, node, inputs):
    data, scalar = _scalar_operand(cv, node, inputs[0])
    return [cv.add('Not', [cv.add('Equal', [data, scalar], f'{node.name}_eq')], node.name)]


_UNARY = {'Exp': ('_npi_exp', 'exp'), 'Log': ('_npi_log', 'log'), 'Sqrt': ('_npi_sqrt', 'sqrt'),
          'Sin': ('_npi_sin', 'sin'), 'Cos': ('_npi_cos', 'cos'), 'Tan': ('_npi_tan', 'tan'),
          'Asin': ('_npi_arcsin', 'arcsin'), 'Acos': ('_npi_arccos', 'arccos'),
          'Atan': ('_npi_arctan', 'arctan'), 'Sinh': ('_npi_sinh', 'sinh'),
          'Cosh': ('_npi_cosh', 'cosh'), 'Tanh': ('_npi_tanh', 'tanh'),
          'Asinh': ('_npi_arcsinh', 'arcsinh'), 'Acosh': ('_npi_arccosh', 'arccosh'),
          'Atanh': ('_npi_arctanh', 'arctanh'), 'Neg': ('_npi_negative', 'negative'),
          'Reciprocal': ('_npi_reciprocal', 'reciprocal'), 'Sign': ('_npi_sign', 'sign'),
          'Floor': ('_npi_floor', 'floor'), 'Ceil': ('_npi_ceil', 'ceil'),
          'Round': ('_npi_rint', 'rint'),  # both round halves to even
          'Abs': ('_npi_absolute', 'abs'), 'Erf': ('erf',),
          'Relu': ('relu',), 'Sigmoid': ('sigmoid',)}


def _unary(onnx_op):
    def translate(cv, node, inputs):
        return [cv.add(onnx_op, inputs[:1], node.name)]
    return translate


for _onnx_op, _mx_ops in _UNARY.items():
    translates(*_mx_ops)(_unary(_onnx_op))


@translates('_npi_square', 'square')
def _square(cv, node, inputs):
    return [cv.add('Mul', [inputs[0], inputs[0]], node.name)]


@translates('_npi_log1p', 'log1p')
def _log1p(cv, node, inputs):
    one = cv.const_like(1.0, inputs[0], f'{node.name}_one')
    return [cv.add('Log', [cv.add('Add', [inputs[0], one], f'{node.name}_1p')], node.name)]


@translates('_npi_expm1', 'expm1')
def _expm1(cv, node, inputs):
    one = cv.const_like(1.0, inputs[0], f'{node.name}_one')
    return [cv.add('Sub', [cv.add('Exp', inputs[:1], f'{node.name}_exp'), one], node.name)]


def _log_base(base):
    def translate(cv, node, inputs):
        log_base = cv.const_like(math.log(base), inputs[0], f'{node.name}_ln{base}')
        return [cv.add('Div', [cv.add('Log', inputs[:1], f'{node.name}_ln'), log_base],
                       node.name)]
    return translate


translates('_npi_log2', 'log2')(_log_base(2))
translates('_npi_log10', 'log10')(_log_base(10))


@translates('_npi_cbrt', 'cbrt')
def _cbrt(cv, node, inputs):
    # sign(x) |x|^(1/3): Pow of a negative base to 1/3 is NaN.
    data = inputs[0]
    third = cv.const_like(1 / 3, data, f'{node.name}_third')
    root = cv.add('Pow', [cv.add('Abs', [data], f'{node.name}_abs'), third], f'{node.name}_root')
    return [cv.add('Mul', [cv.add('Sign', [data], f'{node.name}_sign'), root], node.name)]


@translates('_npi_trunc', 'trunc', 'fix', '_npi_fix')
def _trunc(cv, node, inputs):
    data = inputs[0]
    floor = cv.add('Floor', [cv.add('Abs', [data], f'{node.name}_abs')], f'{node.name}_floor')
    return [cv.add('Mul', [cv.add('Sign', [data], f'{node.name}_sign'), floor], node.name)]


@translates('clip')
def _clip(cv, node, inputs):
    data = inputs[0]
    bounds = []
    for key in ('a_min', 'a_max'):
        value = attr_float(node.attrs, key)
        # An infinite or float32-limit bound (how MXNet 1.x spells "none") is no bound.
        is_unbounded = value is None or abs(value) >= float(_onp.finfo(_onp.float32).max)
        bounds.append('' if is_unbounded else cv.const_like(value, data, f'{node.name}_{key}'))
    while bounds and bounds[-1] == '':
        bounds.pop()
    return [cv.add('Clip', [data] + bounds, node.name)]


@translates('Cast', 'cast', '_npi_cast', 'amp_cast')
def _cast(cv, node, inputs):
    dtype = _onp.dtype(node.attrs['dtype'])
    return [cv.add('Cast', inputs[:1], node.name,
                   to=cv.onnx.helper.np_dtype_to_tensor_dtype(dtype))]


@translates('_npi_where', 'where')
def _where(cv, node, inputs):
    condition = cv.add('Cast', inputs[:1], f'{node.name}_cond', to=cv.onnx.TensorProto.BOOL)
    return [cv.add('Where', [condition] + inputs[1:3], node.name)]


def _reduction(onnx_op):
    def translate(cv, node, inputs):
        data = inputs[0]
        axes = attr_axes(node.attrs, 'axis')
        keepdims = attr_bool(node.attrs, 'keepdims')
        if axes is not None and attr_bool(node.attrs, 'exclude'):
            rank = cv.rank(data)
            excluded = {a % rank for a in axes}
            axes = tuple(d for d in range(rank) if d not in excluded)
        if axes == ():
            # NumPy's axis=() reduces nothing.
            out = cv.add('Identity', [data], node.name)
        else:
            dtype = node.attrs.get('dtype', 'None')
            hint = node.name if dtype in ('None', '') else f'{node.name}_raw'
            out = cv.reduce(onnx_op, data, axes, keepdims, hint)
            if dtype not in ('None', ''):
                out = cv.add('Cast', [out], node.name,
                             to=cv.onnx.helper.np_dtype_to_tensor_dtype(_onp.dtype(dtype)))
        return [out]
    return translate


translates('_np_sum', '_npi_sum', 'sum')(_reduction('ReduceSum'))
translates('_npi_mean', '_np_mean', 'mean')(_reduction('ReduceMean'))
translates('_np_prod', '_npi_prod', 'prod')(_reduction('ReduceProd'))
translates('_np_max', '_npi_max', 'max')(_reduction('ReduceMax'))
translates('_np_min', '_npi_min', 'min')(_reduction('ReduceMin'))


def _resolve_reshape_codes(in_shape, codes, node):
    """The ONNX Reshape target of MXNet's legacy `shape` codes (0 copy, -1 infer, -2 copy the
    rest, -3 merge two, -4 split one) for input shape `in_shape`. A dimension copied to the
    same position stays 0 (ONNX's copy) and an inferred one -1, so those axes stay dynamic."""
    out, i, k = [], 0, 0

    def fail(why):
        return ValueError(f"export_model: node '{node.name}' ({node.op}) reshapes {in_shape} "
                          f"with shape {tuple(codes)}: {why}")

    while k < len(codes):
        code = codes[k]
        if code == 0:
            if i >= len(in_shape):
                raise fail("code 0 has no input dimension left to copy")
            out.append(0 if len(out) == i else in_shape[i])
            i += 1
        elif code == -1:
            out.append(-1)
            i += 1
        elif code == -2:
            out.extend(0 if len(out) == j else in_shape[j] for j in range(i, len(in_shape)))
            i = len(in_shape)
        elif code == -3:
            if i + 1 >= len(in_shape):
                raise fail("code -3 needs two input dimensions")
            out.append(in_shape[i] * in_shape[i + 1])
            i += 2
        elif code == -4:
            if k + 2 >= len(codes) or i >= len(in_shape):
                raise fail("code -4 needs two following sizes and an input dimension")
            first, second = codes[k + 1], codes[k + 2]
            if first == -1:
                first = in_shape[i] // second
            if second == -1:
                second = in_shape[i] // first
            if first * second != in_shape[i]:
                raise fail(f"-4 splits {in_shape[i]} into {first} x {second}")
            out.extend([first, second])
            i += 1
            k += 2
        elif code > 0:
            out.append(code)
            i += 1
        else:
            raise fail(f"unknown code {code}")
        k += 1
    return out


@translates('Reshape', 'reshape')
def _legacy_reshape(cv, node, inputs):
    codes = attr_ints(node.attrs, 'shape')
    if codes is None:
        raise ValueError(f"export_model: node '{node.name}' ({node.op}) has no 'shape'")
    data = inputs[0]
    in_shape = cv.shape(data)
    if attr_bool(node.attrs, 'reverse'):
        target = _resolve_reshape_codes(in_shape[::-1], codes[::-1], node)[::-1]
        # Copies (0) line up from the right, not the left: make them concrete.
        offset = len(in_shape) - len(target)
        target = [in_shape[j + offset] if d == 0 else d for j, d in enumerate(target)]
    else:
        target = _resolve_reshape_codes(in_shape, codes, node)
    return [cv.reshape(data, target, node.name)]


@translates('_np_reshape')
def _np_reshape(cv, node, inputs):
    shape = list(attr_ints(node.attrs, 'newshape'))
    if 0 in shape:
        # NumPy's 0 is an empty axis, ONNX's a copy unless allowzero (opset 14).
        if cv.opset < 14:
            raise NotImplementedError(f"export_model: node '{node.name}' reshapes to "
                                      f"{tuple(shape)}, an empty axis, which ONNX Reshape "
                                      f"expresses from opset 14 (allowzero)")
        return [cv.add('Reshape', [inputs[0], cv.const(shape, _onp.int64,
                                                      f'{node.name}_shape')],
                       node.name, allowzero=1)]
    return [cv.reshape(inputs[0], shape, node.name)]


@translates('_np_transpose', 'transpose')
def _transpose(cv, node, inputs):
    axes = attr_axes(node.attrs, 'axes')
    if not axes:
        return [cv.add('Transpose', inputs[:1], node.name)]
    if any(a < 0 for a in axes):
        rank = cv.rank(inputs[0])
        axes = tuple(a % rank for a in axes)
    return [cv.add('Transpose', inputs[:1], node.name, perm=list(axes))]


@translates('SwapAxis', 'swapaxes', '_npi_swapaxes')
def _swap_axis(cv, node, inputs):
    rank = cv.rank(inputs[0])
    first = attr_int(node.attrs, 'dim1', 0) % rank
    second = attr_int(node.attrs, 'dim2', 0) % rank
    perm = list(range(rank))
    perm[first], perm[second] = perm[second], perm[first]
    return [cv.add('Transpose', inputs[:1], node.name, perm=perm)]


@translates('batch_dot')
def _batch_dot(cv, node, inputs):
    """MatMul, after a Transpose of the last two axes of each operand read transposed."""
    operands = []
    for index, flag in enumerate(('transpose_a', 'transpose_b')):
        operand = inputs[index]
        if attr_bool(node.attrs, flag, False):
            rank = cv.rank(operand)
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            operand = cv.add('Transpose', [operand], f'{node.name}_{flag}', perm=perm)
        operands.append(operand)
    return [cv.add('MatMul', operands, node.name)]


@translates('_np_squeeze', 'squeeze')
def _squeeze(cv, node, inputs):
    return [cv.squeeze(inputs[0], attr_axes(node.attrs, 'axis'), node.name)]


@translates('expand_dims', '_npi_expand_dims')
def _expand_dims(cv, node, inputs):
    return [cv.unsqueeze(inputs[0], [attr_int(node.attrs, 'axis')], node.name)]


def _slice(cv, node, data, axes, begins, ends, steps):
    starts, stops = [], []
    for begin, end, step in zip(begins, ends, steps):
        if step == 0:
            raise ValueError(f"export_model: node '{node.name}' ({node.op}) has slice step 0")
        # A missing bound is the start or the end in the direction of the step.
        starts.append(begin if begin is not None else (0 if step > 0 else INT64_MAX))
        stops.append(end if end is not None else (INT64_MAX if step > 0 else INT64_MIN))
    consts = [cv.const(v, _onp.int64, f'{node.name}_{what}')
              for v, what in ((starts, 'starts'), (stops, 'ends'), (list(axes), 'axes'),
                              (list(steps), 'steps'))]
    return cv.add('Slice', [data] + consts, node.name)


@translates('slice', 'crop')
def _slice_op(cv, node, inputs):
    begins = attr_ints(node.attrs, 'begin')
    ends = attr_ints(node.attrs, 'end')
    steps = attr_ints(node.attrs, 'step', ()) or ()
    steps = tuple(1 if s is None else s for s in steps) + (1,) * (len(begins) - len(steps))
    return [_slice(cv, node, inputs[0], range(len(begins)), begins, ends, steps)]


@translates('slice_axis')
def _slice_axis(cv, node, inputs):
    begin = attr_int(node.attrs, 'begin')
    end = attr_int(node.attrs, 'end')
    return [_slice(cv, node, inputs[0], [attr_int(node.attrs, 'axis')], [begin], [end], [1])]


@translates('_npi_concatenate', 'Concat', 'concat')
def _concat(cv, node, inputs):
    if node.op == '_npi_concatenate':
        axis = attr_int(node.attrs, 'axis', 0)
    else:
        axis = attr_int(node.attrs, 'dim', 1)
    return [cv.add('Concat', inputs, node.name, axis=axis)]


@translates('_npi_stack', 'stack')
def _stack(cv, node, inputs):
    axis = attr_int(node.attrs, 'axis', 0)
    rank = cv.rank(inputs[0]) + 1
    expanded = [cv.unsqueeze(x, [axis % rank], f'{node.name}_in{i}')
                for i, x in enumerate(inputs)]
    return [cv.add('Concat', expanded, node.name, axis=axis)]


def _split(cv, node, data, axis, sizes, squeeze_axis):
    split = cv.const(sizes, _onp.int64, f'{node.name}_split')
    hint = f'{node.name}_part' if squeeze_axis else node.name
    parts = cv.add('Split', [data, split], hint, num_outputs=len(sizes), axis=axis)
    parts = [parts] if isinstance(parts, str) else parts
    if squeeze_axis:
        parts = [cv.squeeze(p, [axis], f'{node.name}_out{i}') for i, p in enumerate(parts)]
    return parts


@translates('_npi_split')
def _np_split(cv, node, inputs):
    axis = attr_int(node.attrs, 'axis', 0)
    length = cv.shape(inputs[0])[axis]
    starts = list(attr_ints(node.attrs, 'indices'))
    sections = attr_int(node.attrs, 'sections', 0)
    if sections:
        if length % sections:
            raise ValueError(f"export_model: node '{node.name}' splits an axis of {length} into "
                             f"{sections} equal sections")
        starts = list(range(0, length, length // sections))
    bounds = [min(max(s, 0), length) for s in starts] + [length]
    sizes = [max(b - a, 0) for a, b in zip(bounds, bounds[1:])]
    return _split(cv, node, inputs[0], axis, sizes, attr_bool(node.attrs, 'squeeze_axis'))


@translates('SliceChannel', 'split')
def _slice_channel(cv, node, inputs):
    axis = attr_int(node.attrs, 'axis', 1)
    count = attr_int(node.attrs, 'num_outputs')
    length = cv.shape(inputs[0])[axis]
    if length % count:
        raise ValueError(f"export_model: node '{node.name}' splits an axis of {length} into "
                         f"{count} equal parts")
    return _split(cv, node, inputs[0], axis, [length // count] * count,
                  attr_bool(node.attrs, 'squeeze_axis'))


def _filled(cv, node, value):
    shape = attr_ints(node.attrs, 'shape', ())
    dtype = node.attrs.get('dtype', 'None')
    dtype = _onp.float32 if dtype in ('None', '') else _onp.dtype(dtype)
    return [cv.add('Identity', [cv.const(_onp.full(shape, value), dtype, f'{node.name}_value')],
                   node.name)]


@translates('_npi_zeros', '_zeros')
def _zeros(cv, node, inputs):
    return _filled(cv, node, 0)


@translates('_npi_ones', '_ones')
def _ones(cv, node, inputs):
    return _filled(cv, node, 1)


@translates('_npi_full', '_full')
def _full(cv, node, inputs):
    return _filled(cv, node, attr_float(node.attrs, 'value'))
