"""Every image the e2e suite runs, built on this machine (no image registry is reachable):

- base images from Debian's packages: ``debootstrap`` of bookworm into a folder, ``docker import``
  of it (``ordo-python:3.11-bookworm`` with python3 and venv; ``ordo-java:17-bookworm`` with a
  Java 17 runtime);
- the pod sandbox (``ordo-pause:e2e``, ``tests/e2e/images/pause``, compiled here);
- the repository's images from their own Dockerfiles, with ``--build-arg PYTHON_IMAGE=`` naming
  the base built here and ``PIP_INDEX_URL=`` a loopback index of wheels this machine's pip built
  (``wheelhouse.py``): the operator (``operator/Dockerfile``) and the app image with the SDK and
  the scenario programs (``testbed/Dockerfile``);
- Apache Kafka (``tests/e2e/images/kafka``) from the jars the testbed resolves from Maven Central.

Each is built once per machine: a second run finds the base images in Docker and the rest in
Docker's build cache. Docker's classic builder reads only the context's own ``.dockerignore``, so
each build's context is a folder holding what the Dockerfile's ``<Dockerfile>.dockerignore``
lets through (BuildKit reads that file itself). The node's containerd gets each image as
``kind load docker-image`` does it: ``docker save`` into ``ctr images import``.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ordo_testbed.kafka import jars
from ordo_testbed.kafka.broker import _LOG4J2, BROKER_SETTINGS

from .node import cache_dir, ctr, run
from .steps import Journal
from .wheelhouse import served, wheelhouse

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "images"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PYTHON_BASE = "ordo-python:3.11-bookworm"
JAVA_BASE = "ordo-java:17-bookworm"
SPARK_BASE = "ordo-python-java:3.11-17-bookworm"  # spark_apps/Dockerfile's PYTHON_IMAGE
BASES = {
    PYTHON_BASE: ["python3", "python3-venv", "python-is-python3"],
    JAVA_BASE: ["openjdk-17-jre-headless"],
    SPARK_BASE: ["python3", "python3-venv", "python-is-python3", "openjdk-17-jre-headless", "tini", "procps"],
}


@dataclass(frozen=True)
class Images:
    operator: str = "ordo-operator:e2e"
    operator_next: str = "ordo-operator:e2e-next"  # the `helm upgrade` target: another build
    app: str = "ordo-app:e2e"
    kafka: str = "ordo-kafka:e2e"
    pause: str = "ordo-pause:e2e"
    spark: str = "ordo-spark:e2e"

    def all(self) -> list[str]:
        return [self.pause, self.operator, self.operator_next, self.app, self.kafka, self.spark]


def image_id(tag: str) -> str | None:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, check=False
    )
    return done.stdout.decode().strip() if done.returncode == 0 else None


def build_base(tag: str, packages: list[str]) -> str:
    """debootstrap of Debian bookworm (minbase + ``packages``) imported as ``tag``; "cached" when
    Docker has it."""
    if image_id(tag):
        return "cached"
    debs = cache_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ordo-rootfs-", dir=cache_dir()) as folder:
        rootfs = Path(folder) / "rootfs"
        run("debootstrap", "--variant=minbase", f"--include={','.join(packages)}", f"--cache-dir={debs}",
            SUITE, rootfs, MIRROR, timeout=1800)  # fmt: skip
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (rootfs / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        imported = subprocess.run(
            ["docker", "import", "--change", 'CMD ["/bin/bash"]', "-", tag],
            stdin=tar.stdout, capture_output=True, check=False,
        )  # fmt: skip
        tar.stdout.close()
        if tar.wait() != 0 or imported.returncode != 0:
            raise RuntimeError(f"docker import {tag} failed: {imported.stderr.decode()[-2000:]}")
    return "debootstrap"


def _ignored(relative: str, patterns: list[str]) -> bool:
    """Whether a .dockerignore's ``patterns`` leave ``relative`` out (the last matching line
    decides; ``!`` lets a path, or everything under a folder, back in)."""
    out = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        parts = relative.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if body.startswith("**/"):
            matched = any(fnmatch.fnmatch(part, body[3:]) for part in parts)
        else:
            matched = any(fnmatch.fnmatch(prefix, body) for prefix in prefixes)
        if matched:
            out = not negate
    return out


def stage_context(dockerfile: Path, source: Path, into: Path) -> Path:
    """A build context in ``into``: the files of ``source`` that ``<dockerfile>.dockerignore``
    lets through (for the repository: the files git knows, tracked or not ignored; with
    ``ORDO_E2E_REVISION=<commit>``, that commit's files, e.g. HEAD while others edit the tree)."""
    revision = os.environ.get("ORDO_E2E_REVISION")
    if source == ROOT and revision:
        with tempfile.TemporaryDirectory(prefix="ordo-checkout-") as checkout:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True
            )
            run("tar", "-x", "-C", checkout, input=archive.stdout)
            _copy_through(dockerfile, Path(checkout), into)
    else:
        _copy_through(dockerfile, source, into)
    shutil.copy2(dockerfile, into / "Dockerfile")
    return into


