"""ImageRecordIter (MXNet's mx.io.ImageRecordIter): float32 NCHW batches of the images of a
RecordIO file, decoded and augmented on a pool of threads.

It is pymx.image.ImageIter with MXNet's ImageRecordIter arguments, reading the .rec file
through pymx.recordio. Deliberate differences from MXNet 2.x:
- The last batch of an epoch is completed from the first images and reports `pad`, with
  round_batch True or False, and the next epoch starts again at the first image. MXNet's
  round_batch=True starts the next epoch after the images used to complete the batch, and its
  round_batch=False leaves the unfilled rows holding the previous batch's images.
- An image smaller than data_shape is cropped as pymx.image.center_crop / random_crop do (the
  largest box of the crop's aspect ratio, resized up); MXNet fails.
- Images are RGB with 3 channels (data_shape (3, H, W)).
- Random choices come from pymx's generator (Note [Random draws in pymx.image]); a batch is
  the same whatever preprocess_threads is.
"""
import os
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat

from ..image.augmenters import CreateAugmenter
from ..image.image_iter import ImageIter

__all__ = ["ImageRecordIter"]


class ImageRecordIter(ImageIter):
    """Batches (batch_size,) + data_shape of float32 CHW images read from path_imgrec, with
    labels (batch_size,) for label_width 1, else (batch_size, label_width).

    Each image is decoded as RGB, its shorter edge resized to `resize` (when > 0), cropped to
    data_shape's (H, W) at a random position (rand_crop) or the centre, flipped left-right with
    probability 0.5 (rand_mirror), then normalised per channel as (x - mean_c) / std_c.
    shuffle (at every reset) and num_parts / part_index need the index file: path_imgidx, or
    the .idx file next to path_imgrec. preprocess_threads images are decoded and augmented at
    once. close() (or leaving a `with` block) stops the threads.
    """

    def __init__(self, path_imgrec, data_shape, batch_size, path_imgidx=None, label_width=1,
                 shuffle=False, rand_crop=False, rand_mirror=False, resize=-1, mean_r=0.0,
                 mean_g=0.0, mean_b=0.0, std_r=1.0, std_g=1.0, std_b=1.0, inter_method=1,
                 preprocess_threads=4, part_index=0, num_parts=1, round_batch=True,
                 data_name="data", label_name="softmax_label"):
        if not isinstance(preprocess_threads, int) or preprocess_threads < 1:
            raise ValueError(f"ImageRecordIter: preprocess_threads must be an int >= 1, got "
                             f"{preprocess_threads!r}")
        if not os.path.isfile(path_imgrec):
            raise FileNotFoundError(f"ImageRecordIter: path_imgrec {path_imgrec} is not a file")
        if path_imgidx is None and (shuffle or num_parts > 1):
            default_index = os.path.splitext(path_imgrec)[0] + ".idx"
            path_imgidx = default_index if os.path.isfile(default_index) else None
        mean = (mean_r, mean_g, mean_b)
        std = (std_r, std_g, std_b)
        self._pool = ThreadPoolExecutor(max_workers=preprocess_threads,
                                        thread_name_prefix="ImageRecordIter")
        try:
            aug_list = CreateAugmenter(
                data_shape, resize=max(resize, 0), rand_crop=rand_crop, rand_mirror=rand_mirror,
                mean=mean if any(mean) else None,
                std=std if any(s != 1 for s in std) else None, inter_method=inter_method)
            super().__init__(batch_size, data_shape, label_width=label_width,
                             path_imgrec=path_imgrec, path_imgidx=path_imgidx, shuffle=shuffle,
                             part_index=part_index, num_parts=num_parts, aug_list=aug_list,
                             data_name=data_name, label_name=label_name,
                             last_batch_handle="pad")
        except BaseException:
            self.close()
            raise

    def _process(self, samples, batch_seed):
        """Decodes and augments the samples on the thread pool, in order."""
        return list(self._pool.map(self._process_one, samples, repeat(batch_seed)))

    def close(self):
        """Stops the preprocessing threads."""
        self._pool.shutdown(wait=True)

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
