"""The per-entry probe: each entry's leave-one-out contribution, paired task by task."""

from types import SimpleNamespace

import pytest

import edge.benchmarking.entry_probe as probe
from edge.benchmarking.entry_probe import block_without, entry_effects, word_overlap
from edge.envs.household import generate_tasks
from edge.guidance import true_advice
from tests.test_paired_evaluation import tiny_actor

FRIDGE, VAGUE, NOISE = "look for apple in fridge .", "look around .", "sing a song ."


def test_block_without_one_entry_and_the_oracles_words():
    assert block_without([FRIDGE, VAGUE], 0) == VAGUE
    assert block_without([FRIDGE, VAGUE], 1) == FRIDGE
    assert block_without([FRIDGE], 0) is None  # nothing left: the plain episode
    assert word_overlap("look for apple", ["look in the fridge for it"]) == pytest.approx(2 / 3)
    assert word_overlap("sing", ["look in the fridge"]) == 0.0


def test_contribution_is_what_leaving_the_entry_out_loses_and_lift_what_the_block_adds(monkeypatch):
    """With a stand-in evaluation where an episode wins exactly when its block mentions the fridge, the
    fridge entry contributes everything, the entries beside it nothing, and a lone entry's contribution
    equals its lift (without it the episode is the plain one)."""
    tasks = generate_tasks("test_seen", 9, seed=0)
    blocks = {t.task_id: ([], []) for t in tasks}
    for t in tasks[:3]:
        blocks[t.task_id] = (["fridge", "vague"], [FRIDGE, VAGUE])
    for t in tasks[3:6]:
        blocks[t.task_id] = (["noise", "fridge"], [NOISE, FRIDGE])
    for t in tasks[6:8]:
        blocks[t.task_id] = (["vague"], [VAGUE])
    calls = []

    def fake_evaluate(actor, chosen, seed, experience_for=None):
        ids = [t.task_id for t in chosen]
        assert len(ids) == len(set(ids)), "a task twice in one evaluation would share its stream"
        texts = {t.task_id: experience_for(t).text if experience_for else "" for t in chosen}
        calls.append((seed, texts))
        return SimpleNamespace(won_by_task={tid: "fridge" in text for tid, text in texts.items()})

    monkeypatch.setattr(probe, "evaluate", fake_evaluate)
    retrieved = lambda t: blocks[t.task_id] if blocks[t.task_id][0] else None  # noqa: E731
    effects = {e.entry_id: e for e in entry_effects(None, tasks, [1, 2], retrieved)}
    assert set(effects) == {"fridge", "vague", "noise"}
    fridge, vague, noise = effects["fridge"], effects["vague"], effects["noise"]
    assert (fridge.episodes, vague.episodes, noise.episodes) == (12, 10, 6)  # tasks shown on x 2 seeds
    assert fridge.contribution == 1.0 and fridge.lift == 1.0
    # vague: with the fridge entry on 3 tasks (the block wins with or without it), alone on 2 (never wins).
    assert vague.contribution == 0.0 and vague.lift == pytest.approx(6 / 10)
    assert noise.contribution == 0.0 and noise.lift == 1.0
    # The task that retrieves nothing is not played; each seed plays plain, the block, and one left-out position each.
    assert all(len(texts) <= 8 for _, texts in calls) and {seed for seed, _ in calls} == {1, 2}
    assert len(calls) == 2 * 4
    assert [e.entry_id for e in entry_effects(None, tasks, [1], retrieved)][0] == "fridge"  # most helpful first


def test_a_real_policy_is_probed_on_the_same_streams_as_its_evaluation():
    """On the tiny policy and real episodes: an entry's block success over its tasks is exactly what
    `evaluate` gives those tasks with the same block and seed, and the oracle's own advice agrees fully."""
    from edge.evaluate import evaluate
    from edge.rollout import Experience

    actor, tasks = tiny_actor(), generate_tasks("test_seen", 6, seed=3)
    oracle_line = {t.task_id: true_advice(t)[0] for t in tasks}
    retrieved = lambda t: ([f"oracle-{t.task_id}", "vague"], [oracle_line[t.task_id], VAGUE])  # noqa: E731
    effects = {e.entry_id: e for e in entry_effects(actor, tasks, [5], retrieved, oracle=true_advice)}
    block = evaluate(actor, tasks, 5, experience_for=lambda t: Experience(f"{oracle_line[t.task_id]} {VAGUE}"))
    without_vague = evaluate(actor, tasks, 5, experience_for=lambda t: Experience(oracle_line[t.task_id]))
    vague = effects["vague"]
    assert vague.episodes == len(tasks)
    assert vague.block_wins == sum(block.won_by_task.values())
    assert vague.without_wins == sum(without_vague.won_by_task.values())
    assert all(effects[f"oracle-{t.task_id}"].oracle_agreement == 1.0 for t in tasks)
    assert vague.oracle_agreement < 1.0


