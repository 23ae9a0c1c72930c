"""Shared paths of the keyer package's tests. ctest sets KEYER_BIN, KEYER_TEST_DATA and
KEYER_MODELS_DIR (python/CMakeLists.txt); run by hand, the defaults are the repository's
build/ and tests/data/."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("KEYER_TEST_DATA", REPO / "tests" / "data"))
KEYER_BIN = os.environ.get("KEYER_BIN", str(REPO / "build" / "keyer"))
os.environ.setdefault("KEYER_MODELS_DIR", str(REPO / "models"))


@pytest.fixture
def keyer_bin():
    if not os.path.exists(KEYER_BIN):
        pytest.skip("the keyer command is not built (%s)" % KEYER_BIN)
    return KEYER_BIN


@pytest.fixture(scope="session")
def data():
    return DATA
