"""Issue 41 item 27: the Python API's leniency. Each mistake is one InputError naming the
argument and the fix, raised where it is made (at construction, or before any request), never
a surprise at the first decide; through `Ensemble` against the simulated server."""

from __future__ import annotations

import pytest

from ensemble import Ensemble, Member
from ensemble.cost import JointPrior
from ensemble.cost.spec import CostSpec
from ensemble.errors import InputError
from ensemble.testing import SimulatedServer

Q = "Left or right? <answer>L</answer> or <answer>R</answer>"


@pytest.fixture(scope="module")
def url():
    with SimulatedServer(lam1=3.0, seed=5) as srv:
        yield srv.base_url


def _members(url):
    return [Member("openai/sim-a", api_base=url, n=3, temperature=1, lam=2.0,
                   price_per_1k=(1.0, 1.0)),
            Member("openai/sim-b", api_base=url, n=3, temperature=1, lam=4.0,
                   price_per_1k=(2.0, 2.0))]


def _one_line(info) -> str:
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_max_n_below_n_is_refused(url):
    """`Ensemble(n=5, max_n=2, stop="bayes")` was accepted and drew at most 2."""
    with pytest.raises(InputError) as info:
        Ensemble("openai/sim", api_base=url, n=5, max_n=2, stop="bayes", choices=["L", "R"])
    msg = _one_line(info)
    assert "max_n=2" in msg and "n=5" in msg
    # either alone, or max_n above n, is as before
    assert Ensemble("openai/sim", api_base=url, max_n=2, stop="bayes",
                    choices=["L", "R"]).stop_spec.max_n == 2
    assert Ensemble("openai/sim", api_base=url, n=3, max_n=9, stop="bayes",
                    choices=["L", "R"]).stop_spec.max_n == 9


def test_an_unknown_role_is_refused_before_it_is_sent():
    with SimulatedServer(lam1=3.0) as srv, \
            Ensemble("openai/sim", api_base=srv.base_url, n=1, choices=["L", "R"]) as ens:
        with pytest.raises(InputError) as info:
            ens.decide([{"role": "wizard", "content": Q}])
        assert srv.stats.requests == 0
        msg = _one_line(info)
        assert "'wizard'" in msg and "user" in msg and "assistant" in msg
        for role in ("system", "developer", "user"):  # the roles a chat API takes still go
            assert ens.decide([{"role": role, "content": Q}]).n_samples == 1


def test_choices_equal_but_for_surrounding_spaces_are_refused(url):
    """A reply is read with its spaces stripped, so "a " could never win against "a"."""
    with pytest.raises(InputError) as info:
        Ensemble("openai/sim", api_base=url, n=1, choices=["a", "a "])
    assert "'a'" in _one_line(info) and "'a '" in str(info.value)


def test_a_pilot_of_no_votes_is_refused_when_made():
    with pytest.raises(InputError) as info:
        CostSpec(pilot=(0, 0))
    assert "pilot" in _one_line(info) and "prices" in str(info.value)
    CostSpec(pilot=(0, 0), prices=(1e-4, 2e-4))  # priced without a pilot: fine
    CostSpec(pilot=(1, 0))


@pytest.mark.parametrize("spec, expect", [
    (CostSpec(prices=(1e-4,)), "prices"),
    (CostSpec(prices=(1e-4, 2e-4, 3e-4)), "prices"),
    (CostSpec(pilot=(2, 2, 2)), "pilot"),
    # a member the pilot gives no vote is priced at its own rates (tests/cost/test_vote_price.py),
    # but a given prior draws no pilot, so no sample tells a vote's length
    (CostSpec(prior=JointPrior.of([[0.9, 0.95]])), "given prior draws no pilot"),
])
def test_a_cost_spec_that_does_not_fit_the_members_is_refused_at_construction(url, spec,
                                                                              expect):
    """Wrong-length prices were accepted until the first decide."""
    with pytest.raises(InputError) as info:
        Ensemble(members=_members(url), stop=spec, choices=["L", "R"])
    msg = _one_line(info)
    assert expect in msg and "2 members" in msg, msg


def test_a_folder_as_the_store_says_it_is_a_folder(url, tmp_path):
    """`store="/tmp"` said "unable to open database file" at the first decide."""
    with pytest.raises(InputError) as info:
        Ensemble("openai/sim", api_base=url, n=1, choices=["L", "R"], store=tmp_path)
    msg = _one_line(info)
    assert "is a folder" in msg and "samples.sqlite" in msg


def test_deciding_after_close_opens_again_as_documented(tmp_path):
    """close() releases the event loop, providers and store; a later decide opens them again
    (documented on `close`): nothing is lost and nothing is asked twice."""
    with SimulatedServer(lam1=3.0) as srv:
        ens = Ensemble("openai/sim", api_base=srv.base_url, n=2, choices=["L", "R"],
                       store=tmp_path / "s.sqlite")
        first = ens.decide(Q)
        ens.close()
        sent = srv.stats.requests
        again = ens.decide(Q)  # the reopened store serves the same samples
        ens.close()
        assert srv.stats.requests == sent
        assert [s.text for s in again.samples] == [s.text for s in first.samples]
    assert "again" in (Ensemble.close.__doc__ or "")
