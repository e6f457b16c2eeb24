"""What gets distilled, from which teacher, and which conditioned members take the PG term
(``distill.states / gate / teacher``, ``bank.conditioned_pg``): the options the internalization
benchmark compares."""

import dataclasses
import json
import logging

import pytest
import torch

from edge.algorithms.contribution import conditioned_pg_filter, group_contributions, scaffold_lead, scheduled_rho
from edge.algorithms.distill import (
    advice_shift,
    attach,
    distill_only_update,
    distill_samples,
    forward_kl_exact,
    in_plain_context,
    make_distill_loss,
    replayed,
    reverse_kl_exact,
    scheduled_coef,
    teacher_anchor_kl,
)
from edge.algorithms.grpo import UpdateConfig, grpo_samples, policy_update, unit_weights
from edge.config import parse_params
from edge.rollout import read_rollouts
from edge.train import train
from tests.test_paired_evaluation import ADVICE, control_params, tiny_actor, toy_groups


def toy_round():
    """The tiny policy, its toy groups (see ``toy_groups``) and their contributions."""
    actor = tiny_actor()
    trajectories = toy_groups(actor)
    return actor, trajectories, group_contributions(trajectories)


def teachers(samples) -> list[float]:
    return [x for s in samples for x in s.extras["teacher"]]


def steps_of(trajectories, keep):
    return {(t.traj_id, i) for t in trajectories if keep(t) for i in range(len(t.steps))}


def test_conditioned_states_are_distilled_without_the_experience_in_the_students_prompt():
    actor, trajectories, contributions = toy_round()
    helped = {c.group_id for c in contributions if c.credit > 0}
    samples = distill_samples(actor, trajectories, contributions, "exact", states="conditioned")
    expected = steps_of(trajectories, lambda t: t.conditioned and t.group_id in helped)
    assert samples and {(k.removesuffix("/without-experience"), i) for k, i in (s.key for s in samples)} == expected
    by_id = {t.traj_id: t for t in trajectories}
    for s in samples:
        traj, i = by_id[s.key[0].removesuffix("/without-experience")], s.key[1]
        # The student sees the state without the block; the collected decision saw it with the block.
        assert s.prompt_ids == actor.builder.prompt_ids(traj.state_at(i))
        assert s.prompt_ids != traj.steps[i].decision.prompt_ids
        assert len(s.extras["teacher"]) == len(s.candidate_ids) and s.extras["credit"] == pytest.approx(0.5)
    # Such a state is never a PG sample's twin: all of them join as distillation-only samples.
    _, only = attach(grpo_samples(trajectories)[0], samples)
    assert only == len(samples)
    both = distill_samples(actor, trajectories, contributions, "exact", states="both")
    plain = distill_samples(actor, trajectories, contributions, "exact", states="plain")
    assert len(both) == len(plain) + len(samples)
    with pytest.raises(ValueError, match="distill.states 'conditioned' needs distill.estimator 'exact'"):
        distill_samples(actor, trajectories, contributions, "sampled", states="conditioned")


def test_the_retrieved_gate_distills_every_group_that_retrieved_with_weight_one():
    actor, trajectories, contributions = toy_round()
    credited = distill_samples(actor, trajectories, contributions, "exact", gate="credit")
    retrieved = distill_samples(actor, trajectories, contributions, "exact", gate="retrieved")
    # Group 2 (Delta 0) is distilled only under the retrieved gate.
    assert {s.key for s in retrieved} == steps_of(trajectories, lambda t: not t.conditioned)
    assert {s.key for s in credited} < {s.key for s in retrieved}
    assert {s.extras["credit"] for s in retrieved} == {1.0}


def test_the_base_teacher_is_the_frozen_reference_not_the_live_weights():
    actor, trajectories, contributions = toy_round()
    current = distill_samples(actor, trajectories, contributions, "exact", teacher="current")
    base = distill_samples(actor, trajectories, contributions, "exact", teacher="base")
    # Before any update the reference is a copy of these weights: the same teacher.
    assert teachers(base) == pytest.approx(teachers(current), abs=1e-5)
    with torch.no_grad():
        for p in actor.policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    moved = distill_samples(actor, trajectories, contributions, "exact", teacher="current")
    still = distill_samples(actor, trajectories, contributions, "exact", teacher="base")
    assert teachers(still) == pytest.approx(teachers(base), abs=1e-5)
    assert teachers(moved) != pytest.approx(teachers(current), abs=1e-3)


def test_conditioned_pg_keeps_all_helpful_or_no_conditioned_members():
    actor, trajectories, contributions = toy_round()
    samples, _ = grpo_samples(trajectories)
    conditioned = {t.traj_id for t in trajectories if t.conditioned}
    assert conditioned_pg_filter(samples, trajectories, contributions, "all") == samples
    none = conditioned_pg_filter(samples, trajectories, contributions, "none")
    assert none and not {s.key[0] for s in none} & conditioned
    assert [s for s in samples if s.key[0] not in conditioned] == none
    # Groups 0 and 1 have Delta > 0, group 2 has no PG signal at all: "helpful" keeps every sample here.
    assert conditioned_pg_filter(samples, trajectories, contributions, "helpful") == samples
    for t in trajectories:  # now group 0's conditioned members do worse than its plain ones
        if t.group_id == trajectories[0].group_id:
            t.reward = t.score = float(not t.conditioned)
    contributions = group_contributions(trajectories)
    samples, _ = grpo_samples(trajectories)
    helpful = conditioned_pg_filter(samples, trajectories, contributions, "helpful")
    dropped = {t.traj_id for t in trajectories if t.conditioned and t.group_id == trajectories[0].group_id}
    assert {s.key[0] for s in samples} - {s.key[0] for s in helpful} == dropped


