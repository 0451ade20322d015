"""Throughput with the official client stays flat as objects accumulate (kmock's did not)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import kubernetes
import pytest

from ordo.testbed.kube import KubeEmulator

from .conftest import CRD_DIR, widget

BLOCK, BLOCKS = 1000, 5


@pytest.fixture
def emulator() -> Iterator[KubeEmulator]:
    with KubeEmulator(crd_dirs=[CRD_DIR]) as emu:
        yield emu


def test_startup_is_fast() -> None:
    start = time.perf_counter()
    with KubeEmulator(crd_dirs=[CRD_DIR]) as emu:
        started = time.perf_counter() - start
        assert emu.kubeconfig_path.exists()
    print(f"\nstart-up: {started * 1000:.0f} ms")
    assert started < 1.0


def test_create_get_rate_is_flat(emulator: KubeEmulator) -> None:
    api = kubernetes.config.new_client_from_config(str(emulator.kubeconfig_path))
    co = kubernetes.client.CustomObjectsApi(api)
    rates = []
    for block in range(BLOCKS):
        start = time.perf_counter()
        for i in range(block * BLOCK, (block + 1) * BLOCK):
            co.create_namespaced_custom_object(
                "testbed.ordo.dev", "v1", "default", "widgets", widget(f"w{i}")
            )
            co.get_namespaced_custom_object("testbed.ordo.dev", "v1", "default", "widgets", f"w{i}")
        rates.append(BLOCK / (time.perf_counter() - start))
    api.close()
    print("\ncreate+get/s per block of", BLOCK, "objects:", ", ".join(f"{r:.0f}" for r in rates))
    assert min(rates) > 30  # generous floor: the target is >= 100/s on a quiet machine
    assert rates[-1] > rates[0] / 3  # flat, not degrading with the number of objects
