"""The learned prior over rewrite moves (compiler.move_prior): the search's move records, the prior's
order, its persistence and refusal, solve's records beside the tuning DB, the held-out evaluation."""
import json
import math
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from warpsmith.compiler import move_prior as mp
from warpsmith.compiler import solve
from warpsmith.compiler.capture import capture, load_problem
from warpsmith.compiler.ir import build
from warpsmith.compiler.lower import lower
from warpsmith.compiler.sequence import MOVE_ORDER, _moves, search_sequences
from warpsmith.db import TuningDB
from warpsmith.errors import InvalidInputError
from warpsmith.targets import get_target

PROBLEMS = Path(__file__).parent / "problems"
H100 = get_target("h100")
FEATURES = {"kind", "rule", "apply", "target", "nodes", "sites", "forced", "parent_log_ms"}


def _lowered(name: str):
    g = build(capture(load_problem(PROBLEMS / name)))
    lower(g)
    return g


def test_the_search_records_each_evaluated_move_with_features_and_its_predicted_outcome():
    _, rec = search_sequences(_lowered("scalar_algebra.py"), H100, 6, 0, prior=None)
    q = rec.to_json()
    assert q["move_order"] == MOVE_ORDER and q["move_prior"] is None
    assert len(q["moves"]) == q["evaluated"] - 1 >= 2  # every state but the seed came from a move
    for m in q["moves"]:
        parent, child = q["states"][m["parent"]], q["states"][m["child"]]
        assert m["timing_kind"] == "predicted" and m["via"] == child["via"] == "move"
        assert set(child["forced"]) - set(parent["forced"]) == {m["site"]}
        assert child["forced"][m["site"]] == m["take"] and FEATURES <= set(m["features"])
        assert m["features"]["target"] == "h100" and m["features"]["forced"] == len(parent["forced"])
        assert m["features"]["parent_log_ms"] == pytest.approx(math.log(parent["predicted_ms"]))
        if m["dead_end"]:
            assert m["outcome"] is None and child["predicted_ms"] is None and m["error"]
        else:
            assert m["outcome"] == pytest.approx(math.log(child["predicted_ms"] / parent["predicted_ms"]))
    json.dumps(q)  # the record is JSON as it is


def _record(rule: str, margin: float, outcome: float | None, problem: str = "p0") -> dict:
    f = {"kind": "algebra", "rule": rule, "apply": 1.0, "target": "h100", "nodes": 10.0, "sites": 3.0,
         "forced": 0.0, "parent_log_ms": math.log(1e-2), "before_log_ms": math.log(1e-2),
         "after_log_ms": math.log(1e-2 * (1 + margin)), "margin": margin}
    return {"problem": problem, "features": f, "outcome": outcome, "dead_end": outcome is None,
            "timing_kind": "predicted"}


def _synthetic(n: int = 60, problems: int = 3) -> list[dict]:
    """Rule ``pays`` always lowers the predicted time (whatever its margin, the largest of all); the
    others raise it in proportion to their margin."""
    rng = random.Random(1)
    out = []
    for i in range(n):
        rule = ("pays", "near", "far")[i % 3]
        margin = {"pays": 0.5 + rng.random(), "near": rng.random() * 0.05, "far": 0.1 + rng.random() * 0.3}[rule]
        out.append(_record(rule, margin, -0.3 if rule == "pays" else margin, f"p{(i // 3) % problems}"))
    return out


def _state():
    records = [{"rewrite": "algebra", "at": f"n{i}", "rule": rule, "taken": False, "before_ms": 1e-2,
                "after_ms": 1e-2 * (1 + margin)}
               for i, (rule, margin) in enumerate((("far", 0.2), ("pays", 0.9), ("near", 0.01)))]
    return SimpleNamespace(forced={}, records=records, graph=SimpleNamespace(nodes=[None] * 10),
                           result=SimpleNamespace(best_ms=1e-2))


def test_a_prior_trained_where_a_rule_always_pays_puts_it_first_and_without_one_the_margins_order():
    prior = mp.train(_synthetic(), "h100")
    assert [k for k, _ in _moves(_state(), random.Random(0))] == [
        "algebra:near@n2", "algebra:far@n0", "algebra:pays@n1"]  # the margins: closest call first
    ordered = [k for k, _ in _moves(_state(), random.Random(0), prior, "h100")]
    assert ordered[0] == "algebra:pays@n1"
    assert all(take for _, take in _moves(_state(), random.Random(0), prior, "h100"))  # apply what the model kept


