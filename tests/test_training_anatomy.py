"""How training episodes ended, round by round and by context, from the runs' rollouts files."""

from collections import Counter

import pytest

from edge.benchmarking.training_anatomy import (
    markdown,
    pattern_scopes,
    round_counts,
    run_counts,
    share,
    training_anatomy,
)
from edge.config import PolicyConfig
from edge.envs.household import generate_tasks
from edge.envs.household.knowledge import failure_pattern
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.rollout import Experience, read_rollouts, rollout, write_rollouts

ADVICE = Experience("try : look for apple in fridge , countertop .", ["oracle"])


@pytest.fixture(scope="module")
def grouped_round():
    """An untrained policy's round: 6 tasks x 4 members, the first 2 members of half the tasks advised."""
    actor = Actor(load_policy(PolicyConfig(), seed=0, envs=["household"]))
    tasks = generate_tasks("train", 6, seed=3)
    return rollout(actor, tasks, 4, 5, experiences={t.task_id: ADVICE for t in tasks[::2]},
                   conditioned_per_group=2, max_steps=12)


def test_the_text_only_read_keeps_what_the_agent_did_and_drops_the_tokens(grouped_round, tmp_path):
    path = write_rollouts(grouped_round, tmp_path / "rollouts.parquet")
    full, text = read_rollouts(path), read_rollouts(path, text_only=True)
    assert [(t.traj_id, t.conditioned, t.won, [s.decision.action for s in t.steps]) for t in text] == \
        [(t.traj_id, t.conditioned, t.won, [s.decision.action for s in t.steps]) for t in full]
    assert all(s.decision.prompt_ids == [] and s.decision.candidate_ids is None for t in text for s in t.steps)
    assert any(s.decision.prompt_ids for t in full for s in t.steps)


def test_round_counts_split_the_members_by_context_and_read_each_lost_episode_once(grouped_round):
    counts = round_counts(grouped_round)
    assert set(counts) == {"plain", "conditioned"}
    for context, conditioned in (("plain", False), ("conditioned", True)):
        members = [t for t in grouped_round if t.conditioned == conditioned]
        expected: dict[str, Counter] = {}
        for t in members:
            c = expected.setdefault(t.task.task_type, Counter(episodes=0, won=0))
            c["episodes"] += 1
            c["won" if t.won else failure_pattern(t)] += 1
        assert counts[context] == {k: {n: v for n, v in c.items() if v or n in ("episodes", "won")}
                                   for k, c in expected.items()}
    assert sum(c["episodes"] for c in counts["conditioned"].values()) == 3 * 2  # 3 advised tasks x 2 members
    assert "conditioned" not in round_counts([t for t in grouped_round if not t.conditioned])


def test_run_counts_read_every_round_of_a_run_folder(grouped_round, tmp_path):
    rounds = [grouped_round[:8], grouped_round[8:]]  # two different rounds: the first two tasks, then the rest
    for k, trajectories in enumerate(rounds):
        write_rollouts(trajectories, tmp_path / f"round_{k:03d}" / "rollouts.parquet")
    counts = run_counts(tmp_path, 2)
    assert counts == [round_counts(rounds[0]), round_counts(rounds[1])]
    assert counts[0] != counts[1]


