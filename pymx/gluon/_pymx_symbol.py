"""pymx's own operators, as `HybridBlock.export` names them in a symbol file.

An exported node is one call of a native operator: its `op` is the registered name and its
`attrs` the attribute strings the operator was traced with, so running it is one `invoke`.
The one exception is `_view`, the graph's record of a view (a reshape or a contiguous slice
that shares memory): it is re-created with reshape and slice operators so that autograd sees it.
`AUX_INPUTS` and `LABEL_INPUTS` have the meaning they have in _mxnet_symbol.
"""
import functools

from .. import numpy as np
from .._c.core import op_names
from .._op import invoke

__all__ = ['run_node', 'check_op', 'AUX_INPUTS', 'LABEL_INPUTS']

AUX_INPUTS = {'batch_norm': (3, 4)}
LABEL_INPUTS = {}
_VIEW = '_view'


def check_op(op, node_name, filename):
    """Raises ValueError unless this pymx build has operator `op`."""
    if op != _VIEW and op not in _known_ops():
        raise ValueError(f"Operator '{op}' of node '{node_name}' in symbol file '{filename}' is "
                         f"not a pymx operator")


@functools.lru_cache(maxsize=None)
def _known_ops():
    return frozenset(op_names())


def _view(data, attrs):
    offset = int(attrs['offset'])
    shape = tuple(int(d) for d in attrs['shape'].strip('()[]').split(',') if d.strip())
    size = 1
    for d in shape:
        size *= d
    flat = np.reshape(data, (-1,))
    return np.reshape(flat[offset:offset + size], shape)


def run_node(node, inputs, device):
    """The outputs (a list) of pymx node `node` (a SymbolNode) on `inputs`; `device` is where a
    node without inputs (a creation op) runs."""
    if node.op == _VIEW:
        return [_view(inputs[0], node.attrs)]
    return invoke(node.op, inputs, node.attrs, device=device)
