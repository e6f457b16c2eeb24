"""Tests of the mini-WebShop: catalog, search pages, reward arithmetic, splits, agents."""

from __future__ import annotations

import re

import pytest

from edge.envs.agents import RandomAgent
from edge.envs.base import SPLITS, Task
from edge.envs.group import make_group
from edge.envs.registry import generate_tasks as registry_generate_tasks
from edge.envs.registry import make_agent
from edge.envs.registry import make_env as registry_make_env
from edge.envs.shop import (
    AGENTS,
    UNSEEN_TYPES,
    Product,
    build_catalog,
    generate_tasks,
    make_env,
    parse_action,
    reward_breakdown,
    search_engine,
    shop_reward,
    split_words,
    vocabulary,
)
from edge.envs.shop.catalog import PRODUCT_TYPES
from edge.envs.shop.reward import option_values_match

SEP = " [SEP] "


def run_episode(env, agent, task: Task) -> tuple[list[str], object]:
    """Play one episode; returns the transcript (observations and actions) and the last step."""
    first = env.reset(task)
    agent.reset(task, first)
    transcript = [first.observation]
    observation, admissible = first.observation, first.admissible_actions
    while True:
        action = agent.act(observation, admissible)
        step = env.step(action)
        transcript += [action, step.observation, repr(step.reward), repr(step.info)]
        observation, admissible = step.observation, step.info.admissible_actions
        if step.done:
            return transcript, step


# -- reward arithmetic --------------------------------------------------------------------------

GOAL = {
    "product_type": "polo shirt",
    "category": "fashion",
    "attributes": ["machine washable", "breathable"],
    "options": {"color": "navy", "size": "large"},
    "price_upper": 40.0,
}


def product(**changes) -> Product:
    fields = dict(asin="B0TEST0001", title="Acme Polo Shirt for Men", category="fashion",
                  product_type="polo shirt", attributes=("machine washable", "breathable", "slim fit"),
                  options={"color": ("black", "navy"), "size": ("small", "large")}, price=30.0,
                  description="A shirt.", features=("Cotton knit",))
    fields.update(changes)
    return Product(**fields)


GOOD_OPTIONS = {"color": "navy", "size": "large"}


@pytest.mark.parametrize("bought, selected, expected", [
    # everything right: (2 attributes + 2 options + price) / 5, type reward 1
    (product(), GOOD_OPTIONS, 1.0),
    # wrong size: (2 + 1 + 1) / 5
    (product(), {"color": "navy", "size": "small"}, 4 / 5),
    # no option chosen at all: (2 + 0 + 1) / 5
    (product(), {}, 3 / 5),
    # "breathable" neither listed nor written anywhere: (1 + 2 + 1) / 5
    (product(attributes=("machine washable", "slim fit")), GOOD_OPTIONS, 4 / 5),
    # over budget: (2 + 2 + 0) / 5
    (product(price=45.5), GOOD_OPTIONS, 4 / 5),
    # exactly at the bound is within budget
    (product(price=40.0), GOOD_OPTIONS, 1.0),
    # same category, other type: 0.5 * 5/5
    (product(product_type="hoodie"), GOOD_OPTIONS, 0.5),
    # same category, one attribute missing, wrong colour, over budget: 0.5 * (1 + 1 + 0) / 5
    (product(product_type="hoodie", attributes=("machine washable",), price=99.0),
     {"color": "black", "size": "large"}, 0.5 * 2 / 5),
    # another category with nothing in common but the price: 0.1 * (0 + 0 + 1) / 5
    (product(category="beauty", product_type="shampoo", title="Acme Shampoo", attributes=(),
             options={"size": ("8 fl oz",)}), {"size": "8 fl oz"}, 0.1 * 1 / 5),
])
def test_reward_arithmetic(bought, selected, expected):
    assert shop_reward(GOAL, bought, selected) == pytest.approx(expected)