def counts(episodes: dict[str, int], outcomes: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Task type -> episodes / won / patterns, the won episodes being those not lost."""
    return {t: {"episodes": n, "won": n - sum(outcomes.get(t, {}).values())} | outcomes.get(t, {})
            for t, n in episodes.items()}


def test_a_pattern_s_share_is_over_the_task_types_that_can_fail_that_way():
    heat = counts({"heat": 10, "place": 10}, {"heat": {"no_transform": 4, "not_found": 1}, "place": {"not_found": 3}})
    scopes = pattern_scopes([heat])
    assert scopes == {"won": ["heat", "place"], "no_transform": ["heat"], "not_found": ["heat", "place"]}
    assert share(heat, "no_transform", scopes["no_transform"]) == pytest.approx(0.4)
    assert share(heat, "not_found", scopes["not_found"]) == pytest.approx(0.2)
    assert share(heat, "won", scopes["won"]) == pytest.approx(0.6)
    assert share({}, "won", ["heat"]) is None


def test_training_anatomy_averages_rounds_over_seeds_and_pairs_late_rounds_with_the_reference():
    def rnd(won_plain: int, won_cond: int | None = None) -> dict:
        out = {"plain": counts({"heat": 10}, {"heat": {"no_transform": 10 - won_plain}})}
        if won_cond is not None:
            out["conditioned"] = counts({"heat": 10}, {"heat": {"no_transform": 10 - won_cond}})
        return out

    runs = {"grpo": {0: [rnd(2), rnd(4), rnd(4)], 1: [rnd(2), rnd(5), rnd(6)]},
            "o17": {0: [rnd(2, 8), rnd(6, 9), rnd(6, 9)], 1: [rnd(1, 7), rnd(5, 8), rnd(8, 8)]}}
    report = training_anatomy(runs, reference="grpo plain", late_from=1)
    assert report["rows"] == ["grpo plain", "o17 plain", "o17 conditioned"]
    won = report["outcomes"]["won"]
    assert won["grpo plain"]["rounds"] == pytest.approx([0.2, 0.45, 0.5])
    assert won["o17 conditioned"]["rounds"] == pytest.approx([0.75, 0.85, 0.85])
    assert won["o17 plain"]["late"] == pytest.approx((0.6 + 0.65) / 2)  # seed 0 rounds 1-2: 12/20, seed 1: 13/20
    diff = won["o17 plain"]["late_minus_reference"]
    assert diff["per_seed"] == pytest.approx({"0": 0.6 - 0.4, "1": 0.65 - 0.55})
    assert "late_minus_reference" not in won["grpo plain"]
    assert report["outcomes"]["no_transform"]["o17 conditioned"]["rounds"] == pytest.approx([0.25, 0.15, 0.15])
    text = markdown(report, "t", "n")
    assert "| o17 plain | 15% | 55% | 70% | 62.5% | +15.0 [" in text
    assert "## no transform (heat)" in text


def test_training_anatomy_refuses_a_missing_reference_or_rounds_it_does_not_have():
    runs = {"o17": {0: [{"plain": counts({"heat": 2}, {})}] * 2}}
    with pytest.raises(ValueError, match="reference row 'grpo plain'"):
        training_anatomy(runs, reference="grpo plain", late_from=1)
    for late_from in (0, 2):  # the early part needs a round, the late part too
        with pytest.raises(ValueError, match="late_from"):
            training_anatomy(runs, reference="o17 plain", late_from=late_from)


def test_rounds_average_seeds_while_the_late_share_pools_a_seed_s_rounds_by_episodes():
    def rnd(episodes: int, lost: int) -> dict:
        return {"plain": counts({"heat": episodes}, {"heat": {"not_found": lost}})}

    # Seed 0's late rounds: 2 of 10 and 27 of 30 won, pooled 29 / 40 (their mean would be 0.55).
    runs = {"grpo": {0: [rnd(10, 5), rnd(10, 8), rnd(30, 3)], 1: [rnd(20, 10), rnd(40, 20), rnd(10, 5)]}}
    won = training_anatomy(runs, reference="grpo plain", late_from=1)["outcomes"]["won"]["grpo plain"]
    assert won["rounds"] == pytest.approx([0.5, (0.2 + 0.5) / 2, (0.9 + 0.5) / 2])  # each seed's share, averaged
    assert won["late"] == pytest.approx((29 / 40 + 25 / 50) / 2)


def test_a_row_without_episodes_in_a_round_or_without_paired_seeds_says_so():
    def rnd(won: int, conditioned: bool = True) -> dict:
        out = {"plain": counts({"heat": 10}, {"heat": {"not_found": 10 - won}})}
        return out | ({"conditioned": counts({"heat": 10}, {"heat": {"not_found": 10 - won}})} if conditioned else {})

    runs = {"grpo": {0: [rnd(1, False), rnd(2, False)], 1: [rnd(3, False), rnd(4, False)],
                     2: [rnd(5, False), rnd(6, False)]},
            "e18": {0: [rnd(2, False), rnd(4)], 1: [rnd(3, False), rnd(5)], 3: [rnd(3, False), rnd(5)]}}
    report = training_anatomy(runs, reference="grpo plain", late_from=1)
    won = report["outcomes"]["won"]
    assert won["e18 conditioned"]["rounds"][0] is None  # round 0's bank is empty: no conditioned members
    assert set(won["e18 plain"]["late_minus_reference"]["per_seed"]) == {"0", "1"}  # seed 3 has no GRPO run
    text = markdown(report, "t", "n")
    assert "| e18 conditioned | – | 47% |" in text
    assert "(n=2) |" in text and "| grpo plain | 30% | 40% | 40.0% | reference |" in text
    runs["e18"] = {0: runs["e18"][0], 3: runs["e18"][3]}  # one seed left to pair: no interval at all
    won = training_anatomy(runs, reference="grpo plain", late_from=1)["outcomes"]["won"]
    assert "late_minus_reference" not in won["e18 plain"]


def test_a_pattern_of_several_task_types_is_also_given_type_by_type_early_and_late():
    def rnd(heat_skipped: int, cool_skipped: int) -> dict:
        return {"plain": counts({"heat": 10, "cool": 10},
                                {"heat": {"no_transform": heat_skipped}, "cool": {"no_transform": cool_skipped}})}

    runs = {"grpo": {0: [rnd(4, 2), rnd(2, 2)], 1: [rnd(6, 4), rnd(0, 2)]}}
    report = training_anatomy(runs, reference="grpo plain", late_from=1)
    by_type = report["outcomes"]["no_transform"]["grpo plain"]["by_type"]
    assert by_type["heat"] == pytest.approx({"early": 0.5, "late": 0.1})
    assert by_type["cool"] == pytest.approx({"early": 0.3, "late": 0.2})
    assert "by_type" not in report["outcomes"]["won"]["grpo plain"]
    assert "| grpo plain | 30.0% / 20.0% | 50.0% / 10.0% |" in markdown(report, "t", "n")
