"""The performance report as Markdown (``perf.md``), JSON (``perf.json``) and one MLflow run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from edge.benchmarking.round_profile import STAGE_ORDER


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def render_markdown(report: dict) -> str:
    """The report as Markdown tables, speed first, then the cost of the bank."""
    m, p = report["machine"], report["params"]
    command = "edge bench perf" + (" --quick" if report["quick"] else "")
    out = [
        "# Performance profile and cost of the bank",
        "",
        f"`{command}` on {m['platform']}, {m['cpus']} CPUs ({m['processor']}), Python {m['python']}, torch "
        f"{m['torch']} ({m['torch_threads']} threads); {report['created']}; took {report['wall_seconds']:.0f} s. "
        f"Load average before {m['load_average'][0]:.1f}, after {m['load_average_after'][0]:.1f} (1 min): a loaded "
        "machine inflates every time below.",
        "",
        f"Policy: {report['policy']['model']} ({report['policy']['mode']} mode), checkpoint "
        f"`{report['policy']['checkpoint'] or 'none (untrained)'}`. Round: {p['tasks_per_round']} tasks x "
        f"{p['group_size']} trajectories on `{p['env']}`, {p['eval_episodes']} evaluation episodes (plain and with "
        f"bank; params evaluate every {p['eval_every']} rounds), embedder `{p['embedder']}`, {p['grpo_epochs']} "
        "GRPO epochs.",
        "",
        "## Against the aims",
        "",
    ]
    out += _table(["aim", "measured", "met"],
                  [[a["aim"], _pct(a["measured"]) if a["measured"] is not None and a["measured"] <= 1
                    and "ms" not in a["aim"] else _f(a["measured"]) + (" ms" if "ms" in a["aim"] else ""),
                    {True: "yes", False: "no", None: "not measured"}[a["met"]]] for a in report["against_aims"]])

    out += ["## Environment steps per second", ""]
    out += _table(["env", "agent", "episodes", "steps", "env steps/s (inside reset/step)", "end-to-end steps/s"],
                  [[r["env"], r["agent"], str(r["episodes"]), str(r["steps"]), _f(r["env_steps_per_second"], 0),
                    _f(r["end_to_end_steps_per_second"], 0)] for r in report["environments"]])

    rd = report["rounds"]
    legs = [(f"round {x['round']}", x) for x in rd["direct"]]
    if "prefect" in rd:
        legs.append((f"round {rd['prefect']['round']} via Prefect", rd["prefect"]))
    out += ["## Rollout (inside the collect stage)", "",
            "Forward time from hooks on the actor's backbone and output layer; the rest of the rollout is "
            "overhead: prompt building, packing rows and masks, sampling, environments, the loop itself. "
            "Round 0 starts with an empty bank (all plain); later rounds condition part of each group.", ""]
    rows = []
    for label, x in legs:
        r = x["rollout"]
        wall = r["wall_seconds"] or float("nan")
        rows.append([label, f"{r['actions']:,} ({r['conditioned_actions']:,})", _f(wall),
                     _f(r["actions_per_second"], 0), _pct(r["forward_share"]),
                     _pct(r["prompt_building_seconds"] / wall), _pct(r["packing_and_sampling_seconds"] / wall),
                     _pct(r["env_and_loop_seconds"] / wall),
                     f"{r['forward_passes']} / {r['policy_calls']}", _pct(r["padding_share"])])
    out += _table(["", "actions (conditioned)", "rollout s", "actions/s", "forward pass", "prompt building",
                   "packing + sampling", "envs + loop", "forward passes / policy calls", "padding"], rows)

    out += ["## GRPO update (inside the update stage)", "",
            "Tokens as `train_metrics.json` counts them (prompt and candidates of every sample, times epochs), over "
            "the time of `policy_update`; the distillation teacher's pass over the plain states is timed apart.", ""]
    out += _table(["", "samples (+ distill)", "tokens", "policy update s", "tokens/s", "teacher s"],
                  [[label, f"{x['update']['samples']:,} ({x['update']['distill_samples']:,})",
                    f"{x['update']['tokens']:,}", _f(x["update"]["policy_update_seconds"]),
                    _f(x["update"]["tokens_per_second"], 0), _f(x["update"]["teacher_seconds"])] for label, x in legs])

    out += ["## Time per stage", ""]
    rows = [[name] + [_f(x["stages"][name]) if name != "evaluate" or x["evaluated"] else "skipped"
                      for _, x in legs] for name in STAGE_ORDER]
    rows.append(["**round**"] + [_f(x["total_seconds"]) for _, x in legs])
    out += _table(["seconds", *[label for label, _ in legs]], rows)
    out += [f"Evaluation runs in the last round ({p['eval_episodes']} episodes plain and as many with the bank); a "
            f"training run evaluates every {p['eval_every']} rounds and after the last.", ""]

    out += ["## Orchestration overhead (Prefect)", ""]
    if "prefect" in rd:
        d = rd["direct"][-1]
        pairs = rd["pairs"]
        out += _table(["", "value"], [
            [f"round {d['round']} direct / through Prefect (s), {len(pairs)} alternating pairs",
             ", ".join(f"{x['direct_seconds']:.2f} / {x['prefect_seconds']:.2f}" for x in pairs)],
            ["overhead of each pair", ", ".join(f"{x['ratio']:+.1%}" for x in pairs)],
            ["**overhead of the round (median ratio)**", _pct(rd["round_overhead_ratio"])],
            ["by stage (s, median)", ", ".join(f"{k} {v:+.2f}" for k, v in rd["stage_overhead_seconds"].items())],
            ["one empty task run (p50 / p99 ms)",
             f"{rd['empty_task_run']['p50_ms']:.1f} / {rd['empty_task_run']['p99_ms']:.1f}"],
            ["5 empty task runs as a share of the direct round", _pct(rd["estimated_task_overhead_ratio"])],
            ["flow run around the round, once per training (s)", _f(rd["flow_run_overhead_seconds"])],
            ["empty flow run (s)", _f(rd["empty_flow_run_seconds"])],
            ["ephemeral server startup, once per process (s)", _f(rd["ephemeral_server_startup_seconds"])],
            ["identical rollouts in both legs", str(rd["identical_rollouts"])],
        ])
        out += ["Every leg runs the same round from its own copy of the run folder in this process, with the "
                "Prefect server already up; pairs alternate which leg goes first. A single pair's ratio is mostly "
                "the machine's noise (it can come out negative); the empty-task line is the fixed cost Prefect adds "
                "per stage.", ""]
    else:
        out += ["Not measured (`--no-prefect`).", ""]

    mem = report["memory"]
    out += ["## Memory", ""]
    out += _table(["", "MB"], [
        ["peak RSS of the benchmark process after the EDGE rounds", _f(mem["peak_rss_mb_after_rounds"], 0)],
        ["peak RSS of the benchmark process at the end (after the retrieval banks)", _f(mem["peak_rss_mb_total"], 0)],
        ["Prefect ephemeral server (child process RSS)", _f(mem["prefect_server_rss_mb"], 0)],
    ])

    out += ["## Bank retrieval latency", "",
            "`ExperienceBank.retrieve` as training calls it (top 4 x top_k, active rows of the task's type, "
            "prefiltered), synthetic entries embedded by the hash embedder (384-d), queries from `test_seen`. "
            "`none`: a LanceDB flat scan; `ivf_flat`: LanceDB with an IVF_FLAT index; `in_memory`: the copy of the "
            "active vectors that training searches by default (`bank.in_memory_search`; its build time is the "
            "index column, paid once per table version).", ""]
    out += _table(["entries", "index", "p50 ms", "p99 ms", "recall@k vs flat", "index build s", "disk MB"],
                  [[f"{x['entries']:,}", x["index"], _f(x["latency"]["p50_ms"]), _f(x["latency"]["p99_ms"]),
                    _f(x["recall_at_k"]), _f(x["index_seconds"]), _f(x["disk_bytes"] / 2**20, 1)]
                   for x in report["retrieval"]])
    q = report["minilm_query"]
    out += [f"MiniLM query embedding (the real embedder adds it before every search): p50 "
            f"{q['latency']['p50_ms']:.1f} ms, p99 {q['latency']['p99_ms']:.1f} ms; first call "
            f"{q['first_call_seconds']:.1f} s.", ""]

    out += ["## Cost of the bank per round", "",
            "From the EDGE rounds above (direct leg): the stages' own timing files plus timers on the "
            "distillation teacher.", ""]
    costs = report["bank_cost"]
    header = ["", *[f"round {c['round']}" for c in costs]]

    def line(label: str, key: str) -> list[str]:
        return [label, *[f"{c['seconds'][key]:.3f} s ({_pct(c['share_of_round'][key])})" for c in costs]]

    out += _table(header, [
        line("retrieval (collect)", "retrieval"),
        line("credit", "credit"),
        line("synthesis", "synthesis"),
        line("pruning", "prune"),
        line("update-bank stage (all of it)", "update_bank_stage"),
        line("distillation teacher pass", "distill_teacher"),
        ["**bank total** (retrieval + update-bank + teacher)",
         *[f"{c['bank_seconds']:.2f} s ({_pct(c['bank_seconds'] / c['round_seconds'])})" for c in costs]],
        ["round total", *[f"{c['round_seconds']:.2f} s" for c in costs]],
        ["experience tokens (share of prompt tokens)",
         *[f"{c['experience_tokens']:,} ({_pct(c['experience_token_share'])})" for c in costs]],
        ["experience tokens per conditioned step", *[_f(c["experience_tokens_per_conditioned_step"], 1)
                                                     for c in costs]],
        ["active / total entries", *[f"{c['bank_active_entries']} / {c['bank_total_entries']}" for c in costs]],
        ["bank on disk (LanceDB folder, all versions)", *[f"{c['bank_folder_bytes'] / 1024:,.0f} KiB"
                                                          for c in costs]],
        ["Parquet snapshot", *[f"{c['snapshot_bytes'] / 1024:,.0f} KiB" for c in costs]],
    ])
    idle = [c["round"] for c in costs if c["conditioned_steps"] == 0]
    if idle:
        where = ("the table below covers a whole training run" if "bank_cost_of_run" in report
                 else "pass `--bank-run <a finished EDGE run>` for a whole training run")
        out += [f"**Round(s) {', '.join(map(str, idle))} conditioned no step** (nothing retrieved for their tasks), so "
                "their columns show what the bank costs when it does not take part: no experience tokens, no "
                f"distillation; {where}.", ""]
    out += ["The with-bank half of each evaluation (retrieval plus a second set of episodes) is also a cost "
            "of the bank; it is inside the evaluate stage above.", ""]
    if "bank_cost_of_run" in report:
        run = report["bank_cost_of_run"]
        out += [f"### Over the rounds of `{run['run']}`", "",
                f"From the run's own timing files; its bank folder holds {run['bank_folder_bytes'] / 1024:,.0f} KiB "
                "(every version). The bank share here is retrieval plus the update-bank stage: a training run does "
                "not time the distillation teacher apart from the update.", ""]
        out += _table(["round", "round s", "retrieval s", "synthesis s", "pruning s", "update-bank s", "bank share",
                       "conditioned steps", "experience tokens (share)", "distill samples", "active entries",
                       "snapshot KiB"],
                      [[str(r["round"]), _f(r["round_seconds"], 1), _f(r["retrieval_seconds"], 3),
                        _f(r["synthesis_seconds"], 3), _f(r["prune_seconds"], 3), _f(r["update_bank_seconds"], 3),
                        _pct(r["bank_share"]), str(r["conditioned_steps"]),
                        f"{r['experience_tokens']:,} ({_pct(r['experience_tokens'] / max(r['prompt_tokens'], 1))})",
                        str(r["distill_samples"]), str(r["bank_active_entries"]), _f(r["snapshot_bytes"] / 1024, 0)]
                       for r in run["rounds"]])
    return "\n".join(out)


def write_report(report: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "perf.json", out_dir / "perf.md"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    md_path.write_text(render_markdown(report) + "\n")
    return json_path, md_path


def numeric_leaves(data: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a nested report, keyed by its path (lists by index): MLflow metrics."""
    out: dict[str, float] = {}
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, int | float) and value == value:  # NaN is skipped
            out[name] = float(value)
        elif isinstance(value, dict | list):
            out |= numeric_leaves(value, f"{name}.")
    return out


def log_to_mlflow(report: dict, out_dir: Path | None) -> str:
    """One run in experiment ``bench-perf`` of the project's MLflow store: every number, and the files."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    from edge.tracking import experiment_id, git_commit, tracking_uri

    mlflow.set_tracking_uri(tracking_uri())
    client = mlflow.tracking.MlflowClient()
    experiment = experiment_id(client, "bench-perf", "The performance profile: one run per report.")
    run = client.create_run(experiment, run_name="perf-quick" if report["quick"] else "perf",
                            tags={"git_commit": git_commit(), "quick": str(report["quick"])})
    run_id = run.info.run_id
    for key, value in report["params"].items():
        client.log_param(run_id, key, str(value)[:6000])
    skip = ("machine.load_average", "aims.")
    metrics = [mlflow.entities.Metric(key, value, int(time.time() * 1000), 0)
               for key, value in numeric_leaves(report).items() if not key.startswith(skip)]
    for start in range(0, len(metrics), 500):
        client.log_batch(run_id, metrics=metrics[start:start + 500])
    if out_dir is not None:
        for path in (Path(out_dir) / "perf.md", Path(out_dir) / "perf.json"):
            client.log_artifact(run_id, str(path))
    client.set_terminated(run_id)
    return run_id
