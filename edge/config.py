"""The one configuration object, read from ``params.yaml`` and validated once, at the boundary.

Every section is a pydantic model with ``extra="forbid"``, so a typo in ``params.yaml`` is an error
that names the field instead of a silently ignored key. Later stages add their own sections here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edge.bank.pruning import RULES


class ConfigError(ValueError):
    """A configuration problem, phrased for the person who wrote the file."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DataConfig(_Section):
    """Task files for every environment and split (the DVC ``prepare`` stage), and the training pool.

    The files are a versioned record to read and diff, not an input: tasks are a pure function of
    (environment, split, count, seed), so training draws its rounds from ``generate_tasks`` with
    ``train_tasks`` (the same tasks the ``train`` file lists) and evaluation generates ``eval.episodes``
    tasks per split; ``test_seen_tasks`` / ``test_unseen_tasks`` size the files only."""

    envs: list[str] = Field(default_factory=lambda: ["household", "shop"])
    """Environments whose tasks are written; names from the environment registry."""
    train_tasks: int = Field(1000, ge=1)
    """Tasks in the ``train`` split of each environment: the pool training rounds draw from."""
    test_seen_tasks: int = Field(200, ge=1)
    """Tasks in the ``test_seen`` file (same layouts and combinations as train, different seeds)."""
    test_unseen_tasks: int = Field(200, ge=1)
    """Tasks in the ``test_unseen`` file (layouts and combinations that train never shows)."""
    out_dir: Path = Path("data/tasks")
    """Where ``<env>/<split>.jsonl`` files go."""

    @field_validator("envs")
    @classmethod
    def _known_envs(cls, envs: list[str]) -> list[str]:
        from edge.envs.registry import env_names

        unknown = [e for e in envs if e not in env_names()]
        if unknown:
            raise ValueError(f"unknown environment(s) {unknown}; valid names: {env_names()}")
        return envs

    def count(self, split: str) -> int:
        return {"train": self.train_tasks, "test_seen": self.test_seen_tasks,
                "test_unseen": self.test_unseen_tasks}[split]


class TinyModelConfig(_Section):
    """Sizes of the built-in tiny causal LM (a Llama built from a transformers config)."""

    hidden_size: int = Field(64, ge=8)
    """Width of the residual stream; 64 was 2.4x faster than 128 here at similar learning."""
    intermediate_size: int = Field(128, ge=8)
    num_layers: int = Field(2, ge=1)
    num_heads: int = Field(4, ge=1)
    max_positions: int = Field(1024, ge=64)


class LoraConfig(_Section):
    """LoRA through peft; off for the tiny model, on for real LLMs."""

    enabled: bool = False
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


class PolicyConfig(_Section):
    """Which language model acts, and how it turns a state into an action."""

    model: str = "tiny"
    """``tiny`` (built offline from ``tiny``) or a Hugging Face model id / local path."""
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    mode: Literal["score", "generate"] = "score"
    """``score``: rank the admissible actions by log-probability (one packed row per state);
    ``generate``: sample text and parse ``<action>...</action>``."""
    temperature: float = Field(1.0, gt=0)
    """Softmax temperature over candidate scores (score) or sampling temperature (generate)."""
    action_score: Literal["sum", "mean"] = "sum"
    """Score mode: an action's score is the sum of its tokens' log-probabilities (its likelihood as
    text), or their mean (length-normalised). An untrained model's sum favours the shortest action
    (``look`` almost always); ``mean`` lets an environment with no warm start begin from a spread-out
    policy. The warm-started models were trained and measured with ``sum``."""
    history_steps: int = Field(2, ge=0)
    """Past (action, observation) steps shown in the prompt, newest kept first under the budget."""
    max_prompt_tokens: int = Field(512, ge=32)
    """Token budget of a prompt: old history goes first; task, experience and actions never go."""
    list_actions: bool = False
    """Also list the admissible actions inside the prompt (score mode scores them either way)."""
    max_new_tokens: int = Field(24, ge=1)
    """Generate mode: longest action text sampled."""
    invalid_penalty: float = Field(0.1, ge=0)
    """Generate mode: reward subtracted per unparseable or inadmissible action."""
    micro_batch_size: int = Field(32, ge=1)
    """Packed rows per forward pass (rollouts, evaluation and updates)."""
    attn_implementation: Literal["sdpa", "eager"] = "sdpa"
    """Attention kernel, pinned when the model loads whatever its ``config.json`` says. Score mode
    packs every candidate into one row behind a 4-D mask, which these two honour (sdpa takes it as a
    boolean mask, eager as an additive one); flash-attention kernels ignore such a mask and would let
    candidates see each other, so they are refused."""
    gradient_checkpointing: bool = False
    """Recompute the decoder layers' activations in the backward pass (less memory, about a third
    more compute per update): what fits a 7B model's update on one GPU."""


class WarmupConfig(_Section):
    """Behaviour cloning of the tiny model on scripted demonstrations (`edge warmup`)."""

    env: str = "household"
    """Environment whose train split supplies the demonstrations."""
    explore_episodes: int = Field(300, ge=0)
    """Plain demonstrations by an agent that knows the rules but not the regularities: household's
    explorer (searches receptacles in random order), shop's careless shopper (random suggested
    query and product, each named option clicked with probability ``option_prob``; its failed
    episodes are kept too, since they still show how the shop works)."""
    noisy_expert_episodes: int = Field(60, ge=0)
    """Plain demonstrations by a competent agent: household's expert with random detours, shop's
    careful shopper (without the advice in its prompt)."""
    advised_episodes: int = Field(300, ge=0)
    """Demonstrations with true advice in the prompt, by a demonstrator that follows it."""
    advised_env: str | None = None
    """Environment whose tasks the advised demonstrations play (None: ``env``'s own), the same tasks with
    objects elsewhere. ``household_shuffled``: each task's object lies where only its advice says, so the
    policy learns to read the advice rather than the usual places the household's advice repeats
    (benchmarks/results/shared_settings_moved.md)."""
    detour_prob: float = Field(0.3, ge=0, le=1)
    """Household noisy expert: chance of a random detour before each planned step."""
    option_prob: float = Field(0.5, ge=0, le=1)
    """Shop careless shopper: chance of clicking each option the instruction names."""
    objective: Literal["sft", "candidates"] = "sft"
    """``sft``: negative log-likelihood of the action's tokens; ``candidates``: -log pi(a|s) over
    the admissible set (the exact policy, but every candidate is packed into each row)."""
    epochs: int = Field(6, ge=1)
    lr: float = Field(3e-3, gt=0)
    batch_size: int = Field(64, ge=1)
    """States per optimizer step."""
    eval_episodes: int = Field(200, ge=0)
    """test_seen episodes for the plain and the advised success check after training."""
    out_dir: Path = Path("checkpoints/base")
    per_env: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Fields that replace the ones above when ``env`` is that environment, e.g. ``{shop: {objective:
    candidates}}``: shop's product choice is a pick among ten ASIN tokens the model barely knows,
    which the candidate objective learns and token-level SFT does not."""

    @field_validator("per_env")
    @classmethod
    def _known_fields(cls, per_env: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for env, overrides in per_env.items():
            unknown = sorted(set(overrides) - set(cls.model_fields) | ({"env", "per_env"} & set(overrides)))
            if unknown:
                raise ValueError(f"per_env.{env}: {unknown} cannot be set per environment; "
                                 f"valid fields: {', '.join(sorted(set(cls.model_fields) - {'env', 'per_env'}))}")
        return per_env

    def for_env(self) -> WarmupConfig:
        """This section with ``per_env[env]`` applied (validated like the rest)."""
        overrides = self.per_env.get(self.env, {})
        return self.model_validate(self.model_dump() | overrides | {"per_env": {}}) if overrides else self


class RolloutConfig(_Section):
    """How many rollouts a round collects."""

    tasks_per_round: int = Field(8, ge=1)
    """N: distinct training tasks per round."""
    group_size: int = Field(8, ge=2)
    """G: trajectories per task from one initial state."""
    max_steps: int | None = Field(None, ge=1)
    """Episode step limit; None keeps the environment's own (50 household, 15 shop)."""


