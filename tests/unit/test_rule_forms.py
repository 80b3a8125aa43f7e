"""The fraud velocity rule in the simple per-key form (bench/peers/velocity_per_key.py,
``KeyRule.on_key``) gives exactly the rows of the vectorised form the app runs
(apps/fraud/rules/velocity.py), over the fraud stream in batches, through the bucketed
layer in memory: what bench/rule_forms.py measures the two forms on."""

from __future__ import annotations

from apps.fraud.rules.velocity import Velocity
from apps.fraud.settings import FraudSettings
from bench.peers.velocity_per_key import VelocityPerKey
from bench.rule_forms import decoded_batches, run_operator


def test_the_per_key_form_raises_the_vectorised_forms_alerts():
    settings = FraudSettings(velocity_count=3, velocity_window_s=60)
    batches = decoded_batches(settings, records=6_000, batch=700, cards=2_000)
    _, vectorised = run_operator(settings, [Velocity()], batches)
    _, per_key = run_operator(settings, [VelocityPerKey()], batches)
    assert len(vectorised) > 100  # the stream exercises the rule

    def rows(frame):
        return sorted(frame.to_dict("records"), key=lambda r: r["alert_id"])

    assert rows(per_key) == rows(vectorised)
