"""gluon.data: datasets, samplers, batchify functions and the DataLoader."""
from . import batchify, vision
from .dataloader import DataLoader
from .dataset import ArrayDataset, Dataset, SimpleDataset
from .sampler import (BatchSampler, FilterSampler, IntervalSampler, RandomSampler, Sampler,
                      SequentialSampler)

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "Sampler", "SequentialSampler",
           "RandomSampler", "BatchSampler", "FilterSampler", "IntervalSampler", "DataLoader",
           "batchify", "vision"]
