"""KIP-609's consume-transform-produce benchmark (``ordo bench eos``), with and without
pre-registration, side by side on one broker: alternating rounds, the side that goes first swapped.

librdkafka (2.16) has no call to register a transaction's partitions at its start, and against
Kafka 4.3 it still speaks the first transaction protocol (Produce v10, AddPartitionsToTxn v0,
EndTxn v1), not KIP-890's implicit enrollment: the declaration is checked in the client and saves
no round trip. So the figure to watch is what the check costs (a ratio near 1), not a gain.
"""

from __future__ import annotations

import argparse

from ordo.cli.bench import client_configs, measure

from ._result import Result
from ._testbed import kafka_bootstrap

ROUNDS = 5
RECORDS = 20_000
TRANSACTION_SIZE = 500


def _args(bootstrap: str, round_: int, pre_registration: bool) -> argparse.Namespace:
    tag = f"{'pre' if pre_registration else 'plain'}-{round_}"
    return argparse.Namespace(
        bootstrap=bootstrap, input_topic=f"eos-in-{tag}", output_topic=f"eos-out-{tag}", partitions=6,
        consumer_group_id=f"eos-{tag}", poll_timeout=100, transaction_size=TRANSACTION_SIZE,
        pre_registration=pre_registration, records=RECORDS, record_size=100, transactional_id=None,
        throughput=-1, producer_config=None, consumer_config=None, producer_props=[], consumer_props=[],
    )  # fmt: skip


def run() -> list[Result]:
    rates: dict[bool, list[float]] = {True: [], False: []}
    with kafka_bootstrap() as bootstrap:
        # uncounted: the first run on a fresh broker also waits for its coordinators to load (the
        # transaction log's, the group's), which made round 0's first side 0.5 of its next rounds
        warm_up = _args(bootstrap, -1, False)
        measure(warm_up, client_configs(warm_up, bootstrap, "warm-up"), "warm-up")
        for round_ in range(ROUNDS):
            for pre in (True, False) if round_ % 2 else (False, True):
                args = _args(bootstrap, round_, pre)
                run_id = f"r{round_}{int(pre)}"
                result = measure(args, client_configs(args, bootstrap, run_id), run_id)
                if not result.exactly_once:
                    raise RuntimeError(
                        f"eos bench round {round_}: {result.duplicates} duplicates, {result.missing} missing"
                    )
                rates[pre].append(result.records / result.seconds)
    print(f"  with pre-registration: {rates[True]}; without: {rates[False]}")
    return [
        Result.paired(
            f"ordo bench eos ({TRANSACTION_SIZE}/txn): with vs without pre-registration",
            rates[True],
            rates[False],
            "rec/s",
            ">= 0.95",
        ),
    ]
