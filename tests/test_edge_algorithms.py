"""EDGE's arithmetic: marginal contribution, credit, reverse-KL distillation, pruning, synthesis."""

import math
from dataclasses import replace

import pytest
import torch
from helpers import played, revisiting_trajectory

from edge.algorithms.contribution import group_contributions, summary
from edge.algorithms.distill import reverse_kl_exact, reverse_kl_sampled_loss
from edge.bank.coevolve import credit_by_entry, ema_utility
from edge.bank.entry import BankEntry
from edge.bank.pruning import PruneRules, prune_decisions
from edge.bank.synthesis import TemplateSynthesizer, failures_by_signature, synthesize
from edge.envs.household import expert_plan, generate_tasks, make_env
from edge.envs.household.knowledge import where_seen
from edge.policy.actor import Decision
from edge.rollout import Experience, StepRecord, Trajectory

TASK = generate_tasks("train", 1, seed=0)[0]


def traj(group, member, reward, conditioned=False, entries=("g1",)):
    exp = Experience("try : x .", list(entries)) if conditioned else None
    return Trajectory(f"{group}/m{member}", TASK, group, member, conditioned, exp, won=reward == 1.0,
                      score=reward, reward=reward)


def test_delta_credit_and_utility_on_hand_made_groups():
    trajs = [traj("A", 0, 1.0, True), traj("A", 1, 1.0, True), traj("A", 2, 0.0), traj("A", 3, 1.0),
             traj("B", 0, 0.0, True, ("g1", "g2")), traj("B", 1, 0.0, True, ("g1", "g2")),
             traj("B", 2, 1.0), traj("B", 3, 0.0),
             traj("C", 0, 1.0), traj("C", 1, 0.0)]  # all plain: nothing retrieved, no Delta
    contributions = {c.group_id: c for c in group_contributions(trajs)}
    assert set(contributions) == {"A", "B"}
    assert contributions["A"].delta == pytest.approx(0.5) and contributions["A"].credit == pytest.approx(0.5)
    assert contributions["B"].delta == pytest.approx(-0.5) and contributions["B"].credit == 0.0
    assert contributions["A"].success_plain == 0.5 and contributions["A"].success_conditioned == 1.0
    credits = credit_by_entry(list(contributions.values()))
    assert credits["g1"].deltas == [0.5, -0.5] and credits["g2"].deltas == [-0.5]
    # u <- (1 - eta) u + eta * Delta, once per group: 0 -> 0.15 -> 0.105 - 0.15
    assert ema_utility(0.0, [0.5, -0.5], eta=0.3) == pytest.approx(-0.045)
    stats = summary(list(contributions.values()), n_groups=3)
    assert stats["delta_mean"] == pytest.approx(0.0) and stats["delta_positive_share"] == 0.5
    assert stats["retrieval_hit_rate"] == pytest.approx(2 / 3)


def test_reverse_kl_exact_by_hand_and_zero_at_equality():
    student = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    teacher = torch.log(torch.tensor([0.2, 0.5, 0.3]))
    expected = 0.5 * math.log(0.5 / 0.2) + 0.3 * math.log(0.3 / 0.5) + 0.2 * math.log(0.2 / 0.3)
    assert float(reverse_kl_exact(student, teacher)) == pytest.approx(expected, rel=1e-6)
    assert float(reverse_kl_exact(student, student)) == pytest.approx(0.0, abs=1e-7)
    surrogate, value = reverse_kl_sampled_loss(student[1:2], teacher[1:2])
    assert value == pytest.approx(math.log(0.3 / 0.5), rel=1e-6)


