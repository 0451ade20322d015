"""The chart's monitoring bundle: the PrometheusRule's alerts unit-tested with Prometheus' own
``promtool test rules`` (tests/deploy/monitoring/rules_test.yaml: input series, expected alerts),
and every metric the rules, the Grafana dashboard and docs/operations.md's queries read is one the
operator or the SDK exports, each query checked by promtool's PromQL parser.

promtool is built from the Go module in testbed/promtool once per machine (``make test`` does it
before the suite; ``ordo_testbed.promtool`` builds it on first use)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from ordo_testbed.promtool import promtool

from .chart import CHART, NAMESPACE, RELEASE, ROOT

TESTS = Path(__file__).parent / "monitoring" / "rules_test.yaml"
DASHBOARD = CHART / "dashboards" / "ordo.json"
ENABLED = {"monitoring": {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}}
NOT_OURS = {"up"}  # Prometheus' own series of each scrape target


def _render(values: dict[str, Any]) -> dict[str, Any]:
    """The objects the monitoring templates render: kind -> object."""
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return {
        doc["kind"]: doc
        for name in ("prometheusrule.yaml", "grafana-dashboard.yaml")
        for doc in yaml.safe_load_all(manifests.get(f"ordo/templates/{name}", ""))
        if doc
    }


def _rule_groups(values: dict[str, Any] = ENABLED) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = _render(values)["PrometheusRule"]["spec"]["groups"]
    return groups


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool()), *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def _run_rule_tests(groups: list[dict[str, Any]], folder: Path) -> subprocess.CompletedProcess[str]:
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    shutil.copy(TESTS, folder / TESTS.name)
    checked = _promtool("check", "rules", "rules.yaml", cwd=folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return _promtool("test", "rules", TESTS.name, cwd=folder)


def test_the_alerts_fire_when_they_should_and_not_before(tmp_path: Path) -> None:
    done = _run_rule_tests(_rule_groups(), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_rule_tests_can_fail(tmp_path: Path) -> None:
    """A threshold other than the tested one (an expansion stuck after 30 minutes, not 15) fails
    the unit tests: they check the rules as rendered, not merely that promtool runs."""
    values = {"monitoring": {"prometheusRule": {"enabled": True, "expansionStuckMinutes": 30}}}
    done = _run_rule_tests(_rule_groups(values), tmp_path)
    assert done.returncode != 0
    assert "OrdoExpansionStuck" in done.stdout + done.stderr


def test_every_alert_has_a_case_that_fires_and_one_that_must_not() -> None:
    alerts = {rule["alert"] for group in _rule_groups() for rule in group["rules"]}
    assert alerts == {
        "OrdoOperatorDown", "OrdoOperatorHandlerErrors", "OrdoGroupPartitionsUnassigned",
        "OrdoGroupNotReady", "OrdoExpansionStuck", "OrdoExpansionFailed",
        "OrdoTopicPartitionsOutsideEpochs", "OrdoGateClosedTooLong", "OrdoMisplacedRecords",
        "OrdoProducerFencedThroughKafka",
    }  # fmt: skip
    cases = [case for test in yaml.safe_load(TESTS.read_text())["tests"] for case in test["alert_rule_test"]]
    for alert in alerts:
        fired = [c for c in cases if c["alertname"] == alert and c["exp_alerts"]]
        silent = [c for c in cases if c["alertname"] == alert and not c["exp_alerts"]]
        assert fired and silent, (
            f"{alert}: rules_test.yaml needs a case where it fires and one where it must not"
        )


def test_alert_settings_reach_the_rules() -> None:
    values = {"monitoring": {"prometheusRule": {
        "enabled": True, "labels": {"release": "prometheus"}, "additionalAlertLabels": {"team": "data"},
        "operatorJob": "kafka/ordo", "gateClosedMinutes": 5,
    }}}  # fmt: skip
    rule = _render(values)["PrometheusRule"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["metadata"]["namespace"] == NAMESPACE
    rules = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert all(r["labels"]["team"] == "data" for r in rules.values())
    selector = f'up{{job="kafka/ordo", namespace="{NAMESPACE}"}}'
    down = f"max by (job, namespace) ({selector}) == 0 or absent({selector})"
    assert rules["OrdoOperatorDown"]["expr"] == down
    assert rules["OrdoGateClosedTooLong"]["expr"] == "time() - ordo_gate_closed_since_seconds > 300"
    assert _render({}) == {}  # off by default


# --- metric names: what the queries read is what ordo exports ---------------------------------

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_RANGES = re.compile(r"\[[^\]]*\]")
_NAME = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?!\s*\(|[\w])")
_KEYWORDS = {"and", "or", "unless", "offset", "bool", "inf", "nan", "Inf", "NaN"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left once strings, label matchers,
    grouping clauses and ranges are gone, less function calls, keywords and numbers."""
    text = _STRINGS.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _RANGES.sub(" ", text)
    return {name for name in _NAME.findall(text) if name not in _KEYWORDS}


