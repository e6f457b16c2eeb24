"""The language of guidance: how an experience entry reads, and the ground-truth advice an oracle
would give.

Entries are short sentences of three kinds, as in the spec: ``try`` (what works), ``avoid`` (what
fails) and ``recover`` (how to get out of a failure). The bank's synthesizer writes entries in this
language from trajectories; the warm-up shows the tiny model *true* advice in the same language so
that the base policy learns to read it, as an instruction-tuned LLM would.
"""

from __future__ import annotations

from edge.envs.base import Task
from edge.text import split_words

KINDS = ("try", "avoid", "recover")

STORE_ENVS = frozenset({"shop", "webshop"})
"""Environments with the shop's pages and goals (the built-in one and WebShop's own data): the same
guidance and failure patterns apply to both."""


def entry(kind: str, text: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"guidance kind must be one of {KINDS}, got {kind!r}")
    return f"{kind} : {text.strip().rstrip('.')} ."


def experience_block(entries: list[str]) -> str:
    """The text that goes into the prompt's experience section."""
    return " ".join(entries)


# ----- household ---------------------------------------------------------------------------
def find_in(obj: str, receptacle_kinds: list[str]) -> str:
    return entry("try", f"look for {obj} in {' , '.join(receptacle_kinds)}")


# Entries name their subject (an object kind) but never a task's own target or lamp: an entry is
# retrieved for other tasks about the same subject, whose targets differ.
def transform_first(verb: str, obj: str, tool: str) -> str:
    return entry("try", f"{verb} the {obj} with the {tool} before you put it in place")


def take_to_lamp(obj: str) -> str:
    return entry("try", f"take the {obj} to the lamp and use the lamp")


def second_object(obj: str) -> str:
    return entry("try", f"after you put one {obj} in place , find the second {obj}")


def avoid_searched_again() -> str:
    return entry("avoid", "going back to a receptacle you already searched")


def open_closed() -> str:
    return entry("recover", "if a receptacle is closed , open it and look inside")


# ----- shop --------------------------------------------------------------------------------
def search_type_and_attributes(product_type: str) -> str:
    return entry("try", f"search for {product_type} with the attributes the instruction names")


def click_options_first() -> str:
    return entry("try", "click every option the instruction names before buy now")


def avoid_over_budget() -> str:
    return entry("avoid", "buying an item whose price is above the price in the instruction")


def is_generic(text: str) -> bool:
    """Guidance that holds for every task type of an environment (stored with task type "any")."""
    return text in {avoid_searched_again(), open_closed(), click_options_first(), avoid_over_budget()}


def true_advice(task: Task) -> list[str]:
    """What an oracle that knows the environment's regularities (not this task's answer) says.

    Household: where the goal's object kind usually lies (its likely receptacle kinds present in
    the room), plus the transformation or lamp step. Shop: how to search and what to click.
    """
    if task.env == "household":
        from edge.envs.household.tasks import TRANSFORM
        from edge.envs.household.world import OBJECT_KINDS, kind_of

        goal = task.spec["goal"]
        present = {kind_of(r) for r in task.spec["receptacles"]}
        likely = [k for k in OBJECT_KINDS[goal["object"]].likely if k in present]
        advice = [find_in(goal["object"], likely)] if likely else []
        if goal["type"] in TRANSFORM:
            advice.append(transform_first(TRANSFORM[goal["type"]], goal["object"], goal["tool"]))
        elif goal["type"] == "look_at_obj_in_light":
            advice.append(take_to_lamp(goal["object"]))
        elif goal["type"] == "pick_two_obj_and_place":
            advice.append(second_object(goal["object"]))
        return advice
    if task.env in STORE_ENVS:
        return [search_type_and_attributes(task.spec["product_type"]), click_options_first(), avoid_over_budget()]
    return []


ORACLE_ENVS = frozenset({"household"}) | STORE_ENVS
"""Environments for which ``true_advice`` knows the regularities (the oracle control needs one)."""


def require_oracle(env: str) -> None:
    if env not in ORACLE_ENVS:
        raise ValueError(f"environment {env!r} has no oracle advice (edge.guidance.true_advice knows "
                         f"{', '.join(sorted(ORACLE_ENVS))}): the method edge-oracle-bank cannot run on it")


def advised_receptacle_kinds(advice: list[str]) -> list[str]:
    """Read back the receptacle kinds a ``find_in`` entry names (used by the advised demonstrator)."""
    for text in advice:
        if text.startswith("try : look for "):
            _, _, kinds = text[:-2].partition(" in ")
            return [k.strip() for k in kinds.split(",")]
    return []


def guidance_vocabulary() -> set[str]:
    """Words of every template (object and receptacle names come from the environments)."""
    samples = [
        find_in("x", ["y", "z"]), transform_first("clean", "x", "y"), take_to_lamp("x"),
        second_object("x"), avoid_searched_again(), open_closed(),
        search_type_and_attributes("x"), click_options_first(), avoid_over_budget(),
        "try avoid recover : . , heat cool clean",
    ]
    return {w for s in samples for w in split_words(s)}
