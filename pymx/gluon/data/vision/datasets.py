"""Image datasets (MXNet python/mxnet/gluon/data/vision/datasets.py): ImageFolderDataset,
ImageRecordDataset, and MNIST, FashionMNIST, CIFAR10 and CIFAR100 read from their standard
distribution files.

MNIST, FashionMNIST, CIFAR10 and CIFAR100 differ from MXNet 2.x in these deliberate ways:
- Nothing is downloaded: the files must be in `root`, else FileNotFoundError names the missing
  files and where to get them. `root` is not created. No SHA-1 check: any file in the standard
  format is read, so subsets and regenerated files work; a malformed or truncated file raises
  ValueError naming it.
- MNIST files may also be stored uncompressed (the name without .gz); CIFAR files may also sit in
  the directory their official archive unpacks to (cifar-10-batches-bin/, cifar-100-binary/).
- The label of a sample is a NumPy int32 scalar, not a 0-d array (as ArrayDataset gives).
"""
import gzip
import os
import struct
import warnings
import zlib

import numpy as onp
from PIL import Image, UnidentifiedImageError

from .... import numpy as _np
from .... import recordio
from ....device import cpu as _cpu
from ..dataset import Dataset, RecordFileDataset

__all__ = ["ImageFolderDataset", "ImageRecordDataset", "MNIST", "FashionMNIST", "CIFAR10",
           "CIFAR100", "imread"]


def imread(filename, flag=1):
    """Decodes an image file with Pillow to a NumPy uint8 array: RGB (H, W, 3) for flag=1,
    grayscale (H, W, 1) for flag=0 (MXNet decodes with OpenCV; both give RGB uint8 HWC).
    Raises ValueError naming the file when it cannot be read as an image."""
    try:
        with Image.open(filename) as img:
            img = img.convert("RGB" if flag else "L")
            array = onp.asarray(img, dtype=onp.uint8)
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise ValueError("Cannot decode image file %s: %s" % (filename, err)) from err
    return array if flag else array[:, :, None]


class ImageFolderDataset(Dataset):
    """Images stored as ``root/<class name>/<image file>``.

    ``synsets`` is the sorted list of class directories; a sample's label is its class's index.
    ``items`` lists (filename, label) pairs, files sorted within each class. Files other than
    .jpg, .jpeg and .png (any case) and non-directories at the top level are ignored with a
    warning. A sample is (image, label): the image a pymx uint8 array, (H, W, 3) RGB for flag=1
    or (H, W, 1) grayscale for flag=0, on the cpu; the label a Python int. Apply transforms with
    ``dataset.transform_first(...)``.
    """

    def __init__(self, root, flag=1, transform=None):
        if transform is not None:
            raise DeprecationWarning(
                "Directly apply transform to dataset is deprecated. "
                "Please use dataset.transform() or dataset.transform_first() instead...")
        self._root = os.path.expanduser(root)
        if not os.path.isdir(self._root):
            raise ValueError("ImageFolderDataset: root %s is not a directory" % self._root)
        self._flag = flag
        self._exts = [".jpg", ".jpeg", ".png"]
        self._list_images(self._root)

    def _list_images(self, root):
        self.synsets = []
        self.items = []
        for folder in sorted(os.listdir(root)):
            path = os.path.join(root, folder)
            if not os.path.isdir(path):
                warnings.warn("Ignoring %s, which is not a directory." % path, stacklevel=3)
                continue
            label = len(self.synsets)
            self.synsets.append(folder)
            for filename in sorted(os.listdir(path)):
                filename = os.path.join(path, filename)
                ext = os.path.splitext(filename)[1]
                if ext.lower() not in self._exts:
                    warnings.warn("Ignoring %s of type %s. Only support %s"
                                  % (filename, ext, ", ".join(self._exts)))
                    continue
                self.items.append((filename, label))

    def __getitem__(self, idx):
        filename, label = self.items[idx]
        # decoded on the CPU whatever the caller's device scope, as MXNet does
        return _np.array(imread(filename, self._flag), dtype=onp.uint8, device=_cpu()), label

    def __len__(self):
        return len(self.items)


