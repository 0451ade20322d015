from pathlib import Path

from ordo_sandbox.scenario.verify import read_delivered, verify


def _log(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_clean_run(tmp_path: Path) -> None:
    delivered = read_delivered([_log(tmp_path / "d0", ["a 0", "a 1", "b 0"])])
    a = _log(tmp_path / "c0.log", ["1 a 0 0 0", "3 a 1 0 1"])
    b = _log(tmp_path / "c1.log", ["2 b 0 1 0"])
    verdict = verify(delivered, [a, b])
    assert verdict.ok and (verdict.delivered, verdict.processed, verdict.duplicates) == (3, 3, 0)


def test_reordering_across_consumers_is_found_by_time(tmp_path: Path) -> None:
    delivered = {"a": 2}
    early = _log(tmp_path / "c0.log", ["5 a 0 0 0"])
    late = _log(tmp_path / "c1.log", ["4 a 1 2 0"])  # #1 processed before #0, by another consumer
    verdict = verify(delivered, [early, late])
    assert verdict.order_violations == 1 and not verdict.ok
    assert "a #0" in verdict.examples[0]


def test_redelivery_is_a_duplicate_not_a_violation_and_loss_is_counted(tmp_path: Path) -> None:
    delivered = {"a": 4}
    log = _log(
        tmp_path / "c0.log", ["1 a 0 0 0", "2 a 1 0 1", "3 a 0 0 0", "4 a 1 0 1", "5 a 2 0 2", "6 a 9"]
    )
    verdict = verify(delivered, [log])
    assert (verdict.duplicates, verdict.order_violations, verdict.lost) == (2, 0, 1)
    assert verdict.missing == [("a", 3)] and "never processed: a #3" in verdict.summary()


def test_the_verdict_names_the_first_orders_never_processed(tmp_path: Path) -> None:
    log = _log(tmp_path / "c0.log", ["1 b 1 0 0"])
    verdict = verify({"a": 8, "b": 3}, [log])
    assert verdict.lost == 10 and verdict.missing == [*(("a", n) for n in range(8)), ("b", 0), ("b", 2)]
    many = verify({"k": 30}, [log])
    assert many.lost == 30 and len(many.missing) == 10
