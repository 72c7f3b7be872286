"""ImageIter (MXNet's mx.image.ImageIter): batches of augmented images read from a RecordIO file
or from image files named by a list.

Deliberate differences from MXNet 2.x:
- Misuse raises ValueError naming the values (MXNet: asserts): no image source, a data_shape
  that is not (3, H, W), batch_size < 1, an unknown last_batch_handle or label dtype,
  part_index >= num_parts, shuffle or partitioning a .rec without its index, a label whose
  width is not label_width, an augmented image whose shape is not data_shape. An image that does
  not decode raises ValueError naming its file or record (MXNet: RuntimeError).
- The label batch has the label `dtype` (MXNet: always float32).
- provide_data / provide_label are DataDesc lists (MXNet: (name, shape) tuples, which DataDesc
  still is).
- Shuffling and augmentation draw from pymx's generator (Note [Random draws in pymx.image]).
- imglist keys are the ints 1..n (MXNet: the strings '1'..'n').
"""
import logging
import numbers
import os

import numpy as onp

from .. import numpy as _np
from .. import recordio
from ..device import cpu as _cpu
from ..io.base import DataBatch, DataDesc, DataIter, check_batch_size, check_last_batch_handle
from . import _random
from .augmenters import CreateAugmenter
from .image import imdecode

__all__ = ["ImageIter"]

_LABEL_DTYPES = ("int32", "float32", "int64", "float64")