def test_conditioned_members_pg_in_the_plain_context_has_the_block_removed_and_ratio_one():
    actor = tiny_actor()
    trajectories = toy_groups(actor)
    samples, _ = grpo_samples(trajectories)
    conditioned = {t.traj_id: t for t in trajectories if t.conditioned}
    own = [s for s in samples if s.key[0] in conditioned]
    moved = in_plain_context(actor, samples, trajectories, keep_own=False)
    copies = [s for s in moved if s.key[0].endswith("/without-experience")]
    assert own and len(copies) == len(own) and len(moved) == len(samples)
    assert not {s.key[0] for s in moved} & set(conditioned)
    for c, s in zip(copies, own):
        traj = conditioned[s.key[0]]
        assert c.prompt_ids == actor.builder.prompt_ids(traj.state_at(s.key[1])) != s.prompt_ids
        assert c.advantage == s.advantage and c.chosen == s.chosen
    # The old log-probabilities are the plain context's at these weights: the first ratio is 1.
    from edge.algorithms.grpo import sample_logprobs
    with torch.inference_mode():
        now = sample_logprobs(actor, copies)
    assert [float(x) for lp in now for x in lp] == pytest.approx([x for c in copies for x in c.old_logp], abs=1e-5)
    both = in_plain_context(actor, samples, trajectories, keep_own=True)
    assert len(both) == len(samples) + len(copies)
    # A distillation state of the same step rides on the copy (one sample, both terms).
    distill = distill_samples(actor, trajectories, group_contributions(trajectories), "exact", states="conditioned")
    _, only = attach(moved, distill)
    assert only < len(distill)


def test_advice_shift_is_zero_without_a_block_effect_and_positive_with_one():
    actor = tiny_actor()
    trajectories = toy_groups(actor)
    shift = advice_shift(actor, trajectories)
    assert shift is not None and shift > 0
    for t in trajectories:
        if t.conditioned:
            t.experience = type(ADVICE)("", [])
    # An empty block renders as no block at all: the policy cannot be moved by it.
    assert advice_shift(actor, trajectories) == pytest.approx(0.0, abs=1e-6)


def distinct_teacher_round():
    """Distillation samples of both kinds of states from a teacher that differs from the student (another
    initialisation), so that there is a KL to close, and the update settings that close it."""
    teacher = tiny_actor(seed=1)
    trajectories = toy_groups(tiny_actor())
    distill = distill_samples(teacher, trajectories, group_contributions(trajectories), "exact", states="both",
                              gate="retrieved")
    cfg = UpdateConfig(lr=1e-3, epochs=4, minibatches=2, clip_low=0.2, clip_high=0.28, beta=0.0,
                       loss_agg="episode-mean", max_grad_norm=1.0)
    return distill, cfg


def test_distillation_on_conditioned_and_plain_states_moves_the_student_towards_the_teacher():
    distill, cfg = distinct_teacher_round()

    def kl_after(coef):
        student = tiny_actor()
        optimizer = torch.optim.AdamW(student.policy.model.parameters(), lr=cfg.lr)
        samples, _ = attach([], [type(s)(**vars(s)) for s in distill])
        policy_update(student, optimizer, samples, cfg, torch.Generator().manual_seed(0),
                      make_distill_loss(coef, "exact"))
        with torch.inference_mode():
            logps = student.action_logprobs([s.prompt_ids for s in distill], [s.candidate_ids for s in distill])
        return sum(float(reverse_kl_exact(lp, torch.tensor(s.extras["teacher"]))) for lp, s in zip(logps, distill))

    untouched = kl_after(0.0)
    assert untouched > 0.01 and kl_after(1.0) < 0.8 * untouched


def test_a_teacher_that_follows_progress_is_not_distilled_on_states_after_the_take_it_advises():
    """``distill.teacher_follows_progress``: every episode takes its task's object at its first step; the
    block is the find advice alone, so from the second step on the teacher has nothing left to say."""
    actor = tiny_actor()
    trajectories = toy_groups(actor)
    for t in trajectories:
        first = t.steps[0]
        take = f"take {t.task.spec['goal']['object']} 1 from countertop 1"
        t.steps[0] = dataclasses.replace(first, decision=dataclasses.replace(first.decision, action=take))
    contributions = group_contributions(trajectories)

    def distilled(**option):
        return distill_samples(actor, trajectories, contributions, "exact", states="both", gate="retrieved",
                               keep_teacher_prompt=True, **option)

    whole, trimmed = distilled(), distilled(teacher_follows_progress=True)
    assert {s.key[1] for s in trimmed} == {0}  # the first states only: the find advice still stands there
    assert len(whole) > len(trimmed) == len([s for s in whole if s.key[1] == 0])
    by_key = {s.key: s for s in whole}
    for s in trimmed:  # where the teacher keeps the block, it is the same teacher as without the option
        assert s.extras["teacher_prompt"] == by_key[s.key].extras["teacher_prompt"]
        assert s.extras["teacher"] == pytest.approx(by_key[s.key].extras["teacher"])


