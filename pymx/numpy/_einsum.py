"""einsum for `pymx.np`: Einstein summation with NumPy's subscript grammar.

Grammar: comma-separated input terms of letters, each with at most one '...', optionally
followed by '->' and the output term. Without '->' (implicit mode) the output is the
broadcast '...' axes followed by the letters that appear exactly once, in alphabetical order.
A letter repeated within a term takes that operand's diagonal; a letter absent from the output
is summed over. Axes of the same letter broadcast when one has length 1.

Evaluation uses only reshapes, transposes, gathers, sums and batched matmuls, so it runs on
any device, autograd differentiates it and hybridize traces it:
  1. each operand's repeated letters become one diagonal axis: one `take` of the diagonal's
     elements from the operand seen as (before, n * between * n, after);
  2. letters needed by no other operand and not by the output are summed away at once;
  3. while more than one operand is left, the pair whose result is smallest (greedy, as
     NumPy's optimize='greedy') is contracted by one matmul: shared letters still needed later
     are its batch axes (kept apart: matmul broadcasts them), shared letters needed nowhere else
     the contracted axis, the rest the rows and columns; the operand order and axis orders are
     chosen so that operands already in a matmul's layout are not transposed;
  4. the last operand is transposed to the output where its order differs.
Nothing is copied that need not be: identity transposes are skipped, and reshapes (pymx arrays
are contiguous) are views of the same memory, except while autograd records or hybridize traces,
which follow operators; there the reshape operator runs. A result is never an operand itself.

Differences from NumPy: only the subscripts-string form is supported (not the interleaved
operand / sublist form), as in MXNet; `optimize` is accepted for compatibility, and the
contraction order is always the greedy one.
"""
import builtins
import itertools

import numpy as _onp

from pymx._c import autograd as _c_autograd
from pymx.base import bfloat16
from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import (_to_array, arange, broadcast_to, copy, copyto, reshape, sum, take,
                              transpose)

__all__ = ["einsum"]

_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _parse_term(term, what):
    """A term as a list of letters with at most one '...' (kept as the string '...')."""
    if term.count("...") > 1 or term.replace("...", "").count(".") > 0:
        raise ValueError(f"einsum: {what} term {term!r} has an invalid ellipsis: use at most "
                         f"one '...' per term")
    labels = []
    for piece_index, piece in enumerate(term.split("...")):
        if piece_index:
            labels.append("...")
        for char in piece:
            if char not in _LETTERS:
                raise ValueError(f"einsum: invalid subscript {char!r} in {what} term {term!r}; "
                                 f"subscripts must be letters a-z, A-Z")
            labels.append(char)
    return labels


def _parse(subscripts, shapes):
    """(input labels per operand, output labels), with each '...' expanded into integer labels
    for the broadcast axes (right-aligned across operands, as NumPy broadcasts)."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a string, got {type(subscripts).__name__}")
    spec = subscripts.replace(" ", "")
    if spec.count("->") > 1 or ("-" in spec.replace("->", "")) or \
            (">" in spec.replace("->", "")):
        raise ValueError(f"einsum: subscripts {subscripts!r} must contain at most one '->'")
    inputs_spec, arrow, output_spec = spec.partition("->")
    terms = [_parse_term(t, "input") for t in inputs_spec.split(",")]
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operand(s) but "
                         f"{len(shapes)} were given")
    ellipsis_ndim = 0
    inputs = []
    for term, shape in zip(terms, shapes):
        named = len(term) - term.count("...")
        if named > len(shape) or ("..." not in term and named != len(shape)):
            raise ValueError(f"einsum: operand of shape {shape} ({len(shape)} dimensions) does "
                             f"not match its subscripts {''.join(term)!r}")
        covered = len(shape) - named
        ellipsis_ndim = builtins.max(ellipsis_ndim, covered)
        inputs.append((term, covered))
    expanded = []
    for term, covered in inputs:
        labels = []
        for label in term:
            # Integer labels name broadcast axes; an operand's `covered` ones are the last.
            labels.extend(range(ellipsis_ndim - covered, ellipsis_ndim) if label == "..."
                          else [label])
        expanded.append(labels)
    if arrow:
        output_term = _parse_term(output_spec, "output")
        used = set(itertools.chain.from_iterable(expanded))
        output = []
        for label in output_term:
            if label == "...":
                output.extend(range(ellipsis_ndim))
                continue
            if label in output:
                raise ValueError(f"einsum: output subscript {label!r} appears more than once "
                                 f"in {subscripts!r}")
            if label not in used:
                raise ValueError(f"einsum: output subscript {label!r} does not appear in the "
                                 f"inputs of {subscripts!r}")
            output.append(label)
        if "..." not in output_term and ellipsis_ndim:
            raise ValueError(f"einsum: the inputs of {subscripts!r} broadcast over "
                             f"{ellipsis_ndim} '...' dimension(s), but the output names no "
                             f"'...' to hold them")
    else:
        counts = {}
        for label in itertools.chain.from_iterable(expanded):
            counts[label] = counts.get(label, 0) + 1
        output = list(range(ellipsis_ndim)) + sorted(
            label for label, count in counts.items() if isinstance(label, str) and count == 1)
    return expanded, output


def _label_sizes(labels_list, shapes, subscripts):
    """Each label's length: equal wherever it appears, or 1 (which broadcasts)."""
    sizes = {}
    for labels, shape in zip(labels_list, shapes):
        for label in set(labels):
            # A diagonal's axes must have one length: no broadcasting within an operand.
            lengths = {size for l, size in zip(labels, shape) if l == label}
            if len(lengths) > 1:
                raise ValueError(f"einsum: subscript {label!r} is repeated in an operand of "
                                 f"shape {shape} over axes of different lengths "
                                 f"{sorted(lengths)} in {subscripts!r}")
        for label, size in zip(labels, shape):
            known = sizes.get(label, 1)
            if size != known and known != 1 and size != 1:
                name = "'...'" if isinstance(label, int) else repr(label)
                raise ValueError(f"einsum: subscript {name} has inconsistent lengths {known} "
                                 f"and {size} in {subscripts!r} (operand shapes {shapes})")
            sizes[label] = builtins.max(known, size) if known != 1 else size
    return sizes


