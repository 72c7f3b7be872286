"""Where pymx's native library and C API header are, for C and C++ programs that embed pymx
(examples/embed). From a shell:

    python -m pymx.libinfo --cmake-prefix-path   # for CMake's find_package(pymx CONFIG)
    python -m pymx.libinfo --include             # the directory holding pymx/c_api.h
    python -m pymx.libinfo --lib                 # the path of libpymx.so
"""
import argparse
import os

from ._c import core

__all__ = ['find_lib_path', 'find_include_path', 'cmake_prefix_path']


def _package_dir():
    # The built files (libpymx.so, the header, the CMake package) are installed next to the
    # compiled modules, which an editable install keeps apart from the Python sources.
    return os.path.dirname(os.path.dirname(os.path.abspath(core.__file__)))


def _existing(path, what):
    if not os.path.exists(path):
        raise FileNotFoundError(f"pymx's {what} is not at {path}; this installation lacks it "
                                f"(reinstall pymx with pip)")
    return path


def find_lib_path():
    """[the path of libpymx.so], a list as MXNet's libinfo gives it."""
    return [_existing(os.path.join(_package_dir(), 'libpymx.so'), 'native library')]


def find_include_path():
    """The directory to pass with -I: it holds pymx/c_api.h."""
    include = os.path.join(_package_dir(), 'include')
    _existing(os.path.join(include, 'pymx', 'c_api.h'), 'C API header')
    return include


def cmake_prefix_path():
    """The directory to add to CMAKE_PREFIX_PATH for `find_package(pymx CONFIG)`."""
    package = _package_dir()
    _existing(os.path.join(package, 'share', 'cmake', 'pymx', 'pymxConfig.cmake'),
              'CMake package')
    return package


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m pymx.libinfo', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--cmake-prefix-path', action='store_true')
    which.add_argument('--include', action='store_true')
    which.add_argument('--lib', action='store_true')
    args = parser.parse_args(argv)
    if args.cmake_prefix_path:
        print(cmake_prefix_path())
    elif args.include:
        print(find_include_path())
    else:
        print(find_lib_path()[0])


if __name__ == '__main__':
    main()
