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
    for a stage their type takes (``Knowledge.task_stages``), and of those how many the bank could have
    completed (``bank.block_rule: complete`` finds an entry for every stage: the block as retrieved left
    one out) or not (the bank has no entry for the stage at all)."""
    from edge.bank.retrieval import retrieve_for_task

    complete = cfg.model_copy(update={"block_rule": "complete"})
    out = {"retrieving": 0, "lacking_a_stage": 0, "left_out": 0, "not_in_bank": 0}
    for task in tasks:
        found = retrieve_for_task(bank, task, cfg)
        if found is None:
            continue
        out["retrieving"] += 1
        shown = {knowledge.guidance_stage(bank.get(i).text) for i in found[1]}
        if knowledge.task_stages(task) <= shown:
            continue
        out["lacking_a_stage"] += 1
        out["left_out" if retrieve_for_task(bank, task, complete) is not None else "not_in_bank"] += 1
    return out
