"""``ordo bench`` (the harness's ``ordo.cli`` entry point ``bench``): ``eos``, KIP-609's
consume-transform-produce benchmark against any Kafka or, with ``--testbed``, a local one
(:mod:`.eos`; its loop :mod:`.eos_loop`, its client configs :mod:`.eos_config`), and from a
checkout ``all`` and ``<name>``, the repository's benchmarks (:mod:`.checkout`)."""

from __future__ import annotations

import argparse
from typing import Any

from . import checkout, eos

__all__ = ["register"]


def register(commands: Any) -> None:
    """``ordo bench`` and its kinds, on the ``ordo`` command's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "bench",
        help="benchmarks against a Kafka cluster",
        description="Benchmarks: eos (KIP-609's consume-transform-produce); from a checkout of ordo "
        "also all and each of the repository's benchmarks.",
    )
    kinds = parser.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    eos.register(kinds)
    checkout.register(kinds)