def _reshaped(x, shape):
    """x with a new shape. A view of x's memory (no op, no copy) when nothing records ops, as
    pymx arrays are contiguous; the reshape op while autograd records or hybridize traces,
    since those follow ops and a view would cut the gradient's path."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    if _c_autograd.is_recording() or _c_autograd.is_tracing():
        return reshape(x, shape)
    return x._reshape_view(shape)


def _arranged(x, labels, order):
    """x with its axes in the order of `order`'s labels (no op when they already are)."""
    if labels == order:
        return x
    return transpose(x, tuple(labels.index(l) for l in order))


def _size(shape):
    return int(_onp.prod(shape, dtype=_onp.int64))


def _take_diagonals(x, labels):
    """x with every repeated label reduced to one axis (the diagonal), and its labels.

    The diagonal of the axes `first` < `second` (length n, M elements between them) is one
    gather from the array seen as (before, n * M * n, after): element (i, m) sits at
    i * (M * n + 1) + m * n, so only the diagonal is read, never a copy of the whole input."""
    while len(set(labels)) != len(labels):
        label = next(l for l in labels if labels.count(l) > 1)
        first, second = [i for i, l in enumerate(labels) if l == label][:2]
        shape = x.shape
        n, between = shape[first], _size(shape[first + 1:second])
        merged = _reshaped(x, (_size(shape[:first]), n * between * n, _size(shape[second + 1:])))
        if between == 1:  # adjacent axes (the common case): positions from one op, no upload
            positions = arange(0, n * (n + 1), n + 1, dtype=_onp.int64, device=x.device)
        else:
            positions = _to_array(_onp.arange(n, dtype=_onp.int64)[:, None] * (between * n + 1) +
                                  _onp.arange(between, dtype=_onp.int64)[None, :] * n,
                                  device=x.device)
        x = take(merged, positions, axis=1)
        x = _reshaped(x, shape[:second] + shape[second + 1:])
        labels = labels[:second] + labels[second + 1:]
    return x, labels


def _sum_labels(x, labels, keep):
    """x summed over the axes whose labels are not in `keep`."""
    axes = tuple(i for i, l in enumerate(labels) if l not in keep)
    if not axes:
        return x, labels
    # sum widens small integers and booleans to int64; einsum keeps the operands' dtype.
    return sum(x, axis=axes).astype(x.dtype, copy=False), [l for l in labels if l in keep]


def _matmul_layout(a, a_labels, b, b_labels, keep, result_order, sizes):
    """(left, its labels, its order, right, its labels, its order, number of batch labels, of
    row labels, of summed labels) for one matmul of a and b: left is read in its order as
    (batch..., rows, summed) and right as (batch..., summed, columns), where batch are the shared
    labels in `keep`, summed the shared ones not in `keep`, rows and columns the unshared ones.

    Either operand may be left (the product's axes come out in another order, which later steps
    arrange anyway) and the batch and summed labels may follow either operand's order: of these
    four layouts the first that transposes the fewest elements is taken, so that operands
    already laid out as a matmul reads them are never copied. When the product is einsum's
    result (`result_order`, else None), transposing it to that order counts too, at the
    lengths `sizes` gives the labels."""
    best = None
    for (left, left_labels), (right, right_labels) in (((a, a_labels), (b, b_labels)),
                                                       ((b, b_labels), (a, a_labels))):
        for source in (left_labels, right_labels):
            batch = [l for l in source if l in left_labels and l in right_labels and l in keep]
            summed = [l for l in source
                      if l in left_labels and l in right_labels and l not in keep]
            rows = [l for l in left_labels if l not in right_labels]
            cols = [l for l in right_labels if l not in left_labels]
            left_order, right_order = batch + rows + summed, batch + summed + cols
            copied = ((left.size if left_order != left_labels else 0) +
                      (right.size if right_order != right_labels else 0))
            product_order = batch + rows + cols
            if result_order is not None and product_order != result_order:
                copied += _size([sizes[l] for l in product_order])
            if best is None or copied < best[0]:
                best = (copied, (left, left_labels, left_order, right, right_labels,
                                 right_order, len(batch), len(rows), len(summed)))
    return best[1]


