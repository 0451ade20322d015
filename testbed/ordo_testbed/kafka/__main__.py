"""``python -m ordo_testbed.kafka [--port N] [--control-port N] [--state-dir D]``: Apache Kafka
behind the fault proxy, in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from ordo_testbed.kafka.broker import run_foreground


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m ordo_testbed.kafka", description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=9092, help="proxy (bootstrap) port; 0: any free port")
    parser.add_argument("--control-port", type=int, default=None, help="HTTP fault control port (0: free)")
    parser.add_argument("--state-dir", type=Path, default=None, help="keep the broker's data here")
    args = parser.parse_args(argv)
    run_foreground(args.port, state_dir=args.state_dir, control_port=args.control_port)


if __name__ == "__main__":
    main()
