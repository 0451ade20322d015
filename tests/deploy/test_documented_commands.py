"""Every command the documentation shows works as written (issue 20: the front door).

The shell blocks and command-like inline spans of README.md, docs/*.md, charts/ordo/README.md and
spark_apps/README.md, split as a POSIX shell splits them, each checked by what it is:

- ``helm install|upgrade|template``, and chart values the prose names (``--set memberRbac.create=true``,
  ``rbac.scope=namespace``): the flags read with Helm's own ``--set`` parser and the chart rendered
  by Helm's engine, values.schema.json included;
- ``ordo ...``: parsed by the real parser; ``status`` and ``verify`` also run against the testbed,
  the others are parse-only for the reasons in ``ORDO_PARSE_ONLY``;
- ``kubectl ...``: run with the real kubectl against the testbed's kube-apiserver (``apply`` as a
  server-side dry run, so the shared CRDs stay as they are);
- ``helm uninstall``: the chart's release, with flags helm takes;
- ``make``: the target exists; ``pip install``: the distributions and extras exist in the
  repository; ``docker build``: the Dockerfile and context exist and the tag is the chart's image;
  ``docker push|save|tag``, ``kind load docker-image`` and ``ctr images import``: the operator's
  image under the chart's tag, into the kubelet's containerd namespace (``tests/e2e`` runs the
  same steps for real).

A command none of these covers fails the test, so a newly documented command must be handled.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from confluent_kafka import Producer

from ordo.cli import build_parser
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube

from .chart import CHART, ROOT
from .doc_commands import DocCommand, documented_commands, shell_words
from .helm_flags import ACTIONS, parse_helm, render

FILES = [
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
    "charts/ordo/README.md",
    "spark_apps/README.md",
]
CHART_VALUES = set(yaml.safe_load((CHART / "values.yaml").read_text()))
COMMANDS = documented_commands(ROOT, FILES, CHART_VALUES)

# Spans that stand for a family of commands (placeholders, alternatives): the commands checked instead
TEMPLATES = {
    "ordo bench all|<name>": ["ordo bench all", "ordo bench group"],
    "kubectl auth can-i --list --as=system:serviceaccount:<ns>:<name>": [
        "kubectl auth can-i --list --as=system:serviceaccount:default:ordo-member"
    ],
}
# ordo commands that finish in seconds and change nothing: run against the testbed
ORDO_RUNS = {"status", "verify"}
ORDO_PARSE_ONLY = {
    "sandbox": "runs for minutes; tests/integration/test_sandbox.py runs it",
    "testbed": "starts Kafka and an API server (in the foreground, or in the background until `down`); "
    "testbed/tests/test_testbed_up.py runs it",
    "bench": "runs for minutes on its own broker (make bench)",
    "crds": "writes files; tests/unit checks that crds/ is what it writes",
    "abort-fence": "writes the epoch log; tests/integration/test_fence_cleanup.py runs it",
}
KUBECTL_VERBS = {"get", "apply", "create", "delete", "explain", "describe", "auth", "version"}
# API groups the testbed serves; a manifest of another (a SparkApplication) is checked as a file only
SERVED_API_VERSIONS = {"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "ordo.dev/v1alpha1",
                       "apiextensions.k8s.io/v1", "coordination.k8s.io/v1"}  # fmt: skip


def _id(command: DocCommand) -> str:
    return f"{command.where} {command.text[:60]}"


def concrete(command: DocCommand) -> list[list[str]]:
    """The argv lists ``command`` stands for: itself, a template's commands, or what an
    ``eval "$(...)"`` runs."""
    if command.text in TEMPLATES:
        return [shell_words(text) for text in TEMPLATES[command.text]]
    argv = command.argv
    if len(argv) == 2 and argv[0] == "eval" and argv[1].startswith("$(") and argv[1].endswith(")"):
        return [shell_words(argv[1][2:-1])]
    return [argv]


# --- the checks, one per program -------------------------------------------------------------------


def check_helm(argv: list[str]) -> None:
    release = parse_helm(argv, ROOT)
    assert release.chart.resolve() == CHART, f"{release.chart}: not the repository's chart"
    try:
        manifests = render(release)
    except helm.HelmError as error:
        pytest.fail(f"Helm refuses {' '.join(argv)}:\n{error}")
    assert any(name.endswith("deployment.yaml") and text.strip() for name, text in manifests.items())


def chart_value_as_helm(argv: list[str]) -> list[str]:
    """A value the prose names (``--set x=y`` or ``x=y``) as the install that would pass it."""
    flag, value = (argv[0], argv[1]) if len(argv) == 2 else ("--set", argv[0])
    return ["helm", "install", "ordo", "charts/ordo", flag, value]


def check_make(argv: list[str]) -> None:
    targets = set(re.findall(r"^([\w.-]+):(?!=)", (ROOT / "Makefile").read_text(), re.M))
    missing = [t for t in argv[1:] if not t.startswith("-") and "=" not in t and t not in targets]
    assert not missing, f"no Makefile target {missing} (targets: {sorted(targets)})"


def _distributions() -> dict[str, tuple[Path, set[str]]]:
    """The repository's distributions: name -> (directory, extras)."""
    found = {}
    for pyproject in [ROOT / "pyproject.toml", *ROOT.glob("*/pyproject.toml")]:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        if "name" in project:
            found[project["name"]] = (pyproject.parent, set(project.get("optional-dependencies", {})))
    return found


