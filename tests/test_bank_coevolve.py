"""The bank's co-evolution step on its own: credit, synthesis with merging, pruning, on a real bank."""

import pytest
from helpers import played, revisiting_trajectory

from edge.algorithms.contribution import GroupContribution
from edge.bank.coevolve import co_evolve, near_duplicate
from edge.bank.embedder import HashEmbedder
from edge.bank.entry import BankEntry
from edge.bank.store import ExperienceBank
from edge.config import BankConfig
from edge.envs.household import expert_plan, generate_tasks, make_env


def contribution(group_id: str, entry_ids: list[str], delta: float) -> GroupContribution:
    return GroupContribution(group_id, "pick_and_place_simple", entry_ids, 2, 2, 0.5 + delta, 0.5, 0.5 + delta, 0.5,
                             delta, max(delta, 0.0))


def lost_and_won(task):
    plan = expert_plan(task)
    return (played(make_env(), task, [a for a in plan if a.startswith("go to")][:1] + ["look"] * 3),
            played(make_env(), task, plan))


def simple_tasks(*objects: str):
    """The first pick-and-place task of each object kind (train, seed 4)."""
    tasks = [t for t in generate_tasks("train", 200, seed=4) if t.task_type == "pick_and_place_simple"]
    return [next(t for t in tasks if t.spec["goal"]["object"] == obj) for obj in objects]


def test_one_round_credits_what_was_used_writes_for_new_failures_and_prunes(tmp_path):
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    cfg = BankConfig(eta=0.5, prune={"min_uses": 2, "min_utility": 0.0, "stale_rounds": 3}, grain="knowledge")
    round0 = [traj for task in simple_tasks("pencil", "pillow") for traj in lost_and_won(task)]
    first = co_evolve(bank, round0, [], 0, cfg)
    assert [a["signature"] for a in first["added"]] == ["any|pencil|not_found",
                                                      "any|pillow|not_found"]
    assert not first["credited"] and not first["pruned"] and all(a["provenance"] for a in first["added"])
    helpful, harmful = (a["id"] for a in first["added"])

    # Round 1: one entry helped twice, the other hurt twice.
    groups = [contribution("a", [helpful], 0.5), contribution("b", [helpful], 0.25),
              contribution("c", [harmful], -0.5), contribution("d", [harmful], -0.5)]
    second = co_evolve(bank, [], groups, 1, cfg)
    assert {c["id"]: c["groups"] for c in second["credited"]} == {helpful: 2, harmful: 2}
    entry = bank.get(helpful)
    assert entry.uses == 2 and entry.utility == 0.5 * (0.5 * 0.5) + 0.5 * 0.25  # the EMA, group by group
    assert entry.history_rounds == [1] and entry.last_used_round == 1
    assert second["pruned"] == [{"id": harmful, "reason": "not_helping", "utility": bank.get(harmful).utility,
                                 "uses": 2}]
    assert bank.get(harmful).status == "pruned"

    # The same failures again: the active entry covers its signature, the pruned one does not.
    third = co_evolve(bank, round0, [], 2, cfg, prune=False)
    assert [a["signature"] for a in third["added"]] == ["any|pillow|not_found"]
    # Unused since round 1, with stale_rounds 3: pruned as stale at round 4, kept with pruning off.
    assert not co_evolve(bank, [], [], 4, cfg, prune=False)["pruned"]
    assert {p["id"]: p["reason"] for p in co_evolve(bank, [], [], 4, cfg)["pruned"]}[helpful] == "stale"


def test_a_near_duplicate_is_advice_about_the_same_subject(tmp_path):
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())

    def entry(id_, key, text, task_type="any"):
        return BankEntry(id=id_, text=text, kind="try", task_type=task_type, signature=f"{task_type}|{key}|x", key=key)

    pencil = entry("g1", "pencil", "try : look for pencil in drawer .")
    spatula = entry("g2", "spatula", "try : look for spatula in drawer .")
    again = entry("g3", "pencil", "try : look for pencil in drawer , desk .")
    assert near_duplicate(bank, again, [spatula, pencil], threshold=0.7) is pencil
    assert near_duplicate(bank, entry("g4", "spatula", pencil.text.replace("pencil", "spatula")), [pencil],
                          threshold=0.7) is None  # alike words, another subject
    assert near_duplicate(bank, entry("g6", "spatula", pencil.text), [pencil], threshold=0.7,
                          same_subject=False) is pencil  # grain task_type: texts merge across subjects
    other_type = entry("g5", "pencil", again.text, task_type="pick_two_obj_and_place")
    assert near_duplicate(bank, other_type, [pencil], threshold=0.7) is pencil  # "any" serves every type
    assert near_duplicate(bank, pencil, [other_type], threshold=0.7) is None


