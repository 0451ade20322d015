"""``ordo status``'s gates and tables, ``ordo verify``/``status``/``bench`` errors: one line, exit 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ordo.api import OrderedTopicExpansion, ProducerGroup
from ordo.cli import main as ordo
from ordo.cli.status import GateWait, gates, render
from ordo.epochs import EpochHistory
from ordo_testbed.bench import checkout as harness_bench

HISTORY_JSON = {
    "topic": "orders",
    "epochs": [
        {"epoch": 0, "partitions": 4, "state": "active", "thresholds": {}, "prior": {}},
        {
            "epoch": 1,
            "partitions": 8,
            "state": "active",
            "from_partitions": 4,
            "thresholds": {"0": 10, "1": 11, "2": 12, "3": 13},
            "prior": {"4": [0], "5": [1], "6": [2], "7": [3]},
        },
        {
            "epoch": 2,
            "partitions": 12,
            "state": "fencing",
            "from_partitions": 8,
            "thresholds": {},
            "prior": {},
        },
    ],
}
HISTORY = EpochHistory.model_validate(HISTORY_JSON)  # as written before the prior map was derived


def test_gates_list_every_active_epochs_prior_partitions_with_thresholds() -> None:
    found = gates(HISTORY)
    assert found[0] == GateWait("orders", 1, 4, 0, 10) and [g.partition for g in found] == [4, 5, 6, 7]
    assert all(g.passed is None for g in found)


def test_gates_say_whether_a_consumer_group_passed_them() -> None:
    passed = {g.partition: g.passed for g in gates(HISTORY, {0: 10, 1: 3, 2: 40})}
    assert passed == {4: True, 5: False, 6: True, 7: False}


def test_a_gate_waits_for_the_priors_of_its_priors_and_the_status_says_so() -> None:
    """Epoch 1 (3 -> 4 partitions) spreads every key of 0, 1, 2 over all four; epoch 2 (4 -> 8)
    moves partition 3's keys to 7. A key now in 7 may have records of epoch 0 in partition 0 that
    nothing has read yet: partition 3 reaching its threshold does not open 7's gate."""
    history = EpochHistory.model_validate({"topic": "t", "epochs": [
        {"epoch": 0, "partitions": 3, "state": "active"},
        {"epoch": 1, "partitions": 4, "state": "active", "from_partitions": 3,
         "thresholds": {"0": 10, "1": 11, "2": 12}},
        {"epoch": 2, "partitions": 8, "state": "active", "from_partitions": 4,
         "thresholds": {"0": 20, "1": 21, "2": 22, "3": 23}},
    ]})  # fmt: skip
    committed = {0: 5, 1: 21, 2: 22, 3: 23}  # partition 0 is behind epoch 1's threshold
    assert history.epochs[2].prior_of(7) == (3,)  # the direct prior set: the old status's only row
    assert committed[3] >= 23, "by the direct prior set alone the gate is passed"
    seven = [g for g in gates(history, committed) if (g.epoch, g.partition) == (2, 7)]
    assert [(g.prior, g.threshold, g.passed) for g in seven] == [
        (0, 10, False),
        (1, 11, True),
        (2, 12, True),
        (3, 23, True),
    ]
    console = Console(width=200, record=True)
    console.print(render({"topics": {"t": history}, "gates": seven}))
    rows = [line for line in console.export_text().splitlines() if "partition 0 up to 10" in line]
    cells = [cell.strip() for cell in rows[0].strip("│ ").split("│")]
    assert len(rows) == 1 and cells == ["t", "2", "7", "partition 0 up to 10", "no"]


