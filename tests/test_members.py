"""Mixed ensembles in the Python API: members with their own endpoints and λ, from calibration
profiles to a decision, against simulated experts on loopback (requests counted at the server)."""

import asyncio

import pytest

from ensemble import Ensemble, Member, resolve_members
from ensemble.errors import InputError
from ensemble.evals.calibrate import run_calibration
from ensemble.evals.runner import RunOptions
from ensemble.evals.spec import calibration_spec
from ensemble.providers.options import ProviderOptions
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

MODEL = "openai/sim-expert"


def _calibrate(srv: SimulatedServer, out) -> str:
    # 40 of the 400 questions, 8 samples each, at two temperatures: 80 requests, ~1.5 s. The
    # simulated answers are a function of the server's seed, so the fit is reproducible; at these
    # seeds each 95% interval covers its planted λ₁ (about 1 in 20 seeds would not).
    spec = calibration_spec(MODEL, (1.0, 2.0), samples=8, limit=40, n_budget=3)
    asyncio.run(run_calibration(spec, RunOptions(
        provider=ProviderOptions(api_base=srv.base_url, transport=srv.transport()),
        out=str(out))))
    return str(out / "profile.json")


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A simulated expert (planted λ₁ = 3) running for the module, and its profile."""
    with SimulatedServer(lam1=3.0, seed=5) as srv:
        yield srv, _calibrate(srv, tmp_path_factory.mktemp("cal"))


def test_two_planted_experts_calibrated_then_ensembled(tmp_path):
    """Issue 15's done-when: planted λ₁ = 2 and 8; calibrate each; the Ensemble built from the
    profiles gives each member a λ₁ inside its profile's 95% interval, which covers the
    planted value; the ensemble decides, showing each member's votes and λ."""
    prompt = next(iter(get_task("boxball").questions())).prompt
    with SimulatedServer(lam1=2.0, seed=11) as weak, SimulatedServer(lam1=8.0, seed=12) as strong:
        profiles = [_calibrate(weak, tmp_path / "weak"), _calibrate(strong, tmp_path / "strong")]
        members = [Member(MODEL, n=3, temperature=1.0, api_base=weak.base_url),
                   Member(MODEL, n=2, temperature=0.5, api_base=strong.base_url)]
        with Ensemble(members=members, aggregator="lam-weighted", calibration=profiles,
                      choices=["L", "R"]) as ens:
            from ensemble.profile import CalibrationProfile

            for m, path, planted in zip(ens.members, profiles, (2.0, 8.0), strict=True):
                prof = CalibrationProfile.load(path)
                lo, hi = prof.lam1_ci
                assert lo <= planted <= hi, (path, prof.lam1_ci)
                assert lo <= m.lam * m.temperature <= hi
                assert m.lam == pytest.approx(prof.lam1 / m.temperature)
                assert path in m.lam_source
            before = (weak.stats.requests, strong.stats.requests)
            d = ens.decide(prompt)
            assert weak.stats.requests > before[0] and strong.stats.requests > before[1]
    assert d.decision in ("L", "R")
    assert len(d.samples) == 5 and d.n_samples == 5
    assert [sum(v.values()) for v in d.member_votes] == [3 - _invalid(d, 0), 2 - _invalid(d, 1)]
    assert d.lams == tuple(m.lam for m in ens.members)
    assert d.to_dict()["member_votes"] == [dict(v) for v in d.member_votes]


def _invalid(d, g):
    n = (3, 2)[g]
    start = 0 if g == 0 else 3
    return sum(s.answer is None for s in d.samples[start:start + n])


def test_members_sample_concurrently_each_within_its_own_endpoint_limit():
    with SimulatedServer(lam1=3.0, seed=1, latency=0.05) as a, \
            SimulatedServer(lam1=3.0, seed=2, latency=0.05) as b:
        ens = Ensemble(members=[Member(MODEL, n=1, temperature=1.0, api_base=a.base_url,
                                       max_concurrency=2),
                                Member(MODEL, n=1, temperature=1.0, api_base=b.base_url,
                                       max_concurrency=5)],
                       choices=["L", "R"], aggregator="plurality")
        prompts = [q.prompt for q in list(get_task("boxball").questions())[:20]]
        ds = ens.decide_many(prompts)
        ens.close()
        assert a.stats.max_in_flight <= 2 and b.stats.max_in_flight <= 5
        assert b.stats.max_in_flight > 2  # the second endpoint was not held to the first's
        assert a.stats.requests == b.stats.requests == 20
    assert all(len(d.member_votes) == 2 for d in ds)


