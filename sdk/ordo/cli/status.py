"""``ordo status``: ProducerGroups (members, assignments, checkpoints), OrderedTopicExpansions and
TopicAutoscalers (shown when there are any) from the Kubernetes API, read through their models
(``ordo.api``); each topic's epoch history (``EpochHistory``) and gates from Kafka's epoch log. A
gate lists what ``GateKeeper`` makes its records wait for: the epoch's prior partitions and,
through every earlier epoch, theirs.

With ``--consumer-group G`` each gate shows whether that group has passed it (its committed offset
on the prior partition has reached the threshold).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from .._extras import missing_extra
from ..api import (
    OrderedTopicExpansion,
    OrderedTopicExpansionStatus,
    ProducerGroup,
    ProducerGroupStatus,
    TopicAutoscaler,
    TopicAutoscalerStatus,
)
from ..api.common import first_error
from ..connection import BOOTSTRAP_ENV
from ..control_topics import DEFAULT_EPOCH_TOPIC
from ..epochs import Epoch, EpochHistory, EpochState, GateKeeper
from . import CliError
from .kafka_options import add_kafka_options, kafka_settings

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

__all__ = ["GateWait", "gates", "register", "render", "run"]


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "status",
        help="producer groups, expansions, topics' epochs and gates",
        description="ProducerGroups (members, assignments, checkpoints) and OrderedTopicExpansions "
        "from the Kubernetes API; each topic's epoch history and gates from Kafka's epoch log. "
        "Reads the cluster when a kubeconfig is found and Kafka when --bootstrap is given, and says "
        "which part it did not read.",
    )
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="the cluster (default: $KUBECONFIG or ~/.kube/config)")  # fmt: skip
    parser.add_argument("--namespace", "-n", help="one namespace (default: all)")
    add_kafka_options(parser, "Kafka, for the epoch log")
    parser.add_argument(
        "--epoch-topic", default=DEFAULT_EPOCH_TOPIC, help="the epoch log (default %(default)s)"
    )
    parser.add_argument("--topic", action="append", help="only these topics (repeatable)")
    parser.add_argument("--consumer-group", help="show which gates this consumer group has passed")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class GateWait:
    """One thing a gate waits for: records of ``epoch`` in ``partition`` wait until ``prior`` is
    consumed up to ``threshold`` (``GateKeeper``'s requirements, through every earlier epoch)."""

    topic: str
    epoch: int
    partition: int
    prior: int
    threshold: int
    passed: bool | None = None
    """Whether the consumer group has (None: no group given)."""


def gates(history: EpochHistory, committed: Mapping[int, int] | None = None) -> list[GateWait]:
    """What the gates of every active epoch wait for, each with the whole chain ``GateKeeper``
    follows: a key's records of an earlier epoch may sit in a partition the epoch's own prior set
    does not name. A gate's own partition is left out (it is read in order)."""
    keeper = GateKeeper(history)
    out = []
    for entry in history.active_epochs[1:]:
        for q in range(entry.partitions):
            needed = keeper.requirements(q, entry.epoch)
            unmet = keeper.unmet(q, entry.epoch, committed) if committed is not None else {}
            out += [
                GateWait(
                    history.topic, entry.epoch, q, p, needed[p], None if committed is None else p not in unmet
                )
                for p in sorted(needed)
                if p != q
            ]
    return out


def run(args: argparse.Namespace) -> int:
    try:  # the tables; the cluster's client is asked for when the cluster is read
        from rich.console import Console
    except ModuleNotFoundError as error:
        if not args.json:
            raise missing_extra(error, "cli", "printing tables (without --json)") from error
    kubeconfig = args.kubeconfig or _default_kubeconfig()
    kafka = kafka_settings(args)
    if kubeconfig is None and kafka is None:
        raise CliError("nothing to read: give --kubeconfig (or set KUBECONFIG) and/or --bootstrap")
    state: dict[str, Any] = {"groups": None, "expansions": None, "topics": None, "gates": None}
    if kubeconfig is not None:
        groups, expansions, autoscalers = _read_cluster(kubeconfig, args.namespace)
        state["groups"], invalid = _resources(ProducerGroup, groups)
        state["expansions"], refused = _resources(OrderedTopicExpansion, expansions)
        state["autoscalers"], unfit = _resources(TopicAutoscaler, autoscalers)
        state["invalid"] = invalid + refused + unfit
    if kafka is not None:
        state["topics"], state["gates"] = _read_kafka(args, kafka)
    if args.json:
        print(json.dumps(state, indent=2, default=_as_json))
    else:
        Console().print(render(state, args.namespace, args.epoch_topic, args.topic))
    return 0


_THROTTLED_ATTEMPTS = 5
R = TypeVar("R", ProducerGroup, OrderedTopicExpansion, TopicAutoscaler)


def _resources(model: type[R], items: list[Any]) -> tuple[list[R], list[str]]:
    """The resources as their models, and a line for each one that is not valid (it is left out)."""
    found: list[R] = []
    invalid: list[str] = []
    for item in items:
        try:
            found.append(model.model_validate(item))
        except ValidationError as error:
            meta = item.get("metadata") or {}
            invalid.append(
                f"{model.crd.kind} {meta.get('namespace')}/{meta.get('name')}: {first_error(error)}"
            )
    return found, invalid


def _as_json(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _default_kubeconfig() -> Path | None:
    """$KUBECONFIG's first file, or ~/.kube/config if it exists, or None. A KUBECONFIG naming no
    file is an error, not a reason to leave the cluster out."""
    listed = os.environ.get("KUBECONFIG")
    if listed:
        for candidate in listed.split(os.pathsep):
            if candidate and Path(candidate).is_file():
                return Path(candidate)
        raise CliError(f"KUBECONFIG={listed} names no readable file: fix it, or give --kubeconfig")
    home = Path.home() / ".kube" / "config"
    return home if home.is_file() else None


def _read_cluster(kubeconfig: Path, namespace: str | None) -> tuple[list[Any], list[Any], list[Any]]:
    try:
        import kubernetes
    except ModuleNotFoundError as error:
        raise missing_extra(error, "cli", "reading the cluster") from error

    from ..api import API_GROUP
    from ..api.common import VERSION

    if not kubeconfig.is_file():
        raise CliError(f"--kubeconfig: no such file {kubeconfig}")
    try:
        kubeconfig.read_bytes()
    except OSError as error:
        raise CliError(f"cannot read the kubeconfig {kubeconfig}: {error.strerror}") from None
    config: Any = kubernetes.config
    try:
        configuration = kubernetes.client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        # one attempt: an unreachable API server is one line at once, not three retries logged
        configuration.retries = 0
        client: Any = kubernetes.client.ApiClient(configuration)
    except Exception as error:
        raise CliError(f"cannot use the kubeconfig {kubeconfig}: {error}") from None
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    found: list[list[Any]] = []

    def listed(plural: str) -> Any:
        # A busy API server answers 429 with Retry-After (its fairness queues are full), and
        # kubectl waits and asks again: so does this, a few times.
        for attempt in range(_THROTTLED_ATTEMPTS):
            try:
                if namespace:
                    return custom.list_namespaced_custom_object(API_GROUP, VERSION, namespace, plural)
                return custom.list_cluster_custom_object(API_GROUP, VERSION, plural)
            except kubernetes.client.ApiException as error:
                if error.status != 429 or attempt == _THROTTLED_ATTEMPTS - 1:
                    raise
                wait = (error.headers or {}).get("Retry-After", "1")
                time.sleep(min(float(wait) if wait.isdigit() else 1.0, 5.0))
        raise AssertionError("unreachable")  # pragma: no cover

    try:
        for plural in ("producergroups", "orderedtopicexpansions"):
            found.append(listed(plural).get("items") or [])
        try:
            found.append(listed("topicautoscalers").get("items") or [])
        except kubernetes.client.ApiException as error:
            if error.status != 404:  # 404: CRDs of a release before TopicAutoscaler, none to show
                raise
            found.append([])
    except kubernetes.client.ApiException as error:
        if error.status == 404:
            raise CliError("ordo's CRDs are not installed in this cluster: kubectl apply -f crds/") from None
        raise CliError(f"the Kubernetes API refused: {error.status} {error.reason}") from None
    except Exception as error:  # connection refused, DNS, TLS: one line
        raise CliError(f"cannot reach the Kubernetes API of {kubeconfig}: {error}") from None
    finally:
        client.close()
    return found[0], found[1], found[2]


def _read_kafka(
    args: argparse.Namespace, config: dict[str, str]
) -> tuple[dict[str, EpochHistory], list[GateWait]]:
    from ..verify import read_epoch_log

    try:
        histories = read_epoch_log(config, args.epoch_topic, timeout=30)
    except ConnectionError as error:  # says which Kafka and why
        raise CliError(str(error)) from None
    except Exception as error:
        raise CliError(f"cannot read the epoch log at {config['bootstrap.servers']}: {error}") from None
    if args.topic:
        histories = {t: h for t, h in histories.items() if t in args.topic}
    parsed = _histories(histories)
    found: list[GateWait] = []
    for topic, history in sorted(parsed.items()):
        committed = _committed(config, args.consumer_group, topic, history) if args.consumer_group else None
        found += gates(history, committed)
    return parsed, found


def _histories(read: Mapping[str, Any]) -> dict[str, EpochHistory]:
    """The epoch log's values as histories; one that is not (a foreign record) is left out, as the
    log's readers leave it out."""
    parsed: dict[str, EpochHistory] = {}
    for topic, value in read.items():
        try:
            parsed[topic] = EpochHistory.model_validate(value)
        except ValidationError:
            continue
    return parsed


def _committed(config: dict[str, Any], group: str, topic: str, history: EpochHistory) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    from .._clients import drain, logged

    partitions = max(e.partitions for e in history.epochs)
    consumer = Consumer(logged({**config, "group.id": group, "enable.auto.commit": False}))
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        drain(consumer)  # its log lines (it has no assignment)
        consumer.close()
    return {t.partition: t.offset for t in offsets if t.offset >= 0}


def render(
    state: Mapping[str, Any],
    namespace: str | None = None,
    epoch_topic: str = DEFAULT_EPOCH_TOPIC,
    only_topics: list[str] | None = None,
) -> RenderableType:
    """The tables of what was read; a line instead of an empty table, and one for a part not read."""
    from rich.console import Group

    where = f"in namespace {namespace}" if namespace else "in any namespace"
    parts: list[RenderableType] = []
    if state.get("groups") is None:
        parts.append("[dim]Kubernetes: not read (no --kubeconfig, $KUBECONFIG or ~/.kube/config)[/dim]")
    else:
        groups, expansions = state["groups"], state.get("expansions") or []
        parts.append(_groups_table(groups) if groups else f"no ProducerGroups {where}")
        parts.append(_expansions_table(expansions) if expansions else f"no OrderedTopicExpansions {where}")
        if state.get("autoscalers"):
            parts.append(_autoscalers_table(state["autoscalers"]))
        parts += [f"[yellow]not shown, not valid: {line}[/yellow]" for line in state.get("invalid") or []]
    if state.get("topics") is None:
        parts.append(f"[dim]Kafka: not read (give --bootstrap or set {BOOTSTRAP_ENV})[/dim]")
    elif not state["topics"] and only_topics:
        parts.append(f"no history of {', '.join(only_topics)} in the epoch log {epoch_topic}")
    elif not state["topics"]:
        parts.append(
            f"no topic has a history in the epoch log {epoch_topic} "
            "(the operator writes one when it first expands a topic)"
        )
    else:
        parts.append(_topics_table(state["topics"]))
        found = state.get("gates") or []
        parts.append(_gates_table(found) if found else "no gates: no partition waits for another")
    return Group(*parts)


def _groups_table(groups: list[ProducerGroup]) -> Table:
    from rich.table import Table

    table = Table(title="ProducerGroups", title_justify="left")
    for column in ("group", "generation", "member", "source partitions", "acked", "checkpoints"):
        table.add_column(column)
    for g in groups:
        status = g.status or ProducerGroupStatus()
        name = f"{g.metadata.get('namespace')}/{g.metadata.get('name')}"
        checkpoints = {c.partition: c.checkpoint for c in status.checkpoints}
        generation = str(status.generation)
        if not status.members:
            table.add_row(name, generation, "(no members)", "", "", "")
        for i, m in enumerate(status.members):
            marks = "; ".join(f"{p}: {checkpoints.get(p) or '-'}" for p in m.partitions)
            table.add_row(name if i == 0 else "", generation if i == 0 else "", m.pod,
                          ", ".join(map(str, m.partitions)) or "standby",
                          "-" if m.acked is None else str(m.acked), marks)  # fmt: skip
        if status.unassigned:
            table.add_row("", "", "(unassigned)", ", ".join(map(str, status.unassigned)), "", "")
    return table


def _expansions_table(expansions: list[OrderedTopicExpansion]) -> Table:
    from rich.table import Table

    table = Table(title="OrderedTopicExpansions", title_justify="left")
    for column in ("expansion", "topic", "from → to", "phase", "epoch", "took", "message"):
        table.add_column(column)
    for x in expansions:
        status = x.status or OrderedTopicExpansionStatus()
        took = status.duration_seconds
        table.add_row(
            f"{x.metadata.get('namespace')}/{x.metadata.get('name')}", x.spec.topic,
            f"{status.from_partitions or '?'} → {x.spec.partitions}", status.phase.value,
            "-" if status.epoch is None else str(status.epoch), "-" if took is None else f"{took:.1f} s",
            status.message,
        )  # fmt: skip
    return table


def _autoscalers_table(autoscalers: list[TopicAutoscaler]) -> Table:
    from rich.table import Table

    table = Table(title="TopicAutoscalers", title_justify="left")
    for column in (
        "autoscaler",
        "topic",
        "partitions",
        "records/s per partition",
        "last decision",
        "message",
    ):
        table.add_column(column)
    for a in autoscalers:
        status = a.status or TopicAutoscalerStatus()
        count = f"{status.current_partitions or '?'} (desired {status.desired_partitions or '?'}, "
        count += f"{a.spec.min_partitions}-{a.spec.max_partitions})"
        rate = "-" if status.load is None else f"{status.load.records_per_second_per_partition:.1f}"
        last = status.last_decision
        decided = "-" if last is None else f"{last.from_partitions} → {last.to_partitions} ({last.expansion})"
        flags = [c.type for c in status.conditions if c.type != "Ready" and c.status == "True"]
        message = f"[yellow]{', '.join(flags)}[/yellow] {status.message}" if flags else status.message
        table.add_row(
            f"{a.metadata.get('namespace')}/{a.metadata.get('name')}",
            a.spec.topic,
            count,
            rate,
            decided,
            message,
        )
    return table


def _topics_table(histories: Mapping[str, EpochHistory]) -> Table:
    from rich.table import Table

    table = Table(title="topics (epoch log)", title_justify="left")
    for column in ("topic", "epoch", "partitions", "state", "thresholds"):
        table.add_column(column)
    for topic, history in sorted(histories.items()):
        epochs = history.epochs
        for i, e in enumerate(epochs):
            thresholds = ", ".join(f"{p}@{o}" for p, o in sorted(e.thresholds.items()))
            table.add_row(topic if i == 0 else "", str(e.epoch), str(e.partitions),
                          _epoch_state(e, epochs[i + 1 :]), thresholds or "-")  # fmt: skip
    return table


def _epoch_state(epoch: Epoch, later: Sequence[Epoch]) -> str:
    """An epoch's state as producers see it: an active epoch followed by a newer active one is
    superseded (its gates still hold until consumers pass them)."""
    newer = next((e for e in later if e.state == EpochState.ACTIVE), None)
    if epoch.state == EpochState.ACTIVE and newer is not None:
        return f"superseded by {newer.epoch}"
    return epoch.state.value


def _gates_table(found: list[GateWait]) -> Table:
    from rich.table import Table

    table = Table(title="gates: a partition's records of an epoch wait for", title_justify="left")
    for column in ("topic", "epoch", "partition", "waits for", "passed"):
        table.add_column(column)
    for g in found:
        passed = "-" if g.passed is None else ("yes" if g.passed else "[yellow]no[/yellow]")
        table.add_row(
            g.topic, str(g.epoch), str(g.partition), f"partition {g.prior} up to {g.threshold}", passed
        )
    return table
