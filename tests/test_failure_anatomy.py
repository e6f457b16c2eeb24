"""Where a policy loses: evaluations' lost episodes by task type and failure pattern."""

import pytest

from edge.benchmarking.failure_anatomy import ALL, anatomy, markdown, type_counts


def evaluation(episodes: dict[str, int], failures: dict[str, dict[str, int]]) -> dict:
    return {"episodes_by_type": episodes, "failures_by_type": failures}


def test_type_counts_add_the_won_episodes_and_a_row_for_all_types():
    counts = type_counts(evaluation({"heat": 10, "place": 5}, {"heat": {"not_found": 3, "no_transform": 2}}))
    assert counts["heat"] == {"episodes": 10, "won": 5, "not_found": 3, "no_transform": 2}
    assert counts["place"] == {"episodes": 5, "won": 5}
    assert counts[ALL] == {"episodes": 15, "won": 10, "not_found": 3, "no_transform": 2}


def test_an_evaluation_without_failures_is_refused_by_name():
    with pytest.raises(ValueError, match="failures_by_type"):
        type_counts({"episodes_by_type": {"heat": 4}})


def test_anatomy_averages_shares_over_seeds_and_pairs_success_with_the_reference():
    grpo = {0: evaluation({"heat": 10}, {"heat": {"not_found": 5}}),
            1: evaluation({"heat": 10}, {"heat": {"not_found": 3, "no_transform": 1}})}
    ours = {0: evaluation({"heat": 10}, {"heat": {"no_transform": 2}}),
            1: evaluation({"heat": 10}, {"heat": {"not_found": 1, "no_transform": 1}})}
    report = anatomy({"grpo plain": grpo, "o17 plain": ours}, reference="grpo plain")
    assert report["patterns"] == ["no_transform", "not_found"]
    heat = report["types"]["heat"]
    assert heat["grpo plain"]["shares"] == pytest.approx({"won": 0.55, "not_found": 0.4, "no_transform": 0.05})
    assert heat["o17 plain"]["shares"] == pytest.approx({"won": 0.8, "not_found": 0.05, "no_transform": 0.15})
    diff = heat["o17 plain"]["won_minus_reference"]
    assert diff["per_seed"] == pytest.approx({"0": 0.3, "1": 0.2}) and diff["mean"] == pytest.approx(0.25)
    assert "won_minus_reference" not in heat["grpo plain"]
    text = markdown(report, "t", "n")
    assert "| heat | o17 plain | 80.0% | 15.0% | 5.0% | +25.0 [" in text
    assert "| **all types** | grpo plain | 55.0% | 5.0% | 40.0% | – |" in text
