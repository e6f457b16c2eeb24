"""WebShop on its own data files: small files in WebShop's real formats, played end to end."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from edge.config import DataConfig
from edge.data import prepare_tasks
from edge.envs.base import Task
from edge.envs.group import make_group
from edge.envs.play import play
from edge.envs.registry import env_splits, make_agent
from edge.envs.registry import generate_tasks as registry_generate_tasks
from edge.envs.shop.knowledge import search_type_and_attributes
from edge.envs.shop.reward import reward_breakdown
from edge.envs.webshop import (
    AGENTS,
    DATA_ENV_VAR,
    WebShopDataError,
    build_goals,
    generate_tasks,
    load_data,
    make_env,
    search_engine,
    vocabulary,
)
from edge.envs.webshop.goals import NO_PRICE_BOUND, SHUFFLE_SEED
from edge.text import split_words

SEP = " [SEP] "

# -- data files in WebShop's formats ------------------------------------------------------------


def _option(values: list[str]) -> list[dict]:
    return [{"value": v, "image": f"https://m.media-amazon.com/images/I/{i}.jpg"} for i, v in enumerate(values)]


# (asin, name, category, query, pricing, options, attributes, synthetic instruction, human goals)
PRODUCTS = [
    ("B07TSHIRT1", "Gildan Men's Crew T-Shirt, Machine Wash Cotton Tee", "fashion", "men's t-shirts", "$12.99",
     {"Color": ["Black", "Navy Blue", "Heather/Grey"], "Size": ["Small", "Medium", "X-Large"]},
     ["machine wash", "cotton"], "i need a machine wash men's t-shirt",
     [("I want a navy blue men's t-shirt I can machine wash, in x-large.", ["machine wash"],
       ["navy blue", "x-large"]),
      ("Find me a heather grey cotton tee in small", ["cotton"], ["heather grey", "small"])]),
    ("B07POLO001", "Amazon Essentials Men's Slim-Fit Polo Shirt", "fashion", "men's polo shirts",
     "$18.00 - $26.50",
     {"Color": ["Black", "White", "Burgundy"], "Size": ["Medium", "Large", "X-Large"]},
     ["slim fit", "machine wash"], "i am looking for a slim fit polo shirt",
     [("i need a white slim fit polo in large", ["slim fit"], ["white", "large"])]),
    ("B08SHAMPOO", "Maple Holistics Sulfate Free Argan Oil Shampoo for Dry Hair", "beauty", "shampoo", "$9.95",
     {"Size": ["8 Fl Oz (Pack of 1)", "16 Fl Oz (Pack of 2)"]},
     ["sulfate free", "dry hair"], "i want a sulfate free shampoo for dry hair",
     [("looking for a sulfate free shampoo for dry hair, 16 fl oz pack of 2", ["sulfate free", "dry hair"],
       ["16 fl oz (pack of 2)"])]),
    ("B09SERUM01", "TruSkin Vitamin C Serum for Face, Anti Aging Hyaluronic Acid", "beauty", "face serum", "$19.99",
     None, ["anti aging", "hyaluronic acid"], "i need an anti aging vitamin c face serum",
     [("an anti aging face serum with hyaluronic acid please.", ["anti aging", "hyaluronic acid"], [])]),
    ("B0COFFEE01", "Peet's Coffee Major Dickason's Blend Dark Roast Ground Coffee", "grocery", "ground coffee",
     "$8.49", {"Size": ["12 Ounce", "18 Ounce"], "Flavor": ["Dark Roast", "Decaf"]},
     ["kosher", "dark roast"], "i want a kosher dark roast ground coffee",
     [("i want kosher ground coffee, decaf, 18 ounce", ["kosher"], ["decaf", "18 ounce"]),
      ("i need some coffee", [], [])]),  # no attribute: WebShop skips it
    ("B0LAMP0001", "Brightech Sky Dome LED Floor Lamp, Dimmable", "home", "floor lamps", "$1,299.00",
     {"Color": ["Black", "Brass"]}, ["dimmable", "energy efficient"], "i need a dimmable floor lamp",
     [("i want a dimmable brass floor lamp", ["dimmable"], ["brass"])]),
]


def write_webshop(folder: Path, human: bool = True, extra: list[dict] | None = None) -> Path:
    """Write the three files as WebShop's setup.sh leaves them (small catalog names)."""
    folder.mkdir(parents=True, exist_ok=True)
    products, attributes, human_goals = [], {}, {}
    for asin, name, category, query, pricing, options, attrs, instruction, goals in PRODUCTS:
        products.append({
            "asin": asin, "name": name, "category": category, "query": query,
            "product_category": f"{category.title()} › {query.title()}",
            "full_description": f"The {name}. Built to last.", "pricing": pricing,
            "small_description": [f"{attrs[0].capitalize()}: easy care", "Ships fast"],
            "customization_options": {k: _option(v) for k, v in options.items()} if options else None,
            "images": [f"https://m.media-amazon.com/images/I/{asin}.jpg"], "average_rating": 4.4,
            "brand": "Acme", "total_reviews": 12,
        })
        attributes[asin] = {"attributes": attrs, "instruction": instruction, "instruction_attributes": attrs[:1]}
        human_goals[asin] = [{"asin": asin, "instruction": text, "instruction_attributes": a,
                              "instruction_options": o, "assignment_id": f"A{j}"}
                             for j, (text, a, o) in enumerate(goals)]
    # Rows WebShop's engine drops: an asin "nan", one too long, and a repeat.
    products += [dict(products[0], asin="nan"), dict(products[0], asin="B07TOOLONG12"), dict(products[1])]
    products += extra or []
    (folder / "items_shuffle_1000.json").write_text(json.dumps(products))
    (folder / "items_ins_v2_1000.json").write_text(json.dumps(attributes))
    if human:
        (folder / "items_human_ins.json").write_text(json.dumps(human_goals))
    return folder


