"""SIGINT and SIGTERM as the run's stop requests (shared/runtime/stop_signals.py): the
first two ask for a stop after the batch, the third forces it; the handlers are the
run's until it ends, whatever replaced them meanwhile (a SparkContext puts pyspark's
SIGINT handler in place), and the earlier ones come back after. Real signals to this
process."""

from __future__ import annotations

import os
import signal

import pytest

from shared.runtime.stop_signals import StopSignals


def deliver(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)  # handled before the next bytecode of this thread


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_two_signals_ask_for_a_stop_the_third_forces_it(sig, caplog):
    before = signal.getsignal(sig)
    with StopSignals("fraud") as signals:
        deliver(sig)
        assert signals.requested.is_set() and not signals.forced.is_set()
        deliver(sig)
        assert not signals.forced.is_set() and signals.exit_code == 0
        deliver(sig)
        assert signals.forced.is_set() and signals.exit_code == 128 + sig
    assert signal.getsignal(sig) is before
    assert len(caplog.records) == 3
    assert caplog.records[0].getMessage() == (
        f"{sig.name}: stopping fraud after the current batch (a third signal stops it at "
        "once)")


def test_installing_again_takes_the_signal_back_and_restores_the_first_handler():
    before = signal.getsignal(signal.SIGINT)
    with StopSignals("fraud") as signals:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as pyspark's context
        signals.install()
        deliver(signal.SIGINT)
        assert signals.requested.is_set()
    assert signal.getsignal(signal.SIGINT) is before