def test_reward_breakdown_counts_each_part():
    b = reward_breakdown(GOAL, product(product_type="hoodie", price=50.0),
                         {"color": "black", "size": "large"})
    assert (b.r_type, b.attribute_matches, b.num_attributes, b.option_matches, b.num_options,
            b.price_ok) == (0.5, 2, 2, 1, 2, False)
    assert b.reward == pytest.approx(0.5 * 3 / 5)


def test_attribute_found_in_text_counts():
    # Not listed as an attribute, but written in a feature bullet: WebShop's text fallback.
    bought = product(attributes=("machine washable",), features=("Breathable cotton knit",))
    assert shop_reward(GOAL, bought, GOOD_OPTIONS) == 1.0
    # Written nowhere: does not count.
    bought = product(attributes=("machine washable",), features=("Cotton knit",))
    assert shop_reward(GOAL, bought, GOOD_OPTIONS) == pytest.approx(4 / 5)


def test_option_match_is_case_insensitive_and_fuzzy():
    assert shop_reward(GOAL, product(), {"color": "NAVY", "size": "Large"}) == 1.0
    assert option_values_match("heather grey", "heather gray")
    assert not option_values_match("small", "x-small")
    assert not option_values_match("large", "x-large")


def test_option_values_of_a_type_never_fuzzy_match_each_other():
    # Otherwise buying the wrong size could earn the option point.
    for ptype in PRODUCT_TYPES:
        values = [v for _, pool in ptype.options for v in pool]
        assert len(set(values)) == len(values), ptype.name
        clashes = [(a, b) for i, a in enumerate(values) for b in values[i + 1:]
                   if option_values_match(a, b)]
        assert clashes == [], ptype.name


# -- catalog and search -------------------------------------------------------------------------

def test_catalog_size_and_shape():
    catalog = build_catalog()
    assert len(catalog) >= 1000
    assert len({p.asin for p in catalog.products}) == len(catalog)
    assert len({p.title for p in catalog.products}) == len(catalog)
    assert all(re.fullmatch(r"B0[A-Z0-9]{8}", p.asin) for p in catalog.products)
    assert len({p.category for p in catalog.products}) >= 5
    for p in catalog.products[::37]:
        assert p.attributes and p.features and p.description and p.price > 0
        assert all(len(values) >= 3 for values in p.options.values())


def test_catalog_is_the_same_every_time():
    rebuilt = build_catalog.__wrapped__()  # bypass the cache
    assert rebuilt.products == build_catalog().products
    assert build_catalog.__wrapped__(7).products != build_catalog().products


def test_search_finds_a_product_by_its_title():
    engine = search_engine()
    for p in build_catalog().products[::50]:
        assert engine.search(p.title.lower())[0] == p.asin
    assert engine.search("xyzzy plugh") == ()
    assert len(engine.search("machine washable")) == 50


# -- pages and actions --------------------------------------------------------------------------

@pytest.fixture
def task() -> Task:
    return generate_tasks("train", 1, 0)[0]


def test_search_page_and_suggested_queries(task):
    env = make_env()
    first = env.reset(task)
    assert first.observation == SEP.join(("WebShop", "Instruction:", task.instruction, "Search"))
    assert first.instruction == task.instruction and first.task_type == task.task_type
    queries = task.spec["search_queries"]
    assert first.admissible_actions == [f"search[{q}]" for q in queries]
    assert len(queries) == 5 and task.spec["product_type"] in queries
    assert task.instruction.split(", and price lower than")[0] in queries
    # Any query is accepted, not only the suggestions.
    step = env.step("search[Something Else Entirely]")
    assert not step.info.invalid_action and step.observation.startswith(
        SEP.join(("Instruction:", task.instruction, "Back to Search", "Page 1 (Total results:")))