HUMAN_GOALS = 7  # the human goals above that name at least one attribute


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    folder = write_webshop(tmp_path / "webshop")
    monkeypatch.setenv(DATA_ENV_VAR, str(folder))
    return folder


def all_tasks(data_dir: Path, **kwargs) -> list[Task]:
    kwargs.setdefault("test_goals", 3)
    return (generate_tasks("test_seen", 1000, data_dir=data_dir, **kwargs)
            + generate_tasks("train", 1000, data_dir=data_dir, **kwargs))


def run_episode(env, agent, task: Task):
    first = env.reset(task)
    agent.reset(task, first)
    observation, admissible = first.observation, first.admissible_actions
    texts = [observation, *admissible]
    while True:
        step = env.step(agent.act(observation, admissible))
        observation, admissible = step.observation, step.info.admissible_actions
        texts += [observation, *admissible]
        if step.done:
            return step, texts


# -- reading the files --------------------------------------------------------------------------

def test_products_are_read_and_cleaned_as_webshop_does(data_dir):
    data = load_data()
    assert [p.asin for p in data.products] == [row[0] for row in PRODUCTS]  # nan, too long, repeat dropped
    shirt = data.by_asin["B07TSHIRT1"]
    assert shirt.options == {"color": ("black", "navy blue", "heather | grey"), "size": ("small", "medium", "x-large")}
    assert shirt.product_type == "men's t-shirts" and shirt.category == "fashion"
    assert shirt.attributes == ("machine wash", "cotton") and shirt.price == 12.99 and shirt.price_text == "$12.99"
    assert shirt.features == ("Machine wash: easy care", "Ships fast")
    polo = data.by_asin["B07POLO001"]
    assert 18.0 <= polo.price <= 26.5 and polo.price_text == "$18.00 to $26.50"
    assert load_data().by_asin["B07POLO001"].price == polo.price  # seeded by the asin
    assert data.by_asin["B09SERUM01"].options == {}
    assert data.by_asin["B0LAMP0001"].price == 1299.0


