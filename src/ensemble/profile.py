"""Calibration profiles: what `ensemble calibrate` measured about one model, as a file.

`ensemble calibrate` writes `profile.json` into its output folder; `CalibrationProfile.load(path)`
reads it back. A profile names the model and its endpoint (`api_base`, never a key), holds λ₁
(the rationality at t = 1, from the joint fit of λ(t) = λ₁/t) with its 95% interval, the fit at
each measured temperature, the bias if one was fitted, the task, the sample counts, the date and
the version of `ensemble` that wrote it.

    prof = CalibrationProfile.load("runs/calibrate-openai-gpt-4o-mini/profile.json")
    prof.lam_at(0.5)        # λ₁ / 0.5 (ψ_λ units); ∞ at t = 0; the measured λ at 0.5 if
                            # this calibration rejected λ₁/t (lam_choice says which)
    prof.fit_at(0.5)        # the fit measured at t = 0.5, or None

λ is in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units. On disk ±∞ are written as `ensemble.jsonio` writes
them everywhere: `null` plus a sibling `k_inf: "+" | "-"` (`{"lam": null, "lam_inf": "+"}`).
`CalibrationProfile.model_json_schema()` is the schema of the model in memory; the file has, in
addition, those `_inf` siblings next to any infinite number. Every field is declared (a field
the model does not know is refused on loading), and `schema_version` says the file's format
(`ensemble.jsonio.upgrade`): a profile of a newer format is refused in one line.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InputError

__all__ = ["PROFILE_FILE", "CalibrationProfile", "TemperatureFit", "public_api_base"]

PROFILE_FILE = "profile.json"
SCHEMA_VERSION = 2  # 2: each fit says what its interval is (`TemperatureFit.interval`)


class TemperatureFit(BaseModel):
    """The quantal-response fit at one temperature (λ in ψ_λ units; bias on the logit scale)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    t: float
    lam: float = Field(description="λ at this temperature; +∞ when the answers are separated")
    ci: tuple[float, float] = Field(description="95% interval; one-sided [bound, ∞] if separated")
    se: float | None = None
    separated: bool = False
    bias: float | None = None
    bias_se: float | None = None
    n_questions: int = 0
    n_valid: int = 0
    gof_pvalue: float | None = None
    interval: str | None = Field(
        None, description="what `ci` is (profile likelihood for sampled answers, clustered by "
                          "question for logprobs); None: written before format 2")