def test_pagination(task):
    env = make_env()
    env.reset(task)
    step = env.step("search[machine washable]")
    expected = search_engine().search("machine washable")
    seen = []
    for page in range(1, 6):
        obs, actions = step.observation, step.info.admissible_actions
        assert f"Page {page} (Total results: 50)" in obs
        assert ("click[< prev]" in actions) == (page > 1) and ("< Prev" in obs) == (page > 1)
        assert ("click[next >]" in actions) == (page < 5) and ("Next >" in obs) == (page < 5)
        products = [a[6:-1] for a in actions if re.fullmatch(r"click\[b0[a-z0-9]{8}\]", a)]
        assert len(products) == 10
        seen += products
        p = build_catalog().by_asin[products[0].upper()]
        assert SEP.join((p.asin, p.title, f"${p.price:.2f}")) in obs
        if page < 5:
            step = env.step("click[next >]")
    assert seen == [a.lower() for a in expected]
    assert "Page 4 (Total results: 50)" in env.step("click[< prev]").observation
    # Fewer results than a page, and none at all.
    env.step("click[back to search]")
    step = env.step("search[xyzzy]")
    assert "Page 1 (Total results: 0)" in step.observation
    assert step.info.admissible_actions == ["click[back to search]"]


def test_item_page_layout_and_sub_pages(task):
    env = make_env()
    env.reset(task)
    target = build_catalog().by_asin[task.spec["asin"]]
    env.step(f"search[{target.title}]")
    step = env.step(f"click[{target.asin.lower()}]")
    parts = ["Instruction:", task.instruction, "Back to Search", "< Prev"]
    for name, values in target.options.items():
        parts += [name, *values]
    parts += [target.title, f"Price: ${target.price:.2f}", "Rating: N.A.", "Description",
              "Features", "Reviews", "Buy Now"]
    assert step.observation == SEP.join(parts)
    assert step.info.admissible_actions[-4:] == ["click[description]", "click[features]",
                                                 "click[reviews]", "click[buy now]"]
    step = env.step("click[features]")
    assert step.observation.endswith(SEP.join(("< Prev", *target.features)))
    assert step.info.admissible_actions == ["click[back to search]", "click[< prev]"]
    step = env.step("click[< prev]")
    assert step.observation == SEP.join(parts)
    step = env.step("click[description]")
    assert step.observation.endswith("< Prev" + SEP + target.description)


def test_options_are_remembered_until_the_item_is_left(task):
    env = make_env()
    target = build_catalog().by_asin[task.spec["asin"]]
    goal_clicks = [f"click[{v}]" for v in task.spec["options"].values()]

    def open_target():
        env.reset(task)
        env.step(f"search[{target.title}]")
        env.step(f"click[{target.asin.lower()}]")

    open_target()
    for click in goal_clicks:
        env.step(click)
    env.step("click[description]")
    env.step("click[< prev]")
    assert env.step("click[buy now]").reward == 1.0

    # Back to the results forgets them, as in WebShop.
    open_target()
    for click in goal_clicks:
        env.step(click)
    env.step("click[< prev]")
    env.step(f"click[{target.asin.lower()}]")
    assert env.step("click[buy now]").reward < 1.0


@pytest.mark.parametrize("action", [
    "buy it", "", "click[]", "search[]", "click[nonexistent]", "click[buy now]",
    "search[machine washable]", "click[b0zzzzzzzz]", "press[next >]",
])
def test_invalid_action_keeps_the_page(task, action):
    env = make_env()
    env.reset(task)
    before = env.step("search[machine washable]")  # now on a results page
    step = env.step(action)
    assert step.info.invalid_action
    assert (step.observation, step.reward, step.done) == (before.observation, 0.0, False)
    assert step.info.admissible_actions == before.info.admissible_actions
    assert step.info.steps == 2


def test_invalid_on_search_page(task):
    env = make_env()
    first = env.reset(task)
    step = env.step("click[back to search]")
    assert step.info.invalid_action and step.observation == first.observation


def test_parse_action_lowercases_like_webshop():
    assert parse_action("click[Next >]") == ("click", "next >")
    assert parse_action("Search[ Red Shoes ]") == ("search", "red shoes")
    assert parse_action("click next") is None


def test_step_limit(task):
    env = make_env(max_steps=15)
    assert env.max_steps == 15 and env.name == "shop"
    env.reset(task)
    for i in range(1, 15):
        step = env.step("click[nothing]")
        assert not step.done and step.info.steps == i
    step = env.step("search[polo shirt]")
    assert step.done and step.info.truncated and step.reward == 0.0 and not step.info.won
    assert step.info.admissible_actions == []
    with pytest.raises(RuntimeError, match="episode is over"):  # as the household env does
        env.step("search[polo shirt]")


