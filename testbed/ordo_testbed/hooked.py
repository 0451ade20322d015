"""``python -m ordo_testbed.hooked [options] -- MODULE [ARGS...]``: run a program's module (e.g.
``ordo_sandbox.scenario.producer``) as ``__main__`` with a test's hook installed first, so neither
the program nor the SDK carries it:

- ``--stop-in-produce TOPIC``: librdkafka's ``Producer.produce`` is wrapped; after SIGUSR2, the
  next call for TOPIC stops the whole process (SIGSTOP to itself) inside the wrapper, i.e. after
  OrderedProducer checked its lease and chose the partition, before librdkafka has the record.
  With ``--moved-by N``, only at a record whose key N partitions would place elsewhere (only
  such a record can land misplaced once the topic has N). It prints ``stopped inside produce():
  p<partition> <value>`` to stderr first, and ``woke inside produce()`` after SIGCONT, then hands
  the record over.

A stop the process gives itself lands in that window every time; a SIGSTOP from outside would
land there by chance, in proportion to the time a thread spends between the two (most of the
producer's time at full speed, a sliver at the scenarios' paced rate).
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import sys
from typing import Any

__all__ = ["hooked_argv", "main"]


def hooked_argv(
    module: str,
    argv: list[str],
    *,
    stop_in_produce: str | None = None,
    moved_by: int | None = None,
) -> list[str]:
    """The command line that runs ``module`` with ``argv`` under these hooks."""
    options = [] if stop_in_produce is None else ["--stop-in-produce", stop_in_produce]
    options += [] if moved_by is None else ["--moved-by", str(moved_by)]
    return [sys.executable, "-m", "ordo_testbed.hooked", *options, "--", module, *argv]


def _install_stop_in_produce(topic: str, moved_by: int | None) -> None:
    """Replace confluent_kafka.Producer, before anything imports it, by a subclass whose
    ``produce`` stops the process once armed (SIGUSR2)."""
    import confluent_kafka

    armed = [False]
    moved: list[Any] = []  # murmur2_partition, imported once Producer is replaced (ordo imports it)

    def chosen(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bytes | None, int | None]:
        key = args[2] if len(args) > 2 else kwargs.get("key")
        partition = args[3] if len(args) > 3 else kwargs.get("partition")
        return key, partition

    def stops(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if not armed[0] or (args[0] if args else kwargs.get("topic")) != topic:
            return False
        key, partition = chosen(args, kwargs)
        return moved_by is None or (key is not None and moved[0](key, moved_by) != partition)

    class StoppingProducer(confluent_kafka.Producer):
        def produce(self, *args: Any, **kwargs: Any) -> None:
            if stops(args, kwargs):
                armed[0] = False
                value = args[1] if len(args) > 1 else kwargs.get("value")
                _, where = chosen(args, kwargs)
                print(f"stopped inside produce(): p{where} {value!r}", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)
                print("woke inside produce()", file=sys.stderr, flush=True)
            super().produce(*args, **kwargs)

    def arm(*_: object) -> None:
        armed[0] = True

    signal.signal(signal.SIGUSR2, arm)
    confluent_kafka.Producer = StoppingProducer  # type: ignore[misc]
    from ordo.partitioners import murmur2_partition

    moved.append(murmur2_partition)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ordo_testbed.hooked")
    parser.add_argument("--stop-in-produce", metavar="TOPIC", help="SIGUSR2 arms a stop inside produce()")
    parser.add_argument("--moved-by", type=int, metavar="N", help="stop only for a key N partitions move")
    parser.add_argument("module", help="the program's module, run as __main__")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.moved_by is not None and not args.stop_in_produce:
        parser.error("--moved-by says where --stop-in-produce stops: give both")
    if args.stop_in_produce:
        _install_stop_in_produce(args.stop_in_produce, args.moved_by)  # first: ordo's modules import Producer
    sys.argv = [args.module, *args.args]
    runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
