"""The statistics the benchmark tables report: bootstrap intervals of means, Student-t intervals of
paired differences and an exact paired permutation test.

Seeds are few (five by default). The bootstrap draws from a fixed random stream, so the same numbers
always give the same interval; but a percentile bootstrap of five values can never be wider than their
range and covers the true mean less often than it says (a mean of three values that share a sign gets
an interval excluding zero a quarter of the time with no effect at all). The paired differences, on which
the tables' claims rest, therefore get a Student-t interval, which widens with few seeds as it should.
The sign-flip test is exact: with n paired seeds whose differences are not zero the smallest two-sided
p-value is 2 / 2**n (0.0625 for five seeds; a seed whose difference is exactly zero cannot flip, so it
does not count), and a table with five seeds cannot reach p < 0.05 however large the difference.

Within a seed, evaluations are paired task by task (the same tasks and, through per-episode random
streams, the same draws): ``paired_task_difference`` gives the mean per-task difference with its
normal-approximation interval, which measures evaluation noise only; the over-seeds interval also
carries training noise and is the one claims rest on.
"""

from __future__ import annotations

import itertools
import random
import statistics
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with a 95% interval (``method``: how the interval was computed)."""

    mean: float
    low: float
    high: float
    n: int
    method: str = "percentile bootstrap"

    def to_dict(self) -> dict:
        return asdict(self)


def bootstrap_mean(values: list[float], confidence: float = 0.95, resamples: int = 10_000,
                   seed: int = 0) -> Estimate:
    """Mean of ``values`` and the percentile bootstrap interval of the mean."""
    if not values:
        raise ValueError("bootstrap_mean needs at least one value")
    n = len(values)
    mean = statistics.fmean(values)
    if n == 1:
        return Estimate(mean, mean, mean, 1)
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[round(tail * (resamples - 1))]
    high = means[round((1 - tail) * (resamples - 1))]
    return Estimate(mean, low, high, n)


def t_interval_mean(values: list[float], confidence: float = 0.95) -> Estimate:
    """Mean of ``values`` and its Student-t interval (mean +- t * sd / sqrt(n), n - 1 degrees of freedom)."""
    from scipy.stats import t as student_t

    if not values:
        raise ValueError("t_interval_mean needs at least one value")
    n = len(values)
    mean = statistics.fmean(values)
    if n == 1:
        return Estimate(mean, mean, mean, 1, "student-t")
    half = student_t.ppf((1 + confidence) / 2, n - 1) * statistics.stdev(values) / n ** 0.5
    return Estimate(mean, mean - half, mean + half, n, "student-t")


def paired_permutation_p(a: list[float], b: list[float], resamples: int = 20_000, seed: int = 0) -> float:
    """Two-sided p-value of mean(a - b) = 0 under random sign flips of the paired differences.

    Exact (all 2**n sign patterns) up to 16 pairs, Monte Carlo beyond.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"paired test needs two equally long non-empty lists, got {len(a)} and {len(b)}")
    diffs = [x - y for x, y in zip(a, b)]
    observed = abs(sum(diffs))
    # A tolerance so that sign patterns equal to the observed one in exact arithmetic count as extreme.
    eps = 1e-12 * max(1.0, observed)
    if len(diffs) <= 16:
        patterns = itertools.product((1, -1), repeat=len(diffs))
        extreme = total = 0
        for signs in patterns:
            total += 1
            extreme += abs(sum(s * d for s, d in zip(signs, diffs))) >= observed - eps
        return extreme / total
    rng = random.Random(seed)
    extreme = sum(abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= observed - eps
                  for _ in range(resamples))
    return (extreme + 1) / (resamples + 1)


def smallest_p(n_pairs: int) -> float:
    """The smallest two-sided p-value the exact sign-flip test can give for ``n_pairs`` pairs whose
    differences are not zero (a zero difference flips onto itself)."""
    return min(1.0, 2 / 2 ** n_pairs)


def paired_task_difference(ours: dict[str, float], theirs: dict[str, float], confidence: float = 0.95) -> Estimate:
    """Mean over the tasks both evaluated of ``ours[task] - theirs[task]`` (success 0/1 or score), with
    a normal-approximation interval of the paired mean (sd of the differences / sqrt(n))."""
    from scipy.stats import norm

    tasks = sorted(set(ours) & set(theirs))
    if not tasks:
        raise ValueError("paired_task_difference: the two evaluations share no task")
    diffs = [float(ours[t]) - float(theirs[t]) for t in tasks]
    mean = statistics.fmean(diffs)
    if len(diffs) == 1:
        return Estimate(mean, mean, mean, 1, "paired tasks, normal")
    half = norm.ppf((1 + confidence) / 2) * statistics.stdev(diffs) / len(diffs) ** 0.5
    return Estimate(mean, mean - half, mean + half, len(diffs), "paired tasks, normal")


def over_seeds(runs: list[dict], key: str = "test_seen_plain", baseline: str = "grpo") -> dict[str, dict]:
    """Per method, over the seeds it was run with (``runs``: ``metrics.json`` records): the mean of ``key``
    with its t interval, and its difference from ``baseline`` paired by seed (seeds both have) with a
    t interval and the exact sign-flip p-value. Methods with no value of ``key`` are left out."""
    by_method: dict[str, dict[int, float]] = {}
    for run in runs:
        if run.get(key) is not None:
            by_method.setdefault(run["method"], {})[run["seed"]] = run[key]
    base = by_method.get(baseline, {})
    out = {}
    for method, values in by_method.items():
        entry = {"seeds": sorted(values), "mean": t_interval_mean(list(values.values())).to_dict()}
        shared = sorted(set(values) & set(base))
        if method != baseline and shared:
            ours, theirs = [values[s] for s in shared], [base[s] for s in shared]
            entry["minus_" + baseline] = t_interval_mean([a - b for a, b in zip(ours, theirs)]).to_dict()
            entry["p"] = paired_permutation_p(ours, theirs) if len(shared) > 1 else None
        out[method] = entry
    return out
