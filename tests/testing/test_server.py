"""The simulated expert server, spoken to over real HTTP (httpx) without the sampler.

Reference values come from the documented answer models (ensemble.testing.server docstring):
box task P(L) = sigmoid(2λ(2p − 1) + b) with λ = λ₁/t; multiple choice ρ_q ~ Beta(a, b), a
distractor, quantal response over K options; both re-derived here independently.
"""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import numpy as np
import pytest
from scipy.stats import binomtest

from ensemble.errors import InputError
from ensemble.testing import (
    INDEX_HEADER,
    FaultPlan,
    MCModel,
    SimulatedServer,
    answer_key_from_questions,
    prompt_hash,
)


def chat(url, prompt, *, t=1.0, n=1, index=None, **extra):
    headers = {} if index is None else {INDEX_HEADER: str(index)}
    body = {"model": "sim-expert", "messages": [{"role": "user", "content": prompt}],
            "temperature": t, "n": n, **extra}
    return httpx.post(url + "/chat/completions", json=body, headers=headers, timeout=30)


def letters(resp):
    out = []
    for c in resp.json()["choices"]:
        text = c["message"]["content"]
        out.append(text.split("<answer>")[-1].split("</answer>")[0])
    return out


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z))


def test_models_endpoint_and_n_choices(box_questions):
    with SimulatedServer() as srv:
        r = httpx.get(srv.base_url + "/models", timeout=10)
        assert r.status_code == 200 and r.json()["data"][0]["id"] == "sim-expert"
        resp = chat(srv.base_url, box_questions[0].prompt, n=7)
        doc = resp.json()
        assert [c["index"] for c in doc["choices"]] == list(range(7))
        assert doc["usage"]["prompt_tokens"] > 0
        assert srv.stats.completions == 7 and srv.stats.requests == 1


def test_box_answers_follow_planted_psi_with_bias(box_questions):
    q = next(q for q in box_questions if 0.6 < q.posterior < 0.7)
    lam1, t, bias, k = 1.0, 0.8, -0.9, 800
    with SimulatedServer(lam1=lam1, bias=bias, seed=3) as srv:
        got = []
        for start in range(0, k, 100):
            got += letters(chat(srv.base_url, q.prompt, t=t, n=100, index=start))
    expected = sigmoid(2 * (lam1 / t) * (2 * q.posterior - 1) + bias)
    assert len(got) == k and set(got) <= {"L", "R"}
    assert binomtest(got.count("L"), k, expected).pvalue > 1e-3
    # and the bias moved it: without bias the rate would be sigmoid(2λ(2p−1))
    assert binomtest(got.count("L"), k, sigmoid(2 * (lam1 / t) * (2 * q.posterior - 1))
                     ).pvalue < 1e-3


def test_a_scaled_bias_is_divided_by_the_temperature(box_questions):
    """bias_form="scaled": P(L) = σ((2λ₁(2p − 1) + b)/t), as sampling at temperature t does to a
    preference that is part of the model's scores; "fixed" keeps σ(2(λ₁/t)(2p − 1) + b)."""
    q = next(q for q in box_questions if 0.6 < q.posterior < 0.7)
    lam1, t, bias, k = 1.0, 0.5, -0.9, 800
    with SimulatedServer(lam1=lam1, bias=bias, bias_form="scaled", seed=3) as srv:
        got = []
        for start in range(0, k, 100):
            got += letters(chat(srv.base_url, q.prompt, t=t, n=100, index=start))
        # greedy: the argmax of 2λ₁(2p − 1) + b, so a bias larger than the evidence wins
        weak = next(x for x in box_questions
                    if 0.5 < x.posterior and 2 * lam1 * (2 * x.posterior - 1) < -bias)
        greedy = letters(chat(srv.base_url, weak.prompt, t=0, n=5))
    scaled = sigmoid((2 * lam1 * (2 * q.posterior - 1) + bias) / t)
    fixed = sigmoid(2 * (lam1 / t) * (2 * q.posterior - 1) + bias)
    assert binomtest(got.count("L"), k, scaled).pvalue > 1e-3
    assert binomtest(got.count("L"), k, fixed).pvalue < 1e-3
    assert greedy == ["R"] * 5
    with pytest.raises(InputError, match="bias_form"):
        SimulatedServer(bias_form="per-t")


def test_greedy_is_argmax_and_a_fair_coin_at_one_half(box_questions):
    sure = [q for q in box_questions if abs(q.posterior - 0.5) > 0.02][:15]
    half = [q for q in box_questions if q.posterior == 0.5]
    assert half
    with SimulatedServer(lam1=0.5, seed=1) as srv:
        for q in sure:
            assert set(letters(chat(srv.base_url, q.prompt, t=0, n=5))) == \
                {"L" if q.posterior > 0.5 else "R"}
        coin = []
        for q in half:
            coin += letters(chat(srv.base_url, q.prompt, t=0, n=50))
    assert binomtest(coin.count("L"), len(coin), 0.5).pvalue > 1e-3


