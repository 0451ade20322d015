"""ordo-kafka's optional parts and the error that names the extra a missing one comes with.

A consumer-only pod installs ``ordo-kafka`` alone: OrderedProducer, GatedConsumer, AsyncConsumer
and the verifier need only confluent-kafka and pydantic. What needs more comes with an extra
(pyproject.toml): ``group`` (GroupProducer's Kubernetes client), ``cli`` (the ``ordo`` command's
``status`` and ``crds``: the Kubernetes client, rich, pyyaml), ``metrics``
(prometheus-client; without it ``ordo.metrics`` is a no-op).
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

__all__ = ["DISTRIBUTION", "MissingExtraError", "install_hint", "missing_extra", "require_extra"]

DISTRIBUTION = "ordo-kafka"
# module -> the distribution that installs it, where the names differ
_DISTRIBUTIONS = {"yaml": "pyyaml", "prometheus_client": "prometheus-client"}


class MissingExtraError(ImportError):
    """A part of ordo was used whose extra is not installed; the message says how to install it."""


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` (quoted for a shell: the brackets are glob characters)."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra(error: ImportError, extra: str, what: str) -> MissingExtraError:
    """The ImportError to raise for ``error`` (a module of ``extra`` not installed) when ``what``
    is used: it names the module and the extra that brings it."""
    module = (error.name or "").split(".")[0]
    package = _DISTRIBUTIONS.get(module, module) or "a package"
    return MissingExtraError(
        f"{what} needs {package}, which comes with the extra {extra!r}: {install_hint(extra)}",
        name=error.name,
    )


def require_extra(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or an ImportError naming ``extra`` when it is not installed. A module
    that is installed but fails to import (one of its own dependencies missing) raises as it is."""
    try:
        return import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module.split(".")[0] and error.name != module:
            raise
        raise missing_extra(error, extra, what) from error
