"""Writing new guidance from this round's failures.

Failed trajectories are grouped by a *failure signature*: the task type, the failure's subject (what
it was about, e.g. an object kind, ids abstracted) and its pattern (how it failed, read off the
actions). Both come from the environment's failure reader; for each signature, guidance is written
by contrast with what worked elsewhere in the same round, from the evidence the environment reads
off the round's trajectories (``edge.envs.base.Knowledge``). The default synthesizer is the
environment's own, deterministic and offline; ``LMSynthesizer`` asks a language model instead.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edge import guidance
from edge.bank.entry import BankEntry
from edge.bank.sanitize import sanitize_guidance
from edge.envs.registry import knowledge
from edge.text import split_words

if TYPE_CHECKING:  # trajectories are read as plain records; the bank never imports torch
    from edge.rollout import Trajectory

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, str]] = set()


@dataclass
class Failure:
    signature: str
    task_type: str
    pattern: str
    subject: str
    """What the guidance is about, and the entry's retrieval key (an object kind, a product type)."""
    trajectories: list[Trajectory] = field(default_factory=list)


def warn_once(env: str, message: str) -> None:
    if (env, message) not in _WARNED:
        _WARNED.add((env, message))
        log.warning("environment %r: %s", env, message)


def missing_parts(env: str, synthesizer: str, subjects: str = "failed", block_rule: str = "top_k") -> list[str]:
    """One line per knowledge part the bank's co-evolution needs and ``env`` lacks (said at start)."""
    have = knowledge(env)
    lines = []
    if not have.has("read_failure"):
        lines.append("no failure reader (KNOWLEDGE.read_failure): no failure is read, so the bank stays empty")
    elif synthesizer == "template" and not have.has("write_guidance"):
        lines.append("no guidance writer (KNOWLEDGE.write_guidance): the template synthesizer writes nothing, so "
                     "the bank stays empty (bank.synthesizer: lm writes without it)")
    if subjects != "failed" and not have.has("subject_guidance"):
        lines.append(f"no subject knowledge (KNOWLEDGE.subject_guidance): with bank.subjects: {subjects}, only "
                     "failures write entries")
    if subjects == "seen-and-steps" and not have.has("step_guidance"):
        lines.append("no step knowledge (KNOWLEDGE.step_guidance): with bank.subjects: seen-and-steps, a task type's "
                     "steps are written only for failures")
    if subjects == "seen-and-type-steps" and not (have.has("type_step_guidance") and have.has("name_subject")):
        lines.append("no knowledge of a task type's steps for every subject (KNOWLEDGE.type_step_guidance and "
                     "name_subject): with bank.subjects: seen-and-type-steps, a task type's steps are written "
                     "only for failures")
    if block_rule == "complete" and not have.has("task_stages"):
        lines.append("no task stages (KNOWLEDGE.task_stages): with bank.block_rule: complete, blocks are still the "
                     "bank.top_k most similar entries")
    return lines


def failures_by_signature(trajectories: list[Trajectory]) -> list[Failure]:
    """The round's lost trajectories grouped by signature, read by each one's environment."""
    groups: dict[str, Failure] = {}
    for t in trajectories:
        if t.won:
            continue
        reader = knowledge(t.task.env)
        if not reader.has("read_failure"):
            continue  # said once at start (missing_parts, from Run.open): the bank stays empty
        read = reader.read_failure(t)
        if read is None:
            continue
        pattern, subject = read
        if not set(split_words(subject)) <= set(split_words(t.task.instruction)):
            warn_once(t.task.env, f"failure subject {subject!r} does not occur in the instruction "
                      f"{t.task.instruction!r}; with bank.key_must_match its entries are never retrieved for it")
        signature = f"{t.task.task_type}|{subject}|{pattern}"
        groups.setdefault(signature, Failure(signature, t.task.task_type, pattern, subject)).trajectories.append(t)
    return [groups[k] for k in sorted(groups)]


