"""Key-value stores that aggregate gradients across devices (MXNet's `mx.kvstore`)."""
from .kvstore import KVStore, create

__all__ = ['KVStore', 'create']
