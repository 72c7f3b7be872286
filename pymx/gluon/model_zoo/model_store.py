"""Where pretrained parameter files are found. pymx never downloads: a file must already be on
disk, put there by the user (for instance MXNet's `mxnet.gluon.model_zoo.model_store
.get_model_file(name)`, which downloads into ~/.mxnet/models, or a `save_parameters` of pymx).

`get_model_file('resnet18_v1', root)` accepts `<root>/resnet18_v1.params` or MXNet's name with
the first 8 hex digits of the file's SHA-1, `<root>/resnet18_v1-a0666292.params`.
"""
import glob
import os
import re

from ...device import cpu

__all__ = ['get_model_file', 'load_pretrained', 'resolve_device', 'DEFAULT_ROOT']

# MXNet's default ($MXNET_HOME unset), so files MXNet downloaded are found where it put them.
DEFAULT_ROOT = os.path.join('~', '.mxnet', 'models')

_HASH_SUFFIX = re.compile(r'-[0-9a-f]{8}\.params')


def get_model_file(name, root=DEFAULT_ROOT):
    """Returns the path of the parameter file of model `name` in `root` (see the module
    docstring for the accepted file names). Raises FileNotFoundError naming the file looked for
    when there is none, and ValueError when several hash-suffixed files make the choice
    ambiguous."""
    root = os.path.expanduser(os.fspath(root))
    plain = os.path.join(root, name + '.params')
    if os.path.isfile(plain):
        return plain
    pattern = os.path.join(glob.escape(root), glob.escape(name) + '-*.params')
    candidates = sorted(path for path in glob.glob(pattern)
                        if _HASH_SUFFIX.fullmatch(os.path.basename(path)[len(name):]))
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise ValueError(f"Pretrained model '{name}': several parameter files in {root}: "
                         f"{', '.join(os.path.basename(p) for p in candidates)}; keep one, or "
                         f"copy the one to use to {plain}")
    raise FileNotFoundError(
        f"Pretrained model '{name}': no parameter file {plain} (nor {name}-<sha1 prefix>.params "
        f"in that directory). pymx does not download: save the parameters there with "
        f"net.save_parameters('{plain}'), or copy MXNet's file (mxnet.gluon.model_zoo."
        f"model_store.get_model_file('{name}') downloads it to ~/.mxnet/models), or pass "
        f"root= the directory that holds it.")


def load_pretrained(net, name, root, device):
    """Loads `name`'s parameter file from `root` into `net`, placing it on `device`."""
    net.load_parameters(get_model_file(name, root), device=device)
    return net


def resolve_device(device, ctx):
    """The device to load pretrained parameters onto: `device`, or `ctx` (MXNet 1.x's name for
    the same argument); the CPU when neither is given."""
    if ctx is not None:
        if device is not None:
            raise ValueError(f"Give either device or its alias ctx, not both (device={device}, "
                             f"ctx={ctx})")
        device = ctx
    return cpu() if device is None else device
