"""The ordo-kafka source's options: Spark's Kafka source names with Spark's meanings, ordo's old
names as aliases, kafka.* passthrough, and errors that name the option and what to use."""

from __future__ import annotations

import pytest

from ordo.errors import ConfigError
from ordo_spark.options import Mode, include_headers, parse_options
from ordo_spark.subscription import Subscription

BASE = {"kafka.bootstrap.servers": "kafka:9092", "subscribe": "orders, payments"}


def test_defaults_and_passthrough() -> None:
    options = parse_options({**BASE, "kafka.security.protocol": "SSL", "maxOffsetsPerTrigger": "500"})
    assert options.topics == ("orders", "payments")
    assert options.starting == "latest" and options.fail_on_data_loss and options.gate
    assert options.max_records == 500 and options.include_headers
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


def test_sparks_options_are_accepted_with_sparks_meanings() -> None:
    options = parse_options(
        {
            **BASE,
            "includeHeaders": "false",
            "startingTimestamp": "1700000000000",
            "startingOffsetsByTimestampStrategy": "latest",
            "minOffsetsPerTrigger": "100",
            "maxTriggerDelay": "30s",
            "kafkaConsumer.pollTimeoutMs": "5000",
            "groupIdPrefix": "etl",
        }
    )
    assert not options.include_headers
    assert options.starting_times == 1_700_000_000_000 and options.starting_times_strategy == "latest"
    assert (options.min_records, options.max_trigger_delay_ms) == (100, 30_000)
    assert options.poll_timeout_ms == 5000
    assert options.consumer_config("reader")["group.id"] == "etl-reader"
    by_time = parse_options({**BASE, "startingOffsetsByTimestamp": '{"orders": {"0": 1000}}'})
    assert by_time.starting_times == {"orders": {0: 1000}}
    group = parse_options({**BASE, "kafka.group.id": "mine"}).consumer_config("reader")
    assert group["group.id"] == "mine"


def test_subscribe_pattern_and_assign() -> None:
    pattern = parse_options({"kafka.bootstrap.servers": "k:9092", "subscribePattern": "orders-.*"})
    assert pattern.subscription == Subscription(pattern="orders-.*")
    assign = parse_options(
        {"kafka.bootstrap.servers": "k:9092", "assign": '{"orders": [2, 0]}', "gate": "false"}
    )
    assert assign.subscription.assigned == {"orders": (0, 2)} and assign.topics == ("orders",)


def test_old_names_stay_aliases() -> None:
    old = parse_options({**BASE, "maxRecordsPerTrigger": "7", "pollTimeoutMs": "900"})
    assert (old.max_records, old.poll_timeout_ms) == (7, 900)


def test_batch_reads_default_to_the_whole_topic() -> None:
    options = parse_options(BASE, "batch")
    assert (options.starting, options.ending) == ("earliest", "latest")
    ending = parse_options({**BASE, "endingOffsets": '{"orders": {"0": 50, "1": -1}}'}, "batch")
    assert ending.ending == {"orders": {0: 50, 1: -1}}
    assert parse_options({**BASE, "endingTimestamp": "99"}, "batch").ending_times == 99