def test_robust_from_a_profile_needs_no_typed_lambda(calibrated):
    from ensemble.profile import CalibrationProfile

    srv, prof = calibrated
    with Ensemble(MODEL, n=3, temperature=0.5, api_base=srv.base_url, aggregator="robust",
                  calibration=prof, choices=["L", "R"]) as ens:
        assert ens.members[0].lam == pytest.approx(CalibrationProfile.load(prof).lam1 / 0.5)
        d = ens.decide(next(iter(get_task("boxball").questions())).prompt)
    assert d.aggregator == "robust" and d.decision in ("L", "R")


def test_no_matching_profile_names_what_the_profiles_hold(calibrated):
    srv, prof = calibrated
    with pytest.raises(InputError, match=r"no calibration profile for openai/other .*"
                                         r"profiles hold .*openai/sim-expert"):
        Ensemble(members=[Member("openai/other", n=1, temperature=1.0,
                                 api_base=srv.base_url)], calibration=[prof])
    assert resolve_members([Member(MODEL, n=1, temperature=1.0, lam=1.5)],
                           calibration=[prof])[0].lam == 1.5  # typed λ wins


@pytest.mark.parametrize("kwargs, match", [
    ({"model": "openai/x", "temprature": 0.1}, "did you mean 'temperature'"),
    ({"members": [Member("openai/x", lam=1.0), Member("openai/y", lam=2.0)],
      "aggregator": "robust", "choices": ["A", "B", "C"]}, "two options"),
    ({"members": [Member("openai/x"), Member("openai/y", lam=2.0)],
      "aggregator": "lam-weighted"}, "needs each member's λ and openai/x"),
    ({"members": [Member("openai/x")], "n": 3}, "give n to each Member"),
    ({"model": "openai/x", "aggregator": "majority"}, "give choices"),
    ({"members": [Member("openai/x"), Member("openai/y")], "stop": "beta", "max_n": 4},
     "max_n= is for one model"),
    ({"members": [Member("openai/x", api_base="http://127.0.0.1:1/v1"),
                  Member("openai/x", api_base="http://127.0.0.1:1/v1/")], "store": "s.sqlite"},
     "would read each other's stored samples"),
    ({"model": "openai/x", "max_n": 9}, "max_n= applies with stop="),
    ({}, "needs a model"),
])
def test_bad_ensembles_fail_at_construction(kwargs, match):
    with pytest.raises(InputError, match=match):
        Ensemble(**kwargs)


def test_stop_bayes_uses_fewer_samples_and_a_rerun_costs_nothing(tmp_path):
    """Adaptive decisions (issue 16): an easy planted expert settles early; the Decision says
    how many samples it used; with a store, deciding again makes no request."""
    qs = [q for q in get_task("boxball").questions()
          if abs(q.posterior - 0.5) > 0.3][:12]  # clear questions: answers agree early
    store = tmp_path / "s.sqlite"
    with SimulatedServer(lam1=6.0, seed=8) as srv:
        ens = Ensemble(MODEL, n=10, temperature=1.0, api_base=srv.base_url, stop="bayes",
                       choices=["L", "R"], store=store)
        ds = ens.decide_many([q.prompt for q in qs])
        ens.close()
        paid = srv.stats.requests
        again = Ensemble(MODEL, n=10, temperature=1.0, api_base=srv.base_url, stop="bayes",
                         choices=["L", "R"], store=store)
        ds2 = again.decide_many([q.prompt for q in qs])
        again.close()
        assert srv.stats.requests == paid  # counted at the server
    used = [d.n_samples for d in ds]
    assert all(d.stop == "bayes" for d in ds) and max(used) <= 10
    assert sum(used) / len(used) < 10 * 0.6, used
    assert [d.decision for d in ds2] == [d.decision for d in ds]
    assert len(ens.stop_memory.get("pilots:bayes")) == len(qs)  # kept for the next prior