def test_draws_depend_only_on_seed_prompt_temperature_and_index(box_questions):
    q = next(q for q in box_questions if 0.4 < q.posterior < 0.6)
    with SimulatedServer(lam1=1.0, seed=5) as a, SimulatedServer(lam1=1.0, seed=5) as b, \
            SimulatedServer(lam1=1.0, seed=6) as c:
        one_request = letters(chat(a.base_url, q.prompt, n=40, index=0))
        singles = [letters(chat(b.base_url, q.prompt, index=i))[0] for i in range(39, -1, -1)]
        other_seed = letters(chat(c.base_url, q.prompt, n=40, index=0))
        shifted = letters(chat(a.base_url, q.prompt, n=20, index=20))
    assert one_request == singles[::-1]
    assert shifted == one_request[20:]
    assert other_seed != one_request
    assert a.stats.indices_served() and sorted(b.stats.served.values()) == [1] * 40


def _served(resp):
    """(answer letter, {token: logprob} of its answer token) per choice."""
    out = []
    for c in resp.json()["choices"]:
        first = c["logprobs"]["content"][0]
        out.append((first["token"], {d["token"]: d["logprob"] for d in first["top_logprobs"]}))
    return out


def test_logprobs_are_each_samples_own_belief_around_psi(box_questions):
    """Chain beliefs (ensemble.testing.expert, "Chain beliefs"): each sample's answer token
    carries its own belief b ~ Dirichlet(κ·(ψ, 1 − ψ)) with the answer drawn from b, so the
    beliefs differ between samples, average ψ, and favour the sample's own answer; κ = ∞ is
    the old report of ψ itself; short replies are one letter."""
    from ensemble.testing import ChainBeliefs

    q = next(q for q in box_questions if 0.7 < q.posterior < 0.8)
    lam1, t = 2.0, 1.0
    p_l = sigmoid(2 * lam1 / t * (2 * q.posterior - 1))
    with SimulatedServer(lam1=lam1) as srv, \
            SimulatedServer(lam1=lam1, beliefs=ChainBeliefs(kappa=math.inf)) as flat:
        got = [x for i in range(0, 1200, 120) for x in _served(
            chat(srv.base_url, q.prompt, t=t, n=120, index=i, logprobs=True, top_logprobs=2,
                 max_tokens=1))]
        same = _served(chat(flat.base_url, q.prompt, t=t, n=120, index=0, logprobs=True,
                            top_logprobs=2, max_tokens=1))
    assert {a for a, _ in got} == {"L", "R"}
    b_l = np.array([math.exp(tops["L"]) for _, tops in got])
    assert all(math.exp(tops["L"]) + math.exp(tops["R"]) == pytest.approx(1.0) for _, tops in got)
    assert len(set(np.round(b_l, 9))) > 0.7 * len(b_l)  # each its own (some round to 1)
    se = math.sqrt(p_l * (1 - p_l) / 2 / len(b_l))  # Var b = ψ(1 − ψ)/(κ + 1), κ = 1
    assert abs(b_l.mean() - p_l) < 4 * se  # E[b] = ψ
    own = np.array([math.exp(tops[a]) for a, tops in got])
    assert own.mean() > 0.5  # a chain leans towards what it answered
    # the answers are those of the old expert (the beliefs are drawn after them)
    assert [a for a, _ in got[:120]] == [a for a, _ in same]
    for _, tops in same:  # κ = ∞: every sample reports ψ itself
        assert tops["L"] == pytest.approx(math.log(p_l), rel=1e-9)
        assert tops["R"] == pytest.approx(math.log(1 - p_l), rel=1e-9)


def test_noise_beliefs_say_nothing_about_the_question(box_questions):
    """mode="noise": the belief in the sample's own answer is uniform on [1/2, 1] whatever
    the question, so it does not tell a right answer from a wrong one."""
    from ensemble.testing import ChainBeliefs

    q = next(q for q in box_questions if 0.7 < q.posterior < 0.8)
    with SimulatedServer(lam1=1.0, beliefs=ChainBeliefs(mode="noise")) as srv:
        got = [x for i in range(0, 600, 120) for x in _served(
            chat(srv.base_url, q.prompt, t=1.0, n=120, index=i, logprobs=True,
                 top_logprobs=2, max_tokens=1))]
    own = {a: [math.exp(tops[a]) for b, tops in got if b == a] for a in ("L", "R")}
    assert min(own["L"] + own["R"]) >= 0.5 and max(own["L"] + own["R"]) <= 1.0
    # right (L: posterior > 1/2) and wrong answers are equally confident
    assert abs(np.mean(own["L"]) - np.mean(own["R"])) < 0.05
    with pytest.raises(InputError, match="kappa"):
        ChainBeliefs(kappa=0)


