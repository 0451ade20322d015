"""produce()'s C path (ordo/_fastproduce.c): what it serves itself and what it hands to Python."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ordo._fastproduce import FastProduce, Lease  # built by `pip install -e .` (setup.py); CI has a compiler
from ordo.partitioners import murmur2_partition


class Recorder:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.fail = fail

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))
        if self.fail is not None:
            raise self.fail


Routes = dict[str, int | tuple[int, frozenset[int]] | tuple[int, frozenset[int], int]]


def held(until: float = float("inf")) -> Lease:
    lease = Lease()
    lease.until = until
    return lease


def make(
    routes: Routes | None = None, raw: Recorder | None = None, lease: Lease | None = None
) -> tuple[Any, Recorder, Recorder]:
    raw, slow = raw or Recorder(), Recorder()
    fast = FastProduce(routes if routes is not None else {"t": 4}, lease or held(), raw, slow)
    return fast, raw, slow


def test_once_the_lease_has_passed_every_call_goes_to_the_python_path() -> None:
    lease = held(time.monotonic() + 3600)
    fast, raw, slow = make(lease=lease)
    fast("t", b"v", b"k")
    lease.until = time.monotonic()  # the producer's session passed without a report arriving
    fast("t", b"v", b"k")
    assert len(raw.calls) == 1 and slow.calls == [(("t", b"v", b"k"), {})]
    assert Lease().until == 0.0  # a new lease holds nothing: no record before the first report


def test_an_open_route_goes_straight_to_the_producer_at_the_keys_murmur2_partition() -> None:
    fast, raw, slow = make()
    fast("t", b"v", key=b"k")
    fast("t", b"v", b"k")
    fast("t", value=b"v", key=b"k")
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"customer-12345", bytes(range(256))]
    for key in keys:  # every tail length of the hash, never seen before
        fast("t", b"v", key)
    expected = [("t", b"v", b"k", murmur2_partition(b"k", 4))] * 3
    expected += [("t", b"v", key, murmur2_partition(key, 4)) for key in keys]
    assert [args for args, _ in raw.calls] == expected and not slow.calls
    assert fast.fast_calls == 3 + len(keys)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("u", b"v"), {"key": b"k"}),  # no route: the topic is fenced, unstamped or unknown
        (("t", b"v"), {"key": "k"}),  # a str key: Python encodes it
        (("t", b"v"), {}),  # no key: round-robin in Python
        (("t", b"v"), {"key": b"k", "partition": 1}),
        (("t", b"v"), {"key": b"k", "on_delivery": print}),
        (("t", b"v"), {"key": b"k", "headers": [("h", b"1")]}),
        (("t", b"v", b"k", 2), {}),
        ((), {"topic": "t", "key": b"k"}),
    ],
)
def test_everything_else_goes_to_the_python_path_unchanged(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    fast, raw, slow = make()
    fast(*args, **kwargs)
    assert slow.calls == [(args, kwargs)] and not raw.calls and fast.fast_calls == 0


def test_a_partition_still_to_stamp_goes_to_the_python_path_and_the_others_to_the_producer() -> None:
    """A route of (count, unstamped): a key whose partition has not had its stamped first record
    of the epoch goes to Python (which stamps it); every other key is served in C."""
    keys = [f"k{i}".encode() for i in range(40)]
    unstamped = frozenset({murmur2_partition(keys[0], 4)})
    fast, raw, slow = make({"t": (4, unstamped)})
    for key in keys:
        fast("t", b"v", key)
    stamped = [key for key in keys if murmur2_partition(key, 4) not in unstamped]
    assert 0 < len(stamped) < len(keys)
    assert [args for args, _ in raw.calls] == [("t", b"v", k, murmur2_partition(k, 4)) for k in stamped]
    assert [args for args, _ in slow.calls] == [("t", b"v", k) for k in keys if k not in stamped]
    assert fast.fast_calls == len(stamped)


def test_a_closed_route_is_seen_at_once() -> None:
    routes: Routes = {"t": 4}
    fast, raw, slow = make(routes)
    fast("t", b"v", key=b"k")
    del routes["t"]  # what a fence does, holding the GIL
    fast("t", b"v", key=b"k")
    assert len(raw.calls) == 1 and len(slow.calls) == 1


def test_an_error_from_the_producer_is_left_to_the_python_path() -> None:
    """Nothing was queued when produce() raised (a full queue, a partition librdkafka does not
    know yet): the Python path retries it or raises what the caller must see."""
    fast, raw, slow = make(raw=Recorder(BufferError("queue full")))
    fast("t", b"v", key=b"k")
    assert len(raw.calls) == 1 and slow.calls == [(("t", b"v"), {"key": b"k"})]


def test_during_a_fence_staying_keys_go_to_the_producer_and_moved_keys_to_the_python_path() -> None:
    keys = [b"key-%d" % i for i in range(400)]
    fast, raw, slow = make({"t": (4, frozenset({1}), 8)})  # fencing 4 -> 8, partition 1 still to stamp
    for key in keys:
        fast("t", b"v", key)
    staying = [k for k in keys if murmur2_partition(k, 4) == murmur2_partition(k, 8)]
    here = [k for k in staying if murmur2_partition(k, 4) != 1]
    assert [c[0] for c in raw.calls] == [("t", b"v", k, murmur2_partition(k, 4)) for k in here]
    assert [c[0][2] for c in slow.calls] == [k for k in keys if k not in here]  # moved keys: parked there
    assert 0 < len(here) < len(staying) < len(keys)


@pytest.mark.parametrize("route", [(4, frozenset(), 4), (4, frozenset(), 2), (4, frozenset(), "8")])
def test_a_fence_route_that_does_not_grow_sends_everything_to_the_python_path(route: Any) -> None:
    fast, raw, slow = make({"t": route})
    for i in range(50):
        fast("t", b"v", b"k%d" % i)
    assert raw.calls == [] and len(slow.calls) == 50
