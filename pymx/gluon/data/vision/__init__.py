"""Vision datasets and transforms."""
from . import transforms
from .datasets import CIFAR10, CIFAR100, MNIST, FashionMNIST, ImageFolderDataset

__all__ = ["ImageFolderDataset", "MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "transforms"]