class ImageRecordDataset(RecordFileDataset):
    """The images of a RecordIO file made by recordio.pack_img (or MXNet's im2rec), in the
    order of its index file (`data.rec` -> `data.idx`).

    A sample is (image, label): the image a pymx uint8 array on the cpu, (H, W, 3) RGB for
    flag=1 or (H, W, 1) grayscale for flag=0; the label the record's header label, a float or
    a float32 NumPy array (see recordio.unpack). With `transform`, a sample is
    ``transform(image, label)``. Works with DataLoader worker processes.
    """

    def __init__(self, filename, flag=1, transform=None):
        if flag not in (0, 1):
            raise ValueError(f"ImageRecordDataset: flag must be 0 (grayscale) or 1 (colour), "
                             f"got {flag!r}")
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx):
        header, image = recordio.unpack_img(super().__getitem__(idx), self._flag)
        # unpack_img gives OpenCV's (H, W) grayscale and BGR; MXNet's imdecode gives these
        image = image[:, :, ::-1] if self._flag else image[:, :, None]
        # decoded on the CPU whatever the caller's device scope, as ImageFolderDataset does
        image = _np.array(image, dtype=onp.uint8, device=_cpu())
        if self._transform is not None:
            return self._transform(image, header.label)
        return image, header.label


_DATASETS_ROOT = os.path.join("~", ".mxnet", "datasets")  # MXNet's default ($MXNET_HOME unset)


class _StandardFilesDataset(Dataset):
    """A dataset read whole from its distribution files in `root` at construction: (N, H, W, C)
    uint8 images and (N,) int32 labels. A sample is (image, label): the image a pymx uint8 array
    on the cpu, the label a NumPy int32 scalar."""

    def __init__(self, root, transform):
        if transform is not None:
            raise DeprecationWarning(
                "Directly apply transform to dataset is deprecated. "
                "Please use dataset.transform() or dataset.transform_first() instead...")
        self._root = os.path.expanduser(os.fspath(root))
        self._data, self._label = self._get_data()

    def _get_data(self):
        raise NotImplementedError

    def _find_files(self, names, directories, source):
        """Paths of `names`, each taken from the first of `directories` (relative to root)
        holding a file of one of its accepted names (a tuple of alternatives). Raises
        FileNotFoundError naming every missing file and where to get it."""
        found, missing = [], []
        for alternatives in names:
            paths = [os.path.join(self._root, directory, name)
                     for directory in directories for name in alternatives]
            path = next((p for p in paths if os.path.isfile(p)), None)
            if path is None:
                missing.append(alternatives[0])
            found.append(path)
        if missing:
            where = " or ".join(os.path.join(self._root, d) for d in directories)
            raise FileNotFoundError(
                f"{type(self).__name__}: missing {', '.join(missing)} in {where}. pymx does not "
                f"download datasets: get the files from {source} and put them there, or pass "
                f"root= the directory that holds them.")
        return found

    def __getitem__(self, idx):
        # decoded on the CPU whatever the caller's device scope, as ImageFolderDataset does
        return _np.array(self._data[idx], dtype=onp.uint8, device=_cpu()), self._label[idx]

    def __len__(self):
        return len(self._label)


_IDX_UBYTE = 0x08


