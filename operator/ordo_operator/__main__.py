"""``python -m ordo_operator``: run the ordo operator (kopf)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import kopf

from .config import OperatorConfig
from .kafka import close_all
from .setup import register_all


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ordo-operator", description="Run the ordo operator.")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch this namespace (repeatable)"
    )
    scope.add_argument(
        "--all-namespaces", "-A", action="store_true", help="watch the whole cluster (default)"
    )
    parser.add_argument("--peering", action="store_true", help="coordinate several replicas (kopf peering)")
    parser.add_argument("--liveness", default=None, help="health endpoint, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    register_all(OperatorConfig.from_env())
    try:
        kopf.run(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            standalone=not args.peering,
            liveness_endpoint=args.liveness,
        )
    finally:
        close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
