"""npx.save, npx.savez and npx.load: arrays in NumPy's .npy and .npz files, as MXNet 2.x.

    npx.save('w.npy', w)               # one array -> .npy;     npx.load gives the array
    npx.savez('ws.npz', w, b=b)        # arrays -> .npz         npx.load gives {'arr_0': w, 'b': b}

The files are standard: NumPy reads and writes them (np.load / np.save / np.savez), except that
bfloat16 arrays are stored with MXNet's descr '<b2' (see Note [Parameter file formats] in
pymx/gluon/_params_file.py, whose machinery writes and reads them). A file is written to a
temporary file beside it and renamed into place, so a failed save leaves any previous file
intact. npx.load also reads MXNet's legacy NDArray list files (mx.nd.save, MXNet 1.x
npx.save): a list of arrays, a single array when the list holds one, a dict when it is named.

Deliberate differences from MXNet 2.x:
- Arrays load on the cpu (MXNet's legacy records restore their saved device when a GPU
  exists); move them with `.to_device(...)` / `.copyto(...)`.
- `file` may be an os.PathLike as well as a str; an existing file is replaced atomically.
- npx.savez raises ValueError (not AssertionError) when a positional array's name arr_<i> is
  also a keyword, and TypeError naming the offending value when one is not a pymx array.
- Sparse arrays do not exist in pymx, so no sparse members are written or read.
"""
import os

from pymx.device import cpu
from pymx.ndarray import from_numpy, ndarray

__all__ = ["save", "savez", "load"]

_NPY_MAGIC = b"\x93NUMPY"


def _filename(file, func):
    if not isinstance(file, (str, os.PathLike)):
        raise TypeError(f"npx.{func}: file must be a str or os.PathLike file name, got "
                        f"{type(file).__name__}")
    return os.fspath(file)


def save(file, arr):
    """Saves the array `arr` to `file` in NumPy's .npy format (the name is used as given: no
    '.npy' is appended). npx.load(file) returns the array; np.load reads it too."""
    filename = _filename(file, "save")
    if not isinstance(arr, ndarray):
        raise ValueError(f"npx.save: data needs to be a pymx ndarray, got {type(arr).__name__}"
                         f" (use npx.savez for several arrays)")
    from pymx.gluon._params_file import save_npy  # lazily: pymx.gluon imports npx
    save_npy(filename, arr._host_values())


def savez(file, *args, **kwds):
    """Saves arrays to `file` as an uncompressed .npz (no '.npz' is appended): positional
    arrays are named arr_0, arr_1, ..., keyword arrays by their keyword. npx.load(file) returns
    {name: array}; np.load reads it too."""
    filename = _filename(file, "savez")
    arrays = {}
    for i, arr in enumerate(args):
        name = f"arr_{i}"
        if name in kwds:
            raise ValueError(f"npx.savez: positional argument {i} is saved as {name!r}, which "
                             f"is also given as a keyword argument")
        arrays[name] = arr
    arrays.update(kwds)
    for name, arr in arrays.items():
        if not isinstance(arr, ndarray):
            raise TypeError(f"npx.savez: {name!r} must be a pymx ndarray, got "
                            f"{type(arr).__name__}")
    from pymx.gluon._params_file import save_npz
    save_npz(filename, {name: arr._host_values() for name, arr in arrays.items()})


def load(file):
    """Loads `file` on the cpu: a .npy file gives its array, a .npz file {name: array}, an
    MXNet legacy list a list of arrays (the array itself when the list holds one) or, when
    its arrays are named, {name: array}. A truncated or corrupt file raises ValueError naming
    it."""
    filename = _filename(file, "load")
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"npx.load: file '{filename}' does not exist")
    from pymx.gluon._params_file import _LegacyReader, _load_npz, _read_npy, _ZIP_MAGICS
    with open(filename, "rb") as f:
        blob = f.read()
    if blob.startswith(_NPY_MAGIC):
        try:
            values = _read_npy(blob)
        except (ValueError, SyntaxError, EOFError) as err:
            raise ValueError(f"npx.load: '{filename}' is a corrupt or truncated .npy file: "
                             f"{err}") from err
        return _to_pymx(values, filename, "its array")
    if blob[:4] in _ZIP_MAGICS:
        return {name: _to_pymx(values, filename, f"array {name!r}")
                for name, values in _load_npz(filename).items()}
    arrays, names = _LegacyReader(filename, blob).read_arrays()
    arrays = [_to_pymx(values, filename, f"array {i}") for i, values in enumerate(arrays)]
    if names:
        return dict(zip(names, arrays))
    return arrays[0] if len(arrays) == 1 else arrays


def _to_pymx(values, filename, what):
    try:
        return from_numpy(values, device=cpu())
    except TypeError as err:  # a dtype pymx lacks (complex, strings...)
        raise TypeError(f"npx.load: {what} in '{filename}': {err}") from err
