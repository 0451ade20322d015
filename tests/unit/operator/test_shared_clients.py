"""The operator's shared Kafka clients: a connection whose clients take long to make (a cluster
that does not answer) holds up only the callers of that connection."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ordo_operator import kafka


class _Side:
    """A KafkaSide that takes until ``release`` is set to make for the "slow" cluster."""

    started = threading.Event()
    release = threading.Event()
    made: list[str] = []

    def __init__(self, config: dict[str, Any], _settings: object) -> None:
        if config["bootstrap.servers"] == "slow:9092":
            _Side.started.set()
            assert _Side.release.wait(30), "the test never released the slow cluster"
        _Side.made.append(config["bootstrap.servers"])

    def close(self) -> None:
        pass


@pytest.fixture
def sides(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Side]]:
    monkeypatch.setattr(kafka, "KafkaSide", _Side)
    _Side.started.clear()
    _Side.release.clear()
    _Side.made.clear()
    yield _Side
    _Side.release.set()
    kafka.close_all()


SETTINGS: Any = None  # the stand-in side reads none


def _clients(server: str) -> object:
    return kafka.clients_for({"bootstrap.servers": server}, SETTINGS)


def test_a_slow_cluster_holds_up_only_its_own_callers(sides: type[_Side]) -> None:
    slow: list[object] = []
    first = threading.Thread(target=lambda: slow.append(_clients("slow:9092")))
    second = threading.Thread(target=lambda: slow.append(_clients("slow:9092")))
    first.start()
    assert sides.started.wait(10), "the slow cluster's clients were never asked for"
    second.start()
    fast: list[object] = []
    other = threading.Thread(target=lambda: fast.append(_clients("fast:9092")))
    other.start()
    other.join(10)  # while the slow one is being made
    assert not other.is_alive(), "another cluster's clients waited for the slow one's"
    assert sides.made == ["fast:9092"] and kafka.known_sides() == fast
    sides.release.set()
    first.join(30)
    second.join(30)
    assert len(slow) == 2 and slow[0] is slow[1], "one set of clients per connection"
    assert sides.made.count("slow:9092") == 1
    assert _clients("fast:9092") is fast[0]
