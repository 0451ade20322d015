"""The Apache Kafka broker's class path, resolved by Maven once per machine, and a formatted
storage template (``kafka-storage format`` runs a JVM: ~1 s, paid once, then two files copied)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from ..cache import cache_root

KAFKA_VERSION = "4.3.1"
POM = Path(__file__).with_name("pom.xml")
JAVA_ENV = "ORDO_JAVA"


class KafkaSetupError(RuntimeError):
    """Java or Maven is missing, or the broker's jars cannot be resolved: says what to install."""


def cache_dir() -> Path:
    path = cache_root() / f"kafka-{KAFKA_VERSION}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def java() -> str:
    found = os.environ.get(JAVA_ENV) or shutil.which("java")
    if not found:
        raise KafkaSetupError("the Kafka testbed needs Java 17+: apt-get install openjdk-17-jre-headless")
    return found


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One resolver at a time per machine (parallel test sessions share the cache)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def classpath() -> str:
    """The broker's class path; the first call on a machine runs Maven (~10 s with a warm ~/.m2)."""
    cached = cache_dir() / "classpath.txt"
    with _locked(cache_dir() / ".lock"):
        if not _usable(cached):
            _resolve(cached)
    return cached.read_text().strip()


def _usable(cached: Path) -> bool:
    if not cached.exists() or cached.stat().st_mtime < POM.stat().st_mtime:
        return False
    entries = cached.read_text().strip().split(os.pathsep)
    return bool(entries) and all(os.path.exists(entry) for entry in entries)


def _resolve(target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError("the Kafka testbed resolves its jars with Maven: apt-get install maven")
    partial = target.with_suffix(".partial")
    result = subprocess.run(
        [mvn, "-q", "-B", "-f", str(POM), "dependency:build-classpath", f"-Dmdep.outputFile={partial}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 or not partial.exists():
        tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
        raise KafkaSetupError(f"Maven could not resolve Apache Kafka {KAFKA_VERSION}: " + " | ".join(tail))
    partial.replace(target)


def formatted_template(properties: Path, node_id: int = 1) -> Path:
    """A storage directory formatted once per node id (``meta.properties`` + ``bootstrap.checkpoint``)
    with a static controller quorum, so no listener address is written into it: every cluster of
    the testbed has the same id, and each node its own directory id."""
    template = cache_dir() / ("formatted" if node_id == 1 else f"formatted-node-{node_id}")
    path = classpath()  # before the lock: flock is per open file, so taking it twice deadlocks
    with _locked(cache_dir() / ".lock"):
        if not (template / "meta.properties").exists():
            partial = cache_dir() / f"formatting-{node_id}"
            shutil.rmtree(partial, ignore_errors=True)
            text = properties.read_text()
            config = cache_dir() / f"format-{node_id}.properties"
            config.write_text(_with_log_dir(text, partial))
            result = subprocess.run(
                [java(), "-cp", path, "kafka.tools.StorageTool", "format",
                 "--cluster-id", "b3Jkby10ZXN0YmVkLTAwMQ", "--config", str(config)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if result.returncode != 0:
                raise KafkaSetupError(f"kafka-storage format failed: {result.stderr.strip()[-500:]}")
            shutil.rmtree(template, ignore_errors=True)
            partial.replace(template)
    return template


def _with_log_dir(properties: str, log_dir: Path) -> str:
    lines = [line for line in properties.splitlines() if not line.startswith("log.dirs=")]
    return "\n".join([*lines, f"log.dirs={log_dir}", ""])


def main() -> None:
    """Resolve now: ``make`` does, so a missing tool or an unreachable Maven Central shows
    before any test starts."""
    import time

    began = time.monotonic()
    entries = classpath().split(os.pathsep)
    took = time.monotonic() - began
    print(f"Apache Kafka {KAFKA_VERSION}: {len(entries)} jars in {cache_dir()} ({took:.1f} s)")
