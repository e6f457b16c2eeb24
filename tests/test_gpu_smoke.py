"""The real-model smoke benchmark at a tiny size on the CPU: it runs where LanceDB, MLflow and Prefect are
not installed, trains LoRA adapters in both modes for both methods, and reports what it measured."""

import json
import subprocess
import sys
from pathlib import Path

from safetensors.torch import load_file

from edge.benchmarking.gpu_smoke import SmokeConfig, logprob_agreement

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("lancedb", "mlflow", "prefect", "dvc", "typer", "sentence_transformers")


def test_smoke_benchmark_runs_without_the_orchestration_stack_and_reports(tmp_path):
    # Importing any of BLOCKED raises ImportError in the child (a None entry in sys.modules).
    code = (f"import sys, runpy; [sys.modules.__setitem__(m, None) for m in {BLOCKED!r}]; "
            f"sys.argv = ['gpu_smoke.py', '--size', 'tiny', '--device', 'cpu', '--out-dir', {str(tmp_path)!r}, "
            "'--tasks-per-round', '2', '--group-size', '4', '--max-steps', '4', '--eval-episodes', '1']; "
            f"runpy.run_path({str(ROOT / 'benchmarks' / 'gpu_smoke.py')!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_smoke.json").read_text())
    assert "CPU vs CUDA agreement: not measured" in (tmp_path / "gpu_smoke.md").read_text()
    runs = {(r["mode"], r["method"]): r for r in report["runs"]}
    assert set(runs) == {(m, a) for m in ("score", "generate") for a in ("grpo", "edge-oracle-bank")}
    for (mode, method), r in runs.items():
        # 2 rounds x 2 minibatches: every update ran (the stand-in rewards give every group a gradient).
        assert r["optimizer_steps"] == 4 and r["samples"] > 0, (mode, method)
        assert r["rollout_tokens"] > 0 and r["update_tokens"] > 0 and 0 < r["rollout_forward_share"] <= 1
        folder = Path(r["run_folder"])
        adapter = folder / "round_001" / "checkpoint"
        assert (adapter / "adapter_config.json").exists() and not (adapter / "model.safetensors").exists()
        first, last = (load_file(folder / f"round_00{k}" / "checkpoint" / "adapter_model.safetensors")
                       for k in (0, 1))
        assert any(not (first[n] == last[n]).all() for n in first)  # the adapter kept learning
        config = json.loads((folder / "params.json").read_text())["policy"]
        assert config["dtype"] == "bfloat16" and config["gradient_checkpointing"] and config["lora"]["enabled"]
    assert runs[("generate", "grpo")]["invalid_rate_plain"][-1] > 0.5  # random weights emit no <action> tag
    # The agreement check, device against itself here (CUDA on a GPU machine).
    cfg = SmokeConfig(size="tiny", device="cpu", micro_batch_size=16, max_new_tokens=16)
    model = tmp_path / "gpu_smoke_work" / "model-tiny"
    same = logprob_agreement(cfg, model, Path(runs[("score", "grpo")]["run_folder"]), "score", n_states=8,
                             devices=("cpu", "cpu"))
    assert same["agree"] and same["max_abs_diff"] == 0 and same["units"] == 8
    # bf16 collection vs float32 scoring of the same states: close, not equal.
    assert 0 < same["bf16_recorded_vs_fp32_max_abs_diff"] < 0.5