def test_block_anatomy_takes_each_stage_from_the_bank_or_the_oracle():
    """On household's real texts: `completed` keeps the bank's entries and adds the oracle's only for
    the stages the bank lacks; `oracle_with_bank_stage` swaps in the bank's entries of the named stage and
    never adds a stage the oracle does not advise; both list find before transform."""
    from edge.benchmarking.block_anatomy import completed, oracle_with_bank_stage
    from edge.envs.household.knowledge import find_in, second_object, transform_first
    from edge.envs.registry import knowledge

    stage = knowledge("household").guidance_stage
    bank_find, oracle_find = find_in("apple", ["fridge", "drawer"]), find_in("apple", ["fridge", "countertop"])
    heat, second = transform_first("heat", "apple", "microwave"), second_object("apple")
    bank_heat = transform_first("heat", "apple", "stoveburner")  # the bank's own wording of the step
    oracle = [oracle_find, heat]
    assert completed([bank_find], oracle, stage) == f"{bank_find} {heat}"  # the missing step from the oracle
    assert completed([bank_heat, bank_find], oracle, stage) == f"{bank_find} {bank_heat}"  # the bank's; in order
    assert oracle_with_bank_stage([bank_find], oracle, stage, {0}) == f"{bank_find} {heat}"
    assert oracle_with_bank_stage([bank_find], oracle, stage, {1}) == f"{oracle_find} {heat}"  # no bank step
    assert oracle_with_bank_stage([bank_find, bank_heat], oracle, stage, {1}) == f"{oracle_find} {bank_heat}"
    assert oracle_with_bank_stage([bank_find, second], oracle, stage, {0, 2}) == f"{bank_find} {heat}"


def test_an_entry_about_a_whole_task_type_is_reported_under_its_own_text(tmp_path, monkeypatch):
    """A type's step is shown to each task named for its object; the report labels it with the text written
    for the type (``entry_labels``), not with the first task's naming of it. Other entries keep their text."""
    from edge.bank.embedder import HashEmbedder
    from edge.bank.entry import BankEntry
    from edge.bank.store import ExperienceBank
    from edge.config import BankConfig
    from edge.envs.base import EVERY_SUBJECT
    from edge.envs.household.knowledge import find_in

    heats = [t for t in generate_tasks("train", 200, seed=4) if t.task_type == "pick_heat_then_place_in_recep"]
    first = heats[0]
    obj = first.spec["goal"]["object"]
    other = next(t for t in heats if t.spec["goal"]["object"] != obj)
    step = "try : heat the object with the microwave before you put it in place ."
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    bank.add([BankEntry(id="g000001", text=step, kind="try", task_type=first.task_type,
                        signature=f"{first.task_type}|*|no_transform", key=EVERY_SUBJECT),
              BankEntry(id="g000002", text=find_in(obj, ["fridge"]), kind="try", task_type="any",
                        signature=f"any|{obj}|not_found", key=obj)])
    cfg = BankConfig(grain="knowledge", subjects="seen-and-type-steps", embedder="hash", similarity_threshold=-1.0)
    monkeypatch.setattr(probe, "evaluate", lambda actor, chosen, seed, experience_for=None: SimpleNamespace(
        won_by_task={t.task_id: False for t in chosen}))
    retrieved = probe.retrieved_entries(bank, cfg)
    assert retrieved(first)[1] == [find_in(obj, ["fridge"]), step.replace("object", obj)]  # named when shown
    labelled = {e.entry_id: e.text for e in entry_effects(None, [first, other], [1], retrieved,
                                                           label=probe.entry_labels(bank, cfg))}
    assert labelled == {"g000001": step, "g000002": find_in(obj, ["fridge"])}
    # Without labels, the text of the first block that showed it (the first task's naming).
    assert entry_effects(None, [first, other], [1], retrieved)[0].text == step.replace("object", obj)
