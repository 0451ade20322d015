"""Label and field selectors, without a server."""

from __future__ import annotations

import pytest

from ordo.testbed.kube.errors import ApiError
from ordo.testbed.kube.selectors import matcher, parse_labels

POD = {
    "metadata": {"name": "p1", "namespace": "ns", "labels": {"app": "a", "tier": "web"}},
    "status": {"phase": "Running"},
}
FIELDS = {
    "metadata.name": "metadata.name",
    "metadata.namespace": "metadata.namespace",
    "status.phase": "status.phase",
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=a", True),
        ("app==a", True),
        ("app=b", False),
        ("app!=b", True),
        ("app!=a", False),
        ("missing!=x", True),
        ("app in (a, b)", True),
        ("app in (b,c)", False),
        ("app notin (b,c)", True),
        ("app notin (a)", False),
        ("missing notin (a)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=a,tier=web", True),
        ("app=a, tier in (db)", False),
        ("app in (a),!missing,tier", True),
        ("example.com/role=x", False),
    ],
)
def test_label_selectors(selector: str, expected: bool) -> None:
    assert matcher(selector, None, FIELDS)(POD) is expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("metadata.namespace=ns,metadata.name=p1", True),
        ("metadata.namespace=other", False),
        ("status.phase=Running", True),
        ("status.phase!=Pending", True),
    ],
)
def test_field_selectors(selector: str, expected: bool) -> None:
    assert matcher(None, selector, FIELDS)(POD) is expected


def test_both_selectors_must_match() -> None:
    assert matcher("app=a", "metadata.name=p1", FIELDS)(POD)
    assert not matcher("app=a", "metadata.name=p2", FIELDS)(POD)


@pytest.mark.parametrize("bad", ["app in a", "app in (a", "app notin", "a b", "!"])
def test_bad_label_selectors_are_400(bad: str) -> None:
    with pytest.raises(ApiError) as e:
        parse_labels(bad)
    assert e.value.code == 400


def test_empty_value_is_allowed() -> None:
    assert matcher("app=", None, FIELDS)({"metadata": {"labels": {"app": ""}}})


def test_unsupported_field_label_is_400() -> None:
    with pytest.raises(ApiError) as e:
        matcher(None, "spec.foo=bar", FIELDS)
    assert e.value.code == 400
    assert e.value.message == "field label not supported: spec.foo"
