"""The WebShop environment over WebShop's own data: the shop's pages and actions on the real catalog.

Pages, actions, step limit (15), invalid-action handling and the reward are the shop's
(:class:`edge.envs.shop.env.StoreEnv`), so a policy, the bank and the pipeline see one protocol. What
this class adds is where the catalog comes from (``data_dir`` or ``$WEBSHOP_DATA``) and the check that
a task's product is in it.
"""

from __future__ import annotations

from pathlib import Path

from edge.envs.base import Task
from edge.envs.shop.env import DEFAULT_MAX_STEPS, StoreEnv
from edge.envs.webshop.data import load_data
from edge.envs.webshop.goals import ENV_NAME
from edge.envs.webshop.search import search_engine


class WebShopEnv(StoreEnv):
    """One shopper session at a time on WebShop's catalog; reset it to a task from ``generate_tasks``."""

    name = ENV_NAME

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS, data_dir: str | Path | None = None):
        data = load_data(data_dir)
        super().__init__(data, search_engine(data), max_steps)
        self.data = data

    def check_task(self, task: Task) -> None:
        asin = task.spec.get("asin")
        if asin not in self.data.by_asin:
            raise ValueError(f"task {task.task_id} wants product {asin!r}, which is not in "
                             f"{self.data.products_file}; it was made from the data in "
                             f"{task.spec.get('data_folder', 'another folder')}")


def make_env(max_steps: int = DEFAULT_MAX_STEPS, data_dir: str | Path | None = None) -> WebShopEnv:
    """A fresh environment; all instances over one version of the files share catalog and index."""
    return WebShopEnv(max_steps=max_steps, data_dir=data_dir)