def by_environment(trajectories: list[Trajectory]) -> dict[str, list[Trajectory]]:
    """The trajectories of each environment (each environment's knowledge reads only its own)."""
    grouped: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        grouped.setdefault(t.task.env, []).append(t)
    return grouped


def round_evidence(trajectories: list[Trajectory], previous: dict[str, Any] | None = None,
                   counting: str = "every") -> dict[str, Any]:
    """Environment -> what its knowledge reads off the trajectories of that environment, added to
    ``previous`` (the same mapping from earlier rounds, {} before the first; None: this round alone);
    ``counting``: ``bank.sightings`` (``Knowledge.evidence``)."""
    out = dict(previous or {})
    for env, group in by_environment(trajectories).items():
        previous_env = None if previous is None else previous.get(env, {})
        # Only the non-default is passed, so an environment whose `evidence` takes two parameters keeps
        # working with the default; `bank.sightings: once-per-episode` needs the three-parameter form.
        out[env] = (knowledge(env).evidence(group, previous_env) if counting == "every"
                    else knowledge(env).evidence(group, previous_env, counting=counting))
    return out


class TemplateSynthesizer:
    """The environment's own phrasing (its knowledge's ``write_guidance``)."""

    name = "template"

    def write(self, failure: Failure, evidence: Any, successes: list[Trajectory]) -> tuple[str, str] | None:
        writer = knowledge(failure.trajectories[0].task.env)
        if not writer.has("write_guidance"):
            return None  # said once at start
        return writer.write_guidance(failure, evidence, successes)


class LMSynthesizer:
    """Asks a language model for one guidance line: an OpenAI-compatible chat endpoint by URL, or a
    local Hugging Face model folder. The answer goes through the same sanitiser as any guidance.

    A failed request (server down, HTTP error, malformed reply) or an answer with no ``try :`` /
    ``avoid :`` / ``recover :`` line writes nothing for that signature; neither stops the round.
    ``counts`` says how many of each there were (``bank_changes.json`` records them)."""

    name = "lm"

    def __init__(self, endpoint: str | None = None, model: str = "local", max_new_tokens: int = 60):
        self.endpoint, self.model, self.max_new_tokens = endpoint, model, max_new_tokens
        self._pipeline = None
        self.counts: Counter = Counter()
        self.first_error: str | None = None

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

    def write(self, failure: Failure, evidence: Any, successes: list[Trajectory]) -> tuple[str, str] | None:
        self.counts["asked"] += 1
        try:
            text = str(self.complete(self.prompt(failure, successes)) or "").strip().lower()
        except (OSError, ValueError, KeyError, IndexError, TypeError) as err:  # URLError, HTTPError are OSErrors
            self.counts["failed"] += 1
            if self.first_error is None:
                self.first_error = f"{type(err).__name__}: {err}"
                log.warning("LM synthesizer: a request failed (%s); that signature gets no entry this round",
                            self.first_error)
            return None
        found = re.search(r"\b(try|avoid|recover)\s*:\s*(.+)", text, re.S)
        if not found:
            self.counts["empty" if not text else "unparsed"] += 1
            return None
        self.counts["answered"] += 1
        text = re.sub(r"\b([a-z]+) \d+\b", r"\1", found.group(2).split("\n")[0])  # abstract object ids
        return found.group(1), guidance.entry(found.group(1), text)


