"""The Helm chart, rendered and linted by Helm's own engine over several value sets; every object
checked against Kubernetes' schemas and the Pod Security "restricted" profile."""

from __future__ import annotations

import json
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from .chart import CHART, NAMESPACE, ROOT, VALUE_SETS, chart_crds, component, notes, of_kind, render

KUBE_VERSION = "1.30.0"  # the oldest Kubernetes the chart is checked against (schemas and lint)
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "ClusterKopfPeering", "KopfPeering"}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_chart_lints_clean(name: str) -> None:
    report = helm.lint(
        CHART, VALUE_SETS[name], strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # warnings and errors
    assert not problems and not report["errors"], report


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_object_matches_the_kubernetes_schema(name: str) -> None:
    objects = render(name)
    assert objects
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue  # not built-in: checked against their CRDs below
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        if obj["kind"] not in {"ClusterRole", "ClusterRoleBinding"}:
            assert obj["metadata"].get("namespace"), (
                f"{obj['kind']} {obj['metadata']['name']} has no namespace"
            )


def test_crds_validate_and_equal_the_generated_ones() -> None:
    crds = chart_crds()
    generated = {path.name: path.read_text() for path in sorted((ROOT / "crds").glob("*.yaml"))}
    assert generated
    for filename, text in generated.items():
        assert crds.get(filename) == text, f"charts/ordo/crds/{filename} differs from crds/: run `make crds`"
    assert set(crds) - set(generated) == {"kopfpeerings.kopf.dev.yaml"}
    for text in crds.values():
        for crd in yaml.safe_load_all(text):
            kubernetes_validate.validate(crd, KUBE_VERSION, strict=True)


def _crd_schema(kind: str) -> dict[str, Any]:
    for text in chart_crds().values():
        for crd in yaml.safe_load_all(text):
            if crd["spec"]["names"]["kind"] == kind:
                schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
                return schema
    raise AssertionError(f"no CRD for {kind}")


@pytest.mark.parametrize(("name", "kind"), [("ha", "ClusterKopfPeering"), ("ha-namespaced", "KopfPeering")])
def test_peering_objects_exist_when_replicas_peer(name: str, kind: str) -> None:
    objects = render(name)
    deployment = of_kind(objects, "Deployment")[0]
    peerings = of_kind(objects, kind)
    assert peerings, "2+ replicas need a peering object (kopf refuses to run without it)"
    for peering in peerings:
        assert peering["apiVersion"] == "kopf.dev/v1"
        jsonschema.validate(peering, _crd_schema(kind))
        assert (
            f"--peering={peering['metadata']['name']}"
            in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        )
    assert "strategy" not in deployment["spec"]  # peers may overlap during a rolling update


def test_single_replica_never_overlaps_and_does_not_peer() -> None:
    objects = render("default")
    deployment = of_kind(objects, "Deployment")[0]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith("--peering")]
    assert not of_kind(objects, "ClusterKopfPeering") and not of_kind(objects, "KopfPeering")


