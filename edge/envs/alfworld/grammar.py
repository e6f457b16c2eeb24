"""Both ALFWorld grammars for placing an object, mapped onto whichever one the game speaks.

ALFWorld 2.1.1 games (the data most papers use, and the games here) say ``put apple 1 in/on
countertop 1``; newer game files say ``move apple 1 to countertop 1``. A policy trained on one (or
prompted with examples from a paper that used the other) should not fail only for the wording, so
an action is rewritten into the form the game currently admits. Anything else is left as it was:
an action no form of which is admissible stays inadmissible.
"""

from __future__ import annotations

import re

_PUT = re.compile(r"^put (?P<obj>.+?) (?:in/on|in|on|into|onto) (?P<dest>.+)$")
_MOVE = re.compile(r"^move (?P<obj>.+?) to (?P<dest>.+)$")


def clean(action: str) -> str:
    """Lower case, single spaces, no trailing period: how admissible commands are written."""
    return " ".join(action.strip().lower().rstrip(".").split())


def placement_forms(action: str) -> list[str]:
    """Every way of writing ``action`` if it places an object ("put X in/on Y", "put X in Y",
    "put X on Y", "move X to Y"); otherwise ``[action]``."""
    found = _PUT.match(action) or _MOVE.match(action)
    if not found:
        return [action]
    obj, dest = found.group("obj"), found.group("dest")
    return [action, f"put {obj} in/on {dest}", f"move {obj} to {dest}"]


def normalise_action(action: str, admissible: list[str]) -> str:
    """``action`` as the game admits it: cleaned, and in the game's grammar when it places an object.
    Returns the cleaned action unchanged when no form of it is admissible."""
    cleaned = clean(action)
    allowed = set(admissible)
    return next((form for form in placement_forms(cleaned) if form in allowed), cleaned)


def as_move(command: str) -> str:
    """A placing command in the newer grammar ("move X to Y"), the one alfworld 0.4.2's handcoded
    expert reads and writes; other commands unchanged."""
    found = _PUT.match(command)
    return f"move {found.group('obj')} to {found.group('dest')}" if found else command