def test_buying_on_the_last_step_still_counts(task):
    env = make_env(max_steps=3)
    target = build_catalog().by_asin[task.spec["asin"]]
    env.reset(task)
    env.step(f"search[{target.title}]")
    env.step(f"click[{target.asin.lower()}]")
    step = env.step("click[buy now]")
    assert step.done and not step.info.truncated
    assert step.reward == step.info.score > 0


# -- tasks and splits ---------------------------------------------------------------------------

def test_task_records_its_goal():
    catalog = build_catalog()
    for split in SPLITS:
        for i, task in enumerate(generate_tasks(split, 50, 3)):
            assert task.task_id == f"shop-{split}-{i:05d}" and task.env == "shop"
            spec = task.spec
            target = catalog.by_asin[spec["asin"]]
            assert task.task_type == spec["category"] == target.category
            assert spec["product_type"] == target.product_type
            assert set(spec["attributes"]) <= set(target.attributes)
            assert all(target.options[k] and v in target.options[k] for k, v in spec["options"].items())
            assert target.price < spec["price_upper"]
            assert task.instruction.endswith(f"price lower than {int(spec['price_upper'])}.00 dollars")
            assert all(a in task.instruction for a in spec["attributes"])
            assert all(f"{k}: {v}" in task.instruction for k, v in spec["options"].items())
            assert shop_reward(spec, target, spec["options"]) == 1.0


def test_tasks_are_deterministic():
    for split in SPLITS:
        a = [t.to_json() for t in generate_tasks(split, 100, 11)]
        assert a == [t.to_json() for t in generate_tasks(split, 100, 11)]
        assert a != [t.to_json() for t in generate_tasks(split, 100, 12)]
        assert a[:10] == [t.to_json() for t in generate_tasks(split, 10, 11)]


def test_splits_are_disjoint_and_unseen_types_are_held_out():
    tasks = {split: generate_tasks(split, 500, 0) for split in SPLITS}
    asins = {split: {t.spec["asin"] for t in ts} for split, ts in tasks.items()}
    assert not asins["train"] & asins["test_seen"]
    unseen_names = re.compile("|".join(sorted(UNSEEN_TYPES)))
    for split in ("train", "test_seen"):
        for t in tasks[split]:
            assert t.spec["product_type"] not in UNSEEN_TYPES
            assert not unseen_names.search(t.instruction + " ".join(t.spec["search_queries"]))
    unseen = {t.spec["product_type"] for t in tasks["test_unseen"]}
    assert unseen == set(UNSEEN_TYPES)
    assert {t.task_type for t in tasks["test_unseen"]} == {t.task_type for t in tasks["train"]}


def test_unknown_split_is_an_error():
    with pytest.raises(ValueError, match="unknown split"):
        generate_tasks("valid", 1, 0)


# -- agents -------------------------------------------------------------------------------------

@pytest.mark.parametrize("split", SPLITS)
def test_expert_always_wins(split):
    env = make_env()
    expert = AGENTS["expert"](0)
    for task in generate_tasks(split, 200, 0):
        _, last = run_episode(env, expert, task)
        assert last.info.won and last.reward == 1.0 and last.info.steps <= 15, task.task_id


def test_random_agent_stays_low():
    env = make_env()
    agent = AGENTS["random"](0)
    assert isinstance(agent, RandomAgent)
    results = [run_episode(env, agent, t)[1] for t in generate_tasks("test_seen", 200, 0)]
    assert sum(r.info.won for r in results) / len(results) <= 0.05
    assert sum(r.info.score for r in results) / len(results) < 0.3
    assert sum(r.info.truncated for r in results) > 50


