"""Which C accelerators serve in this process (``ordo.accelerators()``, ``ordo --version``)."""

from __future__ import annotations

from importlib import import_module

__all__ = ["accelerators"]


def accelerators() -> dict[str, bool]:
    """Whether each C accelerator serves in this process: ``ordo._fastproduce`` when it loads,
    ``ordo._fastscan`` when it loads and reads confluent-kafka's messages right (GatedConsumer
    checks that before using it). Loads both (``_fastscan`` loads confluent-kafka)."""
    serving: dict[str, bool] = {}
    try:
        import_module("ordo._fastproduce")
    except ImportError:
        serving["ordo._fastproduce"] = False
    else:
        serving["ordo._fastproduce"] = True
    from . import _batch_scan

    serving["ordo._fastscan"] = _batch_scan.scan is not _batch_scan.scan_python
    return serving