def test_human_goals_follow_webshop(data_dir):
    data = load_data()
    goals = build_goals(data)
    assert len(goals) == HUMAN_GOALS and {g.kind for g in goals} == {"human"}
    assert [g.index for g in goals] == list(range(HUMAN_GOALS))
    # Catalog order, then WebShop's shuffle (random.seed(233); random.shuffle(goals)).
    ordered = [text.strip(".") for row in PRODUCTS for text, attrs, _ in row[8] if attrs]
    random.Random(SHUFFLE_SEED).shuffle(ordered)
    assert [g.instruction.split(", and price lower than")[0] for g in goals] == ordered
    for goal in goals:
        price = data.by_asin[goal.asin].price
        if goal.asin == "B0LAMP0001":  # too dear for a bound: no price clause
            assert goal.price_upper == NO_PRICE_BOUND and "price lower than" not in goal.instruction
            continue
        steps = [10.0 * i for i in range(1, 100) if 10.0 * i > price][:4]
        assert goal.price_upper in steps[1:]  # the larger of two draws is never the first step
        assert goal.instruction.endswith(f", and price lower than {goal.price_upper:.2f} dollars")
    tee = next(g for g in goals if g.instruction.startswith("I want a navy blue"))
    assert tee.options == {"color": "navy blue", "size": "x-large"} and tee.attributes == ("machine wash",)


def test_synthetic_goals_are_one_per_option_combination(tmp_path):
    folder = write_webshop(tmp_path / "synthetic", human=False)
    goals = build_goals(load_data(folder))
    per_product = {row[0]: len(row[7]) and 1 for row in PRODUCTS}
    for row in PRODUCTS:
        for values in (row[5] or {}).values():
            per_product[row[0]] *= len(values)
    assert len(goals) == sum(per_product.values()) and {g.kind for g in goals} == {"synthetic"}
    shirt = [g for g in goals if g.asin == "B07TSHIRT1"]
    assert len(shirt) == 9 and len({g.price_upper for g in shirt}) == 1
    assert any(g.instruction == "i need a machine wash men's t-shirt with color: navy blue, and size: small, "
               f"and price lower than {g.price_upper:.2f} dollars" for g in shirt)
    serum = next(g for g in goals if g.asin == "B09SERUM01")
    assert serum.instruction.startswith("i need an anti aging vitamin c face serum, and price")
    with pytest.raises(WebShopDataError, match="items_human_ins.json does not exist"):
        build_goals(load_data(folder), "human")


# -- splits -------------------------------------------------------------------------------------

def test_split_boundary_is_a_parameter(data_dir):
    test = generate_tasks("test_seen", 100, data_dir=data_dir, test_goals=3)
    train = generate_tasks("train", 100, data_dir=data_dir, test_goals=3)
    assert [t.spec["goal_index"] for t in test] == [0, 1, 2]
    assert [t.spec["goal_index"] for t in train] == list(range(3, HUMAN_GOALS))
    assert [t.task_id for t in test] == ["webshop-00000", "webshop-00001", "webshop-00002"]
    assert generate_tasks("train", 2, data_dir=data_dir, test_goals=3) == train[:2]
    assert generate_tasks("train", 2, seed=5, data_dir=data_dir, test_goals=3) == train[:2]  # goals are fixed
    # With the default 500 every goal of a small folder is a test goal, and train says why it is empty.
    assert len(generate_tasks("test_seen", 1000)) == HUMAN_GOALS
    with pytest.raises(WebShopDataError, match="train needs more goals"):
        generate_tasks("train", 1)