def _read_idx(path, ndim):
    """The uint8 array of an idx file (the MNIST format: 2 zero bytes, type 0x08 for unsigned
    bytes, the number of dimensions, each dimension as a big-endian uint32, then the data),
    gzip-compressed when the name ends in .gz. Raises ValueError naming the file when it is not
    such a file with `ndim` dimensions or holds fewer or more bytes than its header says."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            content = f.read()
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"Cannot read {path}: {err}") from err
    header_size = 4 + 4 * ndim
    if len(content) >= 4:  # the magic number first: it tells a wrong file from a short one
        zeros, data_type, file_ndim = struct.unpack(">HBB", content[:4])
        if zeros != 0 or data_type != _IDX_UBYTE or file_ndim != ndim:
            raise ValueError(f"{path} is not an idx file of unsigned bytes with {ndim} "
                             f"dimensions: its magic number is 0x{content[:4].hex()} (expected "
                             f"0x0000{_IDX_UBYTE:02x}{ndim:02x})")
    if len(content) < header_size:
        raise ValueError(f"{path} is truncated: {len(content)} bytes, shorter than the "
                         f"{header_size}-byte idx header")
    shape = struct.unpack(f">{ndim}I", content[4:header_size])
    expected = int(onp.prod(shape, dtype=onp.int64))
    if len(content) - header_size != expected:
        raise ValueError(f"{path} is truncated or corrupt: its header gives shape {shape}, "
                         f"{expected} bytes of data, but it holds {len(content) - header_size}")
    return onp.frombuffer(content, dtype=onp.uint8, offset=header_size).reshape(shape)


class MNIST(_StandardFilesDataset):
    """The MNIST handwritten digits: 60,000 training and 10,000 test 28x28 grayscale images
    and their labels 0-9, read from the four idx files (train-images-idx3-ubyte.gz,
    train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) in `root`.

    A sample is (image, label): a (28, 28, 1) uint8 pymx array and an int32. `transform` must
    be None (MXNet 2.x's rule); use dataset.transform_first(...).
    """

    _source = "http://yann.lecun.com/exdb/mnist/"

    def __init__(self, root=os.path.join(_DATASETS_ROOT, "mnist"), train=True, transform=None):
        self._train = train
        super().__init__(root, transform)

    def _get_data(self):
        prefix = "train" if self._train else "t10k"
        names = [f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz"]
        images_path, labels_path = self._find_files(
            [(name, name[:-len(".gz")]) for name in names], [""], self._source)
        images = _read_idx(images_path, ndim=3)
        labels = _read_idx(labels_path, ndim=1)
        if len(images) != len(labels):
            raise ValueError(f"{type(self).__name__}: {images_path} holds {len(images)} images "
                             f"but {labels_path} holds {len(labels)} labels")
        return images[:, :, :, None], labels.astype(onp.int32)


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: 28x28 grayscale images of 10 kinds of clothing in MNIST's
    format and file names, read from `root`; see MNIST."""

    _source = "https://github.com/zalandoresearch/fashion-mnist"

    def __init__(self, root=os.path.join(_DATASETS_ROOT, "fashion-mnist"), train=True,
                 transform=None):
        super().__init__(root, train, transform)


class CIFAR10(_StandardFilesDataset):
    """CIFAR-10: 50,000 training and 10,000 test 32x32 colour images in 10 classes, read from
    the binary version's files (data_batch_1.bin ... data_batch_5.bin, test_batch.bin) in `root`
    or in root/cifar-10-batches-bin. Each record is a label byte and 3072 bytes of image,
    channel-major.

    A sample is (image, label): a (32, 32, 3) uint8 pymx array and an int32. `transform` must
    be None (MXNet 2.x's rule); use dataset.transform_first(...).
    """

    _source = "https://www.cs.toronto.edu/~kriz/cifar.html (the binary version)"
    _directories = ["", "cifar-10-batches-bin"]
    _label_bytes = 1
    _num_classes = (10,)  # per label byte

    def __init__(self, root=os.path.join(_DATASETS_ROOT, "cifar10"), train=True, transform=None):
        self._train = train
        super().__init__(root, transform)

    def _file_names(self):
        if self._train:
            return [f"data_batch_{i}.bin" for i in range(1, 6)]
        return ["test_batch.bin"]

    def _label_index(self):
        return 0

    def _read_batch(self, path):
        record_size = self._label_bytes + 3 * 32 * 32
        with open(path, "rb") as f:
            content = f.read()
        if not content or len(content) % record_size:
            raise ValueError(f"{path} is truncated or corrupt: {len(content)} bytes is not a "
                             f"positive multiple of the {record_size}-byte record of "
                             f"{type(self).__name__}")
        records = onp.frombuffer(content, dtype=onp.uint8).reshape(-1, record_size)
        for index, num_classes in enumerate(self._num_classes):
            largest = int(records[:, index].max())
            if largest >= num_classes:
                raise ValueError(f"{path} is corrupt or not a {type(self).__name__} file: a "
                                 f"label is {largest}, not below {num_classes}")
        images = records[:, self._label_bytes:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return images, records[:, self._label_index()].astype(onp.int32)

    def _get_data(self):
        paths = self._find_files([(name,) for name in self._file_names()], self._directories,
                                 self._source)
        images, labels = zip(*(self._read_batch(path) for path in paths))
        return onp.concatenate(images), onp.concatenate(labels)


class CIFAR100(CIFAR10):
    """CIFAR-100: 50,000 training and 10,000 test 32x32 colour images, read from the binary
    version's train.bin and test.bin in `root` or in root/cifar-100-binary. Each record is a
    coarse label byte (20 superclasses), a fine label byte (100 classes) and 3072 bytes of
    image. `fine_label` selects the fine labels instead of the coarse ones; see CIFAR10.
    """

    _directories = ["", "cifar-100-binary"]
    _label_bytes = 2
    _num_classes = (20, 100)

    def __init__(self, root=os.path.join(_DATASETS_ROOT, "cifar100"), fine_label=False,
                 train=True, transform=None):
        self._fine_label = fine_label
        super().__init__(root, train, transform)

    def _file_names(self):
        return ["train.bin" if self._train else "test.bin"]

    def _label_index(self):
        return 1 if self._fine_label else 0