def test_random_agent_never_picks_an_invalid_action():
    env = make_env()
    agent = RandomAgent(5)
    for task in generate_tasks("train", 30, 0):
        first = env.reset(task)
        agent.reset(task, first)
        obs, actions = first.observation, first.admissible_actions
        while True:
            step = env.step(agent.act(obs, actions))
            assert not step.info.invalid_action
            obs, actions = step.observation, step.info.admissible_actions
            if step.done:
                break


def test_episode_transcripts_are_identical_across_runs():
    tasks = generate_tasks("test_unseen", 20, 4)
    for name in ("expert", "random"):
        runs = []
        for _ in range(2):
            env, agent = make_env(), AGENTS[name](9)
            runs.append("\n".join(line for t in tasks for line in run_episode(env, agent, t)[0]))
        assert runs[0].encode() == runs[1].encode()


# -- vocabulary and registry --------------------------------------------------------------------

def test_vocabulary_covers_everything_shown():
    words = vocabulary()
    assert split_words("Page 1 (Total results: 50)") == ["page", "1", "(", "total", "results", ":",
                                                         "50", ")"]
    assert split_words("click[< prev]") == ["click", "[<", "prev", "]"]
    assert {"[", "]", "[<", ">]", "sep", "click", "search", "webshop", "$"} <= words
    env = make_env()
    for name in ("expert", "random"):
        agent = AGENTS[name](3)
        for task in generate_tasks("train", 40, 2) + generate_tasks("test_unseen", 40, 2):
            first = env.reset(task)
            agent.reset(task, first)
            texts = [first.observation, task.instruction, *first.admissible_actions]
            obs, actions = first.observation, first.admissible_actions
            while True:
                step = env.step(agent.act(obs, actions))
                obs, actions = step.observation, step.info.admissible_actions
                texts += [obs, *actions]
                if step.done:
                    break
            missing = {w for text in texts for w in split_words(text)} - words
            assert not missing, (task.task_id, missing)


def test_registry_and_groups():
    env = registry_make_env("shop", max_steps=9)
    assert env.name == "shop" and env.max_steps == 9
    tasks = registry_generate_tasks("shop", "test_seen", 3, 0)
    assert [t.to_json() for t in tasks] == [t.to_json() for t in generate_tasks("test_seen", 3, 0)]
    assert isinstance(make_agent("shop", "expert", 0), AGENTS["expert"])
    _, resets = make_group(tasks[0], 4)
    assert all(r == resets[0] for r in resets)


def test_task_from_another_catalog_is_refused(task):
    other = generate_tasks("train", 1, 0, catalog_seed=7)[0]
    with pytest.raises(ValueError, match="catalog seed"):
        make_env().reset(other)
    assert make_env(catalog_seed=7).reset(other).instruction == other.instruction


def _play_shopper(agent, tasks):
    env = registry_make_env("shop")
    wins, actions = [], []
    for task in tasks:
        first = env.reset(task)
        agent.reset(task, first)
        observation, admissible = first.observation, first.admissible_actions
        while True:
            action = agent.act(observation, admissible)
            assert action in admissible  # a score-mode policy can only pick what is offered
            actions.append(action)
            out = env.step(action)
            observation, admissible = out.observation, out.info.admissible_actions
            if out.done:
                wins.append(out.info.won)
                break
    return sum(wins) / len(wins), actions


def test_careful_shopper_follows_the_advice_and_beats_the_careless_one():
    from edge.envs.shop.agents import Shopper

    tasks = registry_generate_tasks("shop", "test_seen", 60, 0)
    careful, careful_actions = _play_shopper(Shopper(1, careful=True), tasks)
    careless, _ = _play_shopper(Shopper(1, careful=False, option_prob=0.5), tasks)
    random_agent, _ = _play_shopper(RandomAgent(1), tasks)
    assert careful >= 0.6 and careless <= 0.25 and random_agent <= 0.05
    # It searches the type with the instruction's attributes, as the shop's true advice says.
    queries = [a for a in careful_actions if a.startswith("search[")]
    expected = {"search[" + " ".join([t.spec["product_type"], *t.spec["attributes"]]) + "]" for t in tasks}
    assert set(queries) <= expected and len(queries) >= len(tasks)
