"""gluon.data: datasets, samplers, batchify functions and the DataLoader."""
from . import batchify, vision
from .dataloader import DataLoader
from .dataset import ArrayDataset, Dataset, RecordFileDataset, SimpleDataset
from .sampler import (BatchSampler, FilterSampler, IntervalSampler, RandomSampler, Sampler,
                      SequentialSampler)

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset", "Sampler",
           "SequentialSampler", "RandomSampler", "BatchSampler", "FilterSampler",
           "IntervalSampler", "DataLoader", "batchify", "vision"]
