"""Writing a traced graph as MXNet symbol JSON, so that MXNet (and pymx's SymbolBlock) load it.

`to_mxnet(symbol, variables)` takes the graph JSON of a traced forward pass (pymx operator
names, see Graph::to_json in engine/src/graph.cc) with its variables already named, and
returns MXNet's form of it, written as MXNet's numpy mode (MXNet 2.x, or 1.9 after
`npx.set_np()`) writes an exported model: the layers under their classic names
(`convolution` -> `Convolution`, `batch_norm` -> `BatchNorm`, ...) and the NumPy-semantics
operations, whose type promotion and axis conventions the classic operators lack, under the
numpy-mode names (`add` -> `_npi_add`, `subtract_scalar` with reverse=True ->
`_npi_rsubtract_scalar`, `sum` -> `_np_sum`, `reshape` -> `_np_reshape`, ...), each with only
the attributes that operator declares. Variables carry MXNet's `__shape__` and `__dtype__`
annotations. Every name written is an operator of MXNet 1.9.1.

A graph with a node MXNet cannot express (a view, a convolution fused with its activation,
...) raises NoMxnetEquivalent naming it; the caller then keeps pymx's own format.
"""
import ast

__all__ = ['to_mxnet', 'NoMxnetEquivalent']

MXNET_VERSION = 10901  # the operator set written: MXNet 1.9.1's
# mshadow's type flags, which MXNet writes as a variable's __dtype__.
_DTYPE_FLAGS = {'float32': 0, 'float64': 1, 'float16': 2, 'uint8': 3, 'int32': 4, 'int8': 5,
                'int64': 6, 'bool': 7, 'int16': 8, 'uint16': 9, 'uint32': 10, 'uint64': 11,
                'bfloat16': 12}


class NoMxnetEquivalent(ValueError):
    """A node of the graph has no MXNet operator of the same meaning."""


def _copy(mx_op, *keys, **fixed):
    """A translation to `mx_op` keeping attributes `keys` (those given and not 'None') and
    setting `fixed` ones."""
    def translate(attrs, num_inputs):
        out = {k: attrs[k] for k in keys if attrs.get(k, 'None') != 'None'}
        out.update(fixed)
        return mx_op, out
    return translate


def _slice(attrs, num_inputs):
    """pymx's slice stops an axis that runs backwards through index 0 at end -1; MXNet reads a
    negative end as counting from the back (-1: the last index, an empty slice), so that end is
    written as None."""
    out = {k: attrs[k] for k in ('begin', 'end', 'step') if attrs.get(k, 'None') != 'None'}
    if 'step' in out:
        steps = ast.literal_eval(out['step'])
        ends = ast.literal_eval(out['end'])
        ends = [None if step is not None and step < 0 and end == -1 else end
                for step, end in zip(steps, ends)]
        out['end'] = '(' + ', '.join(map(str, ends)) + (',)' if len(ends) == 1 else ')')
    return 'slice', out


def _with_act_types(translate, act_types):
    """`translate`, refused for an act_type that MXNet 1.9.1's operator lacks."""
    def checked(attrs, num_inputs):
        if attrs.get('act_type') not in act_types:
            raise NoMxnetEquivalent(f"act_type={attrs.get('act_type')} (MXNet 1.9.1 has "
                                    f"{', '.join(act_types)})")
        return translate(attrs, num_inputs)
    return checked


def _matmul(attrs, num_inputs):
    """matmul reading an operand transposed in place comes from npx.batch_dot (operands of the
    same rank >= 3 and the same batch axes): MXNet's batch_dot with the same flags."""
    flags = {k: attrs[k] for k in ('transpose_a', 'transpose_b') if attrs.get(k) == 'True'}
    return ('batch_dot', flags) if flags else ('_npi_matmul', {})


_CONV = ('kernel', 'num_filter', 'num_group', 'no_bias', 'layout', 'stride', 'dilate', 'pad',
         'cudnn_off', 'cudnn_tune', 'workspace')
