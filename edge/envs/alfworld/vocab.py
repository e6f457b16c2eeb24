"""Every word ALFWorld text can contain, for the tiny model's word-level tokenizer.

Scanned from the data rather than from sampled play, so nothing is missed by chance: the message
templates of both grammars (the games' own ``alfred.twl2`` and the one alfworld ships, which says
"move X to Y"), the object and receptacle types every game declares, each game's instruction, and
the numbers that name objects and locations. A word outside it still tokenizes (to ``[UNK]``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from edge.envs.alfworld.data import TASK_TYPES, data_root
from edge.text import split_words

_TEMPLATE_TEXT = re.compile(r'"rhs": "(.*?)"\s*$|template :: "(.*?)";', re.M)
_PLACEHOLDER = re.compile(r"\{[^}]*\}|#[^#]*#|\[[^\]]*\]|\\n")
_TYPE = re.compile(r"\b(\w+)Type - [or]type\b")

ACTION_WORDS = ("go to open close take from put in/on move to clean heat cool with use toggle slice examine "
                "inventory look help")
MAX_NUMBER = 200
"""Object numbers stay below 30; location numbers ("You arrive at loc 23.") below 100 in these games."""


def template_words(grammar: str) -> set[str]:
    """Words of a TextWorld grammar's message and command templates, placeholders removed."""
    words: set[str] = set()
    for rhs, template in _TEMPLATE_TEXT.findall(grammar):
        words.update(split_words(_PLACEHOLDER.sub(" ", rhs or template)))
    return words


def game_words(game: Path) -> set[str]:
    """A game's own words: the types its PDDL problem declares ("SinkBasinType" -> "sinkbasin") and
    its grammar's templates, which carry its instruction."""
    data = json.loads(game.read_text())
    return {name.lower() for name in _TYPE.findall(data["pddl_problem"])} | template_words(data["grammar"])


@lru_cache(maxsize=4)
def _vocabulary(root: Path) -> frozenset[str]:
    import importlib.util

    words = set(split_words(ACTION_WORDS)) | {str(i) for i in range(MAX_NUMBER)}
    words |= {w for t in TASK_TYPES for w in t.split("_")}
    grammars = [root / "logic" / "alfred.twl2"]
    spec = importlib.util.find_spec("alfworld")
    if spec is not None and spec.origin:
        grammars.append(Path(spec.origin).parent / "data" / "alfred.twl2")
    for grammar in grammars:
        if grammar.is_file():
            words |= template_words(grammar.read_text())
    games = sorted((root / "json_2.1.1").glob("*/*/*/game.tw-pddl"))
    if not games:
        raise FileNotFoundError(f"no game files (json_2.1.1/<split>/<task>/<trial>/game.tw-pddl) under {root}")
    for game in games:
        words |= game_words(game)
    return frozenset(words)


def vocabulary(data: str | Path | None = None) -> set[str]:
    """The words of every game under the data folder (all splits present), its grammars and numbers."""
    return set(_vocabulary(data_root(data)))