@pytest.mark.parametrize("overrides", [
    {"distill": {"states": "both", "gate": "retrieved", "teacher": "base"}, "bank": {"conditioned_pg": "none"}},
    {"distill": {"states": "conditioned", "gate": "retrieved"}, "bank": {"conditioned_pg": "plain"}},
    {"distill": {"states": "both", "gate": "retrieved", "divergence": "forward"},
     "bank": {"conditioned_pg": "own-and-plain"}},
    {"distill": {"states": "both", "gate": "retrieved", "teacher_follows_progress": True, "anchor": 1.0},
     "bank": {"conditioned_pg": "own-and-plain"}},
])
def test_the_options_train_end_to_end_on_the_oracle_control(tmp_path, overrides):
    params = control_params(tmp_path, "edge-oracle-bank")
    params = parse_params(params.model_dump(mode="json") | {
        "distill": params.distill.model_dump(mode="json") | overrides["distill"],
        "bank": params.bank.model_dump(mode="json") | overrides["bank"]})
    run = train(params)
    metrics = json.loads((run.round_dir(1) / "train_metrics.json").read_text())
    assert metrics["distill_samples"] > 0 and metrics["advice_shift_kl"] is not None
    # The conditioned members' states, seen without the block, join as distillation-only samples.
    assert metrics["distill_only_samples"] > 0


def test_the_anchor_holds_the_advised_outputs_while_the_plain_ones_still_move_towards_the_teacher():
    actor, trajectories, contributions = toy_round()
    distill = distill_samples(actor, trajectories, contributions, "exact", gate="retrieved",
                              keep_teacher_prompt=True)
    assert distill and all(s.extras["teacher_prompt"] != s.prompt_ids for s in distill)
    cfg = UpdateConfig(lr=3e-3, epochs=4, minibatches=2, clip_low=0.2, clip_high=0.28, beta=0.0,
                       loss_agg="episode-mean", max_grad_norm=1.0)

    def after(anchor):
        """(student's KL to the teacher, the advised outputs' drift from it) after a distillation-only update."""
        live = tiny_actor()  # the same initialisation as the actor that made the teacher
        # Plain SGD: the KL is small at the start, and Adam would scale its noise up to steps of size lr.
        optimizer = torch.optim.SGD(live.policy.model.parameters(), lr=cfg.lr)
        samples, _ = attach([], [dataclasses.replace(s, extras=dict(s.extras)) for s in distill])
        stats = policy_update(live, optimizer, samples, cfg, torch.Generator().manual_seed(0),
                              make_distill_loss(3.0, "exact", anchor, live))
        with torch.inference_mode():
            plain = live.action_logprobs([s.prompt_ids for s in distill], [s.candidate_ids for s in distill])
            advised = live.action_logprobs([s.extras["teacher_prompt"] for s in distill],
                                           [s.candidate_ids for s in distill])
        teacher = [torch.tensor(s.extras["teacher"]) for s in distill]
        return (sum(float(reverse_kl_exact(p, t)) for p, t in zip(plain, teacher)),
                sum(float(teacher_anchor_kl(t, a)) for t, a in zip(teacher, advised)), stats)

    with torch.inference_mode():
        start = actor.action_logprobs([s.prompt_ids for s in distill], [s.candidate_ids for s in distill])
    before = sum(float(reverse_kl_exact(lp, torch.tensor(s.extras["teacher"]))) for lp, s in zip(start, distill))
    free_kl, free_drift, free_stats = after(0.0)
    held_kl, held_drift, held_stats = after(3.0)
    assert "anchor_kl" not in free_stats and held_stats["anchor_kl"] > 0
    # Unanchored, the two contexts meet: the advised one moves about as far as the whole gap was. Anchored,
    # it stays at the teacher, and the plain context still moves towards it.
    assert free_kl < 0.5 * before and free_drift > 0.5 * before
    assert held_drift < 0.1 * free_drift and held_kl < 0.8 * before


def test_the_forward_kl_raises_an_action_the_student_neglects_faster_than_the_reverse_kl():
    # The teacher favours action 2, which the student almost never takes (an advised place the plain policy
    # neglects). One equal gradient step on the logits under each divergence.
    teacher = torch.log(torch.tensor([0.3, 0.1, 0.6]))
    start = torch.tensor([3.0, 1.0, -3.0])
    student = torch.log_softmax(start, 0)
    assert float(forward_kl_exact(student, teacher)) == pytest.approx(
        float((teacher.exp() * (teacher - student)).sum()), rel=1e-6)
    assert float(forward_kl_exact(teacher, teacher)) == pytest.approx(0.0, abs=1e-7)

    def neglected_after_step(divergence):
        logits = start.clone().requires_grad_(True)
        divergence(torch.log_softmax(logits, 0), teacher).backward()
        with torch.no_grad():
            return float(torch.softmax(logits - 0.5 * logits.grad, 0)[2])

    before = float(student.exp()[2])
    assert neglected_after_step(forward_kl_exact) > 3 * (neglected_after_step(reverse_kl_exact) - before) + before