_TRANSLATIONS = {
    'deconvolution': _copy('Deconvolution', *_CONV, 'adj', 'target_shape'),
    'fully_connected': _copy('FullyConnected', 'num_hidden', 'no_bias', 'flatten'),
    'batch_norm': _copy('BatchNorm', 'eps', 'momentum', 'fix_gamma', 'use_global_stats', 'axis',
                        'cudnn_off'),
    '_contrib_SyncBatchNorm': _copy('_contrib_SyncBatchNorm', 'eps', 'momentum', 'fix_gamma',
                                    'use_global_stats', 'ndev', 'key'),
    'layer_norm': _copy('LayerNorm', 'axis', 'eps'),
    'embedding': _copy('Embedding', 'input_dim', 'output_dim'),
    'pooling': _copy('Pooling', 'kernel', 'pool_type', 'global_pool', 'pooling_convention',
                     'stride', 'pad', 'count_include_pad', 'layout', 'cudnn_off', 'p_value'),
    'dropout': _copy('Dropout', 'p', 'mode', 'axes'),
    'batch_flatten': _copy('Flatten'),
    'activation': _with_act_types(_copy('Activation', 'act_type'),
                                  ('relu', 'sigmoid', 'tanh', 'softrelu', 'softsign')),
    'relu': _copy('Activation', act_type='relu'),
    'sigmoid': _copy('Activation', act_type='sigmoid'),
    'leaky_relu': _with_act_types(_copy('LeakyReLU', 'act_type', 'slope'),
                                  ('leaky', 'elu', 'selu', 'gelu', 'prelu')),
    'instance_norm': _copy('InstanceNorm', 'eps'),
    'stop_gradient': _copy('BlockGrad'),
    'erf': _copy('erf'),
    'erfinv': _copy('erfinv'),
    'softmax': _copy('softmax', 'axis', 'temperature'),
    'log_softmax': _copy('log_softmax', 'axis', 'temperature'),
    'cast': _copy('Cast', 'dtype'),
    'copy': _copy('_np_copy'),
    'transpose': _copy('_np_transpose', 'axes'),
    'swapaxes': lambda a, n: ('SwapAxis', {'dim1': a['axis1'], 'dim2': a['axis2']}),
    'squeeze': _copy('_np_squeeze', 'axis'),
    'reshape': lambda a, n: ('_np_reshape', {'newshape': a['newshape']}),
    'slice': _slice,
    'where': _copy('_npi_where'),
    'matmul': _matmul,
    'zeros': _copy('_npi_zeros', 'shape', 'dtype'),
    'ones': _copy('_npi_ones', 'shape', 'dtype'),
    'full': _copy('_npi_full', 'shape', 'dtype', 'value'),
    'concatenate': lambda a, n: ('_npi_concatenate', {'axis': a.get('axis', '0'),
                                                      'num_args': str(n)}),
    'stack': lambda a, n: ('_npi_stack', {'axis': a.get('axis', '0'), 'num_args': str(n)}),
    'abs': _copy('_npi_absolute'),
}
for _name in ('add', 'subtract', 'multiply', 'maximum', 'minimum', 'power'):
    _TRANSLATIONS[_name] = _copy('_npi_' + _name)
_TRANSLATIONS['divide'] = _copy('_npi_true_divide')
# A comparison with the scalar on the left is the mirrored one with the scalar on the right.
_MIRRORED = {'equal': 'equal', 'not_equal': 'not_equal', 'greater': 'less',
             'greater_equal': 'less_equal', 'less': 'greater', 'less_equal': 'greater_equal'}
for _name, _mirror in _MIRRORED.items():
    _TRANSLATIONS[_name] = _copy('_npi_' + _name)
    _TRANSLATIONS[_name + '_scalar'] = lambda a, n, name=_name, mirror=_mirror: (
        f"_npi_{mirror if a.get('reverse') == 'True' else name}_scalar", _scalar_attrs(a))
for _name in ('exp', 'log', 'log1p', 'expm1', 'log2', 'log10', 'sqrt', 'cbrt', 'sin', 'cos',
              'tan', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'tanh', 'arcsinh', 'arccosh',
              'arctanh', 'negative', 'square', 'reciprocal', 'sign', 'floor', 'ceil', 'rint',
              'trunc'):
    _TRANSLATIONS[_name] = _copy('_npi_' + _name)

# pymx scalar op -> (MXNet op, MXNet op with the scalar on the left).
_SCALAR_OPS = {'add_scalar': ('_npi_add_scalar', '_npi_add_scalar'),
               'subtract_scalar': ('_npi_subtract_scalar', '_npi_rsubtract_scalar'),
               'multiply_scalar': ('_npi_multiply_scalar', '_npi_multiply_scalar'),
               'divide_scalar': ('_npi_true_divide_scalar', '_npi_rtrue_divide_scalar'),
               'power_scalar': ('_npi_power_scalar', '_npi_rpower_scalar'),
               'maximum_scalar': ('_maximum_scalar', '_maximum_scalar'),
               'minimum_scalar': ('_minimum_scalar', '_minimum_scalar')}


