"""The sandbox run: start everything, perform the stages while data flows, drain, verify, report.

By default everything runs here: the testbed (Kafka and a local Kubernetes API server, in a process
of its own), the operator, member pods as local processes. With ``bootstrap`` a real Kafka takes
the testbed's Kafka's place. With ``kubeconfig`` too, a real cluster takes the local one's: the
CRDs, the ProducerGroup, the expansion, the members' Pods and Leases are there, and so is the
operator when one is installed (else it runs here). The members still run here, each bound to a
placeholder Pod (pause) the cluster schedules and reports Ready, because they read the SQLite
source on this machine; killing one deletes its Pod, as a lost node would.

``kafka_options`` (``-X``, ``--command-config``) complete the connection to that Kafka. Every
client reaches it with the whole connection: this process's (topics, the verifier), the operator
run here and the Spark job through ``ORDO_KAFKA_*`` in their environment, the members and
consumers through ``kafka.json`` in the work dir (mode 0600; :mod:`ordo_sandbox.kafka_settings`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from ordo.client_config import drain, logged
from ordo.verify import check_topic, read_epochs, read_topic
from ordo_sandbox import source
from ordo_sandbox.kafka_settings import environment, write_settings
from ordo_sandbox.monitor import Monitor, Sources, kafka_end_offsets, member_events
from ordo_sandbox.report import SandboxReport, StageOutcome
from ordo_sandbox.scenario.progress import partition_progress
from ordo_sandbox.scenario.verify import verify
from ordo_sandbox.spark import SparkPipeline, unavailable
from ordo_sandbox.stages import (
    Stage,
    Step,
    member_name,
    partitions_moved,
    resource_prefix,
    schedule,
    topic_name_problem,
)
from ordo_sandbox.view import render
from ordo_testbed.pods import PLACEHOLDER_IMAGE
from ordo_testbed.records import RECORDS
from ordo_testbed.waiting import wait_for

__all__ = ["Options", "Sandbox"]

NAMESPACE = "ordo-sandbox"
SOURCE_PARTITIONS = 8
TOPIC_PARTITIONS, EXPANDED_PARTITIONS = 4, 8
CONSUMERS = 2


@dataclass
class Options:
    duration: float = 60.0
    members: int = 3
    bootstrap: str | None = None
    kafka_options: dict[str, str] = field(default_factory=dict)
    """More librdkafka settings for ``bootstrap`` (security.protocol, sasl.*, ssl.*)."""
    spark: bool = True
    topic: str = "orders"
    rate: float = 150.0
    """Orders inserted into the source per second."""
    customers: int = 400
    workdir: Path | None = None
    live: bool | None = None
    """The live view; None: when the console is a terminal."""
    settle_timeout: float = 90.0
    kubeconfig: Path | None = None
    """A real cluster (needs ``bootstrap``); None: the local API server."""
    operator: str = "auto"
    """Where the operator runs: "here", "cluster" (installed there) or "auto" (cluster if found)."""
    pod_image: str = PLACEHOLDER_IMAGE
    """The image of the members' placeholder Pods on a real cluster."""
    keys: int = 100_000
    """``--autoscale``: the load generators' keys (split between them)."""
    load_generators: int = 2
    """``--autoscale``: OrderedProducer processes sharing the ramp."""
    spark_per_trigger: int = 5000
    """The Spark pipeline's maxRecordsPerTrigger."""


class StageFailed(Exception):
    pass


