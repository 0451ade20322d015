"""What ``ordo bench eos``'s loop makes of a consumed batch's error events."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, Message

from ordo.cli import CliError
from ordo_testbed.bench.eos_loop import records_of


def test_a_batchs_records_pass_and_a_transient_error_event_is_logged_not_dropped_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = Message(topic="in", partition=0, offset=1), Message(topic="in", partition=1, offset=4)
    transient = Message(error=KafkaError(KafkaError._TRANSPORT, "broker went away"))
    with caplog.at_level(logging.WARNING, logger="ordo_testbed.bench.eos_loop"):
        assert records_of([first, transient, second]) == [first, second]
    assert "broker went away" in caplog.text


def test_a_fatal_error_event_ends_the_loop_with_what_failed() -> None:
    fatal = Message(error=KafkaError(KafkaError._FENCED, "fenced by a newer member", fatal=True))
    with pytest.raises(CliError, match=r"input consumer failed.*fenced by a newer member"):
        records_of([Message(topic="in", partition=0, offset=1), fatal])