def test_service_monitor_scrapes_the_metrics_service() -> None:
    objects = render("ha")
    (monitor,) = of_kind(objects, "ServiceMonitor")
    (service,) = of_kind(objects, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    (pdb,) = of_kind(objects, "PodDisruptionBudget")
    pod_labels = of_kind(objects, "Deployment")[0]["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def _container(name: str) -> dict[str, Any]:
    container: dict[str, Any] = of_kind(render(name), "Deployment")[0]["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


def test_operator_runs_with_health_probes_metrics_and_json_logs() -> None:
    container = _container("default")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ORDO_LOG_FORMAT"] == "json" and env["ORDO_METRICS_PORT"] == "9090"
    assert "--liveness=http://0.0.0.0:8080/healthz" in container["args"]
    assert "--all-namespaces" in container["args"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"health": 8080, "metrics": 9090}
    assert _container("bare")["ports"] == [{"name": "health", "containerPort": 8080, "protocol": "TCP"}]


def test_namespace_scope_serves_only_its_namespaces() -> None:
    objects = render("namespaced")
    args = of_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"--namespace=data", "--namespace=billing", "--no-scanning"} <= set(args)
    assert not of_kind(objects, "ClusterRoleBinding")
    # the only cluster-scoped objects: the user roles (userRbac.create=false leaves them out too)
    assert {component(o) for o in of_kind(objects, "ClusterRole")} == {"user-roles"}
    assert {r["metadata"]["namespace"] for r in of_kind(objects, "Role")} == {"data", "billing"}
    for binding in of_kind(objects, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ordo", "namespace": NAMESPACE}]


def test_kafka_connection_comes_from_the_secret() -> None:
    container = _container("kafka-secret")
    env = {e["name"]: e for e in container["env"]}
    assert env["ORDO_KAFKA_BOOTSTRAP"]["valueFrom"]["secretKeyRef"] == {
        "name": "kafka-client",
        "key": "bootstrap",
    }
    assert env["ORDO_KAFKA_OPT_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "kafka-client",
        "key": "password",
    }
    assert json.loads(env["ORDO_KAFKA_OPTIONS"]["value"]) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
    }
    assert env["ORDO_EPOCH_TOPIC"]["value"] == "ordo-epochs"
    assert container["image"] == "ordo-operator@sha256:" + "ab" * 32

    # The operator's own parser turns those variables into the librdkafka config.
    from ordo_operator.config import OperatorConfig

    config = OperatorConfig.from_env(
        {"ORDO_KAFKA_BOOTSTRAP": "k:9093", "ORDO_KAFKA_OPTIONS": env["ORDO_KAFKA_OPTIONS"]["value"],
         "ORDO_KAFKA_OPT_SASL_PASSWORD": "s3cret", "ORDO_KAFKA_OPT_SASL_USERNAME": "ordo"}
    )  # fmt: skip
    assert config.kafka_options == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.password": "s3cret",
        "sasl.username": "ordo",
    }


@pytest.mark.parametrize(
    "values",
    [
        {"replicaCount": -1},
        {"rbac": {"scope": "cluster-wide"}},
        {"image": {"repository": "ordo-operator", "tag": "latest"}},
        {"image": {"repository": "ordo-operator", "digest": "sha256:short"}},
        {"logging": {"format": "yaml"}},
        {"replicas": 2},  # a typo of replicaCount
        {"kafka": {"secret": {"options": {"sasl.password": "password"}}}},  # no Secret name
        {"kafka": {"secret": {"name": "k", "options": {"SASL_PASSWORD": "pw"}}}},  # env form
        {"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}},
        {"watchNamespaces": ["Not_A_Namespace"]},
        {"monitoring": {"prometheusRule": {"enabled": True, "expansionStuckMinutes": 0}}},
        {"metrics": {"enabled": False}, "monitoring": {"prometheusRule": {"enabled": True}}},  # no `up`
        {"monitoring": {"grafanaDashboard": {"enabled": True, "label": {"grafana_dashboard": "1"}}}},
    ],
)
def test_values_schema_rejects_mistakes(values: dict[str, Any]) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError):
        chart.validate_schema(values)


def test_every_value_set_passes_the_schema() -> None:
    with helm.Chart.load(CHART) as chart:
        for values in VALUE_SETS.values():
            chart.validate_schema(values)
    assert json.loads((CHART / "values.schema.json").read_text())["additionalProperties"] is False


# --- Pod Security Standards, "restricted" profile
# (kubernetes.io/docs/concepts/security/pod-security-standards)

_ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                    "projected", "secret"}  # fmt: skip


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What in a pod spec the "restricted" profile refuses (empty: admitted)."""
    problems = []
    pod_context = pod.get("securityContext", {})
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            problems.append(field)
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= _ALLOWED_VOLUMES:
            problems.append(f"volume {volume['name']}: {kinds}")
    if pod_context.get("runAsUser") == 0:
        problems.append("pod runAsUser 0")
    for container in pod.get("initContainers", []) + pod["containers"]:
        context = container.get("securityContext", {})
        name = container["name"]
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            problems.append(f"{name}: must drop ALL capabilities")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities")
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            problems.append(f"{name}: runAsUser 0")
        seccomp = context.get("seccompProfile", pod_context.get("seccompProfile", {}))
        if seccomp.get("type") not in {"RuntimeDefault", "Localhost"}:
            problems.append(f"{name}: seccompProfile")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            problems.append(f"{name}: hostPort")
        if context.get("procMount", "Default") != "Default":
            problems.append(f"{name}: procMount")
    return problems


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_pods_meet_the_restricted_pod_security_profile(name: str) -> None:
    for deployment in of_kind(render(name), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert restricted_violations(pod) == []
        container = pod["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_the_restricted_checker_catches_a_root_pod() -> None:
    pod = {"hostPID": True, "containers": [{"name": "c", "securityContext": {"runAsUser": 0}}],
           "volumes": [{"name": "h", "hostPath": {"path": "/"}}]}  # fmt: skip
    assert len(restricted_violations(pod)) >= 6


def test_member_rbac_is_optional_and_scoped_to_own_pod_and_lease() -> None:
    assert not [o for o in render("default") if component(o) == "member"]
    members = [o for o in render("members") if component(o) == "member"]
    assert {(o["kind"], o["metadata"]["namespace"]) for o in members} == {
        (kind, ns) for kind in ("ServiceAccount", "Role", "RoleBinding") for ns in ("data", "billing")
    }
    for role in of_kind(members, "Role"):
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "verbs": ["get", "create", "update"],
            },
        ]
    assert "memberRbac.create=true" in notes("default")
    assert "memberRbac" in (CHART / "README.md").read_text()


def test_user_roles_aggregate_into_admin_edit_and_view() -> None:
    """People's roles: ordo-edit and ordo-admin write ordo's resources, ordo-view reads them, none
    writes status; each carries the label that folds it into Kubernetes' role of the same name
    (tests/deploy/test_rbac_live.py checks the aggregation on a real kube-controller-manager)."""
    roles = {o["metadata"]["name"]: o for o in render("default") if component(o) == "user-roles"}
    assert set(roles) == {"ordo-admin", "ordo-edit", "ordo-view"}
    resources = ["producergroups", "orderedtopicexpansions", "topicautoscalers"]
    writes = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
    for name, role in roles.items():
        level = name.removeprefix("ordo-")
        aggregated = {k for k, v in role["metadata"]["labels"].items() if k.startswith("rbac.authorization")}
        assert aggregated == {f"rbac.authorization.k8s.io/aggregate-to-{level}"}
        assert role["metadata"]["labels"][f"rbac.authorization.k8s.io/aggregate-to-{level}"] == "true"
        verbs = ["get", "list", "watch"] if level == "view" else writes
        assert role["rules"] == [
            {"apiGroups": ["ordo.dev"], "resources": resources, "verbs": verbs},
            {"apiGroups": ["ordo.dev"], "resources": [f"{r}/status" for r in resources], "verbs": ["get"]},
        ]
    assert not [o for o in render("bare") if component(o) == "user-roles"]


def test_chart_metadata_pins_a_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["appVersion"] == _project_version()


def _project_version() -> str:
    return (ROOT / "VERSION").read_text().strip()
