"""``ordo sandbox``: show what ordo does. Until the full testbed scenario lands, this runs ordo's
real planning code (assignment and the expansion gate) over a simulated topic, so every number
printed comes from the code that the operator and the SDK use."""

from __future__ import annotations

import argparse
import random
from typing import Any

from rich.console import Console
from rich.table import Table

from ..assignment import assign, moved_partitions, standby_members
from ..epochs import EpochHistory, GateKeeper
from ..partitioners import murmur2_partition


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("sandbox", help="run the demo scenario")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the simulated traffic")
    parser.add_argument("--keys", type=int, default=200, help="distinct keys")
    parser.add_argument("--records", type=int, default=5000, help="records per epoch")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    console = Console()
    _rebalances(console)
    violations = _expansion(console, random.Random(args.seed), args.keys, args.records)
    return 0 if violations == 0 else 1


def _rebalances(console: Console) -> None:
    table = Table(title="ProducerGroup orders-cdc: 8 source partitions, sticky assignment")
    for column in ("event", "generation", "assignment", "moved", "standby"):
        table.add_column(column)
    steps = [
        ("orders-cdc-0 joins", ["orders-cdc-0"]),
        ("orders-cdc-1 joins", ["orders-cdc-0", "orders-cdc-1"]),
        ("orders-cdc-2 joins", ["orders-cdc-0", "orders-cdc-1", "orders-cdc-2"]),
        ("orders-cdc-1 dies", ["orders-cdc-0", "orders-cdc-2"]),
        ("9 members for 8 partitions", [f"orders-cdc-{i}" for i in range(9)]),
    ]
    current: dict[str, list[int]] = {}
    for generation, (event, members) in enumerate(steps, start=1):
        nxt = assign(8, members, current)
        shown = "  ".join(f"{m[-1]}:{ps}" for m, ps in nxt.items() if ps)
        table.add_row(
            event,
            str(generation),
            shown,
            str(sorted(moved_partitions(current, nxt))),
            ", ".join(standby_members(nxt)) or "-",
        )
        current = nxt
    console.print(table)


def _expansion(console: Console, rng: random.Random, keys: int, records: int) -> int:
    counts = [4, 6, 12]
    history = EpochHistory.initial("orders", counts[0])
    logs: list[list[tuple[bytes, int]]] = [[] for _ in range(counts[-1])]
    sequence: dict[bytes, int] = {}
    for index, count in enumerate(counts):
        if index:
            thresholds = {p: len(logs[p]) for p in range(counts[index - 1])}
            history = history.begin_fence(count).publish(thresholds)
        for _ in range(records):
            key = f"customer-{rng.randrange(keys)}".encode()
            sequence[key] = sequence.get(key, -1) + 1
            logs[murmur2_partition(key, count)].append((key, sequence[key]))

    table = Table(
        title="OrderedTopicExpansion orders: 4 -> 6 -> 12 partitions, consumed in random interleaving"
    )
    for column in ("consumer", "records", "per-key order violations", "times a gate held a partition"):
        table.add_column(column, justify="right")
    gated = _consume(logs, GateKeeper(history), rng)
    plain = _consume(logs, None, rng)
    table.add_row("GatedConsumer (ordo gate)", str(sum(map(len, logs))), str(gated[0]), str(gated[1]))
    table.add_row("plain consumer (no gate)", str(sum(map(len, logs))), str(plain[0]), "-")
    console.print(table)
    return gated[0]


def _consume(
    logs: list[list[tuple[bytes, int]]], gates: GateKeeper | None, rng: random.Random
) -> tuple[int, int]:
    progress = [0] * len(logs)
    seen: dict[bytes, int] = {}
    violations = held = 0
    while True:
        pending = [p for p, log in enumerate(logs) if progress[p] < len(log)]
        if not pending:
            return violations, held
        p = rng.choice(pending)
        if gates is not None and not gates.gate(p, progress[p], dict(enumerate(progress))).open:
            held += 1
            continue
        for _ in range(rng.randint(1, 50)):  # a fetch's worth of records
            if progress[p] == len(logs[p]) or (
                gates is not None and not gates.gate(p, progress[p], dict(enumerate(progress))).open
            ):
                break
            key, number = logs[p][progress[p]]
            violations += number < seen.get(key, -1)
            seen[key] = max(number, seen.get(key, -1))
            progress[p] += 1
