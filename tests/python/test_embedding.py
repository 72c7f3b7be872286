"""Embedding pymx in C++ programs: pymx.libinfo's paths, the installed C API header and CMake
package, and examples/embed built with CMake (find_package) and with a plain compiler line, then
run and checked against NumPy."""
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import numpy as onp
import pytest

import pymx
from pymx import libinfo
from pymx._c import core

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "embed"


def _tool(name):
    # The test extra installs cmake and ninja into the environment's scripts directory.
    path = shutil.which(name, path=os.pathsep.join([sysconfig.get_path("scripts"),
                                                    os.environ.get("PATH", "")]))
    assert path is not None, f"{name} not found (pip install '.[test]' installs it)"
    return path


def _run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _cmake_build(source, build):
    _run([_tool("cmake"), "-S", str(source), "-B", str(build), "-G", "Ninja",
          f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}",
          f"-DCMAKE_PREFIX_PATH={libinfo.cmake_prefix_path()}"])
    _run([_tool("cmake"), "--build", str(build)])


def _check_example_output(text):
    lines = dict(line.split(": ", 1) for line in text.splitlines())
    x = onp.array([[1, -2, 3], [0.5, 4, -1]], dtype=onp.float64)
    w = onp.array([[0.1, -0.2, 0.3, 0.4], [1, 0, -1, 0.5], [-0.3, 0.2, 0.1, 2]])
    b = onp.array([0.05, -0.1, 0.2, -3])
    expected = onp.maximum(x @ w + b, 0).ravel()
    y = onp.array(lines["y"].split(), dtype=onp.float64)
    onp.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)  # float32 arithmetic
    assert abs(float(lines["sum"]) - y.sum()) <= 1e-6 * abs(y.sum())
    assert "(2, 3) and (2, 3)" in lines["error"]
    onp.testing.assert_array_equal(onp.array(lines["y_again"].split(), dtype=onp.float64), y)
    assert lines["device"] == ("gpu(0)" if pymx.num_gpus() > 0 else "cpu(0)")


def test_libinfo_points_at_the_loaded_library_and_its_header():
    lib = libinfo.find_lib_path()[0]
    with open("/proc/self/maps") as maps:
        assert os.path.realpath(lib) in maps.read()
    header = pathlib.Path(libinfo.find_include_path()) / "pymx" / "c_api.h"
    major, minor = core.api_version()
    text = header.read_text()
    assert f"#define PMX_API_VERSION_MAJOR {major}\n" in text
    assert f"#define PMX_API_VERSION_MINOR {minor}\n" in text
    config = pathlib.Path(libinfo.cmake_prefix_path()) / "share" / "cmake" / "pymx"
    assert (config / "pymxConfig.cmake").is_file()


def test_libinfo_command_line(tmp_path):
    # Run outside the source tree, whose pymx/ has no compiled core.
    for flag, expected in [("--include", libinfo.find_include_path()),
                           ("--lib", libinfo.find_lib_path()[0]),
                           ("--cmake-prefix-path", libinfo.cmake_prefix_path())]:
        assert _run([sys.executable, "-m", "pymx.libinfo", flag], cwd=tmp_path).strip() == expected
    missing = subprocess.run([sys.executable, "-m", "pymx.libinfo"], capture_output=True,
                             text=True, timeout=60, cwd=tmp_path)
    assert missing.returncode == 2 and "one of the arguments" in missing.stderr


def test_example_builds_with_cmake_find_package_and_runs(tmp_path):
    _cmake_build(EXAMPLE, tmp_path / "build")
    _check_example_output(_run([str(tmp_path / "build" / "embed")]))


def test_example_builds_with_a_plain_compiler_line_and_runs(tmp_path):
    lib_dir = os.path.dirname(libinfo.find_lib_path()[0])
    program = tmp_path / "embed"
    _run([os.environ.get("CXX", "c++"), "-std=c++17", str(EXAMPLE / "embed.cc"),
          f"-I{libinfo.find_include_path()}", f"-L{lib_dir}", "-lpymx",
          f"-Wl,-rpath,{lib_dir}", "-o", str(program)])
    _check_example_output(_run([str(program)]))


def test_cmake_package_refuses_an_incompatible_version(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(wants_pymx_99 LANGUAGES CXX)\n"
        "find_package(pymx 99.0 CONFIG REQUIRED)\n")
    result = subprocess.run([_tool("cmake"), "-S", str(source), "-B", str(tmp_path / "build"),
                             f"-DCMAKE_PREFIX_PATH={libinfo.cmake_prefix_path()}"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "99.0" in result.stderr and pymx.__version__ in result.stderr, result.stderr


def test_missing_installed_file_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(libinfo, "_package_dir", lambda: str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "include" / "pymx" / "c_api.h")):
        libinfo.find_include_path()
    with pytest.raises(FileNotFoundError, match="CMake package"):
        libinfo.cmake_prefix_path()
