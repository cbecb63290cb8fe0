"""benchmarks/kernelbench.py brings every top-level int size of a problem down to --cap, whatever
form its assignment takes (KernelBench writes ``height = width = 128`` and
``depth, height, width = 16, 32, 32``; left at full size, a conv runs for hours under the interpreter)."""
import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "kernelbench_bench", Path(__file__).resolve().parents[2] / "benchmarks" / "kernelbench.py")
KB = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(KB)

SOURCE = """batch_size = 128
height = width = 128
depth, height2, width2 = 16, 5, 2048 * 2
kernel_size = (3, 3, 65)
channels = 7
label = "x"
a, b = 64, "y"
"""


def _values(source: str) -> dict:
    ns: dict = {}
    exec(source, ns)  # noqa: S102 - the test's own constants
    return ns


def test_every_form_of_top_level_int_is_capped():
    source, changed = KB.capped_source(SOURCE, 8)
    sets = KB.caps(source, 8)
    ns = _values(source)
    for name, value in (s.split("=") for s in sets):
        ns[name] = int(value)
    assert ns["batch_size"] == 8 and ns["height"] == ns["width"] == 8
    assert (ns["depth"], ns["height2"], ns["width2"]) == (8, 5, 8)
    assert ns["kernel_size"] == (3, 3, 7)  # odd stays odd
    assert ns["channels"] == 7 and ns["label"] == "x" and (ns["a"], ns["b"]) == (8, "y")
    assert {"height=8", "width=8", "depth=8", "width2=8", "a=8"} <= set(changed)


def test_a_problem_within_the_cap_is_left_as_it_is():
    source, changed = KB.capped_source("n = 4\nh = w = 6\nd, e = 3, 2\n", 8)
    assert changed == [] and source == "n = 4\nh = w = 6\nd, e = 3, 2\n" and KB.caps(source, 8) == []
