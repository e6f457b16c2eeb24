"""Damaged or missing files, bad parameters: each is one line naming the file or field and what was expected,
and none is accepted silently (the cases of issue 19)."""

from __future__ import annotations

import json
import shutil

import lancedb
import pyarrow.parquet as pq
import pytest
from tiny_run import ROOT, tiny_params

from edge.bank.embedder import make_embedder
from edge.bank.store import ExperienceBank
from edge.cli import main
from edge.config import ConfigError, load_params, with_overrides
from edge.files import IntegrityError, read_json
from edge.rollout import read_rollouts
from edge.train import Run, train


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished two-round EDGE run, made once, and a pristine copy of it."""
    base = tmp_path_factory.mktemp("damaged")
    train(tiny_params(base / "runs", "run"))
    shutil.copytree(base / "runs" / "run", base / "pristine")
    return base


@pytest.fixture
def run_copy(finished):
    """The runs folder holding the finished run, for a test to damage; made whole again afterwards."""
    yield finished / "runs"
    shutil.rmtree(finished / "runs" / "run")
    shutil.copytree(finished / "pristine", finished / "runs" / "run")


def cli(args: list[str], capsys) -> tuple[int, str]:
    """``edge <args>`` in this process: (exit status, stderr)."""
    capsys.readouterr()
    try:
        main(args)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


def one_line_error(code: int, err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def resume(runs, rounds: int = 3):
    return train(tiny_params(runs, "run", rounds=rounds))


def unseal_after(round_dir, stage: str) -> None:
    """Leave ``round_dir`` as a kill right after ``stage`` would: later stages not sealed."""
    order = ["collect", "score", "update_bank", "distill", "evaluate"]
    manifest = json.loads((round_dir / "manifest.json").read_text())
    for later in order[order.index(stage) + 1:]:
        manifest["stages"].pop(later, None)
    (round_dir / "manifest.json").write_text(json.dumps(manifest))


# ----- checkpoints ----------------------------------------------------------------------------
def test_flipped_bytes_in_a_checkpoint_are_refused(run_copy, capsys):
    weights = run_copy / "run" / "round_001" / "checkpoint" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    for i in range(200):  # 200 bytes in the tensor data, past the header: the file still loads
        data[len(data) // 2 + i] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"round_001/checkpoint/model\.safetensors: content differs"):
        resume(run_copy)
    code, err = cli(["eval", "--checkpoint", str(weights.parent), "--episodes", "1",
                     "--params", str(ROOT / "params.yaml")], capsys)
    one_line_error(code, err, "model.safetensors", "content differs")


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_truncated_or_missing_checkpoint_file_is_refused(run_copy, damage, capsys):
    weights = run_copy / "run" / "round_001" / "checkpoint" / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:1000])
    else:
        weights.unlink()
    code, err = cli(["eval", "--checkpoint", str(weights.parent), "--episodes", "1",
                     "--params", str(ROOT / "params.yaml")], capsys)
    one_line_error(code, err, "model.safetensors", "bytes" if damage == "truncated" else "missing")


# ----- rollouts --------------------------------------------------------------------------------
def test_a_valid_but_truncated_rollouts_file_is_refused(run_copy):
    round_dir = run_copy / "run" / "round_001"
    path = round_dir / "rollouts.parquet"
    table = pq.read_table(path)
    pq.write_table(table.slice(0, int(table.num_rows * 0.4)), path)  # a valid file: groups and an episode cut
    unseal_after(round_dir, "collect")  # the next stage reads it
    with pytest.raises(IntegrityError, match=r"round_001/rollouts\.parquet: \d+ bytes, the manifest recorded"):
        resume(run_copy, rounds=2)
    # Without the manifest's help, the file's own structure gives it away.
    with pytest.raises(IntegrityError, match=r"rollouts\.parquet: (trajectory .* has \d+ of its|group .* has)"):
        read_rollouts(path, group_size=4)


def test_a_corrupt_parquet_file_names_the_file(tmp_path):
    path = tmp_path / "rollouts.parquet"
    path.write_bytes(b"PAR1" + b"\x00garbage" * 50)
    with pytest.raises(IntegrityError, match=r"rollouts\.parquet: not a readable rollouts Parquet file"):
        read_rollouts(path)


# ----- the run's identity ---------------------------------------------------------------------------
def test_a_deleted_params_json_is_refused_not_rewritten(run_copy):
    (run_copy / "run" / "params.json").unlink()
    changed = tiny_params(run_copy, "run", rounds=3, grpo={"lr": 0.5})
    with pytest.raises(IntegrityError, match=r"params\.json: missing, but the run has results"):
        train(changed)
    assert not (run_copy / "run" / "params.json").exists()


def test_an_edited_params_json_is_refused(run_copy):
    saved = run_copy / "run" / "params.json"
    params = json.loads(saved.read_text())
    params["grpo"]["lr"] = 0.5
    saved.write_text(json.dumps(params))
    with pytest.raises(IntegrityError, match=r"params\.json: (content differs|\d+ bytes, the manifest recorded)"):
        Run.open(tiny_params(run_copy, "run", grpo={"lr": 0.5}))


def test_a_moved_run_folder_resumes_as_if_it_had_not_moved(finished, run_copy, tmp_path):
    """train.runs_dir is where the folder lives, not what the run computed: a run moved elsewhere (an
    absolute runs_dir) resumes, and its next round is the one it would have made where it was."""
    moved = tmp_path / "elsewhere"
    shutil.copytree(finished / "pristine", moved / "run")
    resume(moved)
    resume(run_copy)

    def round_2(runs):
        files = json.loads((runs / "run" / "round_002" / "manifest.json").read_text())["files"]
        return {name: f["sha256"] for name, f in files.items() if name in ("rollouts.parquet", "scores.json")}

    assert len(round_2(moved)) == 2 and round_2(moved) == round_2(run_copy)


def test_a_corrupt_json_record_names_its_file(run_copy):
    (run_copy / "run" / "bank_versions.json").write_text('{"-1": 1, "0":')
    with pytest.raises(IntegrityError, match=r"bank_versions\.json: not valid JSON"):
        resume(run_copy)
    scores = run_copy / "run" / "round_000" / "scores.json"
    scores.write_text("{")
    with pytest.raises(IntegrityError, match=r"scores\.json: not valid JSON \(.* at line 1"):
        read_json(scores)


# ----- the bank -------------------------------------------------------------------------------------
def _latest_version_manifest(bank_folder):
    return max((bank_folder / "bank.lance" / "_versions").glob("*.manifest"), key=lambda p: p.stat().st_mtime_ns)


def test_evaluating_with_a_bank_whose_latest_manifest_is_gone_is_refused(run_copy, capsys):
    bank = run_copy / "run" / "bank"
    _latest_version_manifest(bank).unlink()
    checkpoint = run_copy / "run" / "round_001" / "checkpoint"
    params = run_copy.parent / "params.yaml"  # the run's embedder (the tiny run's hash embedder)
    params.write_text((ROOT / "params.yaml").read_text().replace("embedder: minilm", "embedder: hash"))
    args = ["eval", "--checkpoint", str(checkpoint), "--episodes", "1", "--bank", str(bank), "--params", str(params)]
    code, err = cli(args, capsys)
    one_line_error(code, err, str(bank), "the run recorded version")


def test_a_missing_bank_data_file_names_the_bank(run_copy):
    bank = run_copy / "run" / "bank"
    for data in (bank / "bank.lance" / "data").glob("*.lance"):
        data.unlink()
    with pytest.raises(IntegrityError, match=r"bank: the bank table cannot be read \(lance error: Not found"):
        ExperienceBank.open(bank, make_embedder("hash")).all()


def test_a_dropped_bank_column_is_named(run_copy):
    bank = run_copy / "run" / "bank"
    lancedb.connect(bank).open_table("bank").drop_columns(["utility"])
    with pytest.raises(IntegrityError, match=r"column\(s\) utility missing"):
        ExperienceBank.open(bank, make_embedder("hash"))


# ----- parameters -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["binary", "directory", "empty"])
def test_a_params_file_that_is_not_parameters_is_one_line(tmp_path, kind, capsys):
    path = tmp_path / "params.yaml"
    if kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_text("")
    with pytest.raises(ConfigError, match=r"params\.yaml: "):
        load_params(path)
    code, err = cli(["train", "--params", str(path), "--rounds", "1"], capsys)
    one_line_error(code, err, "params.yaml", {"binary": "not a text file", "directory": "not a file",
                                              "empty": "empty"}[kind])


def test_an_override_that_is_not_yaml_is_one_line(capsys):
    with pytest.raises(ConfigError, match=r"override 'grpo.lr=\[': the value is not valid YAML"):
        with_overrides(load_params(ROOT / "params.yaml"), ["grpo.lr=["])
    code, err = cli(["train", "--params", str(ROOT / "params.yaml"), "--set", "grpo.lr=[", "--dry-run"], capsys)
    one_line_error(code, err, "grpo.lr=[")
    code, err = cli(["train", "--params", str(ROOT / "params.yaml"), "--set", "grpo.lr=abc", "--dry-run"], capsys)
    one_line_error(code, err, "grpo.lr", "abc")


def test_a_missing_checkpoint_under_prefect_is_one_line_before_any_flow_run(tmp_path, capsys):
    """The run's inputs are checked before Prefect starts: no failed flow run, no traceback, no folder."""
    code, err = cli(["train", "--prefect", "--params", str(ROOT / "params.yaml"), "--rounds", "1",
                     "--set", f"train.base_checkpoint={tmp_path / 'missing'}",
                     "--set", f"train.runs_dir={tmp_path / 'runs'}"], capsys)
    one_line_error(code, err, "train.base_checkpoint", "does not exist")
    assert "Flow run" not in err and not (tmp_path / "runs").exists()
