"""What a mini-ALFWorld house is made of: receptacles, objects and where objects tend to lie.

The regularities here are the point. ALFWorld agents learn that apples are usually in the fridge or
on a countertop and that pens live in desks and drawers; an experience bank can write such lessons
down. Each object kind has a few *likely* receptacle kinds that hold most of its probability mass
(``PRIOR_MASS``); the rest is spread over every receptacle in the room, so a plain explorer still
finds things, just more slowly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Receptacles that must be opened before their content is visible or reachable.
OPENABLE = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})

# Receptacles an instruction puts things "on" rather than "in" (ALFWorld instruction wording).
SURFACES = frozenset({
    "countertop", "diningtable", "coffeetable", "sidetable", "desk", "dresser", "shelf", "sofa",
    "armchair", "bed", "stoveburner", "toilet", "tvstand", "coffeemachine", "toaster",
})

# Which tool a transformation needs, and the verb ALFWorld uses for it.
TOOL_FOR = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}

LAMPS = ("desklamp", "floorlamp")

# Room kinds: receptacle kinds with (min, max) counts.
ROOM_RECEPTACLES: dict[str, dict[str, tuple[int, int]]] = {
    "kitchen": {
        "countertop": (1, 3), "cabinet": (4, 9), "drawer": (2, 6), "fridge": (1, 1),
        "microwave": (1, 1), "sinkbasin": (1, 1), "stoveburner": (2, 4), "coffeemachine": (1, 1),
        "toaster": (1, 1), "diningtable": (0, 1), "garbagecan": (1, 1), "shelf": (0, 2),
    },
    "livingroom": {
        "sofa": (1, 1), "armchair": (1, 2), "coffeetable": (1, 1), "sidetable": (1, 2),
        "tvstand": (1, 1), "drawer": (2, 5), "cabinet": (1, 4), "shelf": (1, 3),
        "garbagecan": (1, 1), "dresser": (0, 1),
    },
    "bedroom": {
        "bed": (1, 1), "desk": (1, 1), "sidetable": (1, 2), "dresser": (1, 1), "drawer": (3, 7),
        "shelf": (1, 3), "garbagecan": (1, 1), "safe": (0, 1),
    },
    "bathroom": {
        "countertop": (1, 1), "sinkbasin": (1, 2), "bathtubbasin": (1, 1), "toilet": (1, 1),
        "towelholder": (1, 1), "handtowelholder": (1, 1), "cabinet": (2, 4), "drawer": (1, 4),
        "garbagecan": (1, 1), "toiletpaperhanger": (1, 1), "shelf": (0, 2),
    },
}

# Where a lamp can stand, per room that has one (examine-in-light tasks need it).
LAMP_HOLDERS = {"livingroom": ("sidetable", "dresser", "desk"), "bedroom": ("desk", "sidetable", "dresser")}


@dataclass(frozen=True)
class ObjectKind:
    name: str
    rooms: tuple[str, ...]
    likely: tuple[str, ...]
    """Receptacle kinds that usually hold this kind, most likely first."""
    abilities: frozenset[str] = frozenset()
    """Subset of {"clean", "heat", "cool", "light"}: which task types may ask for this kind."""


def _k(name, rooms, likely, abilities=""):
    return ObjectKind(name, tuple(rooms.split()), tuple(likely.split()), frozenset(abilities.split()))


OBJECT_KINDS: dict[str, ObjectKind] = {k.name: k for k in [
    _k("apple", "kitchen", "fridge countertop diningtable", "clean heat cool"),
    _k("tomato", "kitchen", "fridge countertop sinkbasin", "clean heat cool"),
    _k("potato", "kitchen", "fridge countertop garbagecan", "clean heat cool"),
    _k("egg", "kitchen", "fridge countertop garbagecan", "heat cool"),
    _k("lettuce", "kitchen", "fridge countertop diningtable", "clean cool"),
    _k("bread", "kitchen", "countertop diningtable fridge", "heat cool"),
    _k("mug", "kitchen", "coffeemachine cabinet countertop", "clean heat cool"),
    _k("cup", "kitchen", "cabinet countertop fridge", "clean heat cool"),
    _k("plate", "kitchen", "cabinet countertop diningtable", "clean heat cool"),
    _k("bowl", "kitchen", "cabinet fridge countertop", "clean cool"),
    _k("pan", "kitchen", "stoveburner cabinet countertop", "clean cool"),
    _k("pot", "kitchen", "stoveburner cabinet countertop", "clean cool"),
    _k("knife", "kitchen", "drawer countertop diningtable", "clean"),
    _k("fork", "kitchen", "drawer countertop", "clean"),
    _k("spoon", "kitchen", "drawer countertop diningtable", "clean"),
    _k("spatula", "kitchen", "drawer countertop", "clean"),
    _k("saltshaker", "kitchen", "shelf cabinet countertop"),
    _k("dishsponge", "kitchen bathroom", "sinkbasin drawer countertop", "clean"),
    _k("remotecontrol", "livingroom", "sofa armchair coffeetable", "light"),
    _k("keychain", "livingroom bedroom", "sidetable dresser drawer", "light"),
    _k("creditcard", "livingroom bedroom", "drawer desk coffeetable", "light"),
    _k("newspaper", "livingroom", "sofa coffeetable armchair", "light"),
    _k("statue", "livingroom", "shelf coffeetable sidetable", "light"),
    _k("vase", "livingroom", "shelf sidetable cabinet", "light"),
    _k("pillow", "livingroom bedroom", "sofa bed armchair", "light"),
    _k("box", "livingroom", "coffeetable sofa cabinet", "light"),
    _k("watch", "livingroom bedroom", "dresser sidetable drawer", "light"),
    _k("book", "livingroom bedroom", "shelf bed desk", "light"),
    _k("laptop", "livingroom bedroom", "desk sofa bed"),
    _k("cellphone", "bedroom", "bed desk sidetable", "light"),
    _k("alarmclock", "bedroom", "desk sidetable dresser", "light"),
    _k("cd", "bedroom", "desk drawer shelf", "light"),
    _k("pen", "bedroom", "desk drawer shelf", "light"),
    _k("pencil", "bedroom", "desk drawer shelf", "light"),
    _k("soapbar", "bathroom", "bathtubbasin countertop toilet", "clean"),
    _k("cloth", "bathroom", "cabinet countertop bathtubbasin", "clean"),
    _k("spraybottle", "bathroom", "cabinet toilet countertop"),
    _k("toiletpaper", "bathroom", "toiletpaperhanger cabinet toilet"),
    _k("candle", "bathroom", "countertop cabinet toilet"),
    _k("soapbottle", "bathroom", "countertop cabinet toilet"),
    _k("handtowel", "bathroom", "handtowelholder countertop"),
    _k("towel", "bathroom", "towelholder bathtubbasin"),
]}

PRIOR_MASS = 0.85
"""Probability that an object lies in one of its kind's likely receptacle kinds (when present)."""

