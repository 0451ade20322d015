"""The ordo-kafka source's options: defaults, kafka.* passthrough, and errors naming the option."""

from __future__ import annotations

import pytest

from ordo.errors import ConfigError
from ordo_spark.options import parse_options

BASE = {"kafka.bootstrap.servers": "kafka:9092", "subscribe": "orders, payments"}


def test_defaults_and_passthrough() -> None:
    options = parse_options({**BASE, "kafka.security.protocol": "SSL", "maxRecordsPerTrigger": "500"})
    assert options.topics == ("orders", "payments")
    assert options.starting == "latest" and options.fail_on_data_loss and options.gate
    assert options.max_records == 500
    config = options.consumer_config("reader")
    assert config["security.protocol"] == "SSL" and config["bootstrap.servers"] == "kafka:9092"
    assert config["enable.auto.commit"] is False and config["auto.offset.reset"] == "error"
    assert int(config["fetch.max.bytes"]) >= 50_000_000  # whole ranges are read at once


def test_option_names_are_case_insensitive() -> None:
    options = parse_options({**BASE, "STARTINGOFFSETS": "earliest", "FailOnDataLoss": "false"})
    assert options.starting == "earliest" and not options.fail_on_data_loss


def test_starting_offsets_json() -> None:
    options = parse_options({**BASE, "startingOffsets": '{"orders": {"0": 23, "1": -2}}'})
    assert options.starting == {"orders": {0: 23, 1: -2}}


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"subscribe": ""}, "subscribe"),
        ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
        ({"maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger"),
        ({"maxRecordsPerTrigger": "lots"}, "maxRecordsPerTrigger"),
        ({"failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({"gate": "off"}, "gate"),
        ({"startingOffsets": "newest"}, "startingOffsets"),
        ({"startingOffsets": '{"other": {"0": 1}}'}, "startingOffsets"),
        ({"startingOffsets": '{"orders": {"0": -3}}'}, "startingOffsets"),
        ({"kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
        ({"kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
        ({"maxOffsetPerTrigger": "5"}, "maxoffsetpertrigger"),
    ],
)
def test_bad_options_name_the_option(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_options({**BASE, **extra})
