"""Where a learned block falls short of the oracle's: blocks made of the two, stage by stage.

The advice probe says a learned bank's block lifts a policy less than the oracle's advice does; the entry
probe says which entries earn or cost that. This says *why*, by playing the same retrieving tasks on the
same streams with blocks that take some stages of the episode (``Knowledge.guidance_stage``: household
finds the object at stage 0, transforms it or takes it to the lamp at 1, finds the second object at 2)
from the bank and the rest from the oracle:

- **completed**: the bank's block, plus the oracle's entries for the stages it has no entry for. Against
  the bank's block: what the steps the bank did not retrieve cost.
- **oracle, the bank's stage s**: the oracle's block with its stage-``s`` entries replaced by the bank's
  (where the bank's block has that stage; else the oracle's stay). Against the oracle: what the bank's
  wording of that stage costs (household stage 0: the bank's place list instead of the oracle's).

Entries are listed in stage order, as ``bank.block_order: episode`` and the oracle list them.
"""

from __future__ import annotations

from collections.abc import Callable

from edge.guidance import experience_block


def by_stage(texts: list[str], stage: Callable[[str], int]) -> dict[int, list[str]]:
    """The texts grouped by their stage, each group in its given order."""
    out: dict[int, list[str]] = {}
    for text in texts:
        out.setdefault(stage(text), []).append(text)
    return out


def joined(groups: dict[int, list[str]]) -> str:
    return experience_block([text for s in sorted(groups) for text in groups[s]])


def completed(bank: list[str], oracle: list[str], stage: Callable[[str], int]) -> str:
    """The bank's entries, plus the oracle's for every stage the bank's block has none of."""
    groups = by_stage(bank, stage)
    for s, texts in by_stage(oracle, stage).items():
        groups.setdefault(s, texts)
    return joined(groups)


def oracle_with_bank_stage(bank: list[str], oracle: list[str], stage: Callable[[str], int],
                           stages: set[int]) -> str:
    """The oracle's block, its entries of ``stages`` replaced by the bank's of the same stage where the
    bank's block has that stage (a stage the oracle does not advise is not added)."""
    groups = by_stage(oracle, stage)
    mine = by_stage(bank, stage)
    for s in stages & set(groups) & set(mine):
        groups[s] = mine[s]
    return joined(groups)


def stage_coverage(bank, tasks: list, cfg, knowledge) -> dict:
    """Of the ``tasks`` that retrieve a block (``cfg``, the run's ``bank`` section), how many lack an entry
    for a stage their type takes (``Knowledge.task_stages``), and why. Per task: ``left_out``, the bank has
    an entry for every stage and ``bank.block_rule: complete`` would show them all (the top ``top_k`` left
    one out). Per missing stage of the other tasks (``missing_stages``), the first cause that holds:

    - ``refused``: an active entry gives the stage and could serve the task (its type or any; about the
      task's own subject, its key's words in the instruction, or about the whole type), but retrieval
      turned it away (its key less similar to the instruction than ``similarity_threshold``, or below the
      candidates retrieval reads);
    - ``pruned``: no active one, but such an entry was pruned (``pruned_because``: the rule that fired,
      of the last one pruned);
    - ``never_written``: the bank never held one.
    """
    from edge.bank.retrieval import retrieve_for_task, type_steps_for
    from edge.envs.base import EVERY_SUBJECT
    from edge.text import split_words

    complete = cfg.model_copy(update={"block_rule": "complete"})
    out = {"retrieving": 0, "lacking_a_stage": 0, "left_out": 0,
           "missing_stages": {"refused": 0, "pruned": 0, "never_written": 0}, "pruned_because": {}}
    entries = bank.all()
    for task in tasks:
        found = retrieve_for_task(bank, task, cfg)
        if found is None:
            continue
        out["retrieving"] += 1
        shown = {knowledge.guidance_stage(bank.get(i).text) for i in found[1]}
        missing = knowledge.task_stages(task) - shown
        if not missing:
            continue
        out["lacking_a_stage"] += 1
        if retrieve_for_task(bank, task, complete) is not None:
            out["left_out"] += 1
            continue
        words = set(split_words(task.instruction))
        typed = type_steps_for(task, cfg, knowledge) is not None
        serving = [e for e in entries if e.task_type in (task.task_type, "any")
                   and (set(split_words(e.key)) <= words if e.key != EVERY_SUBJECT else typed)]
        for stage in sorted(missing):
            givers = [e for e in serving if knowledge.guidance_stage(e.text) == stage]
            pruned = [e for e in givers if e.status == "pruned"]
            if any(e.status == "active" for e in givers):
                cause = "refused"
            elif pruned:
                cause = "pruned"
                reason = max(pruned, key=lambda e: (e.status_round or 0, e.id)).prune_reason or "unknown"
                out["pruned_because"][reason] = out["pruned_because"].get(reason, 0) + 1
            else:
                cause = "never_written"
            out["missing_stages"][cause] += 1
    return out