def check_pip(argv: list[str]) -> None:
    assert argv[1] == "install", f"pip {argv[1]}: only pip install is documented"
    distributions = _distributions()
    by_directory = {directory: (name, extras) for name, (directory, extras) in distributions.items()}
    requirements = [w for w in argv[2:] if not w.startswith("-")]
    assert requirements, "pip install of nothing"
    for requirement in requirements:
        match = re.fullmatch(r"([^\[\]]+)(?:\[([\w,-]+)\])?", requirement)
        assert match, f"cannot read the requirement {requirement!r}"
        target, extras = match.group(1), set(filter(None, (match.group(2) or "").split(",")))
        if "/" in target or target.startswith("."):
            directory = (ROOT / target).resolve()
            assert directory in by_directory, f"{target}: no distribution there ({sorted(distributions)})"
            name, known = by_directory[directory]
        else:  # a name: ordo's distributions are not on PyPI (the name ordo there is another project)
            assert target in distributions, f"{target}: not one of the repository's {sorted(distributions)}"
            name, known = target, distributions[target][1]
        assert extras <= known, f"{name} has no extra {sorted(extras - known)} (extras: {sorted(known)})"


def _check_operator_image(image: str) -> None:
    """An image the docs move around is the operator's, under the tag the chart deploys."""
    repository, _, tag = image.rpartition("@")[0].partition(":") if "@" in image else image.partition(":")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    default = yaml.safe_load((CHART / "values.yaml").read_text())["image"]["tag"] or chart["appVersion"]
    assert repository.rsplit("/", 1)[-1] == "ordo-operator", f"{image}: not the operator's image"
    assert tag == default, f"{image}: the chart deploys the tag {default}"


def check_docker(argv: list[str]) -> None:
    if argv[1] in ("push", "save", "tag"):
        images = [w for w in argv[2:] if not w.startswith("-") and not w.endswith(".tar")]
        assert images, f"docker {argv[1]} of no image"
        for image in images:
            _check_operator_image(image)
        return
    assert argv[1] == "build", f"docker {argv[1]}: only docker build, push, save and tag are documented"
    options: dict[str, str] = {}
    positional, words = [], iter(argv[2:])
    for word in words:
        if word in {"-f", "--file", "-t", "--tag"}:
            options[word.lstrip("-")[0]] = next(words)
        else:
            positional.append(word)
    assert len(positional) == 1 and (ROOT / positional[0]).is_dir(), f"build context {positional}"
    dockerfile = ROOT / options.get("f", str(Path(positional[0]) / "Dockerfile"))
    assert dockerfile.is_file(), f"no {dockerfile.relative_to(ROOT)}"
    if "t" in options:
        repository, _, tag = options["t"].partition(":")
        chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
        image = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
        default = image["tag"] or chart["appVersion"]
        if repository == image["repository"]:  # the image the chart deploys by default
            assert tag == default, f"the chart deploys {repository}:{default}"


def check_kind(argv: list[str]) -> None:
    assert argv[1:3] == ["load", "docker-image"], f"kind {argv[1]}: only kind load docker-image is documented"
    images = [w for i, w in enumerate(argv[3:], 3) if not w.startswith("-") and argv[i - 1] != "--name"]
    assert images, "kind load docker-image of no image"
    for image in images:
        _check_operator_image(image)


def check_ctr(argv: list[str]) -> None:
    words = argv[1:]
    assert words[:2] == ["-n", "k8s.io"], "ctr: the kubelet's images are in the namespace k8s.io (-n k8s.io)"
    assert words[2:4] == ["images", "import"] and len(words) == 5, (
        f"ctr {' '.join(words)}: only images import FILE"
    )


