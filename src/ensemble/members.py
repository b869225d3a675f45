"""Members of a mixed ensemble, and the λ each one votes with.

A `Member` is one model at one temperature, drawn `n` times per decision, behind its own
endpoint (and so its own process-wide limits). An ensemble of members pools their votes; the
rules that weigh members (`lam-weighted`, `robust` with groups) need each member's λ, in
ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units, which comes from, in this order:

1. `Member(lam=...)`: typed in;
2. `Member(calibration=PATH)`: that profile's λ at the member's temperature
   (`CalibrationProfile.lam_choice`): λ₁ / t, or, when that calibration rejected λ₁/t, the λ
   it measured at this temperature (λ₁ / t with a warning at a temperature it did not measure);
3. `calibration=PATH or [PATHS]` given to the ensemble: the profile whose (model, api_base)
   match the member's; no match is an error that names what the profiles hold;
4. none: λ unknown (`None`), fine for plurality and majority.

The theory treats members as groups of experts with one shared signal structure that differ
only in λ: exact for one model at several temperatures, an approximation for different models
(docs/ensembles.md).

    from ensemble import Member, resolve_members
    members = resolve_members([Member("openai/gpt-4o", n=1, temperature=0.3),
                               Member("openai/gpt-4o-mini", n=4, temperature=1.0)],
                              calibration=["runs/calibrate-a", "runs/calibrate-b"])
    members[0].lam, members[0].lam_source
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError
from .providers.options import ProviderOptions, check_keywords
from .wording import unprintable

__all__ = ["Member", "load_profiles", "profile_for", "resolve_members"]

PathLike = str | os.PathLike[str]
_MEMBER_NAMES = ("n", "temperature", "lam", "calibration", "options")


@dataclass(frozen=True)
class Member:
    """One model at one temperature, `n` votes per decision, behind its own endpoint.

    `lam` (ψ_λ units, at this temperature) or `calibration` (a profile file or calibration
    folder) give its λ; `options` / provider keywords (api_base, api_key, timeout, rpm, ...) its
    endpoint and limits. The key is never shown in repr.
    """

    model: str
    n: int = 1
    temperature: float = 0.7
    lam: float | None = None
    calibration: str | None = None
    options: ProviderOptions = field(default_factory=ProviderOptions)
    lam_source: str | None = field(default=None, compare=False)

    def __init__(self, model: str, *, n: int = 1, temperature: float = 0.7,
                 api_base: str | None = None, api_key: str | None = None,
                 lam: float | None = None, calibration: PathLike | None = None,
                 options: ProviderOptions | None = None, **provider: Any) -> None:
        from .qr import validate_temperature

        if not isinstance(model, str) or not model.strip():
            raise InputError("Member: model must be a litellm model string such as "
                             "openai/gpt-4o-mini")
        problem = unprintable(model, "Member: model")
        if problem is not None:
            raise InputError(problem)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"Member({model!r}): n must be an integer >= 1, got {n!r}")
        check_keywords(provider, (*ProviderOptions.names(), *_MEMBER_NAMES),
                       where=f"Member({model!r})")
        if lam is not None:
            if isinstance(lam, bool) or not isinstance(lam, (int, float)) or math.isnan(lam):
                raise InputError(f"Member({model!r}): lam must be a number (ψ_λ units), "
                                 f"got {lam!r}")
        opts = ProviderOptions.build(options, api_base=api_base, api_key=api_key, **provider)
        set_ = object.__setattr__
        set_(self, "model", model)
        set_(self, "n", n)
        set_(self, "temperature", validate_temperature(temperature))
        set_(self, "lam", None if lam is None else float(lam))
        set_(self, "calibration", None if calibration is None else os.fspath(calibration))
        set_(self, "options", opts)
        set_(self, "lam_source", "given" if lam is not None else None)

    @property
    def api_base(self) -> str | None:
        return self.options.endpoint.api_base

    def __repr__(self) -> str:
        lam = "None" if self.lam is None else f"{self.lam:.4g}"
        base = f", api_base={self.api_base!r}" if self.api_base else ""
        return (f"Member({self.model!r}, n={self.n}, temperature={self.temperature:g}{base}, "
                f"lam={lam})")

    def with_lam(self, lam: float, source: str) -> Member:
        """This member with λ (ψ_λ units, at its temperature) and where λ came from."""
        return self._copy(lam=float(lam), lam_source=source)

    def _copy(self, **changes: Any) -> Member:
        # dataclasses.replace would call the keyword-only __init__ with field names
        m = object.__new__(Member)
        for f in ("model", "n", "temperature", "lam", "calibration", "options", "lam_source"):
            object.__setattr__(m, f, changes.get(f, getattr(self, f)))
        return m


def load_profiles(calibration: PathLike | Sequence[PathLike] | None) -> list[Any]:
    """`CalibrationProfile`s from a path, a calibration folder, or a list of them."""
    from .profile import CalibrationProfile

    if calibration is None:
        return []
    paths = [calibration] if isinstance(calibration, (str, os.PathLike)) else list(calibration)
    return [(os.fspath(p), CalibrationProfile.load(p)) for p in paths]


def _lam_from(profile: Any, member: Member, path: str) -> Member:
    lam, source = profile.lam_choice(member.temperature)
    return member.with_lam(lam, f"{path}: {source}")


def profile_for(profiles: Sequence[tuple[str, Any]], model: str, api_base: str | None, *,
                fix: str) -> tuple[str, Any]:
    """The newest of `profiles` ((path, CalibrationProfile) pairs) calibrated for `model` at
    `api_base` (matched as the store keys endpoints: the public base URL); InputError naming
    what the profiles hold and the fix (`fix`: the caller's other way to give λ) when none is."""
    from .profile import public_api_base

    want = (model, public_api_base(api_base))
    hits = [(p, prof) for p, prof in profiles
            if (prof.model, public_api_base(prof.api_base)) == want]
    if not hits:
        held = "; ".join(f"{p}: {prof.model} at {prof.api_base or 'its provider'}"
                         for p, prof in profiles)
        where = public_api_base(api_base) or "its provider"
        raise InputError(f"no calibration profile for {model} at {where} (the profiles hold "
                         f"{held}); calibrate it with `ensemble calibrate --model {model}"
                         + (f" --api-base {where}`" if api_base else "`") + f", {fix}")
    return max(hits, key=lambda h: h[1].created)  # the newest calibration


def resolve_members(members: Sequence[Member],
                    calibration: PathLike | Sequence[PathLike] | None = None) -> tuple[Member, ...]:
    """Each member with its λ (ψ_λ units, at its temperature) filled in where it can be: typed
    in, from its own `calibration=`, or from the profile in `calibration` that matches its
    (model, api_base). A member that matches no profile, when profiles are given, is an error
    naming what the profiles hold (a member with λ typed in or its own profile needs none)."""
    if isinstance(members, Member):
        members = [members]
    if not members:
        raise InputError("an ensemble needs at least one Member")
    for m in members:
        if not isinstance(m, Member):
            raise InputError(f"members must be Member(...) objects, got {type(m).__name__}")
    profiles = load_profiles(calibration)
    out: list[Member] = []
    for m in members:
        if m.lam is not None:
            out.append(m)
        elif m.calibration is not None:
            (path, prof), = load_profiles(m.calibration)
            out.append(_lam_from(prof, m, path))
        elif profiles:
            path, prof = profile_for(profiles, m.model, m.api_base,
                                     fix="or give Member(lam=...) or Member(calibration=...)")
            out.append(_lam_from(prof, m, path))
        else:
            out.append(m)
    return tuple(out)
