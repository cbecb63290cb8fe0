"""The test tiers (tests/conftest.py): ``python -m pytest`` skips the tests marked ``slow``,
``--full`` runs them, ``--run-docs`` alone runs the ``docs`` tests; CI and the mutation tester
run the full tier."""
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

SUITE = """
import pytest

def test_quick():
    pass

@pytest.mark.slow
def test_expensive():
    pass

@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2])
def test_expensive_sizes(n):
    pass

@pytest.mark.docs
def test_docs_command():
    pass
"""


@pytest.fixture
def suite(pytester):
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def _outcomes(result):
    return {r.nodeid.split("::")[-1]: r.outcome for r in result.getreports("pytest_runtest_logreport")
            if r.when == "call" or (r.when == "setup" and r.outcome == "skipped")}


def test_the_quick_tier_skips_slow_tests_and_says_how_to_run_them(suite):
    result = suite.inline_run("-p", "no:cacheprovider", "-rs")
    result.assertoutcome(passed=1, skipped=4)
    outcomes = _outcomes(result)
    assert outcomes == {"test_quick": "passed", "test_expensive": "skipped", "test_expensive_sizes[1]": "skipped",
                        "test_expensive_sizes[2]": "skipped", "test_docs_command": "skipped"}
    skipped = [r for r in result.getreports("pytest_runtest_logreport") if r.skipped]
    assert all("--full" in r.longrepr[2] for r in skipped if "expensive" in r.nodeid)


def test_full_runs_the_slow_tests_but_not_the_docs_commands(suite):
    result = suite.inline_run("-p", "no:cacheprovider", "--full")
    result.assertoutcome(passed=4, skipped=1)
    assert _outcomes(result)["test_docs_command"] == "skipped"


def test_run_docs_alone_runs_the_docs_tests_and_still_skips_slow(suite):
    result = suite.inline_run("-p", "no:cacheprovider", "--run-docs")
    result.assertoutcome(passed=2, skipped=3)
    assert _outcomes(result)["test_docs_command"] == "passed"


def test_the_slow_marker_is_registered_and_ci_and_the_mutation_tester_run_the_full_tier():
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in ini["markers"])
    ci = [line.split("#")[0].strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "python -m pytest --full" in ci
    assert '"--full"' in (ROOT / "scripts" / "mutate.py").read_text()


PROTOCOL_PROBE = """
from warpsmith.check import hardened

def test_protocol(request):
    seen = (hardened._Session.endurance.__name__, hardened.check.__kwdefaults__["settle_s"])
    with open("seen_" + request.node.path.stem.removeprefix("test_probe_") + ".txt", "w") as f:
        f.write(repr(seen))
"""


@pytest.mark.parametrize("full", [False, True])
def test_the_whole_check_protocol_runs_in_its_own_tests_and_where_marked(pytester, full):
    """Both tiers: no endurance phase and a short settle pause, except under tests/check/ (the
    protocol's own tests) and in tests marked whole_check_protocol."""
    from warpsmith.check import hardened

    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    whole_check_protocol: the whole protocol\n")
    for folder in ("tests/check", "tests/compiler"):
        (pytester.path / folder).mkdir(parents=True)
    (pytester.path / "tests/check/test_probe_check.py").write_text(PROTOCOL_PROBE)
    (pytester.path / "tests/compiler/test_probe_compiler.py").write_text(PROTOCOL_PROBE)
    (pytester.path / "tests/compiler/test_probe_marked.py").write_text(
        "import pytest\npytestmark = pytest.mark.whole_check_protocol\n" + PROTOCOL_PROBE)
    # a process of its own: this test's own process has the quick protocol's patch applied (or not)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n0", *(["--full"] if full else []))
    result.assert_outcomes(passed=3)
    seen = {p.name: eval(p.read_text()) for p in pytester.path.glob("seen_*.txt")}
    real = ("endurance", hardened.SETTLE_S)
    assert seen["seen_check.txt"] == real and seen["seen_marked.txt"] == real
    assert seen["seen_compiler.txt"] == ("no_endurance", 0.005)


def test_auto_workers_are_two_per_core_and_fewer_where_memory_is_short(monkeypatch):
    import os

    import conftest

    cores = len(os.sched_getaffinity(0))
    assert conftest._available_gib() > 0  # read from /proc/meminfo here
    monkeypatch.setattr(conftest, "_available_gib", lambda: 1024)
    assert conftest.pytest_xdist_auto_num_workers(None) == 2 * cores
    monkeypatch.setattr(conftest, "_available_gib", lambda: conftest.WORKER_MEMORY_GIB)
    assert conftest.pytest_xdist_auto_num_workers(None) == 1
    monkeypatch.setattr(conftest, "_available_gib", lambda: 0)
    assert conftest.pytest_xdist_auto_num_workers(None) == 1
