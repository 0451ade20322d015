"""``ordo bench eos`` end to end on the testbed broker, and its pure helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from ordo.cli import main as ordo
from ordo_testbed.bench.eos import percentile, tally
from ordo_testbed.kafka.fixtures import KafkaHandle


@pytest.mark.testbed
@pytest.mark.parametrize("registration", ["--pre-registration", "--no-pre-registration"])
def test_eos_bench_reports_and_verifies_exactly_once(
    kafka: KafkaHandle, capsys: pytest.CaptureFixture[str], registration: str
) -> None:
    code = ordo(
        ["bench", "eos", "--bootstrap-servers", kafka.bootstrap, "--input-topic", kafka.topic("in"),
         "--output-topic", kafka.topic("out"), "--consumer-group-id", kafka.topic("g"), "--records", "3000",
         "--record-size", "64", "--transaction-size", "250", "--poll-timeout", "50", registration]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    for row in ("records/s", "transactions/s", "commit latency p50", "commit latency p99", "exactly once"):
        assert row in out


@pytest.mark.testbed
def test_keyless_input_records_are_declared_in_pre_registration_mode(
    kafka: KafkaHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    """A keyless record may go to any partition: the transaction declares them all (it raised
    UndeclaredPartitionError when it declared the partition of an empty key)."""
    source = kafka.create_topic(3)
    keyless = Producer(kafka.config())
    for i in range(300):
        keyless.produce(source, f"keyless-{i}".encode())
    assert keyless.flush(10) == 0
    code = ordo(
        ["bench", "eos", "--bootstrap", kafka.bootstrap, "--input-topic", source,
         "--output-topic", kafka.topic("out"), "--consumer-group-id", kafka.topic("g"), "--records", "300",
         "--transaction-size", "100", "--pre-registration"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "600" in out and "exactly once" in out  # the keyless records and the bench's own


@pytest.mark.testbed
def test_clients_take_their_settings_from_config_files_and_props(
    kafka: KafkaHandle, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No --bootstrap: Kafka's address reaches every client only through the configs (producer side:
    the admin client, the filler and the transactional producer; consumer side: the consumer and
    the verifying reader). The transactional id is the one given, and the throughput cap holds."""
    producer_file, consumer_file = tmp_path / "producer.properties", tmp_path / "consumer.properties"
    producer_file.write_text(f"# the producers\nbootstrap.servers={kafka.bootstrap}\nlinger.ms=50\n")
    consumer_file.write_text(f"bootstrap.servers = {kafka.bootstrap}\n")
    transactional_id = kafka.topic("tx")
    # a producer with that transactional id: the benchmark's producer, using it, fences this one
    zombie = Producer(kafka.config(transactional_id=transactional_id))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(kafka.topic("zombie"), b"never committed")
    code = ordo(
        ["bench", "eos", "--producer-config", str(producer_file), "--consumer-config", str(consumer_file),
         "--producer-props", "linger.ms=2", "client.id=eos-producer",
         "--consumer-props", "fetch.wait.max.ms=50",
         "--transactional-id", transactional_id, "--throughput", "2000",
         "--consumer-group-id", kafka.topic("g"), "--records", "1000", "--transaction-size", "100"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "exactly once" in out
    rate = float(next(line for line in out.splitlines() if "records/s" in line).split()[-2].replace(",", ""))
    assert rate <= 2000 * 1.05, out  # capped (uncapped it runs several times faster)
    with pytest.raises(KafkaException, match=r"(?i)fenc"):
        zombie.commit_transaction(30)


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert ordo(["bench", "eos", "--testbed", "--transaction-size", "0"]) == 1
    assert "--transaction-size must be at least 1" in capsys.readouterr().err


def test_tally_counts_duplicates_and_missing_of_this_run_only() -> None:
    values = [b"r1:0:xx", b"r1:1:xx", b"r1:1:xx", b"r2:2:xx", b"other"]
    assert tally("r1", 3, values) == (1, 1)
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0 and percentile([], 0.5) != percentile([], 0.5)
