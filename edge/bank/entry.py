"""One experience entry: guidance text plus everything needed to credit, prune and audit it."""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("active", "merged", "pruned", "revised")
PRUNE_REASONS = ("not_helping", "internalized", "stale", "size_cap")


@dataclass
class BankEntry:
    id: str
    """Stable id, e.g. ``g000012``; never reused."""
    text: str
    """Sanitised guidance, e.g. ``try : look for apple in fridge , countertop .``"""
    kind: str
    """``try`` / ``avoid`` / ``recover``."""
    task_type: str
    """Task family the entry was written for (retrieval pre-filters on it)."""
    signature: str
    """The failure signature it answers, e.g. ``pick_heat_then_place_in_recep|apple|not_found``."""
    key: str = ""
    """What the entry is retrieved by: its subject (the object kind or product type it is about).
    Retrieval compares a new task's instruction with this key, not with the advice text, so advice
    about apples comes back for apple tasks and not for soapbar tasks (all-MiniLM-L6-v2: about 0.5-0.7
    for the right subject, at most about 0.3 for others). Empty: the text itself is the key."""
    vector: list[float] = field(default_factory=list)
    utility: float = 0.0
    """EMA of the marginal contribution of the groups that saw it: u <- (1-eta) u + eta * Delta."""
    uses: int = 0
    positive_credit: float = 0.0
    """Sum of c(x) = max(Delta, 0) over the groups that saw it."""
    created_round: int = 0
    last_used_round: int = -1
    status: str = "active"
    prune_reason: str | None = None
    """Why it left the active set (one of PRUNE_REASONS, or ``merged into <id>``)."""
    status_round: int | None = None
    """Round in which the status last changed."""
    provenance: list[str] = field(default_factory=list)
    """Trajectory ids (``task_id/m<member>``) it was written from."""
    synthesizer: str = "template"
    history_rounds: list[int] = field(default_factory=list)
    """Rounds in which it was credited, with the matching values below (for audit and pruning)."""
    history_utility: list[float] = field(default_factory=list)
    history_success_plain: list[float] = field(default_factory=list)
    """Plain success of the groups that saw it, per credited round (for the internalized rule)."""
    history_success_conditioned: list[float] = field(default_factory=list)
    revises: str | None = None
    """The entry this one replaced when the evidence changed what it should say (that entry's status
    became ``revised``, its reason ``revised by <this id>``); None for a first version."""