class ImageIter(DataIter):
    """Batches of images from a .rec file (path_imgrec, with path_imgidx to shuffle or
    partition it) or from image files (path_imglist, a tab-separated .lst of
    `index<TAB>label(s)<TAB>path`, or imglist, a list of [label(s), path]; paths relative to
    path_root).

    Each image is decoded as RGB uint8 HWC, passed through `aug_list` (default
    CreateAugmenter(data_shape, **kwargs)), and stored CHW in a float32 batch of shape
    (batch_size,) + data_shape. Labels come from the list, else the record headers: shape
    (batch_size,) for label_width 1, else (batch_size, label_width), in `dtype`.

    shuffle reorders the images at every reset; num_parts / part_index take the part_index-th
    of num_parts equal slices (for distributed training). last_batch_handle: 'pad' fills the
    last batch from the start of the data and reports the filler count as `pad`; 'discard'
    drops it; 'roll_over' keeps its images and completes it at the start of the next epoch,
    reporting as pad the number of images taken from the new epoch (as MXNet does).
    Images whose decoded array is empty are skipped (check_valid_image).
    """

    def __init__(self, batch_size, data_shape, label_width=1, path_imgrec=None,
                 path_imglist=None, path_root=None, path_imgidx=None, shuffle=False, part_index=0,
                 num_parts=1, aug_list=None, imglist=None, data_name="data",
                 label_name="softmax_label", dtype="float32", last_batch_handle="pad", **kwargs):
        super().__init__()
        name = type(self).__name__
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ValueError(f"{name}: give path_imgrec, path_imglist or imglist (a list)")
        if dtype not in _LABEL_DTYPES:
            raise ValueError(f"{name}: label dtype must be one of {_LABEL_DTYPES}, got {dtype!r}")
        self.batch_size = check_batch_size(batch_size, name)
        self.check_data_shape(data_shape)
        self.last_batch_handle = check_last_batch_handle(last_batch_handle, name)
        if not 0 <= part_index < num_parts:
            raise ValueError(f"{name}: part_index must be in [0, num_parts), got part_index "
                             f"{part_index} with num_parts {num_parts}")
        self._label_dtype = onp.dtype(dtype)

        self.imgrec = None
        self.imgidx = None
        if path_imgrec:
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgidx = list(self.imgrec.keys)
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")

        imgkeys = None
        if path_imglist:
            self.imglist, imgkeys = self._read_imglist(path_imglist)
        elif isinstance(imglist, list):
            self.imglist, imgkeys = self._labelled(imglist)
        else:
            self.imglist = None
        self.path_root = path_root

        data_shape = tuple(int(d) for d in data_shape)
        self.data_shape = data_shape
        self.label_width = label_width
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + data_shape)]
        label_shape = (self.batch_size, label_width) if label_width > 1 else (self.batch_size,)
        self.provide_label = [DataDesc(label_name, label_shape, self._label_dtype)]
        self.shuffle = shuffle

        if self.imgrec is None:
            self.seq = imgkeys
        elif shuffle or num_parts > 1 or path_imgidx:
            if self.imgidx is None:
                raise ValueError(f"{name}: shuffle and num_parts > 1 need the index file of "
                                 f"{path_imgrec}: pass path_imgidx")
            self.seq = self.imgidx
        else:
            self.seq = None
        if num_parts > 1:
            part = len(self.seq) // num_parts
            self.seq = self.seq[part_index * part:(part_index + 1) * part]

        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.cur = 0
        self._records_read = 0
        self._allow_read = True
        self.num_image = len(self.seq) if self.seq is not None else None
        self._cache_data = None
        self._cache_label = None
        self._cache_idx = None
        self.reset()

    def _label(self, values):
        return onp.asarray(values, dtype=onp.float64).reshape(-1).astype(self._label_dtype)

    def _read_imglist(self, path_imglist):
        """{index: (label, path)} and the indices in file order, from a .lst file."""
        imglist = {}
        keys = []
        with open(path_imglist) as lst:
            for number, line in enumerate(lst, 1):
                fields = line.strip().split("\t")
                if len(fields) < 3:
                    raise ValueError(f"{type(self).__name__}: line {number} of {path_imglist} "
                                     f"must be index<TAB>label(s)<TAB>path, got {line!r}")
                key = int(fields[0])
                imglist[key] = (self._label([float(v) for v in fields[1:-1]]), fields[-1])
                keys.append(key)
        return imglist, keys

    def _labelled(self, imglist):
        """{1..n: (label, path)} and the keys, from a list of [label(s), path] items."""
        result = {}
        for key, item in enumerate(imglist, 1):
            label = item[:-1] if len(item) > 2 else item[0]
            result[key] = (self._label(label), item[-1])
        return result, list(result)

    def reset(self):
        """Starts the next epoch: reshuffles, and rewinds unless roll_over holds images."""
        if self.seq is not None and self.shuffle:
            order = _random.generator().permutation(len(self.seq))
            self.seq = [self.seq[k] for k in order]
        if self.last_batch_handle != "roll_over" or self._cache_data is None:
            if self.imgrec is not None:
                self.imgrec.reset()
            self.cur = 0
            self._allow_read = True

    def hard_reset(self):
        """Starts the next epoch from the beginning, dropping rolled-over images."""
        if self.seq is not None and self.shuffle:
            order = _random.generator().permutation(len(self.seq))
            self.seq = [self.seq[k] for k in order]
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True
        self._cache_data = None
        self._cache_label = None
        self._cache_idx = None

    def next_sample(self):
        """(label, encoded image bytes) of the next image; StopIteration at the end."""
        if not self._allow_read:
            raise StopIteration
        if self.seq is not None:
            if self.cur >= self.num_image:
                if self.last_batch_handle != "discard":
                    self.cur = 0
                raise StopIteration
            idx = self.seq[self.cur]
            self.cur += 1
            if self.imgrec is not None:
                header, img = recordio.unpack(self.imgrec.read_idx(idx))
                label = header.label if self.imglist is None else self.imglist[idx][0]
                return label, img
            label, fname = self.imglist[idx]
            return label, self.read_image(fname)
        record = self.imgrec.read()
        if record is None:
            if self.last_batch_handle != "discard":
                self.imgrec.reset()
                self._records_read = 0
            raise StopIteration
        self._records_read += 1
        header, img = recordio.unpack(record)
        return header.label, img

    def _locate(self):
        """Which image the last next_sample read, for error messages."""
        if self.seq is None:
            return f"record {self._records_read - 1} of {self.imgrec.uri}"
        idx = self.seq[self.cur - 1]
        if self.imglist is not None:
            return f"filename: {self.imglist[idx][1]}"
        return f"index: {idx}"

    def _process_one(self, sample, batch_seed):
        """(label, CHW image or None when invalid) of sample (label, encoded image, where it
        was read, its number in the batch); its random augmentation is seeded by (batch_seed,
        number) (Note [Random draws in pymx.image])."""
        label, raw, where, number = sample
        data = self.imdecode(raw, where)
        try:
            self.check_valid_image(data)
        except RuntimeError as err:
            logging.debug("Invalid image, skipping: %s", err)
            return label, None
        with _random.seeded(batch_seed, number):
            data = self.augmentation_transform(data)
        return label, self.postprocess_data(data)

    def _process(self, samples, batch_seed):
        """_process_one over the samples, in order."""
        return [self._process_one(sample, batch_seed) for sample in samples]

    def _batchify(self, batch_data, batch_label, start=0):
        """Fills batch rows start.. with the next images; returns the rows filled."""
        i = start
        batch_seed = _random.draw_seed()
        number = 0
        exhausted = False
        while i < self.batch_size and not exhausted:
            samples = []
            while len(samples) < self.batch_size - i:
                try:
                    label, raw = self.next_sample()
                except StopIteration:
                    exhausted = True
                    break
                samples.append((label, raw, self._locate(), number))
                number += 1
            for label, image in self._process(samples, batch_seed):
                if image is not None:
                    self._store(batch_data, batch_label, i, label, image)
                    i += 1
        if not i:
            raise StopIteration
        return i

    def _store(self, batch_data, batch_label, row, label, image):
        if tuple(image.shape) != self.data_shape:
            raise ValueError(f"{type(self).__name__}: an augmented image has shape "
                             f"{tuple(image.shape)} after postprocess_data, but data_shape is "
                             f"{self.data_shape}; end aug_list with a crop or resize to it")
        label = self._label(label)
        if label.size != self.label_width:
            raise ValueError(f"{type(self).__name__}: an image has {label.size} label values, "
                             f"label_width is {self.label_width}")
        batch_data[row] = image.asnumpy()
        batch_label[row] = label[0] if self.label_width == 1 else label

    def next(self):
        """The next DataBatch (see the class docstring for the last batch)."""
        if self._cache_data is not None:
            batch_data, batch_label, i = self._cache_data, self._cache_label, self._cache_idx
        else:
            batch_data = onp.zeros((self.batch_size,) + self.data_shape, dtype=onp.float32)
            batch_label = onp.zeros(self.provide_label[0].shape, dtype=self._label_dtype)
            i = self._batchify(batch_data, batch_label)
        pad = self.batch_size - i
        if pad != 0:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache_data is None:
                self._cache_data, self._cache_label, self._cache_idx = batch_data, batch_label, i
                raise StopIteration
            self._batchify(batch_data, batch_label, i)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache_data = self._cache_label = self._cache_idx = None
        return DataBatch([_np.array(batch_data, device=_cpu())],
                         [_np.array(batch_label, device=_cpu())], pad=pad)

    def check_data_shape(self, data_shape):
        """Raises ValueError unless data_shape is (3, height, width)."""
        if not isinstance(data_shape, (tuple, list)) or len(data_shape) != 3:
            raise ValueError(f"{type(self).__name__}: data_shape must have length 3, with "
                             f"dimensions CxHxW, got {data_shape!r}")
        if data_shape[0] != 3:
            raise ValueError(f"{type(self).__name__}: expects images with 3 channels, got "
                             f"data_shape {tuple(data_shape)}")
        if not all(isinstance(d, numbers.Integral) and d > 0 for d in data_shape):
            raise ValueError(f"{type(self).__name__}: data_shape must hold positive ints, got "
                             f"{tuple(data_shape)}")

    def check_valid_image(self, data):
        """Raises RuntimeError for an image that cannot go into a batch."""
        if len(data[0].shape) == 0:
            raise RuntimeError("Data shape is wrong")

    def imdecode(self, s, where="the image"):
        """Decodes the encoded image `s` as RGB; errors name `where` it came from."""
        try:
            return imdecode(s)
        except ValueError as err:
            raise ValueError(f"Broken image {where}: {err}") from err

    def read_image(self, fname):
        """The bytes of image file `fname` (relative to path_root)."""
        with open(os.path.join(self.path_root or "", fname), "rb") as image_file:
            return image_file.read()

    def augmentation_transform(self, data):
        """`data` passed through every augmenter of auglist."""
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum):
        """HWC -> CHW, the layout of the batch."""
        return datum.transpose(2, 0, 1)
