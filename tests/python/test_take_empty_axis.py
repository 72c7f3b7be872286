"""take and index_update along an empty axis: no index fits it, so a non-empty result is NumPy's
IndexError in every mode (clip and wrap used to map the indices to -1 and 0 and read, or write,
outside the data: a crash on the CPU, an illegal address on the GPU); an empty result is fine."""
import numpy as onp
import pytest

from pymx import np
from pymx._c import core as _core

MODES = ["raise", "clip", "wrap"]


@pytest.mark.parametrize("mode", MODES)
def test_take_from_an_empty_axis_into_a_non_empty_result_raises(mode, device):
    data = np.zeros((2, 0, 3), device=device)
    with pytest.raises(IndexError, match=r"take: cannot take indices of shape \(1,\) from the "
                                         r"empty axis 1 of data \(2, 0, 3\)"):
        np.take(data, np.array([0], device=device), axis=1, mode=mode)
    with pytest.raises(IndexError, match=r"empty axis 0 of data \(0,\)"):
        np.take(np.zeros((0,), device=device), np.array([[3, -1]], device=device), mode=mode)
    # The process stays usable, and so does the array.
    assert np.take(data, np.array([], dtype="int64", device=device), axis=1).shape == (2, 0, 3)


@pytest.mark.parametrize("mode", MODES)
def test_index_update_of_an_empty_axis_raises(mode, device):
    data = np.zeros((2, 0), device=device)
    values = np.ones((2, 1), device=device)
    with pytest.raises(IndexError, match=r"index_update: cannot take indices of shape \(1,\) "
                                         r"from the empty axis 1 of data \(2, 0\)"):
        _core.invoke("index_update", [data, np.array([0], device=device), values],
                     {"axis": 1, "mode": mode})


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_empty_results_from_an_empty_axis(mode, device):
    # NumPy's shapes (its wrap mode loops forever on the second case instead of returning).
    for shape, indices, axis, want in [((0, 0), [0], 1, (0, 1)), ((2, 0), [], 1, (2, 0)),
                                       ((3, 0, 0), [[1, 2]], 1, (3, 1, 2, 0))]:
        data = np.zeros(shape, device=device)
        got = np.take(data, np.array(indices, dtype="int64", device=device), axis=axis, mode=mode)
        assert got.shape == want and got.dtype == data.dtype
        assert got.asnumpy().shape == want
