"""Every Dockerfile in the repository, checked for the essentials (no Docker engine here; the e2e
suite builds them): pinned bases, a numeric non-root user, exec-form entry points, lean layers,
and a build context that leaves the developer's venv and caches out. The rules follow hadolint's
(DL numbers) where one exists."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SKIP_DIRS = {".git", ".venv", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist"}


def dockerfiles() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if _SKIP_DIRS & set(path.relative_to(ROOT).parts) or not path.is_file():
            continue
        if (
            path.name == "Dockerfile"
            or path.name.endswith(".Dockerfile")
            or path.name.startswith("Dockerfile.")
        ) and not path.name.endswith(".dockerignore"):
            found.append(path)
    return sorted(found)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str
    line: int


def parse(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    instructions: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, arguments = full.partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip(), start))
    return instructions


def problems(text: str) -> list[str]:
    instructions = parse(text)
    found: list[str] = []
    args: dict[str, str] = {}
    stages: list[str] = []
    stage_users: list[str | None] = []
    for ins in instructions:
        where = f"line {ins.line}"
        if ins.keyword == "ARG" and not stages:
            name, has_default, default = ins.arguments.partition("=")
            if has_default:
                args[name.strip()] = default.strip().strip('"')
        elif ins.keyword == "FROM":
            words = ins.arguments.split()
            words = [w for w in words if not w.startswith("--platform")]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), words[0])
            if image not in stages and image != "scratch":
                name, _, tag = image.partition("@")[0].rpartition("/")[2].partition(":")
                if "@sha256:" not in image and not tag:
                    found.append(f"{where}: base image {image} is not pinned (DL3006)")
                if tag == "latest":
                    found.append(f"{where}: base image {image} uses latest (DL3007)")
                if "$" in image:
                    found.append(f"{where}: base image {image} depends on an ARG without a default")
            if len(words) >= 3 and words[1].upper() == "AS":
                stages.append(words[2])
            else:
                stages.append(f"#{len(stages)}")
            stage_users.append(None)
        elif ins.keyword == "USER":
            stage_users[-1] = ins.arguments
        elif ins.keyword == "WORKDIR" and not ins.arguments.startswith(("/", "$")):
            found.append(f"{where}: WORKDIR {ins.arguments} is relative (DL3000)")
        elif ins.keyword == "ADD" and not re.search(r"\.(tar|tgz|tar\.\w+)\b", ins.arguments):
            found.append(f"{where}: ADD for plain files; use COPY (DL3020)")
        elif ins.keyword in {"CMD", "ENTRYPOINT"} and not ins.arguments.startswith("["):
            found.append(f"{where}: {ins.keyword} in shell form; use the JSON exec form (DL3025)")
        elif ins.keyword == "RUN":
            found.extend(f"{where}: {p}" for p in _run_problems(ins.arguments))
    if not stages:
        return ["no FROM instruction"]
    user = stage_users[-1]
    if user is None:
        found.append("the final stage runs as root: add USER <uid> (DL3002)")
    else:
        uid = user.split(":")[0]
        if not uid.isdigit():
            found.append(f"USER {user}: use a numeric uid, so runAsNonRoot can be verified")
        elif int(uid) == 0:
            found.append("USER 0: the final stage runs as root (DL3002)")
    if "latest" in re.findall(r":(\w+)", " ".join(i.arguments for i in instructions if i.keyword == "FROM")):
        found.append("a latest tag")
    return found


def _run_problems(command: str) -> list[str]:
    found = []
    for part in re.split(r"&&|;|\|\|", command):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        if not words:
            continue
        if words[0] == "sudo":
            found.append("sudo (DL3004)")
        pip = "pip" in words[0].rsplit("/", 1)[-1] and "install" in words
        if pip and "--no-cache-dir" not in words and "PIP_NO_CACHE_DIR" not in command:
            found.append("pip install without --no-cache-dir (DL3042)")
        if words[0] in {"apt-get", "apt"} and "install" in words:
            if "--no-install-recommends" not in words:
                found.append("apt-get install without --no-install-recommends (DL3015)")
            if "rm -rf /var/lib/apt/lists" not in command:
                found.append("apt lists left in the layer (DL3009)")
        if words[0] in {"apt-get", "apt"} and "upgrade" in words:
            found.append("apt-get upgrade in an image (DL3005)")
        if words[0] in {"curl", "wget"} and "|" in part:
            found.append("piping a download into a shell")
    return found


def test_the_repository_has_its_images() -> None:
    assert ROOT / "operator" / "Dockerfile" in dockerfiles()


@pytest.mark.parametrize("path", dockerfiles(), ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_essentials(path: Path) -> None:
    assert problems(path.read_text()) == []


@pytest.mark.parametrize("path", dockerfiles(), ids=lambda p: str(p.relative_to(ROOT)))
def test_build_context_leaves_out_the_venv(path: Path) -> None:
    # BuildKit reads <Dockerfile>.dockerignore beside the Dockerfile before the context's own.
    ignores = [
        path.with_name(path.name + ".dockerignore"),
        ROOT / ".dockerignore",
        path.parent / ".dockerignore",
    ]
    ignore = next((p for p in ignores if p.exists()), None)
    assert ignore is not None, f"no .dockerignore for {path.relative_to(ROOT)}"
    lines = [line.strip() for line in ignore.read_text().splitlines()]
    assert "*" in lines or any(line.strip("/*") == ".venv" for line in lines)


def test_operator_image_runs_the_operator_from_the_repo_package() -> None:
    instructions = parse((ROOT / "operator" / "Dockerfile").read_text())
    entry = [i for i in instructions if i.keyword == "ENTRYPOINT"]
    assert entry and "ordo_operator" in entry[-1].arguments
    copies = " ".join(i.arguments for i in instructions if i.keyword == "COPY")
    assert "sdk" in copies and "operator" in copies and "pyproject.toml" in copies
    # the SDK and the operator, each its own distribution in this repository
    assert any("pip install" in i.arguments and i.arguments.endswith(" . ./operator") for i in instructions)
    # The chart's pod securityContext runs as this uid.
    import yaml

    values = yaml.safe_load((ROOT / "charts" / "ordo" / "values.yaml").read_text())
    user = [i for i in instructions if i.keyword == "USER"][-1].arguments
    assert user.split(":")[0] == str(values["podSecurityContext"]["runAsUser"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FROM python\nCMD python app.py\n", ["not pinned", "shell form", "root"]),
        ("FROM python:latest\nUSER app\n", ["latest", "numeric"]),
        ("FROM python:3.11-slim\nRUN apt-get install -y curl\nUSER 0\n", ["DL3015", "DL3009", "root"]),
        ("ARG BASE\nFROM $BASE\nWORKDIR src\nADD . /src\nRUN pip install .\nUSER 1000\n",
         ["ARG", "DL3000", "DL3020", "DL3042"]),
        ("FROM python:3.11-slim AS build\nUSER 1000\nFROM build\n", ["root"]),
    ],
)  # fmt: skip
def test_the_checker_catches_mistakes(text: str, expected: list[str]) -> None:
    found = "\n".join(problems(text))
    for word in expected:
        assert word in found, found


def test_a_good_multi_stage_dockerfile_passes() -> None:
    text = (
        "# syntax=docker/dockerfile:1\nARG BASE=python:3.11.11-slim\nFROM ${BASE} AS build\n"
        "RUN apt-get update \\\n && apt-get install -y --no-install-recommends gcc \\\n"
        " && rm -rf /var/lib/apt/lists/*\nFROM ${BASE}\nCOPY --from=build /opt /opt\nUSER 10001:10001\n"
        'ENTRYPOINT ["python"]\n'
    )
    assert problems(text) == []
