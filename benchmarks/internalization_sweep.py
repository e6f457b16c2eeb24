"""Internalization on the oracle control: which distillation options make the plain policy keep what
perfect guidance teaches (issue 14); and whether the best of them also helps EDGE with its own bank.

Every configuration is `edge-oracle-bank` (every task retrieves the environment's true advice, so the
guidance is known to help) at the default budget with some options changed; each runs in its own
folder from the per-seed warm starts the learning benchmark uses, and is evaluated once, after its
last round, on the same 400 `household` test_seen tasks and streams as the benchmark's runs. So each
configuration is compared, seed by seed and task by task, with the benchmark's GRPO run and its
default oracle control (`--reference-runs`, default benchmarks/runs) without running those again.
Configurations named ``e…`` are ``edge`` (the learned bank) instead, compared with the benchmark's
default EDGE run (e0 is that run). Those named ``m…`` are the oracle control with its advice made false
(``bank.oracle_advice: misleading``): is bad behaviour distilled too?
With `--budget 2` (the longer view) GRPO and the default oracle control run again, at twice the rounds.

    .venv/bin/python benchmarks/internalization_sweep.py [--seed 0 --seed 1] [--only o1] [--jobs 2] [--tag xeon]

On a machine with no runs yet, `--make-grpo` first makes GRPO's reference runs (and the warm starts), and
`--make-oracle` the default oracle control's (o0's), which "− default" compares against.
A row measured on another machine is never written over (float kernels differ between CPUs): the
script stops before running anything and asks for `--tag`, which writes this machine's row as NAME@TAG.

Resumable: finished runs are skipped. Writes benchmarks/results/internalization.{md,json}: per
configuration the final plain success, success with the advice, retention, plain − GRPO and plain −
the default oracle control (mean over seeds with the Student-t interval; per seed paired by task), and
per round the training groups' plain / conditioned success, the distillation KL and the advice shift
(KL between the policy with and without the advice on the plain members' states).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from statistics import fmean

from filelock import FileLock

from edge.benchmarking.learning import (
    LearningBenchConfig,
    paired_difference,
    read_run,
    run_benchmark,
    run_name,
    signed_points,
    summarise,
)
from edge.benchmarking.machine import describe_machine
from edge.runs import run_status

ROOT = Path("benchmarks/sweep/internalization")
BASES = Path("benchmarks/sweep/bases")
OUT = Path("benchmarks/results")
ORACLE = "edge-oracle-bank"
GRPO = "grpo"
"""The learning benchmark's GRPO runs: a method, and read (``runs_of``) as if it were a configuration."""
SPLIT = "test_seen"

E26 = ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
       "bank.subjects=seen-and-type-steps", "bank.prune.rules=[stale,size_cap]", "bank.condition_when=plain_failed",
       "bank.advantage_baseline=plain"]
"""Row e26's overrides: the learned bank's options measured best so far, which the planted-entry rows build on."""


O17 = ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0"]
"""Row o17's overrides: the conditioned members' PG in both contexts with the teacher anchored, the scaffold on in
every round; o43, o44 and o45 change it."""

O31 = ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both", "bank.rho_schedule=handoff",
       "bank.handoff_round=4", "bank.condition_when=plain_failed"]
"""Row o31's overrides: the oracle control's best ten-seed row (+4.1 [0.8, 7.4] over GRPO), which o33, o36 and o37
change."""


O45 = [*O17, "distill.normalize=pg", "distill.replay_rounds=3"]
"""Row o45's overrides: the oracle control's best ten-seed row on the Xeon (+7.8 [3.2, 12.5] over GRPO), which
o46 and o47 change."""


def e26_without(*fields: str) -> list[str]:
    """E26 less the overrides of ``fields`` (``section.key``), which then keep params.yaml's values."""
    return [o for o in E26 if o.split("=")[0] not in fields]


E48 = [*e26_without("bank.condition_when", "bank.advantage_baseline"), *O45]
"""Row e48's overrides: o45's update on e22's bank options, which e49 starts from the demonstrations."""


