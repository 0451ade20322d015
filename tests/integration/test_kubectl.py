"""What a user sees with the real kubectl: the CRDs applied as they are, the printer columns, the
schema's documentation, waiting for Ready, the operator's Events, and the CEL rules' messages."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube import default_crd_dir
from ordo_testbed.kube.fixtures import Kube, kubectl
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions, Groups
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.usefixtures("kube_server")
CRDS = default_crd_dir()


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def header(table: str, kind: str) -> list[str]:
    """The column names of a ``kubectl get`` table (several kinds: one table each)."""
    for block in table.strip().split("\n\n"):
        lines = block.splitlines()
        if len(lines) > 1 and lines[1].split()[0].startswith(kind):
            return lines[0].split()
    raise AssertionError(f"no {kind} table in:\n{table}")


def test_the_crds_apply_as_they_are_and_explain_their_fields(kube: Kube) -> None:
    assert CRDS is not None
    applied = ok(kubectl(kube, "apply", "--server-side", "--force-conflicts", "-f", str(CRDS)))
    assert "producergroups.ordo.dev serverside-applied" in applied
    assert "orderedtopicexpansions.ordo.dev serverside-applied" in applied
    explained = ok(kubectl(kube, "explain", "producergroup.spec"))
    assert "sourcePartitions\t<integer> -required-" in explained
    assert "Number of source partitions (KIP-509's SOURCE_PARTITION_COUNT)" in explained
    assert "must not be empty" in ok(kubectl(kube, "explain", "pg.spec.selector"))


def test_get_wait_and_describe_show_what_the_operator_did(
    kube: Kube, kafka: KafkaHandle, operator_process: Callable[..., OperatorProcess]
) -> None:
    operator_process().start()
    topic = kafka.create_topic(2, prefix="kubectl")
    ok(kubectl(kube, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "ordo.dev/v1alpha1", "kind": "OrderedTopicExpansion", "metadata": {"name": "grow"},
             "spec": {"topic": topic, "partitions": 4}},
            {"apiVersion": "ordo.dev/v1alpha1", "kind": "ProducerGroup", "metadata": {"name": "nobody"},
             "spec": {"sourcePartitions": 2, "selector": {"matchLabels": {"app": "absent"}}}},
        ],
    })))  # fmt: skip
    waited = kubectl(kube, "wait", "--for=condition=Ready", "ote/grow", "--timeout=90s")
    assert waited.returncode == 0, (waited.stderr, Expansions(kube.custom, kube.namespace).status("grow"))
    assert "orderedtopicexpansion.ordo.dev/grow condition met" in waited.stdout
    wait_for(lambda: Groups(kube.custom, kube.namespace).status("nobody").get("conditions"), 60, "pg status")
    table = ok(kubectl(kube, "get", "pg,ote"))
    assert header(table, "producergroup") == ["NAME", "PARTITIONS", "MEMBERS", "GENERATION", "READY", "AGE"]
    assert header(table, "orderedtopicexpansion") == ["NAME", "TOPIC", "FROM", "TO", "PHASE", "READY", "AGE"]
    rows = {cells[0]: cells for cells in map(str.split, table.splitlines()) if cells and "/" in cells[0]}
    assert rows["orderedtopicexpansion.ordo.dev/grow"][1:6] == [topic, "2", "4", "Completed", "True"]
    assert (
        rows["producergroup.ordo.dev/nobody"][1] == "2"
        and rows["producergroup.ordo.dev/nobody"][4] == "False"
    )
    wide = ok(kubectl(kube, "get", "ote", "grow", "-o", "wide"))
    assert wide.splitlines()[0].split()[-2:] == ["EPOCH", "AGE"]

    def described() -> str | None:
        text = ok(kubectl(kube, "describe", "ote", "grow"))
        return text if "Completed" in text.split("Events:")[-1] else None

    text = wait_for(described, 30, "the expansion's Events in kubectl describe")
    assert text is not None
    events = text.split("Events:")[-1]
    assert "Normal" in events and "Fencing" in events, events


def test_cel_rules_refuse_with_messages_that_say_what_to_do(kube: Kube) -> None:
    empty = {"apiVersion": "ordo.dev/v1alpha1", "kind": "ProducerGroup", "metadata": {"name": "all"},
             "spec": {"sourcePartitions": 2, "selector": {}}}  # fmt: skip
    refused = kubectl(kube, "apply", "-f", "-", stdin=json.dumps(empty))
    assert refused.returncode != 0
    assert "spec.selector: Invalid value" in refused.stderr
    assert "an empty selector would select every pod in the namespace" in refused.stderr
    expansions = Expansions(kube.custom, kube.namespace)
    expansions.create("grow", "orders", 4)
    ok(kubectl(kube, "patch", "ote", "grow", "--type=merge", "-p", '{"spec": {"partitions": 6}}'))
    started = {"status": {"phase": "Fencing", "startedAt": "2026-01-01T00:00:00Z"}}
    kube.custom.patch_namespaced_custom_object_status(
        "ordo.dev", "v1alpha1", kube.namespace, "orderedtopicexpansions", "grow", started
    )
    changes = ('{"spec": {"partitions": 8}}', '{"spec": {"topic": "payments"}}',
               '{"spec": {"fenceTimeoutSeconds": 300}}')  # fmt: skip
    for change in changes:
        moved = kubectl(kube, "patch", "ote", "grow", "--type=merge", "-p", change)
        assert moved.returncode != 0, moved.stdout
        assert "spec cannot change once the expansion has started or ended" in moved.stderr
    ok(kubectl(kube, "label", "ote", "grow", "team=data"))  # the rest stays editable
    spec: Any = expansions.get("grow")["spec"]
    assert (spec["topic"], spec["partitions"]) == ("orders", 6)
    # an expansion that ended before it started (here: refused, the target not larger) is not
    # taken up again either: an edit would change nothing, so it is refused too
    expansions.create("shrink", "orders", 2)
    failed = {"status": {"phase": "Failed", "message": "target 2 partitions must be larger than today's 4"}}
    kube.custom.patch_namespaced_custom_object_status(
        "ordo.dev", "v1alpha1", kube.namespace, "orderedtopicexpansions", "shrink", failed
    )
    retried = kubectl(kube, "patch", "ote", "shrink", "--type=merge", "-p", '{"spec": {"partitions": 8}}')
    assert retried.returncode != 0 and "create another OrderedTopicExpansion" in retried.stderr


def test_crd_files_are_what_the_server_serves(kube: Kube) -> None:
    """Nothing is patched on the way in: the stored CRD's schema is the file's."""
    import yaml

    assert CRDS is not None
    served = json.loads(ok(kubectl(kube, "get", "crd", "orderedtopicexpansions.ordo.dev", "-o", "json")))
    written = yaml.safe_load((Path(CRDS) / "orderedtopicexpansions.ordo.dev.yaml").read_text())
    assert served["spec"]["versions"] == written["spec"]["versions"]