def test_a_gradient_step_moves_the_student_toward_the_teacher():
    teacher = torch.log_softmax(torch.tensor([2.0, 0.0, -1.0]), dim=0)
    logits = torch.tensor([0.0, 1.0, 0.5], requires_grad=True)
    kl_before = float(reverse_kl_exact(torch.log_softmax(logits, 0), teacher).detach())
    reverse_kl_exact(torch.log_softmax(logits, 0), teacher).backward()
    with torch.no_grad():
        logits -= 0.5 * logits.grad
    assert float(reverse_kl_exact(torch.log_softmax(logits, 0), teacher).detach()) < kl_before
    # Sampled estimator: actions drawn from the student, surrogate gradient, same direction on average.
    torch.manual_seed(0)
    logits = torch.tensor([0.0, 1.0, 0.5], requires_grad=True)
    logp = torch.log_softmax(logits, 0)
    actions = torch.multinomial(logp.exp().detach(), 4000, replacement=True)
    surrogate = sum(reverse_kl_sampled_loss(logp[a:a + 1], teacher[a:a + 1])[0] for a in actions.tolist()) / 4000
    surrogate.backward()
    with torch.no_grad():
        logits -= 0.5 * logits.grad
    assert float(reverse_kl_exact(torch.log_softmax(logits, 0), teacher)) < kl_before


def entry(**changes) -> BankEntry:
    base = dict(id="g1", text="try : x .", kind="try", task_type="t", signature="t|x|not_found", created_round=0,
                last_used_round=5, uses=5, utility=0.2, positive_credit=1.0,
                history_rounds=[3, 4, 5], history_success_plain=[0.2, 0.3, 0.3],
                history_success_conditioned=[0.8, 0.8, 0.8])
    base.update(changes)
    return BankEntry(**base)


RULES = PruneRules(min_uses=4, min_utility=0.0, window=3, tolerance=0.05, stale_rounds=6, max_size=3)


@pytest.mark.parametrize("case, reason", [
    # helped once, plain success has caught up with conditioned over the window
    (dict(history_success_plain=[0.7, 0.8, 0.8], history_success_conditioned=[0.8, 0.8, 0.8]), "internalized"),
    (dict(utility=-0.1, positive_credit=0.0), "not_helping"),
    (dict(last_used_round=-1, created_round=0), "stale"),
])
def test_each_pruning_rule_fires_on_its_case(case, reason):
    assert prune_decisions([entry(**case)], round_index=6, rules=RULES) == {"g1": reason}


@pytest.mark.parametrize("neighbour", [
    # plain success still clearly behind: keeps helping, not internalized
    dict(history_success_plain=[0.6, 0.7, 0.7]),
    # caught up, but over fewer rounds than the window
    dict(history_rounds=[5], history_success_plain=[0.8], history_success_conditioned=[0.8]),
    # low utility but too few uses to judge
    dict(utility=-0.1, positive_credit=0.0, uses=3, history_rounds=[5], history_success_plain=[0.0],
         history_success_conditioned=[0.0]),
    # used 5 rounds ago with a stale limit of 6
    dict(last_used_round=0),
])
def test_pruning_rules_do_not_fire_on_neighbours(neighbour):
    assert prune_decisions([entry(**neighbour)], round_index=5, rules=RULES) == {}


@pytest.mark.parametrize("case, reason", [
    (dict(history_success_plain=[0.7, 0.8, 0.8], history_success_conditioned=[0.8, 0.8, 0.8]), "internalized"),
    (dict(utility=-0.1, positive_credit=0.0), "not_helping"),
    (dict(last_used_round=-1, created_round=0), "stale"),
])
def test_a_rule_left_out_of_bank_prune_rules_prunes_nothing(case, reason):
    from edge.bank.pruning import RULES as ALL_RULES

    others = replace(RULES, enabled=frozenset(ALL_RULES) - {reason})
    assert prune_decisions([entry(**case)], round_index=6, rules=others) == {}
    # An entry an earlier rule would prune falls to the next one still on: internalized, then not helping.
    if reason == "internalized":
        helped_little = entry(**case, utility=-0.1)
        assert prune_decisions([helped_little], round_index=6, rules=others) == {"g1": "not_helping"}
    utilities = [0.5, 0.1, 0.9, 0.3]
    crowded = [entry(id=f"g{i}", utility=u, history_success_plain=[0.0] * 3) for i, u in enumerate(utilities)]
    assert prune_decisions(crowded, round_index=5, rules=replace(RULES, enabled=frozenset({"stale"}))) == {}