# name: (what it asks, overrides on top of params.yaml). o0 is the default (the spec's choices); the
# o… configurations are the oracle control, the e… ones EDGE with its own bank, the m… ones the oracle control
# with false advice.
CONFIGS = {
    "o0": ("the spec: plain states of credited groups, weight c(x); current teacher", []),
    "o1": ("plain states of every group that retrieved, weight 1",
           ["distill.gate=retrieved"]),
    "o2": ("the conditioned members' states without the advice, every group",
           ["distill.gate=retrieved", "distill.states=conditioned"]),
    "o3": ("both kinds of states, every group",
           ["distill.gate=retrieved", "distill.states=both"]),
    "o4": ("scaffolded RL only: lambda_d = 0 (what distillation adds)",
           ["distill.coef=0.0"]),
    "o5": ("the conditioned members' PG in the plain context (block removed), not their own",
           ["bank.conditioned_pg=plain"]),
    "o6": ("the conditioned members' PG in both contexts",
           ["bank.conditioned_pg=own-and-plain"]),
    "o7": ("no PG on the conditioned members",
           ["bank.conditioned_pg=none"]),
    "o8": ("a fixed teacher: the warm-started base with the advice",
           ["distill.teacher=base"]),
    "o9": ("o1 with the terms normalised separately (PG exactly GRPO's average)",
           ["distill.gate=retrieved", "distill.normalize=separate"]),
    "o10": ("o3 with the terms normalised separately",
            ["distill.gate=retrieved", "distill.states=both", "distill.normalize=separate"]),
    "o11": ("the conditioned members' PG only in groups where the advice helped (Delta > 0)",
            ["bank.conditioned_pg=helpful"]),
    "o12": ("o6, distilled on the conditioned members' states too (credited groups, weight c(x))",
            ["bank.conditioned_pg=own-and-plain", "distill.states=both"]),
    "o13": ("o6, the scaffold withdrawn as the plain members catch up (rho 0.5 down to 0.25)",
            ["bank.conditioned_pg=own-and-plain", "bank.rho_schedule=withdraw"]),
    "o14": ("o6 with lambda_d = 3 (a stronger pull towards the teacher)",
            ["bank.conditioned_pg=own-and-plain", "distill.coef=3.0"]),
    "o15": ("o6 with lambda_d = 0.3 (a weaker pull, as peers keep RL primary)",
            ["bank.conditioned_pg=own-and-plain", "distill.coef=0.3"]),
    "o16": ("o14 with the teacher anchored (distill.anchor = 3): the advised outputs held at the round's teacher "
            "while the plain ones are pulled to it",
            ["bank.conditioned_pg=own-and-plain", "distill.coef=3.0", "distill.anchor=3.0"]),
    "o17": ("o6 with the teacher anchored (distill.anchor = 1)", O17),
    "o18": ("o17 with two more epochs of distillation alone a round (distill.extra_epochs = 2): up to 12 "
            "optimizer steps a round beside GRPO's 6, a declared extra budget",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.extra_epochs=2"]),
    "o19": ("o6 with two more epochs of distillation alone a round, unanchored (the extra budget of o18)",
            ["bank.conditioned_pg=own-and-plain", "distill.extra_epochs=2"]),
    "o20": ("o18 with the extra steps at a quarter of the learning rate (distill.extra_lr_scale = 0.25): the "
            "12 extra steps move the weights about as far as 3 at the full rate",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.extra_epochs=2",
             "distill.extra_lr_scale=0.25"]),
    "o21": ("o17 with six of each group's eight members conditioned on the advice instead of four "
            "(bank.rho = 0.75): more of the scaffold's episodes, each also reinforced in the plain context",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "bank.rho=0.75"]),
    "o22": ("o17 with two of each group's eight members conditioned on the advice instead of four "
            "(bank.rho = 0.25): more of the plain policy's own episodes",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "bank.rho=0.25"]),
    "o23": ("o17 distilled on the conditioned members' states too, the block removed (distill.states = both): "
            "the plain student also learns the teacher's choice where the block led the agent, e.g. holding the "
            "object before the type's step, which the plain members reach less often",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both"]),
    "o24": ("o23 with two of each group's eight members conditioned (bank.rho = 0.25): the two options that each "
            "raised retention, o22's fewer conditioned members (92.7% on the AVX-512 machine) and o23's distillation "
            "on the conditioned members' states (92.3% on the machine without), together",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both", "bank.rho=0.25"]),
    "o25": ("o23 with the block following the episode's progress (bank.block_follows_progress): where the object "
            "lies leaves the block once it is in hand, the type's step once taken. With the advice o23's final policy "
            "heads a carried object to the target 4.5 points of share less often, to where such objects lie "
            "(step_probe_o23_place_xeon10.md), and wins 5.6 points fewer simple tasks",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.block_follows_progress=true"]),
    "o26": ("o23 handed off after round 3 (bank.rho_schedule = handoff, handoff_round = 4): rounds 4-7 retrieve "
            "nothing and take GRPO's update on the policy o23 trained. Is what the scaffold has built by round 3 kept "
            "once its own update stops, and do o23's later rounds add to it?",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.rho_schedule=handoff", "bank.handoff_round=4"]),
    "o27": ("o23 handed off after round 1 (bank.handoff_round = 2): how early the lead o26 keeps is made",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.rho_schedule=handoff", "bank.handoff_round=2"]),
    "o28": ("o26 with six of each group's eight members conditioned (bank.rho = 0.75) while the scaffold is on: "
            "o26 keeps the lead it has after round 3, so more of the advised episodes, reinforced in the plain "
            "context too, in the rounds that make the lead",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.rho_schedule=handoff", "bank.handoff_round=4", "bank.rho=0.75"]),
    "o29": ("o26 with every member conditioned (bank.rho = 1) while the scaffold is on: rounds 0-3 take the PG term "
            "on advised episodes only, in their own context and in the plain one (no group is split, so there is "
            "no Delta and nothing is distilled); then GRPO",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.rho_schedule=handoff", "bank.handoff_round=4", "bank.rho=1.0"]),
    "o30": ("o26 with the teacher amplified (distill.guidance_scale = 2): the target moves twice as far from the "
            "plain outputs as the advice moves them, because the advised network follows the advice weakly (before the "
            "object is found o23's puts 44.8% of the mass on the advised places, plain 34.9%, chance 32.4%)",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.rho_schedule=handoff", "bank.handoff_round=4", "distill.guidance_scale=2.0"]),
    "o31": ("o26 with the block shown only in the groups whose four plain members all failed (bank.condition_when = "
            "plain_failed), the others playing GRPO's group: the scaffold withdraws task by task as the plain policy "
            "learns, and the plain policy keeps GRPO's own episodes wherever they carry a signal (a split group has "
            "half as many), as Guide (Nath et al. 2025) adds guidance only where the policy fails",
            O31),
    "o32": ("o23 with the block shown only where the group's plain members all failed (o31 without the hand-off): "
            "does a scaffold that withdraws by itself need handing off?",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.condition_when=plain_failed"]),
    "o33": ("o31 with a split group's advantages measured against its plain members' mean (bank.advantage_baseline = "
            "plain): the plain members of a group shown the block lose no more than GRPO's would (an all-failed "
            "plain half carries nothing instead of being pushed down by the advised wins), and an advised episode, "
            "in its own context and in the plain one, is credited by how far it beat the plain policy",
            [*O31, "bank.advantage_baseline=plain"]),
    "o34": ("o26 with a split group's advantages measured against its plain members' mean (bank.advantage_baseline = "
            "plain), every group split while the scaffold is on",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.rho_schedule=handoff", "bank.handoff_round=4", "bank.advantage_baseline=plain"]),
    "o35": ("o32 with a split group's advantages measured against its plain members' mean (bank.advantage_baseline = "
            "plain): o33 without the hand-off",
            ["bank.conditioned_pg=own-and-plain", "distill.anchor=1.0", "distill.states=both",
             "bank.condition_when=plain_failed", "bank.advantage_baseline=plain"]),
    "o36": ("o31 pulled by the forward KL (distill.divergence = forward): e43's option on the oracle control's "
            "best ten-seed row, where the teacher's advice is known to help",
            [*O31, "distill.divergence=forward"]),
    "o37": ("o31 with its distillation front-loaded (distill.coef = 1.6, distill.coef_decay_rounds = 4): the scaffold "
            "is handed off after round 3, so rounds 0-3 pull at 1.6, 1.2, 0.8, 0.4, a mean of 1, o31's total pull, "
            "spent where the advice adds most (issue 14's coefficient schedule on the oracle control; e41 measured it "
            "on the learned bank, whose round 0 distils nothing)",
            [*O31, "distill.coef=1.6", "distill.coef_decay_rounds=4"]),
    "o38": ("o31 with the anchor off (distill.anchor = 0): the control for o39, whose fixed teacher cannot be "
            "anchored (the anchor holds the live weights' advised outputs at the round's teacher)",
            [*O31, "distill.anchor=0.0"]),
    "o39": ("o38 with a fixed teacher (distill.teacher = base): the warm start with the advice, the same in every "
            "round. Each round's current teacher is one update further on and its states are new, so the KL per "
            "distilled state may stay because the target moves; a fixed target does not (o8 measured it only under "
            "the spec's update, on two seeds of another machine)",
            [*O31, "distill.anchor=0.0", "distill.teacher=base"]),
    "o40": ("o31 with the teacher following each state's progress (distill.teacher_follows_progress): the find "
            "advice leaves the teacher's prompt once the object is in hand, and a state with no advice left is not "
            "distilled. With the find advice in its prompt, an agent holding the object heads back to where such "
            "objects lie, so there the teacher is worse than the plain policy; the rollouts keep the whole block "
            "(o25 changed them too)",
            [*O31, "distill.teacher_follows_progress=true"]),
    "o41": ("o31 with the two terms normalised apart (distill.normalize = separate): the PG term averaged over its own "
            "states, GRPO's update whatever is distilled, and the distillation term over the distilled states; the "
            "control for o42, whose replayed states would otherwise dilute the PG term",
            [*O31, "distill.normalize=separate"]),
    "o42": ("o41 distilling the states of the three rounds before too (distill.replay_rounds = 3), their teacher "
            "recomputed with the round's weights: each round's fit no longer covers that round's 16 tasks alone, "
            "and after the hand-off the last scaffolded rounds' states go on being distilled",
            [*O31, "distill.normalize=separate", "distill.replay_rounds=3"]),
    "o43": ("o17 with the two terms normalised apart (distill.normalize = separate): the control for o44. o17 keeps "
            "the scaffold on in every round and had the best plain success of the five-seed rows on this kind of AMD "
            "machine (+8.6 [4.5, 12.7] over GRPO, session 14; session 43's code makes its runs again to the digit)",
            [*O17, "distill.normalize=separate"]),
    "o44": ("o43 distilling the states of the three rounds before too (distill.replay_rounds = 3): o42's replay on "
            "a row whose scaffold is never handed off, so every replayed state comes from a round that showed the "
            "advice and the advised success is not pulled down after a hand-off",
            [*O17, "distill.normalize=separate", "distill.replay_rounds=3"]),
    "o45": ("o17 distilling the states of the three rounds before too (distill.replay_rounds = 3), each replayed "
            "state weighed as a PG state (distill.normalize = pg): o17's update exactly where nothing is replayed "
            "(o17 distils only PG samples' states), so o17 is its control and replay is the one change",
            O45),
    "o46": ("o45 replaying every earlier round (distill.replay_rounds = 7): o45's three rounds of replay raised plain "
            "success over o17 on 11 of 13 seeds across two machines and retention from 86% to 92%, so does a memory "
            "of all the scaffold's states keep more of what it taught?",
            [*O17, "distill.normalize=pg", "distill.replay_rounds=7"]),
    "o47": ("o45 with six of each group's eight members conditioned on the advice (bank.rho = 0.75): o21 raised the "
            "advised success to 65.0% but kept 79.1% of it without replay; with o45's replay keeping more, does the "
            "higher scaffold reach the plain policy?",
            [*O45, "bank.rho=0.75"]),
    "e0": ("EDGE with its own bank: the defaults (the row: session 10's, the block listed by similarity)", []),
    "e6": ("EDGE with its own bank: the conditioned members' PG in both contexts (o6)",
           ["bank.conditioned_pg=own-and-plain"]),
    "e7": ("EDGE with its own bank, the block in the episode's order (find, then transform)",
           ["bank.block_order=episode"]),
    "e8": ("e7 with evidence accumulated over rounds, revisions, and an object's places for every task type",
           ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge"]),
    "e9": ("e7 with the soft credit sigmoid(8 (Delta - 0.25)) (SDAR's gate) instead of max(Delta, 0)",
           ["bank.block_order=episode", "bank.credit=soft"]),
    "e10": ("e7 with the entries' accumulated utility as the credit",
            ["bank.block_order=episode", "bank.credit=utility"]),
    "e11": ("e8 with where every object kind lies once seen 3 times, failed on or not (bank.subjects: seen)",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen"]),
    "e12": ("e11 with the conditioned members' PG in both contexts (o6): most groups now retrieve, so half the "
            "members are conditioned",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen", "bank.conditioned_pg=own-and-plain"]),
    "e13": ("EDGE with its own bank, a block only where it is complete (an entry for every step of the task's "
            "type, bank.block_rule = complete), in training and evaluation",
            ["bank.block_rule=complete"]),
    "e14": ("e11 with complete blocks only (bank.block_rule = complete)",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen", "bank.block_rule=complete"]),
    "e15": ("e14 with each task type's steps written for the round's subjects once winners showed the step "
            "(bank.subjects = seen-and-steps): complete blocks before each step has failed",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-steps", "bank.block_rule=complete"]),
    "e16": ("e11 with the steps too (bank.subjects = seen-and-steps), blocks the top 2 as before",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-steps"]),
    "e17": ("e16 with each object in each receptacle counted once per episode (bank.sightings = once-per-episode): "
            "place lists from sightings not inflated by revisits",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-steps", "bank.sightings=once-per-episode"]),
    "e18": ("e16 with each task type's step written once for the type and named for each task's object "
            "(bank.subjects = seen-and-type-steps): every task of a type whose winners showed the step retrieves it",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps"]),
    "e19": ("e18 with the similarity an entry needs halved (bank.similarity_threshold = 0.2): 9-12% of instructions "
            "are less than 0.4 similar to their own object's word, so their block lacked where to look; the key rule "
            "still admits only entries whose subject the instruction names",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps", "bank.similarity_threshold=0.2"]),
    "e20": ("e18 with o17's update (the conditioned members' PG in both contexts, the teacher anchored with "
            "distill.anchor = 1): the oracle control's best options, with a learned bank that nearly every group "
            "retrieves",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps", "bank.conditioned_pg=own-and-plain", "distill.anchor=1.0"]),
    "e21": ("e20 distilled on the conditioned members' states too (distill.states = both): o23's update, whose "
            "retention on the oracle control was 92.3%, with the learned bank",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps", "bank.conditioned_pg=own-and-plain", "distill.anchor=1.0",
             "distill.states=both"]),
    "e22": ("e18 with entries pruned only when stale or over the size cap (bank.prune.rules = [stale, size_cap]): "
            "18% of e18's final blocks lack a stage their task takes, most because the internalized and "
            "not-helping rules pruned the type's step while EDGE's plain policy still skips it as often as GRPO's",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps", "bank.prune.rules=[stale,size_cap]"]),
    "e23": ("e22 with the block following the episode's progress (bank.block_follows_progress): o25's option on "
            "the learned bank, whose blocks read as the oracle's",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps", "bank.prune.rules=[stale,size_cap]",
             "bank.block_follows_progress=true"]),
    "e24": ("e22 handed off after round 3 (bank.rho_schedule = handoff, handoff_round = 4): o26's schedule with the "
            "learned bank, which keeps being written and is read again only at the evaluation with the bank",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps", "bank.prune.rules=[stale,size_cap]",
             "bank.rho_schedule=handoff", "bank.handoff_round=4"]),
    "e25": ("e22 with the block shown only in the groups whose plain members all failed (bank.condition_when = "
            "plain_failed, o31's option on the learned bank): its entries are followed where the policy fails on its "
            "own, and the plain policy keeps GRPO's episodes elsewhere",
            ["bank.block_order=episode", "bank.evidence=accumulated", "bank.revise=true", "bank.grain=knowledge",
             "bank.subjects=seen-and-type-steps", "bank.prune.rules=[stale,size_cap]",
             "bank.condition_when=plain_failed"]),
    "e26": ("e25 with a split group's advantages measured against its plain members' mean (bank.advantage_baseline = "
            "plain, o33's option on the learned bank)", E26),
    # A false entry in the learned bank: does the co-evolution remove it, and what does it cost meanwhile?
    # (bank.seed_file plants it before round 0; benchmarks/planted_entries.py follows each planted entry.)
    "e27": ("e26 with a false step planted in its bank before round 0 (bank.seed_file = "
            "data/seeds/household_false_steps.jsonl: clean tasks told to heat, heat tasks to cool, cool tasks to "
            "clean): e26 prunes only stale entries and the planted ones are never revised, so nothing removes them",
            [*E26, "bank.seed_file=data/seeds/household_false_steps.jsonl"]),
    "e28": ("e27 with the spec's four pruning rules (bank.prune.rules = internalized, not_helping, stale, size_cap): "
            "does the not-helping rule remove a false entry, how soon, and at what cost",
            [*e26_without("bank.prune.rules"), "bank.seed_file=data/seeds/household_false_steps.jsonl"]),
    "e29": ("e26 with each transformation's true step planted instead (data/seeds/household_true_steps.jsonl): "
            "the control for e27, the same planting with the words true",
            [*E26, "bank.seed_file=data/seeds/household_true_steps.jsonl"]),
    "e30": ("e27 with the spec's collection and pruning: every group that retrieves is split (bank.condition_when = "
            "always, so Delta can be negative), advantages against the group's mean, and the four pruning rules; "
            "e22's bank options otherwise. Does the spec's own credit see that the planted step misleads?",
            [*e26_without("bank.prune.rules", "bank.condition_when", "bank.advantage_baseline"),
             "bank.seed_file=data/seeds/household_false_steps.jsonl"]),
    "e31": ("e26 with half of each group's plain members deciding where the block goes and Delta measured against "
            "the other half (bank.decided_by = half_plain): under e26 the plain members are chosen for failing, so "
            "Delta is never negative and an entry that misleads keeps its credit",
            [*E26, "bank.decided_by=half_plain"]),
    "e32": ("e27 (the false steps planted) with Delta measured against unselected plain members "
            "(bank.decided_by = half_plain): does the credit then see the planted step mislead?",
            [*E26, "bank.decided_by=half_plain", "bank.seed_file=data/seeds/household_false_steps.jsonl"]),
    "e33": ("e32 with the spec's four pruning rules: half_plain's Delta, which can go negative, for the not-helping "
            "rule to read (bank.prune.internalized_needs = lift: an entry leaves as internalized only where it once "
            "lifted its groups and the plain members now reach that level, else as not helping)",
            [*e26_without("bank.prune.rules"), "bank.decided_by=half_plain", "bank.prune.internalized_needs=lift",
             "bank.seed_file=data/seeds/household_false_steps.jsonl"]),
    "e34": ("e31 with e33's pruning (the spec's four rules) and nothing planted: what those rules cost a bank "
            "that has no false entry",
            [*e26_without("bank.prune.rules"), "bank.decided_by=half_plain", "bank.prune.internalized_needs=lift"]),
    "e35": ("e30 with nothing planted: the spec's collection and pruning on a clean bank, e30's own control "
            "(what planting costs there, and the spec's learned bank at ten seeds)",
            [*e26_without("bank.prune.rules", "bank.condition_when", "bank.advantage_baseline")]),
    "e36": ("e27 (the false steps planted, e26's options) with distillation off (distill.coef = 0): does the "
            "planted step reach the plain policy through the distillation, or through the advised members' "
            "own updates?",
            [*E26, "bank.seed_file=data/seeds/household_false_steps.jsonl", "distill.coef=0"]),
    "e37": ("e26 with distillation off (distill.coef = 0): e36's control, and what distillation gives the "
            "best learned bank",
            [*E26, "distill.coef=0"]),
    "e38": ("e26 with twice the distillation coefficient (distill.coef = 2): distillation is all of e26's lead "
            "over GRPO (e37), so does more of it pull the plain policy further?",
            [*E26, "distill.coef=2"]),
    "e39": ("e26 distilled on the conditioned members' states too, the block removed (distill.states = both): "
            "distillation is all of e26's lead and a stronger pull hurts (e38), so distil where the block led the "
            "agent rather than harder; under plain_failed the plain members' states are all from failed episodes",
            [*E26, "distill.states=both"]),
    "e40": ("e26 with half the distillation coefficient (distill.coef = 0.5): with e37 (0) and e38 (2), the "
            "coefficient's curve on the learned bank",
            [*E26, "distill.coef=0.5"]),
    "e41": ("e26 with the coefficient falling linearly from 2 to 0 over 8 rounds (distill.coef = 2, "
            "distill.coef_decay_rounds = 8): rounds 1-7, where the bank distils, pull at 1.75 down to 0.25, e26's "
            "total pull (a mean of 1) spent where the advice adds most; e38 pulled at 2 throughout",
            [*E26, "distill.coef=2", "distill.coef_decay_rounds=8"]),
    "e42": ("e26 with the teacher anchored (distill.anchor = 1): student and teacher share the weights, so the "
            "pull also moves the advised context towards the plain one; the anchor holds it at the round's teacher "
            "(o17's option, without o17's own-and-plain PG)",
            [*E26, "distill.anchor=1"]),
    "e43": ("e26 pulled by the forward KL (distill.divergence = forward): the reverse KL's gradient on an action "
            "the plain policy rarely takes is small however much the teacher favours it, and its KL per distilled "
            "state stays at 0.32-0.37 whatever lambda_d (e37-e41); the forward KL raises such an action by as much "
            "as the teacher favours it",
            [*E26, "distill.divergence=forward"]),
    "e44": ("e26 with the advised members' PG in the plain context too (bank.conditioned_pg = own-and-plain): under "
            "plain_failed the advised episodes are the wins on tasks the plain policy failed four times, and with "
            "advantages against the plain members' mean each is credited by how far it beat the plain policy; "
            "replayed without the block they teach the plain policy what worked, not only the teacher's outputs "
            "on its own failed states (o31's update does this; e20 tried it on the learned bank under always)",
            [*E26, "bank.conditioned_pg=own-and-plain"]),
    "e45": ("e26 with six of each group's eight members advised where shown (bank.rho = 0.75): under plain_failed "
            "the two plain members then decide, so the block reaches every group whose two plain episodes failed "
            "(e26 shows it in 26-28% of groups, those whose four failed), with six advised episodes there; the "
            "scaffold raised, e26's advantage baseline kept",
            [*E26, "bank.rho=0.75"]),
    "e46": ("e26 with the teacher following each state's progress (distill.teacher_follows_progress): o40's "
            "option on the learned bank",
            [*E26, "distill.teacher_follows_progress=true"]),
    "e47": ("e26 distilling the states of the three rounds before too (distill.replay_rounds = 3), each distilled "
            "state weighed as a PG state (distill.normalize = pg): o45's change to o17 on the learned bank. Unlike "
            "o17's, e26's distilled states are all distillation-only (its plain members, in groups whose plain "
            "members all failed, carry no advantage against their own mean), so pg changes their weight too and "
            "e26 is the control for the two changes together",
            [*E26, "distill.normalize=pg", "distill.replay_rounds=3"]),
    "e48": ("o45's update on the learned bank: e22's bank options (every group that retrieves is split, "
            "advantages against the group's mean) with the conditioned members' PG in both contexts, the teacher "
            "anchored, three rounds' states replayed and weighed as PG states. Beside o45 it says how much of the "
            "oracle's gain the learned bank recovers under the same update (issue 16 asks 70%)",
            E48),
    "e49": ("e48 with the bank's first entries written from the warm start's plain demonstrations "
            "(bank.bootstrap = demonstrations): the learned bank shows nothing in round 0, where the scaffold does "
            "most of its work (o27, handed off after round 1, gained about as much as o26 after round 3), and "
            "writes from one round's evidence in round 1. The demonstrations every method's warm start was cloned "
            "from write where each object kind lies and each type's step before round 0 collects; no episode is added",
            [*E48, "bank.bootstrap=demonstrations"]),
    "e50": ("e26 with the bank's first entries written from the warm start's plain demonstrations "
            "(bank.bootstrap = demonstrations): e49's start on the learned bank's best ten-seed row",
            [*E26, "bank.bootstrap=demonstrations"]),
    # Is bad behaviour distilled too? The oracle control with its advice made false (m…).
    "m0": ("the oracle's advice made false (bank.oracle_advice = misleading: where the object does not lie, the "
           "wrong transformation), the spec's update: distilled only where it helped, weight c(x) = max(Delta, 0)",
           ["bank.oracle_advice=misleading"]),
    "m1": ("m0 distilled wherever it was shown (distill.gate = retrieved, weight 1): nothing stands between the "
           "false advice and the plain policy",
           ["bank.oracle_advice=misleading", "distill.gate=retrieved"]),
}


def parse_evaluation_args(description: str, split: str | None = None, episodes: int | None = None,
                          argv: list[str] | None = None,
                          extra: Callable[[argparse.ArgumentParser], None] | None = None,
                          ) -> tuple[argparse.Namespace, list[int]]:
    """The command line of the scripts that read the sweep's finished runs again (split_table.py,
    failure_anatomy.py, training_anatomy.py): configurations, seeds and where GRPO's runs are; --split and
    --episodes (defaults ``split`` and ``episodes``) only for the scripts that evaluate, and what ``extra``
    adds for one script alone. Returns the arguments and the seeds (default 0 and 1)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", action="append", required=True, help="a sweep configuration (e19, o17, e0 ...)")
    parser.add_argument("--seed", type=int, action="append", help="seeds (default 0 and 1)")
    if split is not None:
        parser.add_argument("--split", default=split)
    if episodes is not None:
        parser.add_argument("--episodes", type=int, default=episodes)
    parser.add_argument("--reference-runs", type=Path, default=Path("benchmarks/runs"),
                        help="the learning benchmark's runs (GRPO and the defaults e0 / o0)")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    unknown = [c for c in args.config if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    return args, args.seed or [0, 1]


def method_of(name: str) -> str:
    if name == GRPO:
        return GRPO
    return "edge" if name.startswith("e") else ORACLE


def default_of(name: str) -> str:
    """The configuration whose runs are the learning benchmark's own (read from the reference runs)."""
    return "e0" if name.startswith("e") else "o0"


def run_folder(config: str, seed: int, reference_runs: Path) -> Path:
    """Where the run of configuration ``config`` at ``seed`` (default budget) is: in ``reference_runs`` for
    GRPO and the defaults (e0, o0), which are the learning benchmark's own runs; else under ROOT/<config>."""
    folder = reference_runs if config in (GRPO, default_of(config)) else ROOT / config
    return folder / run_name("household", method_of(config), seed)


def runs_of(config: str, seeds: list[int], reference_runs: Path) -> dict[int, dict]:
    """The runs of configuration ``config`` at ``seeds`` (``run_folder``), as ``read_run`` reads them."""
    return {s: read_run(run_folder(config, s, reference_runs), [SPLIT]) for s in seeds}


def bench_config(name: str, methods: list[str], seeds: list[int], budget: float, jobs: int) -> LearningBenchConfig:
    folder = name if budget == 1 else f"{name}-x{budget:g}"
    return LearningBenchConfig(envs=["household"], methods=methods, seeds=seeds, budget=budget, eval_episodes=400,
                               splits=[SPLIT], eval_every=10_000, intermediate_episodes=None, jobs=jobs,
                               runs_dir=ROOT / folder, out_dir=ROOT / "results", name=f"sweep_{folder}",
                               # The base's plain evaluation is the same for every configuration: once a seed.
                               extra=[*CONFIGS[name][1], f"eval.base_cache_dir={ROOT / 'base-evals'}"],
                               bases_dir=BASES)


def reference_config(method: str, seeds: list[int], jobs: int, reference_runs: Path) -> LearningBenchConfig:
    """The reference runs the sweep compares against (``--make-grpo``: GRPO's; ``--make-oracle``: the
    default oracle control's, o0): into ``reference_runs``, from the same warm starts, evaluated on the
    same tasks as the rows, with no row's overrides."""
    return replace(bench_config("o0", [method], seeds, 1.0, jobs), runs_dir=reference_runs,
                   name="sweep_grpo" if method == GRPO else "sweep_o0",
                   extra=[f"eval.base_cache_dir={ROOT / 'base-evals'}"])


def per_round(run: dict) -> list[dict]:
    """The scaffold round by round: share of training groups that retrieved, their plain / conditioned
    success, distillation KL, advice shift."""
    return [{k: r.get(k) for k in ("round", "hit_rate", "train_success_plain", "train_success_conditioned",
                                   "distill_kl", "advice_shift_kl", "distill_extra_kl", "delta_mean",
                                   "delta_positive_share")} for r in run["bank_rounds"]]


def retrieving(r: dict) -> str:
    """Share of training groups that retrieved anything, over seeds and rounds (in brackets rounds 1 on:
    round 0's bank is empty); – for rows measured before it was recorded."""
    rounds = [x for seed_rounds in r["rounds"].values() for x in seed_rounds]
    if not rounds or any(x.get("hit_rate") is None for x in rounds):
        return "–"
    later = [x["hit_rate"] for x in rounds if x["round"] > 0]
    return f"{fmean(x['hit_rate'] for x in rounds):.0%} ({fmean(later):.0%})"


def credited(r: dict) -> str:
    """Delta (conditioned − plain success) in the groups shown the block, and the share of them where it was
    positive (c(x) > 0: the spec distils there), over seeds and rounds; – for rows made before it was kept."""
    rounds = [x for seed_rounds in r["rounds"].values() for x in seed_rounds if x.get("hit_rate")]
    if not rounds or any(x.get("delta_mean") is None for x in rounds):
        return "–"
    shown = sum(x["hit_rate"] for x in rounds)
    delta = sum(x["delta_mean"] * x["hit_rate"] for x in rounds) / shown
    return f"{delta:+.2f} ({sum(x['delta_positive_share'] * x['hit_rate'] for x in rounds) / shown:.0%})"


def against(name: str, other: str, seeds: list[int], reference_runs: Path) -> dict:
    """Configuration ``name`` − configuration ``other`` (default budget; e0 and o0 are the reference runs),
    paired by seed and task over the seeds ``other`` has finished (under ``seeds``): final plain success,
    and success with each run's own advice or bank."""
    seeds = [s for s in seeds if ((folder := run_folder(other, s, reference_runs)) / "params.json").exists()
             and run_status(folder).state == "finished"]
    if not seeds:
        raise FileNotFoundError(f"no finished run of {other}", None, str(run_folder(other, 0, reference_runs)))
    ours, theirs = (runs_of(c, seeds, reference_runs) for c in (name, other))
    out: dict = {"seeds": seeds}
    for condition, metric in (("plain", "plain"), ("with_advice", "with_bank")):
        def final(runs: dict, s: int, metric=metric) -> float:
            return runs[s]["final"][f"{SPLIT}_{metric}"]

        out[condition] = paired_difference(
            [final(ours, s) for s in seeds], [final(theirs, s) for s in seeds], seeds,
            [(ours[s]["final_tasks"][SPLIT][metric], theirs[s]["final_tasks"][SPLIT][metric]) for s in seeds])
    return out


def measure(name: str, seeds: list[int], budget: float, jobs: int, reference_runs: Path) -> dict:
    method, default_name = method_of(name), default_of(name)
    if budget == 1 and name == default_name:  # the benchmark's own run of the method is this configuration
        ours = runs_of(name, seeds, reference_runs)
    else:
        # The longer view's reference folder (o0) also holds its GRPO runs.
        methods = ["grpo", method] if budget != 1 and name == "o0" else [method]
        cfg = bench_config(name, methods, seeds, budget, jobs)
        report = run_benchmark(cfg, command=f"benchmarks/internalization_sweep.py --only {name}", track=False)
        ours = {int(s): r for s, r in report["runs"]["household"][method].items()}
    if budget == 1:
        grpo = runs_of(GRPO, seeds, reference_runs)
        try:
            default = ours if name == default_name else runs_of(default_name, seeds, reference_runs)
        except FileNotFoundError:  # a machine that ran GRPO's reference runs but not the default's
            default = None
    else:
        runs = ROOT / f"o0-x{budget:g}"
        grpo = {s: read_run(runs / run_name("household", "grpo", s), [SPLIT]) for s in seeds}
        default = {s: read_run(runs / run_name("household", method, s), [SPLIT]) for s in seeds}
    cfg = LearningBenchConfig(envs=["household"], methods=["grpo", method], seeds=seeds, splits=[SPLIT])
    entry = summarise({"household": {"grpo": grpo, method: ours}}, cfg)["household"][method][SPLIT]

    def plain(runs, s):
        return runs[s]["final"][f"{SPLIT}_plain"]

    def tasks(runs, s):
        return runs[s]["final_tasks"][SPLIT]["plain"]

    return {
        "asks": CONFIGS[name][0], "overrides": CONFIGS[name][1], "budget": budget, "seeds": seeds,
        "method": method, "plain": {s: plain(ours, s) for s in seeds},
        "with_advice": {s: ours[s]["final"][f"{SPLIT}_with_bank"] for s in seeds},
        "retention": {s: ours[s]["final"][f"{SPLIT}_retention"] for s in seeds},
        "grpo": {s: plain(grpo, s) for s in seeds},
        "minus_grpo": entry["minus_grpo"], "with_advice_minus_plain": entry["with_bank_minus_plain"],
        "minus_default": None if default is None else paired_difference(
            [plain(ours, s) for s in seeds], [plain(default, s) for s in seeds], seeds,
            [(tasks(ours, s), tasks(default, s)) for s in seeds]),
        "rounds": {s: per_round(ours[s]) for s in seeds},
        "run_minutes": fmean(r["run_seconds"] for r in ours.values() if r["run_seconds"]) / 60,
        "machine": describe_machine(),
    }


def key(name: str, budget: float, tag: str | None = None) -> str:
    """The row's name in the results table: NAME, NAME-x2 for the longer view, NAME@TAG when made again
    on another machine (``--tag``)."""
    return (name if budget == 1 else f"{name}-x{budget:g}") + (f"@{tag}" if tag else "")


def refuse_other_machine(rows: dict, names: list[str], machine: str, table: Path) -> None:
    """Stop before anything runs if a row about to be written was measured on another machine: float
    kernels differ between CPUs, so its figures are that machine's record and are kept (session 19's o17
    on the AVX-512 machine and o17@no-avx512 are both in the table); ``--tag`` names the new one."""
    for name in names:
        before = rows.get(name, {}).get("machine")
        if before is not None and before != machine:
            raise SystemExit(f"{table}: row {name!r} was measured on another machine ({before}); this is "
                             f"{machine}. Pass --tag TAG to write this machine's as {name}@TAG beside it.")


def against_label(other: str, tag: str | None, machine: str, rows: dict) -> str:
    """The name ``other``'s runs have in the table ``rows``: its runs in this checkout are this machine's, so
    where the table's row ``other`` was measured on another machine they are ``other@TAG`` (o45@xeon against
    o17@xeon, not against the AMD machine's o17), and for an untagged row the row ``other@…`` measured here."""
    recorded_on = rows.get(other, {}).get("machine")
    if recorded_on in (None, machine):
        return other
    if tag:
        return key(other, 1.0, tag)
    # A new row (no --tag) against a control made again here: the control's row of this machine (o46 against
    # o45@xeon); with none, the table's name.
    return next((name for name, row in rows.items() if name.startswith(f"{other}@") and row.get("machine") == machine),
                other)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, action="append", help="seeds (default 0 and 1)")
    parser.add_argument("--only", action="append", help="configurations to run (default all)")
    parser.add_argument("--budget", type=float, default=1.0, help="multiplies the rounds (2: the longer view)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--make-grpo", action="store_true",
                        help="first run GRPO's reference runs of these seeds where missing (a new machine)")
    parser.add_argument("--make-oracle", action="store_true",
                        help="first run the default oracle control's (o0) reference runs of these seeds where missing")
    parser.add_argument("--tag", help="write the rows as NAME@TAG (a configuration made again on another machine)")
    parser.add_argument("--against", action="append", default=[],
                        help="also compare each configuration with this one (run first, same seeds), task by task")
    parser.add_argument("--reference-runs", type=Path, default=Path("benchmarks/runs"),
                        help="the learning benchmark's runs (GRPO, the default oracle control and default EDGE; "
                             "without the defaults' runs, \"− default\" is left empty)")
    args = parser.parse_args()
    unknown = [n for n in args.against + (args.only or []) if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    if args.against and args.budget != 1:
        parser.error("--against compares runs at the default budget; leave --budget at 1")
    seeds = args.seed or [0, 1]
    names = [n for n in CONFIGS if not args.only or n in args.only]
    if args.budget != 1 and "o0" not in names:
        names.insert(0, "o0")  # the reference runs of the longer view
    table = OUT / "internalization.json"
    recorded = json.loads(table.read_text()) if table.exists() else {}
    refuse_other_machine(recorded, [key(n, args.budget, args.tag) for n in names], describe_machine(), table)
    for method, flag, wanted in ((GRPO, "--make-grpo", args.make_grpo), (ORACLE, "--make-oracle", args.make_oracle)):
        if wanted:
            run_benchmark(reference_config(method, seeds, args.jobs, args.reference_runs),
                          command=f"benchmarks/internalization_sweep.py {flag}", track=False)
    for name in names:
        row = measure(name, seeds, args.budget, args.jobs, args.reference_runs)
        if args.budget == 1:
            row["against"] = {}
            for other in args.against:
                try:
                    if other != name:
                        row["against"][against_label(other, args.tag, row["machine"], recorded)] = against(
                            name, other, seeds, args.reference_runs)
                except FileNotFoundError as err:  # its runs not made (yet): the row is still written
                    print(f"{name} against {other}: not compared, a run is missing ({err.filename})")
        # Two sweeps run side by side (--only e14 beside --only e15): each reads the table again under a
        # lock just before writing its row, or it would write back the rows it read at start and lose
        # the other's (session 17 lost e14's that way).
        with FileLock(OUT / "internalization.json.lock"):
            rows = json.loads(table.read_text()) if table.exists() else {}
            refuse_other_machine(rows, [key(name, args.budget, args.tag)], row["machine"], table)
            rows[key(name, args.budget, args.tag)] = row
            write(rows)


def _points(e: dict) -> str:
    return signed_points(e)


def _per_seed(e: dict) -> str:
    tasks = e.get("per_seed_tasks", {})
    return ", ".join(f"s{s} {100 * d:+.1f}" + (f" [{100 * tasks[s]['low']:+.1f}, {100 * tasks[s]['high']:+.1f}]"
                                              if s in tasks else "") for s, d in e["per_seed"].items())


TARGETS = {"o": 10.0, "e": 8.0}
"""The issues' targets for plain − GRPO in points: issue 14's for the oracle control, 16's for EDGE's own bank."""


def forest_figure(rows: dict, path: Path, min_seeds: int = 10) -> list[str]:
    """Plain − GRPO with its interval for every row of at least ``min_seeds`` seeds, one line each in the
    table's order, coloured by kind (oracle control, EDGE's own bank, false advice), with the issues' targets
    dashed. Returns the rows drawn."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    drawn = [name for name, r in rows.items() if len(r["seeds"]) >= min_seeds]
    colours = {"o": "tab:blue", "e": "tab:green", "m": "tab:red"}
    fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.32 * max(len(drawn), 1)))
    for y, name in enumerate(reversed(drawn)):
        d = rows[name]["minus_grpo"]
        ax.errorbar(100 * d["mean"], y, xerr=[[100 * (d["mean"] - d["low"])], [100 * (d["high"] - d["mean"])]],
                    fmt="o", color=colours[name[0]], capsize=3)
    ax.axvline(0, color="grey", lw=0.8)
    for kind, target in TARGETS.items():
        ax.axvline(target, color=colours[kind], ls="--", lw=0.8,
                   label=f"target, {'oracle control' if kind == 'o' else 'EDGE'} (+{target:g})")
    ax.set_yticks(range(len(drawn)), list(reversed(drawn)))
    ax.set(xlabel="final plain success − GRPO (points, 95% interval over seeds)",
           title=f"household test_seen, rows with {min_seeds}+ seeds")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def write(rows: dict) -> None:
    # In the order CONFIGS lists them, whatever order they were measured in; a longer view after its base,
    # and a configuration made again on another machine (NAME@TAG, --tag) after the first.
    order = list(CONFIGS)
    rows = dict(sorted(rows.items(), key=lambda kv: (order.index(kv[0].split("@")[0].split("-x")[0]), kv[0])))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "internalization.json").write_text(json.dumps(rows, indent=2) + "\n")
    forest_figure(rows, OUT / "internalization_forest.png")
    machines = sorted({r.get("machine", "not recorded") for r in rows.values()})
    lines = ["# Internalization on the oracle control, and EDGE with its own bank (household, test_seen)", "",
             "`edge-oracle-bank` (o…) with distillation options changed, and EDGE with its own bank (e…), at the "
             "default budget (`-x2`: twice the rounds), from each seed's own warm start; 400 evaluation episodes "
             "after the last round, on the same tasks and streams as GRPO's and the default runs of the learning "
             "benchmark. Differences are in points: the mean over seeds with its 95% Student-t interval, then per "
             "seed with the interval paired by task; \"− default\" is against o0 for o… and m…, for e… against the "
             "learning benchmark's EDGE runs when the row was made (session 10's, the e0 row, listed by similarity, "
             "for e6–e8; from e9 on, the block in episode order, as e7). \"With advice\" "
             "is the oracle's advice for o…, its false advice for m… (bank.oracle_advice = misleading), the run's own "
             "final bank for e…; retention is plain / with advice, above 100% where the advice hurts (m…). Command: "
             "`.venv/bin/python benchmarks/internalization_sweep.py` (see its docstring).", "",
             "![plain − GRPO of the rows with ten seeds or more](internalization_forest.png)", "",
             "Machine: " + "; ".join(machines) + ".", "",
             "Groups retrieving: the share of training groups whose task retrieved any entry, over seeds and "
             "rounds (in brackets from round 1 on: round 0's bank is empty); under `bank.condition_when: "
             "plain_failed` (o31, o32) the share of groups shown the block, those whose plain members all failed.", "",
             "Delta: conditioned − plain success in the groups shown the block, over seeds and rounds, with the share "
             "of those groups where it was positive (where the spec distils); – for rows made before it was kept.", "",
             "| config | what it asks | seeds | plain | with advice | retention | plain − GRPO | per seed | "
             "plain − default | with advice − plain | groups retrieving | Delta (> 0) | min / run |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        retention = [v for v in r["retention"].values() if v is not None]
        lines.append(
            f"| {name} | {r['asks']} | {len(r['seeds'])} | {fmean(r['plain'].values()):.1%} | "
            f"{fmean(r['with_advice'].values()):.1%} | {fmean(retention):.1%} | {_points(r['minus_grpo'])} | "
            f"{_per_seed(r['minus_grpo'])} | {_points(r['minus_default']) if r['minus_default'] else '–'} | "
            f"{_points(r['with_advice_minus_plain'])} | {retrieving(r)} | {credited(r)} | {r['run_minutes']:.1f} |")
    pairs = [(n, other, d) for n, r in rows.items() for other, d in (r.get("against") or {}).items()]
    if pairs:
        lines += ["", "## One configuration against another", "",
                  "Same seeds, paired by seed and task (`--against`); with advice: each run's own advice or bank.", "",
                  "| config | against | seeds | plain | per seed | with advice |", "|---|---|---|---|---|---|"]
        lines += [f"| {n} | {other} | {len(d['seeds'])} | {_points(d['plain'])} | {_per_seed(d['plain'])} | "
                  f"{_points(d['with_advice'])} |" for n, other, d in pairs]
    lines += ["", "Overrides: " + "; ".join(f"{n}: `{' '.join(r['overrides']) or 'none'}`" for n, r in rows.items()),
              "", "## Round by round", "",
              "Training groups: plain / conditioned members' success; distillation KL per distilled state (during "
              "the update); advice shift: KL(policy without ‖ with the advice) on the plain members' states before "
              "the update (– where not recorded); with distill.extra_epochs, \"extra\": the distillation KL "
              "during the extra steps of distillation alone.", ""]
    for name, r in rows.items():
        n = max(len(v) for v in r["rounds"].values())
        lines += [f"### {name}", "", "| seed | " + " | ".join(f"r{k}" for k in range(n)) + " |",
                  "|---|" + "---|" * n]
        for seed, rounds in r["rounds"].items():
            cells = []
            for x in rounds:
                shift = "–" if x["advice_shift_kl"] is None else f"{x['advice_shift_kl']:.2f}"
                cond = x["train_success_conditioned"]
                extra = "" if x.get("distill_extra_kl") is None else f"; extra {x['distill_extra_kl']:.2f}"
                cells.append(f"{x['train_success_plain']:.0%}/{cond:.0%} ({x['distill_kl']:.2f}; {shift}{extra})"
                             if cond is not None else "–")
            lines.append(f"| {seed} | " + " | ".join(cells) + " |")
        lines.append("")
    (OUT / "internalization.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