def test_the_forward_divergence_trains_the_student_and_reports_the_reverse_kl(tmp_path):
    distill, cfg = distinct_teacher_round()
    student = tiny_actor()
    with torch.inference_mode():
        start = student.action_logprobs([s.prompt_ids for s in distill], [s.candidate_ids for s in distill])
    targets = [torch.tensor(s.extras["teacher"]) for s in distill]
    forward_before = sum(float(forward_kl_exact(lp, t)) for lp, t in zip(start, targets))
    optimizer = torch.optim.AdamW(student.policy.model.parameters(), lr=cfg.lr)
    samples, _ = attach([], [dataclasses.replace(s, extras=dict(s.extras)) for s in distill])
    stats = policy_update(student, optimizer, samples, cfg, torch.Generator().manual_seed(0),
                          make_distill_loss(1.0, "exact", divergence="forward"))
    with torch.inference_mode():
        end = student.action_logprobs([s.prompt_ids for s in distill], [s.candidate_ids for s in distill])
    assert sum(float(forward_kl_exact(lp, t)) for lp, t in zip(end, targets)) < 0.8 * forward_before
    assert stats["optimizer_steps"] > 0
    # The hook on the starting outputs: the loss is the forward KL, the reported KL the reverse one (one
    # measure of the gap whichever divergence is trained; the two differ here by about 1e-3 relative).
    ones = [1.0] * len(distill)
    loss, reported = make_distill_loss(1.0, "exact", divergence="forward")(distill, start, start, ones)
    assert float(loss) == pytest.approx(forward_before, rel=1e-5)
    assert reported["distill_loss"] == pytest.approx(forward_before, rel=1e-5)
    assert reported["distill_kl"] == pytest.approx(sum(float(reverse_kl_exact(lp, t)) for lp, t in zip(start, targets)),
                                                   rel=1e-5)
    with pytest.raises(ValueError, match="forward.*needs distill.estimator 'exact'"):
        make_distill_loss(1.0, "sampled", divergence="forward")
    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    raw["distill"] |= {"divergence": "forward", "estimator": "sampled"}
    with pytest.raises(ValueError, match="distill.divergence: forward .* needs distill.estimator: exact .got "
                                         "estimator: sampled"):
        parse_params(raw)
    raw["distill"] |= {"estimator": "exact", "coef": 0.0}
    with pytest.raises(ValueError, match="distill.divergence acts on the distillation term"):
        parse_params(raw)


def test_the_anchor_needs_the_exact_estimator_and_the_current_teacher(tmp_path):
    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    raw["distill"] |= {"anchor": 1.0, "teacher": "base"}
    with pytest.raises(ValueError, match="distill.anchor .* needs distill.estimator: exact and distill.teacher: "
                                         "current .got estimator: exact, teacher: base"):
        parse_params(raw)
    raw["distill"] |= {"teacher": "current", "gate": "retrieved"}
    run = train(parse_params(raw | {"bank": raw["bank"] | {"conditioned_pg": "own-and-plain"}}))
    metrics = json.loads((run.round_dir(1) / "train_metrics.json").read_text())
    # Round 1's teacher is round 0's update: the advised outputs drifted from it during the update.
    assert metrics["distill_samples"] > 0 and metrics["anchor_kl"] > 0


def test_the_decaying_coefficient_falls_linearly_to_zero_and_a_run_distils_nothing_once_it_has(tmp_path):
    assert [scheduled_coef(1.5, None, k) for k in (0, 3, 40)] == [1.5, 1.5, 1.5]
    decaying = [scheduled_coef(2.0, 8, k) for k in range(10)]
    assert decaying[0] == 2.0 and decaying[8:] == [0.0, 0.0]
    assert all(a > b for a, b in zip(decaying[:8], decaying[1:9]))
    # Rounds 1-7, where a learned bank (empty in round 0) distils: the default's total pull.
    assert sum(decaying[1:8]) / 7 == pytest.approx(1.0)

    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    raw["distill"] |= {"coef": 0.0, "coef_decay_rounds": 3}
    with pytest.raises(ValueError, match="distill.coef_decay_rounds acts on the distillation term"):
        parse_params(raw)
    # Every group that retrieved is distilled (gate: retrieved), so round 0 distils whatever the credit.
    raw["distill"] |= {"coef": 2.0, "coef_decay_rounds": 1, "gate": "retrieved"}
    run = train(parse_params(raw))
    first, second = (json.loads((run.round_dir(k) / "train_metrics.json").read_text()) for k in (0, 1))
    assert first["distill_coef"] == 2.0 and first["distill_samples"] > 0 and first["distill_weight"] > 0
    assert second["distill_coef"] == 0.0 and second["distill_samples"] == 0 and second["distill_weight"] == 0


