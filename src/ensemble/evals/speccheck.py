"""A run spec checked whole (`check`): beyond its fields' own checks (`evals.specfields`), a
one-model grid (n at the top) or an ensemble (n per member), whole, with samples enough for its
n, every rule it names registered, its members distinct; a calibration's spec one model at
distinct temperatures, with nothing an eval scores. Each refusal is one InputError line naming
the field as the user gave it (its flag, or FILE: field) and the fix. Every spec `evals.spec`
makes, and every plan `evals.plan.resolve` makes, is checked here.
"""

from __future__ import annotations

from ensemble.errors import InputError
from ensemble.wording import unprintable

from .intervals import check_bootstrap
from .specfields import FLAGS, MemberSpec, RunSpec

__all__ = ["EVAL_ONLY", "check"]


def check(spec: RunSpec, where: str | None, *, flags: tuple[str, ...] = ()) -> None:
    """The one validation of a run spec beyond its fields' own: a one-model grid (n at the top)
    or an ensemble (n per member), whole, with samples enough for its n; else one InputError
    line naming the field (of the file `where`, or the flag: `flags`, or None) and the fix."""
    at = where or "the command line"

    def name(field: str) -> str:  # as the user gave it: its flag, or FILE: field
        return FLAGS[field] if where is None or field in flags else f"{where}: {field}"

    _check_text(spec, where)
    if spec.kind == "calibration":
        _check_calibration(spec, at)
        return
    if spec.bootstrap is not None:
        # checked here, not by the field: a run recorded with fewer (before this was checked)
        # still reads, and is refused only when it is run again
        check_bootstrap(spec.bootstrap,
                        name="--bootstrap" if where is None else f"{where}: bootstrap")
    if spec.fit is not None:
        raise InputError(f"{at}: fit is a calibration's (its mode, bias, ...): drop it, or give "
                         '"kind": "calibration" and run it with `ensemble calibrate --spec`')
    _check_names(spec, at)
    has = [i for i, m in enumerate(spec.members) if m.n is not None]
    if spec.n is not None and has:
        raise InputError(f"{at}: n is given at the top and for members.{has[0]}: give each "
                         "member its own n (they vote together as an ensemble) or n at the top "
                         "(each member alone at each n: one model at several temperatures), "
                         "not both")
    if spec.ensemble:
        if len(has) < len(spec.members):
            i = next(i for i, m in enumerate(spec.members) if m.n is None)
            raise InputError(f"{at}: members.{i} has no n: give every member of an ensemble "
                             "its votes per decision")
        if spec.lam1 is not None:
            raise InputError(f"{at}: lam1 is one model's λ₁: give each member its lam or "
                             "calibration")
        # every stopping rule applies: the cost rule chooses among the members, the others
        # read their pooled votes (as Ensemble(members=..., stop=NAME) draws)
        if spec.max_n is not None:
            raise InputError(f"{at}: max_n is one model's budget; an ensemble's members each "
                             "give at most their own n")
        for g, m in enumerate(spec.members):
            k = m.samples or max(m.n or 1, spec.samples or m.n or 1)
            if k < (m.n or 1):
                raise InputError(f"{at}: members.{g}.samples {k} is smaller than its n "
                                 f"({m.n}); draw at least n samples")
        _check_distinct(spec, at)
        return
    if spec.n is None:
        raise InputError(f'{at}: give n: at the top, e.g. "n": [1, 3, 5] (each member '
                         "alone at each n), or per member (they vote together)")
    if any(n < 1 for n in spec.n):
        raise InputError(f"{name('n')}: group sizes must be integers >= 1")
    again = sorted({n for n in spec.n if spec.n.count(n) > 1})
    if again:
        raise InputError(f"{name('n')}{':' if name('n') != '--n' else ''} {again[0]} is given "
                         "twice: each group size is one row of the table; give each once")
    from ensemble.stopping import stop_rule_names

    one = stop_rule_names(over_members=False)
    bad = [r for r in spec.adaptive or () if r not in one]
    if bad:
        raise InputError(f"{name('adaptive')} takes {', '.join(one)} for one model, got "
                         f"{bad[0]!r}"
                         + (f" ({bad[0]} chooses among an ensemble's members: give each its "
                            "n in a --spec file)" if bad[0] in stop_rule_names() else ""))
    _check_one_model(spec, where)
    if spec.k() < max(spec.n):
        raise InputError(f"{name('samples')} {spec.k()} is smaller than the largest n "
                         f"({max(spec.n)}); draw at least as many samples as the group size")
    if spec.max_n is not None and spec.max_n > spec.k():
        raise InputError(f"{name('max_n')} {spec.max_n} is more than the samples drawn per "
                         f"question ({name('samples').removeprefix(f'{where}: ')} {spec.k()}): "
                         f"draw at least {name('max_n').removeprefix(f'{where}: ')} samples")


# what only an eval's spec says: a calibration fits single answers, it takes no vote
EVAL_ONLY = ("n", "aggregators", "lam1", "calibration", "open", "answer", "bootstrap",
             "adaptive", "max_n", "stop_cost", "value_usd", "cost_credit")


