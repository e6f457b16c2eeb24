"""The policy update on several processes, launched with ``accelerate launch`` (``grpo.update_processes``).

Rollouts, scoring, the bank and evaluation stay in the training process; only the update stage,
where the backward passes are, is spread. The training process writes the round's rollouts as
always, then starts ``accelerate launch --num_processes N -m edge.distributed <run> <round>`` and
waits. Every worker opens the same run folder, builds the same samples (and teacher and reference
log-probabilities) from the same files, and runs ``train.update_stage`` with a ``grpo.Shard``: of
each minibatch it takes every N-th sample, and the gradients are summed over the workers before
clipping and the optimizer step, so the weights stay the same on every worker and equal the
one-process update up to the order of float additions (``tests/test_distributed.py``). Worker 0
writes the checkpoint and metrics; the training process then loads them as it would a resumed round.

On CPU the workers talk over gloo, on GPUs over NCCL, one GPU each (accelerate picks the backend).
Every worker computes the samples' reference and teacher log-probabilities for the whole round
(inference only, a small share of the update's time at this size); sharding those too is the next
step if it shows in a profile.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for the workers' rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_command(run_folder: Path, k: int, processes: int) -> list[str]:
    # ``--multi_gpu`` is accelerate's name for "torchrun several local processes"; with no GPU each
    # worker's ``Accelerator(cpu=True)`` makes it a gloo group on the CPU.
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "1",
            "--num_processes", str(processes), "--main_process_ip", "127.0.0.1", "--main_process_port",
            str(free_port()), "--mixed_precision", "no", "--dynamo_backend", "no",
            "--num_cpu_threads_per_process", str(max(1, _threads())),
            "-m", "edge.distributed", str(run_folder), str(k)]


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def launch_sharded_update(run_folder: Path, k: int, processes: int) -> None:
    """Run round ``k``'s update stage on ``processes`` workers and wait; a worker's failure is raised
    with its last lines of output."""
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    result = subprocess.run(launch_command(Path(run_folder), k, processes), env=env, capture_output=True,
                            text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise RuntimeError(f"the {processes}-process update of round {k} ({run_folder}) failed "
                           f"(grpo.update_processes; exit {result.returncode}):\n{tail}")


def worker(run_folder: Path, k: int) -> None:
    """One process of the sharded update (what ``accelerate launch`` runs)."""
    import torch
    from accelerate import Accelerator

    from edge.algorithms.grpo import Shard
    from edge.runs import read_run_params
    from edge.train import Run, update_stage

    params = read_run_params(run_folder)
    accelerator = Accelerator(cpu=params.policy.device == "cpu")
    if params.policy.device != "cpu":
        params.policy.device = str(accelerator.device)  # one GPU per worker
    torch.manual_seed(params.seed)  # as ``train`` does: the same global stream in every worker

    def reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
        return accelerator.reduce(tensor.to(accelerator.device), "sum").to(tensor.device)

    shard = Shard(accelerator.process_index, accelerator.num_processes, reduce_sum)
    update_stage(Run(params, run_folder), k, shard=shard)
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    worker(Path(sys.argv[1]), int(sys.argv[2]))
