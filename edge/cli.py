"""The ``edge`` command. Thin: it parses arguments and calls functions in ``edge``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from edge.envs.base import SPLITS

app = typer.Typer(no_args_is_help=True, add_completion=False, help="EDGE: experience-scaffolded RL for LM agents.")
env_app = typer.Typer(no_args_is_help=True, help="Try the text environments.")
data_app = typer.Typer(no_args_is_help=True, help="Task files.")
app.add_typer(env_app, name="env")
app.add_typer(data_app, name="data")

console = Console()


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code=2)


@env_app.command("list")
def env_list() -> None:
    """List registered environments and their scripted agents."""
    from edge.envs.registry import agent_names, env_names, get_entry

    for name in env_names():
        console.print(f"[bold]{name}[/]: {get_entry(name).description} (agents: {', '.join(agent_names(name))})")


@env_app.command("play")
def env_play(
    env: str = typer.Option("household", help="Environment name (see `edge env list`)."),
    split: str = typer.Option("test_seen", help=f"One of {', '.join(SPLITS)}."),
    policy: str = typer.Option("expert", help="Scripted agent: expert, random, or one the env ships."),
    episodes: int = typer.Option(100, min=1, help="Number of episodes (one task each)."),
    seed: int = typer.Option(0, help="Seed for tasks and the agent."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    render: bool = typer.Option(False, help="Also print the first episode as text."),
) -> None:
    """Play scripted episodes and report success, reward, steps and environment throughput."""
    from edge.envs.play import play, play_episode
    from edge.envs.registry import generate_tasks, make_agent, make_env

    try:
        report, _ = play(env, split, policy, episodes, seed, progress=not as_json)
    except ValueError as err:
        _fail(str(err))
    if render:
        task = generate_tasks(env, split, 1, seed)[0]
        episode = play_episode(make_env(env), make_agent(env, policy, seed), task, record=True)
        print("\n".join(episode.transcript))
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    table = Table(title=f"{env} / {split} / {policy} ({episodes} episodes, seed {seed})")
    for column in ("success", "mean reward", "mean steps", "invalid actions", "env steps/s"):
        table.add_column(column, justify="right")
    table.add_row(f"{report.success_rate:.1%}", f"{report.mean_reward:.3f}", f"{report.mean_steps:.1f}",
                  f"{report.invalid_action_rate:.1%}", f"{report.env_steps_per_second:,.0f}")
    console.print(table)


@env_app.command("demo")
def env_demo(
    episodes: int = typer.Option(200, min=1, help="Episodes per (environment, split, agent)."),
    seed: int = typer.Option(0, help="Seed for tasks and agents."),
) -> None:
    """Every scripted agent on every split of both built-in environments, in one table."""
    from edge.envs.play import play
    from edge.envs.registry import agent_names

    table = Table(title=f"Built-in environments, {episodes} episodes per row, seed {seed}")
    for column in ("env", "split", "agent", "success", "mean reward", "mean steps", "env steps/s"):
        table.add_column(column, justify="right" if column not in ("env", "split", "agent") else "left")
    for env in ("household", "shop"):
        for split in SPLITS:
            for policy in agent_names(env):
                report, _ = play(env, split, policy, episodes, seed, progress=True)
                table.add_row(env, split, policy, f"{report.success_rate:.1%}", f"{report.mean_reward:.3f}",
                              f"{report.mean_steps:.1f}", f"{report.env_steps_per_second:,.0f}")
    console.print(table)


@data_app.command("prepare")
def data_prepare(params: Path = typer.Option(Path("params.yaml"), help="Project parameters file.")) -> None:
    """Write the task files of every environment and split (DVC stage `prepare`)."""
    from edge.config import ConfigError, load_params
    from edge.data import prepare_tasks

    try:
        cfg = load_params(params)
    except ConfigError as err:
        _fail(str(err))
    counts = prepare_tasks(cfg.data, cfg.seed)
    for env, per_split in counts.items():
        console.print(f"{env}: " + ", ".join(f"{split} {n}" for split, n in per_split.items())
                      + f" -> {cfg.data.out_dir / env}")


if __name__ == "__main__":
    app()
