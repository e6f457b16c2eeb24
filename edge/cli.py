"""The ``edge`` command. Thin: it parses arguments and calls functions in ``edge``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from edge.config import METHODS, argument_overrides, run_folder_name
from edge.envs.base import SPLITS

app = typer.Typer(no_args_is_help=True, add_completion=False, help="EDGE: experience-scaffolded RL for LM agents.")
env_app = typer.Typer(no_args_is_help=True, help="Try the text environments.")
data_app = typer.Typer(no_args_is_help=True, help="Task files and benchmark data.")
app.add_typer(env_app, name="env")
app.add_typer(data_app, name="data")
bank_app = typer.Typer(no_args_is_help=True, help="Audit a run's experience bank.")
app.add_typer(bank_app, name="bank")
runs_app = typer.Typer(no_args_is_help=True, help="The training runs in a runs folder.")
app.add_typer(runs_app, name="runs")
config_app = typer.Typer(no_args_is_help=True, help="The effective configuration.")
app.add_typer(config_app, name="config")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that reproduce the tables in benchmarks/results/.")
app.add_typer(bench_app, name="bench")

console = Console()


def _fail(message: str) -> None:
    """One line on stderr (never wrapped to the terminal's width), exit status 2."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    raise typer.Exit(code=2)


def _by_type_table(settings: dict[str, dict]) -> Table:
    """Success per task type (rows) for each setting (columns), with the episodes behind each row
    and an "all" row: the table ALFWorld papers report. ``settings`` maps a column name to a
    report with ``success_by_type``, ``episodes_by_type`` and overall ``success`` (or ``success_rate``)."""
    first = next(iter(settings.values()))
    counts = first.get("episodes_by_type", {})
    table = Table(title="success by task type")
    table.add_column("task type")
    table.add_column("episodes", justify="right")
    for name in settings:
        table.add_column(name, justify="right")
    for task_type in sorted(first["success_by_type"]):
        table.add_row(task_type, str(counts.get(task_type, "")),
                      *(f"{r['success_by_type'].get(task_type, 0.0):.1%}" for r in settings.values()))
    table.add_row("all", str(sum(counts.values()) or ""),
                  *(f"{r.get('success', r.get('success_rate', 0.0)):.1%}" for r in settings.values()))
    return table


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
    except (ValueError, FileNotFoundError) as err:
        _fail(str(err))
    if render:
        task = generate_tasks(env, split, 1, seed)[0]
        episode = play_episode(make_env(env), make_agent(env, policy, seed), task, record=True)
        print("\n".join(episode.transcript))
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    table = Table(title=f"{env} / {split} / {policy} ({report.episodes} episodes, seed {seed})")
    for column in ("success", "mean reward", "mean steps", "invalid actions", "env steps/s"):
        table.add_column(column, justify="right")
    steps_per_second = report.env_steps_per_second
    table.add_row(f"{report.success_rate:.1%}", f"{report.mean_reward:.3f}", f"{report.mean_steps:.1f}",
                  f"{report.invalid_action_rate:.1%}", f"{steps_per_second:,.1f}" if steps_per_second < 100
                  else f"{steps_per_second:,.0f}")
    console.print(table)
    if len(report.success_by_type) > 1:
        console.print(_by_type_table({policy: report.to_dict()}))


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


def _params(path: Path, overrides: list[str] | None = None):
    """Load params.yaml, apply ``section.key=value`` overrides, validate; exit with the error if bad."""
    from edge.config import ConfigError, load_params, with_overrides

    try:
        return with_overrides(load_params(path), overrides or [])
    except ConfigError as err:
        _fail(str(err))


@app.command("warmup")
def warmup_cmd(
    params: Path = typer.Option(Path("params.yaml"), help="Project parameters file."),
    out: Path = typer.Option(None, help="Checkpoint folder (default: warmup.out_dir)."),
    set_: list[str] = typer.Option(None, "--set", help="Override a parameter, e.g. --set warmup.epochs=4."),
) -> None:
    """Behaviour-clone the tiny model on scripted demonstrations and save the base checkpoint."""
    from edge.warmup import run_warmup

    cfg = _params(params, set_)
    report = run_warmup(cfg, out)
    console.print(f"base checkpoint: {out or cfg.warmup.out_dir}  ({report['demonstration_states']} states, "
                  f"{report['seconds']:.0f} s)")
    if "advised_success" in report:
        console.print(f"test_seen success: plain {report['plain_success']:.1%}, with true advice "
                      f"{report['advised_success']:.1%} (gap {report['advice_gap']:+.1%})")
    elif "plain_success" in report:
        console.print(f"test_seen success: plain {report['plain_success']:.1%} (no oracle advice to check)")


@app.command("train")
def train_cmd(
    method: str = typer.Option(None, help=" | ".join(METHODS) + " (see train.method in edge/config.py)"),
    env: str = typer.Option(None, help="Environment (default: train.env)."),
    rounds: int = typer.Option(None, min=1, help="Rounds (default: train.rounds)."),
    seed: int = typer.Option(None, help="Seed (default: seed)."),
    run_name: str = typer.Option(None, help="Run folder name under train.runs_dir (default <env>-<method>-s<seed>)."),
    params: Path = typer.Option(Path("params.yaml"), help="Project parameters file."),
    set_: list[str] = typer.Option(None, "--set", help="Override a parameter, e.g. --set grpo.lr=5e-4."),
    prefect: bool = typer.Option(False, help="Run through the Prefect flow (in-process, ephemeral server)."),
    track: bool = typer.Option(True, help="Log to MLflow."),
    export: Path = typer.Option(None, help="Also copy metrics.json, the curves and plots here (DVC reads them)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the effective parameters and what the run would "
                                                          "do (start or resume where), then stop."),
) -> None:
    """Train for R rounds (resuming a run folder that already has some), printing each round."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from edge.pipeline import format_round, run_pipeline
    from edge.train import Run

    overrides = list(set_ or []) + argument_overrides(method, env, rounds, seed, run_name)
    cfg = _params(params, overrides)
    if dry_run:
        _dry_run(cfg)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(f"{cfg.train.env}/{cfg.train.method} rounds", total=cfg.train.rounds)

        def report(k: int, s: dict, run) -> None:
            for line in format_round(k, s, run):
                progress.console.print(line, highlight=False, markup=False)
            progress.advance(bar)

        try:
            if prefect:
                # The flow itself, in-process (Prefect's ephemeral server): every stage a task run. User
                # errors are refused first, so they do not become a failed flow run with a traceback.
                from flows.edge_training import edge_training

                Run.check(cfg)
                progress.stop()
                result = edge_training(params_path=str(params), overrides=overrides, track=track)
            else:
                result = run_pipeline(cfg, track=track, on_round=report)
        except (ValueError, FileNotFoundError) as err:
            _fail(str(err))
    if export is not None:
        import shutil

        export.mkdir(parents=True, exist_ok=True)
        folder = Path(result["run_folder"])
        curves = [folder / "curve.json", folder / "eval_curve.json"]
        for path in [folder / "metrics.json", *curves, *sorted((folder / "plots").glob("*.png"))]:
            shutil.copy2(path, export / path.name)
    console.print(f"run folder: {result['run_folder']}")


@app.command("compare")
def compare_cmd(
    runs: list[Path] = typer.Argument(..., help="Run folders to compare (each with metrics.json)."),
    out: Path = typer.Option(Path("results/compare"), help="Folder for compare.json and compare.png."),
) -> None:
    """Compare finished runs: a table and a plot (DVC stage `compare`)."""
    from edge.pipeline import compare_runs

    missing = [str(r) for r in runs if not (r / "metrics.json").exists()]
    if missing:
        _fail(f"no metrics.json in {', '.join(missing)}: train those runs first")
    compare_runs(runs, out)
    from edge.tracking import attach_to_runs

    # Each compared run's MLflow page shows the comparison it took part in.
    attach_to_runs(runs, [out / "compare.png", out / "compare.json"], "compare")
    summary_cmd(out / "compare.json")


@app.command("plots")
def plots_cmd(
    out: Path = typer.Option(Path("dvc_plots/offline.html"), help="The HTML page to write."),
    repo: Path = typer.Option(Path("."), help="The DVC project (its dvc.yaml's plots)."),
) -> None:
    """`dvc plots show` as one page that renders offline (charts as SVG, images embedded)."""
    from edge.dvc_plots import dvc_plots_offline

    try:
        page = dvc_plots_offline(repo, out)
    except (RuntimeError, OSError) as err:
        _fail(str(err))
    console.print(f"written: {page}", highlight=False)


@app.command("summary")
def summary_cmd(compare_file: Path = typer.Argument(Path("results/compare/compare.json"))) -> None:
    """Print the comparison table: plain and scaffolded success, retention, EDGE - GRPO."""
    if not compare_file.exists():
        _fail(f"{compare_file} does not exist; run `dvc repro` (or `edge compare`) first")
    data = json.loads(compare_file.read_text())
    table = Table(title="test_seen success at the last evaluated round")
    for column in ("method", "seed", "base", "plain", "with bank", "retention"):
        table.add_column(column)

    def pct(v):
        return "-" if v is None else f"{v:.1%}"

    for m in data["runs"]:
        table.add_row(m["method"], str(m["seed"]), pct(m.get("test_seen_base_plain")), pct(m.get("test_seen_plain")),
                      pct(m.get("test_seen_with_bank")), pct(m.get("test_seen_retention")))
    console.print(table)
    paired = data.get("minus_grpo_plain_paired", {})
    for method, difference in data.get("minus_grpo_plain", {}).items():
        line = f"{method} - GRPO (plain success): {difference * 100:+.1f} points"
        if method in paired:
            p = paired[method]
            line += (f" [{p['low'] * 100:+.1f}, {p['high'] * 100:+.1f}] paired over {p['n']} tasks "
                     "(one seed: evaluation noise only)")
        console.print(line, highlight=False)
    from edge.benchmarking.stats import over_seeds

    seeds = over_seeds(data["runs"])
    if any(len(entry["seeds"]) > 1 for entry in seeds.values()):
        table = Table(title="over seeds: mean [95% t interval]; - GRPO paired by seed (sign-flip p)")
        for column in ("method", "seeds", "plain", "- GRPO (points)", "p"):
            table.add_column(column)
        for method, entry in seeds.items():
            m, d = entry["mean"], entry.get("minus_grpo")
            points = "-" if d is None else f"{d['mean'] * 100:+.1f} [{d['low'] * 100:+.1f}, {d['high'] * 100:+.1f}]"
            table.add_row(method, str(len(entry["seeds"])), f"{m['mean']:.1%} [{m['low']:.1%}, {m['high']:.1%}]",
                          points, "-" if entry.get("p") is None else f"{entry['p']:.3f}")
        console.print(table)
    console.print("Next: `.venv/bin/mlflow ui --backend-store-uri sqlite:///$(pwd)/mlflow.db` (compare runs), "
                  "`.venv/bin/dvc plots show` (curves), `.venv/bin/edge bank ls --run runs/edge` (the bank).")


@app.command("eval")
def eval_cmd(
    checkpoint: Path = typer.Option(..., help="Checkpoint folder (save_pretrained output)."),
    env: str = typer.Option("household", help="Environment."),
    split: str = typer.Option("test_seen", help=f"One of {', '.join(SPLITS)}."),
    episodes: int = typer.Option(200, min=1, help="Episodes (the first N tasks of the split; ALFWorld's splits are "
                                 "fixed sets of games: all of them when N is larger, as papers evaluate)."),
    seed: int = typer.Option(0, help="Seed for tasks and sampling."),
    advice: bool = typer.Option(False, help="Also evaluate with true advice (oracle) in every prompt."),
    bank: Path = typer.Option(None, help="A run's bank folder (runs/<run>/bank): also evaluate with it."),
    greedy: bool = typer.Option(False, help="Most likely action instead of sampling."),
    params: Path = typer.Option(Path("params.yaml"), help="Project parameters file (policy section)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Evaluate a checkpoint on held-out tasks."""
    from edge.envs.registry import check_split, generate_tasks
    from edge.evaluate import evaluate, retention
    from edge.policy.actor import Actor
    from edge.policy.model import load_policy
    from edge.warmup import true_advice_experience

    cfg = _params(params)
    try:
        check_split(split)
        tasks = generate_tasks(env, split, episodes, seed)
        actor = Actor(load_policy(cfg.policy, checkpoint=checkpoint))
    except (ValueError, FileNotFoundError) as err:
        _fail(str(err))
    report = {"env": env, "split": split, "episodes": len(tasks), "checkpoint": str(checkpoint),
              "plain": evaluate(actor, tasks, seed, greedy=greedy).to_dict()}
    if advice:
        report["advised"] = evaluate(actor, tasks, seed, experience_for=true_advice_experience, greedy=greedy).to_dict()
        report["retention_advised"] = retention(report["plain"]["success"], report["advised"]["success"])
    if bank is not None:
        retriever, bank_cfg = _bank_retriever(bank, cfg)
        report["with_bank"] = evaluate(actor, tasks, seed, experience_for=retriever, greedy=greedy,
                                       follow_progress=bank_cfg.block_follows_progress).to_dict()
        report["retention"] = retention(report["plain"]["success"], report["with_bank"]["success"])
    if as_json:
        print(json.dumps(report, indent=2))
        return
    table = Table(title=f"{env} / {split}: {len(tasks)} episodes, {checkpoint}")
    # Success rate and average score x 100, the two numbers WebShop papers report.
    for column in ("setting", "success", "score (x100)", "mean steps"):
        table.add_column(column)
    settings = [setting for setting in ("plain", "with_bank", "advised") if setting in report]
    for setting in settings:
        r = report[setting]
        table.add_row(setting, f"{r['success']:.1%}", f"{r['avg_score']:.1f}", f"{r['mean_steps']:.1f}")
    console.print(table)
    if len(report["plain"]["success_by_type"]) > 1:
        console.print(_by_type_table({setting: report[setting] for setting in settings}))
    if report.get("retention") is not None:
        console.print(f"retention (plain / with bank): {report['retention']:.1%}")


def _bank_retriever(folder: Path, cfg):
    """(a task's experience from the bank in ``folder``, the bank settings it retrieves with: its run's)."""
    from edge.bank.embedder import make_embedder
    from edge.bank.retrieval import retrieve_for_task
    from edge.bank.store import open_recorded
    from edge.rollout import Experience

    if not folder.is_dir():
        _fail(f"bank folder {folder} does not exist (expected runs/<run>/bank)")
    bank_cfg, source = cfg.bank, "--params"
    recorded = folder.parent / "params.json"
    if recorded.exists():  # read the bank as its run did (top_k, block order and rule, type steps ...)
        from edge.runs import read_run_params

        try:
            bank_cfg, source = read_run_params(folder.parent).bank, str(recorded)
        except ValueError as err:
            typer.echo(f"{recorded} is not a run's parameters ({str(err).splitlines()[0]}); retrieving with "
                       "--params' bank section", err=True)
    try:
        store, version, round_index = open_recorded(folder, make_embedder(bank_cfg.embedder))
    except ValueError as err:
        _fail(str(err))
    typer.echo(f"bank: {folder}, version {version} (after round {round_index}); retrieval settings from {source}",
               err=True)

    def experience_for(task):
        found = retrieve_for_task(store, task, bank_cfg)
        return Experience(*found) if found else None

    return experience_for, bank_cfg


def _run_bank_entries(run: Path, round_index: int | None):
    """Entries of a run's bank: the snapshot of ``round_index``, or the latest round's."""
    from edge.bank.store import read_snapshot

    snapshots = sorted(run.glob("round_*/bank.parquet"))
    if not snapshots:
        _fail(f"{run} has no bank snapshots (round_*/bank.parquet); is it an EDGE run folder?")
    if round_index is None:
        return read_snapshot(snapshots[-1])
    path = run / f"round_{round_index:03d}" / "bank.parquet"
    if not path.exists():
        _fail(f"{path} does not exist; rounds with a snapshot: "
              + ", ".join(str(int(p.parent.name.split("_")[1])) for p in snapshots))
    return read_snapshot(path)


def _dry_run(cfg) -> None:
    import yaml

    from edge.runs import run_status

    print(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), end="")
    folder = Path(cfg.train.runs_dir) / run_folder_name(cfg)
    if not (folder / "params.json").exists():
        print(f"dry run: would start {folder} and train {cfg.train.rounds} rounds")
        return
    status = run_status(folder)
    print(f"dry run: {folder} exists ({status.state}, {status.rounds_done}/{status.rounds_planned} rounds); "
          f"the same command resumes it to {cfg.train.rounds} rounds if its parameters match")