def check_helm_uninstall(argv: list[str]) -> None:
    words, release = argv[2:], []
    flags = {"-n", "--namespace", "--timeout"}
    for i, word in enumerate(words):
        if word.startswith("-"):
            assert word in flags | {"--wait", "--keep-history"}, f"helm uninstall: {word} is not checked"
        elif i == 0 or words[i - 1] not in flags:
            release.append(word)
    assert release == ["ordo"], f"helm uninstall {release}: the documented release is ordo"


def _parse_ordo(words: list[str]) -> tuple[int, str]:
    """(exit code of argparse, what it printed) for ``ordo <words>``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            build_parser().parse_args(words)
        except SystemExit as exit:
            return int(exit.code or 0), out.getvalue()
    return 0, out.getvalue()


def check_ordo(argv: list[str], inline: bool) -> None:
    code, printed = _parse_ordo(argv[1:])
    if code != 0 and inline and not any(w.startswith("-") for w in argv[1:]):
        # prose naming a command (``ordo verify``), not a command line: the command must exist
        code, printed = _parse_ordo([*argv[1:], "--help"])
    assert code == 0, f"ordo's parser refuses {' '.join(argv)}:\n{printed}"
    if argv[1:] == ["--version"]:  # prints and exits: its output is tests/unit/test_extras.py's
        assert printed.startswith("ordo "), printed
        return
    subcommand = argv[1]
    assert subcommand in ORDO_RUNS or subcommand in ORDO_PARSE_ONLY, (
        f"ordo {subcommand}: add it to ORDO_RUNS (run on the testbed) or ORDO_PARSE_ONLY (and say why)"
    )


def _manifests(argv: list[str]) -> list[dict[str, Any]]:
    """The objects of a ``kubectl apply -f PATH`` (a file or a directory of them) or ``-k DIR``
    (a kustomization, rendered by kubectl's own kustomize)."""
    if "-k" in argv:
        folder = ROOT / argv[argv.index("-k") + 1]
        assert (folder / "kustomization.yaml").is_file(), f"kubectl apply -k {folder}: no kustomization.yaml"
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            pytest.skip("kubectl is not installed")
        rendered = subprocess.run(
            [kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60, check=False
        )
        assert rendered.returncode == 0, f"kubectl kustomize {folder}: {rendered.stderr}"
        objects = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    else:
        path = ROOT / argv[argv.index("-f") + 1]
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        assert files and all(f.is_file() for f in files), f"kubectl apply -f {path}: nothing there"
        objects = [doc for f in files for doc in yaml.safe_load_all(f.read_text()) if doc]
    for obj in objects:
        assert obj.get("apiVersion") and obj.get("kind") and obj.get("metadata", {}).get("name"), obj
    return objects


_NAMESPACE_FLAGS = ("-n", "--namespace")


def kubectl_verb(argv: list[str]) -> tuple[str | None, list[str]]:
    """The verb of a kubectl command line, and the line with a leading ``-n NS`` moved after it
    (``kubectl -n data create secret ...``)."""
    words = argv[1:]
    leading: list[str] = []
    while len(words) > 1 and words[0] in _NAMESPACE_FLAGS:
        leading, words = [*leading, *words[:2]], words[2:]
    if not words:
        return None, argv
    return words[0], [argv[0], words[0], *leading, *words[1:]]


def check_kubectl(argv: list[str], inline: bool) -> None:
    verb, argv = kubectl_verb(argv)
    assert verb in KUBECTL_VERBS, f"kubectl {verb}: add the verb to KUBECTL_VERBS if the testbed can run it"
    if argv[1] == "apply" and not (inline and len(argv) == 2):  # bare `kubectl apply`: prose
        assert "-f" in argv or "-k" in argv, "kubectl apply without -f or -k"
        objects = _manifests(argv)
        if "-n" in argv or "--namespace" in argv:  # kubectl refuses -n for objects naming another
            assert not [o["metadata"]["name"] for o in objects if "namespace" in o["metadata"]], (
                f"{' '.join(argv)}: objects name their own namespace"
            )


def runs_on_testbed(command: DocCommand) -> bool:
    argv = concrete(command)[0]
    if argv[0] == "ordo":
        return argv[1] in ORDO_RUNS and _parse_ordo(argv[1:])[0] == 0  # not prose naming it
    if argv[0] == "kubectl":
        argv = kubectl_verb(argv)[1]
        if argv[1] == "apply":
            return len(argv) > 2 and all(o["apiVersion"] in SERVED_API_VERSIONS for o in _manifests(argv))
        return True
    return False


def check(command: DocCommand) -> None:
    """The check of ``command`` by its program; a program without one fails."""
    for argv in concrete(command):
        program = argv[0]
        if program == "helm":
            if command.inline and argv[1:] in (["install"], ["upgrade"], ["template"], ["uninstall"]):
                continue  # prose: "at `helm install` time"
            if argv[1] == "uninstall":
                check_helm_uninstall(argv)
                continue
            assert argv[1] in ACTIONS, f"helm {argv[1]}: only {sorted(ACTIONS)} are checked"
            check_helm(argv)
        elif program.startswith("--set") or "=" in program:
            check_helm(chart_value_as_helm(argv))
        elif program == "make":
            check_make(argv)
        elif program in {"pip", "pip3"}:
            check_pip(argv)
        elif program == "docker":
            check_docker(argv)
        elif program == "kind":
            check_kind(argv)
        elif program == "ctr":
            check_ctr(argv)
        elif program == "ordo":
            check_ordo(argv, command.inline)
        elif program == "kubectl":
            check_kubectl(argv, command.inline)
        else:
            pytest.fail(f"{command.where}: `{command.text}`: no check for {program}; teach {__name__}")


@pytest.mark.parametrize("command", COMMANDS, ids=_id)
def test_documented_command_is_valid(command: DocCommand) -> None:
    check(command)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("curl -s http://localhost:9090/metrics", "no check for curl"),
        ("ordo verify --topics orders", "parser refuses"),
        ("ordo crds --output crds --check --json", "unrecognized arguments: --json"),
        ("make deploy", "no Makefile target"),
        ("pip install 'ordo-kafka[prometheus]'", "no extra"),
        ("docker build -f operator/Dockerfile -t ordo-operator:latest .", "the chart deploys"),
        ("kubectl drain node-1", "KUBECTL_VERBS"),
        ("kind load docker-image ordo-operator:latest", "the chart deploys"),
        ("docker push registry.example.com/ordo/other:0.1.0", "not the operator's image"),
        ("ctr images import ordo-operator.tar", "k8s.io"),
        ("helm uninstall ordo-operator -n ordo-system", "the documented release is ordo"),
    ],
)
def test_a_command_the_code_does_not_take_fails_the_check(text: str, complaint: str) -> None:
    with pytest.raises((AssertionError, pytest.fail.Exception), match=complaint):
        check(DocCommand("docs/new.md", 1, text, inline=False))