def test_the_amplified_teacher_moves_alpha_times_as_far_as_the_advice_and_the_anchor_holds_the_advised_outputs():
    actor, trajectories, contributions = toy_round()
    spec = distill_samples(actor, trajectories, contributions, "exact", states="both", gate="retrieved",
                           keep_teacher_prompt=True)
    amplified = distill_samples(actor, trajectories, contributions, "exact", states="both", gate="retrieved",
                                keep_teacher_prompt=True, guidance_scale=3.0)
    assert spec and [s.key for s in amplified] == [s.key for s in spec] and "advised" not in spec[0].extras
    with torch.inference_mode():
        plain = actor.action_logprobs([s.prompt_ids for s in spec], [s.candidate_ids for s in spec])
    shifted = 0
    for s, a, p in zip(spec, amplified, plain):
        advised = torch.tensor(s.extras["teacher"])
        # The anchor's target stays the advised outputs; the teacher is softmax(p + 3 (advised - p)).
        assert a.extras["advised"] == pytest.approx(s.extras["teacher"], abs=1e-6)
        expected = torch.log_softmax(p + 3.0 * (advised - p), dim=-1)
        assert a.extras["teacher"] == pytest.approx(expected.tolist(), abs=1e-5)
        assert float(torch.tensor(a.extras["teacher"]).exp().sum()) == pytest.approx(1.0, abs=1e-5)
        # Further from the plain outputs than the advised ones are, wherever the advice moves them at all.
        if float(reverse_kl_exact(advised, p)) > 1e-4:
            shifted += 1
            assert float(reverse_kl_exact(torch.tensor(a.extras["teacher"]), p)) > float(reverse_kl_exact(advised, p))
    assert shifted > 0
    # The anchor of an amplified round holds the advised outputs, not the amplified teacher: with the
    # distillation term off, its loss is the spec teacher's anchor loss.
    live = tiny_actor()
    with torch.no_grad():  # live weights away from the round's, so that the anchor has something to hold
        for p in live.policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    full = live.action_logprobs([s.prompt_ids for s in spec], [s.candidate_ids for s in spec])
    weights = [1.0] * len(spec)
    anchor_only = make_distill_loss(0.0, "exact", 1.0, live)
    amplified_loss, amplified_stats = anchor_only(amplified, [f[:1] for f in full], full, weights)
    spec_loss, spec_stats = anchor_only(spec, [f[:1] for f in full], full, weights)
    assert float(amplified_loss.detach()) == pytest.approx(float(spec_loss.detach()), rel=1e-5)
    assert amplified_stats["anchor_kl"] == pytest.approx(spec_stats["anchor_kl"], rel=1e-5)
    assert amplified_stats["anchor_kl"] > 0
    with pytest.raises(ValueError, match="guidance_scale 2.0 amplifies .* needs distill.estimator 'exact'"):
        distill_samples(actor, trajectories, contributions, "sampled", guidance_scale=2.0)


def test_the_amplified_teacher_is_refused_without_its_estimator_or_distillation(tmp_path):
    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    with pytest.raises(ValueError, match="guidance_scale amplifies the teacher .* needs distill.estimator: exact"):
        parse_params(raw | {"distill": raw["distill"] | {"guidance_scale": 2.0, "estimator": "sampled"}})
    with pytest.raises(ValueError, match="guidance_scale acts on the distillation term.* or guidance_scale: 1.0"):
        parse_params(raw | {"distill": raw["distill"] | {"guidance_scale": 2.0, "coef": 0.0}})
    with pytest.raises(ValueError, match="guidance_scale"):
        parse_params(raw | {"distill": raw["distill"] | {"guidance_scale": 0.5}})
    run = train(parse_params(raw | {"distill": raw["distill"] | {"guidance_scale": 2.0, "gate": "retrieved"}}))
    metrics = json.loads((run.round_dir(1) / "train_metrics.json").read_text())
    assert metrics["distill_samples"] > 0


def test_extra_distillation_epochs_take_their_steps_on_the_distilled_states_alone_and_close_more_kl():
    # A teacher from another initialisation, so that there is a KL to close; PG samples beside it.
    teacher = tiny_actor(seed=1)
    trajectories = toy_groups(tiny_actor())
    contributions = group_contributions(trajectories)
    distill = distill_samples(teacher, trajectories, contributions, "exact", gate="retrieved")
    cfg = UpdateConfig(lr=1e-3, epochs=1, minibatches=2, clip_low=0.2, clip_high=0.28, beta=0.0,
                       loss_agg="episode-mean", max_grad_norm=1.0)

    def after(extra_epochs):
        student = tiny_actor()
        optimizer = torch.optim.AdamW(student.policy.model.parameters(), lr=cfg.lr)
        pg, _ = grpo_samples(trajectories)
        samples, _ = attach(pg, [dataclasses.replace(s, extras=dict(s.extras)) for s in distill])
        generator = torch.Generator().manual_seed(0)
        loss = make_distill_loss(1.0, "exact")
        main = policy_update(student, optimizer, samples, cfg, generator, loss)
        extra = distill_only_update(student, optimizer, samples, cfg, extra_epochs, generator, loss)
        with torch.inference_mode():
            logps = student.action_logprobs([s.prompt_ids for s in distill], [s.candidate_ids for s in distill])
        kl = sum(float(reverse_kl_exact(lp, torch.tensor(s.extras["teacher"]))) for lp, s in zip(logps, distill))
        return kl, main, extra, samples

    base_kl, base_main, _, _ = after(0)
    more_kl, more_main, extra, samples = after(3)
    # The shared update is the same either way; the extra phase is 3 epochs x 2 minibatches of distillation.
    assert more_main == base_main and extra["optimizer_steps"] == 6
    # Every sample of the extra phase carries the teacher: the term's weights sum to one in each minibatch.
    assert extra["pg_loss"] == 0.0 and extra["distill_weight"] == pytest.approx(1.0)
    assert more_kl < 0.8 * base_kl
    # The update's own samples keep their PG term (the extra phase works on copies).
    assert sum(s.pg for s in samples) == len(grpo_samples(trajectories)[0]) > 0


