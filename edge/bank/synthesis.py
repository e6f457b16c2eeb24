"""Writing new guidance from this round's failures.

Failed trajectories are grouped by a *failure signature*: the task type, the goal's object kind (ids
abstracted: "apple 1" -> "apple") and the failure pattern read off the actions (never found the
object, never transformed it, never placed it, ...). For each signature, guidance is written by
contrast with what worked elsewhere in the same round: where objects of that kind were actually
seen, which tool successful trajectories used. The default synthesizer is deterministic and offline
(templates from ``edge.guidance``); ``LMSynthesizer`` asks a language model instead.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from edge import guidance
from edge.bank.entry import BankEntry
from edge.bank.sanitize import sanitize_guidance

if TYPE_CHECKING:  # trajectories are read as plain records; the bank never imports torch
    from edge.rollout import Trajectory

SEEN = re.compile(r"(?:you see|in it, you see) (.*?)(?:\.|$)")
# Where the listed objects lie: "On the countertop 1, you see ..." names it in both environments;
# otherwise the receptacle arrived at or opened ("you arrive at fridge 1", household). ALFWorld
# arrives at "loc 23", which names nothing.
ON_THE = re.compile(r"\bon the ([a-z]+) \d+, you see")
ARRIVE = re.compile(r"^(?:you arrive at|you open the) ([a-z]+) \d+")
ROOM_TASKS = ("household", "alfworld")
"""Environments whose tasks have a household-style goal (object, target, type) in ``spec["goal"]``."""


def _kind(name: str) -> str:
    return name.rsplit(" ", 1)[0]


@dataclass
class Failure:
    signature: str
    task_type: str
    pattern: str
    subject: str
    """What the guidance is about: the object kind (household) or product type (shop, webshop)."""
    trajectories: list[Trajectory] = field(default_factory=list)


def household_pattern(traj: Trajectory) -> str:
    goal = traj.task.spec["goal"]
    actions = [s.decision.action for s in traj.steps]
    took = [a for a in actions if a.startswith("take ") and _kind(a[5:].split(" from ")[0]) == goal["object"]]
    if not took:
        return "not_found"
    if goal["type"] == "look_at_obj_in_light":
        return "no_lamp"
    verb = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
            "pick_cool_then_place_in_recep": "cool"}.get(goal["type"])
    if verb and not any(a.startswith(f"{verb} ") for a in actions):
        return "no_transform"
    placed = [a for a in actions if a.startswith("put ") and _kind(a.split(" in/on ")[1]) == goal["target"]]
    if goal["type"] == "pick_two_obj_and_place" and len(placed) == 1:
        return "second_missing"
    return "not_placed"


_RESULTS_NAVIGATION = ("click[next >]", "click[< prev]", "click[back to search]")


def shop_pattern(traj: Trajectory) -> str:
    actions = [s.decision.action for s in traj.steps]
    if "click[buy now]" not in actions:
        return "no_purchase"
    # The bought item is the last one opened from a results page (WebShop's asins need not start "B0").
    item = max((i for i, s in enumerate(traj.steps)
                if "(Total results:" in s.observation and s.decision.action not in _RESULTS_NAVIGATION), default=-1)
    clicked_options = [a for a in actions[item + 1:] if a.startswith("click[") and a not in
                       ("click[buy now]", "click[description]", "click[features]", "click[reviews]", "click[< prev]")]
    return "missing_options" if not clicked_options else "wrong_item"


def failures_by_signature(trajectories: list[Trajectory]) -> list[Failure]:
    groups: dict[str, Failure] = {}
    for t in trajectories:
        if t.won:
            continue
        if t.task.env in ROOM_TASKS:
            pattern, subject = household_pattern(t), t.task.spec["goal"]["object"]
        elif t.task.env in guidance.STORE_ENVS:
            pattern, subject = shop_pattern(t), t.task.spec["product_type"]
        else:
            continue
        signature = f"{t.task.task_type}|{subject}|{pattern}"
        groups.setdefault(signature, Failure(signature, t.task.task_type, pattern, subject)).trajectories.append(t)
    return [groups[k] for k in sorted(groups)]


def where_seen(trajectories: list[Trajectory]) -> dict[str, Counter]:
    """Object kind -> receptacle kinds it was seen in, counted over every observation of the round."""
    seen: dict[str, Counter] = defaultdict(Counter)
    for t in trajectories:
        for step in t.steps[1:]:
            obs = step.observation.lower()
            at = ON_THE.search(obs) or ARRIVE.match(obs)
            found = SEEN.search(obs)
            if not at or not found or at.group(1) == "loc":
                continue
            for item in found.group(1).replace(", and ", ", ").split(", "):
                name = item.removeprefix("a ").removeprefix("an ").strip()
                if name and name != "nothing":
                    seen[_kind(name)][at.group(1)] += 1
    return seen


def template_guidance(failure: Failure, seen: dict[str, Counter],
                      successes: list[Trajectory]) -> tuple[str, str] | None:
    """(kind, text) for one failure signature, or None when the round holds no evidence to write from."""
    if failure.trajectories[0].task.env in guidance.STORE_ENVS:
        return {"missing_options": ("try", guidance.click_options_first()),
                "no_purchase": ("try", guidance.search_type_and_attributes(failure.subject)),
                "wrong_item": ("try", guidance.search_type_and_attributes(failure.subject))}[failure.pattern]
    goal = failure.trajectories[0].task.spec["goal"]
    obj = failure.subject
    if failure.pattern == "not_found":
        places = [kind for kind, _ in seen.get(obj, Counter()).most_common(3)]
        return ("try", guidance.find_in(obj, places)) if places else ("recover", guidance.open_closed())
    if failure.pattern == "no_transform":
        verb = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
                "pick_cool_then_place_in_recep": "cool"}[goal["type"]]
        tools = Counter(_kind(s.decision.action.split(" with ")[1]) for t in successes for s in t.steps
                        if s.decision.action.startswith(f"{verb} "))
        if not tools:
            return None
        return "try", guidance.transform_first(verb, obj, tools.most_common(1)[0][0])
    if failure.pattern == "no_lamp":
        return "try", guidance.take_to_lamp(obj)
    if failure.pattern == "second_missing":
        return "try", guidance.second_object(obj)
    return None  # held it but never placed it: the round shows nothing to contrast with


class TemplateSynthesizer:
    name = "template"

    def write(self, failure: Failure, seen: dict[str, Counter],
              successes: list[Trajectory]) -> tuple[str, str] | None:
        return template_guidance(failure, seen, successes)


class LMSynthesizer:
    """Asks a language model for one guidance line: an OpenAI-compatible chat endpoint by URL, or a
    local Hugging Face model folder. The answer goes through the same sanitiser as any guidance."""

    name = "lm"

    def __init__(self, endpoint: str | None = None, model: str = "local", max_new_tokens: int = 60):
        self.endpoint, self.model, self.max_new_tokens = endpoint, model, max_new_tokens
        self._pipeline = None

    def prompt(self, failure: Failure, successes: list[Trajectory]) -> str:
        def show(t: Trajectory) -> str:
            return " ; ".join(s.decision.action for s in t.steps[:12])

        lines = [f"Task: {failure.trajectories[0].task.instruction}",
                 f"Failed attempts ({failure.pattern}): " + " || ".join(show(t) for t in failure.trajectories[:2])]
        same_type = [t for t in successes if t.task.task_type == failure.task_type][:2]
        if same_type:
            lines.append("Successful attempts on similar tasks: " + " || ".join(show(t) for t in same_type))
        lines.append("Write one short piece of advice for this kind of task, starting with 'try :', 'avoid :' "
                     "or 'recover :'. Do not name object numbers.")
        return "\n".join(lines)

    def complete(self, prompt: str) -> str:
        if self.endpoint:
            body = json.dumps({"model": self.model, "max_tokens": self.max_new_tokens, "temperature": 0,
                               "messages": [{"role": "user", "content": prompt}]}).encode()
            request = urllib.request.Request(self.endpoint.rstrip("/") + "/v1/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())["choices"][0]["message"]["content"]
        if self._pipeline is None:
            from transformers import pipeline

            self._pipeline = pipeline("text-generation", model=self.model)
        out = self._pipeline(prompt, max_new_tokens=self.max_new_tokens, do_sample=False, return_full_text=False)
        return out[0]["generated_text"]

    def write(self, failure: Failure, seen, successes: list[Trajectory]) -> tuple[str, str] | None:
        text = self.complete(self.prompt(failure, successes)).strip().lower()
        found = re.search(r"\b(try|avoid|recover)\s*:\s*(.+)", text, re.S)
        if not found:
            return None
        text = re.sub(r"\b([a-z]+) \d+\b", r"\1", found.group(2).split("\n")[0])  # abstract object ids
        return found.group(1), guidance.entry(found.group(1), text)


def synthesize(trajectories: list[Trajectory], synthesizer, round_index: int, new_id, max_chars: int = 300,
               covered=lambda signature, text: False) -> list[BankEntry]:
    """Candidate entries for this round's uncovered failure signatures (not yet merged or stored).

    ``new_id()`` hands out entry ids; ``covered(signature, text)`` says whether an active entry already
    covers a signature (the store's similarity search)."""
    seen = where_seen(trajectories)
    successes = [t for t in trajectories if t.won]
    entries = []
    for failure in failures_by_signature(trajectories):
        written = synthesizer.write(failure, seen, successes)
        if written is None:
            continue
        kind, text = written
        pages = [s.observation for t in failure.trajectories for s in t.steps]
        clean = sanitize_guidance(text, pages, max_chars=max_chars)
        if clean is None or covered(failure.signature, clean):
            continue
        entries.append(BankEntry(
            id=new_id(), text=clean, kind=kind, task_type="any" if guidance.is_generic(clean) else failure.task_type,
            signature=failure.signature, key=failure.subject,
            created_round=round_index, provenance=[t.traj_id for t in failure.trajectories],
            synthesizer=synthesizer.name))
    return entries
