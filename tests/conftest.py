"""Test setup: kernels run under Triton's interpreter (no GPU here), and no test touches the
user's tuning DB."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--run-docs", action="store_true", default=False,
                     help="Run the commands of the docs for real (tests/test_docs.py, marker `docs`; slow).")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-docs"):
        return
    skip = pytest.mark.skip(reason="runs a command of the docs for real: give pytest --run-docs")
    for item in items:
        if "docs" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_db(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "tuning.db"))
    from warpsmith.dispatch import clear_cache

    clear_cache()
    yield
    clear_cache()