def _scalar_attrs(attrs):
    # is_int tells MXNet 2.x the scalar is a Python int (an int array stays int).
    text = attrs['scalar']
    is_int = text.lstrip('-').isdigit()
    return {'scalar': text, 'is_int': str(is_int)}


for _name, _names in _SCALAR_OPS.items():
    _TRANSLATIONS[_name] = lambda a, n, names=_names: (names[a.get('reverse') == 'True'],
                                                       _scalar_attrs(a))


def _expand_dims(attrs, num_inputs):
    axes = [d.strip() for d in attrs['axis'].strip('()[]').split(',') if d.strip()]
    if len(axes) != 1:
        raise NoMxnetEquivalent(f"expand_dims over several axes {attrs['axis']}")
    return 'expand_dims', {'axis': axes[0]}


def _convolution(attrs, num_inputs):
    if 'act_type' in attrs:
        raise NoMxnetEquivalent(f"a convolution fused with act_type={attrs['act_type']}")
    return _copy('Convolution', *_CONV)(attrs, num_inputs)


# MXNet 1.x's clip needs both bounds; float32's largest value stands for a missing one.
_NO_BOUND = '3.4028234663852886e+38'


def _clip(attrs, num_inputs):
    a_min, a_max = attrs.get('a_min', 'None'), attrs.get('a_max', 'None')
    return 'clip', {'a_min': '-' + _NO_BOUND if a_min == 'None' else a_min,
                    'a_max': _NO_BOUND if a_max == 'None' else a_max}


def _split(attrs, num_inputs):
    # MXNet's _npi_split lists the start of every part, the first (0) included.
    cuts = [d.strip() for d in attrs['indices'].strip('()[]').split(',') if d.strip()]
    return '_npi_split', {'indices': '(' + ', '.join(['0'] + cuts) + ')', 'axis': attrs['axis']}


_TRANSLATIONS.update(expand_dims=_expand_dims, convolution=_convolution, clip=_clip, split=_split,
                     sum=_copy('_np_sum', 'axis', 'keepdims', 'dtype'),
                     mean=_copy('_npi_mean', 'axis', 'keepdims', 'dtype'),
                     prod=_copy('_np_prod', 'axis', 'keepdims', 'dtype'),
                     max=_copy('_np_max', 'axis', 'keepdims'),
                     min=_copy('_np_min', 'axis', 'keepdims'))


def to_mxnet(symbol, variables):
    """MXNet's symbol JSON (a dict) for `symbol` (pymx's graph JSON as a dict, variables
    named). `variables` maps variable names to (shape, dtype name) for their annotations.
    Raises NoMxnetEquivalent naming the first node MXNet cannot express."""
    nodes = []
    for node in symbol['nodes']:
        op, attrs = node['op'], node.get('attrs', {})
        if op == 'null':
            out = {'op': 'null', 'name': node['name'], 'inputs': []}
            if node['name'] in variables:
                shape, dtype = variables[node['name']]
                out['attrs'] = {'__shape__': str(tuple(shape)),
                                '__dtype__': str(_DTYPE_FLAGS.get(dtype, 0))}
            nodes.append(out)
            continue
        translate = _TRANSLATIONS.get(op)
        if translate is None:
            raise NoMxnetEquivalent(f"node '{node['name']}' runs pymx operator '{op}', which "
                                    f"has no MXNet equivalent")
        try:
            mx_op, mx_attrs = translate({k: v for k, v in attrs.items() if k != '__device__'},
                                        len(node['inputs']))
        except NoMxnetEquivalent as err:
            raise NoMxnetEquivalent(f"node '{node['name']}' is {err}") from None
        out = {'op': mx_op, 'name': node['name'], 'inputs': node['inputs']}
        if mx_attrs:
            out['attrs'] = mx_attrs
        nodes.append(out)
    return {'nodes': nodes,
            'arg_nodes': [i for i, node in enumerate(nodes) if node['op'] == 'null'],
            'heads': symbol['heads'],
            'attrs': {'mxnet_version': ['int', MXNET_VERSION]}}