def test_first_500_goals_are_test_the_rest_train(tmp_path, monkeypatch):
    # Synthetic goals multiply: 9 products with 10 colours x 6 sizes give 540 goals cheaply.
    extra = [{"asin": f"B0BULK{i:04d}", "name": f"Bulk Hoodie Model {i}", "category": "fashion",
              "query": "hoodies", "pricing": "$30.00", "full_description": "A hoodie.",
              "small_description": "Warm", "customization_options": {
                  "color": _option([f"shade {c}" for c in "abcdefghij"]),
                  "size": _option(["xs", "s", "m", "l", "xl", "xxl"])}} for i in range(9)]
    folder = write_webshop(tmp_path / "bulk", human=False, extra=extra)
    (folder / "items_ins_v2_1000.json").write_text(json.dumps(
        {p["asin"]: {"attributes": ["warm"], "instruction": "i want a warm hoodie",
                     "instruction_attributes": ["warm"]} for p in extra}))
    monkeypatch.setenv(DATA_ENV_VAR, str(folder))
    test = registry_generate_tasks("webshop", "test_seen", 10_000, 0)
    train = registry_generate_tasks("webshop", "train", 10_000, 0)
    assert (len(test), len(train)) == (500, 40)
    assert [t.spec["goal_index"] for t in test + train] == list(range(540))
    assert env_splits("webshop") == ("train", "test_seen")
    counts = prepare_tasks(DataConfig(envs=["webshop"], out_dir=tmp_path / "tasks"), seed=0)
    assert counts == {"webshop": {"train": 40, "test_seen": 200}}  # 1,000 train asked, 40 exist
    assert sorted(p.name for p in (tmp_path / "tasks" / "webshop").iterdir()) == ["test_seen.jsonl", "train.jsonl"]
    with pytest.raises(ValueError, match="has no split 'test_unseen'; its splits: train, test_seen"):
        registry_generate_tasks("webshop", "test_unseen", 1, 0)


# -- search, pages, reward ----------------------------------------------------------------------

def test_search_finds_products(data_dir):
    data = load_data()
    engine = search_engine(data)
    for product in data.products:
        assert engine.search(product.title.lower())[0] == product.asin
    assert engine.search("sulfate free shampoo")[0] == "B08SHAMPOO"
    assert engine.search("brass")[0] == "B0LAMP0001"  # option values are indexed, as in WebShop
    assert engine.search("xyzzy plugh") == ()


def test_pages_show_webshop_text(data_dir):
    task = generate_tasks("test_seen", 1)[0]
    env = make_env()
    first = env.reset(task)
    assert first.observation == SEP.join(("WebShop", "Instruction:", task.instruction, "Search"))
    assert first.admissible_actions == [f"search[{q}]" for q in task.spec["search_queries"]]
    assert task.spec["product_type"] in task.spec["search_queries"]
    step = env.step("search[men's polo shirt]")
    assert "B07POLO001 [SEP] Amazon Essentials Men's Slim-Fit Polo Shirt [SEP] $18.00 to $26.50" in step.observation
    step = env.step("click[b07polo001]")
    assert step.observation.endswith(SEP.join((
        "< Prev", "color", "black", "white", "burgundy", "size", "medium", "large", "x-large",
        "Amazon Essentials Men's Slim-Fit Polo Shirt", "Price: $18.00 to $26.50", "Rating: N.A.",
        "Description", "Features", "Reviews", "Buy Now")))
    assert env.step("click[features]").observation.endswith("< Prev [SEP] Slim fit: easy care [SEP] Ships fast")


def test_reward_matches_a_hand_computed_value(data_dir):
    task = next(t for t in generate_tasks("test_seen", 100) if t.instruction.startswith("I want a navy blue"))
    goal = task.spec
    assert (goal["attributes"], sorted(goal["options"].values())) == (["machine wash"], ["navy blue", "x-large"])
    polo = load_data().by_asin["B07POLO001"]
    env = make_env()
    env.reset(task)
    for action in ("search[men's polo shirt]", "click[b07polo001]", "click[black]", "click[x-large]"):
        assert not env.step(action).info.invalid_action, action
    step = env.step("click[buy now]")
    # Another query in the same category: type 0.5. "machine wash" is a listed attribute: 1 of 1.
    # Options: x-large yes, navy blue no. Price: the polo's drawn price against the goal's bound.
    price_ok = polo.price <= goal["price_upper"]
    expected = 0.5 * (1 + 1 + price_ok) / (1 + 2 + 1)
    assert step.done and step.reward == pytest.approx(expected) and step.info.score == step.reward
    assert not step.info.won
    assert step.observation == SEP.join(("Thank you for shopping with us!", "Your score (min 0.0, max 1.0)",
                                         f"{expected:.2f}"))
    assert reward_breakdown(goal, polo, {"color": "black", "size": "x-large"}).reward == pytest.approx(expected)