def test_bank_prune_rules_reach_the_co_evolution(tmp_path):
    from edge.bank.coevolve import prune_entries
    from edge.bank.embedder import HashEmbedder
    from edge.bank.store import ExperienceBank
    from edge.config import EdgeParams

    params = EdgeParams.model_validate({"bank": {"embedder": "hash", "prune": {"rules": ["stale", "size_cap"]}}})
    assert EdgeParams().bank.prune.rules == ["internalized", "not_helping", "stale", "size_cap"]
    with pytest.raises(ValueError, match="rules"):
        EdgeParams.model_validate({"bank": {"prune": {"rules": ["internalised"]}}})
    caught_up = dict(history_success_plain=[0.7, 0.8, 0.8], history_success_conditioned=[0.8, 0.8, 0.8])
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    bank.add([entry(**caught_up), entry(id="g2", last_used_round=-1, created_round=0)])
    assert [(p["id"], p["reason"]) for p in prune_entries(bank, 6, params.bank)] == [("g2", "stale")]
    assert [e.id for e in bank.all("active")] == ["g1"]  # internalized, but that rule is off
    assert [(p["id"], p["reason"]) for p in prune_entries(bank, 6, EdgeParams().bank)] == [("g1", "internalized")]


LIFT = replace(RULES, internalized_needs="lift", lift_margin=0.25)


@pytest.mark.parametrize("history, lift", [
    # lifted its groups from 20% to 80% in round 2; the plain members now win 80%: absorbed
    (([0.2, 0.8, 0.8, 0.8], [0.8, 0.8, 0.8, 0.8]), "internalized"),
    # advised members won once, then every member of its groups failed: nothing was learnt
    (([0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]), "not_helping"),
    # never more than 0.1 above plain: no evidence it helped
    (([0.6, 0.8, 0.8, 0.8], [0.7, 0.8, 0.8, 0.8]), "not_helping"),
    # lifted to 80% once, the plain members win 40% now, as do the advised ones: not where the advice took them
    (([0.2, 0.4, 0.4, 0.4], [0.8, 0.4, 0.4, 0.4]), "not_helping"),
    # caught up, but no credited round before the window to show a lift
    (([0.8, 0.8, 0.8], [0.8, 0.8, 0.8]), "not_helping"),
])
def test_internalized_needs_lift_relabels_what_never_lifted_its_groups(history, lift):
    plain, cond = history
    case = entry(history_rounds=list(range(len(plain))), history_success_plain=plain,
                 history_success_conditioned=cond, uses=8)
    # The spec's label: every one of these caught up, so it reads internalized.
    assert prune_decisions([case], round_index=5, rules=RULES) == {"g1": "internalized"}
    # The same entry leaves in the same round; only the reason needs the lift.
    assert prune_decisions([case], round_index=5, rules=LIFT) == {"g1": lift}
    # With the not-helping rule off, an entry that never lifted its groups stays.
    without = replace(LIFT, enabled=frozenset({"internalized", "stale", "size_cap"}))
    assert prune_decisions([case], round_index=5, rules=without) == ({"g1": lift} if lift == "internalized" else {})