@runs_app.command("ls")
def runs_ls(
    runs_dir: Path = typer.Option(None, help="The runs folder (default: train.runs_dir of --params)."),
    params: Path = typer.Option(Path("params.yaml"), help="Project parameters file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every run with its method, seed, progress (finished, or where it stopped) and last numbers."""
    from dataclasses import asdict

    from edge.runs import list_runs

    folder = runs_dir or _params(params).train.runs_dir
    try:
        runs = list_runs(folder)
    except ValueError as err:
        _fail(str(err))
    if as_json:
        print(json.dumps([asdict(r) for r in runs], indent=2))
        return
    table = Table(title=f"runs in {folder}")
    for column in ("run", "env", "method", "seed", "rounds", "state", "base", "plain", "with bank", "hours"):
        table.add_column(column)

    def pct(v):
        return "" if v is None else f"{v:.1%}"

    for r in runs:
        table.add_row(r.name, r.env, r.method, str(r.seed), f"{r.rounds_done}/{r.rounds_planned}", r.state,
                      pct(r.base_plain), pct(r.plain), pct(r.with_bank),
                      "" if r.wall_seconds is None else f"{r.wall_seconds / 3600:.2f}")
    console.print(table)
    if not runs:
        console.print(f"no run folders in {folder}; `edge train` makes one", highlight=False)


@config_app.command("show")
def config_show(
    params: Path = typer.Option(Path("params.yaml"), help="Project parameters file."),
    set_: list[str] = typer.Option(None, "--set", help="Override a parameter, e.g. --set grpo.lr=5e-4."),
    section: str = typer.Option(None, help="Only this section, e.g. grpo."),
) -> None:
    """The configuration a command would run with: params.yaml, the --set overrides and every default."""
    import yaml

    data = _params(params, list(set_ or [])).model_dump(mode="json")
    if section is not None:
        if section not in data:
            _fail(f"no section {section!r}; sections: {', '.join(data)}")
        data = {section: data[section]}
    print(yaml.safe_dump(data, sort_keys=False), end="")


@bank_app.command("ls")
def bank_ls(
    run: Path = typer.Option(..., help="Run folder, e.g. runs/edge (`make run`) or runs/household-edge-s0."),
    status: str = typer.Option(None, help="Only entries with this status: active, merged, pruned, revised."),
    round_index: int = typer.Option(None, "--round", help="As after this round (default: the last)."),
) -> None:
    """List the bank's entries."""
    from edge.bank.audit import format_table
    from edge.bank.entry import STATUSES

    if status is not None and status not in STATUSES:
        _fail(f"--status {status!r} is not a status; valid: {', '.join(STATUSES)}")

    entries = _run_bank_entries(run, round_index)
    if status:
        entries = [e for e in entries if e.status == status]
    console.print(format_table(entries))


@bank_app.command("show")
def bank_show(
    entry_id: str = typer.Argument(..., help="Entry id, e.g. g000003."),
    run: Path = typer.Option(..., help="Run folder."),
    round_index: int = typer.Option(None, "--round", help="As after this round (default: the last)."),
) -> None:
    """One entry: text, status, utility history, provenance."""
    from edge.bank.audit import format_entry

    entries = {e.id: e for e in _run_bank_entries(run, round_index)}
    if entry_id not in entries:
        _fail(f"no entry {entry_id!r} in {run}; `edge bank ls --run {run}` lists them")
    console.print(format_entry(entries[entry_id]), highlight=False, markup=False)


@bank_app.command("diff")
def bank_diff(
    run: Path = typer.Option(..., help="Run folder."),
    from_round: int = typer.Option(..., help="Earlier round."),
    to_round: int = typer.Option(..., help="Later round."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """What changed between two rounds: added, merged, pruned (with reasons)."""
    from edge.bank.audit import diff

    if from_round >= to_round:
        _fail(f"--from-round {from_round} must be before --to-round {to_round}")

    changes = diff(_run_bank_entries(run, from_round), _run_bank_entries(run, to_round))
    if as_json:
        print(json.dumps(changes, indent=2, default=str))
        return
    after = {e.id: e for e in _run_bank_entries(run, to_round)}
    console.print(f"[bold]rounds {from_round} -> {to_round}[/]")
    for entry_id in changes["added"]:
        console.print(f"  + {entry_id} {after[entry_id].text}", highlight=False)
    for entry_id, reason in (changes["merged"].items() if isinstance(changes["merged"], dict)
                             else ((i, after[i].prune_reason) for i in changes["merged"])):
        console.print(f"  = {entry_id} {reason}", highlight=False)
    for entry_id, reason in changes["pruned"].items():
        console.print(f"  - {entry_id} pruned: {reason}  ({after[entry_id].text})", highlight=False)


@app.command("serve")
def serve_cmd(
    port: int = typer.Option(4200, help="Port of the Prefect server on 127.0.0.1."),
    params: Path = typer.Option(Path("params.yaml"), help="Parameters file the deployments train with."),
) -> None:
    """Start a Prefect server on 127.0.0.1 (state in ./.prefect) and serve the edge-training deployments:
    default (EDGE), grpo-baseline and the ablations. Then, in another shell:
    PREFECT_API_URL=http://127.0.0.1:4200/api prefect deployment run 'edge-training/default' --param rounds=2"""
    import os

    from edge.prefect_server import PrefectServerError, running_prefect_server

    home = Path(os.environ.get("PREFECT_HOME", Path.cwd() / ".prefect")).resolve()
    try:
        with running_prefect_server(port, home) as api:
            os.environ.update({"PREFECT_HOME": str(home), "PREFECT_API_URL": api})
            from prefect import serve

            from flows.edge_training import DEPLOYMENTS, edge_training

            path = str(params.resolve())
            deployments = [edge_training.to_deployment(name=name, parameters={"params_path": path, **values},
                                                       tags=["edge", values["method"]])
                           for name, values in DEPLOYMENTS.items()]
            console.print(f"Prefect server: {api[:-4]}  deployments: "
                          + ", ".join(f"edge-training/{n}" for n in DEPLOYMENTS))
            serve(*deployments)
    except PrefectServerError as err:
        _fail(str(err))


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


@bench_app.command("learning")
def bench_learning(
    envs: list[str] = typer.Option(["household", "shop"], "--env", help="Environment (repeat for several)."),
    methods: list[str] = typer.Option(list(METHODS),
                                      "--method", help="Method (repeat for several); grpo is the baseline."),
    seeds: list[int] = typer.Option([0, 1, 2, 3, 4], "--seed", help="Seed (repeat for several)."),
    budget: float = typer.Option(1.0, min=0.01, help="Multiplies train.rounds: the rollout budget of every run."),
    eval_episodes: int = typer.Option(400, min=1, help="Evaluation episodes per split and condition (base, final)."),
    intermediate_episodes: int = typer.Option(200, min=1, help="Episodes at the curve's points in between."),
    eval_every: int = typer.Option(4, min=1, help="Evaluate every this many rounds (curve points)."),
    splits: list[str] = typer.Option(["test_seen", "test_unseen"], "--split", help="Evaluation split (repeat)."),
    jobs: int = typer.Option(None, min=0, help="Runs and warm starts in parallel, one torch thread each (default 2; "
                                               "with --ray, as many as the cluster holds; 0: as many as there are "
                                               "cores)."),
    params: Path = typer.Option(Path("params.yaml"), help="Project parameters file."),
    runs_dir: Path = typer.Option(Path("benchmarks/runs"), help="Where the runs and warm starts go (resumable)."),
    out_dir: Path = typer.Option(Path("benchmarks/results"), help="Where the tables and plots go."),
    name: str = typer.Option("learning", help="Stem of the result files."),
    set_: list[str] = typer.Option(None, "--set", help="Override a parameter for every run."),
    track: bool = typer.Option(True, help="Log the tables and plots to MLflow (experiment bench-learning)."),
    report_only: bool = typer.Option(False, help="Train nothing; rebuild the tables from the finished runs."),
    shared_warm_start: bool = typer.Option(False, help="One warm start for every seed (else one per seed)."),
    bases_dir: Path = typer.Option(None, help="Where the warm starts are built and reused (default: --runs-dir)."),
    warm_start_env: str = typer.Option(None, help="Environment the warm starts are made in (default: each run's "
                                                  "own); e.g. household for runs on household_moved."),
    ray: str = typer.Option(None, envvar="EDGE_RAY_ADDRESS", show_envvar=True,
                            help="Run every warm start and run as a task of the Ray cluster at this address "
                                 "(host:port of its head, or auto); this folder must be shared by its nodes."),
    ray_cpus: float = typer.Option(1.0, min=0, help="CPUs each run reserves on the Ray cluster."),
    ray_gpus: float = typer.Option(0.0, min=0, help="GPUs each run reserves on the Ray cluster."),
) -> None:
    """GRPO, EDGE and its ablations over seeds: final success with 95% bootstrap intervals, paired
    differences against GRPO with permutation p-values, and success against environment steps."""
    import sys

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from edge.benchmarking.learning import LearningBenchConfig, run_benchmark

    for split in splits:
        if split not in SPLITS:
            _fail(f"--split {split!r}: valid splits are {', '.join(SPLITS)}")
    cfg = LearningBenchConfig(envs=envs, methods=methods, seeds=seeds, budget=budget, eval_episodes=eval_episodes,
                              intermediate_episodes=intermediate_episodes,
                              splits=splits, eval_every=eval_every, jobs=(0 if ray else 2) if jobs is None else jobs,
                              params=params, runs_dir=runs_dir,
                              out_dir=out_dir, name=name, extra=list(set_ or []), report_only=report_only,
                              shared_warm_start=shared_warm_start, bases_dir=bases_dir,
                              warm_start_env=warm_start_env,
                              ray=ray or None, ray_cpus=ray_cpus, ray_gpus=ray_gpus)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console) as progress:
            report = run_benchmark(cfg, command="edge " + " ".join(sys.argv[1:]), track=track, progress=progress)
    except (ValueError, RuntimeError) as err:
        _fail(str(err))
    console.print((out_dir / f"{name}.md").read_text(), markup=False, highlight=False)
    if report["wall_minutes"] is not None:
        console.print(f"wall time {report['wall_minutes']:.1f} min", highlight=False)
    console.print(f"tables in {out_dir / name}.md and .json", highlight=False)


@bench_app.command("perf")
def bench_perf(
    quick: bool = typer.Option(False, help="Tiny sizes and the hash embedder (seconds; for tests)."),
    out_dir: Path = typer.Option(Path("benchmarks/results"), help="Folder for perf.md and perf.json."),
    params: Path = typer.Option(Path("params.yaml"), help="Project parameters file."),
    set_: list[str] = typer.Option(None, "--set", help="Override a parameter, e.g. --set rollout.group_size=4."),
    bank_sizes: str = typer.Option(None, help="Comma-separated bank sizes (default 1000,10000,100000)."),
    queries: int = typer.Option(None, min=1, help="Retrieval queries per (size, index) cell (default 100)."),
    prefect: bool = typer.Option(True, help="Also run the rounds through Prefect (orchestration overhead)."),
    track: bool = typer.Option(True, help="Log the report to MLflow (experiment bench-perf)."),
    work_dir: Path = typer.Option(None, help="Keep the scratch runs and banks here (default: a removed temp folder)."),
    rounds: int = typer.Option(None, min=1, help="EDGE rounds before the measured one, plus one (default 4)."),
    pairs: int = typer.Option(None, min=1, help="Alternating direct / Prefect repetitions of the measured round "
                                                "(default 3); the overhead is their median."),
    bank_run: Path = typer.Option(None, help="A finished EDGE run folder: also tabulate the bank's cost per round."),
) -> None:
    """Performance profile and cost of the bank: perf.md, perf.json and an MLflow run."""
    from edge.benchmarking.perf import PerfOptions, run_perf
    from edge.benchmarking.perf_report import render_markdown

    sizes = tuple(int(s) for s in bank_sizes.split(",")) if bank_sizes else None
    options = PerfOptions.preset(quick, params_path=params, overrides=list(set_ or []), out_dir=out_dir,
                                 bank_sizes=sizes, queries=queries, prefect=prefect, track=track, work_dir=work_dir,
                                 rounds=rounds, bank_run=bank_run, prefect_pairs=pairs)
    if bank_run is not None and not (bank_run / "round_000").is_dir():
        _fail(f"{bank_run} has no round_000: give a training run folder, e.g. runs/household-edge-s0")
    try:
        report = run_perf(options, progress=lambda line: console.print(line, highlight=False))
    except (ValueError, FileNotFoundError) as err:
        _fail(str(err))
    console.print(render_markdown(report), highlight=False, markup=False)
    console.print(f"written: {out_dir / 'perf.md'}, {out_dir / 'perf.json'}")


@bench_app.command("gpu", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench_gpu(ctx: typer.Context) -> None:
    """The real-model smoke benchmark (Qwen2-style model, BPE tokenizer, LoRA, bf16, gradient checkpointing;
    GRPO and edge-oracle-bank in score and generate mode): gpu_smoke.md and .json. Takes the options of
    `python benchmarks/gpu_smoke.py --help`, e.g. `edge bench gpu --size small --out-dir benchmarks/results`."""
    from edge.benchmarking.gpu_smoke import main

    main(list(ctx.args))


@data_app.command("alfworld")
def data_alfworld(
    dest: Path = typer.Option(None, help="Data folder (default: $ALFWORLD_DATA, else ~/.cache/alfworld)."),
) -> None:
    """Check the ALFWorld data folder; where parts are missing, run the official `alfworld-download`
    (needs internet), else say what is missing and how to supply it."""
    import subprocess

    from edge.envs.alfworld.data import generate_tasks
    from edge.envs.alfworld.fetch import default_destination, fetch

    folder = (dest or default_destination()).expanduser()
    try:
        missing = fetch(folder)
        if missing:
            _fail(f"{folder} still lacks {', '.join(missing)} after alfworld-download")
        counts = {split: len(generate_tasks(split, 10**6, 0, data=folder)) for split in SPLITS}
    except (ValueError, OSError) as err:
        _fail(str(err))
    except subprocess.CalledProcessError as err:
        _fail(f"alfworld-download failed ({err}); run it yourself: alfworld-download --data-dir {folder}")
    console.print(f"ALFWorld data in {folder}: " + ", ".join(f"{split} {n} games" for split, n in counts.items()))
    console.print(f"Use it with: export ALFWORLD_DATA={folder.resolve()}", highlight=False)


USER_ERRORS = (ValueError, OSError, RuntimeError)
"""What a bad input, a damaged file or a busy run folder raises (``ConfigError``, ``IntegrityError``,
``RunInUseError``, a missing file): said in one line. Anything else is a bug and keeps its traceback."""


def main(argv: list[str] | None = None) -> None:
    """The ``edge`` command: errors a user can fix are one line on stderr (exit 2); ``--debug`` anywhere
    on the command line (or ``EDGE_DEBUG=1``) shows their traceback instead."""
    import os
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("EDGE_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]
    try:
        app(args=args, prog_name="edge", standalone_mode=True)
    except USER_ERRORS as err:
        if debug:
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