def test_include_headers_sets_the_schema_before_the_mode_is_known() -> None:
    assert include_headers(BASE) and not include_headers({**BASE, "INCLUDEHEADERS": "False"})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"maxOffsetPerTrigger": "5"}, "did you mean maxOffsetsPerTrigger"),
        ({"startingOffset": "earliest"}, "did you mean startingOffsets"),
        ({"includeHeader": "true"}, "did you mean includeHeaders"),
        ({"subscribePatern": "x"}, "did you mean subscribePattern"),
        ({"bootstrap.servers": "k:9092"}, "did you mean kafka.bootstrap.servers"),
        ({"topic": "orders"}, "did you mean subscribe"),
        ({"colour": "blue"}, "known options: assign, .*subscribePattern"),
    ],
)
def test_unknown_options_name_the_closest_known_one(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options({**BASE, **extra})


@pytest.mark.parametrize(
    ("extra", "mode", "message"),
    [
        ({"minPartitions": "8"}, "stream", "minPartitions is not supported: .*never split"),
        ({"maxRecordsPerPartition": "8"}, "batch", "maxRecordsPerPartition is not supported"),
        ({"fetchOffset.numRetries": "3"}, "stream", "librdkafka, which retries"),
        ({"endingOffsets": "latest"}, "stream", "endingOffsets is for batch queries.*availableNow"),
        ({"endingTimestamp": "5"}, "stream", "endingTimestamp is for batch queries"),
        ({"maxOffsetsPerTrigger": "5"}, "batch", "maxOffsetsPerTrigger limits the micro-batches"),
        ({"minOffsetsPerTrigger": "5"}, "batch", "minOffsetsPerTrigger limits the micro-batches"),
        ({"startingOffsets": "latest"}, "batch", "cannot be latest in a batch read"),
        ({"endingOffsets": "earliest"}, "batch", "ends at earliest reads nothing"),
        ({"endingOffsets": '{"orders": {"0": -2}}'}, "batch", "endingOffsets must be latest or JSON"),
        ({"assign": '{"orders": [0]}'}, "stream", "exactly one of the options subscribe"),
        ({"subscribePattern": "orders"}, "stream", "exactly one of the options subscribe"),
        ({"kafka.key.deserializer": "x"}, "stream", "keys are always binary"),
        (
            {"maxOffsetsPerTrigger": "5", "maxRecordsPerTrigger": "5"},
            "stream",
            "set only maxOffsetsPerTrigger",
        ),
        ({"pollTimeoutMs": "5", "kafkaConsumer.pollTimeoutMs": "5"}, "stream", "set only kafkaConsumer"),
        ({"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "5"}, "stream", "no batch could satisfy"),
        ({"startingOffsetsByTimestamp": '{"other": {"0": 1}}'}, "stream", "not in subscribe"),
        ({"maxTasks": "0"}, "stream", "maxTasks must be a positive integer"),
    ],
)
def test_refused_options_say_why_and_what_to_use(extra: dict[str, str], mode: Mode, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options({**BASE, **extra}, mode)


def test_assign_needs_the_gate_off() -> None:
    with pytest.raises(ConfigError, match=r"assign needs gate=false.*Use subscribe"):
        parse_options({"kafka.bootstrap.servers": "k:9092", "assign": '{"orders": [0]}'})


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"subscribe": ""}, "subscribe"),
        ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"maxRecordsPerTrigger": "lots"}, "maxRecordsPerTrigger"),
        ({"failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({"includeHeaders": "yes"}, "includeHeaders"),
        ({"gate": "off"}, "gate"),
        ({"startingOffsets": "newest"}, "startingOffsets"),
        ({"startingOffsets": '{"other": {"0": 1}}'}, "startingOffsets"),
        ({"startingOffsets": '{"orders": {"0": -3}}'}, "startingOffsets"),
        ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "startingOffsetsByTimestampStrategy"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),
        ({"kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
        ({"kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
    ],
)
def test_bad_values_name_the_option(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_options({**BASE, **extra})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribePattern": "orders-("}, "subscribePattern is not a regular expression"),
        ({"assign": '["orders"]', "gate": "false"}, "assign must be JSON"),
        ({"assign": '{"orders": [-1]}', "gate": "false"}, "assign must be JSON"),
        ({"assign": '{"orders": []}', "gate": "false"}, "assign must be JSON"),
    ],
)
def test_bad_subscriptions_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_options({"kafka.bootstrap.servers": "k:9092", **options})


def test_misplaced_records_fail_by_default_and_deliver_on_request() -> None:
    assert parse_options(BASE).misplaced_records == "fail"
    assert parse_options({**BASE, "misplacedRecords": "Deliver"}, "batch").misplaced_records == "deliver"
    with pytest.raises(ConfigError, match=r"misplacedRecords must be fail .* or deliver"):
        parse_options({**BASE, "misplacedRecords": "skip"})
    ungated = {"kafka.bootstrap.servers": "k:9092", "subscribe": "orders", "gate": "false"}
    with pytest.raises(ConfigError, match="misplacedRecords needs gate=true"):
        parse_options({**ungated, "misplacedRecords": "deliver"})


def test_max_tasks_defaults_to_16_and_is_set_by_the_option() -> None:
    assert parse_options(BASE).max_tasks == 16
    assert parse_options({**BASE, "maxTasks": "512"}, "batch").max_tasks == 512


@pytest.mark.parametrize("level", ["read_uncommitted", "READ_UNCOMMITTED"])
def test_the_gated_source_reads_committed_records_only(level: str) -> None:
    with pytest.raises(ConfigError, match=r"kafka.isolation.level=.* not supported with gate=true.*aborted"):
        parse_options({**BASE, "kafka.isolation.level": level})
    for options in (BASE, {**BASE, "kafka.isolation.level": "Read_Committed"}):
        config = parse_options(options).consumer_config("reader")
        assert config["isolation.level"] == "read_committed"


def test_an_ungated_source_reads_as_the_user_says() -> None:
    options = parse_options({**BASE, "gate": "false", "kafka.isolation.level": "read_uncommitted"})
    assert options.consumer_config("driver")["isolation.level"] == "read_uncommitted"
