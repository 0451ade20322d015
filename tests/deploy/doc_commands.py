"""The commands the documentation shows: every command of its shell code blocks, and the inline
code spans that are commands (``ordo status``) or chart values (``--set memberRbac.create=true``),
split into words as a POSIX shell splits them."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

SHELL_FENCES = {"sh", "bash", "shell", "console", "shell-session"}
# An inline span is a command when it starts with one of these programs and a space
PROGRAMS = ("ordo", "kubectl", "helm", "make", "pip", "pip3", "python", "python3", "docker", "spark-submit")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w-]*)")
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# a chart value as the prose writes it: `rbac.scope=namespace`, `--set memberRbac.create=true`
_VALUE = re.compile(r"^(?:--set(?:-string)?[ =])?([A-Za-z]\w*)(?:\.[\w\\.]+)*=\S+$")
_OPERATORS = {"&&", "||", ";"}


@dataclass(frozen=True)
class DocCommand:
    """One command as a reader would type it, and where the documentation shows it."""

    file: str  # relative to the repository
    line: int
    text: str  # as written (continuation lines joined)
    inline: bool  # an inline code span of the prose, not a line of a shell block

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def argv(self) -> list[str]:
        """The words a shell passes to the program (quotes and escapes resolved, comments gone)."""
        return shell_words(self.text)


def strip_comment(line: str) -> str:
    """``line`` without its shell comment: a ``#`` outside quotes that starts a word."""
    quote, escaped = "", False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def shell_words(text: str) -> list[str]:
    """The words of one simple command as ``sh`` splits them. Lists (``a && b``), pipes and
    redirections raise ValueError: one command per line keeps each one checkable."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    words = list(lexer)
    operators = [w for w in words if w and all(c in "();<>|&" for c in w)]
    if operators:
        raise ValueError(f"{text!r}: shell operators {operators}; write one command per line")
    return words


def logical_lines(block: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A shell block's commands: comments removed, backslash-newline continuations joined, and when
    the block shows a session (``$ `` prompts) only the prompted lines (the rest is output)."""
    prompted = any(text.lstrip().startswith("$ ") for _, text in block)
    commands: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in block:
        if pending is None:
            if prompted:
                if not raw.lstrip().startswith("$ "):
                    continue
                raw = raw.lstrip()[2:]
            pending = (number, "")
        text = strip_comment(raw)
        trailing = len(text) - len(text.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the last one escapes the newline
            pending = (pending[0], pending[1] + text[:-1])
            continue
        joined = (pending[0], (pending[1] + text).strip())
        pending = None
        if joined[1]:
            commands.extend(_split_lists(*joined))
    if pending is not None and pending[1].strip():
        commands.append((pending[0], pending[1].strip()))
    return commands


def _split_lists(number: int, text: str) -> list[tuple[int, str]]:
    """``a && b`` as two commands (the shell runs both when all goes well)."""
    lexer = shlex.shlex(text, posix=False, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    parts: list[str] = []
    current: list[str] = []
    for word in lexer:
        if word in _OPERATORS:
            parts.append(" ".join(current))
            current = []
        else:
            current.append(word)
    parts.append(" ".join(current))
    if len(parts) == 1:
        return [(number, text)]
    return [(number, part) for part in parts if part]


def is_command_span(span: str, chart_values: set[str]) -> bool:
    """An inline span worth checking: a command, or a value of the chart (first key one of
    ``chart_values``; ``isolation.level=read_committed`` is a Kafka setting, not the chart's)."""
    if span.startswith(tuple(p + " " for p in PROGRAMS)):
        return True
    value = _VALUE.match(span)
    return value is not None and value.group(1) in chart_values


def documented_commands(root: Path, files: list[str], chart_values: set[str]) -> list[DocCommand]:
    """Every shell-block command and every command-like inline span of ``files``, in order."""
    found: list[DocCommand] = []
    for name in files:
        for start, language, lines in _segments((root / name).read_text()):
            if language is None:  # prose: a span may wrap onto the next line
                text = "\n".join(lines)
                for span in _SPAN.finditer(text):
                    words = " ".join(span.group(1).split())
                    if is_command_span(words, chart_values):
                        number = start + text.count("\n", 0, span.start())
                        found.append(DocCommand(name, number, words, True))
            elif language in SHELL_FENCES:
                block = list(enumerate(lines, start=start))
                found.extend(DocCommand(name, n, command, False) for n, command in logical_lines(block))
    return found


def _segments(markdown: str) -> list[tuple[int, str | None, list[str]]]:
    """(first line number, fence language or None for prose, lines) in order."""
    segments: list[tuple[int, str | None, list[str]]] = []
    fence, language, lines, start = None, None, list[str](), 1
    for number, line in enumerate(markdown.splitlines(), start=1):
        opening = _FENCE.match(line)
        if fence is None and opening:
            segments.append((start, None, lines))
            fence, language, lines, start = opening.group(2), opening.group(3).lower(), [], number + 1
        elif fence is not None and line.strip() and line.strip() == fence[0] * len(line.strip()):
            segments.append((start, language, lines))
            fence, language, lines, start = None, None, [], number + 1
        else:
            lines.append(line)
    segments.append((start, language, lines))
    return segments
