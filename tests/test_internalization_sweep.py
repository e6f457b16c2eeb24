"""benchmarks/internalization_sweep.py: where each configuration's runs are read from."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from benchmark_scripts import load


@pytest.fixture(scope="module")
def sweep():
    return load("internalization_sweep")


def fake_run(folder: Path) -> dict:
    """What ``read_run`` gives, just enough for ``against`` and ``measure``, naming the folder it was read from."""
    split = "test_seen"
    return {"folder": folder, "final": {f"{split}_plain": 0.5, f"{split}_with_bank": 0.6, f"{split}_retention": 0.8},
            "final_tasks": {split: {"plain": [1, 0], "with_bank": [1, 1]}}, "bank_rounds": [], "run_seconds": 60.0}


def test_defaults_and_grpo_are_the_reference_runs_and_every_other_configuration_its_own_folder(sweep):
    ref = Path("reference")
    assert sweep.run_folder("e0", 1, ref) == ref / "household-edge-s1"
    assert sweep.run_folder("o0", 0, ref) == ref / "household-edge-oracle-bank-s0"
    assert sweep.run_folder("grpo", 2, ref) == ref / "household-grpo-s2"
    assert sweep.run_folder("e18", 0, ref) == sweep.ROOT / "e18" / "household-edge-s0"
    assert sweep.run_folder("o6", 3, ref) == sweep.ROOT / "o6" / "household-edge-oracle-bank-s3"


def test_misleading_rows_are_the_oracle_control_with_false_advice_compared_with_o0(sweep):
    for name in ("m0", "m1"):
        assert sweep.method_of(name) == "edge-oracle-bank" and sweep.default_of(name) == "o0"
        assert "bank.oracle_advice=misleading" in sweep.CONFIGS[name][1]
    assert sweep.run_folder("m1", 2, Path("reference")) == sweep.ROOT / "m1" / "household-edge-oracle-bank-s2"


def test_credited_weighs_each_rounds_delta_by_the_groups_shown_the_block(sweep):
    def rnd(hit, delta, positive):
        return {"hit_rate": hit, "delta_mean": delta, "delta_positive_share": positive}

    # Seed 0: 16 groups shown, Delta -0.25, a quarter positive; seed 1: 8 shown, Delta +0.5, all positive;
    # a round that showed nothing has no Delta and does not count.
    row = {"rounds": {0: [rnd(1.0, -0.25, 0.25), {"hit_rate": 0.0, "delta_mean": None}], 1: [rnd(0.5, 0.5, 1.0)]}}
    assert sweep.credited(row) == "+0.00 (50%)"
    row["rounds"][1][0]["delta_mean"] = None  # a row made before Delta was kept
    assert sweep.credited(row) == "–"


def test_against_and_measure_read_the_runs_of_the_configurations_they_compare(sweep, tmp_path, monkeypatch):
    ref = tmp_path / "reference"
    (ref / "household-edge-s0").mkdir(parents=True)
    (ref / "household-edge-s0" / "params.json").write_text("{}")  # seed 1 of e0 has not run
    monkeypatch.setattr(sweep, "ROOT", tmp_path / "sweep")
    monkeypatch.setattr(sweep, "read_run", lambda folder, splits: fake_run(folder))
    monkeypatch.setattr(sweep, "run_status", lambda folder: SimpleNamespace(state="finished"))
    monkeypatch.setattr(sweep, "paired_difference", lambda ours, theirs, seeds, tasks: (ours, theirs, tasks))
    monkeypatch.setattr(sweep, "describe_machine", lambda: "test")

    assert sweep.runs_of("e18", [0, 1], ref) == {s: fake_run(tmp_path / "sweep" / "e18" / f"household-edge-s{s}")
                                                  for s in (0, 1)}
    compared = sweep.against("e18", "e0", [0, 1], ref)
    assert compared["seeds"] == [0]  # the seeds e0 has finished
    with pytest.raises(FileNotFoundError) as missing:
        sweep.against("e0", "e18", [0, 1], ref)
    assert missing.value.filename == str(tmp_path / "sweep" / "e18" / "household-edge-s0")

    read = []
    monkeypatch.setattr(sweep, "read_run", lambda folder, splits: read.append(folder) or fake_run(folder))
    monkeypatch.setattr(sweep, "summarise", lambda runs, cfg: {"household": {"edge": {"test_seen": {
        "minus_grpo": None, "with_bank_minus_plain": None}}}})
    row = sweep.measure("e0", [0, 1], 1, 1, ref)  # the default: nothing runs, everything is read
    assert read == [ref / f"household-{method}-s{s}" for method in ("edge", "grpo") for s in (0, 1)]
    assert row["minus_default"] is not None and row["method"] == "edge"


def test_a_configuration_made_again_on_another_machine_is_listed_after_the_first(sweep, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "OUT", tmp_path)
    interval = {"mean": 0.01, "low": -0.01, "high": 0.03, "per_seed": {"0": 0.01}}

    def row(plain: float) -> dict:
        return {"asks": "a", "overrides": [], "seeds": [0], "plain": {"0": plain}, "with_advice": {"0": 0.6},
                "retention": {"0": plain / 0.6}, "minus_grpo": interval, "minus_default": None,
                "with_advice_minus_plain": interval, "rounds": {"0": []}, "run_minutes": 1.0, "machine": "m"}

    sweep.write({"e19": row(0.3), "o17@other": row(0.4), "o17": row(0.5)})
    listed = [line.split(" | ")[0] for line in (tmp_path / "internalization.md").read_text().splitlines()
              if line.startswith("| o17") or line.startswith("| e19")]
    assert listed == ["| o17", "| o17@other", "| e19"]


def test_a_row_of_another_machine_is_never_overwritten_and_tag_keeps_both(sweep, tmp_path):
    table = tmp_path / "internalization.json"
    rows = {"e22": {"machine": "AMD EPYC"}, "o23": {"machine": "Intel Xeon"}, "e18": {}}
    assert sweep.key("e22", 1, "xeon") == "e22@xeon" and sweep.key("o0", 2) == "o0-x2"
    # The same machine, a row not there yet, or one that did not record its machine: written over.
    sweep.refuse_other_machine(rows, ["o23", "e22@xeon", "e18"], "Intel Xeon", table)
    with pytest.raises(SystemExit) as refused:
        sweep.refuse_other_machine(rows, ["o23", sweep.key("e22", 1, None)], "Intel Xeon", table)
    message = str(refused.value)
    assert str(table) in message and "'e22'" in message and "AMD EPYC" in message and "--tag" in message


def test_a_tagged_row_is_compared_under_the_name_its_controls_runs_have_on_this_machine(sweep):
    table = {"o17": {"machine": "AMD EPYC"}, "o31": {"machine": "Intel Xeon"}}
    # o17's runs in this checkout are the Xeon's, so its table name is o17@xeon; o31's row is the Xeon's own.
    assert sweep.against_label("o17", "xeon", "Intel Xeon", table) == "o17@xeon"
    assert sweep.against_label("o31", "xeon", "Intel Xeon", table) == "o31"
    assert sweep.against_label("o17", None, "Intel Xeon", table) == "o17"  # untagged, no Xeon row: the table's
    # A new row made here (untagged) against o17 names the row of o17 made again on this machine.
    assert sweep.against_label("o17", None, "Intel Xeon", table | {"o17@xeon": {"machine": "Intel Xeon"}}) == "o17@xeon"
    assert sweep.against_label("o44", "xeon", "Intel Xeon", table) == "o44"  # no row yet


@pytest.mark.parametrize("method", ["grpo", "edge-oracle-bank"])
def test_make_grpo_and_oracle_train_the_reference_runs_without_any_rows_overrides(sweep, tmp_path, method):
    from edge.benchmarking.learning import train_arguments

    ref = tmp_path / "reference"
    cfg = sweep.reference_config(method, [0, 3], 2, ref)
    assert cfg.methods == [method]
    arguments = train_arguments(cfg, "household", method, 3, sweep.BASES / "base-household-s3", 8)
    row = train_arguments(sweep.bench_config("e22", ["edge"], [0, 3], 1, 2), "household", "edge", 3,
                          sweep.BASES / "base-household-s3", 8)

    def overrides(args: list[str]) -> dict[str, str]:  # the value each field ends with (a later --set wins)
        return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--set")

    ours, theirs = overrides(arguments), overrides(row)
    assert ours["train.runs_dir"] == str(ref) and not any(k.startswith("bank.") for k in ours)
    # Evaluated exactly as the rows are: same episodes, split, base evaluations, the last round only.
    shared = ("eval.", "train.base_checkpoint")
    assert {k: v for k, v in ours.items() if k.startswith(shared)} == {
        k: v for k, v in theirs.items() if k.startswith(shared)}
    # Where the rows read them: GRPO's and o0's runs are the reference runs.
    config = "grpo" if method == "grpo" else "o0"
    assert sweep.run_folder(config, 3, ref) == ref / f"household-{method}-s3"


def test_the_scripts_that_read_runs_again_share_one_command_line(sweep, capsys):
    # split_table / failure_anatomy: --split and --episodes with their own defaults.
    args, seeds = sweep.parse_evaluation_args("evaluate", "test_unseen", 400, argv=["--config", "o17", "--seed", "3"])
    assert (args.config, seeds, args.split, args.episodes) == (["o17"], [3], "test_unseen", 400)
    assert args.reference_runs == Path("benchmarks/runs")

    # training_anatomy: no evaluation, so no --split; its own option through ``extra``.
    def late_from(parser):
        parser.add_argument("--late-from", type=int, default=4)

    args, seeds = sweep.parse_evaluation_args("read", argv=["--config", "e18", "--late-from", "2"], extra=late_from)
    assert (seeds, args.late_from, hasattr(args, "split")) == ([0, 1], 2, False)
    with pytest.raises(SystemExit):
        sweep.parse_evaluation_args("read", argv=["--config", "e18", "--split", "test_seen"], extra=late_from)
    assert "unrecognized arguments: --split" in capsys.readouterr().err

    with pytest.raises(SystemExit):
        sweep.parse_evaluation_args("read", argv=["--config", "e99"])
    assert "unknown configuration(s) e99" in capsys.readouterr().err


def test_every_rows_overrides_make_a_valid_configuration(sweep):
    """A misspelt field or a refused combination in a row fails here, not minutes into a sweep."""
    from edge.config import load_params, with_overrides

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    for name, (_, overrides) in sweep.CONFIGS.items():
        try:
            with_overrides(params, overrides)
        except ValueError as err:
            pytest.fail(f"row {name}: {err}")


def test_the_forest_figure_draws_the_rows_with_enough_seeds_in_the_table_s_order(sweep, tmp_path):
    def row(n, mean):
        return {"seeds": list(range(n)), "minus_grpo": {"mean": mean, "low": mean - 0.03, "high": mean + 0.03}}

    rows = {"o0@xeon": row(10, 0.026), "o6": row(5, 0.08), "e26": row(10, 0.028), "m1": row(10, -0.157)}
    path = tmp_path / "forest.png"
    assert sweep.forest_figure(rows, path) == ["o0@xeon", "e26", "m1"]
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert sweep.forest_figure(rows, path, min_seeds=5) == ["o0@xeon", "o6", "e26", "m1"]
