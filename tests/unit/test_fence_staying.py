"""Keys that stay are never stalled (issue 43): the rule ``ordo.fence.staying``/``parks``.

A simulation of one topic's logs through an expansion, driven by the rule: records before the
fence go by the old count, records during an acknowledged fence either go at once (staying) or
wait in order (parked), the thresholds are read at any moment of the fence, and the fence ends
published (parked records by the new count, then everything after) or aborted (by the old).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from ordo.fence import LeaseState, TopicFence, parks, staying, staying_writable
from ordo.partitioners import murmur2, to_positive

KEYS = [b"k%d" % i for i in range(40)] + [None]


def _hash(key: bytes | None) -> int | None:
    return None if key is None else to_positive(murmur2(key))


@dataclass
class Topic:
    """Partitions as lists of (key, seq), and the thresholds once read."""

    logs: dict[int, list[tuple[bytes | None, int]]] = field(default_factory=dict)
    thresholds: dict[int, int] = field(default_factory=dict)

    def write(self, partition: int, key: bytes | None, seq: int) -> None:
        self.logs.setdefault(partition, []).append((key, seq))


@dataclass
class Run:
    old: int
    new: int
    before: list[bytes | None]
    during: list[bytes | None]
    threshold_at: int
    published: bool
    after: list[bytes | None]


@st.composite
def runs(draw: st.DrawFn) -> Run:
    old = draw(st.integers(1, 12))
    new = draw(st.integers(old + 1, 40))
    keys = st.lists(st.sampled_from(KEYS), max_size=60)
    during = draw(keys)
    return Run(
        old,
        new,
        draw(keys),
        during,
        draw(st.integers(0, len(during))),
        draw(st.booleans()),
        draw(keys),
    )


def _simulate(run: Run) -> tuple[Topic, dict[bytes | None, list[int]], list[tuple[int, bytes | None]]]:
    """What lands where, the per-key sequence produced, and the (partition, key) of each record
    written during the fence."""
    topic = Topic()
    produced: dict[bytes | None, list[int]] = {}
    rotation = 0  # keyless records: any partition of the count in force

    def place(key: bytes | None, count: int) -> int:
        nonlocal rotation
        h = _hash(key)
        rotation += 1
        return rotation % count if h is None else h % count

    def produce(key: bytes | None, count: int) -> tuple[int, int]:
        seq = len(produced.setdefault(key, []))
        produced[key].append(seq)
        return seq, place(key, count)

    for key in run.before:
        seq, p = produce(key, run.old)
        topic.write(p, key, seq)
    parked: list[tuple[bytes | None, int]] = []
    written_during: list[tuple[int, bytes | None]] = []
    for i, key in enumerate(run.during):
        if i == run.threshold_at:
            topic.thresholds = {p: len(topic.logs.get(p, [])) for p in range(run.old)}
        seq = len(produced.setdefault(key, []))
        produced[key].append(seq)
        if parks(_hash(key), run.old, run.new):
            parked.append((key, seq))
        else:
            p = place(key, run.old)
            topic.write(p, key, seq)
            written_during.append((p, key))
    if run.threshold_at == len(run.during):
        topic.thresholds = {p: len(topic.logs.get(p, [])) for p in range(run.old)}
    final = run.new if run.published else run.old
    for key, seq in parked:  # released in order before anything new of the topic
        topic.write(place(key, final), key, seq)
    for key in run.after:
        seq, p = produce(key, final)
        topic.write(p, key, seq)
    return topic, produced, written_during


def _epoch(run: Run, topic: Topic, partition: int, offset: int) -> int:
    if not run.published:
        return 0
    if partition >= run.old:
        return 1
    return 0 if offset < topic.thresholds[partition] else 1


@given(runs())
def test_a_record_written_during_the_fence_is_where_both_counts_put_it(run: Run) -> None:
    _topic, _produced, written = _simulate(run)
    for partition, key in written:
        assert partition < run.old  # an old partition: it exists under the new count too
        h = _hash(key)
        if h is not None:
            assert partition == h % run.old == h % run.new


@given(runs())
def test_nothing_lands_misplaced_and_every_key_keeps_its_order(run: Run) -> None:
    topic, produced, _written = _simulate(run)
    seen: dict[bytes | None, list[tuple[int, int, int]]] = {}
    for partition, log in topic.logs.items():
        for offset, (key, seq) in enumerate(log):
            epoch = _epoch(run, topic, partition, offset)
            h = _hash(key)
            if h is not None:  # each keyed record where its epoch's count puts it: none misplaced
                assert partition == h % (run.new if epoch else run.old)
            seen.setdefault(key, []).append((epoch, offset, seq))
    for key, records in seen.items():
        assert sorted(s for _e, _o, s in records) == produced[key]  # none lost, none doubled
        if key is not None:  # a key's records in storage order (epoch, then offset) are in order
            in_storage = [s for _e, _o, s in sorted(records)]
            assert in_storage == sorted(in_storage)


@given(st.integers(1, 64), st.integers(1, 200), st.integers(0, 2**31 - 1))
def test_a_key_parks_exactly_when_the_counts_place_it_apart(old: int, extra: int, h: int) -> None:
    new = old + extra
    assert parks(h, old, new) == (h % old != h % new)
    assert staying(None, old, new)


def test_doubling_keeps_half_the_keys_in_place() -> None:
    hashes = [_hash(b"key-%d" % i) for i in range(4000)]
    stay = sum(staying(h, 4, 8) for h in hashes)
    assert 1800 < stay < 2200


def test_staying_records_go_only_once_the_fence_is_acknowledged_and_nothing_else_holds() -> None:
    lease = LeaseState(until=10.0)
    fenced = TopicFence(blocked=True, epoch=2, partitions=8)
    assert not staying_writable(fenced, lease, closed=False)  # not acknowledged yet
    assert staying_writable(fenced, lease, closed=False, before_ack=True)  # own transactions
    acked = fenced.acknowledged(2)
    assert staying_writable(acked, lease, closed=False)
    assert not staying_writable(acked, lease.stop(), closed=False)
    assert not staying_writable(acked, lease, closed=True)
    assert not staying_writable(acked, lease, closed=False, held=True)
    assert not staying_writable(TopicFence.unreported().acknowledged(5), lease, closed=False)  # no count
    assert not staying_writable(TopicFence(), lease, closed=False)  # not fenced: writable serves it


def test_a_fence_waits_for_the_commit_of_moved_records_only() -> None:
    """Journal.holds with a fence's counts: what the acknowledgement of a fence waits for."""
    from ordo.own_transactions import Journal

    moved = next(b"m%d" % i for i in range(100) if parks(_hash(b"m%d" % i), 4, 8))
    stays = next(b"s%d" % i for i in range(100) if staying(_hash(b"s%d" % i), 4, 8))
    journal = Journal()
    journal.entries.extend(("t", b"v", stays))  # the C path's
    journal.record(("t", b"v", None, None, None, 0, None))  # keyless
    journal.pending.extend(("t", b"v", stays, 1))
    fences = {"t": (4, 8)}
    assert journal.holds({"t"}) and not journal.holds({"t"}, fences)
    journal.record(("t", b"v", stays, 2, None, 0, None))  # a partition of its own: always waited for
    assert journal.holds({"t"}, fences)
    journal.committed()
    journal.pending.extend(("t", b"v", moved, 0))
    assert journal.holds({"t"}, fences) and not journal.holds({"u"}, fences)
