"""The benchmark report's verdict: a target is met or missed only when every round agrees."""

import threading
import time

import pytest
from benchmarks._result import Result, Stopwatch, alternate, per_record


@pytest.mark.parametrize(
    ("result", "verdict"),
    [
        (Result.paired("p", [9.2, 9.5, 10], [10, 10, 10], "rec/s", ">= 0.9"), "met"),
        (Result.paired("p", [8.0, 9.5, 10], [10, 10, 10], "rec/s", ">= 0.9"), "unclear"),
        (Result.paired("p", [8.0, 8.5, 8.9], [10, 10, 10], "rec/s", ">= 0.9"), "missed"),
        (Result("r", 3.4, 3.5, "rec/s", "ratio >= 0.8"), "met"),
        (Result.absolute("stall", 0.52, "s", "<= 1 s"), "met"),
        (Result.absolute("hang", 5.4, "s", "<= 5 s (session 3 s)"), "missed"),
        (Result("dupes", 0, 0, "records", "ordo 0"), "-"),
        (Result("info", 1, 2, "rec/s"), "-"),
    ],
)
def test_verdict(result: Result, verdict: str) -> None:
    assert result.verdict == verdict


def test_growth_is_the_exponent_of_a_power_law() -> None:
    from benchmarks.scale_bench import growth

    sizes = [10, 100, 1000]
    assert abs(growth(sizes, [3 * n for n in sizes]) - 1) < 1e-9
    assert abs(growth(sizes, [n**2 for n in sizes]) - 2) < 1e-9
    assert abs(growth(sizes, [5.0, 5.0, 5.0])) < 1e-9


def test_cpu_per_record_is_each_sides_median_over_the_rounds() -> None:
    result = Result.paired(
        "p", [9, 10, 11], [10, 10, 10], "rec/s", ">= 0.9", ([3.0, 9.0, 4.0], [2.0, 2.5, 8.0])
    )
    assert result.cpu_us == (4.0, 2.5)
    assert result.cpu_text == "4.0 / 2.5 (+1.5)"
    assert Result("info", 1, 2, "rec/s").cpu_text == "-"


def test_the_stopwatch_counts_cpu_of_every_thread() -> None:
    clock = Stopwatch()

    def spin() -> None:  # 50 ms of CPU on another thread
        deadline = time.thread_time() + 0.05
        while time.thread_time() < deadline:
            pass

    worker = threading.Thread(target=spin)
    worker.start()
    worker.join()
    wall, cpu = clock.elapsed()
    assert cpu >= 0.05 and wall > 0
    assert per_record((wall, cpu), 1_000)[1] >= 50


def test_alternate_takes_turns_and_swaps_the_first_side_per_pair() -> None:
    calls: list[tuple[str, int]] = []
    sides = {name: (lambda block, name=name: calls.append((name, block))) for name in ("a", "b")}
    spent = alternate(3, sides, first=True)
    assert calls == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2)]
    calls.clear()
    alternate(2, sides, first=False)
    assert calls == [("b", 0), ("a", 0), ("a", 1), ("b", 1)]
    assert set(spent) == {"a", "b"} and all(wall >= 0 and cpu >= 0 for wall, cpu in spent.values())
    assert per_record((2.0, 0.5), 1_000) == (500.0, 500.0)


def test_the_pre_registration_benchmark_builds_its_clients_from_bench_eos_s_own_options() -> None:
    """It drives ``ordo bench eos``'s loop with options of its own: an option added to the command
    (``--command-config`` once) must not break ``make bench``."""
    from benchmarks.pre_registration_bench import _args

    from ordo_testbed.bench.eos import client_configs

    args = _args("127.0.0.1:9092", "t")
    configs = client_configs(args, args.bootstrap, "run")
    assert configs.producer["bootstrap.servers"] == "127.0.0.1:9092"
    assert configs.producer["transactional.id"] == "ordo-eos-bench-run"
