"""Vision datasets and transforms."""
from . import transforms
from .datasets import (CIFAR10, CIFAR100, MNIST, FashionMNIST, ImageFolderDataset,
                       ImageRecordDataset)

__all__ = ["ImageFolderDataset", "ImageRecordDataset", "MNIST", "FashionMNIST", "CIFAR10",
           "CIFAR100", "transforms"]
