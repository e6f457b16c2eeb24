"""Where ALFWorld's games are, which of them form each split, and the Task record of one game.

The data folder is ALFWorld's own layout (what ``alfworld-download`` writes): ``json_2.1.1/<split>/
<task folder>/<trial>/{game.tw-pddl, traj_data.json}`` plus ``logic/``. It is found from, in order,
an explicit path, ``$ALFWORLD_DATA``, or alfworld's default download folder ``~/.cache/alfworld``.
The folder is exported as ``ALFWORLD_DATA`` before ``alfworld`` is imported, because importing it
otherwise creates ``~/.cache/alfworld``.

Splits follow the literature: ``test_seen`` is ``valid_seen`` (ALFWorld's ``eval_in_distribution``,
140 games), ``test_unseen`` is ``valid_unseen`` (``eval_out_of_distribution``, 134 games), ``train``
is ``train`` (3,553 games) or, where only the validation data is present, ``valid_train`` (200).
Which games of a folder count is decided by ``AlfredTWEnv.collect_game_files`` itself (solvable,
one of the six task types, no movable or sliced variants), so the counts match published numbers.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
from functools import lru_cache
from pathlib import Path

from edge.envs.base import Task

# ALFWorld's six task types (``AlfredTWEnv``'s ``TASK_TYPES`` 1-6), the names papers report by; the
# household environment mirrors them, so there is one list.
from edge.envs.household.tasks import TASK_TYPES

SPLIT_FOLDERS = {
    "train": ("train", "valid_train"),
    "test_seen": ("valid_seen",),
    "test_unseen": ("valid_unseen",),
}
"""Folders under ``json_2.1.1`` for each split, first present wins."""

ALFWORLD_SPLIT = {"train": "train", "test_seen": "eval_in_distribution", "test_unseen": "eval_out_of_distribution"}
"""The ``train_eval`` name ``AlfredTWEnv`` gives each split."""

DEFAULT_DOWNLOAD_DIR = Path("~/.cache/alfworld").expanduser()
INSTALL_HINT = "pip install 'edge-rl[alfworld]' (alfworld==0.4.2; building it needs gcc, g++, cmake and make)"
DATA_HINT = ("point ALFWORLD_DATA at a folder holding json_2.1.1/ and logic/ (this project's machines: "
             "export ALFWORLD_DATA=<repo>/../shared/data/alfworld), or fetch the data with `edge data alfworld`")

_INSTRUCTION = re.compile(r"Your task is to: ([^\"\\]+)")


class AlfworldUnavailable(ValueError):
    """The extra is not installed or the data folder is missing; the message says how to fix it.
    A ``ValueError`` like every other setup problem, so the CLI prints it as a one-line error."""


def require_extra() -> None:
    """Fail early, and say how to fix it, when ``alfworld`` (and so TextWorld) is not installed."""
    import importlib.util

    missing = [m for m in ("alfworld", "textworld", "fast_downward") if importlib.util.find_spec(m) is None]
    if missing:
        raise AlfworldUnavailable(f"the alfworld environment needs the optional extra (missing modules: "
                                  f"{', '.join(missing)}); install it with: {INSTALL_HINT}")


def data_root(path: str | os.PathLike | None = None) -> Path:
    """The ALFWorld data folder: ``path``, else ``$ALFWORLD_DATA``, else ``~/.cache/alfworld`` if it
    holds the games. Exported as ``ALFWORLD_DATA`` so that importing ``alfworld`` writes nothing."""
    if path is not None:
        root, source = Path(path).expanduser(), "the data path given"
    elif os.environ.get("ALFWORLD_DATA"):
        root, source = Path(os.environ["ALFWORLD_DATA"]).expanduser(), "ALFWORLD_DATA"
    elif (DEFAULT_DOWNLOAD_DIR / "json_2.1.1").is_dir():
        root, source = DEFAULT_DOWNLOAD_DIR, "alfworld's default download folder"
    else:
        raise AlfworldUnavailable(f"no ALFWorld data: ALFWORLD_DATA is not set and {DEFAULT_DOWNLOAD_DIR} holds "
                                  f"no json_2.1.1/; {DATA_HINT}")
    if not (root / "json_2.1.1").is_dir():
        raise AlfworldUnavailable(f"ALFWorld data folder {root} (from {source}) has no json_2.1.1/ folder of "
                                  f"games; {DATA_HINT}")
    root = root.resolve()
    os.environ["ALFWORLD_DATA"] = str(root)
    return root


def split_folder(root: Path, split: str) -> Path:
    """The games folder of ``split`` under ``root``; an error names the folders it looked for."""
    if split not in SPLIT_FOLDERS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLIT_FOLDERS)}")
    for name in SPLIT_FOLDERS[split]:
        folder = root / "json_2.1.1" / name
        if folder.is_dir():
            return folder
    wanted = " or ".join(f"json_2.1.1/{name}/" for name in SPLIT_FOLDERS[split])
    raise AlfworldUnavailable(f"ALFWorld data folder {root} has no {wanted} for split {split!r}; {DATA_HINT}")


@lru_cache(maxsize=8)
def game_files(root: Path, split: str) -> tuple[Path, ...]:
    """The split's playable games, as ``AlfredTWEnv`` selects them, sorted (its own order is the
    file system's)."""
    require_extra()
    folder = split_folder(root, split)
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    config = {
        "env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6]},
        "dataset": {"data_path": str(folder), "eval_id_data_path": str(folder),
                    "eval_ood_data_path": str(folder), "num_train_games": -1, "num_eval_games": -1},
    }
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        games = AlfredTWEnv(config, train_eval=ALFWORLD_SPLIT[split]).game_files
    return tuple(sorted(Path(g) for g in games))


