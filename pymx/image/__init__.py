"""pymx.image (MXNet's mx.image): decoding, resizing, cropping and augmenting HWC images, and
ImageIter, an iterator of augmented image batches.

    img = pymx.image.imread('cat.jpg')                     # (H, W, 3) uint8 RGB
    img = pymx.image.resize_short(img, 256)
    img, _ = pymx.image.center_crop(img, (224, 224))
"""
from .image import (imread, imdecode, imresize, resize_short, fixed_crop, center_crop,
                    random_crop, random_size_crop, scale_down, color_normalize, copyMakeBorder)
from .augmenters import (Augmenter, SequentialAug, ResizeAug, ForceResizeAug, RandomCropAug,
                         RandomSizedCropAug, CenterCropAug, RandomOrderAug, BrightnessJitterAug,
                         ContrastJitterAug, SaturationJitterAug, HueJitterAug, ColorJitterAug,
                         LightingAug, ColorNormalizeAug, RandomGrayAug, HorizontalFlipAug, CastAug,
                         CreateAugmenter)
from .image_iter import ImageIter

__all__ = ["imread", "imdecode", "imresize", "resize_short", "fixed_crop", "center_crop",
           "random_crop", "random_size_crop", "scale_down", "color_normalize", "copyMakeBorder",
           "Augmenter", "SequentialAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
           "RandomSizedCropAug", "CenterCropAug", "RandomOrderAug", "BrightnessJitterAug",
           "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug",
           "LightingAug", "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug",
           "CreateAugmenter", "ImageIter"]
