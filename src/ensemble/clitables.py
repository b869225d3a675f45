"""Tables that fit the terminal without cutting a number or an id: the one table helper of
every command.

Rich shrinks a table wider than the console by wrapping or ellipsising its cells, which cuts
numbers (`[+0.20…`), ids (`batch_si…`) and splits intervals over two lines. Here every cell
keeps its whole text, and the widths are chosen here, not by rich. To fit, in this order:
headers wrap at spaces; text columns marked `wrap` (a contrast's description) wrap at spaces;
the optional columns are left out, least important first, and named in a note
(`dropped_note`); and when the table is still too wide (a row of 16 numbers, a 9 × 10 grid)
its columns are split into several tables, the `key` columns repeated in each. Piped output
is laid out for 80 columns (rich's default without a terminal), or for $COLUMNS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Column", "console", "dropped_note", "fit_table", "print_table"]


@dataclass(frozen=True)
class Column:
    """A column: its header; `drop` (lower: left out first; None: always kept); `wrap`: its
    cells are text that may wrap at spaces; `key`: repeated in every part when the table is
    split (the first column is a key unless some column says otherwise)."""

    header: str
    drop: int | None = None
    justify: str = "right"
    wrap: bool = False
    key: bool = False


def console() -> Any:
    """The console the commands print to (80 columns when piped, unless $COLUMNS says)."""
    from rich.console import Console

    return Console()


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _widths(col: Column, cells: Sequence[str]) -> tuple[int, int]:
    """(full, least) width of a column: the least wraps the header at spaces, and the cells
    too if the column is text that may wrap; a number or an id is never broken."""
    full = max([len(col.header), *(len(c) for c in cells)])
    cell = max([_longest_word(c) if col.wrap else len(c) for c in cells], default=0)
    return full, max(_longest_word(col.header), cell, 1)


def _build(columns: Sequence[Column], rows: Sequence[Sequence[str]], keep: Sequence[int],
           widths: dict[int, int], title: str | None, caption: str | None,
           sections: Sequence[bool] | None) -> Any:
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    # a title wider than the table (a model path over two narrow columns) is a line of its
    # own, wrapped by the console at spaces: as the table's title rich folds it at the
    # table's width, mid-word
    above = title is not None and len(title) > _span(keep, widths)
    table = Table(title=None if above else title, caption=caption, box=box.SIMPLE_HEAD,
                  padding=(0, 1), show_edge=False, pad_edge=False)
    for i in keep:
        table.add_column(columns[i].header, justify=columns[i].justify,  # type: ignore[arg-type]
                         width=widths[i], no_wrap=False, overflow="fold")
    for j, r in enumerate(rows):
        table.add_row(*(r[i] for i in keep),
                      end_section=bool(sections[j]) if sections is not None else False)
    return Group(Text(title or "", style="table.title"), table) if above else table


def _span(keep: Sequence[int], widths: dict[int, int]) -> int:
    """The width of a table of these columns: each column, one space of padding on each
    inner side and the one-space rule between columns (box.SIMPLE_HEAD, no edge)."""
    return sum(widths[i] for i in keep) + 3 * max(len(keep) - 1, 0)


def _grow(keep: Sequence[int], least: dict[int, int], full: dict[int, int],
          width: int) -> dict[int, int]:
    """Widths from the least toward the full ones, while they fit in `width`."""
    got = dict(least)
    slack = width - _span(keep, got)
    for i in keep:
        add = max(min(full[i] - got[i], slack), 0)
        got[i] += add
        slack -= add
    return got


def fit_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int,
              title: str | None = None, caption: str | None = None,
              sections: Sequence[bool] | None = None) -> tuple[Any, list[str]]:
    """A renderable of `rows` no wider than `width`, and the headers left out to fit: headers
    and text columns wrap at spaces first, then the optional columns go, least important
    first; what is still too wide is split into several tables by columns (`key` columns
    repeated). No cell is ever cut."""
    keep = list(range(len(columns)))
    full, least = {}, {}
    for i in keep:
        full[i], least[i] = _widths(columns[i], [r[i] for r in rows])
    order = sorted((i for i, c in enumerate(columns) if c.drop is not None),
                   key=lambda i: columns[i].drop or 0)
    dropped: list[str] = []
    while _span(keep, least) > width and order:
        i = order.pop(0)
        keep.remove(i)
        dropped.append(columns[i].header)
    if _span(keep, least) <= width:
        return (_build(columns, rows, keep, _grow(keep, least, full, width), title, caption,
                       sections), dropped)
    return _split(columns, rows, keep, least, full, width, title, caption, sections), dropped


def _split(columns: Sequence[Column], rows: Sequence[Sequence[str]], keep: list[int],
           least: dict[int, int], full: dict[int, int], width: int, title: str | None,
           caption: str | None, sections: Sequence[bool] | None) -> Any:
    """The columns of `keep` in consecutive parts that each fit, the key columns in each."""
    from rich.console import Group

    keys = [i for i in keep if columns[i].key] or keep[:1]
    rest = [i for i in keep if i not in keys]
    parts: list[list[int]] = []
    for i in rest:
        if parts and _span(keys + parts[-1] + [i], least) <= width:
            parts[-1].append(i)
        else:
            parts.append([i])
    tables: list[Any] = [
        _build(columns, rows, keys + part, _grow(keys + part, least, full, width),
               title if j == 0 else None, None, sections) for j, part in enumerate(parts)]
    if caption:
        from rich.text import Text

        tables.append(Text(caption, style="dim"))
    return Group(*tables)


def print_table(columns: Sequence[Column | str], rows: Sequence[Sequence[str]], *,
                title: str | None = None, caption: str | None = None) -> None:
    """Print a table that fits the console (see `fit_table`), its caption below it as a line
    of its own; plain strings are columns that are always kept, right-justified."""
    out = console()
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    table, dropped = fit_table(cols, rows, width=out.width, title=title)
    out.print(table)
    for note in (dropped_note(dropped, out.width), caption and f"[dim]{caption}[/]"):
        if note:
            out.print(note)


def dropped_note(dropped: list[str], width: int) -> str | None:
    """The note naming the columns left out, or None."""
    if not dropped:
        return None
    return (f"[dim]left out to fit {width} columns: " + "; ".join(dropped)
            + " (a wider terminal, or --json, shows them)[/]")
