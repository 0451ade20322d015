"""The testbed's Apache Kafka: what it is, and that it never outlives whoever started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


def test_the_broker_is_apache_kafka_in_kraft_mode(kafka: KafkaHandle) -> None:
    kafka.require_faults()  # the embedded testbed's broker, not a Kafka of the caller's
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})  # held: a dropped client fails its futures
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["process.roles"].value == "broker,controller"
    assert configs["offsets.topic.replication.factor"].value == "1"


def test_a_killed_starter_leaves_no_broker_behind() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", "from ordo_testbed.kafka import KafkaBroker\n"
         "import time\nb = KafkaBroker().start()\nprint(b.process.pid, flush=True)\ntime.sleep(600)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert starter.stdout is not None
    broker = int(starter.stdout.readline())
    starter.send_signal(signal.SIGKILL)
    starter.wait(10)

    def gone() -> bool:
        try:
            os.kill(broker, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{broker}/stat") as stat:  # reaped by init soon; a zombie is gone too
            return stat.read().split()[2] == "Z"

    wait_for(gone, 30, "the broker to exit with its starter")
