"""Household tasks: ALFWorld's six task types, generated from a seed, in three splits.

Splits follow ALFWorld's seen/unseen idea. ``train`` and ``test_seen`` draw from the same room
layouts and (object, target) combinations, with different seeds; ``test_unseen`` uses room layouts
and object/receptacle combinations that the other two never show. The object-location regularities
are the same in every split, so what is learnt about them transfers.
"""

from __future__ import annotations

import random
import zlib

from edge.envs.base import Task
from edge.envs.household.world import (
    OBJECT_KINDS,
    ROOM_RECEPTACLES,
    SPECIAL_HOLDERS,
    SURFACES,
    TOOL_FOR,
    Layout,
    env_name,
    kind_of,
    kinds_in_room,
    make_layout,
    sample_location,
)

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

# The transformation each task type asks for (None: plain pick and place).
TRANSFORM = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
}

ROOMS_FOR_TYPE = {
    "pick_and_place_simple": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "pick_two_obj_and_place": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "look_at_obj_in_light": ("livingroom", "bedroom"),
    "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
    "pick_heat_then_place_in_recep": ("kitchen",),
    "pick_cool_then_place_in_recep": ("kitchen",),
}

# Receptacles that are never a goal: they hold one special thing each in ALFWorld.
NOT_TARGETS = frozenset({"towelholder", "handtowelholder", "toiletpaperhanger", "toaster"})

LAYOUT_SEED = 0
"""Fixed: the floor plans are part of the environment, like ALFWorld's scenes."""
LAYOUTS_PER_ROOM = 12
UNSEEN_LAYOUTS_PER_ROOM = 3
"""The last layouts of each room appear only in ``test_unseen``."""
UNSEEN_COMBO_MODULUS = 5
"""About one (object, target) pair in five is held out for ``test_unseen``."""

LAYOUTS: dict[str, list[Layout]] = {
    room: [make_layout(room, i, LAYOUT_SEED) for i in range(LAYOUTS_PER_ROOM)] for room in ROOM_RECEPTACLES
}


def is_unseen_layout(layout: Layout) -> bool:
    return int(layout.layout_id.rsplit("-", 1)[1]) >= LAYOUTS_PER_ROOM - UNSEEN_LAYOUTS_PER_ROOM


def is_unseen_combo(obj: str, target: str) -> bool:
    # crc32, not hash(): stable across processes and Python versions.
    return zlib.crc32(f"{obj}|{target}".encode()) % UNSEEN_COMBO_MODULUS == 0


def instruction_for(goal: dict, rng: random.Random) -> str:
    obj, target = goal["object"], goal["target"]
    prep = "on" if target in SURFACES else "in"
    kind = goal["type"]
    if kind == "look_at_obj_in_light":
        options = [f"look at {obj} under the {target}.", f"examine the {obj} with the {target}."]
    elif kind == "pick_two_obj_and_place":
        options = [f"put two {obj} {prep} {target}.", f"find two {obj} and put them {prep} {target}."]
    elif kind in TRANSFORM:
        verb = TRANSFORM[kind]
        adjective = {"clean": "clean", "heat": "hot", "cool": "cool"}[verb]
        options = [f"put a {adjective} {obj} {prep} {target}.", f"{verb} some {obj} and put it {prep} {target}."]
    else:
        options = [f"put a {obj} {prep} {target}.", f"put some {obj} {prep} {target}."]
    return rng.choice(options)


def _choose_goal(task_type: str, layout: Layout, unseen: bool, rng: random.Random) -> dict | None:
    present = {kind_of(r) for r in layout.receptacles}
    transform = TRANSFORM.get(task_type)
    ability = transform or ("light" if task_type == "look_at_obj_in_light" else None)
    kinds = [k.name for k in kinds_in_room(layout.room) if ability is None or ability in k.abilities]
    if task_type == "look_at_obj_in_light":
        if layout.lamp is None:
            return None
        targets = [kind_of(layout.lamp[0])]
    else:
        targets = sorted(present - NOT_TARGETS - {TOOL_FOR.get(transform)})
    pairs = [(o, t) for o in kinds for t in targets if is_unseen_combo(o, t) == unseen]
    if not pairs:
        return None
    obj, target = rng.choice(pairs)
    return {"type": task_type, "object": obj, "target": target, "tool": TOOL_FOR.get(transform),
            "count": 2 if task_type == "pick_two_obj_and_place" else 1}


