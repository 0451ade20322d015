"""Asking the brokers about a topic's partitions, for code that creates or grows topics beside ordo
(the operator, a test harness, a benchmark).

``await_served(admin, topic, partitions, timeout, first=0)``
    Returns once the leader of each of partitions first..partitions-1 answers ListOffsets for it.
    The metadata lists new partitions before the broker hosts them, and a producer that writes to
    one in that window can be told a record was written when it was not: wait here after
    CreateTopics or CreatePartitions, before anything is written (docs/reliability.md).
``end_offsets(admin, topic, partitions, timeout) -> dict[int, int]``
    The log end of partitions 0..partitions-1, each answered by its leader (read_uncommitted).
``relearn_leaders(client, topic, timeout=1.0)``
    Ask for the topic's metadata now, after a failed question, so the client's next request goes
    to the leader of the moment instead of the one it learnt first (librdkafka refreshes every
    5 minutes).

The code lives in ordo's internal modules (``_partitions``, ``_clients``); this is its name.
"""

from __future__ import annotations

from ._clients import relearn_leaders
from ._partitions import await_served, end_offsets

__all__ = ["await_served", "end_offsets", "relearn_leaders"]
