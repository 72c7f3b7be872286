"""CSVIter (MXNet's mx.io.CSVIter): batches of the rows of CSV files.

Deliberate differences from MXNet 2.x: the files are read into memory when the iterator is
made, so a missing file, a non-numeric field or a row of the wrong length raises there
(FileNotFoundError / ValueError naming the file, row and shapes), not at the first batch.
A round_batch epoch shorter than one batch wraps around the data as often as needed (MXNet
fails). prefetch_buffer is not taken: there is nothing to prefetch from memory.
"""
import numbers

import numpy as onp

from .. import numpy as _np
from .base import DataDesc, DataIter, check_batch_size

__all__ = ["CSVIter"]

_DTYPES = ("float32", "int32", "int64")


def _shape(shape, what):
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if not shape or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool)
                            and d > 0 for d in shape):
        raise ValueError(f"CSVIter: {what} must be a non-empty shape of positive ints, got "
                         f"{shape!r}")
    return tuple(int(d) for d in shape)


def _read_rows(path, shape, what):
    """The rows of CSV file `path`, each reshaped to `shape`, as a float64 array."""
    try:
        rows = onp.loadtxt(path, delimiter=",", dtype=onp.float64, ndmin=2)
    except ValueError as err:
        raise ValueError(f"CSVIter: {what} {path} is not a CSV file of numbers: {err}") from err
    width = int(onp.prod(shape))
    if rows.size and rows.shape[1] != width:
        raise ValueError(f"CSVIter: the rows of {what} {path} have {rows.shape[1]} values, but "
                         f"its shape {shape} needs {width}")
    return rows.reshape((rows.shape[0],) + shape)


class CSVIter(DataIter):
    """Batches of the rows of data_csv, each reshaped to data_shape, with the rows of label_csv
    (reshaped to label_shape) as labels, or zeros when label_csv is 'NULL'. Batches have shape
    (batch_size,) + data_shape and (batch_size,) + label_shape, in `dtype` (float32 by default;
    int32 and int64 also).

    The last batch of an epoch, when the rows run out, is completed and `pad` counts the
    filler rows: with round_batch=True, by the first rows of the data, and the next epoch then
    starts after those rows; with round_batch=False the filler rows are those of the previous
    batch (zeros in a first batch), and the next epoch starts at the first row.
    """

    def __init__(self, data_csv, data_shape, batch_size, label_csv="NULL", label_shape=(1,),
                 round_batch=True, dtype="float32", data_name="data",
                 label_name="softmax_label"):
        super().__init__(check_batch_size(batch_size, "CSVIter"))
        if dtype not in _DTYPES:
            raise ValueError(f"CSVIter: dtype must be one of {_DTYPES}, got {dtype!r}")
        data_shape = _shape(data_shape, "data_shape")
        label_shape = _shape(label_shape, "label_shape")
        data = _read_rows(data_csv, data_shape, "data_csv")
        if label_csv == "NULL":
            label = onp.zeros((data.shape[0],) + label_shape)
        else:
            label = _read_rows(label_csv, label_shape, "label_csv")
            if label.shape[0] != data.shape[0]:
                raise ValueError(f"CSVIter: data_csv {data_csv} has {data.shape[0]} rows but "
                                 f"label_csv {label_csv} has {label.shape[0]}")
        self._data = data.astype(dtype)
        self._label = label.astype(dtype)
        self.round_batch = round_batch
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + data_shape, dtype)]
        self.provide_label = [DataDesc(label_name, (self.batch_size,) + label_shape, dtype)]
        # the rows of the batch being built: the filler rows of round_batch=False are what
        # the previous batch left there
        self._data_rows = onp.zeros((self.batch_size,) + data_shape, dtype=dtype)
        self._label_rows = onp.zeros((self.batch_size,) + label_shape, dtype=dtype)
        self._position = 0          # the next row to read
        self._wrapped = False       # the epoch ended by wrapping around (round_batch)
        self._current = None        # (data, label, pad) of the current batch

    def reset(self):
        """Starts the next epoch: at the first row, or after the rows that completed the last
        batch of a round_batch epoch."""
        if self._wrapped:
            self._wrapped = False
        else:
            self._position = 0

    def iter_next(self):
        num_rows = self._data.shape[0]
        if self._wrapped or self._position >= num_rows:
            return False
        take = min(self.batch_size, num_rows - self._position)
        rows = slice(self._position, self._position + take)
        self._data_rows[:take] = self._data[rows]
        self._label_rows[:take] = self._label[rows]
        self._position += take
        pad = self.batch_size - take
        if pad and self.round_batch:
            filler = onp.arange(pad) % num_rows
            self._data_rows[take:] = self._data[filler]
            self._label_rows[take:] = self._label[filler]
            self._position = pad % num_rows
            self._wrapped = True
        self._current = (_np.array(self._data_rows), _np.array(self._label_rows), pad)
        return True

    def getdata(self):
        return [self._current[0]]

    def getlabel(self):
        return [self._current[1]]

    def getpad(self):
        return self._current[2]