def _contract(a, a_labels, b, b_labels, keep, result_order, sizes):
    """One matmul of a and b over their shared labels absent from `keep`: (product, labels);
    `result_order` and `sizes` (each label's length) as _matmul_layout's.
    Batch axes stay separate (matmul broadcasts them); only rows, summed and columns are
    merged into one axis each, by reshapes that are views of contiguous memory."""
    (left, left_labels, left_order, right, right_labels, right_order, num_batch, num_rows,
     num_summed) = _matmul_layout(a, a_labels, b, b_labels, keep, result_order, sizes)
    left = _arranged(left, left_labels, left_order)
    right = _arranged(right, right_labels, right_order)
    # A summed label of length 1 in one operand broadcasts against the other's length.
    summed_shape = tuple(n if m == 1 else m for m, n in zip(
        left.shape[len(left_order) - num_summed:], right.shape[num_batch:num_batch + num_summed]))
    left_batch, rows_shape = left.shape[:num_batch], left.shape[num_batch:num_batch + num_rows]
    right_batch, cols_shape = right.shape[:num_batch], right.shape[num_batch + num_summed:]
    left = broadcast_to(left, left_batch + rows_shape + summed_shape)
    right = broadcast_to(right, right_batch + summed_shape + cols_shape)
    product = _core.matmul(
        _reshaped(left, left_batch + (_size(rows_shape), _size(summed_shape))),
        _reshaped(right, right_batch + (_size(summed_shape), _size(cols_shape))))
    batch_shape = product.shape[:num_batch]
    labels = left_order[:num_batch + num_rows] + right_order[num_batch + num_summed:]
    return _reshaped(product, batch_shape + rows_shape + cols_shape), labels


def _greedy_pair(labels_list, output, sizes):
    """The pair of operands whose contraction gives the smallest result (the first such)."""
    best = None
    for i, j in itertools.combinations(range(len(labels_list)), 2):
        others = set(output).union(*(labels_list[k] for k in range(len(labels_list))
                                     if k not in (i, j)))
        result = [l for l in dict.fromkeys(labels_list[i] + labels_list[j]) if l in others]
        cost = int(_onp.prod([sizes[l] for l in result], dtype=_onp.int64))
        if best is None or cost < best[0]:
            best = (cost, i, j)
    return best[1], best[2]


def _common_dtype(dtypes):
    """NumPy's result type, with bfloat16 promoted as pymx's operators promote it: beside
    integers and booleans it stays bfloat16, beside another float it gives that float widened to
    at least float32."""
    others = [d for d in dtypes if d != bfloat16]
    if len(others) == len(dtypes):
        return _onp.result_type(*dtypes)
    common = _onp.result_type(*others) if others else bfloat16
    if common == bfloat16 or common.kind != "f":
        return bfloat16
    return _onp.promote_types(common, _onp.float32)


def einsum(subscripts, *operands, out=None, optimize=False):
    """Einstein summation over `operands` as `subscripts` says (NumPy's grammar: e.g.
    'ij,jk->ik' matrix product, 'ii->i' diagonal, 'ii' trace, '...ij,...jk' batched
    product, 'i,j' outer product)."""
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    first = next((x for x in operands if isinstance(x, ndarray)), None)
    arrays = [_to_array(x, device=None if first is None else first.device) for x in operands]
    common = _common_dtype([a.dtype for a in arrays])
    arrays = [a if a.dtype == common else a.astype(common) for a in arrays]
    shapes = [a.shape for a in arrays]
    labels_list, output = _parse(subscripts, shapes)
    sizes = _label_sizes(labels_list, shapes, subscripts)

    operands_left = []
    for x, labels in zip(arrays, labels_list):
        operands_left.append(list(_take_diagonals(x, labels)))
    while True:
        # Sum away what only one operand still has and nothing else needs.
        for index, (x, labels) in enumerate(operands_left):
            keep = set(output).union(*(l for k, (_, l) in enumerate(operands_left)
                                       if k != index))
            operands_left[index] = list(_sum_labels(x, labels, keep))
        if len(operands_left) == 1:
            break
        i, j = _greedy_pair([l for _, l in operands_left], output, sizes)
        keep = set(output).union(*(l for k, (_, l) in enumerate(operands_left)
                                   if k not in (i, j)))
        (a, a_labels), (b, b_labels) = operands_left[i], operands_left[j]
        contracted = list(_contract(a, a_labels, b, b_labels, keep,
                                    output if len(operands_left) == 2 else None, sizes))
        operands_left = [o for k, o in enumerate(operands_left) if k not in (i, j)]
        operands_left.append(contracted)
    x, labels = operands_left[0]
    x = broadcast_to(_arranged(x, labels, output), tuple(sizes[l] for l in output))
    if out is not None:
        return copyto(out, x)
    # Where no op ran (e.g. 'ij->ij') x is an operand itself: the result is a new array all
    # the same, as every other einsum result.
    return copy(x) if any(x is operand for operand in operands) else x
