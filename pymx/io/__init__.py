"""pymx.io (MXNet's mx.io): data iterators yielding DataBatch objects.

    it = pymx.io.NDArrayIter(data, label, batch_size=32, shuffle=True)
    for batch in it:
        x, y = batch.data[0], batch.label[0]
    it.reset()
"""
from .base import DataDesc, DataBatch, DataIter
from .ndarray_iter import NDArrayIter
from .wrappers import ResizeIter, PrefetchingIter
from .csv_iter import CSVIter
from .image_record_iter import ImageRecordIter

__all__ = ["DataDesc", "DataBatch", "DataIter", "NDArrayIter", "ResizeIter", "PrefetchingIter",
           "CSVIter", "ImageRecordIter"]