# Per-rank weights inside the likely list: the first likely kind is the most likely.
LIKELY_WEIGHTS = (0.55, 0.3, 0.15)


def kinds_in_room(room: str) -> list[ObjectKind]:
    return [k for k in OBJECT_KINDS.values() if room in k.rooms]


@dataclass(frozen=True)
class Layout:
    """A room's floor plan: which numbered receptacles exist and where a lamp stands."""

    layout_id: str
    room: str
    receptacles: tuple[str, ...]
    """Receptacle names in presentation order, e.g. ("cabinet 1", ..., "toaster 1")."""
    lamp: tuple[str, str] | None
    """(lamp name, receptacle it stands on), or None."""


def kind_of(name: str) -> str:
    """'cabinet 3' -> 'cabinet'."""
    return name.rsplit(" ", 1)[0]


def make_layout(room: str, index: int, seed: int) -> Layout:
    rng = random.Random(f"layout-{seed}-{room}-{index}")
    names = []
    for kind, (lo, hi) in ROOM_RECEPTACLES[room].items():
        names += [f"{kind} {i}" for i in range(1, rng.randint(lo, hi) + 1)]
    names.sort(key=lambda n: (kind_of(n), int(n.rsplit(" ", 1)[1])))
    lamp = None
    if room in LAMP_HOLDERS:
        holders = [n for n in names if kind_of(n) in LAMP_HOLDERS[room]]
        lamp = (f"{rng.choice(LAMPS)} 1", rng.choice(holders))
    return Layout(f"{room}-{index}", room, tuple(names), lamp)


WORLDS = ("usual", "moved", "shuffled")
"""The usual house; the house whose objects moved: every object kind's likely receptacle kinds are others of
its rooms (``moved_likely``), so what a warm start learnt about where things lie is wrong there; and the
shuffled house, where each task's object lies in kinds drawn for that task alone (``Task.spec["likely"]``):
there only the advice knows where to look, so a policy that clones advised episodes there must read it."""

# Receptacles that hold one special thing each in ALFWorld: never where a moved object goes.
SPECIAL_HOLDERS = frozenset({"towelholder", "handtowelholder", "toiletpaperhanger"})


def env_name(world: str) -> str:
    """The registry name of the household in ``world``: ``household``, else ``household_<world>``."""
    return "household" if world == "usual" else f"household_{world}"


def moved_likely(kind: ObjectKind) -> tuple[str, ...]:
    """Where ``kind`` lies once the house has moved: as many receptacle kinds as its usual list, drawn
    (fixed by the kind's name) from its rooms' receptacle kinds that are not in the usual list."""
    candidates = sorted({r for room in kind.rooms for r in ROOM_RECEPTACLES[room]}
                        - set(kind.likely) - SPECIAL_HOLDERS)
    return tuple(random.Random(f"moved-{kind.name}").sample(candidates, len(kind.likely)))


def likely_kinds(kind_name: str, world: str = "usual") -> tuple[str, ...]:
    """The receptacle kinds that usually hold ``kind_name`` in ``world`` (``usual`` or ``moved``), most likely
    first. The shuffled world has no such kinds: each of its tasks draws its own."""
    if world not in WORLDS[:2]:
        raise ValueError(f"household world {world!r} has no likely kinds per object kind; valid worlds: usual, moved")
    kind = OBJECT_KINDS[kind_name]
    return kind.likely if world == "usual" else moved_likely(kind)


def sample_location(kind: ObjectKind, receptacles: list[str], rng: random.Random, world: str = "usual",
                    likely: tuple[str, ...] | None = None) -> str:
    """Where an object of ``kind`` lies in ``world``: mostly its likely kinds (``likely`` when given: a
    shuffled task's own), otherwise anywhere."""
    likely = [(k, w) for k, w in zip(likely or likely_kinds(kind.name, world), LIKELY_WEIGHTS)
              if any(kind_of(r) == k for r in receptacles)]
    if likely and rng.random() < PRIOR_MASS:
        chosen = rng.choices([k for k, _ in likely], weights=[w for _, w in likely])[0]
        return rng.choice([r for r in receptacles if kind_of(r) == chosen])
    return rng.choice(receptacles)