@pytest.mark.parametrize("history, lift", [
    # lifted to 80% and to 50% before the window; the plain members reach the lesser level: absorbed
    (([0.0, 0.0, 0.5, 0.5, 0.5], [0.8, 0.5, 0.5, 0.5, 0.5]), "internalized"),
    # the only lift (20% -> 50%) is inside the window: no evidence from before it
    (([0.5, 0.2, 0.65, 0.65], [0.5, 0.5, 0.5, 0.5]), "not_helping"),
    # a lift of exactly the margin counts (0.75 - 0.5 is a hair under 0.25 in floats)
    (([0.5, 0.75, 0.75, 0.75], [0.75, 0.75, 0.75, 0.75]), "internalized"),
])
def test_the_lift_is_the_least_lifted_level_from_before_the_window(history, lift):
    plain, cond = history
    case = entry(history_rounds=list(range(len(plain))), history_success_plain=plain,
                 history_success_conditioned=cond, uses=8)
    assert prune_decisions([case], round_index=5, rules=LIFT) == {"g1": lift}


def test_with_not_helping_off_an_entry_that_never_lifted_its_groups_can_still_go_stale():
    never_lifted = entry(history_rounds=[0, 1, 2, 3], history_success_plain=[0.0] * 4,
                         history_success_conditioned=[0.5, 0.0, 0.0, 0.0], uses=8, last_used_round=-1)
    without = replace(LIFT, enabled=frozenset({"internalized", "stale", "size_cap"}))
    assert prune_decisions([never_lifted], round_index=6, rules=without) == {"g1": "stale"}


def test_lift_prunes_the_same_entries_in_the_same_round_as_credit():
    import random

    rng, relabelled = random.Random(0), 0
    for _ in range(300):
        bank = []
        for i in range(rng.randint(1, 8)):
            n = rng.randint(0, 6)
            bank.append(entry(id=f"g{i}", uses=rng.randint(0, 10), utility=rng.uniform(-0.3, 0.3),
                              positive_credit=rng.choice([0.0, 0.5]), last_used_round=rng.randint(-1, 6),
                              history_rounds=list(range(n)),
                              history_success_plain=[rng.choice([0, 0.25, 0.5, 0.75, 1]) for _ in range(n)],
                              history_success_conditioned=[rng.choice([0, 0.25, 0.5, 0.75, 1]) for _ in range(n)]))
        spec = replace(RULES, max_size=rng.randint(1, 8))
        credit, lift = (prune_decisions(bank, 7, replace(spec, internalized_needs=n)) for n in ("credit", "lift"))
        assert credit.keys() == lift.keys()
        assert all(lift[i] == r or (r, lift[i]) == ("internalized", "not_helping") for i, r in credit.items())
        relabelled += sum(lift[i] != r for i, r in credit.items())
    assert relabelled > 0  # the banks drawn do exercise the relabelling


def test_internalized_needs_reaches_the_co_evolution(tmp_path):
    from edge.bank.coevolve import prune_entries
    from edge.bank.embedder import HashEmbedder
    from edge.bank.store import ExperienceBank
    from edge.config import EdgeParams

    with pytest.raises(ValueError, match="internalized_needs"):
        EdgeParams.model_validate({"bank": {"prune": {"internalized_needs": "lifted"}}})
    assert EdgeParams().bank.prune.internalized_needs == "credit"
    both_failing = entry(history_rounds=[2, 3, 4, 5], history_success_plain=[0.0] * 4,
                         history_success_conditioned=[0.5, 0.0, 0.0, 0.0], utility=0.05, uses=8)
    for needs, reason in (("credit", "internalized"), ("lift", "not_helping")):
        bank = ExperienceBank.open(tmp_path / needs, HashEmbedder())
        bank.add([both_failing])
        params = EdgeParams.model_validate({"bank": {"embedder": "hash", "prune": {"internalized_needs": needs}}})
        assert [(p["id"], p["reason"]) for p in prune_entries(bank, 6, params.bank)] == [("g1", reason)]
        assert bank.get("g1").prune_reason == reason


def test_size_cap_evicts_lowest_utility():
    utilities = [0.5, 0.1, 0.9, 0.3]
    entries = [entry(id=f"g{i}", utility=u, history_success_plain=[0.0] * 3) for i, u in enumerate(utilities)]
    assert prune_decisions(entries, round_index=5, rules=RULES) == {"g1": "size_cap"}


