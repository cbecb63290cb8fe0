"""The verdict cannot be forged (issue 26, "the verdict and the process", and the call count).

- Exit status 0 and the word "accepted" come from one property, :attr:`CheckReport.accepted`, which is
  true only when the protocol ran to its end and every call it made was judged and passed.
- A forged or malformed reply from the candidate's process is a rejection of its own
  (``protocol_violation``), never an internal stop that records no failure.
- What the harness decides is invisible to the candidate: no trace of the harness in its environment,
  no request in its frames while it runs; inputs are compared with the parent's own copies.
- No count of calls bounds the judged ones.
"""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from warpsmith.check import check
from warpsmith.check.report import CheckReport, CheckResult, CHECKS
from warpsmith.cli.main import cli

ZOO = Path(__file__).parents[1] / "verify" / "zoo"
SOFTMAX = (ZOO / "softmax.py", ["batch_size=6", "dim=40"])

# (candidate, the reason code it must be rejected for)
CHEATS = [
    ("softmax_forged_reply.py", "protocol_violation"),
    ("softmax_env_sensing.py", "wrong_result"),
    ("softmax_frame_refill.py", "memoized"),
    ("softmax_hide_mutation.py", "mutated_input"),
]


def run(candidate, **kw):
    ref, sets = SOFTMAX
    return check(ref, ZOO / candidate, overrides=sets, **kw)


@pytest.mark.parametrize("candidate, code", CHEATS, ids=[c for c, _ in CHEATS])
def test_cheats_on_the_process_and_the_protocol_are_rejected_for_their_reason(candidate, code):
    report = run(candidate)
    assert report.verdict == "rejected" and report.exit_status() == 1
    assert report.reason == code, [c.text for c in report.checks if c.status == "failed"]


def test_a_forged_reply_is_exit_1_and_rejected_in_the_cli_and_the_json(tmp_path):
    out = tmp_path / "report.json"
    ref, sets = SOFTMAX
    r = CliRunner().invoke(cli, ["check", str(ref), str(ZOO / "softmax_forged_reply.py"), "--json", str(out),
                                 *[a for s in sets for a in ("--set", s)]], catch_exceptions=False)
    assert r.exit_code == 1, r.output
    assert "verdict: rejected (protocol_violation" in " ".join(r.output.split())
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "rejected" and doc["reason"] == "protocol_violation" and doc["exit_status"] == 1
    assert doc["message"] and "../x.pt" in doc["message"]


def _report(checks, complete=True, isolated=True):
    return CheckReport(reference="r", candidate="c", format="kernelbench", device="cpu", seed=0, trials=1,
                       problem={"name": "p"}, checks=checks, complete=complete,
                       protocol={"isolation": {"isolated": isolated, "missing": [] if isolated else ["no namespaces"]}})


def _all(status="passed", **override):
    return [CheckResult(name, code, override.get(name, status)) for name, code, _ in CHECKS]


def test_accepted_only_when_complete_and_every_check_passed():
    assert _report(_all()).accepted and _report(_all()).exit_status() == 0
    # an end that recorded no failure but did not reach the end of the protocol: rejected, with a reason
    stopped = _report(_all(complete="skipped"), complete=False)
    assert not stopped.accepted and stopped.exit_status() == 1 and stopped.reason == "incomplete"
    assert stopped.to_json()["verdict"] == "rejected" and stopped.to_json()["reason"] == "incomplete"
    # every check skipped (nothing judged): not an acceptance
    assert not _report(_all("skipped")).accepted
    # the 'complete' check must have passed, not merely not failed
    assert not _report(_all(complete="skipped")).accepted


def test_an_acceptance_without_isolation_is_exit_status_3():
    weak = _report(_all(), isolated=False)
    assert weak.accepted and weak.exit_status() == 3 and weak.to_json()["isolated"] is False


def test_every_call_is_judged_and_the_report_says_how_many_endurance_calls():
    report = run("softmax_triton.py")
    assert report.accepted, report.first_failure
    drawn, made = report.protocol["endurance"]["drawn"], report.protocol["endurance"]["made"]
    assert drawn >= 1 and 1 <= made <= drawn  # fewer made only when the phase's time limit is reached
    assert report.check("complete").status == "passed"


def test_a_call_count_cheat_is_caught_every_time():
    """Right for its first 10 calls, garbage after: the protocol made 8 to 12 calls and let it through 2
    runs in 3; now at least half again the calls made are judged after them."""
    for _ in range(3):
        report = run("softmax_call_count.py")
        assert report.reason == "wrong_result", [c.text for c in report.checks if c.status == "failed"]
        assert report.calls > 10


def test_the_endurance_count_has_no_bound(monkeypatch):
    """The number of endurance calls is at least half the calls made and heavy-tailed: for a draw near 1
    it exceeds any given count."""
    import math
    import random

    from warpsmith.check import hardened

    made = 10
    draws = [math.ceil(made / 2 * (1.0 - u) ** (-1 / hardened.ENDURANCE_TAIL)) for u in (0.0, 0.5, 0.99, 0.999999)]
    assert draws[0] == 5 and draws == sorted(draws) and draws[-1] > 10_000
    rng = random.Random(1)
    big = sum(math.ceil(made / 2 * (1.0 - rng.random()) ** (-1 / hardened.ENDURANCE_TAIL)) > 50
              for _ in range(20_000))
    assert 100 < big < 2000  # P(> 50) = (5 / 50) ** 1.5, about 3 %
