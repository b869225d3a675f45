"""The store key holds the endpoint; stores written before it migrate (issue 21)."""

from __future__ import annotations

import sqlite3

import pytest

from ensemble.providers.endpoints import normalise_api_base
from ensemble.providers.params import SamplingParams
from ensemble.sampling.store import SCHEMA_VERSION, SampleStore
from ensemble.sampling.types import Sample, request_key

MSGS = ({"role": "user", "content": "Which box?"},)
PARAMS = SamplingParams(temperature=0.7)


@pytest.mark.parametrize("a, b", [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/"),
    ("http://LOCALHOST:80/v1", "http://localhost/v1"),
    ("https://Api.Example.com:443/v1?x=1#f", "https://api.example.com/v1"),
    ("http://bob:pw@host:9/v1", "http://host:9/v1"),
])
def test_one_endpoint_written_two_ways_is_one_identity(a, b):
    assert normalise_api_base(a) == normalise_api_base(b)
    assert "pw" not in normalise_api_base("http://bob:pw@host:9/v1")


@pytest.mark.parametrize("a, b", [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"),  # a restarted server, new port
    ("http://127.0.0.1:8000/v1", "http://127.0.0.2:8000/v1"),
    ("http://host/v1", "http://host/v2"),
])
def test_two_endpoints_are_two_keys(a, b):
    assert normalise_api_base(a) != normalise_api_base(b)
    ka = request_key("openai/m", MSGS, PARAMS, endpoint=normalise_api_base(a))
    kb = request_key("openai/m", MSGS, PARAMS, endpoint=normalise_api_base(b))
    assert ka != kb


def test_a_public_endpoint_keeps_the_keys_of_older_stores():
    # no api_base: the provider's own endpoint, keyed exactly as before schema 4 (the sha256 of
    # the sorted JSON of model, messages and parameters), so those stores resume unchanged
    import hashlib
    import json

    doc = {"model": "openai/m", "messages": list(MSGS), "params": PARAMS.as_dict()}
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert request_key("openai/m", MSGS, PARAMS) == hashlib.sha256(blob.encode()).hexdigest()


def test_a_schema_3_store_migrates_and_keeps_its_samples(tmp_path):
    path = tmp_path / "old.sqlite"
    with SampleStore(path) as st:
        key = request_key("openai/m", MSGS, PARAMS)
        st.put(Sample(key=key, index=0, text="<answer>L</answer>"), model="openai/m",
               request={"model": "openai/m"})
    # make it look like a store written by the previous release (schema 3, no endpoint column)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE prompts DROP COLUMN endpoint")
    conn.execute("ALTER TABLE samples DROP COLUMN answer_lp")  # schema 5's
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with SampleStore(path) as st:
        assert st.schema_version == SCHEMA_VERSION == 5
        assert st.get(key, [0])[0].text == "<answer>L</answer>"  # still read, not re-drawn
        assert st.endpoints() == {None: 1}
        other = request_key("openai/m", MSGS, PARAMS, endpoint="http://127.0.0.1:9/v1")
        st.put(Sample(key=other, index=0, text="<answer>R</answer>"), model="openai/m",
               request={"model": "openai/m", "endpoint": "http://127.0.0.1:9/v1"})
        assert st.endpoints() == {None: 1, "http://127.0.0.1:9/v1": 1}
        assert st.get(other, [0])[0].text == "<answer>R</answer>"
