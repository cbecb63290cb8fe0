"""tune_model on a Ray cluster started on the loopback address (CPU only; predicted times from the
compiler's compile-only facts: no GPU):
one worker is killed mid-run, its problem is retried, every problem ends tuned and verified, and the
same run on the local process pool gives the same records."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'warpsmith[dist]'); the Ray executor is untested")

sys.path.insert(0, str(Path(__file__).parent))
import modeltune_helpers  # noqa: E402
from modeltune_helpers import KillFirstTry, TwoNorms, inputs, records  # noqa: E402

from warpsmith.db import TuningDB  # noqa: E402
from warpsmith.measure.executor import LocalExecutor, RayExecutor  # noqa: E402
from warpsmith.modeltune import tune_model  # noqa: E402


@pytest.fixture(scope="module")  # one cluster for the module's tests: its start is most of their time
def local_ray():
    ray.cloudpickle.register_pickle_by_value(modeltune_helpers)  # the workers cannot import the tests folder
    ray.init(_node_ip_address="127.0.0.1", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_run_survives_a_killed_worker_and_matches_local(tmp_path, local_ray):
    db = TuningDB(tmp_path / "ray.db")
    # compile-only compiler facts stand in for measurement (no GPU): each candidate compiled for sm_90
    rep = tune_model(TwoNorms(), inputs(), budget=4, executor=RayExecutor(attempts=3), db=db, compiler_facts=True,
                     worker_fn=KillFirstTry(tmp_path / "killed"))
    assert (tmp_path / "killed").exists()  # a worker did die
    assert [m.status for m in rep.problems] == ["tuned", "tuned"], [m.reason for m in rep.problems]
    retried = [m for m in rep.problems if m.attempts == 2]
    assert len(retried) == 1 and "WorkerCrashedError" in retried[0].lost[0]
    verified = [r for r in db.list() if r.verified]
    assert len(verified) == 2
    provs = [r.certificate["provenance"] for r in verified]
    assert {p["executor"] for p in provs} == {"ray"} and sorted(p["attempts"] for p in provs) == [1, 2]
    assert all(r.certificate["verdict"] == "accepted" for r in verified)

    local = TuningDB(tmp_path / "local.db")
    tune_model(TwoNorms(), inputs(), budget=4, executor=LocalExecutor(workers=1), db=local, compiler_facts=True)
    assert records(db) == records(local)


def test_ray_task_that_raises_fails_at_once(local_ray):
    (out,) = list(RayExecutor(attempts=3).run(int, [{"not": "a number"}]))  # int(dict) raises TypeError
    assert not out.ok and out.attempts == 1 and out.error.startswith("TypeError") and out.lost == []