# -- agents and the registry --------------------------------------------------------------------

@pytest.mark.parametrize("human", [True, False])
def test_expert_always_wins(tmp_path, human):
    folder = write_webshop(tmp_path / "d", human=human)
    env = make_env(data_dir=folder)
    expert = AGENTS["expert"](0, data_dir=folder)
    tasks = all_tasks(folder)
    assert len(tasks) == (HUMAN_GOALS if human else 27)
    for task in tasks:
        last, _ = run_episode(env, expert, task)
        assert last.info.won and last.reward == 1.0 and last.info.steps <= 15, task.instruction


def test_random_agent_gets_its_score(data_dir):
    report, episodes = play("webshop", "test_seen", "random", 50, seed=0)
    assert report.episodes == HUMAN_GOALS and report.env_steps_per_second > 0
    assert report.mean_reward == pytest.approx(sum(e.score for e in episodes) / HUMAN_GOALS)
    assert 0.0 <= report.mean_reward < 1.0 and report.success_rate < 1.0
    again, _ = play("webshop", "test_seen", "random", 50, seed=0)
    assert (again.mean_reward, again.mean_steps) == (report.mean_reward, report.mean_steps)  # deterministic
    expert, _ = play("webshop", "test_seen", "expert", 50, seed=0)
    assert expert.success_rate == 1.0 and expert.mean_reward == 1.0 > report.mean_reward


def test_registry_groups_and_task_files(data_dir, tmp_path):
    env = make_env(max_steps=9)
    assert env.name == "webshop" and env.max_steps == 9
    task = registry_generate_tasks("webshop", "test_seen", 1, 0)[0]
    assert Task.from_dict(json.loads(task.to_json())) == task  # JSON only
    assert isinstance(make_agent("webshop", "expert", 0), AGENTS["expert"])
    _, resets = make_group(task, 3)
    assert all(r == resets[0] for r in resets)
    foreign = Task(env="webshop", split="test_seen", task_id="x", task_type="fashion", instruction="i want",
                   spec=dict(task.spec, asin="B0NOTHERE0", data_folder="/elsewhere"))
    with pytest.raises(ValueError, match="B0NOTHERE0.*not in .*items_shuffle_1000.json.*/elsewhere"):
        env.reset(foreign)


def test_vocabulary_covers_what_is_shown_and_unknown_words_do_not_crash(data_dir):
    words = vocabulary()
    assert {"click", "search", "[", "]", "$", "webshop", "sep", "b07polo001", "heather", "|"} <= words
    env = make_env()
    for name in ("expert", "random"):
        agent = AGENTS[name](1)
        for task in generate_tasks("test_seen", 100):
            _, texts = run_episode(env, agent, task)
            missing = {w for text in [task.instruction, *texts] for w in split_words(text)} - words
            assert not missing, (task.task_id, missing)
    from edge.policy.tokenizer import UNK, build_word_tokenizer

    tokenizer = build_word_tokenizer(words)
    ids = tokenizer("click[b07polo001] zyzzyva")["input_ids"]
    assert tokenizer.convert_tokens_to_ids(UNK) in ids and len(ids) >= 5
    assert len(vocabulary(text_words=0)) < len(words)  # description words are the capped part


# -- malformed and missing files ----------------------------------------------------------------

def test_no_folder_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    with pytest.raises(WebShopDataError, match=f"set {DATA_ENV_VAR}.*items_shuffle_1000.json"):
        load_data()
    with pytest.raises(WebShopDataError, match="does not exist"):
        load_data(tmp_path / "absent")


