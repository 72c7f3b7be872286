"""Reading a symbol file: the JSON graph that `HybridBlock.export` (pymx or MXNet) writes.

Both writers use nnvm's layout: `nodes` in topological order, each with `op` ("null" for an
input or a parameter), `name` and `inputs` (entries `[node, output, version]`, the version
optional); `heads` lists the graph outputs the same way. Op attributes are strings, under
`attrs` (MXNet >= 0.9 and pymx) or split between `param` (the op's) and `attr` (the node's)
in older MXNet files. Names wrapped in double underscores (`__shape__`, `__lr_mult__`, ...) are
node annotations rather than op attributes; they are kept apart.

The dialect tells whose operator names the nodes use: pymx's exports record
`attrs.trace_device`, MXNet's record `attrs.mxnet_version` (or nothing, in old files).
"""
import json
import os
from collections import namedtuple

__all__ = ['SymbolNode', 'SymbolGraph', 'load_symbol_file']

# op: operator name ('null' for a graph input); name: the node's name; attrs: {op attribute:
# string}; annotations: {'__shape__': string, ...}; inputs: [(node index, output index)].
SymbolNode = namedtuple('SymbolNode', ['op', 'name', 'attrs', 'annotations', 'inputs'])


class SymbolGraph:
    """A parsed symbol file: `nodes` (SymbolNode, topologically ordered), `heads` (the outputs,
    as (node index, output index)), `dialect` ('pymx' or 'mxnet') and `filename`."""

    def __init__(self, nodes, heads, dialect, filename):
        self.nodes = nodes
        self.heads = heads
        self.dialect = dialect
        self.filename = filename

    def variables(self):
        """The indices of the 'null' nodes (inputs and parameters), in file order."""
        return [i for i, node in enumerate(self.nodes) if node.op == 'null']


def _is_annotation(key):
    return key.startswith('__') and key.endswith('__')


def _string_dict(value, what, filename):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"Symbol file '{filename}': {what} must be an object, got "
                         f"{type(value).__name__}")
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


def _entry(entry, limit, what, filename):
    """(node index, output index) from an input or head entry referring to a node < limit."""
    if not isinstance(entry, (list, tuple)) or len(entry) not in (2, 3) or \
            not all(isinstance(v, int) and not isinstance(v, bool) for v in entry):
        raise ValueError(f"Symbol file '{filename}': {what} has a malformed entry {entry!r}; "
                         f"expected [node, output, version]")
    node, output = entry[0], entry[1]
    if not 0 <= node < limit or output < 0:
        raise ValueError(f"Symbol file '{filename}': {what} refers to output {output} of node "
                         f"{node}, which is not an earlier node (there are {limit})")
    return node, output


def _parse_node(index, item, filename):
    if not isinstance(item, dict) or not isinstance(item.get('op'), str) or \
            not isinstance(item.get('name'), str):
        raise ValueError(f"Symbol file '{filename}': node {index} needs string 'op' and 'name', "
                         f"got {str(item)[:200]}")
    merged = {}
    # Oldest files: op attributes in 'param', node attributes in 'attr'; later ones: 'attrs'.
    for key in ('param', 'attr', 'attrs'):
        merged.update(_string_dict(item.get(key), f"node {index} ('{item['name']}') '{key}'",
                                   filename))
    attrs = {k: v for k, v in merged.items() if not _is_annotation(k)}
    annotations = {k: v for k, v in merged.items() if _is_annotation(k)}
    raw_inputs = item.get('inputs', [])
    if not isinstance(raw_inputs, list):
        raise ValueError(f"Symbol file '{filename}': node {index} ('{item['name']}') has "
                         f"'inputs' of type {type(raw_inputs).__name__}, expected a list")
    inputs = [_entry(e, index, f"node {index} ('{item['name']}')", filename)
              for e in raw_inputs]
    if item['op'] == 'null' and inputs:
        raise ValueError(f"Symbol file '{filename}': variable node {index} ('{item['name']}') "
                         f"has inputs")
    return SymbolNode(item['op'], item['name'], attrs, annotations, inputs)


def parse_symbol_json(text, filename='<string>'):
    """A SymbolGraph from the text of a symbol file; ValueError naming `filename` when the
    document is not a symbol graph."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"Symbol file '{filename}' is not valid JSON: {err}") from None
    if not isinstance(document, dict) or not isinstance(document.get('nodes'), list) or \
            not isinstance(document.get('heads'), list):
        raise ValueError(f"Symbol file '{filename}' is not a symbol graph: it needs 'nodes' and "
                         f"'heads' lists")
    nodes = [_parse_node(i, item, filename) for i, item in enumerate(document['nodes'])]
    if not document['heads']:
        raise ValueError(f"Symbol file '{filename}' has no outputs ('heads' is empty)")
    heads = [_entry(e, len(nodes), 'heads', filename) for e in document['heads']]
    graph_attrs = document.get('attrs')
    graph_attrs = graph_attrs if isinstance(graph_attrs, dict) else {}
    pymx_made = 'trace_device' in graph_attrs and 'mxnet_version' not in graph_attrs
    return SymbolGraph(nodes, heads, 'pymx' if pymx_made else 'mxnet', filename)


def load_symbol_file(filename):
    """Reads and parses a symbol file (see parse_symbol_json)."""
    filename = os.fspath(filename)
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"Symbol file '{filename}' does not exist")
    with open(filename, encoding='utf-8') as f:
        text = f.read()
    return parse_symbol_json(text, filename)
