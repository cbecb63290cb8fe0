"""Test setup: kernels run under Triton's interpreter (no GPU here), and no test touches the
user's tuning DB."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _private_db(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "tuning.db"))
    from warpsmith.dispatch import clear_cache

    clear_cache()
    yield
    clear_cache()