def _check_text(spec: RunSpec, where: str | None) -> None:
    """Members' model strings and labels, shown in tables, reports and the run folder's name,
    hold no control character (`wording.unprintable`)."""
    for i, m in enumerate(spec.members):
        for field, text in (("model", m.model), ("label", m.label)):
            problem = None if text is None else unprintable(
                text, f"{where}: members.{i}.{field}" if where is not None
                else "--model" if field == "model" else f"members.{i}.{field}")
            if problem is not None:
                raise InputError(problem)


def _check_distinct(spec: RunSpec, at: str) -> None:
    """Members with distinct labels (`label`, else model@t), each drawing its own samples."""
    from ensemble.providers.endpoints import normalise_api_base

    labels: dict[str, int] = {}
    draws: dict[tuple[str, str | None, float], int] = {}
    for i, m in enumerate(spec.members):
        label = m.label or f"{m.model}@t={m.temperature:g}"
        key = (m.model, normalise_api_base(m.api_base) if m.api_base else None, m.temperature)
        if key in draws:
            raise InputError(f"{at}: members {draws[key]} and {i} are {m.model} at t = "
                             f"{m.temperature:g}: they would share the stored samples; give "
                             "one member with n = the sum of theirs")
        if label in labels:
            raise InputError(f"{at}: members {labels[label]} and {i} have the same label "
                             f"{label!r}: give each member its own \"label\" (the tables "
                             "name members by it)")
        labels[label], draws[key] = i, i


def _check_calibration(spec: RunSpec, at: str) -> None:
    """A calibration's spec: one model (one endpoint) at distinct temperatures, nothing an
    eval scores, a target accuracy only with an eval run to read it from."""
    from ensemble.providers.endpoints import normalise_api_base

    extra = [f for f in EVAL_ONLY if getattr(spec, f) is not None]
    if extra:
        raise InputError(f"{at}: a calibration takes no {extra[0]} (it fits λ on single "
                         "answers; it takes no vote): drop it")
    first = spec.members[0]
    where = (first.model, normalise_api_base(first.api_base) if first.api_base else None)
    seen: set[float] = set()
    for i, m in enumerate(spec.members):
        if (m.model, normalise_api_base(m.api_base) if m.api_base else None) != where:
            raise InputError(f"{at}: members.{i} is another model or endpoint ({m.model}): a "
                             "calibration fits one model; calibrate each on its own")
        bad = [f for f in ("n", "lam", "calibration", "samples", "label", "price_per_1k")
               if getattr(m, f) is not None]
        if bad:
            raise InputError(f"{at}: members.{i}.{bad[0]}: a calibration's members are its "
                             "model's temperatures (model, api_base, temperature)")
        if m.temperature in seen:
            raise InputError(f"--t {m.temperature:g} is given twice: each temperature is fitted "
                             "once (and λ(t) = λ₁/t is tested across distinct ones); give each "
                             "once")
        seen.add(m.temperature)
    fit = spec.fit
    if fit is not None and fit.target_accuracy is not None and not fit.eval_dir:
        raise InputError("--target-accuracy needs --eval-dir: the accuracy of a vote depends on "
                         "your task, so give an `ensemble eval` run of it at these temperatures")


def _check_names(spec: RunSpec, where: str) -> None:
    """Every rule and stopping rule the spec names is registered (one line listing them)."""
    from ensemble.rules import aggregator_names
    from ensemble.stopping import stop_rule_names

    for field, names, known in (("aggregators", spec.aggregators, aggregator_names),
                                ("adaptive", spec.adaptive, stop_rule_names)):
        for i, name in enumerate(names or ()):
            if name not in known():
                raise InputError(f"{where}: {field}.{i}: unknown rule {name!r}; choose from "
                                 f"{', '.join(known())}")


def _check_one_model(spec: RunSpec, where: str | None) -> None:
    from ensemble.providers.endpoints import normalise_api_base

    def endpoint(m: MemberSpec) -> tuple[str, str | None]:
        return m.model, normalise_api_base(m.api_base) if m.api_base else None

    at = where or "the command line"
    first = spec.members[0]
    seen: dict[float, int] = {}
    for i, m in enumerate(spec.members):
        if endpoint(m) != endpoint(first):
            raise InputError(f"{at}: n at the top scores one model at several temperatures, "
                             f"and members.{i} is another model or endpoint ({m.model}): give "
                             "each member its own n to score them together, or run each model "
                             "on its own and compare the runs")
        extra = [f for f in ("lam", "calibration", "samples", "label") if getattr(m, f)]
        if extra:
            top = {"lam": "lam1", "calibration": "calibration", "samples": "samples"}
            raise InputError(f"{at}: members.{i}.{extra[0]}: a member of one model's run (n "
                             "at the top) takes model, api_base and temperature; "
                             + (f"give {top[extra[0]]} at the top" if extra[0] in top
                                else "its rows are named by their temperature"))
        if m.temperature in seen:
            if where is None:
                raise InputError(f"--t {m.temperature:g} is given twice: each temperature is "
                                 "one member of the run; give each once")
            raise InputError(f"{where}: members.{seen[m.temperature]} and {i} are both t = "
                             f"{m.temperature:g}: give each temperature once")
        seen[m.temperature] = i
    if spec.calibration is not None and len(spec.calibration) != 1:
        raise InputError(f"{at}: one model's run takes one calibration profile (its λ₁), "
                         f"got {len(spec.calibration)}")
