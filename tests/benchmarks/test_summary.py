"""The lines ``aem bench`` prints: each reads as a result without opening the report."""

from __future__ import annotations

from benchmarks.summary import split_label, summary_lines
from tests.benchmarks.conftest import make_results


def test_each_line_has_split_success_count_invalid_share_and_time() -> None:
    lines = summary_lines(make_results(model_wins=2))
    assert lines[0].split() == [
        "policy", "env", "split", "success", "score", "invalid", "steps", "time/ep"
    ]  # fmt: skip
    expert, smollm2 = lines[1], lines[3]  # per policy, then env
    assert expert.split() == [
        "expert", "aem/ALFWorld-v0", "eval", "(held-out)", "6/6", "100%", "100.0%", "0.0%",
        "4.0/10", "0.1", "s",
    ]  # fmt: skip
    # 2 of 6 won (4 steps, no invalid action), 4 lost (10 steps, 2 invalid each): 8 of 48
    assert smollm2.split()[:9] == [
        "smollm2", "aem/ALFWorld-v0", "eval", "(held-out)", "2/6", "33%", "50.0%", "16.7%",
        "8.0/10",
    ]  # fmt: skip
    assert len({len(line) for line in lines}) <= 2  # aligned columns (the header's end)


def test_the_split_says_whether_it_was_held_out_of_training() -> None:
    assert split_label(["valid_unseen"]) == "valid_unseen (held-out)"
    assert split_label(["train"]) == "train (training split)"
    assert split_label(["test", "eval", "test"]) == "eval+test (held-out)"