def test_evidence_accumulates_and_an_entry_it_contradicts_gets_a_new_version(tmp_path):
    (pencil,) = simple_tasks("pencil")
    lost, won = lost_and_won(pencil)
    first_bank = ExperienceBank.open(tmp_path / "a", HashEmbedder())
    learning = BankConfig(evidence="accumulated", revise=True, grain="knowledge")
    first = co_evolve(first_bank, [lost, won], [], 0, learning)
    [entry] = first["added"]
    evidence = first["evidence"]
    assert evidence["household"]["taken"]["pencil"]  # where the winner took it
    assert entry["text"].startswith("try : look for pencil in ") and "shelf" not in entry["text"]
    # Earlier rounds (as the next round receives them) saw pencils on shelves many times.
    evidence["household"]["seen"]["pencil"] = {"shelf": 50} | evidence["household"]["seen"]["pencil"]
    second = co_evolve(first_bank, [lost], [], 1, learning, evidence=evidence)
    [revision] = second["revised"]
    new = first_bank.get(revision["by"])
    assert revision["id"] == entry["id"] and new.revises == entry["id"]
    assert new.text.startswith("try : look for pencil in shelf")
    old = first_bank.get(entry["id"])
    assert old.status == "revised" and old.prune_reason == f"revised by {new.id}" and old.status_round == 1
    assert second["evidence"]["household"]["seen"]["pencil"]["shelf"] == 50  # carried on

    # Without revision the first entry stays; with this round's evidence alone nothing changed.
    for name, cfg in (("b", learning.model_copy(update={"revise": False})),
                      ("c", learning.model_copy(update={"evidence": "round"}))):
        bank = ExperienceBank.open(tmp_path / name, HashEmbedder())
        co_evolve(bank, [lost, won], [], 0, cfg)
        again = co_evolve(bank, [lost], [], 1, cfg, evidence=evidence)
        assert not again["added"] and not again["revised"], name


def test_subjects_seen_writes_where_an_object_lies_for_kinds_no_task_failed_on(tmp_path):
    (pencil,) = simple_tasks("pencil")
    lost, won = lost_and_won(pencil)  # the room shows a keychain, a pen and a floorlamp once each
    earlier = {"household": {"seen": {"keychain": {"dresser": 4}, "pencil": {"drawer": 5}}, "taken": {}}}
    seen = BankConfig(evidence="accumulated", revise=True, grain="knowledge", subjects="seen")
    bank = ExperienceBank.open(tmp_path / "seen", HashEmbedder())
    first = co_evolve(bank, [lost, won], [], 0, seen, evidence=earlier)
    added = {a["signature"]: a for a in first["added"]}
    # The keychain: seen 5 times in all, no task about it failed. The pen and the floorlamp: once, too
    # little to say where the kind lies. The pencil: its failure's entry, not a second one.
    assert sorted(added) == ["any|keychain|not_found", "any|pencil|not_found"]
    keychain = bank.get(added["any|keychain|not_found"]["id"])
    assert keychain.text == "try : look for keychain in dresser ." and keychain.task_type == "any"
    assert keychain.key == "keychain" and keychain.provenance == [lost.traj_id]
    assert first["synthesis"] == {"written": 1, "subject_written": 1}
    # Next round the keychain and the pencil are covered; the pen, seen twice now, still too little.
    again = co_evolve(bank, [lost, won], [], 1, seen, evidence=first["evidence"])
    assert not again["added"] and again["synthesis"]["subject_covered"] == 2
    third = co_evolve(bank, [lost, won], [], 2, seen, evidence=again["evidence"])
    assert sorted(a["signature"] for a in third["added"]) == ["any|floorlamp|not_found", "any|pen|not_found"]

    # The spec's bank writes for failures only.
    failed = ExperienceBank.open(tmp_path / "failed", HashEmbedder())
    only = co_evolve(failed, [lost, won], [], 0, seen.model_copy(update={"subjects": "failed"}), evidence=earlier)
    assert [a["signature"] for a in only["added"]] == ["any|pencil|not_found"]


