"""The graph to export, read from what `HybridBlock.export` writes, in MXNet's operator names.

A symbol file is either MXNet's dialect (MXNet's operator names, what pymx writes whenever
MXNet can express the graph, and what MXNet itself writes) or pymx's own (pymx's operator
names, written when the graph holds a node MXNet lacks: a convolution fused with its
activation, or a `_view`). The exporter translates one operator set, MXNet's, so a pymx-dialect
graph is first rewritten: a fused convolution becomes a convolution followed by its activation,
a `_view` becomes reshape to 1-D, slice, reshape, and every other node takes its MXNet name
from gluon's MXNet writer.
"""
import copy
import json
import os

from ..gluon._mxnet_export import NoMxnetEquivalent, to_mxnet
from ..gluon._symbol_json import SymbolGraph, load_symbol_file, parse_symbol_json

__all__ = ['load_graph']


def load_graph(sym):
    """A SymbolGraph in MXNet's dialect from `sym`: a symbol file path, the JSON text of one,
    its parsed document (a dict) or a SymbolGraph."""
    if isinstance(sym, SymbolGraph):
        graph = sym
        if graph.dialect == 'pymx':
            raise TypeError("export_model: pass a pymx-dialect symbol as its file path or JSON "
                            "document, not as a SymbolGraph")
        return graph
    if isinstance(sym, dict):
        document, filename = copy.deepcopy(sym), '<dict>'
    elif isinstance(sym, (str, os.PathLike)) and not str(sym).lstrip().startswith('{'):
        filename = os.fspath(sym)
        load_symbol_file(filename)  # validates the file and names it in errors
        with open(filename, encoding='utf-8') as f:
            document = json.load(f)
    elif isinstance(sym, str):
        document, filename = json.loads(sym), '<string>'
    else:
        raise TypeError(f"export_model: sym must be a symbol file path, its JSON text or "
                        f"document, or a SymbolGraph; got {type(sym).__name__}")
    graph = parse_symbol_json(json.dumps(document), filename)
    if graph.dialect == 'mxnet':
        return graph
    try:
        mxnet_document = to_mxnet(_split_pymx_only_nodes(document), {})
    except NoMxnetEquivalent as err:
        raise NotImplementedError(f"export_model: symbol '{filename}': {err}, so it has no "
                                  f"ONNX translation") from None
    return parse_symbol_json(json.dumps(mxnet_document), filename)


def _tuple_text(values):
    return '(' + ', '.join(str(v) for v in values) + (',)' if len(values) == 1 else ')')


def _split_pymx_only_nodes(document):
    """`document` (pymx dialect) with each fused convolution and each `_view` replaced by
    nodes that MXNet has; inputs and heads are renumbered to match."""
    nodes, new_index = [], []

    def add(op, name, attrs, inputs):
        nodes.append({'op': op, 'name': name, 'attrs': attrs, 'inputs': inputs})
        return [len(nodes) - 1, 0, 0]

    def renumber(entry):
        return [new_index[entry[0]], entry[1], 0]

    for node in document['nodes']:
        inputs = [renumber(e) for e in node.get('inputs', [])]
        attrs = dict(node.get('attrs', {}))
        if node['op'] == 'convolution' and 'act_type' in attrs:
            act_type = attrs.pop('act_type')
            conv = add('convolution', node['name'] + '_conv', attrs, inputs)
            add('activation', node['name'], {'act_type': act_type}, [conv])
        elif node['op'] == '_view':
            shape = [int(d) for d in attrs['shape'].strip('()[]').split(',') if d.strip()]
            size, offset = 1, int(attrs['offset'])
            for d in shape:
                size *= d
            flat = add('reshape', node['name'] + '_flat', {'newshape': '(-1,)'}, inputs)
            part = add('slice', node['name'] + '_part',
                       {'begin': f'({offset},)', 'end': f'({offset + size},)', 'step': '(1,)'},
                       [flat])
            add('reshape', node['name'], {'newshape': _tuple_text(shape)}, [part])
        else:
            nodes.append(dict(node, inputs=inputs))
        new_index.append(len(nodes) - 1)
    return dict(document, nodes=nodes, heads=[renumber(e) for e in document['heads']])