def test_the_documentation_shows_the_commands_this_test_checks() -> None:
    """The extraction finds what the documentation shows, so an empty list cannot pass."""
    shown = {(c.file, c.text) for c in COMMANDS}
    assert ("docs/operations.md", "kubectl apply -f crds/") in shown
    assert any(f == "README.md" and t.startswith("helm install ordo charts/ordo --set") for f, t in shown)
    assert ("charts/ordo/README.md", "memberRbac.create=true") in shown
    assert {c.file for c in COMMANDS} >= {"README.md", "docs/operations.md", "charts/ordo/README.md"}


WRONG = [
    ["--set", "memberRbac.enabled=true"],  # the value is memberRbac.create
    # unquoted in a shell the backslash is gone, and Helm reads sasl.password as sasl: {password}
    ["helm", "install", "ordo", "charts/ordo", "--set", "kafka.secret.name=kafka-client",
     *shell_words("--set kafka.secret.options.sasl\\.password=password")],
]  # fmt: skip


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_value_in_the_docs_fails_the_check(wrong: list[str]) -> None:
    """The mistakes issue 20 found in the docs are what this test would catch."""
    argv = chart_value_as_helm(wrong) if wrong[0] == "--set" else wrong
    with pytest.raises(pytest.fail.Exception, match="Helm refuses"):
        check_helm(argv)


def test_helm_reads_quoted_escaped_dots_commas_and_lists_as_helm_does() -> None:
    words = shell_words(
        "helm upgrade ordo charts/ordo --set 'kafka.options.security\\.protocol=SASL_SSL' "
        "--set rbac.workloadNamespaces={data,billing},replicaCount=2 --set-string logging.format=text "
        "-n ordo-system --install"
    )
    release = parse_helm(words, ROOT)
    assert release.namespace == "ordo-system" and release.action == "upgrade"
    assert release.values == {
        "kafka": {"options": {"security.protocol": "SASL_SSL"}},
        "rbac": {"workloadNamespaces": ["data", "billing"]},
        "replicaCount": 2,
        "logging": {"format": "text"},
    }
    with pytest.raises(ValueError, match="does not know the flag --set-something"):
        parse_helm([*words, "--set-something", "x=1"], ROOT)


# --- against the testbed ---------------------------------------------------------------------------


