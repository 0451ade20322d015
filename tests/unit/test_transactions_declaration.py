"""KIP-609 declarations, without Kafka: shape checks, existence at begin, what is outside."""

import pytest

from ordo.errors import UndeclaredPartitionError
from ordo.transactions import Declaration, group_id_of


def test_outside_names_the_topic_or_partition() -> None:
    d = Declaration.of({"out": [0, 2]}, "g")
    assert d.outside("out", 2) is None
    assert d.outside("out", 1) == "partition 1 of 'out' is not declared (declared: [0, 2])"
    assert "topic 'other' is not declared" in (d.outside("other", 0) or "")
    assert d.group_outside("g") is None
    assert "declared 'g'" in (d.group_outside("h") or "")
    assert "declared no group" in (Declaration.of({"out": [0]}, None).group_outside("g") or "")


@pytest.mark.parametrize(
    ("partitions", "group", "message"),
    [
        ({}, None, "at least one topic"),
        ({"out": []}, None, "non-negative integers"),
        ({"out": [-1]}, None, "non-negative integers"),
        ({"out": 3}, None, "list of partition numbers"),
        ({"": [0]}, None, "non-empty strings"),
        ({"out": [0]}, "", "group_id"),
    ],
)
def test_bad_declarations_say_what_to_fix(
    partitions: dict[str, object], group: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Declaration.of(partitions, group)  # type: ignore[arg-type]


def test_declared_partitions_must_exist() -> None:
    d = Declaration.of({"out": [0, 5], "gone": [0]}, None)
    with pytest.raises(UndeclaredPartitionError, match="topic 'gone' does not exist"):
        d.check_exist({"out": 6})
    with pytest.raises(
        UndeclaredPartitionError, match=r"partitions \[5\] of 'out' do not exist \(it has 4\)"
    ):
        d.check_exist({"out": 4, "gone": 1})


def test_group_id_of_librdkafka_metadata() -> None:
    assert group_id_of(b"CGMDv2:\xff\xff\xff\xffbilling\x00member\x00\x00") == "billing"
    with pytest.raises(ValueError, match="consumer_group_metadata"):
        group_id_of("billing")
