"""Writing a file so that it is either complete or untouched (DESIGN 3.7: nothing lost on disk)."""
import errno
import os
import tempfile


def write_atomically(filename, write):
    """Calls write(binary file) on a temporary file beside `filename`, then renames it over
    `filename`; on any failure the temporary file is removed and `filename` is untouched."""
    filename = os.fspath(filename)
    directory = os.path.dirname(os.path.abspath(filename))
    if not os.path.isdir(directory):
        # mkstemp's own error would name the temporary file, not the one the caller asked for
        raise FileNotFoundError(errno.ENOENT, f"Cannot write {filename!r}: directory "
                                              f"{directory!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(filename) + '.', suffix='.tmp',
                               dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, filename)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
