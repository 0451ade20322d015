"""``python -m ordo_operator``: run the ordo operator (kopf)."""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
from collections.abc import Sequence
from typing import Any

import kopf

from .config import OperatorConfig
from .kafka import close_all
from .logs import FORMATS, configure_logging
from .metrics import start_metrics_server
from .replicas import Replica
from .startup import register_all


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ordo-operator", description="Run the ordo operator.")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch this namespace (repeatable)"
    )
    scope.add_argument(
        "--all-namespaces", "-A", action="store_true", help="watch the whole cluster (default)"
    )
    parser.add_argument(
        "--peering",
        nargs="?",
        const="ordo",
        default=None,
        metavar="NAME",
        help="coordinate several replicas through this kopf peering object (default name: ordo)",
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=None,
        help="peering priority (default: random, so replicas differ: the highest works, others stand by)",
    )
    parser.add_argument(
        "--no-scanning",
        action="store_true",
        help="do not watch CRDs and namespaces cluster-wide (for namespace-scoped RBAC)",
    )
    parser.add_argument("--liveness", default=None, help="health endpoint, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(os.environ.get("ORDO_METRICS_PORT") or 0),
        help="serve Prometheus metrics on this port (env ORDO_METRICS_PORT; 0: off)",
    )
    parser.add_argument(
        "--log-format",
        choices=sorted(FORMATS),
        default=os.environ.get("ORDO_LOG_FORMAT") or "text",
        help="text or json lines (env ORDO_LOG_FORMAT)",
    )
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    configure_logging(args.log_format, verbose=args.verbose)
    # kopf pauses *every* peer when two share a priority, so replicas must differ: a random one
    # makes the highest-priority replica the active one and the others hot standbys.
    priority = args.priority
    if args.peering is not None and priority is None:
        priority = random.SystemRandom().randrange(1, 2**31)
    # kopf names each peer after $POD_ID, or else after the user it looks up by uid: the image's
    # uid 10001 (any uid the chart's runAsUser sets) has no passwd entry, and that lookup killed
    # every replica at start with peering on (found by the e2e suite, docs/reliability.md).
    os.environ.setdefault("POD_ID", os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}")
    replica = Replica(args.peering, os.environ["POD_ID"], priority or 0, args.namespace)
    register_all(OperatorConfig.from_env(), replica)
    if args.no_scanning:

        @kopf.on.startup()
        def no_scanning(settings: kopf.OperatorSettings, **_: Any) -> None:
            settings.scanning.disabled = True

    if args.metrics_port:
        start_metrics_server(args.metrics_port)
    try:
        kopf.run(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            standalone=args.peering is None,
            peering_name=args.peering,
            priority=priority,
            liveness_endpoint=args.liveness,
        )
    finally:
        close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
