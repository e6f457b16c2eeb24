"""How the training episodes ended, round by round, in each context (issue 14: measure per round
whether the plain policy learns what the scaffold's block spells out).

``failure_anatomy`` reads the final policies' evaluations; this reads the runs' own training rollouts
(``round_<k>/rollouts.parquet``), which every run keeps. Each round's episodes are split by context:
the plain members (all of GRPO's, the unconditioned ones of EDGE's groups) and the conditioned members
(those that saw the block; a group whose task retrieved nothing is all plain). Lost episodes are named by
the environment's failure reader (``Knowledge.read_failure``, through ``edge.evaluate.failures_by_type``),
so the same reading serves every environment that has one.

A failure pattern's share is taken over the episodes of the task types that can fail that way (those
where any run of the report lost an episode so: household's ``no_transform`` over the heat, cool and
clean tasks), so that a step's failures are not diluted by task types without the step. GRPO's and
EDGE's runs of a seed play the same tasks each round, so late-training shares pair by seed (not task by
task: a row's episodes are its members', and a conditioned row has only the tasks that retrieved a block).

Plain functions; ``benchmarks/training_anatomy.py`` reads the runs and writes the table.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from statistics import fmean

from edge.benchmarking.learning import paired_difference, signed_points
from edge.evaluate import failures_by_type
from edge.rollout import Trajectory, read_rollouts

CONTEXTS = ("plain", "conditioned")
WON = "won"


def round_counts(trajectories: list[Trajectory]) -> dict[str, dict[str, dict[str, int]]]:
    """Context (``plain`` / ``conditioned``, where it has members) -> task type -> ``episodes``, ``won``
    and each failure pattern -> episodes."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for context in CONTEXTS:
        members = [t for t in trajectories if t.conditioned == (context == "conditioned")]
        if not members:
            continue
        episodes = Counter(t.task.task_type for t in members)
        won = Counter(t.task.task_type for t in members if t.won)
        failures = failures_by_type(members)
        out[context] = {task_type: {"episodes": n, WON: won[task_type]} | failures.get(task_type, {})
                        for task_type, n in sorted(episodes.items())}
    return out


def run_counts(run_folder: Path, rounds: int) -> list[dict[str, dict[str, dict[str, int]]]]:
    """``round_counts`` of each of a run's first ``rounds`` rounds, from its rollouts files."""
    return [round_counts(read_rollouts(Path(run_folder) / f"round_{k:03d}" / "rollouts.parquet", text_only=True))
            for k in range(rounds)]


def pattern_scopes(counts: list[dict[str, dict[str, int]]]) -> dict[str, list[str]]:
    """Outcome -> the task types its share is taken over: every type for ``won``; for a failure
    pattern, the types where any of ``counts`` (task type -> outcome -> episodes) lost an episode so."""
    types = sorted({t for c in counts for t in c})
    scopes: dict[str, set[str]] = {}
    for c in counts:
        for task_type, outcomes in c.items():
            for name, n in outcomes.items():
                if name not in ("episodes", WON) and n:
                    scopes.setdefault(name, set()).add(task_type)
    return {WON: types} | {name: sorted(scopes[name]) for name in sorted(scopes)}


def share(counts: dict[str, dict[str, int]], outcome: str, scope: list[str]) -> float | None:
    """Episodes of the ``scope`` types that ended in ``outcome`` / episodes of those types (None: none)."""
    episodes = sum(counts[t]["episodes"] for t in scope if t in counts)
    return sum(counts[t].get(outcome, 0) for t in scope if t in counts) / episodes if episodes else None