def test_subjects_seen_needs_entries_that_serve_every_task_type():
    with pytest.raises(ValueError, match="bank.grain: knowledge"):
        BankConfig(subjects="seen")


def test_seen_and_steps_writes_a_task_types_step_from_its_winners_so_blocks_are_complete(tmp_path):
    from edge.bank.retrieval import retrieve_for_task

    heat = next(t for t in generate_tasks("train", 200, seed=4) if t.task_type == "pick_heat_then_place_in_recep")
    obj, heat_type = heat.spec["goal"]["object"], heat.task_type
    lost, won = lost_and_won(heat)  # the winner heats with the room's microwave; the loser never finds the object
    steps = BankConfig(evidence="accumulated", revise=True, grain="knowledge", subjects="seen-and-steps")
    bank = ExperienceBank.open(tmp_path / "steps", HashEmbedder())
    first = co_evolve(bank, [lost, won], [], 0, steps)
    assert first["evidence"]["household"]["won_steps"] == {heat_type: {"microwave": 1}}
    added = {a["signature"]: a for a in first["added"]}
    step = bank.get(added[f"{heat_type}|{obj}|no_transform"]["id"])
    assert step.text == f"try : heat the {obj} with the microwave before you put it in place ."
    assert step.task_type == heat_type and step.key == obj and step.provenance[0] == won.traj_id
    # No task failed to heat, yet the heating task's block is complete: where to look, then the step.
    complete = steps.model_copy(update={"embedder": "hash", "similarity_threshold": -1.0, "block_rule": "complete"})
    assert retrieve_for_task(bank, heat, complete)[1] == [added[f"any|{obj}|not_found"]["id"], step.id]
    # Without the step option, or without a winner of the type, no step is written.
    for name, cfg, trajectories in (("seen", steps.model_copy(update={"subjects": "seen"}), [lost, won]),
                                    ("no-winner", steps, [lost])):
        other = ExperienceBank.open(tmp_path / name, HashEmbedder())
        written = co_evolve(other, trajectories, [], 0, cfg)["added"]
        assert not any(a["signature"].endswith("|no_transform") for a in written), name
        assert retrieve_for_task(other, heat, complete) is None, name


