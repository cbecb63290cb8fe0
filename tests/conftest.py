"""Test setup: kernels run under Triton's interpreter (no GPU here), and no test touches the
user's tuning DB.

Tiers: ``python -m pytest`` (the README's command) runs the quick tier, which skips the tests
marked ``slow``; ``python -m pytest --full`` runs them too (CI, ``scripts/mutate.py``). A test is
marked ``slow`` only where a quick test covers the same code path (the same check, the same
kernel at another size): the quick tier keeps a correctness test of every family and every cheat
class of the check harness. ``--run-docs`` (marker ``docs``) is a tier of its own, as before.
"""
import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

pytest_plugins = ("pytester",)  # tests/test_tiers.py runs pytest on a tiny suite of its own


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="Run the whole suite, the tests marked `slow` included (CI's pass; "
                          "without it the quick tier skips them).")
    parser.addoption("--run-docs", action="store_true", default=False,
                     help="Run the commands of the docs for real (tests/test_docs.py, marker `docs`; slow).")


def pytest_xdist_auto_num_workers(config):
    """Workers for ``-n auto`` (the default of ``addopts``): two per core the process may use, fewer
    where memory is short (one per :data:`WORKER_MEMORY_GIB` of available memory, at least one).

    Tests wait often (a child's timeout, a sandbox's start, a subprocess): with one worker per core
    a fifth of the quick tier's time was idle on 2 cores, with three workers 7 to 11%, with four 4%
    (docs/contributing.md, "Time"). ``-n N`` still chooses N."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(2 * cores, _available_gib() // WORKER_MEMORY_GIB))


WORKER_MEMORY_GIB = 3  # a worker's peak with the processes it starts (2.1 GB measured: a Ray or check child)


def _available_gib() -> int:
    """Available memory in GiB (``MemAvailable``); a large number where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // (1024 * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 20


def _shares_a_module_fixture(item) -> bool:
    """The item uses a fixture of its own module computed once per module (or session): one worker
    should run all such items, or each worker computes it again (e.g. the compiler's solved problems)."""
    infos = getattr(item, "_fixtureinfo", None)
    module = getattr(getattr(item, "module", None), "__name__", None)
    for defs in (infos.name2fixturedefs.values() if infos else ()):
        d = defs[-1]
        if d.scope in ("module", "session") and getattr(d.func, "__module__", None) == module:
            return True
    return False


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    full, docs = config.getoption("--full"), config.getoption("--run-docs")
    skip_slow = pytest.mark.skip(reason="slow: the quick tier skips it (give pytest --full)")
    skip_docs = pytest.mark.skip(reason="runs a command of the docs for real: give pytest --run-docs")
    for item in items:
        if not docs and "docs" in item.keywords:
            item.add_marker(skip_docs)
        elif not full and "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(autouse=True)
def _private_db(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "tuning.db"))
    from warpsmith.dispatch import clear_cache

    clear_cache()
    yield
    clear_cache()


#: the test folders whose subject is the check's protocol itself: they always run the whole protocol
PROTOCOL_TESTS = ("tests/check/",)


@pytest.fixture(autouse=True)
def _quick_check_protocol(request, monkeypatch):
    """Both tiers run the check's protocol without its endurance phase and with short settle pauses,
    except in the tests of the protocol itself (:data:`PROTOCOL_TESTS`) and the tests marked
    ``whole_check_protocol``. Elsewhere the check judges warpsmith's own emitted programs (``solve``,
    the compiler's tests): what those tests ask is whether the program's values are right, which every
    trial and repeat still judges; the endurance phase (further calls, against a candidate that turns
    wrong after N calls) and the settle pause (against late writes from a thread) guard against
    adversaries and are tested in tests/check, and a marked compiler test runs them on a solve."""
    if request.node.nodeid.startswith(PROTOCOL_TESTS) or request.node.get_closest_marker("whole_check_protocol"):
        yield
        return
    from warpsmith.check import hardened

    def no_endurance(self, gen, budget_s, t0):
        self.endurance_calls = (0, 0)

    monkeypatch.setattr(hardened._Session, "endurance", no_endurance)
    monkeypatch.setitem(hardened.check.__kwdefaults__, "settle_s", QUICK_SETTLE_S)
    yield


QUICK_SETTLE_S = 0.005  # the quick tier's settle pause outside the protocol's own tests (the default: hardened.SETTLE_S)