def test_the_extra_steps_learning_rate_scale_moves_the_weights_less_and_is_restored_after():
    teacher = tiny_actor(seed=1)
    trajectories = toy_groups(tiny_actor())
    distill = distill_samples(teacher, trajectories, group_contributions(trajectories), "exact", gate="retrieved")
    cfg = UpdateConfig(lr=1e-3, epochs=1, minibatches=2, clip_low=0.2, clip_high=0.28, beta=0.0,
                       loss_agg="episode-mean", max_grad_norm=1.0)

    def displacement(lr_scale):
        student = tiny_actor()
        before = [p.detach().clone() for p in student.policy.model.parameters()]
        optimizer = torch.optim.AdamW(student.policy.model.parameters(), lr=cfg.lr)
        samples = [dataclasses.replace(s, extras=dict(s.extras)) for s in distill]
        extra = distill_only_update(student, optimizer, samples, cfg, 2, torch.Generator().manual_seed(0),
                                    make_distill_loss(1.0, "exact"), lr_scale=lr_scale)
        assert extra["optimizer_steps"] == 4 and [g["lr"] for g in optimizer.param_groups] == [cfg.lr]
        return sum(float((p.detach() - b).norm()) for p, b in zip(student.policy.model.parameters(), before))

    full, quarter = displacement(1.0), displacement(0.25)
    # Adam's steps scale with the rate: a quarter of it moves the weights a fraction as far (0.15 here).
    assert 0.05 * full < quarter < 0.4 * full


def test_extra_distillation_epochs_run_end_to_end_and_need_distillation(tmp_path):
    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    with pytest.raises(ValueError, match="distill.extra_epochs acts on the distillation term, which distill.coef: 0"):
        parse_params(raw | {"distill": raw["distill"] | {"coef": 0.0, "extra_epochs": 1}})
    with pytest.raises(ValueError, match="distill.extra_lr_scale sets the learning rate .* which is 0"):
        parse_params(raw | {"distill": raw["distill"] | {"extra_lr_scale": 0.5}})
    with pytest.raises(ValueError, match="distill.anchor acts on the distillation term"):
        parse_params(raw | {"distill": raw["distill"] | {"coef": 0.0, "anchor": 1.0}})
    params = parse_params(raw | {"distill": raw["distill"] | {"extra_epochs": 2, "gate": "retrieved", "anchor": 1.0}})
    run = train(params)
    for k in range(params.train.rounds):
        metrics = json.loads((run.round_dir(k) / "train_metrics.json").read_text())
        assert {"distill_extra_steps", "distill_extra_kl", "distill_extra_anchor_kl", "anchor_kl"} <= set(metrics)
    # Every group retrieves the oracle's advice and is distilled (gate: retrieved): two more epochs of the
    # update's minibatches over the distilled states.
    metrics = json.loads((run.round_dir(1) / "train_metrics.json").read_text())
    assert metrics["distill_samples"] > 0
    assert metrics["distill_extra_steps"] == 2 * min(params.grpo.minibatches, metrics["distill_samples"])
    assert metrics["distill_extra_kl"] > 0 and metrics["distill_extra_anchor_kl"] > 0


def test_a_replayed_state_joins_as_distillation_only_even_where_its_task_is_drawn_again():
    actor, trajectories, contributions = toy_round()
    distill = distill_samples(actor, trajectories, contributions, "exact", states="plain", gate="retrieved")
    pg, _ = grpo_samples(trajectories)
    # This round's states attach to their PG twins; the same states replayed from round 4 attach to none.
    _, only_now = attach([dataclasses.replace(s, extras=dict(s.extras)) for s in pg], distill)
    _, only_replayed = attach([dataclasses.replace(s, extras=dict(s.extras)) for s in pg], replayed(distill, 4))
    assert only_replayed == len(distill) > only_now
    assert {s.key for s in replayed(distill, 4)}.isdisjoint({s.key for s in pg})
    assert teachers(replayed(distill, 4)) == teachers(distill)


def test_replayed_rounds_add_the_previous_rounds_states_at_the_same_optimizer_steps(tmp_path):
    raw = control_params(tmp_path, "edge-oracle-bank", rounds=3).model_dump(mode="json")
    with pytest.raises(ValueError, match="distill.replay_rounds acts on the distillation term"):
        parse_params(raw | {"distill": raw["distill"] | {"coef": 0.0, "replay_rounds": 1}})
    params = parse_params(raw | {"distill": raw["distill"] | {"replay_rounds": 1, "gate": "retrieved",
                                                              "states": "both", "normalize": "separate"}})
    run = train(params)
    metrics = [json.loads((run.round_dir(k) / "train_metrics.json").read_text()) for k in range(3)]
    assert metrics[0]["distill_replayed_samples"] == 0  # nothing before round 0
    for k in (1, 2):
        # Every group retrieves and is distilled (gate: retrieved), so the states of round k-1 alone come back
        # (one round replayed), each as a distillation-only sample, and the update keeps GRPO's steps.
        assert metrics[k]["distill_replayed_samples"] == metrics[k - 1]["distill_samples"] > 0
        assert metrics[k]["distill_only_samples"] >= metrics[k]["distill_replayed_samples"]
        assert metrics[k]["optimizer_steps"] == params.grpo.epochs * params.grpo.minibatches


def sgd_updated_weights(samples, cfg, extra_loss, carries) -> list[torch.Tensor]:
    """A fresh tiny actor's weights after one ``policy_update`` on ``samples`` (the same stream every call)."""
    student = tiny_actor()
    # Plain SGD: Adam would blow float noise in near-zero gradients up to steps of size lr.
    optimizer = torch.optim.SGD(student.policy.model.parameters(), lr=cfg.lr)
    policy_update(student, optimizer, samples, cfg, torch.Generator().manual_seed(0), extra_loss, carries)
    return [p.detach().clone() for p in student.policy.model.parameters()]


