"""The input topics' ids kept in the checkpoint: a topic created again has another id
(issue 42, hole 8; the broker's side: tests/integration/test_input_topic_recreated.py)."""

from __future__ import annotations

from shared.runtime.input_kept import InputLost
from shared.runtime.input_topics import InputTopicReplaced, replaced_topics


def test_a_topic_with_another_id_is_replaced_one_absent_or_new_is_not() -> None:
    recorded = {"app.in": "AAAA", "app.control": "BBBB", "app.gone": "CCCC"}
    now = {"app.in": "ZZZZ", "app.control": "BBBB", "app.added": "DDDD"}
    assert replaced_topics(recorded, now) == {"app.in": ("AAAA", "ZZZZ")}


def test_the_refusal_is_one_line_an_input_lost_and_names_the_way_out() -> None:
    refused = InputTopicReplaced("fraud", {"fraud.payments": ("AAAA", "ZZZZ")},
                                 "/cp/fraud/statewise-input-topics.json")
    text = str(refused)
    assert isinstance(refused, InputLost)  # the commands exit 78 (DO_NOT_RESTART) on it
    assert "\n" not in text
    assert "fraud.payments (id AAAA, now ZZZZ)" in text
    assert "STATEWISE_ALLOW_NEW_CHECKPOINT=true" in text
    assert "delete /cp/fraud/statewise-input-topics.json" in text