@pytest.mark.parametrize("file, content, message", [
    ("items_shuffle_1000.json", None, "has no product catalog: expected items_shuffle_1000.json or items_shuffle.json"),
    ("items_ins_v2_1000.json", None, "has no attribute file: expected items_ins_v2_1000.json or items_ins_v2.json"),
    ("items_shuffle_1000.json", "[{\"asin\": ", r"items_shuffle_1000.json: not valid JSON"),
    ("items_shuffle_1000.json", {"B0": {}}, r"items_shuffle_1000.json: expected a JSON list of product objects"),
    ("items_shuffle_1000.json", [{"asin": "B01", "category": "x", "query": "y"}],
     r"items_shuffle_1000.json: product 0: lacks field\(s\) \['name'\]"),
    ("items_shuffle_1000.json", [{"asin": "B01", "name": "n", "category": "x", "query": "y",
                                  "customization_options": {"Size": [{"image": "i"}]}}],
     r"items_shuffle_1000.json: product 0 \(asin B01\): every entry of customization option 'Size' needs a string "
     r"field 'value'"),
    ("items_shuffle_1000.json", [{"asin": "B01", "name": "n", "category": "x", "query": "y", "pricing": {"a": 1}}],
     r"items_shuffle_1000.json: product 0 \(asin B01\): field 'pricing' must be a string"),
    ("items_ins_v2_1000.json", [1, 2], r"items_ins_v2_1000.json: expected a JSON object mapping an asin"),
    ("items_ins_v2_1000.json", {"B07TSHIRT1": {"attributes": "cotton"}},
     r"items_ins_v2_1000.json: asin B07TSHIRT1: field 'attributes' must be a list of strings"),
    ("items_human_ins.json", {"B07TSHIRT1": {"instruction": "x"}},
     r"items_human_ins.json: asin B07TSHIRT1: expected a list of instruction objects"),
    ("items_human_ins.json", {"B07TSHIRT1": [{"instruction": "x"}]},
     r"items_human_ins.json: asin B07TSHIRT1, instruction 0: lacks field 'instruction_attributes'"),
])
def test_malformed_or_missing_file_is_an_error_naming_it(tmp_path, file, content, message):
    folder = write_webshop(tmp_path / "bad")
    if content is None:
        (folder / file).unlink()
    else:
        (folder / file).write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(WebShopDataError, match=message):
        generate_tasks("test_seen", 1, data_dir=folder)


# -- evaluation as the literature reports it ----------------------------------------------------

def test_edge_eval_reports_score_and_success_rate(data_dir, tmp_path):
    from typer.testing import CliRunner

    from edge.cli import app
    from edge.config import PolicyConfig
    from edge.policy.model import load_policy, save_policy

    checkpoint = tmp_path / "checkpoint"
    save_policy(load_policy(PolicyConfig(), seed=0, envs=["webshop"]), checkpoint)
    runner = CliRunner()
    args = ["eval", "--checkpoint", str(checkpoint), "--env", "webshop"]
    # Scoring every candidate of a 15-step episode is the slow part: a few episodes show the report.
    result = runner.invoke(app, [*args, "--episodes", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    plain = report["plain"]
    assert report["episodes"] == plain["episodes"] == 2
    assert plain["avg_score"] == pytest.approx(100 * plain["score"]) and 0 <= plain["success"] <= 1
    result = runner.invoke(app, [*args, "--episodes", "1"])
    assert result.exit_code == 0 and "score (x100)" in result.stdout and "success" in result.stdout
    result = runner.invoke(app, [*args, "--split", "test_unseen"])
    assert result.exit_code == 2 and "its splits: train, test_seen" in " ".join(result.output.split())


# -- the bank reads WebShop failures as it reads the shop's -------------------------------------

def test_bank_synthesis_and_true_advice_cover_webshop(data_dir):
    from helpers import played

    from edge import guidance
    from edge.bank.synthesis import failures_by_signature

    task = next(t for t in generate_tasks("test_seen", 100) if t.instruction.startswith("I want a navy blue"))
    env = make_env()

    no_options = played(env, task, ["search[men's t-shirt]", "click[b07tshirt1]", "click[buy now]"])
    wandered = played(env, task, ["search[men's t-shirt]", "click[next >]"])
    assert not no_options.won and not wandered.won
    patterns = {f.pattern for f in failures_by_signature([no_options, wandered])}
    assert patterns == {"missing_options", "no_purchase"}
    assert guidance.true_advice(task)[0] == search_type_and_attributes("men's t-shirts")