def test_a_saved_prior_is_found_beside_the_db_and_named_in_the_record(tmp_path, monkeypatch):
    g = _lowered("scalar_algebra.py")
    _, none = search_sequences(g, H100, 4, 0, prior=None)
    _, auto = search_sequences(g, H100, 4, 0)  # nothing saved beside the test's DB: the margins, unchanged
    assert auto.to_json() == none.to_json()
    db = tmp_path / "tuning.db"
    monkeypatch.setenv("WARPSMITH_DB", str(db))
    mp.train(_synthetic(), "h100").save(mp.prior_path(db, "h100"))
    _, ungated = search_sequences(g, H100, 4, 0)  # saved without a held-out evaluation: not used, and said so
    q = ungated.to_json()
    assert q["move_prior"] is None and q["move_order"].startswith(MOVE_ORDER) and "no held-out evaluation" in q["move_order"]
    assert [s["forced"] for s in q["states"]] == [s["forced"] for s in none.to_json()["states"]]
    worse = {"heldout": {"within_mean": {"prior": 0.2, "margin": 0.5}, "pooled": {"prior": 0.9, "margin": 0.1}}}
    mp.train(_synthetic(), "h100", trained_on=worse).save(mp.prior_path(db, "h100"))
    q = search_sequences(g, H100, 4, 0)[1].to_json()
    assert q["move_prior"] is None and "within a problem: prior +0.200 < margins +0.500" in q["move_order"]
    level = {"heldout": {"within_mean": {"prior": 0.5, "margin": 0.5}}}
    mp.train(_synthetic(), "h100", trained_on=level).save(mp.prior_path(db, "h100"))
    _, used = search_sequences(g, H100, 4, 0)
    q = used.to_json()
    assert q["move_prior"]["records"] == 60 and q["move_prior"]["problems"] == 3
    assert q["move_order"].startswith("the learned move prior") and "60 moves of 3 problems" in q["move_order"]
    monkeypatch.setenv("WARPSMITH_MOVE_PRIOR", "0")
    _, off = search_sequences(g, H100, 4, 0)
    assert off.to_json() == none.to_json()
    mp.train(_synthetic(), "h100", trained_on=worse).save(mp.prior_path(db, "h100"))
    monkeypatch.setenv("WARPSMITH_MOVE_PRIOR", "force")  # the gate skipped
    assert search_sequences(g, H100, 4, 0)[1].to_json()["move_order"].startswith("the learned move prior")


def test_a_saved_prior_loads_with_identical_predictions(tmp_path):
    recs = _synthetic()
    prior = mp.train(recs, "h100")
    path = prior.save(tmp_path / "p.json")
    again = mp.MovePrior.load(path)
    rows = [r["features"] for r in recs]
    assert again.predict(rows).tolist() == prior.predict(rows).tolist()
    assert again.trained_on == prior.trained_on and again.featurizer.names == prior.featurizer.names


def test_too_few_moves_are_refused():
    with pytest.raises(InvalidInputError, match="at least 20 evaluated moves"):
        mp.train([], "h100")
    few = _synthetic(19) + [_record("x", 0.1, None)] * 10  # dead ends do not count
    with pytest.raises(InvalidInputError, match="19 moves"):
        mp.train(few, "h100")
    with pytest.raises(InvalidInputError):
        mp.train(_synthetic(30), "a100")  # none of that target
    assert mp.train(_synthetic(20), "h100").trained_on["records"] == 20


def test_solve_appends_its_moves_beside_an_existing_db_and_without_one_writes_nothing(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    db = tmp_path / "db" / "tuning.db"
    monkeypatch.setenv("WARPSMITH_DB", str(db))
    kw = dict(verify=False, prove=False, library_budget=0, sequences=4, candidates=1)
    solve(PROBLEMS / "scalar_algebra.py", None, **kw)
    assert not mp.moves_path(db).exists() and not db.parent.exists() and not any(cwd.iterdir())
    with TuningDB(db)._connect(write=True):  # the DB exists (empty)
        pass
    res = solve(PROBLEMS / "scalar_algebra.py", None, **kw)
    lines = mp.read_moves(mp.moves_path(db))
    assert len(lines) == len(res.program.search.sequence.moves) >= 2
    assert {ln["problem"] for ln in lines} == {"scalar_algebra"} and all(ln["date"] for ln in lines)
    assert all(ln["timing_kind"] == "predicted" for ln in lines) and not any(cwd.iterdir())
    solve(PROBLEMS / "scalar_algebra.py", None, **kw, record_moves=False)
    assert len(mp.read_moves(mp.moves_path(db))) == len(lines)


def test_the_evaluation_reports_the_prior_and_the_margin_held_out_by_problem():
    rep = mp.evaluate(_synthetic(90, 3), "h100")
    assert rep["split"] == "leave one problem out" and rep["held_out_records"] == 90 and len(rep["folds"]) == 3
    pooled = rep["spearman_pooled"]
    assert set(pooled) == {"prior", "margin"} and set(rep["within_problem"]) == {"p0", "p1", "p2"}
    # the paying rule has the largest margins, so the margins' order tries it last: it fares worse
    assert pooled["prior"] > 0.5 and pooled["prior"] > pooled["margin"]
    assert set(rep["spearman_within_mean"]) == {"prior", "margin"}
    with pytest.raises(InvalidInputError, match="at least 2 problems"):
        mp.evaluate(_synthetic(60, 1), "h100")


def test_the_db_moves_commands_train_show_and_evaluate_the_prior_beside_the_db(tmp_path):
    from click.testing import CliRunner

    from warpsmith.cli.main import cli

    db = tmp_path / "tuning.db"
    run = CliRunner()
    missing = run.invoke(cli, ["db", "moves", "train", "--target", "h100", "--db", str(db)])
    assert missing.exit_code == 2 and "no move records" in missing.output
    mp.append_moves(mp.moves_path(db), "p", [])  # nothing appended: no file
    assert not mp.moves_path(db).exists()
    for r in _synthetic(60, 3):
        mp.append_moves(mp.moves_path(db), r["problem"], [{k: v for k, v in r.items() if k != "problem"}])
    trained = run.invoke(cli, ["db", "moves", "train", "--target", "h100", "--db", str(db)])
    assert trained.exit_code == 0, trained.output
    assert "on 60 moves of 3 problems" in trained.output and "held-out Spearman" in trained.output
    assert mp.prior_path(db, "h100").exists()
    shown = run.invoke(cli, ["db", "moves", "show", "--target", "h100", "--db", str(db)])
    assert json.loads(shown.output)["trained_on"]["records"] == 60
    ev = run.invoke(cli, ["db", "moves", "evaluate", "--target", "h100", "--db", str(db), "--json"])
    assert set(json.loads(ev.output)["spearman_pooled"]) == {"prior", "margin"}
