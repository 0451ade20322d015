"""A new owner reads the checkpoint topic up to its end before it starts: a checkpoint committed
behind another member's open transaction must not be missed (the chaos soak's duplicated unit)."""

import pytest
from confluent_kafka import Producer

from ordo.group.checkpoints import Checkpoint, CheckpointLog, ensure_checkpoint_topic
from ordo.member_wire import checkpoint_key
from ordo_testbed.kafka.fixtures import KafkaHandle

pytestmark = pytest.mark.testbed


def test_catch_up_waits_for_a_checkpoint_committed_behind_an_open_transaction(kafka: KafkaHandle) -> None:
    topic = kafka.topic("checkpoints")
    ensure_checkpoint_topic(kafka.admin, topic)
    slow, quick = (Producer(kafka.config(transactional_id=kafka.topic(n))) for n in ("slow", "quick"))
    for member in (slow, quick):
        member.init_transactions(30)
    # The slow member's unit is open (its checkpoint record written, EndTxn not yet), and the
    # quick member commits a checkpoint after it: that one lies beyond the last stable offset.
    slow.begin_transaction()
    slow.produce(topic, Checkpoint.now("7", "slow", 1).encode(), checkpoint_key("ns", "g", 0), 0)
    assert slow.flush(10) == 0
    quick.begin_transaction()
    quick.produce(topic, Checkpoint.now("15", "quick", 1).encode(), checkpoint_key("ns", "g", 1), 0)
    quick.commit_transaction(30)
    log = CheckpointLog(kafka.config(), topic)
    try:
        assert not log.catch_up(3), "caught up while a committed checkpoint was still unreadable"
        assert log.of("ns", "g", 1) is None
        slow.commit_transaction(30)
        assert log.catch_up(20)
        found = {p: c.checkpoint for p, c in log.of_group("ns", "g").items()}
        assert found == {0: "7", 1: "15"}
    finally:
        log.close()
