"""KIP-609's consume-transform-produce benchmark (``ordo bench eos``'s loop), with and without
pre-registration, side by side on one broker: transactions with and without it interleaved one
by one, the side that goes first swapped per pair; the median of five rounds.

librdkafka (2.16) has no call to register a transaction's partitions at its start, and against
Kafka 4.3 it still speaks the first transaction protocol (Produce v10, AddPartitionsToTxn v0,
EndTxn v1), not KIP-890's implicit enrollment: the declaration is checked in the client and saves
no round trip. So the figure to watch is what the check costs (a ratio near 1), not a gain.

How the sides share the broker decided the ratio before anything of ordo did:

- whole runs one after the other spread 0.51-1.54: a transaction begun before the coordinator
  has written the last one's markers waits 20 ms or more (docs/performance.md), and how many
  transactions of a run met that decided it;
- one loop a side, interleaved: 0.88-1.13, the same coin flip per transaction;
- three loops a side, in turn (a loop's next transaction five after its last): 0.92-1.03, and
  the side with pre-registration lost 2-4% in most runs, most of it in librdkafka's
  ``commit_transaction``, which ordo's declaration does not touch: each side had its own
  transactional ids and consumer groups, hashed to other partitions of the coordinators' logs.

So both sides share six loops: each transaction takes the next loop of one ring, in its side's
mode, and every loop serves both sides in turn. A loop's next transaction comes five after its
last, and the broker's first minute (its JIT) is uncounted: 400 transactions a side.
"""

from __future__ import annotations

import argparse
import time
import uuid
from contextlib import ExitStack
from functools import partial

from ordo_testbed.bench.eos import check_output, client_configs, register
from ordo_testbed.bench.eos_config import EosConfigs
from ordo_testbed.bench.eos_loop import EosLoop

from ._result import Result, alternate, per_record
from ._testbed import kafka_bootstrap

ROUNDS = 5
# of each side per round: at 400 (5 s a side) the rounds spread 0.94-1.03 around a cost of 1-2%;
# the noise of a round falls as its length grows (blocks of 150 of one mode against itself: 0.98-1.04)
TRANSACTIONS = 1_000
# uncounted transactions first: on a fresh broker a side's rate rose 2.5 times over its first 300
# transactions (its JIT)
WARM_UP = 400  # transactions of each side
TRANSACTION_SIZE = 500
SIDES = {"with": True, "without": False}  # name: pre-registration
LOOPS = 6  # one ring, shared by the sides
# each loop's share of the warm-up and the rounds, its uncounted first transaction, and some
# over: a batch may come short
RECORDS = ((WARM_UP + ROUNDS * TRANSACTIONS) * len(SIDES) // LOOPS + 10) * TRANSACTION_SIZE


def _args(bootstrap: str, tag: str) -> argparse.Namespace:
    """``ordo bench eos``'s own defaults (its parser's: an option added there cannot be missing
    here), with this benchmark's settings over them."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["eos"])
    vars(args).update(
        bootstrap=bootstrap, input_topic=f"eos-in-{tag}", output_topic=f"eos-out-{tag}", partitions=6,
        consumer_group_id=f"eos-{tag}", poll_timeout=100, transaction_size=TRANSACTION_SIZE,
        pre_registration=False, records=RECORDS, record_size=100, transactional_id=None,
        throughput=-1, producer_config=None, consumer_config=None, producer_props=[], consumer_props=[],
    )  # fmt: skip
    return args


class _Ring:
    """The loops; each transaction takes the next one, in the mode of the side that asks."""

    def __init__(self, loops: list[EosLoop]) -> None:
        self.loops = loops
        self.records = {True: 0, False: 0}  # processed, by mode (pre-registration or not)
        self._next = 0

    def transaction(self, pre_registration: bool, _block: int) -> None:
        loop = self.loops[self._next]
        self._next = (self._next + 1) % len(self.loops)
        before = loop.records
        while not loop.step(pre_registration):  # an empty poll is the side's time too
            if loop.done:
                raise RuntimeError(f"the {loop.source!r} loop ran out of input: raise RECORDS")
        self.records[pre_registration] += loop.records - before


def _first_transaction(loop: EosLoop, timeout: float = 120) -> None:
    """Uncounted: the consumer group's join, the coordinators loading on a fresh broker."""
    deadline = time.monotonic() + timeout
    while not loop.step():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no input records reached the {loop.source!r} loop in {timeout:g} s")


def run() -> list[Result]:
    rates: dict[str, list[float]] = {name: [] for name in SIDES}
    cpu: dict[str, list[float]] = {name: [] for name in SIDES}
    with kafka_bootstrap() as bootstrap, ExitStack() as stack:
        tag = uuid.uuid4().hex[:6]  # its own topics and groups, on a Kafka of your own too
        runs: list[tuple[str, argparse.Namespace, EosConfigs]] = []  # (run id, args, configs)
        for i in range(LOOPS):
            run_id = f"{tag}-{i}"
            args = _args(bootstrap, run_id)
            runs.append((run_id, args, client_configs(args, bootstrap, run_id)))
        ring = _Ring([stack.enter_context(EosLoop(args, configs, run_id)) for run_id, args, configs in runs])
        for loop in ring.loops:
            _first_transaction(loop)
        sides = {name: partial(ring.transaction, pre) for name, pre in SIDES.items()}
        alternate(WARM_UP, sides, first=True)
        for round_ in range(ROUNDS):
            before = dict(ring.records)
            spent = alternate(TRANSACTIONS, sides, first=round_ % 2 == 0)
            for name, pre in SIDES.items():
                rate, cpu_us = per_record(spent[name], ring.records[pre] - before[pre])
                rates[name].append(rate)
                cpu[name].append(cpu_us)
        for loop in ring.loops:
            while not loop.done:  # the rest, uncounted, so the output can be checked whole
                loop.step()
        stack.close()
        for run_id, args, configs in runs:
            duplicates, missing = check_output(configs, args.output_topic, run_id, RECORDS)
            if duplicates or missing:
                raise RuntimeError(f"eos bench {run_id}: {duplicates} duplicates, {missing} missing")
    print(f"  with pre-registration: {rates['with']}; without: {rates['without']}")
    return [
        Result.paired(
            f"ordo bench eos ({TRANSACTION_SIZE}/txn): with vs without pre-registration",
            rates["with"],
            rates["without"],
            "rec/s",
            ">= 0.95",
            cpu_us=(cpu["with"], cpu["without"]),
        ),
    ]
