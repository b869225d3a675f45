import math

import numpy as np
import pytest

from ensemble.errors import InputError
from ensemble.qr import lam_at_temperature, psi, psi_inverse, temperature_for_lam


def test_psi_units_match_the_definition():
    # ψ_λ(p) = 1/(1+exp(2λ(1−2p))): at λ = 2.5, p = 0.4 the exponent is 2*2.5*0.2 = 1.
    assert psi(0.4, 2.5) == pytest.approx(1 / (1 + math.e))
    assert psi(0.0, 2.5) == pytest.approx(1 / (1 + math.exp(5)))
    assert psi(0.5, 7.0) == 0.5


def test_psi_limits_are_exact():
    p = np.array([0.0, 0.3, 0.5, 0.7, 1.0])
    np.testing.assert_array_equal(psi(p, math.inf), [0, 0, 0.5, 1, 1])
    np.testing.assert_array_equal(psi(p, 0.0), [0.5] * 5)
    # large λ does not overflow
    assert psi(0.0, 1e6) == 0.0 and psi(1.0, 1e6) == 1.0


def test_psi_inverse_roundtrip():
    p = np.linspace(0.01, 0.99, 25)
    np.testing.assert_allclose(psi_inverse(psi(p, 3.0), 3.0), p, atol=1e-12)
    with pytest.raises(InputError):
        psi_inverse(0.3, math.inf)


def test_temperature_link():
    assert lam_at_temperature(8.93, 1.0) == pytest.approx(8.93)
    assert lam_at_temperature(10.0, 0.5) == pytest.approx(20.0)
    assert math.isinf(lam_at_temperature(10.0, 0.0))
    assert temperature_for_lam(10.0, 20.0) == pytest.approx(0.5)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "abc"])
def test_bad_lambda_is_an_input_error(bad):
    with pytest.raises(InputError, match="lam"):
        psi(0.5, bad)