def test_a_member_behind_a_hostile_endpoint_costs_only_its_prompts():
    """One member's endpoint refuses some prompts for good and rate-limits the rest; the other
    endpoint is clean. With on_error="return", refused prompts come back as errors naming the
    refusal, every other prompt is decided with both members' votes, and nothing is retried
    against the refusal (counted at the server)."""
    from ensemble.errors import SamplingFailed

    prompts = [q.prompt for q in list(get_task("boxball").questions())[:24]]
    with SimulatedServer(lam1=3.0, seed=3, refuse_rate=0.25, rate_limit=(10, 1.0)) as bad, \
            SimulatedServer(lam1=3.0, seed=4) as good:
        refused = {i for i, p in enumerate(prompts) if bad.refuses(p)}
        assert 0 < len(refused) < len(prompts)
        with Ensemble(members=[Member(MODEL, n=2, temperature=1.0, api_base=bad.base_url),
                               Member(MODEL, n=1, temperature=1.0, api_base=good.base_url)],
                      choices=["L", "R"]) as ens:
            out = asyncio.run(ens.adecide_many(prompts, on_error="return"))
        assert bad.stats.refused == len(refused)  # one request per refused prompt: no retries
        assert good.stats.requests == len(prompts)
    for i, d in enumerate(out):
        if i in refused:
            assert isinstance(d, SamplingFailed) and "refus" in str(d).lower()
        else:
            assert not isinstance(d, Exception), d
            assert len(d.samples) == 3 and len(d.member_votes) == 2


@pytest.mark.parametrize("rule", ["bayes", "beta"])
def test_stop_with_members_reads_the_pooled_votes(tmp_path, rule):
    """Issue 16 with members: rounds of one vote per member until the rule, reading the pooled
    votes, stops; clear questions stop well before every member's n; member g's i-th vote is
    its stored sample i, so a rerun on the store makes no request."""
    qs = [q for q in get_task("boxball").questions() if abs(q.posterior - 0.5) > 0.3][:10]
    prompts = [q.prompt for q in qs]
    store = tmp_path / "s.sqlite"

    def build(a, b):
        return Ensemble(members=[Member(MODEL, n=6, temperature=1.0, api_base=a.base_url),
                                 Member(MODEL, n=6, temperature=0.8, api_base=b.base_url)],
                        stop=rule, choices=["L", "R"], store=store)

    with SimulatedServer(lam1=6.0, seed=21) as a, SimulatedServer(lam1=6.0, seed=22) as b:
        with build(a, b) as ens:
            ds = ens.decide_many(prompts)
        paid = (a.stats.requests, b.stats.requests)
        with build(a, b) as again:
            ds2 = again.decide_many(prompts)
        assert (a.stats.requests, b.stats.requests) == paid  # counted at the servers
    for d in ds:
        per = [sum(v.values()) for v in d.member_votes]
        drawn = [sum(1 for s in d.samples if s.key == k) for k in {s.key for s in d.samples}]
        assert len(drawn) == 2  # two members, two stored keys
        assert d.stop == rule and 2 <= d.n_samples <= 12
        assert max(drawn) - min(drawn) <= 1  # rounds: the members stay within one vote
        assert sum(per) + d.n_invalid == d.n_samples
    used = [d.n_samples for d in ds]
    assert sum(used) / len(used) < 12 * 0.6, used
    assert [d.decision for d in ds2] == [d.decision for d in ds]
    assert [d.n_samples for d in ds2] == used


def test_a_member_uses_the_measured_lambda_when_its_profile_rejected_the_law(tmp_path):
    """Issue 21: a profile whose λ₁/t was rejected (p = 0.035; λ₁ = 3.883 but 7.105 measured at
    t = 0.5) gave Member(t = 0.5) λ₁/t = 7.77 with only a warning, while the report said the
    measured λ is used. Now the Member at a measured temperature gets the measured λ, and at a
    temperature the calibration did not measure, λ₁/t with a warning that says so."""
    import math
    import warnings

    from ensemble import CalibrationProfile
    from ensemble.profile import TemperatureFit

    prof = CalibrationProfile(
        model=MODEL, api_base="http://127.0.0.1:1/v1", lam1=3.883, lam1_ci=(3.7, 4.1),
        lam1_source="joint", lrt_pvalue=0.035, law_holds=False,
        fits=[TemperatureFit(t=0.0, lam=math.inf, ci=(80.4, math.inf), separated=True),
              TemperatureFit(t=0.5, lam=7.105, ci=(6.305, 8.006), se=0.433),
              TemperatureFit(t=1.0, lam=4.085, ci=(3.738, 4.468), se=0.186)],
        created="2026-11-24T00:00:00+00:00", version="0.1.0")
    path = str(prof.save(tmp_path / "profile.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m, = resolve_members([Member(MODEL, temperature=0.5, calibration=path)])
    assert m.lam == 7.105 and "measured at t = 0.5" in m.lam_source
    with pytest.warns(UserWarning, match="did not measure t = 0.7"):
        m, = resolve_members([Member(MODEL, temperature=0.7, calibration=path)])
    assert m.lam == pytest.approx(3.883 / 0.7) and "extrapolation" in m.lam_source