def pooled(rounds: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """Several rounds' counts of one context added type by type."""
    out: dict[str, Counter] = {}
    for counts in rounds:
        for task_type, outcomes in counts.items():
            out.setdefault(task_type, Counter()).update(outcomes)
    return {t: dict(c) for t, c in out.items()}


def mean_share(per_seed: dict[int, list[dict]], outcome: str, task_type: str, span: slice) -> float | None:
    """One task type's share of ``outcome`` over the rounds in ``span`` pooled, mean over seeds."""
    values = [v for rounds in per_seed.values() if (v := share(pooled(rounds[span]), outcome, [task_type])) is not None]
    return fmean(values) if values else None


def training_anatomy(runs: dict[str, dict[int, list[dict]]], reference: str, late_from: int) -> dict:
    """``runs``: configuration -> seed -> ``run_counts``. Rows are (configuration, context) pairs that
    have episodes; ``reference`` names the row the late-training shares pair against (e.g. ``grpo plain``).
    Per outcome and row: the share each round (mean over seeds), the share pooled over rounds
    ``late_from`` on, and that pooled share paired by seed against the reference row."""
    rows: dict[str, dict[int, list[dict]]] = {}
    for config, seeds in runs.items():
        for context in CONTEXTS:
            per_seed = {seed: [r.get(context, {}) for r in rounds] for seed, rounds in seeds.items()}
            if any(c for rounds in per_seed.values() for c in rounds):
                rows[f"{config} {context}"] = per_seed
    if reference not in rows:
        raise ValueError(f"reference row {reference!r} has no episodes (rows: {', '.join(rows)})")
    scopes = pattern_scopes([c for per_seed in rows.values() for rounds in per_seed.values() for c in rounds])
    n_rounds = max(len(rounds) for per_seed in rows.values() for rounds in per_seed.values())
    if not 1 <= late_from < n_rounds:
        raise ValueError(f"late_from must name one of the runs' rounds 1..{n_rounds - 1}, so that both the early and "
                         f"the late part have rounds (got {late_from})")
    outcomes: dict[str, dict] = {}
    for outcome, scope in scopes.items():
        outcomes[outcome] = {}
        late_shares = {name: {seed: share(pooled(rounds[late_from:]), outcome, scope)
                              for seed, rounds in per_seed.items()} for name, per_seed in rows.items()}
        for name, per_seed in rows.items():
            curve = []
            for k in range(n_rounds):
                values = [v for rounds in per_seed.values() if k < len(rounds)
                          if (v := share(rounds[k], outcome, scope)) is not None]
                curve.append(fmean(values) if values else None)
            late_values = [v for v in late_shares[name].values() if v is not None]
            entry = {"rounds": curve, "late": fmean(late_values) if late_values else None}
            if outcome != WON and len(scope) > 1:  # which of the types the pattern's share is made of
                spans = {"early": slice(0, late_from), "late": slice(late_from, None)}
                entry["by_type"] = {t: {part: mean_share(per_seed, outcome, t, span) for part, span in spans.items()}
                                    for t in scope}
            mine, theirs = late_shares[name], late_shares[reference]
            seeds = sorted(s for s in mine if mine[s] is not None and theirs.get(s) is not None)
            if name != reference and len(seeds) >= 2:
                entry["late_minus_reference"] = paired_difference([mine[s] for s in seeds], [theirs[s] for s in seeds],
                                                                  seeds)
            outcomes[outcome][name] = entry
    all_seeds = sorted({s for per_seed in rows.values() for s in per_seed})
    return {"rows": list(rows), "reference": reference, "late_from": late_from, "rounds": n_rounds,
            "seeds": all_seeds, "scopes": scopes, "outcomes": outcomes}


def late_cell(entry: dict, name: str, report: dict) -> str:
    """The pooled late share's difference against the reference row, with how many seeds it pairs when
    fewer than the report's; "reference" for that row, "–" where under two seeds pair."""
    if name == report["reference"]:
        return "reference"
    d = entry.get("late_minus_reference")
    if d is None:
        return "–"
    paired = len(d["per_seed"])
    return signed_points(d) + (f" (n={paired})" if paired < len(report["seeds"]) else "")


def markdown(report: dict, title: str, note: str) -> str:
    """The report as one table of rounds per outcome, and for a pattern of several task types a table of
    each type's early and late share."""
    n, late = report["rounds"], report["late_from"]
    lines = [f"# {title}", "", note, "",
             "Share of the training episodes of each row (configuration and context: the plain members, or "
             "those conditioned on the block) that ended each way, each round, mean over seeds. A failure "
             "pattern's share is over the task types named beside it (those where any row lost an episode "
             f"so). \"r{late}–r{n - 1}\": pooled over those rounds; \"− {report['reference']}\": that pooled share "
             "paired by seed (the runs of a seed play the same tasks; Student-t 95% interval, points; n: the "
             "seeds paired where fewer than all)."]
    for outcome, rows in report["outcomes"].items():
        scope = report["scopes"][outcome]
        heading = f"## {outcome.replace('_', ' ')}" + ("" if outcome == WON else f" ({', '.join(scope)})")
        columns = [f"r{k}" for k in range(n)] + [f"r{late}–r{n - 1}", f"− {report['reference']}"]
        lines += ["", heading, "", "| row | " + " | ".join(columns) + " |", "|" + " --- |" * (len(columns) + 1)]
        for name, entry in rows.items():
            cells = ["–" if v is None else f"{v:.0%}" for v in entry["rounds"]]
            pooled_cell = "–" if entry["late"] is None else f"{entry['late']:.1%}"
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {pooled_cell} | {late_cell(entry, name, report)} |")
        typed = {name: entry["by_type"] for name, entry in rows.items() if "by_type" in entry}
        if typed:
            lines += ["", f"By task type, r0–r{late - 1} / r{late}–r{n - 1} pooled:", "",
                      "| row | " + " | ".join(scope) + " |", "|" + " --- |" * (len(scope) + 1)]
            for name, by_type in typed.items():
                cells = [" / ".join("–" if by_type[t][part] is None else f"{by_type[t][part]:.1%}"
                                    for part in ("early", "late")) for t in scope]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
