"""benchmarks/advice_probe.py: a seed probed before with the same runs, tasks and streams is read back."""

import argparse
import json
from pathlib import Path

from benchmark_scripts import load


def test_a_seeds_file_is_reused_only_when_what_it_depends_on_is_the_same(tmp_path):
    probe = load("advice_probe")
    args = argparse.Namespace(runs=Path("benchmarks/runs"), env="household", seed=[0, 1], bases=Path("bases"),
                              edge_runs=Path("sweep/e18"), name="p", tasks=200, split="test_seen", sample_seed=7,
                              out_dir=tmp_path)
    out = tmp_path / "p_s0.json"
    assert probe.earlier_rows(out, args) is None  # nothing probed yet

    rows = [{"policy": "base", "all_plain": 0.2}]
    recorded = {k: str(v) for k, v in vars(args).items()}
    out.write_text(json.dumps({"args": recorded | {"seed": "[0]", "out_dir": "elsewhere"}, "rows": rows}))
    assert probe.earlier_rows(out, args) == rows  # other seeds listed, another out_dir: same rows

    for field, value in (("tasks", 100), ("edge_runs", Path("sweep/e21")), ("sample_seed", 8)):
        changed = argparse.Namespace(**(vars(args) | {field: value}))
        assert probe.earlier_rows(out, changed) is None, field