def synthesize(trajectories: list[Trajectory], synthesizer, round_index: int, new_id, max_chars: int = 300,
               covered=lambda signature, text: False, evidence: dict[str, Any] | None = None,
               grain: str = "task_type", counts: Counter | None = None) -> list[BankEntry]:
    """Candidate entries for this round's uncovered failure signatures (not yet merged or stored).

    ``new_id()`` hands out entry ids; ``covered(signature, text)`` says whether an active entry already
    covers a signature with this text. ``evidence``: what guidance is written from (default: this
    round's, ``round_evidence``). ``grain`` (``bank.grain``): ``task_type`` stores an entry for its
    failure's task type (generic guidance for "any"); ``knowledge`` asks the environment
    (``Knowledge.entry_task_type``), and an entry for "any" answers the signature ``any|subject|pattern``.
    ``counts``, when given, is incremented per failure signature: ``nothing_written``,
    ``refused_by_sanitiser``, ``covered``, ``written``."""
    counts = Counter() if counts is None else counts
    evidence = round_evidence(trajectories) if evidence is None else evidence
    successes = [t for t in trajectories if t.won]
    entries = []
    for failure in failures_by_signature(trajectories):
        env = failure.trajectories[0].task.env
        written = synthesizer.write(failure, evidence[env], [t for t in successes if t.task.env == env])
        if written is None:
            counts["nothing_written"] += 1
            continue
        kind, text = written
        pages = [s.observation for t in failure.trajectories for s in t.steps]
        clean = sanitize_guidance(text, pages, max_chars=max_chars)
        if clean is None:
            counts["refused_by_sanitiser"] += 1
            continue
        signature = failure.signature
        if grain == "knowledge":
            task_type = knowledge(env).entry_task_type(failure, clean)
            if task_type != failure.task_type:
                signature = f"{task_type}|{failure.subject}|{failure.pattern}"
        else:
            task_type = "any" if guidance.is_generic(clean, env) else failure.task_type
        if covered(signature, clean):
            counts["covered"] += 1
            continue
        counts["written"] += 1
        entries.append(BankEntry(
            id=new_id(), text=clean, kind=kind, task_type=task_type,
            signature=signature, key=failure.subject,
            created_round=round_index, provenance=[t.traj_id for t in failure.trajectories],
            synthesizer=synthesizer.name))
    return entries


def subject_entries(trajectories: list[Trajectory], round_index: int, new_id, evidence: dict[str, Any],
                    max_chars: int = 300, covered=lambda signature, text: False, skip: set[str] = frozenset(),
                    counts: Counter | None = None, steps: bool = False, type_steps: bool = False
                    ) -> list[BankEntry]:
    """Entries of knowledge about subjects (``bank.subjects: seen``): for every subject the environment's
    evidence says enough about (``Knowledge.subject_guidance``), whether or not a task about it has failed,
    the entry its failure would get, for every task type ("any"), keyed by the subject. With ``steps``
    (``seen-and-steps``) also each task type's steps for the round's subjects of the type
    (``Knowledge.step_guidance``), for that type; with ``type_steps`` (``seen-and-type-steps``) each task
    type's steps once for the type, subject ``EVERY_SUBJECT`` (``Knowledge.type_step_guidance``). ``skip``: signatures
    this round's failures already wrote for; ``covered`` as in ``synthesize``. ``counts`` is incremented per
    subject: ``subject_refused_by_sanitiser``, ``subject_covered``, ``subject_written``."""
    counts = Counter() if counts is None else counts
    by_env = by_environment(trajectories)
    entries = []
    for env in sorted(by_env):
        reader = knowledge(env)
        if not reader.has("subject_guidance"):
            continue  # said once at start (missing_parts)
        pages_of = {t.traj_id: [s.observation for s in t.steps] for t in by_env[env]}
        notes = reader.subject_guidance(by_env[env], evidence[env])
        if steps and reader.has("step_guidance"):
            notes += reader.step_guidance(by_env[env], evidence[env])
        if type_steps and reader.has("type_step_guidance") and reader.has("name_subject"):
            notes += reader.type_step_guidance(by_env[env], evidence[env])
        for note in notes:
            signature = f"{note.task_type}|{note.subject}|{note.pattern}"
            if signature in skip:
                continue
            clean = sanitize_guidance(note.text, [p for i in note.provenance for p in pages_of.get(i, [])],
                                      max_chars=max_chars)
            if clean is None:
                counts["subject_refused_by_sanitiser"] += 1
                continue
            if covered(signature, clean):
                counts["subject_covered"] += 1
                continue
            counts["subject_written"] += 1
            entries.append(BankEntry(
                id=new_id(), text=clean, kind=note.kind, task_type=note.task_type, signature=signature,
                key=note.subject,
                created_round=round_index, provenance=list(note.provenance), synthesizer="template"))
    return entries
