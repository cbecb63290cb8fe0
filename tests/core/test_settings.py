"""core.settings: the environment is read on every call (a change takes effect at once), while the
parsed Settings are cached per set of values (every kernel call reads them)."""
from pathlib import Path

from warpsmith.core.settings import settings


def test_a_changed_variable_takes_effect_at_once_and_equal_values_share_one_object(monkeypatch, tmp_path):
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "a.db"))
    first = settings()
    assert first.db_path == tmp_path / "a.db" and settings() is first  # parsed once for these values
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "b.db"))
    assert settings().db_path == tmp_path / "b.db"
    monkeypatch.delenv("WARPSMITH_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert settings().db_path == Path(tmp_path / "cache" / "warpsmith" / "tuning.db")
    monkeypatch.setenv("WARPSMITH_DISPATCH", "DEFAULT")
    assert settings().dispatch == "default"
