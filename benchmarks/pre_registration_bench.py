"""KIP-609's consume-transform-produce benchmark (``ordo bench eos``'s loop), with and without
pre-registration, side by side on one broker: the two sides' transactions interleaved one by one,
the side that goes first swapped per pair; the median of five rounds.

librdkafka (2.16) has no call to register a transaction's partitions at its start, and against
Kafka 4.3 it still speaks the first transaction protocol (Produce v10, AddPartitionsToTxn v0,
EndTxn v1), not KIP-890's implicit enrollment: the declaration is checked in the client and saves
no round trip. So the figure to watch is what the check costs (a ratio near 1), not a gain.

A transaction begun before the coordinator has written the last one's markers waits 20 ms or
more (docs/performance.md), and which transactions met that decided the ratio: whole runs one
after the other spread 0.51-1.54, one loop a side interleaved 0.88-1.13. So each side runs three
loops in turn (their own topics, group and transactional id), as ``group_bench`` does: a loop's
next transaction begins five transactions after its last.
"""

from __future__ import annotations

import argparse
import time
import uuid
from contextlib import ExitStack
from functools import partial

from ordo.cli.bench import check_output, client_configs
from ordo.cli.eos_config import EosConfigs
from ordo.cli.eos_loop import EosLoop

from ._result import Result, alternate, per_record
from ._testbed import kafka_bootstrap

ROUNDS = 5
TRANSACTIONS = 200  # of each side per round
# uncounted rounds first: on a fresh broker a side's rate rose 2.5 times over its first 300
# transactions (its JIT)
WARM_UP = 2
TRANSACTION_SIZE = 500
LOOPS = 3  # per side, used in turn
# each loop's share of the rounds, its uncounted first transaction, and some over: a batch may
# come short
RECORDS = ((WARM_UP + ROUNDS) * TRANSACTIONS // LOOPS + 10) * TRANSACTION_SIZE
SIDES = {"with": True, "without": False}  # name: pre-registration


def _args(bootstrap: str, tag: str, pre_registration: bool) -> argparse.Namespace:
    return argparse.Namespace(
        bootstrap=bootstrap, input_topic=f"eos-in-{tag}", output_topic=f"eos-out-{tag}", partitions=6,
        consumer_group_id=f"eos-{tag}", poll_timeout=100, transaction_size=TRANSACTION_SIZE,
        pre_registration=pre_registration, records=RECORDS, record_size=100, transactional_id=None,
        throughput=-1, producer_config=None, consumer_config=None, producer_props=[], consumer_props=[],
    )  # fmt: skip


def _transaction(loops: list[EosLoop], block: int) -> None:
    """One transaction of the side's next loop (an empty poll is the loop's time too)."""
    loop = loops[block % len(loops)]
    while not loop.step():
        if loop.done:
            raise RuntimeError(f"the {loop.source!r} loop ran out of input: raise RECORDS")


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
        loops: dict[str, list[EosLoop]] = {name: [] for name in SIDES}
        for name, pre in SIDES.items():
            for i in range(LOOPS):
                run_id = f"{tag}-{name}-{i}"
                args = _args(bootstrap, run_id, pre)
                configs = client_configs(args, bootstrap, run_id)
                loops[name].append(stack.enter_context(EosLoop(args, configs, run_id)))
                runs.append((run_id, args, configs))
        for loop in (loop for side in loops.values() for loop in side):
            _first_transaction(loop)
        sides = {name: partial(_transaction, side) for name, side in loops.items()}
        alternate(WARM_UP * TRANSACTIONS, sides, first=True)
        for round_ in range(ROUNDS):
            before = {name: _records(side) for name, side in loops.items()}
            spent = alternate(TRANSACTIONS, sides, first=round_ % 2 == 0)
            for name, side in loops.items():
                rate, cpu_us = per_record(spent[name], _records(side) - before[name])
                rates[name].append(rate)
                cpu[name].append(cpu_us)
        for loop in (loop for side in loops.values() for loop in side):
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


def _records(loops: list[EosLoop]) -> int:
    return sum(loop.records for loop in loops)
