"""Timelines as PNGs next to the report (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = ["HERE", "rates", "timeline_png"]

HERE = Path(__file__).parent


def rates(times: Iterable[float], start: float, end: float, bucket: float = 0.1) -> list[tuple[float, float]]:
    """Events per second in ``bucket``-second bins from ``start`` to ``end`` (x relative to start)."""
    bins = [0] * max(1, int((end - start) / bucket) + 1)
    for t in times:
        if start <= t < end:
            bins[int((t - start) / bucket)] += 1
    return [(i * bucket, n / bucket) for i, n in enumerate(bins)]


def timeline_png(
    path: Path,
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    marks: Sequence[tuple[float, str]] = (),
    spans: Sequence[tuple[float, float, str]] = (),
) -> Path:
    """Plot ``series`` (label -> (x, y) points), vertical ``marks`` and shaded ``spans``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 4.5))
    for label, points in series.items():
        axes.plot([x for x, _ in points], [y for _, y in points], label=label, linewidth=1.1)
    top = axes.get_ylim()[1]
    for x, text in marks:
        axes.axvline(x, color="grey", linestyle="--", linewidth=0.8)
        axes.text(x, top * 0.97, f" {text}", fontsize=7, color="grey", va="top", rotation=90)
    for i, (begin, end, text) in enumerate(spans):
        axes.axvspan(begin, end, color="tab:red", alpha=0.15, label=text if i == 0 else None)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
