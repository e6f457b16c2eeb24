"""Audit views of the bank: what changed between two states, and how one entry reads to a person.

These work on plain lists of ``BankEntry`` (from ``ExperienceBank.all()``, ``checkout`` or a
Parquet snapshot), so a round's changes can be audited long after the run, from its snapshots.
"""

from __future__ import annotations

from rich.table import Table

from edge.bank.entry import BankEntry

_UTILITY_TOL = 1e-12


def diff(before: list[BankEntry], after: list[BankEntry]) -> dict:
    """What happened to the bank between ``before`` and ``after``.

    Keys: ``added`` (ids new in after), ``merged`` and ``pruned`` (id -> ``prune_reason`` for ids
    whose status became merged / pruned, new ids included), ``reactivated`` (ids that were merged or
    pruned and are active again), ``changed_utility`` (id -> (old, new)), and ``removed`` (ids of
    before missing from after) — the bank never deletes, so a non-empty ``removed`` is a bug.
    """
    old = {e.id: e for e in before}
    new = {e.id: e for e in after}
    result: dict = {"added": [], "merged": {}, "pruned": {}, "reactivated": [], "changed_utility": {},
                    "removed": sorted(set(old) - set(new))}
    for ident in sorted(new):
        cur, prev = new[ident], old.get(ident)
        prev_status = prev.status if prev is not None else None
        if prev is None:
            result["added"].append(ident)
        if cur.status != prev_status:
            if cur.status in ("merged", "pruned"):
                result[cur.status][ident] = cur.prune_reason
            elif cur.status == "active" and prev_status in ("merged", "pruned"):
                result["reactivated"].append(ident)
        if prev is not None and abs(cur.utility - prev.utility) > _UTILITY_TOL:
            result["changed_utility"][ident] = (prev.utility, cur.utility)
    return result


def _num(x: float) -> str:
    return f"{x:+.3f}"


def format_entry(entry: BankEntry) -> str:
    """A multi-line, human-readable view of one entry (``edge bank show``)."""
    status = entry.status
    if entry.prune_reason:
        status += f" ({entry.prune_reason})"
    if entry.status_round is not None:
        status += f" in round {entry.status_round}"
    lines = [
        f"id:           {entry.id}",
        f"status:       {status}",
        f"kind:         {entry.kind}",
        f"task type:    {entry.task_type}",
        f"signature:    {entry.signature}",
        f"text:         {entry.text}",
        f"utility:      {_num(entry.utility)}   uses: {entry.uses}   positive credit: {entry.positive_credit:.3f}",
        f"created:      round {entry.created_round}   last used: "
        + (f"round {entry.last_used_round}" if entry.last_used_round >= 0 else "never"),
        f"synthesizer:  {entry.synthesizer}",
        f"provenance:   {', '.join(entry.provenance) if entry.provenance else '-'}",
    ]
    if entry.history_rounds:
        lines.append("history:")
        for i, rnd in enumerate(entry.history_rounds):
            parts = [f"u={_num(entry.history_utility[i])}" if i < len(entry.history_utility) else "u=?"]
            if i < len(entry.history_success_plain):
                parts.append(f"plain={entry.history_success_plain[i]:.2f}")
            if i < len(entry.history_success_conditioned):
                parts.append(f"conditioned={entry.history_success_conditioned[i]:.2f}")
            lines.append(f"  round {rnd}: " + " ".join(parts))
    else:
        lines.append("history:      (never credited)")
    return "\n".join(lines)


def format_table(entries: list[BankEntry], text_width: int = 60) -> Table:
    """A rich table of entries, one row each (``edge bank ls``)."""
    table = Table(title=f"experience bank ({len(entries)} entries)")
    for name, justify in (("id", "left"), ("status", "left"), ("kind", "left"), ("task type", "left"),
                          ("utility", "right"), ("uses", "right"), ("last used", "right"), ("text", "left")):
        table.add_column(name, justify=justify, overflow="fold" if name == "text" else "ellipsis")
    for e in entries:
        status = e.status if not e.prune_reason else f"{e.status}: {e.prune_reason}"
        text = e.text if len(e.text) <= text_width else e.text[: text_width - 1] + "…"
        table.add_row(e.id, status, e.kind, e.task_type, _num(e.utility), str(e.uses),
                      str(e.last_used_round) if e.last_used_round >= 0 else "-", text)
    return table
