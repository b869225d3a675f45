"""Token prices without importing litellm: its price table read as the JSON file it ships.

litellm keeps its price table in `model_prices_and_context_window_backup.json` inside its
package; `find_spec` locates the package without running it (importing litellm costs ~4 s), and
the file is read once, on the first price asked for, only when no `price_per_1k` was given.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Any

__all__ = ["token_price"]

_TABLE_FILE = "model_prices_and_context_window_backup.json"
_table: dict[str, Any] | None = None
_lock = threading.Lock()
_cache: dict[tuple[str, str, bool], tuple[float, float] | None] = {}


def _load() -> dict[str, Any]:
    global _table
    with _lock:
        if _table is None:
            table: dict[str, Any] = {}
            try:
                spec = importlib.util.find_spec("litellm")
                roots = list(spec.submodule_search_locations or []) if spec else []
                for root in roots:
                    path = Path(root) / _TABLE_FILE
                    if path.is_file():
                        table = json.loads(path.read_text(encoding="utf-8"))
                        break
            except (ImportError, OSError, ValueError):
                table = {}  # no table: every price unknown
            _table = table if isinstance(table, dict) else {}
        return _table


def token_price(model: str, provider: str = "openai", *, batch: bool = False
                ) -> tuple[float, float] | None:
    """(prompt, completion) USD per token for a model string (`openai/gpt-4o-mini` or
    `gpt-4o-mini`) from litellm's price table; None when the table has no price for it.
    `batch`: its Batch API rates (`*_cost_per_token_batches`), None where it has none (half
    the online price would be a guess, not a price)."""
    slot = (model, provider, batch)
    if slot in _cache:
        return _cache[slot]
    name = model.split("/", 1)[1] if model.startswith(f"{provider}/") else model
    table = _load()
    suffix = "_batches" if batch else ""
    price: tuple[float, float] | None = None
    for key in (model, name, f"{provider}/{name}"):
        info = table.get(key)
        if not isinstance(info, dict) or info.get("litellm_provider", provider) != provider:
            continue
        pin, pout = (info.get(f"input_cost_per_token{suffix}"),
                     info.get(f"output_cost_per_token{suffix}"))
        if batch:
            if pin is not None and pout is not None:
                price = (float(pin), float(pout))
            break
        if pin or pout:
            price = (float(pin or 0.0), float(pout or 0.0))
            break
    _cache[slot] = price
    return price
