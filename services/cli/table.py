"""A tiny plain-text table formatter: left-aligned columns separated by two spaces, no dependencies."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, indent: str = "") -> str:
    """The table as text: a header line, then one line per row; trailing blanks trimmed."""
    cells = [[str(cell) for cell in headers], *([str(cell) for cell in row] for row in rows)]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    lines = []
    for row in cells:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append(indent + line.rstrip())
    return "\n".join(lines)
