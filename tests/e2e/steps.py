"""What each step of ``make e2e`` took, and the verifiers' verdicts: printed as they happen (past
pytest's capture) and again in the summary at the end (``conftest.pytest_terminal_summary``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest


@dataclass
class Journal:
    steps: list[tuple[str, float, str]] = field(default_factory=list)
    """(step, seconds, note: "built", "cached", ...)."""
    verdicts: list[tuple[str, str]] = field(default_factory=list)
    config: pytest.Config | None = None

    def say(self, line: str) -> None:
        """A line on the terminal now, whatever pytest captures."""
        if self.config is None:
            print(line, flush=True)
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or capture is None:
            print(line, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    @contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        """Time a step; the block may append a note (e.g. "cached") to the list it gets."""
        notes: list[str] = []
        began = time.monotonic()
        self.say(f"[e2e] {name} ...")
        try:
            yield notes
        finally:
            took = time.monotonic() - began
            note = ", ".join(notes)
            self.steps.append((name, took, note))
            self.say(f"[e2e] {name}: {took:.1f} s" + (f" ({note})" if note else ""))

    def verdict(self, what: str, text: str) -> None:
        self.verdicts.append((what, text))
        self.say(f"[e2e] verdict, {what}: {text}")

    def summary(self) -> list[str]:
        lines = ["e2e steps (wall time):"]
        lines += [
            f"  {took:8.1f} s  {name}" + (f" ({note})" if note else "") for name, took, note in self.steps
        ]
        lines.append(f"  {sum(t for _, t, _ in self.steps):8.1f} s  in all")
        if self.verdicts:
            lines.append("verifier verdicts:")
            lines += [f"  {what}: {text}" for what, text in self.verdicts]
        return lines


JOURNAL = Journal()
