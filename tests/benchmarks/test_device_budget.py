"""benchmarks/run_h200.sh keeps one time budget (540 s: the device tool's 600 s less start and transfers),
header, install and result copying included, and benchmarks/unpack_wheel.py installs a wheel without pip.

The script runs here with fake ``python3`` and ``nvidia-smi`` on PATH (nothing real runs, no GPU): a
fake can hang, and hang ignoring SIGINT, so the limits and kill graces are exercised for real."""
from __future__ import annotations

import os
import platform
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from bench_scripts import BENCHMARKS, load

SCRIPT = BENCHMARKS / "run_h200.sh"
DEVICE_LIMIT_S = 540

FAKE_PYTHON = r"""#!/bin/bash
echo "python $*" >> "$FAKE_LOG"
if [ -n "${FAKE_DELEGATE:-}" ]; then  # the wheel test: unpack for real, then import what was unpacked
  case " $* " in
    *" benchmarks/unpack_wheel.py "*) exec "$REAL_PY" "$@" ;;
    *" benchmarks/memory_bound.py "*) exec "$REAL_PY" -c "import tinypkg; print('tinypkg', tinypkg.VALUE)" ;;
  esac
fi
if [ -n "${FAKE_HANG:-}" ] && [[ " $* " =~ $FAKE_HANG ]]; then trap '' INT; exec sleep 1000; fi
echo "fake python: $*"
"""
FAKE_SMI = r"""#!/bin/bash
echo "nvidia-smi $*" >> "$FAKE_LOG"
[ -n "${FAKE_SMI_HANG:-}" ] && exec sleep 1000
echo "fake nvidia-smi"
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment with the fakes first on PATH and no BENCH_* setting from outside."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    for name, text in (("python3", FAKE_PYTHON), ("nvidia-smi", FAKE_SMI)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_") and not k.startswith("FAKE_")}
    env.update(PATH=f"{bin_}:{env['PATH']}", PYTHON=str(bin_ / "python3"), REAL_PY=sys.executable,
               OUT=str(tmp_path / "out"), FAKE_LOG=str(tmp_path / "calls.log"),
               BENCH_WHEELS=str(tmp_path / "no-wheels"), BENCH_SITE=str(tmp_path / "site"))
    env.update(extra)
    return env


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the script's: ``timeout`` puts its steps in groups of their own)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                os.kill(int(stat.parent.name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def _run(argv: list[str], env: dict[str, str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    """The script in a session of its own, killed whole (fakes included) if it outlives ``timeout``."""
    t = time.monotonic()
    proc = subprocess.Popen(["bash", str(SCRIPT), *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        proc.communicate()
        pytest.fail(f"run_h200.sh {' '.join(argv)} still running after {timeout} s")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), time.monotonic() - t


def _plan(tmp_path: Path, suite: str, **extra: str) -> dict:
    p, _ = _run(["--print-plan", suite], _env(tmp_path, **extra), timeout=20)
    assert p.returncode == 0, p.stderr
    head = dict(kv.split("=") for kv in p.stdout.splitlines()[0].split()[1:])
    steps = []
    for line in p.stdout.splitlines():
        if line.startswith("step "):
            name, *kvs = line.split()[1:]
            steps.append((name, {k: int(v) for k, v in (kv.split("=") for kv in kvs)}))
    worst = int(re.search(r"^worst_case=(\d+)$", p.stdout, re.M).group(1))
    return {"head": head, "steps": steps, "worst_case": worst}


@pytest.mark.parametrize("gpucheck", ["0", "1"])
@pytest.mark.parametrize("suite", ["gemm", "memory", "attention", "decode", "lowprec", "conv", "kernelbench", "all"])
def test_worst_case_of_each_suite_fits_the_device_call(tmp_path, suite, gpucheck):
    plan = _plan(tmp_path, suite, BENCH_GPUCHECK=gpucheck)
    assert plan["head"]["total"] == str(DEVICE_LIMIT_S)  # the default budget
    steps = dict(plan["steps"])
    # every step bounded by its limit, then its kill grace, then a second of clock rounding
    worst = sum(s["limit"] + s["grace"] + s["slack"] for s in steps.values() if s["limit"] > 0)
    assert worst == plan["worst_case"] <= DEVICE_LIMIT_S, plan
    assert all(0 < s["grace"] <= 10 and s["slack"] >= 1 for s in steps.values())
    expected = ["header", *(["gpucheck"] if gpucheck == "1" else []), *(["install"] if suite in ("memory", "all") else []),
                *(["gemm", "memory"] if suite == "all" else [suite]), "copy"]
    assert [name for name, _ in plan["steps"]] == expected
    assert all(steps[s]["limit"] > 0 for s in expected)  # header, install and copy run inside the budget
    suites = [s for s in ("gemm", "memory", "attention", "decode", "lowprec", "conv", "kernelbench") if s in steps]
    for s in suites:  # both suites get time; each starts nothing new a minute before its limit
        assert steps[s]["limit"] >= (100 if len(suites) == 2 else 300), plan
        assert 0 < steps[s]["total_time"] <= steps[s]["limit"] - 60
    if gpucheck == "1":
        assert steps["gpucheck"]["limit"] >= 60


def test_readme_plan_table_is_the_plan(tmp_path):
    text = (BENCHMARKS / "README.md").read_text()
    for suite, extra, row in (("gemm", "0", "| `gemm` |"), ("memory", "0", "| `memory` |"), ("all", "0", "| `all` |"),
                              ("all", "1", "| `all`, `BENCH_GPUCHECK=1` |")):
        plan = _plan(tmp_path, suite, BENCH_GPUCHECK=extra)
        steps = dict(plan["steps"])
        line = next(ln for ln in text.splitlines() if ln.startswith(row))
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        want = [str(steps[s]["limit"]) if s in steps and "total_time" not in steps[s]
                else f"{steps[s]['limit']} ({steps[s]['total_time']})" if s in steps else "-"
                for s in ("header", "gpucheck", "install", "gemm", "memory", "copy")]
        assert cells == [*want, str(plan["worst_case"])], (row, cells, want)


def test_budget_and_limits_are_settings(tmp_path):
    plan = _plan(tmp_path, "all", BENCH_TOTAL="300", BENCH_GRACE="5", BENCH_GEMM_SHARE="25")
    steps = dict(plan["steps"])
    assert plan["worst_case"] <= 300 and steps["copy"]["grace"] == 5
    assert steps["gemm"]["limit"] < steps["memory"]["limit"] / 2


def test_hanging_header_and_pre_steps_stay_within_the_budget(tmp_path):
    """nvidia-smi hangs: the header is cut at its limit, and every later step still runs, in plan order."""
    extra = dict(BENCH_TOTAL="20", BENCH_GRACE="1", BENCH_HEADER_S="1", BENCH_GPUCHECK_S="1",
                 BENCH_INSTALL_S="1", BENCH_COPY_S="1", BENCH_GPUCHECK="1", FAKE_SMI_HANG="1")
    env = _env(tmp_path, **extra)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "liger_kernel-0.0.1-py3-none-any.whl").write_bytes(b"")  # the fake python does not open it
    env["BENCH_WHEELS"] = str(wheels)
    p, wall = _run(["all"], env, timeout=20 + 10)
    assert p.returncode == 0, p.stdout + p.stderr
    assert wall <= 20 + 2, wall
    ran = re.findall(r"^== step (\w+): limit", p.stdout, re.M)
    assert ran == [name for name, _ in _plan(tmp_path, "all", **extra)["steps"]]
    assert "== step header: exit status 124" in p.stdout  # cut by its limit, not waited for
    calls = (tmp_path / "calls.log").read_text()
    assert "gpucheck --target h200" in calls and "benchmarks/unpack_wheel.py --dest" in calls
    for script in ("matmul", "memory_bound"):
        assert re.search(rf"benchmarks/{script}\.py --out \S+ --total-time \d+", calls), calls
    assert (tmp_path / "out" / "run_h200.log").read_text().count("== step") >= 6


def test_a_suite_that_ignores_sigint_is_killed_within_the_budget(tmp_path):
    """matmul.py hangs and ignores SIGINT: SIGKILL after the grace, and the copy step still runs."""
    env = _env(tmp_path, BENCH_TOTAL="10", BENCH_GRACE="1", BENCH_HEADER_S="1", BENCH_COPY_S="1",
               FAKE_HANG="matmul")
    p, wall = _run(["gemm"], env, timeout=10 + 10)
    assert wall <= 10 + 2, wall
    assert p.returncode == 137, p.stdout + p.stderr  # timeout's status once it had to kill
    assert wall >= 4  # the suite had the time left (10 s less the copy step's worst case and its own grace)
    assert "== step copy: limit" in p.stdout and "fake python: - " in p.stdout


def test_plan_rejects_an_unknown_suite(tmp_path):
    p, _ = _run(["--print-plan", "bogus"], _env(tmp_path), timeout=20)
    assert p.returncode == 2 and "unknown suite" in p.stderr


# ----------------------------------------------------------------------------------- wheels without pip
def _wheel(path: Path, files: dict[str, str], purelib: bool = True) -> Path:
    dist = "tinypkg-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n")
        zf.writestr(f"{dist}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: {str(purelib).lower()}\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return path


TINY = {"tinypkg/__init__.py": "VALUE = 42\n", "tinypkg/sub/mod.py": "X = 1\n",
        "tinypkg-1.0.data/purelib/tiny_extra.py": "Y = 2\n", "tinypkg-1.0.data/scripts/tiny": "#!/bin/sh\n"}


def test_unpack_wheel_is_importable_with_its_metadata(tmp_path):
    uw = load("unpack_wheel")
    whl = _wheel(tmp_path / "tinypkg-1.0-py3-none-any.whl", TINY)
    dest = tmp_path / "site"
    assert uw.main(["--dest", str(dest), str(whl)]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["tiny_extra.py", "tinypkg", "tinypkg-1.0.dist-info"]
    code = ("import importlib.metadata as m, tinypkg, tinypkg.sub.mod, tiny_extra; "
            "print(tinypkg.VALUE, tinypkg.sub.mod.X, tiny_extra.Y, m.version('tinypkg'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(dest)}, cwd=str(tmp_path))
    assert out.stdout.split() == ["42", "1", "2", "1.0"], out.stderr


@pytest.mark.parametrize("files, purelib, why", [
    ({"../evil.py": "x"}, True, "unsafe path"),
    ({"/abs.py": "x"}, True, "unsafe path"),
    ({"tinypkg/__init__.py": ""}, False, "neither pure Python"),
])
def test_unpack_wheel_refuses(tmp_path, files, purelib, why):
    uw = load("unpack_wheel")
    whl = _wheel(tmp_path / "bad-1.0-py3-none-any.whl", {**TINY, **files}, purelib)
    with pytest.raises(uw.WheelError, match=why):
        uw.unpack(whl, tmp_path / "site")
    assert not (tmp_path / "site").exists() and not (tmp_path / "evil.py").exists()  # nothing written
    (tmp_path / "junk.whl").write_bytes(b"not a zip")
    assert uw.main(["--dest", str(tmp_path / "site"), str(tmp_path / "junk.whl")]) == 1


@pytest.mark.parametrize("tag, ok", [
    (f"py3-none-manylinux_2_17_{platform.machine()}.manylinux2014_{platform.machine()}", True),  # z3-solver's kind
    ("py3-none-manylinux_2_17_nonesucharch", False),  # another machine's
    (f"cp312-cp312-manylinux_2_17_{platform.machine()}", False),  # built for one Python: not judged here
    (f"py3-none-macosx_11_0_{platform.machine()}", False),
])
def test_unpack_wheel_takes_a_platform_wheel_only_for_this_machine(tmp_path, tag, ok):
    uw = load("unpack_wheel")
    whl = _wheel(tmp_path / f"tinypkg-1.0-{tag}.whl", TINY, purelib=False)
    if ok:
        assert "tinypkg" in uw.unpack(whl, tmp_path / "site")
    else:
        with pytest.raises(uw.WheelError, match="neither pure Python"):
            uw.unpack(whl, tmp_path / "site")


def test_run_h200_unpacks_the_liger_wheel_onto_pythonpath(tmp_path):
    """The script's install step with the real helper (no pip): the next suite imports the package."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels / "liger_kernel-9.9-py3-none-any.whl", TINY)  # any name liger_kernel-*.whl is taken
    env = _env(tmp_path, FAKE_DELEGATE="1", BENCH_WHEELS=str(wheels), BENCH_TOTAL="60", BENCH_GRACE="2")
    p, _ = _run(["memory"], env, timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"unpacked liger_kernel-9\.9-py3-none-any\.whl into \S+site: .*tinypkg", p.stdout), p.stdout
    assert "tinypkg 42" in p.stdout
    assert not re.search(r"\bpip\b", (tmp_path / "calls.log").read_text())


@pytest.mark.parametrize("suite,pre", [("calibrate", "0"), ("gemm", "1"), ("all", "1")])
def test_calibration_step_fits_the_device_call(tmp_path, suite, pre):
    """The calibrate suite, or BENCH_CALIBRATE=1 before a suite: a fixed 90 s step inside the budget,
    with the suites still getting their time."""
    plan = _plan(tmp_path, suite, BENCH_CALIBRATE=pre)
    steps = dict(plan["steps"])
    assert [n for n, _ in plan["steps"]][:2] == ["header", "calibrate"] and steps["calibrate"]["limit"] == 90
    assert plan["worst_case"] <= DEVICE_LIMIT_S, plan
    for s in ("gemm", "memory"):
        if s in steps:
            assert steps[s]["limit"] >= 100 and 0 < steps[s]["total_time"] <= steps[s]["limit"] - 60