@cache
def exported() -> frozenset[str]:
    """Every series name the operator's and the SDK's metrics produce (a counter's ``_total``, a
    histogram's ``_bucket``/``_sum``/``_count``)."""
    from prometheus_client import REGISTRY

    import ordo.metrics as sdk_metrics
    import ordo_operator.metrics as operator_metrics

    assert sdk_metrics.AVAILABLE and operator_metrics.OPERATOR_ERRORS is not None
    names: set[str] = set()
    for family in REGISTRY.collect():
        if not family.name.startswith("ordo_"):
            continue
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
        names.update(family.name + suffix for suffix in suffixes[family.type])
    return frozenset(names)


def _dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):  # label_values(METRIC, label): the metric must exist too
            found = re.fullmatch(r"label_values\((\w+),\s*\w+\)", query["query"])
            assert found, query
            queries.append(found.group(1))
    return queries


def _documented_queries() -> list[str]:
    """The lines of docs/operations.md's ``promql`` blocks."""
    text = (ROOT / "docs" / "operations.md").read_text()
    blocks = re.findall(r"^```promql\n(.*?)^```", text, re.M | re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def _sources() -> dict[str, list[str]]:
    return {
        "PrometheusRule": [r["expr"] for group in _rule_groups() for r in group["rules"]],
        "dashboard": _dashboard_queries(),
        "docs/operations.md": _documented_queries(),
    }


def test_the_name_extraction_finds_selectors_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, group) (rate(ordo_rebalance_duration_seconds_bucket'
        '{resource_namespace=~"$ns", job!="x"}[$__rate_interval]))) > 0 and on (expansion) '
        '(time() - ordo_expansion_phase_since_seconds offset 5m) or absent(up{job="a"} == 1) unless bool 1e3'
    )  # fmt: skip
    assert metric_names(expr) == {
        "ordo_rebalance_duration_seconds_bucket", "ordo_expansion_phase_since_seconds", "up"
    }  # fmt: skip


@pytest.mark.parametrize("source", ["PrometheusRule", "dashboard", "docs/operations.md"])
def test_every_metric_the_queries_read_is_exported(source: str) -> None:
    queries = _sources()[source]
    assert queries, f"no queries found in the {source}"
    read = set().union(*(metric_names(q) for q in queries))
    assert len(read) >= 3, read
    unknown = sorted(read - exported() - NOT_OURS)
    assert not unknown, f"the {source} reads metrics neither the operator nor the SDK exports: {unknown}"


def test_a_misspelt_metric_would_be_caught() -> None:
    assert "ordo_group_member" in metric_names("ordo_group_member > 0") - exported()


def _grafana_to_promql(expr: str) -> str:
    """A dashboard query with Grafana's variables replaced by what they stand for."""
    return expr.replace("$__rate_interval", "5m").replace("$resource_namespace", ".*").replace("$job", ".*")


def test_every_query_parses_as_promql(tmp_path: Path) -> None:
    """Each dashboard and documented query as a recording rule: ``promtool check rules`` parses
    them with Prometheus' own PromQL parser."""
    queries = [_grafana_to_promql(q) for q in _dashboard_queries()] + _documented_queries()
    rules = [{"record": f"ordo:query_{i}", "expr": q} for i, q in enumerate(queries)]
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    done = _promtool("check", "rules", "queries.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": [
        {"record": "ordo:bad", "expr": "sum by (topic (ordo_gates_closed)"}]}]}))  # fmt: skip
    assert _promtool("check", "rules", "bad.yaml", cwd=tmp_path).returncode != 0


def test_the_dashboard_configmap_holds_the_dashboard() -> None:
    configmap = _render(ENABLED)["ConfigMap"]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["ordo.json"]) == json.loads(DASHBOARD.read_text())
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "ordo-overview" and dashboard["title"] == "ordo"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    values = {"monitoring": {"grafanaDashboard": {"enabled": True, "namespace": "grafana"}}}
    assert _render(values)["ConfigMap"]["metadata"]["namespace"] == "grafana"


def test_every_alert_has_a_runbook_section_its_url_points_at() -> None:
    """Each alert's runbook_url is the base and its name in lower case, and docs/operations.md has
    a section of that name under "Runbooks" (GitHub's anchor of "### OrdoX" is "ordox")."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    runbooks = operations.split("## Runbooks", 1)[1].split("\n## ", 1)[0]
    sections = {line[4:].strip().lower() for line in runbooks.splitlines() if line.startswith("### ")}
    rules = [rule for group in _rule_groups() for rule in group["rules"] if "alert" in rule]
    assert rules
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url == f"https://ordo.dev/docs/operations#{rule['alert'].lower()}", rule["alert"]
        assert rule["alert"].lower() in sections, f"no runbook section for {rule['alert']}"