def test_separate_normalisation_keeps_the_pg_term_exactly_grpos_beside_distillation_only_states():
    actor, trajectories, contributions = toy_round()
    cfg = UpdateConfig(lr=1e-2, epochs=1, minibatches=2, clip_low=0.2, clip_high=0.28, beta=0.0,
                       loss_agg="episode-mean", max_grad_norm=1.0)
    distill = distill_samples(actor, trajectories, contributions, "exact", states="both", gate="retrieved")

    def edge_samples():
        return attach(grpo_samples(trajectories)[0], [type(s)(**vars(s))
                                                      for s in distill])[0]

    def carries(s):
        return "teacher" in s.extras

    assert sum(not s.pg for s in edge_samples()) > 0  # there are distillation-only states
    # lambda_d = 0, separate: the distillation-only states no longer dilute the PG term.
    shared = sgd_updated_weights(edge_samples(), cfg, make_distill_loss(0.0, "exact"), None)
    separate = sgd_updated_weights(edge_samples(), cfg, make_distill_loss(0.0, "exact"), carries)
    assert any(not torch.equal(a, b) for a, b in zip(shared, separate))
    # Against GRPO on its own samples the minibatches differ (more samples are shuffled), so compare
    # one minibatch holding everything: then separate normalisation gives GRPO's step exactly.
    cfg.minibatches = 1
    grpo_one = sgd_updated_weights(grpo_samples(trajectories)[0], cfg, None, None)
    separate_one = sgd_updated_weights(edge_samples(), cfg, make_distill_loss(0.0, "exact"), carries)
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(grpo_one, separate_one))


def test_pg_normalisation_is_shared_without_distillation_only_states_and_weighs_them_as_pg_states_with():
    actor, trajectories, contributions = toy_round()
    cfg = UpdateConfig(lr=1e-2, epochs=1, minibatches=1, clip_low=0.2, clip_high=0.28, beta=0.0,
                       loss_agg="episode-mean", max_grad_norm=1.0)

    def edge_samples(states):
        distill = distill_samples(actor, trajectories, contributions, "exact", states=states, gate="retrieved")
        return attach(grpo_samples(trajectories)[0], distill)[0]

    def run(samples, carries):
        """The weights after one update, and the distillation weights the update handed to the loss."""
        seen = []
        distill_loss = make_distill_loss(0.5, "exact")

        def extra(chunk, units, full, weights):
            seen.extend((s.pg, w) for s, w in zip(chunk, weights) if "teacher" in s.extras)
            return distill_loss(chunk, units, full, weights)

        return sgd_updated_weights(samples, cfg, extra, carries), seen

    def pg(s):
        return s.pg

    def units(kept):
        return sum(unit_weights(s.n_units, s.episode_length, cfg.loss_agg) * s.n_units for s in kept)

    # Every distilled state a PG sample's (as under the credit gate with states: plain): pg is the spec's
    # shared normalisation exactly.
    attached = [s for s in edge_samples("plain") if s.pg]
    assert any("teacher" in s.extras for s in attached)
    assert all(torch.equal(a, b) for a, b in zip(run(attached, None)[0], run(attached, pg)[0]))
    # With distillation-only states, shared spreads the unit weights over them too; pg weighs every distilled
    # state as a PG state, so each weight is larger by all units / the PG samples' units, and the pull grows
    # with the states where shared would thin the PG term.
    both = edge_samples("both")
    _, shared_weights = run(both, None)
    _, pg_weights = run(both, pg)
    assert any(not on_pg for on_pg, _ in pg_weights)  # the distillation-only states are among them
    scale = units(both) / units([s for s in both if s.pg])
    assert scale > 1
    assert [w for _, w in pg_weights] == pytest.approx([w * scale for _, w in shared_weights])


def test_the_scaffolds_lead_and_the_withdrawn_share():
    group = {"success_conditioned": 0.75, "success_plain": 0.25}
    assert scaffold_lead([group, {"success_conditioned": 0.25, "success_plain": 0.25}]) == pytest.approx(0.5)
    assert scaffold_lead([{"success_conditioned": 0.0, "success_plain": 0.5}]) is None  # no conditioned success
    assert scaffold_lead([]) is None  # nothing retrieved
    assert scaffold_lead([{"success_conditioned": 0.5, "success_plain": 0.75}]) == 0.0  # plain ahead: no lead
    # Not measured yet, or no lead to start from: the full share.
    assert scheduled_rho(0.5, 0.25, [None, None]) == 0.5
    assert scheduled_rho(0.5, 0.25, [0.0, 0.4]) == 0.5
    # The lead halved since the first measured round: half way down to rho_min; caught up: rho_min.
    assert scheduled_rho(0.5, 0.25, [None, 0.8, 0.6, 0.4]) == pytest.approx(0.375)
    assert scheduled_rho(0.5, 0.25, [0.8, 0.0]) == pytest.approx(0.25)
    assert scheduled_rho(0.5, 0.25, [0.4, 0.9]) == 0.5  # never above rho


