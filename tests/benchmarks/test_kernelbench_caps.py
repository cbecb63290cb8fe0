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


# ---- level 3: list-valued sizes, sizes inside the model, decided on the meta device ------------------

HEAD = "import torch\nimport torch.nn as nn\n\n"


def test_list_valued_and_repeated_list_sizes_are_capped():
    source = HEAD + "layer_sizes = [16384, 16384]\nhidden = [1024] * 4\nsmall = [3, 5]\n"
    out, changed = KB.capped_source(source, 32)
    ns = _values(out)
    assert ns["layer_sizes"] == [32, 32] and ns["hidden"] == [32] * 4 and ns["small"] == [3, 5]
    assert {"layer_sizes=(32, 32)", "hidden=(32, 32, 32, 32)"} <= set(changed)


WIDE = HEAD + '''class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.fc1 = nn.Linear(4096, 2048 * 2)
        self.fc2 = nn.Linear(4096, num_classes)

    def forward(self, x):
        return self.fc2(self.fc1(x))


batch_size = 8


def get_inputs():
    return [torch.rand(batch_size, 4096)]


def get_init_inputs():
    return []
'''


def test_sizes_inside_the_model_are_capped_when_the_forward_still_runs():
    plan = KB.plan(WIDE, 32, 1e5)
    assert plan["gpu_only"] is None and plan["uncapped"] == []
    assert set(plan["inner"]) == {4096, 1000}  # 2048 * 2 is one size, 4096
    ns = _values(plan["source"])
    with __import__("torch").device("meta"):
        m = ns["Model"]()
    assert (m.fc1.in_features, m.fc1.out_features, m.fc2.out_features) == (32, 32, 32)
    err, work = KB.meta_forward(plan["source"])
    assert err is None and work <= 1e5


def test_within_the_budget_nothing_inside_the_model_changes():
    plan = KB.plan(WIDE, 32, 1e12)  # levels 1 and 2: their module-level caps only, as before
    assert plan["inner"] == [] and plan["source"] == WIDE and plan["gpu_only"] is None


COUPLED = HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(400, 300)
        self.fc2 = nn.Linear(300, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x.view(x.size(0), 400)))


batch_size = 4


def get_inputs():
    return [torch.rand(batch_size, 16, 5, 5)]


def get_init_inputs():
    return []
'''


def test_a_cap_whose_forward_raises_is_rejected_and_named():
    """400 is the flattened 16x5x5 input (not capped): capping it breaks the forward, so it is kept;
    300 is capped. Above the budget, the problem is gpu_only and the reason names 400."""
    plan = KB.plan(COUPLED, 32, 1e3)
    assert plan["inner"] == [300]
    assert any(u.startswith("400 inside the model (RuntimeError") for u in plan["uncapped"])
    assert KB.meta_forward(plan["source"])[0] is None  # what is run is a program whose forward runs
    assert plan["gpu_only"] and "400 inside the model" in plan["gpu_only"]
    assert KB.plan(COUPLED, 32, 1e9)["gpu_only"] is None  # within the budget it runs as capped


STRIDED = HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool, self.head = nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(3, 1000)

    def forward(self, x):
        for _ in range(5):
            x = self.pool(x)
        return self.fc(self.head(x).flatten(1))


batch_size = 2


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs():
    return []
'''


def test_an_inner_size_the_forward_refuses_at_the_cap_is_kept_at_the_smallest_larger_size_it_allows():
    """Five poolings need an image of 32 or more (as a ResNet's strides do): 224 is refused at 8 and
    16, kept at 32; 1000 is capped to 8. The row's table cell says 224 to 32."""
    plan = KB.plan(STRIDED, 8, 1e4)
    assert plan["gpu_only"] is None and plan["uncapped"] == [], plan["uncapped"]
    assert set(plan["inner"]) == {224, 1000} and plan["inner_to"] == {224: 32}
    assert "torch.rand(batch_size, 3, 32, 32)" in plan["source"] and "nn.Linear(3, 8)" in plan["source"]
    assert KB.meta_forward(plan["source"])[0] is None
    row = {"level": 3, "problem": "p.py", "outcome": "solved", "seconds": 1.0, "inner": [224, 1000],
           "inner_to": {"224": 32}}
    assert "| 224 to 32, 1000 |" in KB.problem_table([row])


HEADS = HEAD + '''class Model(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        assert n_embd % n_head == 0
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        return self.proj(x)


batch_size = 64
n_embd = 768
n_head = 12


def get_inputs():
    return [torch.rand(batch_size, n_embd)]


def get_init_inputs():
    return [n_embd, n_head]
'''


def test_a_module_level_cap_that_breaks_the_forward_is_dropped_or_a_smaller_cap_taken():
    plan = KB.plan_caps(HEADS, 32, 1e12)  # 32 % 12 != 0: n_embd stays, batch_size is capped
    assert plan["sets"] == ["batch_size=32"] and plan["uncapped"][0].startswith("n_embd (AssertionError")
    best = KB.plan(HEADS, 32, 1e12)  # at 3/4 of the cap (24, divisible by 12) both are capped
    assert best["cap"] == 24 and set(best["sets"]) == {"batch_size=24", "n_embd=24"} and best["uncapped"] == []


def test_a_problem_not_buildable_on_meta_is_left_to_the_run():
    source = WIDE.replace("return self.fc2(self.fc1(x))", "return self.fc2(self.fc1(x)) * x.sum().item()")
    plan = KB.plan(source, 32, 1e4)
    assert plan["meta"].startswith("no meta forward") and plan["gpu_only"] is None and plan["inner"] == []
