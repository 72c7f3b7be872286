"""pymx/_c/c_api.pxd mirrors engine/include/pymx/c_api.h: the same functions, nothing more."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _names(path, pattern):
    text = path.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # C comments
    text = re.sub(r"#[^\n]*", "", text) if path.suffix == ".pxd" else text  # Cython comments
    return set(re.findall(pattern, text))


def test_pxd_declares_every_header_function():
    header = _names(ROOT / "engine/include/pymx/c_api.h", r"PMX_API\s+[\w\s\*]*?\b(pmx_\w+)\s*\(")
    mirror = _names(ROOT / "pymx/_c/c_api.pxd", r"\b(pmx_\w+)\s*\(")
    assert len(header) > 30
    assert header - mirror == set(), "declared in c_api.h but missing from c_api.pxd"
    assert mirror - header == set(), "declared in c_api.pxd but not in c_api.h"


def test_api_version_matches_header():
    from pymx._c import core
    text = (ROOT / "engine/include/pymx/c_api.h").read_text()
    major = int(re.search(r"PMX_API_VERSION_MAJOR (\d+)", text).group(1))
    minor = int(re.search(r"PMX_API_VERSION_MINOR (\d+)", text).group(1))
    assert core.api_version() == (major, minor)


def test_op_names_lists_the_registry():
    from pymx._c import core
    names = core.op_names()
    assert names == sorted(names) and len(names) == len(set(names))
    assert {"add", "add_scalar", "cast", "zeros"} <= set(names)


def test_engine_dump_is_text():
    from pymx._c import core
    assert isinstance(core.engine_dump(), str)
