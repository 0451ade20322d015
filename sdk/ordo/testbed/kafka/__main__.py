"""``python -m ordo.testbed.kafka [--port N] [--control-port N] [--max-partitions N] [--state-dir D]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from .broker import run_foreground


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ordo.testbed.kafka", description=__doc__)
    parser.add_argument("--port", type=int, default=9092, help="proxy (bootstrap) port")
    parser.add_argument("--control-port", type=int, default=None, help="HTTP fault control port (0: free)")
    parser.add_argument("--max-partitions", type=int, default=64)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    run_foreground(
        args.port,
        max_partitions=args.max_partitions,
        state_dir=args.state_dir,
        control_port=args.control_port,
    )


if __name__ == "__main__":
    main()