def _mc_reference(a, b, K, lam, n, draws=200_000, seed=0):
    """Expected plurality accuracy (random tie-break) under the documented MC model."""
    rng = np.random.default_rng(seed)
    rho = rng.beta(a, b, draws)
    if math.isinf(lam):
        return a / (a + b)  # one frozen reading per question, repeated by every sample
    s = math.exp(2 * lam) / (math.exp(2 * lam) + (K - 1) * math.exp(-2 * lam))
    # option 0 correct, option 1 the distractor
    reads_correct = rng.random((draws, n)) < rho[:, None]
    follow = rng.random((draws, n)) < s
    other = rng.integers(0, K - 1, (draws, n))  # one of the K-1 options not read
    read_opt = np.where(reads_correct, 0, 1)
    not_read = np.where(other >= read_opt, other + 1, other)
    choice = np.where(follow, read_opt, not_read)
    counts = np.stack([(choice == j).sum(1) for j in range(K)], 1)
    top = counts.max(1, keepdims=True)
    tied = (counts == top).sum(1)
    return float(np.mean((counts[:, 0] == top[:, 0]) / tied))


def test_multiple_choice_accuracy_model(mathqa_path):
    from ensemble.tasks import get_task

    a, b, lam1, nq = 3.0, 2.0, 1.0, 400
    qs = get_task("mathqa", data=mathqa_path, limit=nq, seed=1).questions()
    key = answer_key_from_questions(qs)
    assert len(key) == len(qs)

    async def run(url):
        sem = asyncio.Semaphore(16)
        async with httpx.AsyncClient(timeout=30) as client:
            async def one(q, t, n):
                async with sem:
                    r = await client.post(url + "/chat/completions", json={
                        "model": "m", "messages": [{"role": "user", "content": q.prompt}],
                        "temperature": t, "n": n})
                return letters(r)
            jobs = [one(q, t, n) for q in qs for t, n in ((0.0, 5), (1.0, 1), (0.5, 9))]
            return await asyncio.gather(*jobs)

    with SimulatedServer(lam1=lam1, seed=2, answer_key=key, mc_model=MCModel(a, b)) as srv:
        out = asyncio.run(run(srv.base_url))
    greedy, single, vote = out[0::3], out[1::3], out[2::3]
    assert all(len(set(g)) == 1 for g in greedy)  # t = 0: one frozen reading, repeated
    K = 5

    def plurality_score(answers, correct):
        counts = {x: answers.count(x) for x in set(answers)}
        top = max(counts.values())
        winners = [x for x, c in counts.items() if c == top]
        return (correct in winners) / len(winners)

    acc = {
        "greedy": np.mean([g[0] == q.correct for g, q in zip(greedy, qs, strict=True)]),
        "single": np.mean([s[0] == q.correct for s, q in zip(single, qs, strict=True)]),
        "vote": np.mean([plurality_score(v, q.correct) for v, q in zip(vote, qs, strict=True)]),
    }
    ref = {"greedy": a / (a + b), "single": _mc_reference(a, b, K, lam1 / 1.0, 1),
           "vote": _mc_reference(a, b, K, lam1 / 0.5, 9)}
    for name in acc:  # each question independent: 4 binomial standard errors
        se = math.sqrt(ref[name] * (1 - ref[name]) / nq)
        assert abs(acc[name] - ref[name]) < 4 * se, (name, acc[name], ref[name])
    # the paper's pattern, in the model itself: n = 1 higher t hurts, a vote at moderate t helps
    assert ref["single"] < ref["greedy"] < ref["vote"]


def test_answer_key_by_prompt_hash_for_other_formats():
    prompt = "Which is prime?\nA) 4\nB) 6\nC) 7\nD) 9"
    key = {prompt_hash(prompt): "C"}
    with SimulatedServer(lam1=5.0, answer_key=key, mc_model=MCModel(50, 1), seed=0) as srv:
        got = letters(chat(srv.base_url, prompt, t=0.2, n=40))
        generic = chat(srv.base_url, "hello there").json()["choices"][0]["message"]["content"]
    assert got.count("C") >= 30  # ρ ≈ 0.98 here
    assert "<answer>" in generic


