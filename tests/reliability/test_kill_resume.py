"""``kill -9`` at every stage boundary and inside every atomic write, then resume: the run ends exactly as an
uninterrupted one, and no temporary file is left behind.

One chain of processes: each is started on the same run with ``EDGE_FAULT`` naming the next point and dies
there (SIGKILL, so no ``finally`` and no cleanup runs); the next resumes where it died. The last runs to the
end. Every kill is asserted to have happened at its point (exit by SIGKILL)."""

from __future__ import annotations

import json
import signal

import pytest
from tiny_run import ROOT, leftovers, outcome, train_in_subprocess

# In the order a two-round EDGE run reaches them; each process dies at its point's first hit.
CHAIN = [
    "write:params.json",        # Run.open: the run's identity, before it is sealed
    "write:wall_time.json",     # the invocation's clock, before any stage
    "write:eval_base.json",     # the base evaluation
    "write:rollouts.parquet",   # round 0, inside collect's atomic write
    "after:collect:r0",         # stage boundaries ...
    "write:scores.json",
    "after:score:r0",
    "bank:credited",            # between two LanceDB versions of the bank update
    "write:evidence.json",
    "write:bank.parquet",
    "write:bank_changes.json",
    "after:update_bank:r0",
    "write:checkpoint/",        # the checkpoint folder, complete but not yet renamed into place
    "write:train_metrics.json",
    "after:distill:r0",
    "write:eval.json",
    "after:evaluate:r0",
    "write:bank_versions.json",  # round 1: the bank's new version written, not yet recorded
    "write:manifest.json",       # round 1's bank update complete, its seal not yet written
    "bank:credited",
    "after:distill:r1",
]


# 23 processes, each loading torch: about 2.5 minutes on an idle 2-core machine, more than the suite's 600 s
# limit when other work shares the cores (measured: 7 min beside two training runs, over 10 min beside three).
@pytest.mark.timeout(2400)
def test_a_run_killed_at_every_point_resumes_to_the_uninterrupted_result(tmp_path):
    runs = tmp_path / "runs"
    reference = train_in_subprocess(runs, "reference")
    assert reference.returncode == 0, reference.stderr[-2000:]

    for point in CHAIN:
        killed = train_in_subprocess(runs, "killed", fault=point)
        assert killed.returncode == -signal.SIGKILL, f"{point}: not reached (exit {killed.returncode}) " \
                                                     f"{killed.stderr[-1500:]}"
    final = train_in_subprocess(runs, "killed")
    assert final.returncode == 0, final.stderr[-2000:]

    assert outcome(runs / "killed") == outcome(runs / "reference")
    assert leftovers(runs / "killed") == []
    # Every invocation counted, the killed ones included (their time up to the last completed stage).
    wall = json.loads((runs / "killed" / "wall_time.json").read_text())
    # The first two died before their clock was written; every other one counts.
    assert wall["invocations"] == len(CHAIN) + 1 - 2


def kill_at_each_then_finish(runs, points: tuple[str, ...], extra: tuple[str, ...]) -> None:
    """A one-round reference run, then one run killed at each of ``points`` in turn and resumed to its end:
    it ends exactly as the reference."""
    reference = train_in_subprocess(runs, "reference", rounds=1, extra=extra)
    assert reference.returncode == 0, reference.stderr[-2000:]
    for point in points:
        killed = train_in_subprocess(runs, "killed", fault=point, rounds=1, extra=extra)
        assert killed.returncode == -signal.SIGKILL, f"{point}: not reached (exit {killed.returncode}) " \
                                                     f"{killed.stderr[-1500:]}"
    final = train_in_subprocess(runs, "killed", rounds=1, extra=extra)
    assert final.returncode == 0, final.stderr[-2000:]
    assert outcome(runs / "killed", rounds=1) == outcome(runs / "reference", rounds=1)


def test_a_seeded_run_killed_while_seeding_resumes_to_the_uninterrupted_result(tmp_path):
    """``bank.seed_file``: killed inside the seed record's write (nothing in the bank yet) and again after the
    planted entries went in but before the bank's version was recorded: seeded once, as an uninterrupted run."""
    runs = tmp_path / "runs"
    seeded = ("--set", f"bank.seed_file={ROOT / 'data' / 'seeds' / 'household_false_steps.jsonl'}",
              "--set", "bank.grain=knowledge", "--set", "bank.subjects=seen-and-type-steps")
    kill_at_each_then_finish(runs, ("write:bank_seed.json", "bank:seeded"), seeded)
    bank = outcome(runs / "killed", rounds=1)[0]["bank"]
    assert sum(e[5][0].startswith("seed:") for e in bank) == 3  # (id, text, status, uses, utility, provenance)
    planted = json.loads((runs / "killed" / "bank_seed.json").read_text())["entries"]
    assert [e["id"] for e in planted] == ["g000001", "g000002", "g000003"]


def test_a_bootstrapped_run_killed_while_writing_its_first_entries_resumes_to_the_uninterrupted_result(tmp_path):
    """``bank.bootstrap``: killed inside the record of the empty table's version, after the first entries went
    in but before the record was completed, and inside the completing write: the bank holds the same
    entries, written once, as an uninterrupted run's."""
    runs = tmp_path / "runs"
    bootstrapped = ("--set", "bank.bootstrap=demonstrations", "--set", "bank.grain=knowledge",
                    "--set", "bank.subjects=seen-and-type-steps", "--set", "bank.evidence=accumulated",
                    "--set", "warmup.explore_episodes=12", "--set", "warmup.noisy_expert_episodes=8")
    # The third process finds the empty table's record, so its one write of the record is the completing one.
    kill_at_each_then_finish(runs, ("write:bank_bootstrap.json", "bank:bootstrapped", "write:bank_bootstrap.json"),
                             bootstrapped)
    written = json.loads((runs / "killed" / "bank_bootstrap.json").read_text())
    assert written == json.loads((runs / "reference" / "bank_bootstrap.json").read_text()) and written["added"]
