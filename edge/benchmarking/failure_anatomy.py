"""Where a policy loses: its evaluation's lost episodes by task type and failure pattern.

An evaluation (``EvalResult.failures_by_type``) says, per task type, how each lost episode failed, as the
environment's failure reader names it (household: ``not_found``, the object never taken; ``no_transform``
or ``no_lamp``, the type's step never done; ``not_placed``; ``second_missing``). Over several seeds of
two or more configurations this says where the scaffold's gain is made and where it is lost: whether the
plain policy fails to find what the advice would have told it (the states it never reaches plain) or
to do the step the advice names, and on which task types its success is below GRPO's.

Plain functions over evaluation dictionaries (``EvalResult.to_dict()``); ``benchmarks/failure_anatomy.py``
evaluates the runs and writes the table.
"""

from __future__ import annotations

from statistics import fmean

from edge.benchmarking.learning import paired_difference, signed_points

ALL = "all types"


def type_counts(result: dict) -> dict[str, dict[str, int]]:
    """Task type (and ``ALL``) -> ``episodes``, ``won`` and each failure pattern -> episodes."""
    if "failures_by_type" not in result:
        raise ValueError("the evaluation has no failures_by_type: it was made before evaluations recorded "
                         "how episodes failed; evaluate the run again")
    out: dict[str, dict[str, int]] = {}
    for task_type, episodes in result["episodes_by_type"].items():
        failures = result["failures_by_type"].get(task_type, {})
        out[task_type] = {"episodes": episodes, "won": episodes - sum(failures.values())} | failures
    total: dict[str, int] = {}
    for counts in out.values():
        for name, n in counts.items():
            total[name] = total.get(name, 0) + n
    out[ALL] = total
    return out


def patterns_of(results: list[dict]) -> list[str]:
    """Every failure pattern the evaluations name, sorted."""
    return sorted({p for r in results for failures in r["failures_by_type"].values() for p in failures})


def shares(counts: list[dict[str, int]], patterns: list[str]) -> dict[str, float]:
    """Mean over seeds of each outcome's share of a type's episodes (``won`` and each pattern); ``counts``:
    each seed's ``type_counts`` of that type."""
    counts = [c for c in counts if c["episodes"]]
    if not counts:
        return {}
    return {name: fmean(c.get(name, 0) / c["episodes"] for c in counts) for name in ["won", *patterns]}


def anatomy(evaluations: dict[str, dict[int, dict]], reference: str) -> dict:
    """``evaluations``: row name (e.g. ``o17 plain``) -> seed -> evaluation. Per task type and row, the mean
    share of episodes won and lost each way, and the success paired by seed against row ``reference``."""
    rows = list(evaluations)
    patterns = patterns_of([r for per_seed in evaluations.values() for r in per_seed.values()])
    counts = {name: {seed: type_counts(r) for seed, r in per_seed.items()} for name, per_seed in evaluations.items()}
    types = sorted({t for per_seed in counts.values() for c in per_seed.values() for t in c} - {ALL})

    def won_share(name: str, seed: int, task_type: str) -> float:
        c = counts[name][seed][task_type]
        return c["won"] / c["episodes"]

    table: dict[str, dict] = {}
    for task_type in [*types, ALL]:
        table[task_type] = {}
        for name in rows:
            entry = {"shares": shares([c[task_type] for c in counts[name].values() if task_type in c], patterns)}
            seeds = sorted(set(evaluations[name]) & set(evaluations[reference]))
            if name != reference and len(seeds) >= 2:
                entry["won_minus_reference"] = paired_difference(
                    [won_share(name, s, task_type) for s in seeds],
                    [won_share(reference, s, task_type) for s in seeds], seeds)
            table[task_type][name] = entry
    return {"rows": rows, "patterns": patterns, "reference": reference, "types": table}


def markdown(report: dict, title: str, note: str) -> str:
    patterns = report["patterns"]
    lines = [f"# {title}", "", note, "",
             "Share of each task type's episodes, mean over seeds: won, and lost by each failure pattern "
             f"(the environment's failure reader). \"− {report['reference']}\": success paired by seed "
             "(Student-t 95% interval, points).", "",
             "| task type | row | won | " + " | ".join(p.replace("_", " ") for p in patterns)
             + f" | won − {report['reference']} |",
             "| --- | --- | --- | " + " | ".join("---" for _ in patterns) + " | --- |"]
    for task_type, rows in report["types"].items():
        for name, entry in rows.items():
            s = entry["shares"]
            if not s:
                continue
            d = entry.get("won_minus_reference")
            diff = signed_points(d) if d else "–"
            label = f"**{task_type}**" if task_type == ALL else task_type
            lines.append(f"| {label} | {name} | {s['won']:.1%} | " + " | ".join(f"{s[p]:.1%}" for p in patterns)
                         + f" | {diff} |")
    return "\n".join(lines) + "\n"