def _numbered_topic(kafka: KafkaHandle) -> str:
    """A topic of this test's own holding records every documented ``ordo verify`` reads: the
    harness's ``{"k": key, "s": n}`` (the sandbox leaves ``orders`` behind for it, the testbed has
    no such topic), with the docs' application fields (``customer``, ``order_no``), the key as the
    Kafka key and the number in a header ``seq`` too."""
    topic = kafka.create_topic(2, prefix="orders")
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    for seq in range(3):
        for key in ("a", "b"):
            value = json.dumps({"k": key, "s": seq, "customer": key, "order_no": seq}).encode()
            producer.produce(topic, value, key.encode(), headers=[("seq", str(seq).encode())])
    assert producer.flush(30) == 0
    return topic


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.testbed
@pytest.mark.parametrize("command", [c for c in COMMANDS if runs_on_testbed(c)], ids=_id)
def test_documented_command_runs_on_the_testbed(command: DocCommand, kafka: KafkaHandle, kube: Kube) -> None:
    env = {"KUBECONFIG": str(kube.kubeconfig_path), "ORDO_KAFKA_BOOTSTRAP": kafka.bootstrap}
    for argv in concrete(command):
        if argv[0] == "ordo":
            if argv[1] == "verify":
                argv = [*argv]
                argv[argv.index("--topic") + 1] = _numbered_topic(kafka)
            done = _run([sys.executable, "-m", "ordo.cli", *argv[1:]], env)
        else:
            kubectl = shutil.which("kubectl")
            if kubectl is None:
                pytest.skip("kubectl is not installed")
            done = _run_kubectl(kubectl, kubectl_verb(argv)[1], kube.namespace, env)
        assert done.returncode == 0, f"{command.where}: {' '.join(argv)}\n{done.stdout}\n{done.stderr}"


def _run_kubectl(
    kubectl: str, argv: list[str], namespace: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """A documented kubectl line on the testbed: what writes runs as a server-side dry run (the
    server checks everything; the shared CRDs and namespaces stay as they are), in this test's
    namespace instead of the one the docs name (``-n``, and the manifests' own)."""
    argv = [namespace if i and argv[i - 1] in _NAMESPACE_FLAGS else word for i, word in enumerate(argv)]
    stdin = None
    if argv[1] in ("apply", "create", "delete"):
        argv = [*argv, "--dry-run=server"]
    if argv[1] == "delete" and argv[2] in ("namespace", "ns"):  # the documented namespaces: this test's
        argv = [*argv[:3], namespace, *[w for w in argv[3:] if w.startswith("-")]]
    elif argv[1] == "delete" and "-f" in argv:
        argv[argv.index("-f") + 1] = str(ROOT / argv[argv.index("-f") + 1])
    if argv[1] == "create" and argv[2] == "namespace":
        argv[3] = namespace + "-doc"  # a name no other test uses: dry run or not, it is new
    elif argv[1] == "apply":
        objects = _manifests(argv)
        for obj in objects:
            if "namespace" in obj["metadata"]:
                obj["metadata"]["namespace"] = namespace
            for subject in obj.get("subjects") or []:
                if "namespace" in subject:
                    subject["namespace"] = namespace
        stdin = yaml.safe_dump_all(objects)
        flag = "-f" if "-f" in argv else "-k"
        at = argv.index(flag)
        argv[at : at + 2] = ["-f", "-"]
    scoped = {"-A", "--all-namespaces", *_NAMESPACE_FLAGS} & set(argv) or argv[1] == "apply"
    line = [kubectl, *argv[1:], *([] if scoped or "namespace" in argv else ["--namespace", namespace])]
    return subprocess.run(
        line, cwd=ROOT, env={**os.environ, **env}, input=stdin, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def _table_values() -> list[tuple[str, str]]:
    """(value, default as written) of charts/ordo/README.md's "Values that matter" table."""
    rows: list[tuple[str, str]] = []
    section = (CHART / "README.md").read_text().split("## Values that matter", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        parent = names[0].rsplit(".", 1)[0]  # `.options` continues `kafka.secret.name`'s parent
        names = [parent + n if n.startswith(".") else n for n in names]
        defaults = re.findall(r"`([^`]*)`", cells[1])
        rows.extend(zip(names, defaults or [""] * len(names), strict=True))
    return rows


def test_the_chart_readme_names_real_values_with_their_defaults() -> None:
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = _table_values()
    assert len(rows) >= 10
    for name, written in rows:
        value: Any = defaults
        for key in name.split("."):
            assert isinstance(value, dict) and key in value, f"charts/ordo/README.md: no value {name}"
            value = value[key]
        if written:
            assert yaml.safe_load(written) == value, (
                f"{name}: the README says {written}, values.yaml {value!r}"
            )
