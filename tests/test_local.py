"""The embedded local model: the real SmolLM2 GGUF through llama.cpp (xllamacpp)."""

import socket
from urllib.parse import urlparse

import pytest

from ensemble import Ensemble, local
from ensemble.errors import LocalModelError


def test_weights_resolution(tmp_path, monkeypatch):
    fake = tmp_path / "m.gguf"
    fake.write_bytes(b"GGUF")
    assert local.resolve_weights(f"local/{fake}") == fake.resolve()
    monkeypatch.setenv("ENSEMBLE_LOCAL_MODEL", str(fake))
    assert local.resolve_weights("local") == fake.resolve()
    monkeypatch.delenv("ENSEMBLE_LOCAL_MODEL")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(LocalModelError, match="ensemble models pull"):
        local.resolve_weights("local")
    cached = tmp_path / "cache" / "ensemble" / "models" / local.DEFAULT_FILE
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"GGUF")
    assert local.resolve_weights("local") == cached
    with pytest.raises(LocalModelError, match="not found"):
        local.resolve_weights("local/nope.gguf")


@pytest.mark.local_model
def test_real_local_model_kept_up_until_close_then_no_orphan(smollm2_path):
    pytest.importorskip("xllamacpp", reason="xllamacpp not installed (pip install '.[local]')")
    model = f"local:{smollm2_path}"  # the absolute-path alias
    ens = Ensemble(model, temperature=0.7, n=3, choices=["L", "R"], max_tokens=16)
    d = ens.decide("Answer with one letter, L or R: which is on the left? <answer>")
    assert len(d.samples) == 3 and all(s.text is not None for s in d.samples)
    assert sum(d.votes.values()) + d.n_invalid == 3
    # the server stays up between decide() calls: the second call reuses it (no reload)
    (first,) = local.running()
    ens.decide("Is the sky green? Answer L for yes, R for no. <answer>")
    assert local.running() == [first]
    port = urlparse(first.api_base).port
    ens.close()  # stops it: nothing running, its port closed
    assert local.running() == []
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