def _place_objects(layout: Layout, goal: dict, rng: random.Random, world: str,
                   goal_likely: tuple[str, ...] | None = None) -> list[list[str]]:
    """The objects and where each lies. ``goal_likely``: the goal object's likely kinds (a shuffled task's);
    the other objects keep ``world``'s regularities (the usual ones in the shuffled world)."""
    receptacles = list(layout.receptacles)
    # A goal object never starts where the goal wants it, or the task would be solved at step 0.
    goal_spots = [r for r in receptacles if kind_of(r) != goal["target"]]
    counts: dict[str, int] = {}
    placed = []
    regular = "usual" if world == "shuffled" else world

    def place(kind_name: str, spots: list[str], likely: tuple[str, ...] | None = None) -> None:
        counts[kind_name] = counts.get(kind_name, 0) + 1
        where = sample_location(OBJECT_KINDS[kind_name], spots, rng, regular, likely)
        placed.append([f"{kind_name} {counts[kind_name]}", where])

    n_goal = goal["count"] + rng.randint(0, 1)
    for _ in range(n_goal):
        place(goal["object"], goal_spots, goal_likely)
    others = [k.name for k in kinds_in_room(layout.room) if k.name != goal["object"]]
    for _ in range(rng.randint(8, 14)):
        place(rng.choice(others), receptacles)
    return placed


def shuffled_likely(layout: Layout, goal: dict, rng: random.Random) -> tuple[str, ...]:
    """A shuffled task's likely kinds for its object: three kinds of the room drawn for this task (never
    the target's, never a special holder), most likely first."""
    kinds = sorted({kind_of(r) for r in layout.receptacles} - {goal["target"]} - SPECIAL_HOLDERS)
    return tuple(rng.sample(kinds, min(3, len(kinds))))


def make_task(split: str, index: int, seed: int, world: str = "usual") -> Task:
    """Task ``index`` of ``split`` for ``seed``. In another world (``world.WORLDS``) the same task (room, layout,
    goal, instruction) has its objects placed by that world's regularities, and belongs to ``household_<world>``."""
    rng = random.Random(f"household-{seed}-{split}-{index}")
    task_type = TASK_TYPES[index % len(TASK_TYPES)]
    unseen = split == "test_unseen"
    while True:
        room = rng.choice(ROOMS_FOR_TYPE[task_type])
        layout = rng.choice([lay for lay in LAYOUTS[room] if is_unseen_layout(lay) == unseen])
        goal = _choose_goal(task_type, layout, unseen, rng)
        if goal is not None:
            break
    # Another world places the objects from the same point of the stream, on a copy of it, so that what is
    # drawn after them (the instruction's wording) is the usual task's.
    placing = random.Random()
    placing.setstate(rng.getstate())
    objects = _place_objects(layout, goal, rng, "usual")
    goal_likely = shuffled_likely(layout, goal, placing) if world == "shuffled" else None
    if world != "usual":
        objects = _place_objects(layout, goal, placing, world, goal_likely)
    spec = {
        "room": room,
        "layout": layout.layout_id,
        "receptacles": list(layout.receptacles),
        "lamp": list(layout.lamp) if layout.lamp else None,
        "objects": objects,
        "goal": goal,
    }
    env = env_name(world)
    if world != "usual":  # the usual world's tasks stay exactly as they were (their files, their hashes)
        spec["world"] = world
    if goal_likely:
        spec["likely"] = list(goal_likely)
    return Task(env=env, split=split, task_id=f"{env}-{split}-{index:05d}",
                task_type=task_type, instruction=instruction_for(goal, rng), spec=spec)


def generate_tasks(split: str, n: int, seed: int, world: str = "usual") -> list[Task]:
    return [make_task(split, i, seed, world) for i in range(n)]