class Sandbox:
    def __init__(self, options: Options, console: Console | None = None) -> None:
        self.o = options
        self.console = console or Console()
        self.stages = schedule(options.duration)
        self.workdir = options.workdir or Path(tempfile.mkdtemp(prefix="ordo-sandbox-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.db = self.workdir / "orders.db"
        problem = topic_name_problem(options.topic)
        if problem is not None:
            raise ValueError(f"--topic {options.topic!r} is not a Kafka topic name: {problem}")
        prefix = resource_prefix(options.topic)  # Kubernetes names are stricter than topic names
        self.group = f"{prefix}-cdc"
        self.expansion = f"{prefix}-to-{EXPANDED_PARTITIONS}"
        self.sources = Sources(group=self.group, topic=options.topic, expansion=self.expansion)
        self.outcomes: list[StageOutcome] = []
        self.members: list[Any] = []  # ordo_testbed.pods.Pod
        self.consumers: list[subprocess.Popen[bytes]] = []
        self.reader_group = f"{options.topic}-readers-{uuid.uuid4().hex[:6]}"
        self.spark: SparkPipeline | None = None
        self.spark_skipped = "" if options.spark else "--no-spark"
        self._next = 0  # the next stage's index, for the view
        self.unit = "orders"  # what flows, as the messages name it
        self._started = self._flow = time.monotonic()
        self.monitor = Monitor(self.sources, self._started)

    # --- the run ------------------------------------------------------------------------------

    def run(self) -> SandboxReport:
        with ExitStack() as stack:
            api, operator, kubeconfig = self._bring_up(stack)
            from ordo_testbed.resources import Expansions, Groups

            self.groups = groups = Groups(api["custom"], NAMESPACE)
            self.expansions = Expansions(api["custom"], NAMESPACE)
            if self.o.kubeconfig is not None:  # after the members stop, before the operator does
                stack.callback(self._remove_resources)
            writer = self._source()
            pods = self._podset(stack, kubeconfig)
            groups.create(
                self.group, SOURCE_PARTITIONS, {"app": self.group},
                sessionTimeoutSeconds=6, exactlyOnce=True,
            )  # fmt: skip
            if operator is not None:
                self._await_operator(groups, operator)
            self.sources.groups = groups
            self.sources.expansions = None
            for _ in range(self.o.members):
                self._start_member(pods)
            groups.wait_settled(self.group, self.o.members, self.o.settle_timeout, SOURCE_PARTITIONS)
            self._say(f"{self.o.members} members own the {SOURCE_PARTITIONS} source partitions")
            self._start_consumers(stack)
            self._start_spark(stack)

            thread = source.WriterThread(writer, self.o.rate)
            self.sources.source_orders = lambda: writer.inserted
            self._flow = time.monotonic()
            thread.start()
            stack.callback(thread.stop)
            self.monitor.start()
            stack.callback(self.monitor.stop)
            with self._view():
                for index, stage in enumerate(self.stages):
                    self._next = index
                    self._wait_until(stage.at)
                    self.outcomes.append(self._stage(stage, pods, thread))
                self._next = len(self.stages)
                orders = thread.stop()
                if thread.error is not None:
                    raise RuntimeError(f"the source writer failed: {thread.error}")
                self._drain(orders)
            return self._report(orders)
        raise AssertionError("unreachable")  # ExitStack does not swallow exceptions

    def _remove_resources(self) -> None:
        """Leave a real cluster as found: the group and the expansion, gone before the operator stops."""
        for kind, name in ((self.groups, self.group), (self.expansions, self.expansion)):
            try:
                if kind.exists(name):
                    kind.delete(name)
                    wait_for(partial(_gone, kind, name), 30, f"{kind.plural} {name} to be removed", step=0.5)
            except Exception as error:  # the report matters more than the cleanup: say what is left
                self._say(f"[yellow]could not remove {kind.plural} {NAMESPACE}/{name}: {error}[/yellow]")

    # --- setting up ---------------------------------------------------------------------------

    def _bring_up(self, stack: ExitStack) -> tuple[dict[str, Any], str | None, Path]:
        """What every scenario starts with: its log file, Kafka, the Kubernetes API and the
        operator (its name when one runs apart); undone by ``stack``."""
        # this process's log records (the Kafka clients' lines among them) go to the workdir,
        # not over the live view
        log = logging.FileHandler(self.workdir / "sandbox.log")
        log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(log)
        stack.callback(logging.getLogger().removeHandler, log)
        stack.callback(log.close)
        bootstrap, kubeconfig = self._environment(stack)
        self.bootstrap = bootstrap
        self.kafka = {**self.o.kafka_options, "bootstrap.servers": bootstrap}
        self.kafka_file = write_settings(self.kafka, self.workdir / "kafka.json")
        self._say(f"Kafka at {bootstrap}, Kubernetes API from {kubeconfig}; logs in {self.workdir}")
        api = self._kubernetes(kubeconfig, stack)
        self._kafka(bootstrap, stack)
        return api, self._operator(stack, kubeconfig, bootstrap, api), kubeconfig

    def _environment(self, stack: ExitStack) -> tuple[str, Path]:
        if self.o.kubeconfig is not None:
            if self.o.bootstrap is None:
                raise ValueError("a real cluster needs a real Kafka: give --bootstrap with --kubeconfig")
            return self.o.bootstrap, self.o.kubeconfig
        if self.o.bootstrap is None:
            from ordo_testbed.bed import testbed_process

            self._say("starting the testbed (Kafka and a local Kubernetes API server)")
            return stack.enter_context(testbed_process(self.workdir / "testbed"))
        from ordo_testbed.kube import KubeApiServer

        server = stack.enter_context(KubeApiServer(state_dir=self.workdir / "kube"))
        return self.o.bootstrap, server.kubeconfig_path

    def _kubernetes(self, kubeconfig: Path, stack: ExitStack) -> dict[str, Any]:
        import kubernetes

        config: Any = kubernetes.config
        client = config.new_client_from_config(str(kubeconfig))
        stack.callback(client.close)
        core: Any = kubernetes.client.CoreV1Api(client)
        _install_crds(kubernetes.client.ApiextensionsV1Api(client))
        created = _ignore_conflict(lambda: core.create_namespace({"metadata": {"name": NAMESPACE}}))
        if created and self.o.kubeconfig is not None:  # leave a real cluster as it was found
            stack.callback(core.delete_namespace, NAMESPACE)
        return {
            "core": core,
            "apps": kubernetes.client.AppsV1Api(client),
            "custom": kubernetes.client.CustomObjectsApi(client),
        }

    def _kafka(self, bootstrap: str, stack: ExitStack) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient, NewTopic

        from ordo.epochs.log import ensure_log_topics

        admin = AdminClient(logged(dict(self.kafka)))
        try:
            ensure_log_topics(admin)  # the operator creates them too; members need them at once
            if self.o.topic in admin.list_topics(timeout=10).topics:
                raise ValueError(
                    f"topic {self.o.topic!r} already exists at {bootstrap}: give another --topic"
                )
            admin.create_topics([NewTopic(self.o.topic, TOPIC_PARTITIONS)])[self.o.topic].result(30)
        finally:
            drain(admin)  # its log lines: an admin client is not polled otherwise
        probe = Consumer(logged({**self.kafka, "group.id": f"ordo-sandbox-probe-{uuid.uuid4().hex}"}))
        stack.callback(probe.close)  # before Kafka goes away

        def watermarks() -> tuple[int, int]:
            try:
                return kafka_end_offsets(probe, self.o.topic)
            finally:
                drain(probe)  # its log lines: the probe has no assignment and is never polled

        self.sources.watermarks = watermarks

    def _operator(
        self, stack: ExitStack, kubeconfig: Path, bootstrap: str, api: dict[str, Any]
    ) -> str | None:
        """Start the operator here, or find the cluster's; returns where the cluster's runs (None: here)."""
        installed = _installed_operator(api["apps"]) if self.o.kubeconfig is not None else None
        if self.o.operator == "cluster" and installed is None:
            raise ValueError("--operator cluster: no Ready ordo operator Deployment found in the cluster")
        if installed is not None and self.o.operator != "here":
            self._say(f"the operator: the one installed in namespace {installed}")
            return installed
        if installed is not None:
            self._say(f"[yellow]an operator runs in namespace {installed} too: if it serves {NAMESPACE}, "
                      "both act on the sandbox (use --operator cluster)[/yellow]")  # fmt: skip
        from ordo_testbed.operator import OperatorProcess

        operator = OperatorProcess(
            kubeconfig, bootstrap, namespaces=[NAMESPACE], env=environment(self.kafka),
            log_path=self.workdir / "operator.log",
        )  # fmt: skip
        stack.enter_context(operator)
        return None

    def _await_operator(self, groups: Any, namespace: str) -> None:
        """The cluster's operator may not serve the sandbox's namespace (rbac.scope=namespace)."""
        try:
            wait_for(lambda: groups.status(self.group), 30, "the operator", step=0.5)
        except AssertionError:
            raise RuntimeError(
                f"the ordo operator in namespace {namespace} did not act on ProducerGroup "
                f"{NAMESPACE}/{self.group} within 30 s: add {NAMESPACE} to its watchNamespaces, "
                "or run one here with --operator here"
            ) from None

    def _source(self) -> source.OrderWriter:
        source.create(self.db)
        writer = source.OrderWriter(self.db, SOURCE_PARTITIONS, self.o.customers)
        writer.insert(int(self.o.rate))  # a second's worth of history before the members start
        return writer

    def _podset(self, stack: ExitStack, kubeconfig: Path) -> Any:
        from ordo_testbed.pods import PodSet

        placeholder = self.o.pod_image if self.o.kubeconfig is not None else None
        pods = PodSet(kubeconfig, NAMESPACE, log_dir=self.workdir / "pods", placeholder_image=placeholder)
        return stack.enter_context(pods)

    def _start_member(self, pods: Any) -> Any:
        name = member_name(self.group, len(self.members))
        argv = [sys.executable, "-m", "ordo_sandbox.member", "--kafka-config", str(self.kafka_file),
                "--topic", self.o.topic, "--db", str(self.db)]  # fmt: skip
        pod = pods.start(name, argv, labels={"app": self.group}, env={"ORDO_GROUP": self.group}, grace=10)
        self.members.append(pod)
        self.sources.member_stdout[name] = pod.stdout_path
        return pod

    def _start_consumers(self, stack: ExitStack) -> None:
        group = self.reader_group
        for i in range(CONSUMERS):
            name = f"consumer-{i}"
            log, err = self.workdir / f"{name}.log", self.workdir / f"{name}.err"
            argv = [sys.executable, "-m", "ordo_sandbox.scenario.consumer",
                    "--kafka-config", str(self.kafka_file), "--topic", self.o.topic, "--group", group,
                    "--out", str(log)]  # fmt: skip
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err.open("ab"))
            stack.callback(_terminate, process)
            self.consumers.append(process)
            assert process.stdout is not None
            if process.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"{name} did not start: {err.read_text(errors='replace')[-500:]}")
            self.sources.consumer_logs[name], self.sources.consumer_stderr[name] = log, err
        self._say(f"{CONSUMERS} GatedConsumers in group {group}")

    def _start_spark(self, stack: ExitStack) -> None:
        if not self.o.spark:
            return
        why = unavailable()
        if why:
            self.spark_skipped = why
            self._say(f"Spark pipeline skipped: {why}")
            return
        self.spark = SparkPipeline(
            self.workdir / "spark", self.kafka, self.o.topic, self.o.spark_per_trigger
        ).start()
        stack.callback(self.spark.stop)
        spark = self.spark
        self.sources.spark_rows = spark.rows
        self._say("Spark ordered pipeline started (local[2])")

    # --- stages -------------------------------------------------------------------------------

    def _wait_until(self, at: float) -> None:
        delay = self._flow + at - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the schedule: data flows between the stages

    def _stage(self, stage: Stage, pods: Any, writer: source.WriterThread) -> StageOutcome:
        started = time.monotonic()
        at = started - self._flow
        self._say(f"{stage.step.name.lower().replace('_', ' ')} ...")
        try:
            detail = self._perform(stage.step, pods, writer)
        except (AssertionError, StageFailed) as error:
            self._say(f"[red]{stage.step.value}: failed: {error}[/red]")
            return StageOutcome(stage.step, round(at, 1), None, str(error))
        pod_start = None
        if stage.step in (Step.ADD_MEMBER, Step.JOIN_MEMBER):  # the rebalance starts with the member
            up = _started_at(self.members[-1].stdout_path)
            if up is not None:
                pod_start, started = up - started, up
        seconds = time.monotonic() - started
        after = f" (its process started in {pod_start:.1f} s)" if pod_start is not None else ""
        self._say(f"{stage.step.value} in {seconds:.1f} s{after}: {detail}")
        return StageOutcome(
            stage.step, round(at, 1), round(seconds, 2), detail,
            round(pod_start, 2) if pod_start is not None else None,
        )  # fmt: skip

    def _live(self) -> list[Any]:
        return [m for m in self.members if m.returncode is None]

    def _perform(self, step: Step, pods: Any, writer: source.WriterThread) -> str:
        timeout = self.o.settle_timeout
        if step in (Step.ADD_MEMBER, Step.JOIN_MEMBER):
            pod = self._start_member(pods)
            status = self.groups.wait_settled(self.group, len(self._live()), timeout, SOURCE_PARTITIONS)
            owned = self.groups.owners(self.group).get(pod.name, [])
            return f"{pod.name} got {owned or 'nothing (standby)'}, generation {status.get('generation')}"
        if step is Step.EXPAND:
            self.sources.expansions = self.expansions
            self.expansions.create(self.expansion, self.o.topic, EXPANDED_PARTITIONS, fenceTimeoutSeconds=30)
            status = self.expansions.wait_phase(self.expansion, "Completed", timeout)
            self.fence_wait = status.get("fenceWaitSeconds")
            self.expansion_seconds = status.get("durationSeconds")
            return f"epoch {status.get('epoch')}: {TOPIC_PARTITIONS} → {EXPANDED_PARTITIONS} partitions"
        if step is Step.KILL_MEMBER:
            owners = self.groups.owners(self.group)
            victim = max(self._live(), key=lambda m: (len(owners.get(m.name, [])), m.name))
            taken = owners.get(victim.name, [])
            victim.sigkill()
            self.sources.killed.add(victim.name)
            others = len(self._live())
            wait_for(
                lambda: partitions_moved(victim.name, taken, self.groups.owners(self.group), others),
                timeout, f"the partitions of {victim.name} to move", step=0.1,
            )  # fmt: skip
            now = self.groups.owners(self.group)
            moved = {p: next(m for m, ps in now.items() if p in ps) for p in taken}
            return f"SIGKILL {victim.name}; its {taken} went to " + ", ".join(
                f"{p}→{m}" for p, m in sorted(moved.items())
            )
        writer.halt.set()
        return f"{writer.stop():,} orders in the source"

    # --- the end ------------------------------------------------------------------------------

    def _drain(self, orders: int) -> None:
        """Wait until the consumers processed every order (the members copy the rest first)."""
        self._say(f"draining: {orders:,} {self.unit} to reach the consumers")
        try:
            wait_for(lambda: self.monitor.order.check.distinct >= orders, 120, "the consumers", step=0.5)
        except AssertionError:  # what did not arrive, the report shows; where Kafka and the group are:
            short = orders - self.monitor.order.check.distinct
            try:
                progress = partition_progress(self.kafka, self.o.topic, self.reader_group)
            except Exception as error:  # a diagnosis that fails must not cost the report
                progress = f"(partitions unreadable: {error})"
            self._say(f"the consumers stopped {short:,} {self.unit} short: {progress}")
        if self.spark is not None:
            spark = self.spark
            with contextlib.suppress(AssertionError):
                wait_for(lambda: (spark.rows() or 0) >= orders, 180, "the Spark pipeline", step=1.0)

    def _report(self, orders: int) -> SandboxReport:
        self._say("verifying")
        for process in self.consumers:
            _terminate(process)
        config = dict(self.kafka)
        expected = source.source_counts(self.db)
        read = read_topic(config, self.o.topic, layout=RECORDS)
        records, epochs = read.records, read_epochs(config, self.o.topic)
        kafka = check_topic(self.o.topic, records, epochs, expected, read.unreadable)
        consumers = verify(expected, list(self.sources.consumer_logs.values()))
        missing = set(consumers.missing)
        places = {(r.key, r.seq): f"p{r.partition}@{r.offset}" for r in records if (r.key, r.seq) in missing}
        lost_at = [
            f"{key} #{seq} at {places.get((key, seq), 'no place in Kafka')}" for key, seq in consumers.missing
        ]
        spark = None
        if self.spark is not None:
            self.spark.stop()
            spark = self.spark.outcome()
        self.monitor.refresh()
        return SandboxReport(
            duration=self.o.duration,
            members=self.o.members,
            orders=orders,
            kafka=kafka,
            consumers=consumers,
            stages=self.outcomes,
            expansion_seconds=getattr(self, "expansion_seconds", None),
            fence_wait_seconds=getattr(self, "fence_wait", None),
            longest_stall=self.monitor.longest_stall,
            spark=spark,
            spark_skipped=self.spark_skipped,
            workdir=str(self.workdir),
            lost_at=lost_at,
        )

    # --- output -------------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        self.monitor.event(text)
        if not self._live_view:
            self.console.print(f"[dim]{time.monotonic() - self._started:6.1f} s[/dim]  {text}")

    @property
    def _live_view(self) -> bool:
        return self.console.is_terminal if self.o.live is None else self.o.live

    def _next_text(self) -> str:
        """What the live view's header says comes next."""
        if self._next < len(self.stages):
            stage = self.stages[self._next]
            due = max(0.0, self._flow + stage.at - time.monotonic())
            return f"{stage.step.value} in {due:.0f} s"
        return "draining and verifying"

    @contextlib.contextmanager
    def _view(self) -> Iterator[None]:
        if not self._live_view:
            yield
            return

        def current() -> Any:
            snap = self.monitor.snapshot
            snap.next_stage = self._next_text()
            snap.events = self.monitor.events
            return render(snap)

        with Live(console=self.console, get_renderable=current, refresh_per_second=2, transient=False):
            yield