def test_synthesis_contrasts_failures_with_what_the_round_saw():
    tasks = generate_tasks("train", 30, seed=4)
    task = next(t for t in tasks if t.task_type == "pick_and_place_simple")
    plan = expert_plan(task)
    failed = played(make_env(), task, [a for a in plan if a.startswith("go to")][:1] + ["look"] * 3)  # never takes
    success = played(make_env(), task, plan)
    assert success.won and not failed.won
    failures = failures_by_signature([failed, success])
    obj = task.spec["goal"]["object"]
    assert [f.signature for f in failures] == [f"pick_and_place_simple|{obj}|not_found"]
    seen = where_seen([failed, success])
    where = dict(task.spec["objects"])[next(o for o, _ in task.spec["objects"] if o.startswith(obj + " "))]
    assert seen[obj][where.rsplit(" ", 1)[0]] >= 1
    ids = iter(["g7"])
    [new] = synthesize([failed, success], TemplateSynthesizer(),
                       round_index=2, new_id=lambda: next(ids))
    assert new.id == "g7" and new.kind == "try" and new.created_round == 2
    assert new.text.startswith(f"try : look for {obj} in ") and where.rsplit(" ", 1)[0] in new.text
    assert new.provenance == [failed.traj_id] and new.signature == failures[0].signature
    assert not any(ch.isdigit() for ch in new.text)  # object ids abstracted
    # A signature already covered by an active entry gets nothing new.
    assert synthesize([failed, success], TemplateSynthesizer(),
                      2, lambda: "g8", covered=lambda sig, text: True) == []


def test_retrieval_needs_the_subject_in_the_task(tmp_path):
    from edge.bank.embedder import HashEmbedder
    from edge.bank.retrieval import retrieve_experience
    from edge.bank.store import ExperienceBank

    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    t = "pick_and_place_simple"
    bank.add([BankEntry(id="g000001", text="try : look for pillow in sofa , bed .", kind="try", task_type=t,
                        signature=f"{t}|pillow|not_found", key="pillow"),
              BankEntry(id="g000002", text="try : look for keychain in drawer , dresser .", kind="try", task_type=t,
                        signature=f"{t}|keychain|not_found", key="keychain"),
              BankEntry(id="g000003", text="try : look for keychain in sidetable .", kind="try",
                        task_type="look_at_obj_in_light", signature="look_at_obj_in_light|keychain|not_found",
                        key="keychain")])
    # Every entry passes a threshold of -1; only the one whose subject is in the task and whose type fits comes back.
    text, ids = retrieve_experience(bank, "put a keychain on bed.", t, top_k=3, threshold=-1.0)
    assert ids == ["g000002"] and text == "try : look for keychain in drawer , dresser ."
    loose = retrieve_experience(bank, "put a keychain on bed.", t, top_k=3, threshold=-1.0, key_must_match=False)
    assert set(loose[1]) == {"g000001", "g000002"}
    assert retrieve_experience(bank, "put a mug on bed.", t, top_k=3, threshold=-1.0) is None


def test_synthesis_reads_alfworld_observations():
    """ALFWorld arrives at "loc 23" and lists objects "On the countertop 1, ..."; no real game needed."""
    from edge.envs.base import Task

    goal = {"type": "pick_and_place_simple", "object": "apple", "target": "fridge", "lamp": ""}
    task = Task(env="alfworld", split="train", task_id="alfworld/valid_train/g1", task_type=goal["type"],
                instruction="put some apple in fridge.", spec={"game": "g1", "goal": goal})
    observations = ["You are in the middle of a room.",
                    "You arrive at loc 23. On the countertop 1, you see a apple 1, a knife 2, and a mug 1.",
                    "You arrive at loc 5. The cabinet 2 is closed.",
                    "You open the cabinet 2. The cabinet 2 is open. In it, you see a apple 3."]
    actions = ["go to countertop 1", "go to cabinet 2", "open cabinet 2", "look"]
    failed = Trajectory(f"{task.task_id}/m0", task, task.task_id, 0, False, None)
    for obs, a in zip(observations, actions):
        failed.steps.append(StepRecord(obs, [a], Decision(a, [], None, -1, None, [0.0])))
    [failure] = failures_by_signature([failed])
    assert failure.signature == "pick_and_place_simple|apple|not_found"
    seen = where_seen([failed])
    assert seen["apple"] == {"countertop": 1, "cabinet": 1} and "loc" not in {k for c in seen.values() for k in c}
    [new] = synthesize([failed], TemplateSynthesizer(), round_index=0, new_id=lambda: "g1")
    assert new.text == "try : look for apple in countertop , cabinet ." and new.key == "apple"