def test_status_tables_show_groups_expansions_epochs_and_gates() -> None:
    group = {
        "metadata": {"namespace": "data", "name": "orders-cdc"},
        "spec": {"sourcePartitions": 3, "selector": {"matchLabels": {"app": "cdc"}}},
        "status": {
            "generation": 3,
            "members": [
                {"pod": "m-0", "partitions": [0, 1], "acked": 3},
                {"pod": "m-1", "partitions": [], "acked": 3},
            ],
            "unassigned": [2],
            "checkpoints": [{"partition": 0, "checkpoint": "2026-11-22T12:34:00"}],
        },
    }
    expansion = {
        "metadata": {"namespace": "data", "name": "grow"},
        "spec": {"topic": "orders", "partitions": 8},
        "status": {"phase": "Completed", "fromPartitions": 4, "epoch": 1, "durationSeconds": 1.25},
    }
    state = {
        "groups": [ProducerGroup.model_validate(group)],
        "expansions": [OrderedTopicExpansion.model_validate(expansion)],
        "topics": {"orders": HISTORY},
        "gates": gates(HISTORY, {0: 10}),
    }
    console = Console(width=200, record=True)
    console.print(render(state))
    text = console.export_text()
    for expected in ("data/orders-cdc", "0: 2026-11-22T12:34:00", "standby", "(unassigned)", "Completed",
                     "4 → 8", "1.2 s", "0@10", "fencing", "partition 0 up to 10", "yes", "no"):  # fmt: skip
        assert expected in text, expected


def _one_line_error(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("ORDO_KAFKA_BOOTSTRAP", raising=False)
    assert ordo(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_status_without_anything_to_read_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert "nothing to read" in _one_line_error(["status"], capsys, monkeypatch)
    # a KUBECONFIG naming no file is a mistake to fix, not a reason to leave the cluster out
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert "names no readable file" in _one_line_error(["status"], capsys, monkeypatch)
    missing = _one_line_error(["status", "--kubeconfig", str(tmp_path / "nope")], capsys, monkeypatch)
    assert "no such file" in missing


def test_status_with_an_unreachable_cluster_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import yaml

    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    err = _one_line_error(["status", "--kubeconfig", str(path)], capsys, monkeypatch)
    assert "cannot reach the Kubernetes API" in err


def test_verify_needs_a_bootstrap_and_an_existing_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert "--bootstrap" in _one_line_error(["verify", "--topic", "t"], capsys, monkeypatch)
    err = _one_line_error(
        ["verify", "--topic", "t", "--bootstrap", "127.0.0.1:1", "--source", str(tmp_path / "x.db")],
        capsys, monkeypatch,
    )  # fmt: skip
    assert "no such file" in err


def test_bench_lists_the_checkouts_benchmarks() -> None:
    names = harness_bench.checkout_benchmarks()
    assert "expansion" in names and "group" in names


def test_bench_outside_a_checkout_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness_bench, "_checkout", lambda: None)
    err = _one_line_error(["bench", "all"], capsys, monkeypatch)
    assert "from a checkout" in err


def test_bench_runs_the_benchmarks_package_of_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], Path]] = []

    def call(argv: list[str], cwd: Path) -> int:
        calls.append((argv, cwd))
        return 0

    monkeypatch.setattr("subprocess.call", call)
    assert ordo(["bench", "partitioner"]) == 0
    assert ordo(["bench", "all"]) == 0
    (one, root), (every, _) = calls
    assert one[1:] == ["-m", "benchmarks", "partitioner_bench"] and every[1:] == ["-m", "benchmarks"]
    assert (root / "benchmarks" / "__main__.py").is_file()


def test_harness_commands_without_the_harness_say_in_one_line_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ordo.cli.entry_points", lambda group: [])  # the SDK alone: no plugin
    commands = (["sandbox"], ["testbed", "up"], ["bench"], ["bench", "eos", "--testbed"],
                ["bench", "eos", "-X", "security.protocol=SSL", "--records", "5"])  # fmt: skip
    for command in commands:
        err = _one_line_error(command, capsys, monkeypatch)
        assert err.startswith(f"ordo {command[0]}: ") and "test harness (ordo-kafka-testbed)" in err, err
        assert "pip install -e ./testbed" in err
    with pytest.raises(SystemExit):  # the SDK's own commands still refuse what they do not take
        ordo(["verify", "--topic", "t", "--no-such-option"])
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


class _EntryPoint:
    """An entry point of the ``ordo.cli`` group as importlib.metadata gives it."""

    def __init__(self, name: str, register: Any) -> None:
        self.name, self.value, self.dist = name, f"tests:{name}", None
        self._register = register

    def load(self) -> Any:
        if isinstance(self._register, Exception):
            raise self._register  # as an import that fails
        return self._register


