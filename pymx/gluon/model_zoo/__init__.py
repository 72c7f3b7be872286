"""Predefined networks (MXNet's `gluon.model_zoo`): `vision` holds the image classifiers,
`model_store` finds pretrained parameter files on disk."""
from . import model_store, vision

__all__ = ['model_store', 'vision']
