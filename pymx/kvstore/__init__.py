"""Key-value stores that sum values across devices and processes (MXNet's `mx.kvstore`)."""
from .dist import DistKVStore
from .kvstore import KVStore, check_type, create
from .nccl import NcclKVStore

__all__ = ['KVStore', 'DistKVStore', 'NcclKVStore', 'create']