def test_credit_rules_weigh_a_group_gap_as_documented():
    from edge.algorithms.contribution import GroupContribution, credit_of, with_credit_rule

    assert credit_of(0.25, "gap") == 0.25 and credit_of(-0.5, "gap") == 0.0
    assert credit_of(0.25, "margin", margin=0.25) == 0.25 and credit_of(0.2, "margin", margin=0.25) == 0.0
    assert credit_of(0.25, "soft", margin=0.25) == 0.5
    assert credit_of(0.0, "soft", margin=0.25, sharpness=8) < credit_of(0.5, "soft", margin=0.25, sharpness=8)
    group = GroupContribution("x", "t", ["g1", "g2"], 2, 2, 0.25, 0.5, 0.25, 0.5, -0.25, 0.0)
    [c] = with_credit_rule([group], "utility", utilities={"g1": 0.5}, eta=0.3)
    # g1: 0.7 * 0.5 + 0.3 * -0.25 = 0.275; g2 (new): 0.3 * -0.25 = -0.075; mean 0.1
    assert c.credit == pytest.approx(0.1) and c.delta == -0.25
    with pytest.raises(ValueError, match="bank.credit"):
        credit_of(0.1, "bogus")


def test_block_order_episode_lists_the_find_entry_before_the_transform_step(tmp_path):
    from edge.bank.embedder import HashEmbedder
    from edge.bank.retrieval import retrieve_for_task
    from edge.bank.store import ExperienceBank
    from edge.config import BankConfig
    from edge.envs.household.knowledge import HouseholdKnowledge

    task = next(t for t in generate_tasks("train", 60, seed=4) if t.task_type == "pick_heat_then_place_in_recep")
    obj, t = task.spec["goal"]["object"], task.task_type
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    # Both entries are keyed by the task's subject, so both are retrieved with the same similarity; ties
    # keep the table's order, so the similarity order puts the transform step, written first, first.
    bank.add([BankEntry(id="g000001", text=f"try : heat the {obj} with the microwave before you put it in place .",
                        kind="try", task_type=t, signature=f"{t}|{obj}|no_transform", key=obj),
              BankEntry(id="g000002", text=f"try : look for {obj} in fridge , countertop .", kind="try",
                        task_type=t, signature=f"{t}|{obj}|not_found", key=obj)])
    by_similarity = retrieve_for_task(bank, task, BankConfig(embedder="hash", similarity_threshold=-1.0,
                                                             block_order="similarity"))
    by_episode = retrieve_for_task(bank, task, BankConfig(embedder="hash", similarity_threshold=-1.0,
                                                          block_order="episode"))
    assert sorted(by_similarity[1]) == sorted(by_episode[1]) == ["g000001", "g000002"]  # the same entries
    assert by_episode[1] == ["g000002", "g000001"]
    assert by_episode[0].startswith(f"try : look for {obj} in ")
    assert by_similarity[1] == ["g000001", "g000002"]  # what the option changes: the similarity order differs
    # The knowledge's stages agree with the oracle's own order, which the warm start learnt to follow.
    knowledge = HouseholdKnowledge()
    for task in generate_tasks("train", 60, seed=4):
        advice = knowledge.oracle_advice(task)
        assert [knowledge.guidance_stage(a) for a in advice] == sorted(knowledge.guidance_stage(a) for a in advice)