def test_rho_min_above_rho_is_refused_naming_the_field(tmp_path):
    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    raw["bank"] |= {"rho_schedule": "withdraw", "rho": 0.25, "rho_min": 0.5}
    with pytest.raises(ValueError, match=r"rho_min \(0\.5\) must not exceed rho \(0\.25\)"):
        parse_params(raw)


def test_the_withdrawal_schedule_sets_each_rounds_conditioned_members(tmp_path, monkeypatch):
    seen = []

    def schedule(rho, rho_min, leads):
        seen.append(len(leads))
        return 0.75 if leads else rho

    monkeypatch.setattr("edge.train.scheduled_rho", schedule)
    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    raw["bank"] |= {"rho_schedule": "withdraw", "rho_min": 0.25}
    run = train(parse_params(raw))
    assert seen == [0, 1]  # round k reads the leads of rounds 0..k-1
    for k, members in [(0, 2), (1, 3)]:
        assert json.loads((run.round_dir(k) / "collect.json").read_text())["rho"] == [0.5, 0.75][k]
        for t in read_rollouts(run.round_dir(k) / "rollouts.parquet"):
            assert t.conditioned == (t.member < members)


def test_a_handed_off_scaffold_trains_with_grpos_update_from_its_round_on(tmp_path, monkeypatch):
    from edge.policy.actor import Actor
    from edge.policy.model import load_policy
    from edge.train import Run, rollout, stage_seed

    def graded(*args, **kwargs):  # an untrained policy wins nothing: rewards by member give every group signal
        trajectories = rollout(*args, **kwargs)
        for t in trajectories:
            t.reward = t.score = 1.0 / (1 + t.member)
            t.won = t.member == 0
        return trajectories

    monkeypatch.setattr("edge.train.rollout", graded)
    raw = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    # o23's update, which has a term of its own for every kind of state, handed off after round 0.
    raw["bank"] |= {"rho_schedule": "handoff", "handoff_round": 1, "conditioned_pg": "own-and-plain"}
    raw["distill"] |= {"anchor": 1.0, "states": "both"}
    params = parse_params(raw)
    run = train(params)
    rounds = [json.loads((run.round_dir(k) / "train_metrics.json").read_text()) for k in range(2)]
    assert [json.loads((run.round_dir(k) / "collect.json").read_text())["rho"] for k in range(2)] == [0.5, 0.0]
    assert any(t.conditioned for t in run.rollouts(0)) and rounds[0]["distill_samples"] > 0
    assert not any(t.conditioned or t.experience for t in run.rollouts(1))
    assert rounds[1]["distill_samples"] == 0 and rounds[1]["train_success_conditioned"] is None
    assert rounds[1]["samples"] > 0
    # Round 1's weights are GRPO's update of round 0's, on round 1's episodes, with its minibatches and seed.
    start = Run.open(params)
    policy, optimizer = start.policy_for(1)
    g = params.grpo
    samples, _ = grpo_samples(run.rollouts(1), g.std_normalize)
    policy_update(Actor(policy), optimizer, samples,
                  UpdateConfig(g.lr, g.epochs, g.minibatches, g.clip_low, g.clip_high, g.beta, g.loss_agg,
                               g.max_grad_norm),
                  torch.Generator().manual_seed(stage_seed(params.seed, 1, "update")))
    trained = load_policy(params.policy, checkpoint=run.round_dir(1) / "checkpoint", seed=params.seed,
                          envs=[params.train.env])
    before = load_policy(params.policy, checkpoint=run.round_dir(0) / "checkpoint", seed=params.seed,
                         envs=[params.train.env])
    pairs = list(zip(policy.model.parameters(), trained.model.parameters()))
    assert all(torch.equal(a, b) for a, b in pairs)
    assert any(not torch.equal(a, b) for a, b in zip(before.model.parameters(), trained.model.parameters()))


def test_settings_a_method_never_reads_are_named_and_warned_about(caplog):
    from edge.config import ignored_settings, with_overrides
    from edge.train import Run

    changed = ["distill.anchor=1.0", "bank.rho=0.75", "bank.prune.min_uses=7", "grpo.lr=0.001"]
    assert ignored_settings(parse_params({})) == []
    grpo = with_overrides(parse_params({"train": {"method": "grpo", "base_checkpoint": None}}), changed)
    assert ignored_settings(grpo) == ["bank.rho", "bank.prune.min_uses", "distill.anchor"]
    no_distill = grpo.model_copy(update={"train": grpo.train.model_copy(update={"method": "edge-no-distill"})})
    assert ignored_settings(no_distill) == ["distill.anchor"]
    edge = grpo.model_copy(update={"train": grpo.train.model_copy(update={"method": "edge"})})
    assert ignored_settings(edge) == []  # EDGE reads every section
    # ... but one field of the bank's: what the oracle control shows.
    misled = with_overrides(edge, ["bank.oracle_advice=misleading"])
    assert ignored_settings(misled) == ["bank.oracle_advice"]
    oracle = misled.model_copy(update={"train": misled.train.model_copy(update={"method": "edge-oracle-bank"})})
    assert ignored_settings(oracle) == []
    assert ignored_settings(with_overrides(grpo, ["bank.oracle_advice=misleading"])) == [
        "bank.rho", "bank.oracle_advice", "bank.prune.min_uses", "distill.anchor"]
    with caplog.at_level(logging.WARNING):
        Run.check(grpo)
    assert "train.method grpo does not read bank.rho, bank.prune.min_uses, distill.anchor" in caplog.text