@pytest.mark.parametrize("kind,status", [("429", 429), ("500", 500), ("503", 503)])
def test_http_error_faults(kind, status):
    plan = FaultPlan(first=2, kinds=(kind,), retry_after=1.5)
    with SimulatedServer(faults=plan) as srv:
        r1, r2, r3 = (chat(srv.base_url, "hi") for _ in range(3))
    assert r1.status_code == r2.status_code == status and r3.status_code == 200
    if kind == "429":
        assert r1.headers["Retry-After"] == "1.5"
    assert srv.stats.faults[kind] == 2


def test_malformed_drop_short_n_slow_and_schedule():
    plan = FaultPlan(every=2, kinds=("malformed",))
    with SimulatedServer(faults=plan) as srv:
        ok, bad = chat(srv.base_url, "hi"), chat(srv.base_url, "hi")
        assert ok.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(bad.text)
    with SimulatedServer(faults=FaultPlan(first=1, kinds=("drop",))) as srv:
        with pytest.raises(httpx.HTTPError):
            chat(srv.base_url, "hi")
        assert chat(srv.base_url, "hi").status_code == 200
    with SimulatedServer(faults=FaultPlan(first=1, kinds=("short_n",))) as srv:
        assert len(chat(srv.base_url, "hi", n=8).json()["choices"]) == 4
    with SimulatedServer(faults=FaultPlan(first=1, kinds=("slow",), slow=0.3)) as srv:
        import time

        t0 = time.perf_counter()
        assert chat(srv.base_url, "hi").status_code == 200
        assert time.perf_counter() - t0 >= 0.3
    with SimulatedServer(faults=FaultPlan(first=1, kinds=("timeout",), hang=5)) as srv:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(srv.base_url + "/chat/completions", timeout=0.3, json={
                "model": "m", "messages": [{"role": "user", "content": "x"}]})


def test_fault_rate_is_seeded_and_reject_n():
    plan = FaultPlan(rate=0.3, seed=4)
    hits = [plan.fault_for(i) for i in range(1, 2001)]
    assert hits == [FaultPlan(rate=0.3, seed=4).fault_for(i) for i in range(1, 2001)]
    assert binomtest(sum(h is not None for h in hits), 2000, 0.3).pvalue > 1e-3
    assert hits != [FaultPlan(rate=0.3, seed=5).fault_for(i) for i in range(1, 2001)]
    with SimulatedServer(reject_n=True) as srv:
        r = chat(srv.base_url, "hi", n=3)
        assert r.status_code == 400 and r.json()["error"]["param"] == "n"
        assert chat(srv.base_url, "hi", n=1).status_code == 200


async def test_async_context_manager_and_in_flight_count():
    async with SimulatedServer(latency=0.2) as srv:
        async with httpx.AsyncClient(timeout=10) as client:
            await asyncio.gather(*(client.post(srv.base_url + "/chat/completions", json={
                "model": "m", "messages": [{"role": "user", "content": f"{i}"}]})
                for i in range(12)))
        assert srv.stats.max_in_flight == 12 and srv.stats.in_flight == 0


def test_prompts_that_offer_answers_are_answered_with_one_of_them():
    """The @vote example of docs/python.md against the simulator: a decision, no invalid votes."""
    from ensemble import vote

    with SimulatedServer(lam1=3.0, seed=1) as srv:
        @vote(model="openai/sim-expert", api_base=srv.base_url, temperature=0.5, n=5,
              choices=["positive", "negative"])
        def sentiment(review: str) -> str:
            return f"Is this review positive or negative? Answer in <answer></answer>.\n{review}"

        d = sentiment("A wonderful film.")
        listed = letters(chat(srv.base_url, "Answer with one of: red, green, blue", n=30))
        generic = letters(chat(srv.base_url, "hello there"))
    assert d.decision in ("positive", "negative") and d.n_invalid == 0
    assert set(listed) <= {"red", "green", "blue"} and len(listed) == 30
    assert generic == ["OK"]


def test_listed_answers_follow_the_accuracy_model_with_an_answer_key():
    """Greedy (t = 0) answers are right with probability E[ρ] = a / (a + b) across prompts."""
    from ensemble.testing.expert import SimulatedExpert, listed_choices

    prompts = [f"Review {i}: is it positive or negative?" for i in range(400)]
    assert listed_choices(prompts[0]) == ["positive", "negative"]
    key = {prompt_hash(p): ("negative" if i % 2 else "POSITIVE") for i, p in enumerate(prompts)}
    ex = SimulatedExpert(lam1=3.0, answer_key=key, mc_model=MCModel(3, 2), seed=0)
    right = 0
    for i, p in enumerate(prompts):
        text = ex.reply([{"role": "user", "content": p}], 0.0, 0).text
        answer = text.split("<answer>")[-1].split("</answer>")[0]
        assert answer in ("positive", "negative")
        right += answer == ("negative" if i % 2 else "positive")
    assert binomtest(right, len(prompts), 0.6).pvalue > 0.001
