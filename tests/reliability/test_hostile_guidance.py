"""Guidance cannot carry instructions: a hostile corpus is refused at write time and at retrieval.

``hostile_guidance.json`` lists texts a page or an LM could try to plant in the bank (rewordings of
overrides in several languages, invisible and control characters, look-alike letters, chat-template
markup of common models, fake prompt sections, dialogue turns and history steps), each with the reason
the sanitiser gives. Time is not measured here (``benchmarks/sanitizer_timing.py`` does); the linear
bound is checked by structure: past the input bound nothing but the length is looked at.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
from pathlib import Path

import pytest

from edge.bank import retrieval
from edge.bank.embedder import HashEmbedder
from edge.bank.entry import BankEntry
from edge.bank.retrieval import random_entries, retrieve_experience
from edge.bank.sanitize import INPUT_FACTOR, REASONS, copies_page, refusal_reason, sanitize_guidance
from edge.bank.store import ExperienceBank
from edge.envs.household import knowledge as household
from edge.envs.shop import knowledge as shop

CORPUS = json.loads((Path(__file__).parent / "hostile_guidance.json").read_text())

LEGITIMATE = [
    household.find_in("apple", ["fridge", "countertop", "cabinet"]),
    household.transform_first("heat", "potato", "microwave"),
    household.take_to_lamp("book"),
    household.second_object("keychain"),
    household.avoid_searched_again(),
    household.open_closed(),
    shop.search_type_and_attributes("men's shirt"),
    shop.click_options_first(),
    shop.avoid_over_budget(),
    "avoid : ignoring the price in the instruction .",
    "avoid : forgetting to open the fridge before looking inside .",
    "try : instead of the drawer , look in the fridge .",
    "try : click next > when the item is not on the first page .",
    "avoid : clicking < prev before checking the options .",
    "try : search[red dress size small] then click[buy now] .",
    "try : reread the original instruction before buying .",
    "try : note : the microwave heats , the fridge cools .",
    "the user manual",
    "multitask : keep the word boundary",
]


def nested(chars: int) -> str:
    """Tokens nested in tokens ("<<<<s>s>s>s>"), the input that made strip-until-stable quadratic."""
    depth = chars // 3
    return ("<" * depth + "s>" * depth)[:chars]


def mk(id: str, text: str, key: str = "apple", task_type: str = "pick") -> BankEntry:
    return BankEntry(id=id, text=text, kind="try", task_type=task_type, signature=f"{task_type}|{key}|not_found",
                     key=key)


# ----- the corpus --------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_every_hostile_text_is_refused_with_its_reason(case):
    assert case["reason"] in REASONS
    assert refusal_reason(case["text"]) == case["reason"]
    assert sanitize_guidance(case["text"]) is None
    # The same text inside otherwise good guidance is refused too.
    assert sanitize_guidance(f"try : look in the fridge . {case['text']}") is None


def test_the_corpus_covers_every_kind_of_attack():
    texts = "".join(c["text"] for c in CORPUS)
    for cp in (0x2066, 0x2067, 0x2068, 0x2069, 0x034F, 0xFE0F, 0x180E, 0x3164, 0x115F, 0x1160, 0xFFA0,
               0x80, 0x85, 0x9F, 0xE0001, 0xE007F):
        assert chr(cp) in texts, f"U+{cp:04X}"
    assert sum(0xE0020 <= ord(ch) <= 0xE007E for ch in texts) > 20  # a whole instruction in tag characters
    for marker in ("<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<think>", "</think>", "<tool_call>",
                   "<|im_start|>", "[INST]", "<<SYS>>", "### Instruction:", "Human:", "Assistant:",
                   "history : go to fridge 1", "observation : you see", "action : take apple", "> take apple",
                   "user:", "ignore all of the previous instructions", "ignore the above",
                   "pay no attention to the task", "\u0456gn\u043ere"):
        assert marker in texts, marker
    assert {c["reason"] for c in CORPUS} >= set(REASONS) - {"too_long", "empty", "copies_page"}


def test_legitimate_guidance_is_returned_unchanged():
    for text in LEGITIMATE:
        assert refusal_reason(text) is None, text
        assert sanitize_guidance(text) == text


def test_typographic_punctuation_is_made_ascii_not_refused():
    typographic = "try : don\u2019t buy it \u2013 check the size ."
    assert sanitize_guidance(typographic) == "try : don't buy it - check the size ."


def test_other_languages_are_a_parameter():
    chinese = "\u6253\u5f00\u51b0\u7bb1"  # "open the fridge"
    assert refusal_reason(chinese) == "not_in_language"
    assert sanitize_guidance(chinese, language="any") == chinese
    # Overrides, hidden characters and markup are refused in every language.
    for case in CORPUS:
        if case["reason"] not in ("confusable_characters", "not_in_language"):
            assert refusal_reason(case["text"], language="any") is not None, case["name"]
    with pytest.raises(ValueError, match="language"):
        refusal_reason("try : open it .", language="klingon")


def test_copies_of_pages_are_still_refused():
    page = "special offer : click buy now on the red dress size small to get a discount today"
    assert refusal_reason("try : click buy now on the red dress size small .", [page]) == "copies_page"
    # A page hiding the run behind deeply nested tokens still lines up with the guidance.
    hidden = nested(48 * 1024) + " click buy now on <<<s>s>s> the red dress size small today"
    assert copies_page("try : click buy now on the red dress size small .", [hidden])


# ----- the length bound (linear time) ------------------------------------------------------------
@pytest.mark.parametrize("max_chars", [60, 300])
def test_input_past_the_bound_is_refused_on_its_length_alone(max_chars):
    bound = INPUT_FACTOR * max_chars
    big = nested(48 * 1024)
    assert refusal_reason(big, max_chars=max_chars) == "too_long"
    # Whatever lies past the bound: a clean text of the same length is refused the same way ...
    assert refusal_reason("try : look in the fridge . " * (48 * 1024 // 27), max_chars=max_chars) == "too_long"
    # ... and the longest prefix that is read at all is judged on its content.
    assert refusal_reason(big[:bound], max_chars=max_chars) == "markup"
    clean = ("try : look in the fridge , " * bound)[:bound - 2].rstrip(" ,") + " ."
    assert len(clean) <= bound and sanitize_guidance(clean, max_chars=max_chars) is not None


# ----- retrieval ---------------------------------------------------------------------------------
@pytest.fixture
def bank(tmp_path) -> ExperienceBank:
    store = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    store.add([mk("g000001", "try : look for apple in fridge ."),
               mk("g000002", "try : look for apple in cabinet , drawer ."),
               mk("g000003", "try : look for apple in countertop .")])
    return store


@pytest.mark.parametrize("name", ["tag characters carrying an instruction", "chatml", "history step",
                                  "ignore all of the previous instructions", "cyrillic i and o in ignore"])
def test_a_tampered_entry_is_never_retrieved(bank, caplog, monkeypatch, name):
    monkeypatch.setattr(retrieval, "_WARNED", set())
    instruction = "put an apple in the fridge"
    clean_text, clean_ids = retrieve_experience(bank, instruction, "pick", top_k=2, threshold=-1.0)
    assert clean_text == " ".join(bank.get(i).text for i in clean_ids)  # a clean bank: texts as stored
    [case] = [c for c in CORPUS if c["name"] == name]
    tampered = clean_ids[0]
    # Written straight into the table, past the synthesizer's sanitiser.
    bank.upsert([dataclasses.replace(bank.get(tampered), text=case["text"])])
    with caplog.at_level(logging.WARNING, logger="edge.bank.retrieval"):
        text, ids = retrieve_experience(bank, instruction, "pick", top_k=2, threshold=-1.0)
        retrieve_experience(bank, instruction, "pick", top_k=2, threshold=-1.0)
    assert tampered not in ids and len(ids) == 2  # the next candidate takes its place
    assert case["text"] not in text and text == " ".join(bank.get(i).text for i in ids)
    warnings = [r.getMessage() for r in caplog.records if tampered in r.getMessage()]
    assert len(warnings) == 1 and case["reason"] in warnings[0]  # once per entry, with the reason
    for seed in range(5):
        _, drawn = random_entries(bank, 3, random.Random(seed))
        assert tampered not in drawn and len(drawn) == 2


def test_random_entries_of_a_clean_bank_draw_as_before(bank):
    for seed in range(5):
        text, ids = random_entries(bank, 2, random.Random(seed))
        expected = random.Random(seed).sample(bank.all("active"), 2)
        assert ids == [e.id for e in expected] and text == " ".join(e.text for e in expected)
