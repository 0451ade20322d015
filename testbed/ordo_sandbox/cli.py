"""``ordo sandbox``: everything ordo does, live, on the embedded testbed (no cluster needed).

See :mod:`ordo_sandbox` for what runs. Exit code 0 only when every check of the report holds.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ordo.cli import CliError
from ordo.cli.kafka_options import add_client_options, client_options


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "sandbox",
        help="the demo: producer group, expansion and a member failure while data flows, verified",
        description="Starts the testbed, the operator, a SQLite source copied by a ProducerGroup, gated "
        "consumers and the Spark ordered pipeline; adds a member, grows the topic 4 -> 8, SIGKILLs a "
        "member and adds another while data flows; then verifies order, loss and duplicates.",
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of data flow (default 60)")
    parser.add_argument("--members", type=int, default=3, help="members at the start (default 3)")
    parser.add_argument(
        "--bootstrap",
        help="a real Kafka instead of the testbed's (the topic must not exist; the operator runs here); "
        "-X and --command-config give what reaching it takes (SASL, TLS), to every client the sandbox starts",
    )
    add_client_options(parser)
    parser.add_argument(
        "--kubeconfig", type=Path,
        help="a real cluster instead of the testbed's (with --bootstrap): resources, Pods and Leases are "
        "there; the members run here, each bound to a placeholder Pod",
    )  # fmt: skip
    parser.add_argument(
        "--operator", choices=("auto", "here", "cluster"), default="auto",
        help="with --kubeconfig: the operator installed in the cluster, or one run here (default auto: "
        "the cluster's if it has a Ready one)",
    )  # fmt: skip
    parser.add_argument(
        "--pod-image", default=None, help="with --kubeconfig: the placeholder Pods' image (default pause)"
    )
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark pipeline (no Java needed)")
    parser.add_argument("--report", type=Path, help="also write the report as JSON here")
    parser.add_argument("--topic", default="orders", help="the topic (default orders)")
    parser.add_argument("--rate", type=float, default=150.0, help="orders inserted per second (default 150)")
    parser.add_argument("--workdir", type=Path, help="logs and the source database (default: a temp dir)")
    autoscale = parser.add_argument_group(
        "--autoscale", "the topic grows by itself: OrderedProducers ramp the load and a TopicAutoscaler "
        "decides (no ProducerGroup, no manual expansion); --duration is the ramp's length",
    )  # fmt: skip
    autoscale.add_argument("--autoscale", action="store_true", help="the autoscaling scenario")
    for flag, kind, default, what in _AUTOSCALE_OPTIONS:
        autoscale.add_argument(flag, type=kind, default=None, help=f"{what} (default {default:,})")
    parser.add_argument(
        "--live", action=argparse.BooleanOptionalAction, default=None,
        help="the live view (default: when the output is a terminal)",
    )  # fmt: skip
    parser.set_defaults(run=run)
    verify = commands.choices.get("verify")
    if verify is not None:  # the verifier checks a sandbox's topic against its source too
        verify.add_argument(
            "--source", dest="expected", type=_orders, metavar="ORDERS_DB",
            help="a sandbox's orders.db (its --workdir): every order must be in the topic once",
        )  # fmt: skip


_AUTOSCALE_OPTIONS: tuple[tuple[str, type, float, str], ...] = (
    ("--rate-from", float, 1000, "records/s at the ramp's start"),
    ("--rate-to", float, 10_000, "records/s at the ramp's end"),
    ("--hold", float, 20, "seconds at --rate-to after the ramp"),
    ("--keys", int, 100_000, "keys of the load"),
    ("--producers", int, 2, "OrderedProducer processes sharing the load"),
    ("--target", float, 1000, "the autoscaler's records/s per partition"),
    ("--max-partitions", int, 16, "the autoscaler's maxPartitions (minPartitions: 4, the topic's start)"),
    ("--window", int, 5, "the autoscaler's stabilizationWindowSeconds"),
    ("--cooldown", int, 10, "the autoscaler's cooldownSeconds"),
)


def _orders(path: str) -> Callable[[], dict[str, int]]:
    """``ordo verify --source``: customer → its orders' count, from a sandbox's SQLite source (read
    when the command runs, so a wrong path is its one-line error)."""

    def counts() -> dict[str, int]:
        from ordo_sandbox.source import source_counts

        if not Path(path).is_file():
            raise CliError(f"--source: no such file {path}")
        return source_counts(Path(path))

    return counts


def run(args: argparse.Namespace) -> int:
    from ordo_sandbox.stages import MIN_DURATION, topic_name_problem

    problem = topic_name_problem(args.topic)
    if problem is not None:
        raise CliError(f"--topic {args.topic!r} is not a Kafka topic name: {problem}")
    if args.duration < MIN_DURATION:
        raise CliError(f"--duration must be at least {MIN_DURATION:g} seconds, got {args.duration:g}")
    if args.members < 1:
        raise CliError(f"--members must be at least 1, got {args.members}")
    if args.rate <= 0:
        raise CliError(f"--rate must be positive, got {args.rate:g}")
    given = [flag for flag, *_ in _AUTOSCALE_OPTIONS if getattr(args, flag[2:].replace("-", "_")) is not None]
    if given and not args.autoscale:
        raise CliError(f"{', '.join(given)}: options of --autoscale; give --autoscale too")
    if args.autoscale and args.members != 3:
        raise CliError("--members: --autoscale runs no ProducerGroup (its load: --producers)")
    kafka_options = client_options(args)
    bootstrap = args.bootstrap or kafka_options.get("bootstrap.servers")
    if kafka_options and not bootstrap:
        raise CliError("-X and --command-config are for a real Kafka: give --bootstrap too "
                       "(the testbed's own Kafka needs no settings)")  # fmt: skip
    if args.kubeconfig is None and (args.operator != "auto" or args.pod_image is not None):
        raise CliError("--operator and --pod-image are for a real cluster: give --kubeconfig too")
    if args.kubeconfig is not None:
        if bootstrap is None:
            raise CliError("--kubeconfig needs --bootstrap: a Kafka reachable from here and from the cluster")
        if not args.kubeconfig.is_file():
            raise CliError(f"--kubeconfig: no file {args.kubeconfig}")
    from ordo_sandbox.run import Options, Sandbox

    if args.report is not None and not args.report.parent.is_dir():
        raise CliError(f"--report: folder {args.report.parent} does not exist")

    from rich.console import Console

    from ordo_sandbox.report import render

    console = Console()
    options = Options(
        duration=args.duration, members=args.members, bootstrap=bootstrap, kafka_options=kafka_options,
        spark=not args.no_spark,
        topic=args.topic, rate=args.rate, workdir=args.workdir, live=args.live,
        kubeconfig=args.kubeconfig, operator=args.operator,
    )  # fmt: skip
    if args.pod_image is not None:
        options.pod_image = args.pod_image
    try:
        if args.autoscale:
            return _autoscale(args, options, console)
        report = Sandbox(options, console).run()
    except (RuntimeError, AssertionError) as error:
        raise CliError(str(error).splitlines()[0] if str(error) else type(error).__name__) from None
    console.print(render(report))
    if args.report is not None:
        args.report.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    console.print(f"logs: {report.workdir}")
    return 0 if report.ok else 1


def _autoscale(args: argparse.Namespace, options: Any, console: Any) -> int:
    from ordo_sandbox.autoscale import AutoscaleSandbox
    from ordo_sandbox.autoscale_report import render_autoscale
    from ordo_sandbox.ramp import AutoscaleSettings, Ramp

    value = {flag[2:].replace("-", "_"): default for flag, _, default, _ in _AUTOSCALE_OPTIONS}
    value.update({k: v for k in value if (v := getattr(args, k)) is not None})
    for name in ("keys", "producers"):
        if value[name] < 1:
            raise CliError(f"--{name} must be at least 1, got {value[name]:g}")
    try:
        ramp = Ramp(value["rate_from"], value["rate_to"], args.duration, value["hold"])
        settings = AutoscaleSettings(
            max_partitions=int(value["max_partitions"]), target=value["target"],
            window=int(value["window"]), cooldown=int(value["cooldown"]),
        )  # fmt: skip
    except ValueError as error:
        raise CliError(str(error)) from None
    options.keys, options.load_generators = int(value["keys"]), int(value["producers"])
    options.spark_per_trigger = 50_000  # at 10,000 records/s, 5,000 a trigger would never catch up
    report = AutoscaleSandbox(options, ramp, settings, console).run()
    console.print(render_autoscale(report))
    if args.report is not None:
        args.report.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    console.print(f"logs: {report.workdir}")
    return 0 if report.ok else 1