class GRPOConfig(_Section):
    """The policy update (formulas in docs/EDGE-SPEC.md)."""

    lr: float = Field(1e-3, gt=0)
    epochs: int = Field(2, ge=1)
    minibatches: int = Field(6, ge=1)
    """Optimizer steps per epoch: a round's samples are split into this many nearly equal minibatches,
    so every method takes ``epochs x minibatches`` steps per round on its N x G episodes, however long
    they were (EDGE's distillation rides on the same samples)."""
    clip_low: float = Field(0.2, ge=0)
    clip_high: float = Field(0.28, ge=0)
    beta: float = Field(0.0, ge=0)
    """Weight of the k3 KL to the frozen reference (the warm-started base)."""
    std_normalize: bool = True
    """Divide advantages by the group's std (GRPO); False is Dr.GRPO."""
    loss_agg: Literal["token-mean", "step-mean", "episode-mean"] = "episode-mean"
    max_grad_norm: float = Field(1.0, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    update_processes: int = Field(1, ge=1)
    """Processes of the policy update (``accelerate launch``, gloo on CPU, NCCL on GPUs): each takes a
    shard of every minibatch and the gradients are summed, so N processes take the one-process
    update (within float rounding). Rollouts and evaluation stay in the training process."""


class PruneConfig(_Section):
    """When an entry leaves the active set (see edge/bank/pruning.py)."""

    min_uses: int = Field(4, ge=1)
    """not helping: used at least this often ..."""
    min_utility: float = 0.0
    """... with utility at most this."""
    window: int = Field(3, ge=1)
    """internalized: credited rounds over which plain success must have caught up."""
    tolerance: float = Field(0.05, ge=0)
    internalized_needs: Literal["credit", "lift"] = "credit"
    """What the internalized rule's label asks for; with the not-helping rule on (the default), the same
    entries leave in the same round either way.
    ``credit`` (the spec): positive credit once, and over the window the groups' plain members succeed as
    often as the conditioned ones. That also holds where neither succeeds: of 30 false entries planted under
    ``bank.condition_when: plain_failed`` (row e28, whose deciding plain members fail by selection) five
    left as "internalized" at 0% against 0%; under the spec's collection (e30) six of 30, none after a lift
    its plain members then reached (benchmarks/results/planted_entries.md). ``lift``: the label needs
    a credited round before the window whose conditioned success stood at least ``lift_margin`` above the
    plain one, a level the plain members reach over the window; an entry that caught up without that
    leaves as ``not_helping`` (with that rule off, only ``stale`` or the size cap can remove it)."""
    lift_margin: float = Field(0.25, gt=0, le=1)
    """``internalized_needs: lift``: the gap in success, conditioned over plain, that shows the entry helped."""
    stale_rounds: int = Field(6, ge=1)
    """stale: not retrieved for this many rounds."""
    max_size: int = Field(200, ge=1)
    """size cap on active entries; the lowest utility go first."""
    rules: list[Literal[RULES]] = Field(default_factory=lambda: list(RULES))
    """Which of the rules above prune (default all four, the spec). An entry only the left-out rules would
    prune stays active. Why one would leave some out: of e18's final blocks (five seeds, the first 200
    test_seen tasks) 18% lack a stage their task takes, and 101 of those missing stages had only pruned
    entries, 64 of them by ``internalized`` and 26 by ``not_helping``, mostly the task types' own steps
    (benchmarks/results/block_coverage_household_e18.md), while EDGE's final plain policy still skips the
    step as often as GRPO's. With ``[stale, size_cap]`` on top of e18 (sweep row e22, five seeds) 10% of the
    final blocks lack a stage, pruned stages fall from 101 to 6, the plain success moves +1.4 [-1.3, 4.2]
    against e18 (three seeds' runs differ, two are identical) and the success with the bank +2.5 [-2.3, 7.4]:
    within noise, so the default keeps all four."""


class BankConfig(_Section):
    """The experience bank: retrieval, credit, synthesis (EDGE methods only)."""

    embedder: Literal["minilm", "hash"] = "minilm"
    """``minilm``: all-MiniLM-L6-v2, offline; ``hash``: fast deterministic word hashing (tests)."""
    top_k: int = Field(2, ge=1)
    """Entries retrieved per task."""
    similarity_threshold: float = Field(0.4, ge=-1, le=1)
    """Retrieved entries' keys (their subject, e.g. "apple") must be at least this similar to the
    task's instruction; else the group stays plain. 9-12% of household instructions are less than 0.4
    similar to their own object's word; at 0.2 on top of ``seen-and-type-steps`` (sweep row e19 of
    internalization.md, five seeds) EDGE did not move (-2.2 [-10.0, 5.6] against e18), so it stays 0.4."""
    key_must_match: bool = True
    """Retrieve an entry only if the words of its key (its subject) all occur in the task's
    instruction; embeddings alone confuse associated subjects (pillow / bed)."""
    block_order: Literal["similarity", "episode"] = "episode"
    """How the retrieved entries are listed in the experience block: ``similarity``, best first (the
    spec); ``episode``, in the order an episode needs them, as the environment's knowledge stages them
    (``Knowledge.guidance_stage``: where to find the object before how to transform it). Which entries
    are retrieved does not change. Default ``episode``: the learned bank's advice is worth about half
    the oracle's to the warm start in that order and nothing in the other (benchmarks/results/block_order.md).
    Runs made before this field existed listed by similarity (``BEHAVIOUR_BEFORE_FIELD``)."""
    block_rule: Literal["top_k", "complete"] = "top_k"
    """Which entries make the block: ``top_k``, the ``top_k`` most similar (the spec); ``complete``, the
    most similar entry for each step a task of its type takes (``Knowledge.task_stages``: household finds
    the object, then transforms it, takes it to the lamp or finds a second one), and no block at all when
    the bank lacks an entry for one of them: for EDGE's trained policy a block missing a step is worse
    than none (benchmarks/results/entry_probe_household.md). ``top_k`` is then not read; an environment
    without ``task_stages`` keeps ``top_k`` (a warning says so)."""
    block_follows_progress: bool = False
    """Drop from a conditioned episode's block, after each step, the entries of the stages the episode
    has completed (``Knowledge.stages_done``: household's find-the-object once every object the task
    needs is in hand, its transform once done), and show no block once nothing is left. Off: the block
    stays as retrieved for the whole episode (the spec). The household's find advice names where the
    object lies, and an agent that holds it and no longer sees the take in its prompt goes back there
    (step_probe_o23_place_xeon10.md). The distillation's teacher sees the block as the episode would
    have at each state, and no sample is made where it would be empty. The warm start's advised
    episodes are shown the block the same way, so the field changes every method's warm start. Measured
    (session 28, five seeds): on warm starts that never saw such a block the oracle control loses 5.3
    points (o25 in internalization.md); from warm starts taught it GRPO ends 16.8 points higher and leads
    the oracle control and EDGE (benchmarks/results/shared_settings.md). Off: more competent plain
    demonstrations lift GRPO as much without it (session 29), and its lead over the methods with experience
    holds on test_unseen too."""
    per_step: bool = False
    """Re-retrieve after every step of a conditioned trajectory, from the instruction plus the new
    observation (keys may then also match what the agent sees, e.g. a tool on a counter). Off by
    default: one retrieval per task keeps the block fixed, so the group's Delta is about one block."""
    in_memory_search: bool = True
    """Answer retrieval from an in-memory copy of the active vectors, rebuilt when the table changes
    (< 1 ms a query at 100k entries, 4 x dim bytes per entry of memory); False queries LanceDB each time
    (~6-7 ms fixed cost a query; add a vector index for very large banks)."""
    rho: float = Field(0.5, ge=0, le=1)
    """Share of each group conditioned on the retrieved entries: G_e = round(rho * G)."""
    rho_schedule: Literal["constant", "withdraw", "handoff"] = "constant"
    """``constant``: ``rho`` every round (the spec). ``withdraw``: the scaffold is withdrawn as the plain
    policy catches up, as Skill0 withdraws skill context by curriculum: round k conditions
    rho_k = rho_min + (rho - rho_min) * min(1, L / L_first) of each group, where L is the scaffold's lead in
    the last round whose groups retrieved (the share of the conditioned members' success the plain members
    had not reached: max(q - p, 0) / q) and L_first that of the first such round
    (``edge.algorithms.contribution.scheduled_rho``). ``handoff``: the scaffold is removed at once from
    round ``handoff_round`` on: nothing is retrieved, no member is conditioned and nothing is distilled, so
    those rounds are GRPO's update (same episodes and optimizer steps) on the policy the scaffold trained.
    Measured (benchmarks/results/handoff.md, five seeds): o23's update handed off after round 3 (sweep row
    o26) ends where o23 kept ends on the benchmark's household (+0.2 [-3.2, 3.6]; ten seeds -0.7 [-3.4,
    2.0]), with the lead it had after round 3; in the moved world 3.7 points higher than kept. Off by
    default: the spec's scaffold stays on, and the learned bank's runs handed off (e24) did not gain (-2.4
    [-7.8, 3.1])."""
    rho_min: float = Field(0.25, ge=0, le=1)
    """``rho_schedule: withdraw``: the share still conditioned once the plain members have caught up (kept
    above 0 so that Delta, the credit and the distillation gate stay measured)."""
    handoff_round: int = Field(4, ge=1)
    """``rho_schedule: handoff``: the first round trained without the scaffold (rounds count from 0)."""
    condition_when: Literal["always", "plain_failed"] = "always"
    """Which groups are split: ``always``, every group whose task retrieved (the spec: its first
    round(rho * G) members see the block); ``plain_failed``, the plain members play first and the block is
    shown only in the groups where every one of them failed, the other groups playing plain (GRPO's group),
    as Guide (Nath et al. 2025) adds guidance only where the policy fails on its own. The same episodes
    and steps a round; the scaffold withdraws task by task as the plain policy learns, and the plain policy
    keeps GRPO's on-policy episodes wherever they carry a signal. Delta is then measured only where the
    plain members failed (it is the conditioned members' success, never negative), so a learned bank's
    utilities read higher than under ``always``; ``decided_by: half_plain`` measures it against plain
    members the choice did not look at. Needs 0 < round(rho * G) < G. Measured (internalization.md row o31, o26
    with it, ten seeds): the block went to 59% of the groups in round 0 and 28% in round 3 (40% of o26's advised
    episodes); 51.0% plain, +4.1 [0.8, 7.4] over GRPO with eight seeds of ten ahead, and +0.1 [-3.9, 4.0] against
    o26: a steadier lead, not a larger one, so ``always`` (the spec) stays."""
    decided_by: Literal["every_plain", "half_plain"] = "every_plain"
    """``condition_when: plain_failed``: which plain members decide whether a group is shown the block.
    ``every_plain``: all of them must fail; Delta is then measured against members chosen because they
    failed, so it is the conditioned members' success and never negative: an entry that misleads still
    earns credit wherever an advised member wins despite it, and its utility never falls below zero, so the
    ``not_helping`` rule cannot remove it (benchmarks/results/planted_entries.md). ``half_plain``: the first
    half of the plain members (by member index) decide, and Delta is measured against the other half,
    which the decision never saw: an unbiased estimate of what the block adds where it is shown, at the
    price of fewer members on each side and of a looser test (two failures of two instead of four of
    four). Every plain member still takes the PG term. Needs at least two plain members."""
    conditioned_pg: Literal["all", "helpful", "none", "plain", "own-and-plain"] = "all"
    """How the conditioned members take the policy-gradient term: ``all``, in their own context (the
    spec); ``helpful``, only those of groups where the experience helped (Delta > 0); ``none`` (they
    then serve the credit and the distillation only); ``plain``, in the plain context, the block
    removed from the prompt (old log-probs recomputed there); ``own-and-plain``, both. PG on
    conditioned members where the block did not help can teach the model to ignore the block."""
    advantage_baseline: Literal["group", "plain"] = "group"
    """What a split group's advantages are measured against: ``group``, the mean of all its members, plain
    and conditioned (the spec, GRPO's formula over the whole group); ``plain``, the mean of its plain members
    only, the plain policy's own value on the task (``edge.algorithms.grpo.plain_baseline_advantages``;
    the whole group's std scales both). Why: under ``group`` the advised members' wins raise the baseline, so
    a group whose plain members all failed pushes each of their episodes down (GRPO's all-failed group
    carries nothing), and an advised episode replayed in the plain context (``conditioned_pg: plain``,
    ``own-and-plain``) is credited against a mean it helped raise, not against what the plain policy does.
    Groups that are not split keep GRPO's advantages under either. Measured (internalization.md, session 34):
    on o31 (row o33) +8.5 [1.4, 15.6] over GRPO on five seeds, but +3.9 [-1.1, 8.9] on ten and -0.2 [-4.1, 3.7]
    against o31; on o26 (o34, five seeds) -0.4 [-4.3, 3.5]; with the learned bank (e26 on e25) +1.8 [-3.9, 7.5].
    Not separated, so ``group`` (the spec) stays."""
    oracle_advice: Literal["truth", "misleading"] = "truth"
    """What the oracle control (``edge-oracle-bank``) shows every task, in training and in its with-advice
    evaluation: ``truth``, the environment's true advice (the ceiling of what the scaffold can teach);
    ``misleading``, the same advice made false in the same words (``Knowledge.misleading_advice``: where
    the object does not lie, the wrong transformation). The control for the paper's open question whether
    bad behaviour is distilled too: the spec distils only where the advice helped (c = max(Delta, 0)),
    ``distill.gate: retrieved`` wherever it was shown. Other methods ignore it. Measured
    (benchmarks/results/misleading_advice.md, ten seeds): under the spec's gate the plain policy ends level with
    GRPO (+0.2 [-5.3, 5.7], row m0); ungated, 15.7 points below it (m1), doing the false transformation."""
    eta: float = Field(0.3, gt=0, le=1)
    """Utility EMA rate: u <- (1 - eta) u + eta * Delta."""
    credit: Literal["gap", "margin", "soft", "utility"] = "gap"
    """c(x), the weight of a group's distillation: ``gap``, max(Delta, 0) (the spec); ``margin``, Delta
    where it is at least ``credit_margin``, else 0; ``soft``, sigmoid(credit_sharpness * (Delta -
    credit_margin)); ``utility``, max(mean utility of the entries the group saw, this round's Delta
    included, 0) (needs a stored bank: not the oracle control)."""
    credit_margin: float = Field(0.25, ge=-1, le=1)
    credit_sharpness: float = Field(8.0, gt=0)
    merge_threshold: float = Field(0.95, ge=-1, le=1)
    """New guidance at least this similar (by text) to an active entry of its task type is merged
    into it; a failure signature that an active entry already answers gets nothing new."""
    max_chars: int = Field(300, ge=20)
    """Guidance length cap after sanitising."""
    evidence: Literal["round", "accumulated"] = "round"
    """What guidance is written from: the environment's evidence of this round's trajectories only
    (``round``), or accumulated over every round so far (``accumulated``: household counts where
    objects were seen and, above all, where winning episodes took them; kept in
    ``round_<k>/evidence.json``). Default ``round``, with ``revise`` off and ``grain: task_type``: the
    three together raised retrieval (41% -> 61% of training groups) and the advice's worth to GRPO's
    policy, but EDGE's own plain success fell (seeds 0-1, benchmarks/results/bank_quality.md)."""
    sightings: Literal["every", "once-per-episode"] = "every"
    """How the evidence counts what a trajectory showed (``Knowledge.evidence``; household: where an object
    kind was seen, which orders an entry's place list): ``every`` observation, or ``once-per-episode``
    (each object in each receptacle kind once per trajectory: an agent that opens the same drawer five
    times saw one spoon, not five; ``subjects: seen``'s three sightings then mean three such). Over e16's
    training rollouts the most likely place comes first for 80% of object kinds once per episode against
    67% counting every observation after eight rounds (benchmarks/results/place_estimators_e16.md); on
    top of e16 it did not move EDGE (sweep row e17 of internalization.md), so the default stays."""
    revise: bool = False
    """When the evidence changes what an active entry should say, write a new version of it (its
    ``revises`` names the old one, which becomes ``revised``); False: the first entry for a
    signature stays until it is pruned."""
    grain: Literal["task_type", "knowledge"] = "task_type"
    """Which tasks an entry serves: ``task_type``, the failure's task type (and every type for the
    environment's generic guidance); ``knowledge``, what the environment says the guidance is about
    (household: where an object lies serves every task type that needs the object)."""
    subjects: Literal["failed", "seen", "seen-and-steps", "seen-and-type-steps"] = "failed"
    """Which subjects get knowledge entries: ``failed``, those of this round's failure signatures (the
    spec: guidance for failure modes); ``seen``, also every subject the evidence says enough about
    (``Knowledge.subject_guidance``; household: where each object kind lies, once seen 3 times), so a
    task about a subject no task has failed on yet still retrieves it; ``seen-and-steps``, also each task
    type's steps for every subject the round's tasks of the type are about, once winners showed the step
    (``Knowledge.step_guidance``; household: heat the apple with the microwave, from the tool the winners
    of heating tasks used), so that a task's block can have every step (``block_rule: complete``) before
    it has failed each; ``seen-and-type-steps``, as ``seen`` plus each task type's step written once for
    the type (``Knowledge.type_step_guidance``: "heat the object with the microwave ..."), retrieved for
    every task of the type and named for the task's own object (``Knowledge.name_subject``), unless an
    entry about the task's object already gives that step: a task then gets its type's step even when
    no task about its object was played, which ``seen-and-steps`` needs (block anatomy: a third of e16's
    blocks lacked a step, nearly all for want of an entry). Measured (sweep row e18 of internalization.md):
    blocks lacking a step become rare, but EDGE's final plain success does not move (−0.3 [−7.3, 6.6]
    against GRPO), so the default stays ``failed``. All three need ``grain: knowledge`` (the subject's
    entries serve every task type)."""
    synthesizer: Literal["template", "lm"] = "template"
    lm_endpoint: str | None = None
    """LM synthesizer: base URL of an OpenAI-compatible server (…/v1/chat/completions is appended)."""
    lm_model: str = "local"
    """LM synthesizer: model name at the endpoint, or a local Hugging Face folder when no endpoint."""
    prune: PruneConfig = Field(default_factory=PruneConfig)
    seed_file: Path | None = None
    """Entries the bank starts with, written before round 0 collects (``edge/bank/seeding.py``): a JSON Lines
    file, one entry a line with text, kind, task_type, signature and key as a stored entry has them, or a
    run's ``round_<k>/bank.parquet`` (its active entries). Seeded entries are credited and pruned like
    written ones; a JSON Lines one is never revised by the template writer (only pruning removes it). The
    run records the file's SHA-256 in ``bank_seed.json``. None (default): the bank starts empty, as the
    spec's. ``data/seeds/household_false_steps.jsonl`` plants a false step for each transformation type
    (benchmarks/planted_entries.py: does the co-evolution remove an entry that misleads?)."""
    bootstrap: Literal["none", "demonstrations"] = "none"
    """``demonstrations``: before round 0 collects, the bank's first entries are written, as a round writes
    guidance, from the warm start's plain demonstrations (``warmup``'s explorer and competent episodes for this
    seed, played again; ``edge/bank/seeding.py``), and round 0's accumulated evidence starts from what they
    showed. The advised demonstrations, which follow the oracle's advice, are left out. No episode is added:
    every method's warm start was cloned from the same demonstrations. Why: the scaffold does its work in the
    first rounds (handoff.md: the oracle control handed off after round 1 gains about as much as after round 3), and
    an empty bank shows nothing in round 0. ``none`` (default): the bank starts empty, as the spec's.
    Measured (session 45, five seeds on an Intel Xeon, internalization.md): on o45's update with e22's bank
    options (row e49) +7.75 [-0.4, 15.9] over GRPO, 73% of the oracle control's gain on the same seeds, +2.5
    [-5.1, 10.1] against the same without it (e48); on e26's options (e50) -1.35 by seed. Not separated, so
    ``none`` stays."""

    @model_validator(mode="after")
    def _one_start(self) -> BankConfig:
        if self.seed_file is not None and self.bootstrap != "none":
            raise ValueError(f"bank.seed_file ({self.seed_file}) and bank.bootstrap ({self.bootstrap}) both give the "
                             "bank its first entries; set one of them (bank.bootstrap: none to keep the seed file)")
        return self

    @model_validator(mode="after")
    def _subjects_serve_every_type(self) -> BankConfig:
        if self.subjects != "failed" and self.grain != "knowledge":
            raise ValueError(f"bank.subjects: {self.subjects} writes entries that serve every task type, which needs "
                             f"bank.grain: knowledge (got grain: {self.grain})")
        return self

    @model_validator(mode="after")
    def _withdraw_down_to_less(self) -> BankConfig:
        if self.rho_schedule == "withdraw" and self.rho_min > self.rho:
            raise ValueError(f"rho_min ({self.rho_min}) must not exceed rho ({self.rho}): the schedule withdraws "
                             "the scaffold from rho down to rho_min")
        return self


class DistillConfig(_Section):
    """Reverse-KL distillation of the conditioned teacher into the plain student."""

    coef: float = Field(1.0, ge=0)
    """lambda_d: weight of L_distill in the update (0 turns distillation off)."""
    estimator: Literal["exact", "sampled"] = "exact"
    """``exact``: sum over the admissible actions (score mode); ``sampled``: on the student's action."""
    divergence: Literal["reverse", "forward"] = "reverse"
    """Which KL the plain student is pulled by: ``reverse``, KL(student || teacher) (the spec, mode-seeking:
    it reshapes the mass on actions the student takes, and its gradient on an action the student rarely
    takes is small however much the teacher favours it); ``forward``, KL(teacher || student) (mass-covering:
    the gradient on the student's logit of an action is p_student - p_teacher, so an advised action the plain
    policy neglects rises by as much as the teacher favours it; on-policy distillation with a forward KL is one of
    GKD's (Agarwal et al. 2024) choices). Why an option: on the learned bank the reverse KL per distilled
    state stays at 0.32-0.37 whatever lambda_d (sessions 38-39), the limit issue 14 calls the KL that
    stays. ``distill_kl`` in the metrics is the reverse KL under both, one measure of the gap. ``forward``
    needs ``estimator: exact``. Measured (internalization.md, ten seeds): the reverse KL per distilled state
    stays (0.35 against e26's 0.36, row e43; 0.29 against o31's 0.28, row o36); the plain policy -1.0
    [-3.5, 1.6] against e26 and -1.4 [-4.2, 1.5] against o31. So ``reverse`` (the spec) stays."""
    coef_decay_rounds: int | None = Field(None, ge=1)
    """D: lambda_d falls linearly from ``coef`` in round 0 to 0 in round D and stays 0 after,
    lambda_d(k) = coef * max(0, 1 - k / D) (``edge.algorithms.distill.scheduled_coef``; the round's value is
    ``distill_coef`` in its metrics). Why: the advice adds most inside the first rounds' groups and little
    later (training_anatomy.md), so the pull can be spent where the teacher is ahead. A learned bank is empty
    in round 0 and distils from round 1 on: with ``coef: 2`` and D = 8, rounds 1-7 pull at 1.75 down to 0.25,
    a mean of 1, the default's total pull over the same rounds. It counts rounds from 0
    and not from ``train.rounds``, so extending a run does not rewrite the coefficients it trained with.
    None (the spec, the default): lambda_d = coef in every round."""
    states: Literal["plain", "conditioned", "both"] = "plain"
    """Which states the plain student is distilled on: ``plain``, the plain members' own states (the
    spec); ``conditioned``, the conditioned members' states with the experience removed (the states the
    scaffold led to); ``both``. The last two need ``estimator: exact``. ``both`` on top of
    ``conditioned_pg: own-and-plain`` and ``anchor: 1`` (sweep row o23 of internalization.md, five seeds): retention
    92.3% against 88.1%, plain +2.4 [-0.9, 5.7] against ``plain``: not separated, so ``plain`` stays."""
    gate: Literal["credit", "retrieved"] = "credit"
    """Which groups are distilled: ``credit``, those whose experience helped (c(x) > 0), weighted by
    c(x) (the spec); ``retrieved``, every group that retrieved, each weighted 1. The gate is what keeps
    guidance that hurts out of the plain policy: with the oracle's advice made false
    (``bank.oracle_advice: misleading``, ten seeds) the plain policy ends level with GRPO under ``credit``
    and 15.7 [10.5, 20.9] points below it under ``retrieved`` (benchmarks/results/misleading_advice.md)."""
    normalize: Literal["shared", "separate", "pg"] = "shared"
    """``shared``: both terms are averaged with the same unit weights over all states of the minibatch
    (the spec), so distillation-only states also dilute the PG term; ``separate``: the PG term is
    averaged over the PG states alone (GRPO's update, whatever is distilled) and L_distill over the
    distilled states alone, so each distilled state pulls harder the fewer they are; ``pg``: both terms
    over the PG states' units, so the PG term is GRPO's and a distillation-only state (``states:
    conditioned`` or ``both``, ``replay_rounds``) adds its pull at the weight of a PG state. Where every
    distilled state is a PG sample's (``states: plain``, no replay) ``pg`` is ``shared`` exactly: the
    control for replay that changes nothing else. Measured (session 43, docs/RESULTS.md): on o17 (five seeds)
    ``separate`` multiplies the distillation term's share of the weight about five times (0.21 to 1.0) and ends
    -2.6 [-8.8, 3.5] plain, -5.1 [-13.0, 2.7] with the advice against ``shared`` (o43); ``pg`` with
    ``replay_rounds: 3`` (o45, eight seeds) +2.6 [-0.7, 5.9] plain against o17. Session 44, on an Intel Xeon:
    o45 +2.15 [0.5, 3.8] against o17 over five seeds, every seed ahead; but on the learned bank (e47: e26,
    whose distilled states are all distillation-only, so ``pg`` raises their pull, with replay) -6.6 against
    e26 on three seeds. One section serves both banks, so ``shared`` stays."""
    teacher: Literal["current", "base"] = "current"
    """``current``: the weights that collected the rollouts, with the experience (the spec); ``base``:
    the run's starting checkpoint with the experience, the same for the whole run. Measured (session 41,
    internalization.md rows o38 and o39, ten seeds): on o31 without the anchor (which needs ``current``),
    ``base`` ends +2.1 [-1.5, 5.7] plain against ``current`` and -0.3 [-3.0, 2.5] against o31, retention 91.6%;
    the reverse KL per distilled state to the fixed teacher rises over rounds 0-3 (0.29 to 0.40) where the
    current teacher's stays (o38: 0.29 to 0.30): a fixed target is not approached either. ``current`` stays."""
    teacher_follows_progress: bool = False
    """The teacher sees, at each distilled state, the block without the entries of the stages the episode
    has completed by then (``Knowledge.stages_done``, as ``bank.block_follows_progress`` shows it), and a
    state with none left is not distilled; the rollouts still show the block whole. Why: with the find advice
    in its prompt, an agent that holds the object heads back to where such objects lie (o23's final policy
    with the advice heads a carried object to the target 4.5 points of share less often;
    step_probe_o23_place_xeon10.md), so on the states after the take the teacher is worse than the plain
    policy, and distilling there pulls the plain policy the wrong way. ``bank.block_follows_progress`` changes
    the rollouts and the warm start too (o25: -5.3 points against o23); this changes only the target.
    Measured (session 41, internalization.md row o40, on o31, ten seeds): plain +0.2 [-1.6, 2.0] against o31,
    with the advice +2.2 [0.6, 3.8] (58.9%), on 18% fewer distilled states; the reverse KL per distilled state
    0.27 (o31 0.28). The scaffold gains, the plain policy does not, so False (the spec) stays: the block as
    retrieved at every state."""
    guidance_scale: float = Field(1.0, ge=1.0)
    """alpha: the teacher is the plain context's distribution moved alpha times as far as the experience
    moves it, softmax(l_plain + alpha (l_advised - l_plain)) over the admissible actions, at the teacher's
    weights (classifier-free guidance applied to the target). Why: the advised network follows the advice
    only weakly; on o23's household runs, before the object is found, it puts 44.8% of the mass on the
    advised places (plain 34.9%, chance 32.4%; step_probe_o23_find_xeon10.md), which caps what distilling
    its outputs can pass on. The anchor still holds the advised outputs themselves. Needs ``estimator:
    exact``; costs one more forward pass over the distilled states. Measured (internalization.md row o30,
    alpha = 2 on o26, five seeds): -6.2 [-14.1, 1.8] points plain and -5.2 with the advice against o26, like
    every stronger pull before it. 1.0 (the spec, the default): the advised outputs."""
    anchor: float = Field(0.0, ge=0)
    """Weight of KL(teacher || live weights) on the distilled states *with* the experience: it holds the
    advised context at the round's teacher while the plain context is pulled towards it (student and
    teacher share the weights, so without it both move and meet in the middle). 0 (the spec): off.
    Needs ``estimator: exact`` and ``teacher: current``."""
    extra_epochs: int = Field(0, ge=0)
    """Epochs of distillation alone after the round's update: the distilled states (with the anchor, if
    set) again in ``grpo.minibatches`` minibatches an epoch (fewer if there are fewer states), without the
    PG term or the reference KL, towards the same frozen teacher, with the same optimizer (its moments
    carry over both ways). Each such step averages the distillation term over distilled states only, as
    ``normalize: separate`` does. Up to ``extra_epochs x grpo.minibatches`` optimizer steps a round more
    than GRPO takes (``distill_extra_steps`` beside ``optimizer_steps`` in the metrics): an extra budget
    every comparison must declare. 0 (the spec): distillation rides on the PG steps only."""
    extra_lr_scale: float = Field(1.0, gt=0, le=1)
    """Multiplies ``grpo.lr`` for the extra steps of ``extra_epochs`` only (the round's update keeps
    GRPO's): Adam moves each weight about lr a step whatever the loss's scale, so this bounds how far the
    extra budget can move the policy (12 extra steps at 0.25 move it at most about as far as 3 at the full rate). 1.0:
    the update's rate."""

    replay_rounds: int = Field(0, ge=0)
    """The distilled states of the previous ``replay_rounds`` rounds join this round's distillation as
    distillation-only samples: each state seen again without the block, the teacher recomputed with this
    round's collecting weights and the block that state's group saw. No episode is added and the update
    keeps its optimizer steps (its minibatches hold more states). After a hand-off (``bank.rho_schedule``)
    the last scaffolded rounds' states go on being distilled for as many rounds. Pair it with ``normalize:
    pg`` (or ``separate``), or the replayed states dilute the PG term under ``shared``. Why: training fits each round's
    16 tasks and moves on, and a plain copy fitted to the advised warm start on 32 tasks' states at once
    gains twice what it gains on 8 in the same steps, its KL on held-out tasks falling further
    (benchmarks/results/distill_generalisation_base.md). Measured (session 42, internalization.md rows o42
    and its control o41, o31 with ``normalize: separate``; eight seeds on an AMD EPYC): the KL per distilled
    state falls round by round (0.30 to 0.13 by round 3; o41 0.30 to 0.19), plain 49.2%, +4.4 [1.5, 7.2]
    over GRPO with every seed ahead, +2.3 [-2.2, 6.8] against o41, retention 90.2% (o41 83.5%), the advice
    -1.5 [-7.4, 4.4]; the update stage takes 2.5 times as long. Session 43 (the same machine), on o17,
    whose scaffold stays on: with ``pg`` (o45, eight seeds) +2.6 [-0.7, 5.9] plain against o17, +9.97
    [6.8, 13.2] over GRPO, retention 92.6%; with ``separate`` (o44, five seeds) +0.4 [-5.7, 6.6] against o43.
    Session 44 (an Intel Xeon): o45 +7.8 [3.1, 12.5] over GRPO over ten seeds (its first five +10.55), and
    +2.15 [0.5, 3.8] against o17 over five, every seed ahead; on the learned bank with ``pg`` (e47) -6.6
    against e26 on three seeds. The oracle control gains and the learned bank loses, and ``distill`` serves
    both, so 0 (the spec): this round's states only."""

    @model_validator(mode="after")
    def _options_that_need_distillation(self) -> DistillConfig:
        if self.anchor > 0 and (self.estimator != "exact" or self.teacher != "current"):
            raise ValueError("distill.anchor holds the live weights' advised outputs at the round's teacher, "
                             "which needs distill.estimator: exact and distill.teacher: current "
                             f"(got estimator: {self.estimator}, teacher: {self.teacher})")
        if self.divergence == "forward" and self.estimator != "exact":
            raise ValueError("distill.divergence: forward sums KL(teacher || student) over the admissible actions, "
                             f"which needs distill.estimator: exact (got estimator: {self.estimator})")
        if self.guidance_scale != 1.0 and self.estimator != "exact":
            raise ValueError(f"distill.guidance_scale amplifies the teacher over the admissible actions, which needs "
                             f"distill.estimator: exact (got estimator: {self.estimator}, "
                             f"guidance_scale: {self.guidance_scale})")
        if self.extra_lr_scale != 1.0 and self.extra_epochs == 0:
            raise ValueError("distill.extra_lr_scale sets the learning rate of the extra steps of "
                             f"distill.extra_epochs, which is 0 (got extra_lr_scale: {self.extra_lr_scale}); "
                             "set extra_epochs > 0 or leave extra_lr_scale at 1.0")
        for name, off in (("anchor", 0), ("extra_epochs", 0), ("guidance_scale", 1.0), ("coef_decay_rounds", None),
                          ("divergence", "reverse"), ("replay_rounds", 0)):
            if getattr(self, name) != off and self.coef == 0:
                raise ValueError(f"distill.{name} acts on the distillation term, which distill.coef: 0 turns off "
                                 f"(got {name}: {getattr(self, name)}); set distill.coef > 0 or {name}: {off}")
        return self


class EvalConfig(_Section):
    """Held-out evaluation."""

    episodes: int = Field(100, ge=1)
    """Episodes per split and setting at the base and after the last round."""
    intermediate_episodes: int | None = Field(None, ge=1)
    """Episodes at the evaluation points in between (the first ones of the same tasks, so a curve's points
    stay paired); None: ``episodes``. Cheaper curves, with the final comparison at full size."""
    splits: list[Literal["test_seen", "test_unseen"]] = Field(default_factory=lambda: ["test_seen"])
    every: int = Field(1, ge=1)
    """Evaluate every this many rounds (and always after the last)."""
    greedy: bool = False
    """Take the most likely action instead of sampling at the policy temperature."""
    base_cache_dir: Path | None = None
    """Where the starting checkpoint's evaluation is stored for reuse: runs that start from the same
    checkpoint with the same seed, policy and evaluation settings evaluate it once between them (the
    learning benchmark's methods share one per seed). None: every run evaluates its own."""


METHODS = ("grpo", "edge", "edge-no-distill", "edge-static-bank", "edge-no-prune", "edge-oracle-bank",
           "edge-random-bank")
"""Every method name, in the order tables list them (``train.method`` documents each)."""


class TrainConfig(_Section):
    """The training run (`edge train`)."""

    env: str = "household"
    method: Literal[METHODS] = "grpo"
    """``grpo``: the baseline. ``edge``: the method. Ablations: ``edge-no-distill`` (lambda_d = 0),
    ``edge-static-bank`` (synthesis in round 0 only, no pruning), ``edge-no-prune``. Controls:
    ``edge-oracle-bank`` (every task retrieves the environment's true advice; no bank, no synthesis,
    no pruning: the ceiling of what the scaffold can teach) and ``edge-random-bank`` (the bank co-evolves
    as EDGE's, but a task that retrieves gets as many entries drawn at random from the active bank:
    the floor, guidance with no relevance)."""
    rounds: int = Field(10, ge=1)
    base_checkpoint: Path | None = Path("checkpoints/base")
    """Warm-started model to start from; None starts from policy.model as loaded."""
    runs_dir: Path = Path("runs")
    run_name: str | None = None
    """Folder name under runs_dir; default ``<env>-<method>-s<seed>``."""


@dataclass(frozen=True)
class MethodSettings:
    """What a method name means, as parameters over the one code path."""

    use_bank: bool
    """Part of each group is conditioned on experience (false: plain GRPO)."""
    rho: float
    distill_coef: float
    synthesize_after_first_round: bool
    prune: bool
    experience: Literal["bank", "oracle", "random"] = "bank"
    """Where the experience comes from: retrieved from the bank, the environment's true advice for
    every task, or entries drawn at random from the bank for the tasks that retrieve."""

    @property
    def stores_bank(self) -> bool:
        """The run keeps a LanceDB bank (credit, synthesis, pruning, snapshots)."""
        return self.use_bank and self.experience != "oracle"


def method_settings(params: EdgeParams) -> MethodSettings:
    method, bank = params.train.method, params.bank
    if method == "grpo":
        return MethodSettings(False, 0.0, 0.0, False, False)
    if method == "edge-oracle-bank":
        return MethodSettings(True, bank.rho, params.distill.coef, False, False, experience="oracle")
    return MethodSettings(
        use_bank=True, rho=bank.rho,
        distill_coef=0.0 if method == "edge-no-distill" else params.distill.coef,
        synthesize_after_first_round=method != "edge-static-bank",
        prune=method not in ("edge-no-prune", "edge-static-bank"),
        experience="random" if method == "edge-random-bank" else "bank",
    )


IGNORED_SECTIONS: dict[str, tuple[str, ...]] = {"grpo": ("bank", "distill"), "edge-no-distill": ("distill",)}
"""Sections of ``params.yaml`` a method never reads: GRPO conditions nothing and distils nothing, the
ablation without distillation distils nothing. One ``params.yaml`` drives every method, so these are
not refused; ``ignored_settings`` names the ones set away from their defaults."""


READ_ONLY_BY: dict[str, tuple[str, ...]] = {
    "bank.oracle_advice": ("edge-oracle-bank",),
    "bank.seed_file": ("edge", "edge-no-distill", "edge-static-bank", "edge-no-prune", "edge-random-bank"),
    "bank.bootstrap": ("edge", "edge-no-distill", "edge-static-bank", "edge-no-prune", "edge-random-bank"),
}
"""``section.field`` of a section the other methods do read that only these methods read; named beside
``IGNORED_SECTIONS``' settings when set away from its default for another method."""


def ignored_settings(params: EdgeParams) -> list[str]:
    """``section.field`` of every setting changed from its default that ``train.method`` does not read
    (``IGNORED_SECTIONS``, ``READ_ONLY_BY``), e.g. ``distill.anchor`` for GRPO; `edge train` warns about them, so a
    comparison whose baseline silently ran without an option says so."""
    ignored = []
    for section in IGNORED_SECTIONS.get(params.train.method, ()):
        given = getattr(params, section).model_dump(mode="json")
        default = type(getattr(params, section))().model_dump(mode="json")
        ignored += _changed(given, default, section)
    for field, readers in READ_ONLY_BY.items():
        section, name = field.split(".")
        if params.train.method in readers or section in IGNORED_SECTIONS.get(params.train.method, ()):
            continue
        if getattr(getattr(params, section), name) != getattr(type(getattr(params, section))(), name):
            ignored.append(field)
    return ignored


def _changed(given: dict[str, Any], default: dict[str, Any], prefix: str) -> list[str]:
    """Dotted names of the fields of ``given`` that differ from ``default`` (nested sections walked)."""
    out = []
    for name, value in given.items():
        if isinstance(value, dict) and isinstance(default.get(name), dict):
            out += _changed(value, default[name], f"{prefix}.{name}")
        elif value != default.get(name):
            out.append(f"{prefix}.{name}")
    return out


class EdgeParams(_Section):
    """Everything in ``params.yaml``."""

    seed: int = 0
    """One seed fixes task generation, sampling and model initialisation."""
    data: DataConfig = Field(default_factory=DataConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    warmup: WarmupConfig = Field(default_factory=WarmupConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    bank: BankConfig = Field(default_factory=BankConfig)
    distill: DistillConfig = Field(default_factory=DistillConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)

    @model_validator(mode="after")
    def _plain_members_play_first(self) -> EdgeParams:
        conditioned, size = round(self.bank.rho * self.rollout.group_size), self.rollout.group_size
        if self.bank.condition_when == "plain_failed" and not 0 < conditioned < size:
            raise ValueError(f"bank.condition_when: plain_failed lets a group's plain members play first and "
                             f"conditions the others where they all failed, which needs both in every group: "
                             f"0 < round(bank.rho x rollout.group_size) < rollout.group_size (got rho {self.bank.rho} "
                             f"of {size}: {conditioned} conditioned)")
        if self.bank.decided_by == "half_plain" and (self.bank.condition_when != "plain_failed"
                                                     or size - conditioned < 2):
            raise ValueError(f"bank.decided_by: half_plain lets half of a group's plain members decide where the block "
                             f"goes and measures Delta against the other half, which needs bank.condition_when: "
                             f"plain_failed and at least two plain members (got condition_when: "
                             f"{self.bank.condition_when}, {size - conditioned} plain of {size})")
        return self


def _describe(err: ValidationError, source: str) -> str:
    """Every problem on one line: ``source: field: what is wrong (got value); field2: ...``."""
    problems = []
    for problem in err.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "(top level)"
        got = repr(problem.get("input"))
        problems.append(f"{where}: {problem['msg']} (got {got[:80] + '...' if len(got) > 80 else got})")
    return f"{source}: invalid configuration: " + "; ".join(problems)


def run_folder_name(params: EdgeParams) -> str:
    """The run's folder under ``train.runs_dir``: ``train.run_name``, else ``<env>-<method>-s<seed>``."""
    return params.train.run_name or f"{params.train.env}-{params.train.method}-s{params.seed}"


def argument_overrides(method: str | None = None, env: str | None = None, rounds: int | None = None,
                       seed: int | None = None, run_name: str | None = None) -> list[str]:
    """The ``section.key=value`` overrides of a command's or flow's own arguments (None: not given)."""
    return [f"{key}={value}" for key, value in (("train.method", method), ("train.env", env),
                                                ("train.rounds", rounds), ("seed", seed),
                                                ("train.run_name", run_name)) if value is not None]


BEHAVIOUR_BEFORE_FIELD: dict[tuple[str, str], Any] = {("bank", "block_order"): "similarity"}
"""Retrieval fields whose default is not what runs did before the field existed: (section, field) ->
that old behaviour. A run's ``params.json`` is a full dump of its parameters, so one that lacks such a
field was written before it existed and ran the old way; ``run_params`` reads it so, and an old EDGE run
is never taken for (or resumed as) a run with the new default."""


def run_params(recorded: dict[str, Any]) -> EdgeParams:
    """The parameters a run folder's ``params.json`` records. Fields added since it was written take
    their defaults, except that a run whose policy saw bank entries (``experience: bank``) gets the old
    behaviour of ``BEHAVIOUR_BEFORE_FIELD``; for the other methods (GRPO, the oracle and random controls)
    those fields change nothing, so their runs stay the same runs."""
    params = EdgeParams.model_validate(recorded)
    settings = method_settings(params)
    if not settings.use_bank or settings.experience != "bank":
        return params
    filled = {section: dict(values) if isinstance(values, dict) else values for section, values in recorded.items()}
    for (section, name), value in BEHAVIOUR_BEFORE_FIELD.items():
        if isinstance(filled.get(section), dict):
            filled[section].setdefault(name, value)
    return EdgeParams.model_validate(filled)


def parse_params(raw: dict[str, Any], source: str = "params") -> EdgeParams:
    try:
        return EdgeParams.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_describe(err, source)) from None


def load_params(path: Path | str = "params.yaml") -> EdgeParams:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found (expected the project's params.yaml)")
    if not path.is_file():
        raise ConfigError(f"{path}: not a file (expected the project's params.yaml)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (expected YAML in UTF-8)") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise ConfigError(f"{path}: not valid YAML{at} ({getattr(err, 'problem', None) or err})") from None
    if raw is None or raw == {}:
        # An empty file would silently run the code's defaults, which are not the project's parameters.
        raise ConfigError(f"{path}: empty; expected the sections {', '.join(EdgeParams.model_fields)}")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level, got {type(raw).__name__}")
    return parse_params(raw, source=str(path))


def with_overrides(params: EdgeParams, overrides: list[str]) -> EdgeParams:
    """Apply ``section.key=value`` overrides (values parsed as YAML) and re-validate everything."""
    raw = params.model_dump(mode="json")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected section.key=value")
        node = raw
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                raise ConfigError(f"override {item!r}: {part!r} is not a section of params")
            node = node[part]
        try:
            node[parts[-1]] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: the value is not valid YAML "
                              f"({getattr(err, 'problem', None) or 'parse error'})") from None
    return parse_params(raw, source="params with overrides " + " ".join(overrides))
