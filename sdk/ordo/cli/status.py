"""``ordo status``: ProducerGroups (members, assignments, checkpoints) and OrderedTopicExpansions
from the Kubernetes API; each topic's epoch history and gates from Kafka's epoch log.

With ``--consumer-group G`` each gate shows whether that group has passed it (its committed offset
on the prior partition has reached the threshold).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table

from ..protocol import DEFAULT_EPOCH_TOPIC
from . import CliError

__all__ = ["Gate", "gates", "register", "render", "run"]


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "status", help="producer groups, expansions, topics' epochs and gates"
    )
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="the cluster (default: $KUBECONFIG or ~/.kube/config)")  # fmt: skip
    parser.add_argument("--namespace", "-n", help="one namespace (default: all)")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP"),
                        help="Kafka, for the epoch log (default: $KAFKA_BOOTSTRAP)")  # fmt: skip
    parser.add_argument(
        "--epoch-topic", default=DEFAULT_EPOCH_TOPIC, help=f"the epoch log (default {DEFAULT_EPOCH_TOPIC})"
    )
    parser.add_argument("--topic", action="append", help="only these topics (repeatable)")
    parser.add_argument("--consumer-group", help="show which gates this consumer group has passed")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class Gate:
    topic: str
    epoch: int
    partition: int
    """The gated partition: its records of ``epoch`` wait for ..."""
    prior: int
    """... this partition to be consumed up to ..."""
    threshold: int
    passed: bool | None = None
    """Whether the consumer group has (None: no group given)."""


def gates(topic: str, history: Mapping[str, Any], committed: Mapping[int, int] | None = None) -> list[Gate]:
    """Every gate of every active epoch of a history (JSON of the epoch log)."""
    out = []
    for e in history.get("epochs") or []:
        if e.get("state") != "active" or not e.get("prior"):
            continue
        thresholds = {int(p): int(o) for p, o in (e.get("thresholds") or {}).items()}
        for q, priors in sorted(e["prior"].items(), key=lambda item: int(item[0])):
            for p in priors:
                threshold = thresholds[int(p)]
                passed = None if committed is None else committed.get(int(p), -1) >= threshold
                out.append(Gate(topic, int(e["epoch"]), int(q), int(p), threshold, passed))
    return out


def run(args: argparse.Namespace) -> int:
    kubeconfig = args.kubeconfig or _default_kubeconfig()
    if kubeconfig is None and not args.bootstrap:
        raise CliError("nothing to read: give --kubeconfig (or set KUBECONFIG) and/or --bootstrap")
    state: dict[str, Any] = {"groups": None, "expansions": None, "topics": None, "gates": None}
    if kubeconfig is not None:
        state["groups"], state["expansions"] = _read_cluster(kubeconfig, args.namespace)
    if args.bootstrap:
        state["topics"], state["gates"] = _read_kafka(args)
    if args.json:
        print(json.dumps(state, indent=2, default=lambda o: o.__dict__))
    else:
        Console().print(render(state))
    return 0


def _default_kubeconfig() -> Path | None:
    for candidate in (os.environ.get("KUBECONFIG"), str(Path.home() / ".kube" / "config")):
        if candidate and Path(candidate.split(os.pathsep)[0]).is_file():
            return Path(candidate.split(os.pathsep)[0])
    return None


def _read_cluster(kubeconfig: Path, namespace: str | None) -> tuple[list[Any], list[Any]]:
    import kubernetes

    from ..api import API_GROUP
    from ..api.common import VERSION

    if not kubeconfig.is_file():
        raise CliError(f"--kubeconfig: no such file {kubeconfig}")
    config: Any = kubernetes.config
    try:
        client = config.new_client_from_config(str(kubeconfig))
    except Exception as error:
        raise CliError(f"cannot use the kubeconfig {kubeconfig}: {error}") from None
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    found: list[list[Any]] = []

    try:
        for plural in ("producergroups", "orderedtopicexpansions"):
            if namespace:
                listed = custom.list_namespaced_custom_object(API_GROUP, VERSION, namespace, plural)
            else:
                listed = custom.list_cluster_custom_object(API_GROUP, VERSION, plural)
            found.append(listed.get("items") or [])
    except kubernetes.client.ApiException as error:
        if error.status == 404:
            raise CliError("ordo's CRDs are not installed in this cluster: kubectl apply -f crds/") from None
        raise CliError(f"the Kubernetes API refused: {error.status} {error.reason}") from None
    except Exception as error:  # connection refused, DNS, TLS: one line
        raise CliError(f"cannot reach the Kubernetes API of {kubeconfig}: {error}") from None
    finally:
        client.close()
    return found[0], found[1]


def _read_kafka(args: argparse.Namespace) -> tuple[dict[str, Any], list[Gate]]:
    from ..verify import read_epoch_log

    config = {"bootstrap.servers": args.bootstrap}
    try:
        histories = read_epoch_log(config, args.epoch_topic, timeout=30)
    except Exception as error:
        raise CliError(f"cannot read the epoch log at {args.bootstrap}: {error}") from None
    if args.topic:
        histories = {t: h for t, h in histories.items() if t in args.topic}
    found: list[Gate] = []
    for topic, history in sorted(histories.items()):
        committed = _committed(config, args.consumer_group, topic, history) if args.consumer_group else None
        found += gates(topic, history, committed)
    return histories, found


def _committed(config: dict[str, Any], group: str, topic: str, history: Mapping[str, Any]) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    partitions = max(int(e["partitions"]) for e in history.get("epochs") or [{"partitions": 1}])
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return {t.partition: t.offset for t in offsets if t.offset >= 0}


def render(state: Mapping[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    if state.get("groups") is not None:
        parts.append(_groups_table(state["groups"]))
        parts.append(_expansions_table(state.get("expansions") or []))
    if state.get("topics") is not None:
        parts.append(_topics_table(state["topics"]))
        parts.append(_gates_table(state.get("gates") or []))
    return Group(*parts)


def _groups_table(groups: list[Mapping[str, Any]]) -> Table:
    table = Table(title="ProducerGroups", title_justify="left")
    for column in ("group", "generation", "member", "source partitions", "acked", "checkpoints"):
        table.add_column(column)
    for g in groups:
        meta, status = g.get("metadata") or {}, g.get("status") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        checkpoints = {c["partition"]: c.get("checkpoint") for c in status.get("checkpoints") or []}
        members = status.get("members") or []
        if not members:
            table.add_row(name, str(status.get("generation", 0)), "(no members)", "", "", "")
        for i, m in enumerate(members):
            owned = m.get("partitions") or []
            marks = "; ".join(f"{p}: {checkpoints.get(p) or '-'}" for p in owned)
            table.add_row(name if i == 0 else "", str(status.get("generation", 0)) if i == 0 else "",
                          m["pod"], ", ".join(map(str, owned)) or "standby", str(m.get("acked", "-")),
                          marks)  # fmt: skip
        if status.get("unassigned"):
            table.add_row("", "", "(unassigned)", ", ".join(map(str, status["unassigned"])), "", "")
    return table


def _expansions_table(expansions: list[Mapping[str, Any]]) -> Table:
    table = Table(title="OrderedTopicExpansions", title_justify="left")
    for column in ("expansion", "topic", "from → to", "phase", "epoch", "took", "message"):
        table.add_column(column)
    for x in expansions:
        meta, spec, status = x.get("metadata") or {}, x.get("spec") or {}, x.get("status") or {}
        took = status.get("durationSeconds")
        table.add_row(
            f"{meta.get('namespace')}/{meta.get('name')}", spec.get("topic", ""),
            f"{status.get('fromPartitions', '?')} → {spec.get('partitions')}", status.get("phase", "Pending"),
            str(status.get("epoch", "-")), "-" if took is None else f"{took:.1f} s",
            status.get("message", ""),
        )  # fmt: skip
    return table


def _topics_table(histories: Mapping[str, Mapping[str, Any]]) -> Table:
    table = Table(title="topics (epoch log)", title_justify="left")
    for column in ("topic", "epoch", "partitions", "state", "thresholds"):
        table.add_column(column)
    for topic, history in sorted(histories.items()):
        for i, e in enumerate(history.get("epochs") or []):
            thresholds = ", ".join(f"{p}@{o}" for p, o in sorted((e.get("thresholds") or {}).items()))
            table.add_row(topic if i == 0 else "", str(e.get("epoch")), str(e.get("partitions")),
                          str(e.get("state")), thresholds or "-")  # fmt: skip
    return table


def _gates_table(found: list[Gate]) -> Table:
    table = Table(title="gates: a partition's records of an epoch wait for", title_justify="left")
    for column in ("topic", "epoch", "partition", "waits for", "passed"):
        table.add_column(column)
    for g in found:
        passed = "-" if g.passed is None else ("yes" if g.passed else "[yellow]no[/yellow]")
        table.add_row(
            g.topic, str(g.epoch), str(g.partition), f"partition {g.prior} up to {g.threshold}", passed
        )
    return table
