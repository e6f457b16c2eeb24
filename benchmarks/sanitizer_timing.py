"""How long the guidance sanitiser takes on hostile input: is it linear?

Times ``refusal_reason`` on every text of the hostile corpus (``tests/reliability/hostile_guidance.json``)
and on nested tokens ("<<<<s>s>s>s>", the input that made the old strip-until-stable loop quadratic: 48 KB
took 54 s) of 1 to 96 KB, both as guidance and as a page the copy check reads (pages are not
length-bounded, so their cleaning must be linear by itself). Each time is the median of a few
repetitions.

    .venv/bin/python benchmarks/sanitizer_timing.py [--repeats 5]

Writes benchmarks/results/sanitizer_timing.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from edge.bank.sanitize import INPUT_FACTOR, copies_page, refusal_reason

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "reliability" / "hostile_guidance.json"
OUT = ROOT / "benchmarks" / "results" / "sanitizer_timing"
SIZES_KB = (1, 6, 12, 24, 48, 96)
GUIDANCE = "try : look for apple in fridge , countertop , cabinet ."


def nested(chars: int) -> str:
    """Tokens nested in tokens, ``chars`` long."""
    depth = chars // 3
    return ("<" * depth + "s>" * depth)[:chars]


def median_seconds(fn, repeats: int) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Time the corpus and the nested inputs; write the JSON and Markdown reports."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    corpus = []
    for case in json.loads(CORPUS.read_text()):
        seconds = median_seconds(lambda text=case["text"]: refusal_reason(text), args.repeats)
        corpus.append({"name": case["name"], "chars": len(case["text"]), "reason": refusal_reason(case["text"]),
                       "ms": round(seconds * 1e3, 4)})
    nested_rows = []
    for kb in SIZES_KB:
        text = nested(kb * 1024)
        as_guidance = median_seconds(lambda text=text: refusal_reason(text), args.repeats)
        # The prefix at the input bound is the most the guidance check ever reads in full.
        prefix = text[:INPUT_FACTOR * 300]
        at_bound = median_seconds(lambda prefix=prefix: refusal_reason(prefix), args.repeats)
        as_page = median_seconds(lambda text=text: copies_page(GUIDANCE, [text]), args.repeats)
        nested_rows.append({"kb": kb, "chars": len(text), "reason": refusal_reason(text),
                            "guidance_us": round(as_guidance * 1e6, 2),
                            "bound_prefix_us": round(at_bound * 1e6, 2), "page_ms": round(as_page * 1e3, 2)})
    # The slowest accepted input: clean guidance at the bound, so every check runs on all of it.
    clean = ("try : look for apple in fridge , countertop , cabinet . " * 40)[:INPUT_FACTOR * 300]
    clean_us = median_seconds(lambda: refusal_reason(clean), args.repeats) * 1e6
    machine = (f"{os.cpu_count()} CPU cores (shared with other work while measured), "
               f"{platform.python_implementation()} {platform.python_version()}, {platform.system()}")
    report = {"machine": machine, "repeats": args.repeats, "max_chars": 300,
              "input_bound_chars": INPUT_FACTOR * 300, "clean_at_bound_us": round(clean_us, 2),
              "clean_at_bound_reason": refusal_reason(clean), "nested": nested_rows, "corpus": corpus}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")

    slowest = max(corpus, key=lambda row: row["ms"])
    lines = [
        "# Guidance sanitiser timing",
        "",
        f"Machine: {machine}. Median of {args.repeats} runs; `max_chars` 300, so guidance longer than "
        f"{INPUT_FACTOR * 300} characters is refused on its length alone (`too_long`).",
        "Written by `benchmarks/sanitizer_timing.py`.",
        "",
        "## Nested tokens (`<<<<s>s>s>s>...`)",
        "",
        "| size | as guidance: reason | as guidance (us) | its first 1200 chars (us) "
        "| as a page in the copy check (ms) |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    lines += [f"| {r['kb']} KB | {r['reason']} | {r['guidance_us']:.2f} | {r['bound_prefix_us']:.2f} | "
              f"{r['page_ms']:.1f} |" for r in nested_rows]
    lines += [
        "",
        f"The slowest guidance the check reads in full, clean text at the bound ({len(clean)} characters, every "
        f"check runs, reason: {refusal_reason(clean)}): {clean_us:.1f} us.",
        "",
        "The old sanitiser stripped tokens until nothing changed, one whole-text pass per nesting level: "
        "48 KB took 54 s. Pages, which have no length bound, are now cleaned in one linear scan once a few "
        "passes have not settled them, so their time grows in proportion to their size.",
        "",
        f"## Hostile corpus ({len(corpus)} texts)",
        "",
        f"Median per text {statistics.median(r['ms'] for r in corpus):.4f} ms, slowest "
        f"{slowest['ms']:.4f} ms ({slowest['name']}).",
        "",
        "| text | chars | reason | ms |",
        "| --- | ---: | --- | ---: |",
    ]
    lines += [f"| {r['name']} | {r['chars']} | {r['reason']} | {r['ms']:.4f} |" for r in corpus]
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")
    for r in nested_rows:
        print(f"nested {r['kb']:>3} KB: guidance {r['guidance_us']:.2f} us ({r['reason']}), "
              f"bound prefix {r['bound_prefix_us']:.2f} us, page {r['page_ms']:.1f} ms")
    print(f"clean guidance at the bound: {clean_us:.1f} us ({refusal_reason(clean)})")
    print(f"corpus: {len(corpus)} texts, slowest {slowest['ms']:.4f} ms; wrote {OUT}.md/.json")


if __name__ == "__main__":
    main()
