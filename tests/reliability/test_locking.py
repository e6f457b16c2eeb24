"""One writer per run folder: a second ``edge train`` on the same run exits at once; the lock dies with its
holder; a failed start creates nothing; a killed writer's temporary files do not outlive the next start."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from tiny_run import EDGE, outcome, tiny_overrides, tiny_params, train_in_subprocess

from edge.bank.store import read_snapshot
from edge.files import RunInUseError, acquire_run_lock, release_run_lock
from edge.train import Run, train


def test_a_second_writer_on_the_same_run_exits_at_once_and_nothing_is_lost(tmp_path):
    runs = tmp_path / "runs"
    # Many rounds, so the first writer is still at work whenever the second one starts.
    first = subprocess.Popen([EDGE, "train", *tiny_overrides(runs, "shared", rounds=40)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    marker = runs / "shared" / "round_000" / "manifest.json"  # the first writer is inside round 0
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    started = time.monotonic()
    second = subprocess.run([EDGE, "train", *tiny_overrides(runs, "shared", rounds=40)], capture_output=True,
                            text=True, timeout=300)
    assert first.poll() is None, "the first writer ended before the second started: the test proves nothing"
    assert second.returncode == 2, second.stdout[-2000:]
    assert "in use by another edge process" in second.stderr and "Traceback" not in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 60  # refused at start, not after doing the round's work again
    first.kill()
    first.wait()
    # The first writer's work, finished to two rounds, equals a run that was never contested.
    finished = train_in_subprocess(runs, "shared", rounds=2)
    assert finished.returncode == 0, finished.stderr[-2000:]
    alone = train_in_subprocess(runs, "alone", rounds=2)
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert outcome(runs / "shared") == outcome(runs / "alone")
    entries = [e.id for e in read_snapshot(runs / "shared" / "round_001" / "bank.parquet")]
    assert len(entries) == len(set(entries))  # no entry lost (equal to the lone run's) or duplicated


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from edge.files import acquire_run_lock; acquire_run_lock(sys.argv[1]); "
        "print('held', flush=True); time.sleep(600)"), str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RunInUseError, match="in use by another edge process"):
        acquire_run_lock(folder)
    holder.kill()
    holder.wait()
    acquire_run_lock(folder)  # the kernel dropped the dead holder's lock
    acquire_run_lock(folder)  # taken again by the same process: counted, not refused
    release_run_lock(folder)
    release_run_lock(folder)


def test_a_failed_start_creates_no_folder_and_the_corrected_command_runs(tmp_path):
    runs = tmp_path / "runs"
    missing = tiny_params(runs, "first")
    missing.train.base_checkpoint = tmp_path / "no-such-checkpoint"
    with pytest.raises(FileNotFoundError, match="train.base_checkpoint"):
        Run.open(missing)
    unknown = tiny_params(runs, "first")
    unknown.train.env = "no-such-env"
    with pytest.raises(ValueError, match="train.env: unknown environment"):
        Run.open(unknown)
    assert not (runs / "first").exists()
    # A start that got as far as writing its parameters but failed before any stage does not block the
    # corrected command either.
    started = tiny_params(runs, "first", grpo={"lr": 0.5})
    Run.open(started).close()
    run = train(tiny_params(runs, "first", rounds=1))
    assert (run.round_dir(0) / "eval.json").exists()


def test_temporary_files_of_a_killed_writer_are_removed_by_the_next_start(tmp_path):
    runs = tmp_path / "runs"
    run = train(tiny_params(runs, "run", rounds=1))
    debris = [run.folder / ".params.json.abc123.tmp", run.round_dir(0) / ".rollouts.parquet.x1y2.tmp",
              run.round_dir(0) / ".checkpoint.q9.tmp"]
    debris[0].write_text("{")
    debris[1].write_bytes(b"PAR1")
    debris[2].mkdir()
    (debris[2] / "model.safetensors").write_bytes(b"\0" * 10)
    Run.open(tiny_params(runs, "run", rounds=1)).close()
    assert not any(p.exists() for p in debris)
    assert (run.round_dir(0) / "rollouts.parquet").exists()  # the real files stay
