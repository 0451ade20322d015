"""``ordo testbed up``: the Kafka testbed and a Kubernetes API server, in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from . import CliError


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "testbed", help="local Kafka and Kubernetes stand-ins"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start both and serve until SIGINT/SIGTERM")
    up.add_argument("--kafka-port", type=int, default=9092, help="Kafka bootstrap port (0: any free port)")
    up.add_argument("--kube-port", type=int, default=6443, help="Kubernetes API port (0: any free port)")
    up.add_argument("--state-dir", type=Path, default=None, help="keep state (and the kubeconfig) here")
    up.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ..testbed.bed import Testbed
        from ..testbed.kafka import KafkaSetupError
        from ..testbed.kube import KubeSetupError
    except ImportError as error:
        raise CliError(
            f"the testbed needs the 'testbed' extra: pip install 'ordo[testbed]' ({error})"
        ) from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    bed = Testbed(
        kafka_port=args.kafka_port,
        kube_port=args.kube_port,
        state_dir=args.state_dir,
    )
    try:
        bed.start()
    except (OSError, RuntimeError, KafkaSetupError, KubeSetupError) as error:
        raise CliError(f"cannot start the testbed: {error}") from None
    try:
        for line in bed.shell_lines():
            print(line)
        print(f"# ready in {bed.startup_seconds:.2f}s; Ctrl-C stops it", file=sys.stderr)
        sys.stdout.flush()
        stop.wait()
    finally:
        bed.stop()
    return 0