def test_a_plugins_commands_are_added_to_ordo(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def hello(args: Any) -> int:
        print("hello")
        return 0

    def register(commands: Any) -> None:
        commands.add_parser("hello").set_defaults(run=hello)

    monkeypatch.setattr("ordo.cli.entry_points", lambda group: [_EntryPoint("hello", register)])
    assert ordo(["hello"]) == 0
    assert capsys.readouterr() == ("hello\n", "")


def test_a_plugin_that_fails_is_a_warning_naming_it_and_the_others_still_serve(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(commands: Any) -> None:
        raise RuntimeError("registration went wrong")

    def works(commands: Any) -> None:
        commands.add_parser("works").set_defaults(run=lambda args: 0)

    plugins = [_EntryPoint("unimportable", ModuleNotFoundError("No module named 'gone'")),
               _EntryPoint("broken", broken), _EntryPoint("works", works)]  # fmt: skip
    monkeypatch.setattr("ordo.cli.entry_points", lambda group: plugins if group == "ordo.cli" else [])
    assert ordo(["works"]) == 0
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [
        "ordo: warning: command plugin broken (tests:broken) not loaded: "
        "RuntimeError: registration went wrong",
        "ordo: warning: command plugin unimportable (tests:unimportable) not loaded: "
        "ModuleNotFoundError: No module named 'gone'",
    ]


def test_the_harness_plugs_its_commands_in_through_entry_points() -> None:
    """Installed (make venv installs every distribution), the harness's plugins resolve and add
    ``ordo bench`` with eos, all and each benchmark of the checkout."""
    from importlib.metadata import entry_points

    from ordo.cli import PLUGINS_GROUP, build_parser

    plugins = {e.name: e.value for e in entry_points(group=PLUGINS_GROUP)}
    assert plugins["bench"] == "ordo_testbed.bench:register"
    assert {"testbed", "sandbox"} <= plugins.keys()
    args = build_parser().parse_args(["bench", "eos", "--testbed", "--records", "10"])
    assert args.run.__module__ == "ordo_testbed.bench.eos" and args.testbed and args.records == 10
    assert build_parser().parse_args(["bench", "group"]).benchmarks == ["group_bench"]


def test_status_says_what_it_found_nothing_of_instead_of_empty_tables() -> None:
    console = Console(width=200, record=True)
    console.print(render({"groups": [], "expansions": [], "topics": {}, "gates": []}, namespace="data"))
    text = console.export_text()
    assert "no ProducerGroups in namespace data" in text
    assert "no OrderedTopicExpansions in namespace data" in text
    assert "no topic has a history in the epoch log" in text
    console = Console(width=200, record=True)
    console.print(render({"groups": None, "topics": {}}, only_topics=["orders"]))
    text = console.export_text()
    assert "Kubernetes: not read" in text and "no history of orders" in text


def test_status_shows_an_active_epoch_followed_by_a_newer_active_one_as_superseded() -> None:
    epochs: list[dict[str, Any]] = HISTORY_JSON["epochs"]  # type: ignore[assignment]
    history = EpochHistory.model_validate({"topic": "orders", "epochs": epochs[:2]})
    console = Console(width=200, record=True)
    console.print(render({"topics": {"orders": history}, "gates": []}))
    text = console.export_text()
    assert "superseded by 1" in text
    assert text.count("active") == 1  # the newest only


def test_version_names_the_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        ordo(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("ordo ") and "(ordo-kafka)" in out and "unknown" not in out


def test_bench_eos_takes_bootstrap_under_both_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ordo.cli import build_parser

    for flag in ("--bootstrap", "--bootstrap-servers"):
        args = build_parser().parse_args(["bench", "eos", flag, "host:9092"])
        assert args.bootstrap == "host:9092"
    # an unreachable broker: one line naming it, at once
    err = _one_line_error(["bench", "eos", "--bootstrap", "127.0.0.1:1"], capsys, monkeypatch)
    assert "127.0.0.1:1" in err


def test_ordo_verify_says_how_far_a_long_read_is_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from ordo.cli.verify import say_progress
    from ordo.verify import ReadProgress

    say_progress(ReadProgress(records=1_000, offsets=2_000, offsets_to_read=8_000))
    said = capsys.readouterr()
    assert said.out == "" and said.err == "read 1,000 records, 2,000 of 8,000 offsets (25%)\n"
