"""Image datasets (MXNet python/mxnet/gluon/data/vision/datasets.py)."""
import os
import warnings

import numpy as onp
from PIL import Image, UnidentifiedImageError

from .... import numpy as _np
from ....device import cpu as _cpu
from ..dataset import Dataset

__all__ = ["ImageFolderDataset", "imread"]


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
