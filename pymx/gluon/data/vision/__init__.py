"""Vision datasets and transforms."""
from . import transforms
from .datasets import ImageFolderDataset

__all__ = ["ImageFolderDataset", "transforms"]
