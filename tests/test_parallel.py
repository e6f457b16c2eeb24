"""Environments in worker processes behave exactly like in-process ones, and say so when they fail."""

import functools

import pytest

from edge.envs.household import HouseholdEnv, generate_tasks
from edge.envs.parallel import EnvPool, RemoteEnv, WorkerError, reset_all, step_all


def _fail(message: str) -> None:
    raise KeyError(message)


@pytest.fixture(scope="module")
def pool():
    pool = EnvPool("household", functools.partial(HouseholdEnv), workers=2)
    yield pool
    pool.close()


def test_remote_environments_replay_local_ones_step_for_step(pool):
    tasks = generate_tasks("test_seen", 5, seed=0)
    remote = [pool.env(max_steps=6) for _ in tasks]
    local = [HouseholdEnv(max_steps=6) for _ in tasks]
    assert all(isinstance(e, RemoteEnv) and e.max_steps == 6 for e in remote)
    assert reset_all(remote, tasks) == reset_all(local, tasks)
    for step in range(6):
        actions = [("dance" if (i + step) % 3 == 0 else "look") for i in range(len(tasks))]
        assert step_all(remote, actions) == step_all(local, actions)


def test_worker_errors_carry_the_worker_traceback(pool):
    env = pool.env(max_steps=5)
    with pytest.raises(WorkerError, match=r"call reset\(task\) before step\(\)"):
        env.step("look")
    with pytest.raises(WorkerError, match=r"KeyError: 'boom'(.|\n)*_fail"):
        pool.call(_fail, "boom").result()
    task = generate_tasks("train", 1, seed=0)[0]
    assert env.reset(task).instruction == task.instruction  # the worker carries on after an error


def test_mismatched_batches_are_refused():
    with pytest.raises(ValueError, match="2 environments but 1 actions"):
        step_all([HouseholdEnv(), HouseholdEnv()], ["look"])