def _install_crds(extensions: Any) -> None:
    """kubectl apply -f crds/, from the models (an existing definition is left as it is)."""
    import yaml

    from ordo.api import RESOURCES
    from ordo.api.crd import render_crd

    for model in RESOURCES:
        body = yaml.safe_load(render_crd(model))
        _ignore_conflict(partial(extensions.create_custom_resource_definition, body))


def _ignore_conflict(call: Callable[[], Any]) -> bool:
    """Create something unless it exists; True when this call created it."""
    try:
        call()
    except Exception as error:
        if getattr(error, "status", None) != 409:  # already there
            raise
        return False
    return True


def _installed_operator(apps: Any) -> str | None:
    """The namespace of a Ready ordo operator Deployment (the Helm chart's), if the cluster has one."""
    try:
        found = apps.list_deployment_for_all_namespaces(label_selector="app.kubernetes.io/name=ordo").items
    except Exception as error:
        if getattr(error, "status", None) in (403, 404):  # not allowed to look, or no apps API
            return None
        raise
    ready = [d for d in found if (d.status.ready_replicas or 0) > 0]
    return str(ready[0].metadata.namespace) if ready else None


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _gone(kind: Any, name: str) -> bool:
    return not kind.exists(name)


def _started_at(stdout: Path) -> float | None:
    """When a member process said it started (``time.monotonic()``, one clock for the machine)."""
    started = member_events(stdout.read_text(errors="replace").splitlines(), "started")
    return float(started[0]["at"]) if started else None
