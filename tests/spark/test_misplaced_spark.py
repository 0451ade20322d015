"""The Spark source and misplaced records (issue 42 item 2): a batch read of a topic grown 2 -> 4
whose records include keyed ones a plain producer placed by 2 partitions after the thresholds
(``ordo_testbed.gate_topics.grown_with_misplaced_records``) fails by default, naming the record
and the option that reads it anyway (misplacedRecords=deliver), which reads every record. Without
the rule the first read succeeds and the test fails."""

from __future__ import annotations

from typing import Any

import pytest

from ordo_testbed.gate_topics import grown_with_misplaced_records
from ordo_testbed.kafka.fixtures import KafkaHandle

pytestmark = [pytest.mark.spark, pytest.mark.testbed]


def test_a_read_fails_at_a_misplaced_record_unless_told_to_deliver_it(spark: Any, kafka: KafkaHandle) -> None:
    grown = grown_with_misplaced_records(kafka, per_epoch=20)
    reader = (
        spark.read.format("ordo-kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", grown.topic)
        .option("epochTopic", grown.epochs)
    )
    with pytest.raises(Exception, match="misplacedRecords") as failure:
        reader.load().collect()
    assert any(f"[{p}]@{o}" in str(failure.value) for p, o in grown.misplaced), "names the record"
    assert "placed by 2 partitions" in str(failure.value)

    rows = reader.option("misplacedRecords", "deliver").load().collect()
    assert {(r["partition"], r["offset"]) for r in rows} == grown.records
    assert {r["epoch"] for r in rows if (r["partition"], r["offset"]) in grown.misplaced} == {1}