def read_instruction(game: Path) -> str:
    """The goal as the game states it ("put a hot mug in cabinet."), from the game's grammar."""
    try:
        grammar = json.loads(game.read_text())["grammar"]
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"{game}: not an ALFWorld game file with a 'grammar' field ({err})") from None
    found = _INSTRUCTION.search(grammar)
    if not found:
        raise ValueError(f"{game}: its grammar has no 'Your task is to: ...' line")
    return found.group(1).strip()


def read_traj(game: Path) -> dict:
    """``traj_data.json`` beside the game: its task type and the PDDL parameters of the goal."""
    path = game.parent / "traj_data.json"
    try:
        data = json.loads(path.read_text())
        task_type = data["task_type"]
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"{path}: expected JSON with a 'task_type' field ({err})") from None
    if task_type not in TASK_TYPES:
        raise ValueError(f"{path}: task_type {task_type!r} is not one of {list(TASK_TYPES)}")
    return data


def make_task(root: Path, split: str, game: Path) -> Task:
    """The Task of one game: ``spec["game"]`` is the game file relative to the data folder, so a
    task file written on one machine plays on another whose data lives elsewhere."""
    traj = read_traj(game)
    relative = game.relative_to(root)
    params = traj.get("pddl_params") or {}
    goal = {
        "type": traj["task_type"],
        "object": str(params.get("object_target", "")).lower(),
        "target": str(params.get("parent_target", "")).lower(),
        "lamp": str(params.get("toggle_target", "")).lower(),
    }
    return Task(env="alfworld", split=split, task_id=f"alfworld/{relative.parent.relative_to('json_2.1.1')}",
                task_type=traj["task_type"], instruction=read_instruction(game),
                spec={"game": str(relative), "goal": goal})


@lru_cache(maxsize=8)
def split_tasks(root: Path, split: str) -> tuple[Task, ...]:
    return tuple(make_task(root, split, game) for game in game_files(root, split))


def generate_tasks(split: str, n: int, seed: int, data: str | os.PathLike | None = None) -> list[Task]:
    """The first ``n`` games of ``split`` in an order shuffled by ``seed``. ALFWorld's splits are
    fixed sets of games, so asking for more than a split holds returns all of them (140 for
    ``test_seen``, 134 for ``test_unseen``): an evaluation over the whole split, as papers report."""
    tasks = list(split_tasks(data_root(data), split))
    random.Random(f"alfworld-{seed}-{split}").shuffle(tasks)
    return tasks[:n]
