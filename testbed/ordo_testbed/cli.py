"""``ordo testbed`` (the harness's ``ordo.cli`` entry point ``testbed``): ``up`` starts the Kafka
testbed and a Kubernetes API server, in the foreground or ``--background``, and ``down`` stops a
background one. ``ordo bench`` is :mod:`ordo_testbed.bench`'s."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ordo.cli import CliError


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "testbed",
        help="local Kafka and Kubernetes stand-ins",
        description="A real Apache Kafka broker (behind ordo's fault-injecting proxy) and a real "
        "kube-apiserver with etcd, as local processes: no Docker, no cluster.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up",
        help="start both and serve until SIGINT/SIGTERM",
        description="Starts Kafka and the Kubernetes API server in the foreground, prints "
        "shell-sourceable lines (ORDO_KAFKA_BOOTSTRAP, KAFKA_DIRECT_BOOTSTRAP, KUBECONFIG, "
        "ORDO_KAFKA_FAULTS_URL) and serves until SIGINT/SIGTERM.",
    )
    up.add_argument(
        "--kafka-port",
        type=int,
        default=9092,
        help="Kafka bootstrap port (default %(default)s; 0: any free port)",
    )
    up.add_argument(
        "--kube-port",
        type=int,
        default=6443,
        help="Kubernetes API port (default %(default)s; 0: any free port)",
    )
    up.add_argument(
        "--state-dir", type=Path, default=None,
        help="keep state (and the kubeconfig) here (default: a temporary directory, removed at exit)",
    )  # fmt: skip
    up.add_argument(
        "--background", action="store_true",
        help="start it in a process of its own, print the export lines once it is ready and return "
        "(needs --state-dir; `ordo testbed down --state-dir DIR` stops it)",
    )  # fmt: skip
    up.set_defaults(run=run)
    down = actions.add_parser(
        "down",
        help="stop a testbed started with --background",
        description="Stops the testbed `ordo testbed up --background --state-dir DIR` started.",
    )
    down.add_argument("--state-dir", type=Path, required=True)
    down.set_defaults(run=run_down)


PID_FILE = "testbed.pid"


def run_background(args: argparse.Namespace) -> int:
    """``up --background``: the testbed in a session of its own, its lines printed once ready."""
    from ordo_testbed.bed import parse_shell_lines

    if args.state_dir is None:
        raise CliError("--background needs --state-dir (where `ordo testbed down` finds it)")
    state = args.state_dir.resolve()
    state.mkdir(parents=True, exist_ok=True)
    if (state / PID_FILE).exists():
        raise CliError(f"a testbed already runs from {state}: `ordo testbed down --state-dir {state}` first")
    out = state / "testbed.out"
    argv = [sys.executable, "-m", "ordo.cli", "testbed", "up", "--kafka-port", str(args.kafka_port),
            "--kube-port", str(args.kube_port), "--state-dir", str(state)]  # fmt: skip
    with out.open("w") as stdout, (state / "testbed.log").open("a") as stderr:
        process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, start_new_session=True)
    (state / PID_FILE).write_text(str(process.pid))
    deadline = time.monotonic() + 300  # a first run on a machine builds nothing, but Kafka may be slow
    while time.monotonic() < deadline:
        lines = out.read_text().splitlines()
        if {"ORDO_KAFKA_BOOTSTRAP", "KUBECONFIG"} <= parse_shell_lines(lines).keys():
            for line in lines:
                print(line)
            print(f"# stop it with: ordo testbed down --state-dir {state}", file=sys.stderr)
            return 0
        if process.poll() is not None:
            (state / PID_FILE).unlink(missing_ok=True)
            tail = (state / "testbed.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise CliError("the testbed did not start: " + " / ".join(tail))
        time.sleep(0.2)  # polling its output file for the ready lines
    process.terminate()
    raise CliError(f"the testbed was not ready within 300 s (its log: {state / 'testbed.log'})")


def run_down(args: argparse.Namespace) -> int:
    pid_file = args.state_dir.resolve() / PID_FILE
    if not pid_file.exists():
        raise CliError(f"no testbed runs from {args.state_dir} (no {PID_FILE} there)")
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            os.kill(pid, 0)  # raises once it is gone
            time.sleep(0.2)  # polling until its processes are stopped
        raise CliError(f"the testbed (pid {pid}) did not stop within 90 s")
    except ProcessLookupError:
        pass
    pid_file.unlink(missing_ok=True)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.background:
        return run_background(args)
    from ordo_testbed.bed import Testbed
    from ordo_testbed.kafka import KafkaSetupError
    from ordo_testbed.kube import KubeSetupError

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
