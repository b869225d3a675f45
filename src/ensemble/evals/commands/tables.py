"""Tables that fit the terminal without cutting a number.

Rich shrinks a table wider than the console by wrapping or ellipsising its cells, which cuts
numbers (`[+0.20…`) and splits intervals over two lines. Here every cell keeps its whole text:
headers may wrap at spaces, and when the table is still too wide the optional columns are left
out, least important first, and named in a note. Piped output is laid out for 80 columns
(rich's default without a terminal), or for $COLUMNS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Column", "console", "dropped_note", "fit_table"]


@dataclass(frozen=True)
class Column:
    """A column: its header, and `drop` (lower: left out first; None: always kept)."""

    header: str
    drop: int | None = None
    justify: str = "right"


def console() -> Any:
    """The console the commands print to (80 columns when piped, unless $COLUMNS says)."""
    from rich.console import Console

    return Console()


def _width(col: Column, cells: Sequence[str], *, compact: bool) -> int:
    head = max((len(w) for w in col.header.split()), default=0) if compact else len(col.header)
    return max([head, *(len(c) for c in cells)])


def _build(columns: Sequence[Column], rows: Sequence[Sequence[str]], keep: list[int],
           need: dict[int, int], title: str | None, caption: str | None,
           sections: Sequence[bool] | None) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, padding=(0, 1),
                  show_edge=False, pad_edge=False)
    for i in keep:
        table.add_column(columns[i].header, justify=columns[i].justify,  # type: ignore[arg-type]
                         min_width=need[i], no_wrap=False, overflow="fold")
    for j, r in enumerate(rows):
        table.add_row(*(r[i] for i in keep),
                      end_section=bool(sections[j]) if sections is not None else False)
    return table


def _natural_width(table: Any) -> int:
    """The width the table takes given all the room it wants."""
    from rich.console import Console

    return int(Console(width=10_000).measure(table).maximum)


def fit_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int,
              title: str | None = None, caption: str | None = None,
              sections: Sequence[bool] | None = None) -> tuple[Any, list[str]]:
    """A rich Table of `rows` no wider than `width`, and the headers left out to fit: headers
    wrap at spaces first, then the optional columns go, least important first."""
    keep = list(range(len(columns)))
    need = {i: _width(columns[i], [r[i] for r in rows], compact=False) for i in keep}
    table = _build(columns, rows, keep, need, None, None, sections)
    if _natural_width(table) > width:
        need = {i: _width(columns[i], [r[i] for r in rows], compact=True) for i in keep}
    order = sorted((i for i, c in enumerate(columns) if c.drop is not None),
                   key=lambda i: columns[i].drop or 0)
    dropped: list[str] = []
    while _natural_width(_build(columns, rows, keep, need, None, None, sections)) > width \
            and order:
        i = order.pop(0)
        keep.remove(i)
        dropped.append(columns[i].header)
    return _build(columns, rows, keep, need, title, caption, sections), dropped


def dropped_note(dropped: list[str], width: int) -> str | None:
    """The note naming the columns left out, or None."""
    if not dropped:
        return None
    return (f"[dim]left out to fit {width} columns: " + "; ".join(dropped)
            + " (a wider terminal, or --json, shows them)[/]")
