"""Entries a run's bank starts with (``bank.seed_file`` or ``bank.bootstrap``), before round 0 collects anything.

``bank.bootstrap: demonstrations`` writes them the way a round writes guidance (``add_guidance``), from the
warm start's own plain demonstrations instead of a round's rollouts (``bootstrap_bank``): no episode is
added to any method's budget, and the evidence read off them is where round 0's accumulated evidence
starts. The rest of this module is about ``bank.seed_file``, which has two uses: start from knowledge
someone already has (a curated list, or the bank another run ended with), and audit the co-evolution by
planting an entry known to be false and watching what the credit, revision and pruning rules do with
it (``benchmarks/planted_entries.py``).

The file is either JSON Lines, one entry per line with the fields a stored entry is made of::

    {"text": "try : cool the object with the fridge before you put it in place .",
     "kind": "try", "task_type": "pick_heat_then_place_in_recep",
     "signature": "pick_heat_then_place_in_recep|*|no_transform", "key": "*"}

or a bank snapshot (``round_<k>/bank.parquet`` of a run), whose *active* entries are taken. A seeded
entry starts with no credit and no history, round 0 as its creation round, and provenance
``seed:<file name>:<line or id>``; from then on it is credited, merged into and pruned like any
entry. A JSON Lines entry is marked ``synthesizer: seeded``, so the template writer never revises it
(someone's word is not overwritten by a round's evidence; only pruning removes it); a snapshot's entries
keep the synthesizer that wrote them. Every text passes the sanitiser as a written entry does: a
text it refuses is an error naming the line, not an entry quietly dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from edge.bank.entry import BankEntry
from edge.bank.sanitize import refusal_reason, sanitize_guidance
from edge.guidance import KINDS

if TYPE_CHECKING:
    from edge.rollout import Trajectory

SEED_FIELDS = ("text", "kind", "task_type", "signature", "key")
"""What a JSON Lines seed entry must give (``BankEntry``'s fields of the same names)."""
SEEDED = "seeded"
"""The ``synthesizer`` of an entry read from a JSON Lines seed file."""


class SeedFileError(ValueError):
    """A seed file that cannot be read as bank entries; the message names the file, line and field."""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _vetted(text: str, max_chars: int, where: str) -> str:
    """``text`` as the sanitiser writes it, or a SeedFileError naming ``where`` and the sanitiser's reason."""
    reason = refusal_reason(text, max_chars=max_chars)
    if reason is not None:
        raise SeedFileError(f"{where} is refused by the sanitiser ({reason})")
    return sanitize_guidance(text, max_chars=max_chars)


def _entry_from_line(path: Path, number: int, line: str, max_chars: int) -> BankEntry:
    where = f"{path}, line {number}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise SeedFileError(f"{where}: not JSON ({err.msg}); expected one object per line") from None
    if not isinstance(data, dict):
        raise SeedFileError(f"{where}: expected a JSON object with {', '.join(SEED_FIELDS)}")
    missing = [f for f in SEED_FIELDS if not isinstance(data.get(f), str) or not data[f].strip()]
    if missing:
        raise SeedFileError(f"{where}: field {missing[0]!r} missing or not a non-empty string "
                            f"(each line needs {', '.join(SEED_FIELDS)})")
    unknown = sorted(set(data) - set(SEED_FIELDS))
    if unknown:
        raise SeedFileError(f"{where}: unknown field {unknown[0]!r} (a line has {', '.join(SEED_FIELDS)})")
    if data["kind"] not in KINDS:
        raise SeedFileError(f"{where}: field 'kind' must be one of {', '.join(KINDS)} (got {data['kind']!r})")
    if not data["text"].startswith(f"{data['kind']} : "):
        raise SeedFileError(f"{where}: field 'text' must begin with its kind, {data['kind'] + ' : '!r}, as written "
                            f"entries do (got {data['text'][:40]!r})")
    if data["signature"].split("|")[0] != data["task_type"] or data["signature"].count("|") != 2:
        raise SeedFileError(f"{where}: field 'signature' must read '<task_type>|<subject>|<pattern>' with this "
                            f"line's task_type {data['task_type']!r} (got {data['signature']!r})")
    return BankEntry(id="", text=_vetted(data["text"], max_chars, f"{where}: field 'text'"), kind=data["kind"],
                     task_type=data["task_type"], signature=data["signature"], key=data["key"],
                     provenance=[f"seed:{path.name}:{number}"], synthesizer=SEEDED)


def _entries_from_snapshot(path: Path, max_chars: int) -> list[BankEntry]:
    from edge.bank.store import read_snapshot

    out = []
    for e in read_snapshot(path):
        if e.status != "active":
            continue
        out.append(BankEntry(id="", text=_vetted(e.text, max_chars, f"{path}: entry {e.id}'s text"), kind=e.kind,
                             task_type=e.task_type, signature=e.signature, key=e.key,
                             provenance=[f"seed:{path.name}:{e.id}"], synthesizer=e.synthesizer))
    return out


def read_seed_entries(path: Path, max_chars: int = 300) -> list[BankEntry]:
    """The entries ``path`` seeds a bank with, without ids (``seed_bank`` gives them), in file order.
    Refuses, naming the file, line and field: a missing file, a line that is not an entry, a text the
    sanitiser refuses (``max_chars``: ``bank.max_chars``), two entries for one signature (a signature has
    one active entry), and a file with no entry."""
    path = Path(path)
    if not path.is_file():
        raise SeedFileError(f"bank.seed_file: {path} is not a file (expected JSON Lines or a bank.parquet snapshot)")
    if path.suffix == ".parquet":
        entries = _entries_from_snapshot(path, max_chars)
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
        entries = [_entry_from_line(path, n, line, max_chars) for n, line in enumerate(lines, 1) if line.strip()]
    seen: dict[str, str] = {}
    for e in entries:
        if e.signature in seen:
            raise SeedFileError(f"{path}: two entries for signature {e.signature!r} ({seen[e.signature]} and "
                                f"{e.provenance[0]}); the bank keeps one active entry per signature")
        seen[e.signature] = e.provenance[0]
    if not entries:
        raise SeedFileError(f"{path}: no entry in the file")
    return entries


def check_seed_file(cfg) -> None:
    """Refuse ``cfg.seed_file`` (``BankConfig``) before a run starts: what ``read_seed_entries`` refuses, and
    an entry about a whole task type (key ``*``) in a bank whose ``subjects`` setting never retrieves one."""
    from edge.envs.base import EVERY_SUBJECT

    entries = read_seed_entries(cfg.seed_file, cfg.max_chars)
    typewide = next((e for e in entries if e.key == EVERY_SUBJECT), None)
    if typewide and cfg.subjects != "seen-and-type-steps":
        raise SeedFileError(f"bank.seed_file: {cfg.seed_file} holds an entry for a whole task type (key "
                            f"{EVERY_SUBJECT!r}, {typewide.provenance[0]}), which only bank.subjects: "
                            f"seen-and-type-steps retrieves (got subjects: {cfg.subjects})")


def seed_bank(bank, path: Path, max_chars: int = 300,
              before_insert: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Add ``path``'s entries to an empty ``bank`` (ids from the bank, created in round 0) and return what
    was added (id, signature, text, synthesizer), which ``before_insert`` is handed first (the run records
    it). A bank that already holds entries is a ValueError: seeding twice would duplicate them."""
    if len(bank):
        raise ValueError("seed_bank: the bank already holds entries; a bank is seeded once, when it is created")
    entries = read_seed_entries(path, max_chars)
    for e in entries:
        e.id = bank.next_id()
    added = [{"id": e.id, "signature": e.signature, "text": e.text, "synthesizer": e.synthesizer} for e in entries]
    if before_insert is not None:
        before_insert(added)
    bank.add(entries)
    return added


def bootstrap_bank(bank, trajectories: list[Trajectory], cfg) -> dict:
    """Write an empty ``bank``'s first entries from ``trajectories`` (``bank.bootstrap``: the warm start's
    demonstrations) as round 0's co-evolution writes guidance, under ``cfg`` (``BankConfig``): failures
    no entry covers, and with ``bank.subjects`` the subjects and task types the evidence knows enough
    about. Returns what was added and merged, and the evidence it was written from (round 0 adds its
    own to it under ``bank.evidence: accumulated``). A bank that already holds entries is a ValueError."""
    from edge.bank.coevolve import add_guidance
    from edge.bank.synthesis import round_evidence

    if len(bank):
        raise ValueError("bootstrap_bank: the bank already holds entries; a bank is bootstrapped once, when it is "
                         "created")
    evidence = round_evidence(trajectories, {} if cfg.evidence == "accumulated" else None, counting=cfg.sightings)
    added, merged, _, counts = add_guidance(bank, trajectories, 0, cfg, evidence)
    return {"episodes": len(trajectories), "won": sum(t.won for t in trajectories), "added": added,
            "merged": merged, "synthesis": counts, "evidence": evidence}
