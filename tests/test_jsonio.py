"""±∞ keep their sign through every JSON document we write."""

import json
import math

import numpy as np

from ensemble.jsonio import dumps, from_jsonable, loads, to_jsonable


def test_infinities_round_trip_distinctly():
    doc = {"lam": math.inf, "neg": -math.inf, "ci": [2.5, math.inf], "fits": [{"lam": -math.inf}],
           "ok": 1.5, "missing": None}
    text = dumps(doc)
    raw = json.loads(text)  # strict JSON: no Infinity tokens
    assert raw["lam"] is None and raw["lam_inf"] == "+"
    assert raw["neg"] is None and raw["neg_inf"] == "-"
    assert raw["ci"] == [2.5, None] and raw["ci_inf"] == [None, "+"]
    assert raw["fits"][0]["lam_inf"] == "-"
    assert "missing_inf" not in raw and "ok_inf" not in raw
    back = loads(text)
    assert back["lam"] == math.inf and back["neg"] == -math.inf
    assert back["ci"] == [2.5, math.inf] and back["fits"][0]["lam"] == -math.inf
    assert back["missing"] is None and "lam_inf" not in back


def test_numpy_and_nan():
    raw = to_jsonable({"a": np.array([1.0, np.nan]), "b": np.float64(2.0), "c": (1, 2)})
    assert raw == {"a": [1.0, None], "a_inf": [None, "nan"], "b": 2.0, "c": [1, 2]}
    assert math.isnan(from_jsonable(raw)["a"][1])


def test_write_atomic_replaces_whole_and_leaves_no_temporary(tmp_path):
    import threading

    from ensemble.jsonio import write_atomic

    target = tmp_path / "spec.json"
    write_atomic(target, "old\n")
    texts = [f"writer {i}\n" * 2000 for i in range(8)]
    threads = [threading.Thread(target=write_atomic, args=(target, t)) for t in texts]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert target.read_text() in texts  # one writer's text, whole: none shared a temporary
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]


def test_write_atomic_that_fails_keeps_the_old_file(tmp_path):
    import pytest

    from ensemble.jsonio import write_atomic

    target = tmp_path / "profile.json"
    write_atomic(target, "kept\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "\ud800 a lone surrogate cannot be encoded")
    assert target.read_text() == "kept\n"
    assert [p.name for p in tmp_path.iterdir()] == ["profile.json"]
