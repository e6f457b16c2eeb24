"""How well does a learned bank know where each object kind lies? (household; issue 16)

The block anatomy (`benchmarks/block_anatomy.py`) finds that the learned bank's place lists cost the
trained policies as much as the steps it fails to retrieve, though they look nearly right. This compares
the bank's estimate of where each object kind lies with the world's own (`OBJECT_KINDS[kind].likely`:
the receptacle kinds that hold 85% of its probability mass, most likely first), from the training
rollouts of EDGE runs, round by round, for three estimators:

- **bank**: what the run's bank wrote (`RoomKnowledge.likely_places` on its recorded evidence: every
  sighting in every observation, plus twice each place a winner took the object from);
- **sightings**: the bank's sightings alone, without the winners' takes;
- **once per episode**: `bank.sightings: once-per-episode` (`RoomKnowledge.evidence` with
  ``counting="once-per-episode"``) on the same rollouts: each object in each receptacle kind counted once
  per trajectory (an agent that opens the same drawer five times saw one spoon, not five), the winners'
  takes added as the bank adds them, over the rounds so far if the run's `bank.evidence` is
  `accumulated`, else from the round alone (what the run's bank would have written);
- **per search** (always over the rounds so far): for each receptacle kind, the share of searched
  receptacles of that kind that held the object kind, times how many of that kind a room has on average
  (from the first observations), over the room types where the object kind was ever seen: the probability
  the object lies in that kind, corrected for where the agents chose to look.

    .venv/bin/python benchmarks/place_estimators.py --edge-runs benchmarks/sweep/internalization/e16 \
        --seed 0 --seed 1 --seed 2 --seed 3 --seed 4

Writes benchmarks/results/place_estimators_<name>.{json,md}: per estimator and round, over seeds, the
share of object kinds whose first place is the world's most likely kind, and the share of the world's
likely kinds found in the estimator's top three. Reads files only (no policy is run).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from statistics import fmean
from types import SimpleNamespace

import pyarrow.parquet as pq

from edge.benchmarking.machine import describe_machine
from edge.envs.household.knowledge import SEEN, RoomKnowledge, listed_names
from edge.envs.household.world import OBJECT_KINDS, kind_of

AT = re.compile(r"\bon the ([a-z]+ \d+), you see|^(?:you arrive at|you open the) ([a-z]+ \d+)")
ROOM = re.compile(r"you see (.*?)\.")


class Counts:
    """Searches accumulated over rounds, per room type (kitchen, bedroom, ...), for the per-search estimator."""

    def __init__(self) -> None:
        # room type -> receptacle kind -> object kind -> searched receptacles of that kind holding one
        self.holding: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
        self.searched: dict[str, Counter] = defaultdict(Counter)  # room type -> receptacle kind -> searches
        self.instances: dict[str, Counter] = defaultdict(Counter)  # room type -> kind -> receptacles seen
        self.rooms: dict[str, Counter] = defaultdict(Counter)  # room type -> kind -> first observations naming it

    def add_trajectory(self, room_type: str, observations: list[str]) -> None:
        room = ROOM.search(observations[0].lower())
        if room:
            for kind, n in Counter(kind_of(r) for r in listed_names(room.group(1))).items():
                self.instances[room_type][kind] += n
                self.rooms[room_type][kind] += 1
        contents: dict[str, set[str]] = {}
        for obs in observations[1:]:
            obs = obs.lower()
            at, seen = AT.search(obs), SEEN.search(obs)
            if not at or not seen:
                continue
            receptacle = at.group(1) or at.group(2)
            items = {kind_of(n) for n in listed_names(seen.group(1))}
            contents.setdefault(receptacle, set()).update(items)
        for receptacle, items in contents.items():
            self.searched[room_type][kind_of(receptacle)] += 1
            for obj in items:
                self.holding[room_type][kind_of(receptacle)][obj] += 1

    def holding_kinds(self) -> set[str]:
        return {obj for by_kind in self.holding.values() for held in by_kind.values() for obj in held}

    def per_search(self, obj: str) -> Counter:
        """Per receptacle kind, the share of its searched receptacles that held ``obj`` times the receptacles
        of that kind a room has, over the room types where ``obj`` was ever seen (a bedroom's drawers say
        nothing about where spoons lie)."""
        rooms = [r for r, by_kind in self.holding.items() if any(held[obj] for held in by_kind.values())]
        out = Counter()
        # Sorted: equal estimates then rank by name, not by the process's string-hash order of a set.
        for k in sorted({k for r in rooms for k in self.searched[r]}):
            held = sum(self.holding[r][k][obj] for r in rooms)
            searched = sum(self.searched[r][k] for r in rooms)
            per_room = sum(self.instances[r][k] for r in rooms) / max(sum(self.rooms[r][k] for r in rooms), 1)
            if held:
                out[k] = held / searched * per_room
        return out


def top(counts: Counter, n: int = 3) -> list[str]:
    return [k for k, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:n]]


def agreement(estimate: dict[str, list[str]]) -> dict:
    """Share of object kinds with the world's most likely kind first, and of the world's likely kinds
    found in the estimate's list, over the kinds the estimate has."""
    kinds = [o for o in estimate if o in OBJECT_KINDS and estimate[o]]
    if not kinds:
        return {"kinds": 0, "first_right": None, "likely_found": None}
    return {"kinds": len(kinds),
            "first_right": fmean(estimate[o][0] == OBJECT_KINDS[o].likely[0] for o in kinds),
            "likely_found": fmean(len(set(estimate[o]) & set(OBJECT_KINDS[o].likely)) / len(OBJECT_KINDS[o].likely)
                                  for o in kinds)}