def _copy_through(dockerfile: Path, source: Path, into: Path) -> None:
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
    patterns = [
        line.strip() for line in ignore.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    if source == ROOT:
        listed = run("git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard").split("\n")
        files = [name for name in listed if name and (ROOT / name).is_file()]
    else:
        files = [str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()]
    for name in files:
        if not _ignored(name, patterns):
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target)


def docker_build(
    dockerfile: Path, tag: str, source: Path = ROOT, *build_args: str, label: str | None = None
) -> str:
    """``docker build`` of a staged context (host network: pip reaches PyPI as on this machine);
    "cached" when every step came from Docker's build cache."""
    before = image_id(tag)
    with tempfile.TemporaryDirectory(prefix="ordo-context-") as folder:
        context = stage_context(dockerfile, source, Path(folder))
        argv = ["docker", "build", "--network", "host", "-t", tag, "-f", str(context / "Dockerfile")]
        for arg in build_args:
            argv += ["--build-arg", arg]
        if label:
            argv += ["--label", label]
        env = {**os.environ, "DOCKER_BUILDKIT": "0"}  # the classic builder: no frontend image to pull
        done = subprocess.run([*argv, str(context)], capture_output=True, env=env, timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"docker build {tag} failed:\n{(done.stdout + done.stderr).decode()[-4000:]}")
    return "cached" if image_id(tag) == before else "built"


def build_pause(tag: str) -> str:
    with tempfile.TemporaryDirectory(prefix="ordo-pause-") as folder:
        run("gcc", "-Os", "-static", "-o", Path(folder) / "pause", HERE / "pause" / "pause.c")
        return docker_build(HERE / "pause" / "Dockerfile", tag, Path(folder))


def build_kafka(tag: str) -> str:
    with tempfile.TemporaryDirectory(prefix="ordo-kafka-image-") as folder:
        context = Path(folder)
        (context / "libs").mkdir()
        for jar in jars.classpath().split(os.pathsep):
            shutil.copy2(jar, context / "libs" / Path(jar).name)
        (context / "base.properties").write_text("".join(f"{k}={v}\n" for k, v in BROKER_SETTINGS.items()))
        (context / "log4j2.yaml").write_text(_LOG4J2)
        shutil.copy2(HERE / "kafka" / "start", context / "start")
        return docker_build(HERE / "kafka" / "Dockerfile", tag, context, f"JAVA_IMAGE={JAVA_BASE}")


def load_into_node(tag: str) -> str:
    """The image in the node's containerd (``docker save | ctr images import``), skipped when the
    node already has this build of it."""
    marker = cache_dir() / "loaded" / tag.replace("/", "_").replace(":", "_")
    wanted = image_id(tag)
    assert wanted, f"no image {tag}"
    name = f"docker.io/library/{tag}" if "/" not in tag.split(":")[0] else tag
    if marker.exists() and marker.read_text() == wanted and name in run(*ctr("images", "ls", "-q")).split():
        return "cached"
    save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
    assert save.stdout is not None
    imported = subprocess.run(
        ctr("images", "import", "-"), stdin=save.stdout, capture_output=True, check=False
    )
    save.stdout.close()
    if save.wait() != 0 or imported.returncode != 0:
        raise RuntimeError(f"loading {tag} into the node failed: {imported.stderr.decode()[-2000:]}")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(wanted)
    return "loaded"


def build_all(images: Images, journal: Journal) -> None:
    """Every image, each a timed step."""
    for tag, packages in BASES.items():
        with journal.step(f"base image {tag}") as notes:
            notes.append(build_base(tag, packages))
    with journal.step(f"image {images.pause}") as notes:
        notes.append(build_pause(images.pause))
    with journal.step("wheelhouse (pip wheel of what the images install)") as notes:
        folder, how = wheelhouse()
        notes.append(how)
    with served(folder) as index:
        python = [f"PYTHON_IMAGE={PYTHON_BASE}", f"PIP_INDEX_URL={index}"]
        operator = ROOT / "operator" / "Dockerfile"
        with journal.step(f"image {images.operator} (operator/Dockerfile)") as notes:
            notes.append(docker_build(operator, images.operator, ROOT, *python))
        with journal.step(f"image {images.operator_next} (operator/Dockerfile, another build)") as notes:
            # the same Dockerfile, a distinct image (a label): what `helm upgrade` moves to
            notes.append(
                docker_build(operator, images.operator_next, ROOT, *python, label="ordo.dev/e2e=next")
            )
        with journal.step(f"image {images.app} (testbed/Dockerfile)") as notes:
            notes.append(docker_build(ROOT / "testbed" / "Dockerfile", images.app, ROOT, *python))
        with journal.step(f"image {images.spark} (spark_apps/Dockerfile, on {SPARK_BASE})") as notes:
            spark = [f"PYTHON_IMAGE={SPARK_BASE}", f"PIP_INDEX_URL={index}"]
            notes.append(docker_build(ROOT / "spark_apps" / "Dockerfile", images.spark, ROOT, *spark))
    with journal.step(f"image {images.kafka} (Apache Kafka {jars.KAFKA_VERSION}, Maven jars)") as notes:
        notes.append(build_kafka(images.kafka))


def load_all(images: Images, journal: Journal) -> None:
    with journal.step("images into the node's containerd (docker save | ctr images import)") as notes:
        notes += [f"{tag} {load_into_node(tag)}" for tag in images.all()]
