"""Workers forked by the fork server (core/forkserver.py): a CPU collective world's ranks and the local
tuning pool's workers take the caller's environment of the moment, not the fork server's."""
import os

from warpsmith.comm.local import run_world
from warpsmith.measure.executor import LocalExecutor


def _rank_env(rank: int, world: int) -> tuple[str | None, int]:
    return os.environ.get("WARPSMITH_TEST_MARK"), os.getppid()


def _job_env(job: dict) -> tuple[str | None, int]:
    return os.environ.get("WARPSMITH_TEST_MARK"), os.getppid()


def test_ranks_and_pool_workers_take_the_callers_environment(monkeypatch):
    for mark in ("first", "second"):  # the second after the fork server started with the first
        monkeypatch.setenv("WARPSMITH_TEST_MARK", mark)
        ranks = run_world(_rank_env, 2)
        assert [m for m, _ in ranks] == [mark, mark]
        (out,) = list(LocalExecutor(workers=1).run(_job_env, [{}]))
        assert out.ok and out.result[0] == mark, out.error
        # forked by the fork server, not by this process (a spawned worker's parent is its caller)
        assert all(ppid != os.getpid() for _, ppid in ranks) and out.result[1] != os.getpid()
    monkeypatch.delenv("WARPSMITH_TEST_MARK")
    assert [m for m, _ in run_world(_rank_env, 2)] == [None, None]