class CalibrationProfile(BaseModel):
    """One model's calibration: λ₁ with its interval, the per-temperature fits, the context."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = Field(default=SCHEMA_VERSION, description="the file's format")
    model: str
    api_base: str | None = Field(None, description="the endpoint calibrated (never a key)")
    endpoint: str | None = Field(
        None, description="where the samples came from: the normalised api_base, or a local "
                          "model's weights checksum (None: the provider's public endpoint)")
    task: str = "boxball"
    data: str | None = Field(None, description="the task's data file (user tasks)")
    mode: str = "sample"
    lam1: float | None = Field(None, description="λ at t = 1 (λ(t) = λ₁/t); None if not fitted")
    lam1_ci: tuple[float, float] | None = None
    lam1_se: float | None = None
    lam1_source: str | None = Field(
        None, description="'joint' (fitted over the temperatures, with the λ₁/t test) or "
                          "'t=T' (from the single finite fit at T; λ₁/t assumed, not tested)")
    lrt_pvalue: float | None = Field(None, description="test of λ₁/t against a free λ per t")
    law_holds: bool | None = Field(None, description="λ₁/t not rejected at the 5% level")
    bias: float | None = Field(None, description="the joint fit's bias (logit scale), if fitted")
    fits: list[TemperatureFit] = []
    questions: int = 0
    samples_per_question: int = 0
    valid_answers: int = 0
    seed: int | None = None
    created: str = Field(description="UTC date and time the profile was written, ISO 8601")
    version: str = Field(description="version of ensemble that wrote it")

    # -- use ---------------------------------------------------------------------------------
    def lam_at(self, t: float) -> float:
        """λ at temperature t (ψ_λ units): `lam_choice(t)`'s λ, without where it came from."""
        return self.lam_choice(t)[0]

    def lam_choice(self, t: float) -> tuple[float, str]:
        """(λ at temperature t in ψ_λ units, where it comes from).

        - t = 0: ∞ (greedy decoding).
        - λ₁/t not rejected (or not tested): λ₁ / t.
        - λ₁/t rejected by this calibration, t measured: the λ measured at t (`fit_at(t)`),
          the number the report recommends; no warning.
        - λ₁/t rejected, t not measured: λ₁ / t with a `UserWarning`: nothing better is known
          there, but the data contradict the law that carries λ₁ to t; calibrate at t.
        """
        from .qr import validate_temperature

        t = validate_temperature(t)
        if t == 0:
            return math.inf, "t = 0 (greedy decoding): λ = ∞"
        rejected = self.law_holds is False
        fit = self.fit_at(t)
        if rejected and fit is not None:
            return fit.lam, (f"measured at t = {t:g} (λ₁/t rejected, p = "
                             f"{self.lrt_pvalue:.3g}, so not λ₁/t)")
        if self.lam1 is None:
            measured = ", ".join(f"{f.t:g}" for f in self.fits) or "none"
            raise InputError(f"profile of {self.model} has no λ₁ (it needs a finite λ at a "
                             f"temperature > 0; measured t: {measured}); calibrate at t = 1")
        if rejected:
            measured = ", ".join(f"{f.t:g}" for f in self.fits)
            warnings.warn(f"the calibration of {self.model} rejected λ(t) = λ₁/t (LRT p = "
                          f"{self.lrt_pvalue:.3g}) and did not measure t = {t:g} (measured: "
                          f"{measured}): using λ₁/t = {self.lam1 / t:.4g}, an extrapolation the "
                          f"data contradict; calibrate at t = {t:g}", UserWarning, stacklevel=3)
            return self.lam1 / t, (f"λ₁ = {self.lam1:.4g} / t = {t:g} (λ₁/t rejected and t "
                                   "not measured: an extrapolation)")
        return self.lam1 / t, f"λ₁ = {self.lam1:.4g} / t = {t:g}"

    def fit_at(self, t: float) -> TemperatureFit | None:
        """The fit measured at temperature t (within 1e-9), or None."""
        return next((f for f in self.fits if abs(f.t - t) <= 1e-9), None)

    # -- files -------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CalibrationProfile:
        """Read a profile file (or the profile.json of a calibration folder)."""
        import json

        from .jsonio import from_jsonable, upgrade

        p = Path(path)
        if p.is_dir():
            p = p / PROFILE_FILE
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"calibration profile not found: {p} (run `ensemble calibrate`, "
                             "which writes profile.json into its --out folder)") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read calibration profile {p}: {exc}") from None
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise InputError(f"calibration profile {p} is not JSON ({exc}); rerun "
                             "`ensemble calibrate` to rewrite it") from None
        doc = from_jsonable(upgrade(raw, current=SCHEMA_VERSION, migrations={1: _from_1},
                                    where=f"calibration profile {p}",
                                    fix="rerun `ensemble calibrate` to rewrite it"))
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "document"
            raise InputError(f"calibration profile {p} is malformed: {where}: {err['msg']}; "
                             "rerun `ensemble calibrate` to rewrite it") from None

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the profile as JSON (±∞ as null plus a `_inf` marker); returns the path."""
        from .jsonio import dumps, write_atomic

        p = Path(path)
        if p.is_dir():
            p = p / PROFILE_FILE
        write_atomic(p, dumps(self.model_dump(mode="python"), indent=2) + "\n")
        return p

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema of the profile (the file adds `k_inf` siblings for ±∞)."""
        return cls.model_json_schema()


def _from_1(doc: dict[str, Any]) -> dict[str, Any]:
    """A profile of format 1 (to 2026-11-27): its fits do not say what their interval is,
    which reads as unknown (None): nothing to change."""
    return doc


def public_api_base(url: str | None) -> str | None:
    """The endpoint without credentials: user:password@ and the query string are dropped."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