def test_complete_blocks_show_one_entry_per_step_or_nothing(tmp_path):
    from edge.bank.embedder import HashEmbedder
    from edge.bank.retrieval import retrieve_for_task
    from edge.bank.store import ExperienceBank
    from edge.config import BankConfig
    from edge.envs.household.knowledge import HouseholdKnowledge, avoid_searched_again

    tasks = generate_tasks("train", 200, seed=4)
    simple_objects = {x.spec["goal"]["object"] for x in tasks if x.task_type == "pick_and_place_simple"}
    task = next(t for t in tasks if t.task_type == "pick_heat_then_place_in_recep"
                and t.spec["goal"]["object"] in simple_objects)
    obj, t = task.spec["goal"]["object"], task.task_type
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    # Two "where to look" entries and the generic advice, but nothing on heating: the top 2 are shown,
    # the complete rule shows nothing.
    bank.add([BankEntry(id="g000001", text=f"try : look for {obj} in fridge , countertop .", kind="try",
                        task_type=t, signature=f"{t}|{obj}|not_found", key=obj),
              BankEntry(id="g000002", text=f"try : look for {obj} in cabinet .", kind="try",
                        task_type="any", signature=f"any|{obj}|not_found", key=obj),
              BankEntry(id="g000003", text=avoid_searched_again(), kind="avoid", task_type="any",
                        signature=f"any|{obj}|searched_again", key=obj)])
    top_k = BankConfig(embedder="hash", similarity_threshold=-1.0)
    complete = BankConfig(embedder="hash", similarity_threshold=-1.0, block_rule="complete", top_k=1)
    assert len(retrieve_for_task(bank, task, top_k)[1]) == 2
    assert retrieve_for_task(bank, task, complete) is None
    from edge.benchmarking.block_anatomy import stage_coverage  # the block anatomy's count: no step in the bank

    assert stage_coverage(bank, [task], top_k, HouseholdKnowledge()) == {
        "retrieving": 1, "lacking_a_stage": 1, "left_out": 0,
        "missing_stages": {"refused": 0, "pruned": 0, "never_written": 1}, "pruned_because": {}}
    # With an entry for the heating step the block is complete: one find entry (the more similar one),
    # then the heating step, even with top_k 1 (the rule does not read it) and the generic advice left out.
    bank.add([BankEntry(id="g000004", text=f"try : heat the {obj} with the microwave before you put it in place .",
                        kind="try", task_type=t, signature=f"{t}|{obj}|no_transform", key=obj)])
    text, ids = retrieve_for_task(bank, task, complete)
    finds = [e.id for e, _ in bank.retrieve(task.instruction, 10, -1.0, t) if e.id in ("g000001", "g000002")]
    assert ids == [finds[0], "g000004"]
    assert text.startswith(f"try : look for {obj} in ") and text.endswith("before you put it in place .")
    # A simple placing task needs only the find entry; the transform entry (of another type) is not its step.
    simple = next(x for x in tasks if x.task_type == "pick_and_place_simple" and x.spec["goal"]["object"] == obj)
    assert retrieve_for_task(bank, simple, complete)[1] == ["g000002"]  # the entry for any type
    # The block anatomy's coverage count: top 2 shows the two find entries and leaves the step out (the
    # bank has it now); the simple task is complete with its find entry.
    assert stage_coverage(bank, [task, simple], top_k, HouseholdKnowledge()) == {
        "retrieving": 2, "lacking_a_stage": 1, "left_out": 1,
        "missing_stages": {"refused": 0, "pruned": 0, "never_written": 0}, "pruned_because": {}}
    # The heating step pruned: the block lacks it because of the rule that fired, not for want of writing.
    step = bank.get("g000004")
    step.status, step.prune_reason, step.status_round = "pruned", "internalized", 7
    bank.upsert([step])
    assert stage_coverage(bank, [task], top_k, HouseholdKnowledge()) == {
        "retrieving": 1, "lacking_a_stage": 1, "left_out": 0,
        "missing_stages": {"refused": 0, "pruned": 1, "never_written": 0}, "pruned_because": {"internalized": 1}}
    # Active again, but its key ("mug") less similar to the instruction than the threshold asks, while a find
    # entry keyed by more of the instruction's words passes: the step was refused, not missing.
    step.status, step.prune_reason, step.status_round = "active", None, None
    bank.upsert([step])
    words = " ".join(task.instruction.rstrip(".").split()[:3])
    assert obj not in words.split()
    bank.add([BankEntry(id="g000005", text=f"try : look for {obj} in drawer .", kind="try", task_type="any",
                        signature=f"any|{words}|not_found", key=words)])
    strict = BankConfig(embedder="hash", similarity_threshold=0.5)
    assert [e.id for e, _ in bank.retrieve(task.instruction, 10, 0.5, t)] == ["g000005"]
    assert stage_coverage(bank, [task], strict, HouseholdKnowledge())["missing_stages"] == {
        "refused": 1, "pruned": 0, "never_written": 0}

    # The stages a type takes are those of the oracle's advice for its tasks (where it knows a place).
    knowledge = HouseholdKnowledge()
    for x in tasks:
        advice = knowledge.oracle_advice(x)
        assert {knowledge.guidance_stage(a) for a in advice} <= knowledge.task_stages(x)
        if len(advice) == len(knowledge.task_stages(x)):
            assert {knowledge.guidance_stage(a) for a in advice} == knowledge.task_stages(x)
    with pytest.raises(ValueError, match="block_rule"):
        BankConfig(block_rule="some")


