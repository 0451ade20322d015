import pytest

from ordo.cli import main as ordo


def test_demo_shows_the_gate_keeping_order_where_a_plain_consumer_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ordo(["sandbox", "--records", "800", "--keys", "50"]) == 0
    out = capsys.readouterr().out
    gated = next(line for line in out.splitlines() if "GatedConsumer" in line)
    plain = next(line for line in out.splitlines() if "plain consumer" in line)
    assert gated.split("│")[3].strip() == "0"
    assert int(plain.split("│")[3].strip()) > 0