def test_type_steps_are_written_once_and_named_for_every_task_of_the_type(tmp_path):
    """`bank.subjects: seen-and-type-steps`: one heating task's winner writes the heating step once, for
    the type; a heating task about an object nobody played retrieves it named for its own object."""
    from edge.bank.retrieval import retrieve_experience, retrieve_for_task
    from edge.envs.base import EVERY_SUBJECT

    tasks = generate_tasks("train", 200, seed=4)
    heats = [t for t in tasks if t.task_type == "pick_heat_then_place_in_recep"]
    heat = heats[0]
    obj, heat_type = heat.spec["goal"]["object"], heat.task_type
    other = next(t for t in heats if t.spec["goal"]["object"] != obj)  # a heating task nobody played
    cool = next(t for t in tasks if t.task_type == "pick_cool_then_place_in_recep")
    lost, won = lost_and_won(heat)  # the winner heats with the room's microwave; the loser never finds the object
    cfg = BankConfig(evidence="accumulated", revise=True, grain="knowledge", subjects="seen-and-type-steps",
                     embedder="hash", similarity_threshold=-1.0, block_order="episode")
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    added = {a["signature"]: a for a in co_evolve(bank, [lost, won], [], 0, cfg)["added"]}
    assert f"{heat_type}|{obj}|no_transform" not in added  # no step for the object itself
    step = bank.get(added[f"{heat_type}|{EVERY_SUBJECT}|no_transform"]["id"])
    assert step.text == "try : heat the object with the microwave before you put it in place ."
    assert step.key == EVERY_SUBJECT and step.task_type == heat_type and step.provenance[0] == won.traj_id

    # The played task: where to look, then the step named for its object, as the oracle's advice reads.
    text, ids = retrieve_for_task(bank, heat, cfg)
    assert ids == [added[f"any|{obj}|not_found"]["id"], step.id]
    assert text.endswith(f"try : heat the {obj} with the microwave before you put it in place .")
    # A heating task about another object retrieves the step named for that object, with or without an
    # entry about the object; a task of another type never does.
    other_obj = other.spec["goal"]["object"]
    text, ids = retrieve_for_task(bank, other, cfg)
    assert step.id in ids and f"try : heat the {other_obj} with the microwave" in text and "the object" not in text
    assert step.id not in (retrieve_for_task(bank, cool, cfg) or ("", []))[1]
    # Never by its key's similarity, nor without a way to name the task's subject.
    assert step.id not in (retrieve_experience(bank, heat.instruction, heat_type, top_k=3, threshold=-1.0)
                           or ("", []))[1]

    # Only with the option: a bank read with another setting does not show the type's step.
    found = retrieve_for_task(bank, other, cfg.model_copy(update={"subjects": "seen-and-steps"}))
    assert found is None or step.id not in found[1]

    # An entry about the task's own object that gives the same step is the more specific: it is shown
    # in the step's place and the type's is left out, in either block order; one about another object
    # (here named by a per-step query's observation) is not the task's own, so the type's step stays.
    own = BankEntry(id=bank.next_id(), text=f"try : heat the {obj} with the stoveburner before you put it in place .",
                    kind="try", task_type=heat_type, signature=f"{heat_type}|{obj}|no_transform", key=obj)
    bank.add([own])
    for order in ("episode", "similarity"):
        text, ids = retrieve_for_task(bank, heat, cfg.model_copy(update={"block_order": order}))
        assert own.id in ids and step.id not in ids and "microwave" not in text, order
    text, ids = retrieve_for_task(bank, other, cfg, query=f"{other.instruction} you see a {obj} 1 .")
    assert step.id in ids and f"heat the {other_obj} with the microwave" in text and "stoveburner" not in text

    # The random-entries control names a type's step for the task it is shown to, or leaves it out.
    import random

    from edge.bank.retrieval import random_entries, type_steps_for
    drawn, _ = random_entries(bank, len(bank.all("active")), random.Random(0), name=type_steps_for(other, cfg).name)
    assert f"heat the {other_obj} with the microwave" in drawn and "the object" not in drawn
    assert step.id not in random_entries(bank, len(bank.all("active")), random.Random(0))[1]


def test_retrieval_asks_for_the_environments_knowledge_once_a_task(tmp_path, monkeypatch):
    """`retrieve_for_task` hands the knowledge it looked up to `type_steps_for`; another caller of
    `type_steps_for` (the random-entries control) still gets it from the registry."""
    import edge.bank.retrieval as retrieval
    from edge.envs.base import EVERY_SUBJECT

    heat = next(t for t in generate_tasks("train", 200, seed=4) if t.task_type == "pick_heat_then_place_in_recep")
    obj = heat.spec["goal"]["object"]
    cfg = BankConfig(grain="knowledge", subjects="seen-and-type-steps", embedder="hash", similarity_threshold=-1.0)
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    bank.add([BankEntry(id="g000001", text="try : heat the object with the microwave before you put it in place .",
                        kind="try", task_type=heat.task_type, signature=f"{heat.task_type}|*|no_transform",
                        key=EVERY_SUBJECT)])
    asked = []
    registry = retrieval.knowledge
    monkeypatch.setattr(retrieval, "knowledge", lambda env: asked.append(env) or registry(env))
    text, ids = retrieval.retrieve_for_task(bank, heat, cfg)
    assert ids == ["g000001"] and text == f"try : heat the {obj} with the microwave before you put it in place ."
    assert asked == [heat.env]
    assert retrieval.type_steps_for(heat, cfg).name("the object") == f"the {obj}" and asked == [heat.env] * 2


def test_bank_sightings_reach_the_evidence_the_bank_writes_from(tmp_path):
    """`bank.sightings` is what the round's evidence counts with: a trajectory that went back to its
    object's receptacle three times adds one sighting with once-per-episode, three with every (the default)."""
    revisits, obj, kind = revisiting_trajectory(3)
    for sightings, expected in (("every", 3), ("once-per-episode", 1)):
        bank = ExperienceBank.open(tmp_path / sightings, HashEmbedder())
        cfg = BankConfig(evidence="accumulated", sightings=sightings)
        assert co_evolve(bank, [revisits], [], 0, cfg)["evidence"]["household"]["seen"][obj][kind] == expected
    with pytest.raises(ValueError, match="sightings"):
        BankConfig(sightings="twice")