def test_a_run_from_before_block_order_existed_is_read_with_the_order_it_used():
    from edge.config import EdgeParams, run_params

    def recorded(method):
        dump = EdgeParams.model_validate({"train": {"method": method}}).model_dump(mode="json")
        del dump["bank"]["block_order"]  # as params.json was written before the field existed
        return dump

    assert EdgeParams().bank.block_order == "episode"
    # EDGE's old run listed its entries by similarity: it is not taken for a run with the new default.
    assert run_params(recorded("edge")).bank.block_order == "similarity"
    assert run_params(recorded("edge-no-distill")).bank.block_order == "similarity"
    # The field changes nothing for GRPO and the oracle control: their old runs stay the same runs.
    for method in ("grpo", "edge-oracle-bank", "edge-random-bank"):
        assert run_params(recorded(method)).bank.block_order == "episode"
    # A run written now records the field, and is read as it was written.
    now = EdgeParams.model_validate({"bank": {"block_order": "similarity"}}).model_dump(mode="json")
    assert run_params(now).bank.block_order == "similarity"


def test_sightings_once_per_episode_count_a_revisited_receptacle_once():
    """`bank.sightings: once-per-episode`: an agent that goes back to the same receptacle three times
    saw its object there once, where every observation counts three sightings; a trajectory that looked
    once counts the same either way."""
    from edge.envs.household.knowledge import RoomKnowledge

    revisits, obj, kind = revisiting_trajectory(3)
    looked_once, _, _ = revisiting_trajectory(1)
    assert where_seen([revisits])[obj][kind] == 3
    assert where_seen([revisits], once_per_episode=True)[obj][kind] == 1
    assert where_seen([looked_once])[obj][kind] == where_seen([looked_once], once_per_episode=True)[obj][kind] == 1
    # Through the environment's evidence, as `bank.sightings` passes it.
    assert RoomKnowledge().evidence([revisits], None, counting="once-per-episode")["seen"][obj][kind] == 1
    assert RoomKnowledge().evidence([revisits], None)["seen"][obj][kind] == 3