def as_trajectory(rows: list[dict]) -> SimpleNamespace:
    """What ``RoomKnowledge.evidence`` reads of a trajectory, from its rows of rollouts.parquet."""
    rows = sorted(rows, key=lambda r: r["step"])
    task = SimpleNamespace(spec=json.loads(rows[0]["task_json"])["spec"])
    won = bool(rows[0]["won"])
    steps = [SimpleNamespace(observation=r["observation"], decision=SimpleNamespace(action=r["action"])) for r in rows]
    return SimpleNamespace(steps=steps,
                           task=task, won=won)


def run_rounds(run: Path) -> list[dict]:
    counts, once = Counts(), {}
    accumulated = json.loads((run / "params.json").read_text())["bank"].get("evidence") == "accumulated"
    out = []
    for folder in sorted(run.glob("round_*")):
        table = pq.read_table(folder / "rollouts.parquet",
                              columns=["traj_id", "step", "observation", "action", "task_json", "won"]).to_pylist()
        by_traj: dict[str, list] = defaultdict(list)
        for row in table:
            by_traj[row["traj_id"]].append(row)
        trajectories = [as_trajectory(rows) for rows in by_traj.values()]
        for t in trajectories:
            counts.add_trajectory(t.task.spec["layout"].split("-")[0], [s.observation for s in t.steps])
        # As the run's bank would have counted: over the rounds so far with bank.evidence: accumulated,
        # else this round's alone.
        once = RoomKnowledge().evidence(trajectories, once if accumulated else None, counting="once-per-episode")
        evidence = json.loads((folder / "evidence.json").read_text())["household"]
        bank = {o: RoomKnowledge.likely_places(evidence, o) for o in evidence.get("seen", {})}
        out.append({"round": int(folder.name.split("_")[1]),
                    "bank": agreement(bank),
                    "sightings": agreement({o: RoomKnowledge.likely_places({"seen": evidence["seen"]}, o)
                                            for o in evidence.get("seen", {})}),
                    "once per episode": agreement({o: RoomKnowledge.likely_places(once, o) for o in once["seen"]}),
                    "per search": agreement({o: top(counts.per_search(o)) for o in counts.holding_kinds()})})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edge-runs", type=Path, required=True, help="folder of household-edge-s<seed> runs")
    parser.add_argument("--seed", type=int, action="append", help="seeds (repeat; default 0)")
    parser.add_argument("--name", default=None, help="results file suffix (default: the --edge-runs folder's name)")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    seeds = args.seed or [0]
    by_seed = {s: run_rounds(args.edge_runs / f"household-edge-s{s}") for s in seeds}
    estimators = ("bank", "sightings", "once per episode", "per search")
    rounds = sorted({r["round"] for rows in by_seed.values() for r in rows})
    lines = [f"# Where each object kind lies: the bank's estimate against the world's (`{args.edge_runs}`)", "",
             "`benchmarks/place_estimators.py` (see its docstring): per round, from the training rollouts up to "
             f"it, mean over seeds {', '.join(map(str, seeds))}: the share of object kinds whose first listed "
             "place is the world's most likely receptacle kind / the share of the world's likely kinds in the "
             "estimator's top three. The bank lists its top three in that order.", "",
             f"Machine: {describe_machine()}.", "",
             "| round | kinds (bank) | " + " | ".join(estimators) + " |", "|---|---|" + "---|" * len(estimators)]
    summary = {}
    for rnd in rounds:
        rows = [r for rows_ in by_seed.values() for r in rows_ if r["round"] == rnd]
        summary[rnd] = {e: {k: fmean(r[e][k] for r in rows if r[e][k] is not None) if any(r[e][k] is not None
                                                                                          for r in rows) else None
                            for k in ("first_right", "likely_found", "kinds")} for e in estimators}
        cells = [f"{summary[rnd][e]['first_right']:.0%} / {summary[rnd][e]['likely_found']:.0%}"
                 if summary[rnd][e]["first_right"] is not None else "–" for e in estimators]
        lines.append(f"| {rnd} | {summary[rnd]['bank']['kinds'] or 0:.0f} | " + " | ".join(cells) + " |")
    stem = f"place_estimators_{args.name or args.edge_runs.name}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{stem}.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                           "summary": summary, "by_seed": by_seed}, indent=2) + "\n")
    (args.out_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
