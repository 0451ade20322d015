"""``ordo abort-fence --topic T``: abort a topic's fencing epoch by hand.

For a fence no operator will end: its expansion was deleted while the operator could not reach
its Kafka cluster (its Secret gone, its namespace deleted), and the operator does not reach the
cluster to abort it as an orphan. Producers of the topic wait until the epoch is aborted, then
resume at the previous partition count; partitions the expansion created stay, in no epoch, as
after a fence timeout. An expansion still driving that epoch ends Aborted.

The write goes through the operator's own writer id (``writer_transactional_id``): the operator's
writer is fenced by it and checks the log again before its next write.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..control_topics import DEFAULT_EPOCH_TOPIC
from ..epochs import EpochHistory, EpochState
from ..epochs.log import EpochLog, EpochLogWriter, writer_transactional_id
from . import CliError
from .kafka_options import add_kafka_options, kafka_settings

__all__ = ["plan_abort", "register"]


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "abort-fence",
        help="abort a topic's fencing epoch by hand (producers resume at the previous count)",
        description="Abort the epoch a topic is fencing for, when no operator will: its "
        "OrderedTopicExpansion was deleted while the operator could not reach Kafka. Its producers "
        "resume at the previous partition count. Exit code 0 when the epoch is aborted (now or "
        "before).",
    )
    parser.add_argument("--topic", required=True, help="the topic whose fence to abort")
    parser.add_argument(
        "--epoch", type=int, default=None,
        help="abort only if this epoch is the one fencing (the expansion's status.epoch); a safeguard",
    )  # fmt: skip
    add_kafka_options(parser)
    parser.add_argument(
        "--epoch-topic", default=DEFAULT_EPOCH_TOPIC, help="the epoch log (default %(default)s)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds to read and write the epoch log (default %(default)g)",
    )
    parser.set_defaults(run=run)


def plan_abort(
    topic: str, history: EpochHistory | None, epoch: int | None
) -> tuple[EpochHistory | None, str]:
    """The history to write (None: nothing to do) and what to say; raises ``CliError`` when the
    fence cannot or must not be aborted."""
    if history is None:
        raise CliError(f"the epoch log has no history of {topic!r}: nothing is fencing")
    current = history.current
    if epoch is not None:
        named = next((e for e in history.epochs if e.epoch == epoch), None)
        if named is None:
            raise CliError(f"{topic!r} has no epoch {epoch} (its last is {current.epoch}, {current.state})")
        if named.state == EpochState.ABORTED:
            return None, f"epoch {epoch} of {topic!r} is aborted already"
        if named.state == EpochState.ACTIVE:
            raise CliError(
                f"epoch {epoch} of {topic!r} was published ({named.partitions} partitions): it stands"
            )
    if not history.fencing:
        return None, f"nothing to abort: the last epoch of {topic!r}, {current.epoch}, is {current.state}"
    return history.abort(), (
        f"aborted epoch {current.epoch} of {topic!r} ({current.from_partitions} -> {current.partitions}): "
        f"its producers resume at {current.from_partitions} partitions"
    )


def run(args: argparse.Namespace) -> int:
    config = kafka_settings(args)
    if config is None:
        raise CliError("say where Kafka is: --bootstrap (or ORDO_KAFKA_BOOTSTRAP)")
    log = EpochLog(config, args.epoch_topic)
    writer = EpochLogWriter(config, args.epoch_topic, writer_transactional_id(args.epoch_topic))
    try:
        writer.ready(args.timeout)  # first: what is read next is read after every other writer stopped
        if not log.catch_up(args.timeout):
            raise CliError(f"the epoch log was not read to its end in {args.timeout:g}s: {log.describe()}")
        aborted, message = plan_abort(args.topic, log.history(args.topic), args.epoch)
        if aborted is not None:
            writer.write_checked(aborted, log, args.timeout)
    finally:
        writer.close()
        log.close()
    print(message)
    return 0
