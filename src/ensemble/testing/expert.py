"""The planted expert: what the simulated server and the in-process fake provider answer.

One module, two doors: `SimulatedServer` (real HTTP on 127.0.0.1) and `FakeExpertProvider`
(in-process, no port) both call `SimulatedExpert.reply`, so a test gets the same answers
through either.

Box-and-ball prompts (the paper's format, `ensemble.boxball`): the expert answers "L" with
probability F(2λ(2p − 1) + bias), with λ = λ₁ / t, p the exact posterior the prompt implies
and F the link; `bias_form="scaled"` divides the bias by t too, F((2λ₁(2p − 1) + bias)/t), as
sampling at temperature t does to a preference that is part of the model's scores (the default
"fixed" adds the same bias at every t, like a preference added after the temperature); F is
the logistic (`link="logit"`, quantal response: F(z) = 1/(1+e^−z), so the bias 0 case is
ψ_λ(p)) or the probit with the logistic's slope at p = 1/2 (`link="probit"`:
F(z) = Φ(√(π/8)·z), an expert that is *not* quantal-response, for goodness-of-fit checks).
At t = 0 it answers the argmax (a fair coin at p = 1/2 without bias; with a scaled bias the
argmax of 2λ₁(2p − 1) + bias, so the bias moves the threshold). With `logprobs`, the
first answer token carries the sample's own belief over L and R in its top_logprobs (below).

Multiple-choice prompts (the paper's MathQA prompt: "### Question:" ... "### Options:" with
lines "A) ..."), or any prompt listed in `answer_key` by `prompt_hash`: each question q has,
deterministically from hash(seed, question), a reading accuracy ρ_q ~ Beta(a, b) and a
distractor option d_q ≠ correct. At t > 0 each sample independently reads the question
correctly with probability ρ_q (otherwise it reads the distractor), then answers by quantal
response among the K options with λ = λ₁/t: P(j) ∝ exp(2λ u_j), u = +1 for the option read, −1
for the others. At t = 0 one frozen reading per question is repeated by every sample. So one
greedy answer is right with probability E[ρ], and a plurality of several samples at moderate t
is right whenever ρ_q > 1/2: at n = 1 higher t hurts, at n ≥ 3 a moderate t helps (the paper's
pattern). `answer_key` maps the question text (between "### Question:" and "### Options:",
whitespace-normalised), or "sha256:" + the digest of the whole prompt, to the correct letter.

Shared difficulty (`difficulty_seed`): experts given the same difficulty seed share each
question's difficulty and its one distractor, drawn from hash(difficulty_seed, question) instead
of their own seed: a question's reading accuracy is the Beta(a, b) quantile of one shared
uniform u_q (ρ_q = I⁻¹_{a,b}(u_q)), so a question hard for one expert is hard for every expert
of the seed, each by its own Beta(a, b). A cheap expert (say Beta(3, 2)) then gets its hardest
questions wrong most of the time, its samples agreeing on the question's one distractor, where a
strong one (Beta(12, 1)) still reads them right: correlated errors, as real models make them.
Box-and-ball prompts read the same way under a difficulty seed: with probability 1 − ρ_q a
sample reads the other box's posterior, 1 − p (the one distractor), then answers by quantal
response; without a difficulty seed they are read exactly, as before.

Other prompts that offer answers (`listed_choices`): "Is this review positive or negative?",
"Answer yes or no", "Answer with one of: red, green, blue", "options: a/b/c". They follow the
same accuracy model with those answers as the options, answered as `<answer>positive</answer>`;
the correct one is `answer_key[prompt_hash(prompt)]` (matched without case) when the key has
the prompt, else one of them fixed by hash(seed, prompt). Any other prompt gets a generic reply
whose answer is "OK".

Chain beliefs (`ChainBeliefs`: what a sample's answer-token logprobs say). Each sample is one
chain of reasoning with its own belief b over the options, and its answer-token `top_logprobs`
are log b. With the question's quantal-response distribution π (box-ball: (ψ, 1 − ψ) at the
question's posterior; multiple choice and listed answers: π = ρ_q·QR(correct) + (1 − ρ_q)·
QR(distractor), the answer's distribution with the reading marginalised), the informative
beliefs (the default) are b ~ Dirichlet(κ·π) with the answer drawn from b: a Dirichlet-
categorical chain. The answers are drawn exactly as without beliefs (marginally π: every
answer, test and benchmark of the hard votes is unchanged) and b is drawn after them from its
conditional, Dirichlet(κ·π + e_answer), on a stream of its own, so E[b] = π exactly and a
belief's variance is π(1 − π)/(κ + 1), a hard vote's π(1 − π). The chain noise κ is fixed at
`CHAIN_KAPPA` = 1 (documented before any soft-vote measurement, not tuned to one): most chains
are confident in what they answer (Beta(0.7, 0.3)-like beliefs piled near 0 and 1, as answer
tokens after reasoning are), and one belief carries as much about π as two hard votes. κ = ∞
is the old behaviour (every sample reports π itself). `mode="noise"`: the logprobs carry no
signal beyond the sample's own answer: b(answer) is uniform on [1/K, 1], independent of the
question, the rest split equally among the other options. At t = 0 every belief is the one-hot
greedy answer.

Every draw is a deterministic function of (seed, messages, temperature, sample index), so runs
interrupted and resumed, or drawn through a Batch API, equal unbroken ones.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..boxball import posterior_from_prompt
from ..errors import InputError
from .openexpert import OpenAnswers, StructuredPlan, prompt_hash
from .seeds import seeded_rng
from .toolexpert import FormatPlan, ToolPlan, forced_tool, tool_call_of

__all__ = ["BELIEF_MODES", "BIAS_FORMS", "CHAIN_KAPPA", "LINKS", "ChainBeliefs", "MCModel",
           "Reply", "SimulatedExpert",
           "answer_key_from_questions", "listed_choices", "prompt_hash", "prompt_key",
           "question_text"]

LINKS = ("logit", "probit")
BIAS_FORMS = ("fixed", "scaled")
_QUESTION = re.compile(r"### Question:\s*(.*?)\s*### Options:\s*(.*?)(?:\n\s*\n|###|$)", re.DOTALL)
_OPTION = re.compile(r"^\s*\(?([A-Z])\)", re.MULTILINE)
_PROBIT_SCALE = math.sqrt(math.pi / 8.0)  # Φ(s·z) has the logistic's slope 1/4 at z = 0


_WORD = r"[A-Za-z][\w'-]*"
# "one of: a, b, c" / "options: a, b or c" / "choose from a/b/c"
_LIST = re.compile(r"(?:one of|choose from|choices?|options?|answers?)\s*(?:is|are)?\s*:?\s*"
                   rf"({_WORD}(?:\s*(?:,|/|\bor\b|,\s*or\b)\s*{_WORD})+)", re.IGNORECASE)
# "positive or negative", "yes, no or maybe"
_OR = re.compile(rf"\b({_WORD}(?:\s*,\s*{_WORD})*\s*,?\s+or\s+{_WORD})\b")
_SPLIT = re.compile(r"\s*(?:,\s*or\b|,|/|\bor\b)\s*", re.IGNORECASE)


def listed_choices(prompt: str) -> list[str]:
    """The answers a free-form prompt offers, in order: after "one of:", "options:",
    "choices:" or "choose from" (comma, slash or "or" separated), else the first "X or Y"
    ("yes, no or maybe"). Empty when it offers none (the server then replies "OK")."""
    m = _LIST.search(prompt) or _OR.search(prompt)
    if m is None:
        return []
    out: list[str] = []
    for word in _SPLIT.split(m.group(1)):
        word = word.strip()
        if word and word.lower() not in (w.lower() for w in out):
            out.append(word)
    return out if len(out) >= 2 else []


def _norm(text: str) -> str:
    return " ".join(text.split())


def question_text(prompt: str) -> str | None:
    """The question of a multiple-choice prompt in the paper's format, whitespace-normalised."""
    m = _QUESTION.search(prompt)
    return _norm(m.group(1)) if m else None


def prompt_key(messages: Any, temperature: float) -> str:
    """The expert's key of a prompt (`ServerStats.served` is keyed by (prompt_key, index))."""
    return hashlib.sha256(json.dumps([messages, float(temperature)], sort_keys=True)
                          .encode()).hexdigest()[:16]


def answer_key_from_questions(questions: Iterable[Any]) -> dict[str, str]:
    """An answer key from question objects with `.prompt` and `.correct` (e.g. `tasks.Question`).

    Each question is keyed by its question text (the paper's MathQA prompt) or, for prompts in
    other formats, by `prompt_hash` of the whole prompt. Ids are not used: the expert sees only
    the prompt.
    """
    key = {}
    for q in questions:
        if q.correct is None:
            continue
        text = question_text(q.prompt) or prompt_hash(q.prompt)
        key[text] = str(q.correct).upper()
    return key


BELIEF_MODES = ("informative", "noise")
#: the chain noise κ of the informative beliefs, fixed before measuring (module docstring)
CHAIN_KAPPA = 1.0


@dataclass(frozen=True)
class ChainBeliefs:
    """What each sample's answer-token logprobs say (module docstring, "Chain beliefs").

    mode: "informative" (b ~ Dirichlet(κ·π), the answer drawn from b) or "noise" (b's weight
    on the sample's own answer uniform on [1/K, 1], independent of the question).
    kappa: κ > 0, the chains' concentration around π (math.inf: every belief is π).
    """

    mode: str = "informative"
    kappa: float = CHAIN_KAPPA

    def __post_init__(self) -> None:
        if self.mode not in BELIEF_MODES:
            raise InputError(f"chain beliefs: mode must be one of {', '.join(BELIEF_MODES)}, "
                             f"got {self.mode!r}")
        k = self.kappa
        if isinstance(k, bool) or not isinstance(k, (int, float)) or math.isnan(k) or k <= 0:
            raise InputError(f"chain beliefs: kappa must be a number > 0 (or inf), got {k!r}")

    def draw(self, probs: Sequence[float] | np.ndarray, answer: int, rng: np.random.Generator
             ) -> list[float]:
        """The belief of a sample that answered option `answer` of a question whose answer
        distribution is `probs` (π)."""
        pi = np.clip(np.asarray(probs, dtype=float), 0.0, None)
        k = len(pi)
        if self.mode == "noise":
            conf = float(rng.uniform(1.0 / k, 1.0)) if k > 1 else 1.0
            out = [(1.0 - conf) / (k - 1)] * k if k > 1 else [1.0]
            out[answer] = conf
            return out
        if math.isinf(self.kappa):
            return [float(x) for x in pi / pi.sum()]
        alpha = self.kappa * pi / pi.sum()
        alpha[answer] += 1.0
        g = np.array([rng.standard_gamma(a) if a > 0 else 0.0 for a in alpha])
        if not g.sum() > 0:  # every gamma underflowed: the answer's share is all of it
            g = np.zeros(k)
            g[answer] = 1.0
        return [float(x) for x in g / g.sum()]


@dataclass(frozen=True)
class MCModel:
    """The multiple-choice accuracy model: reading accuracy ρ_q ~ Beta(a, b) per question."""

    a: float = 3.0
    b: float = 2.0


@dataclass(frozen=True)
class Reply:
    """One simulated completion: its text and, for binary prompts, log P(answer) per letter."""

    text: str | None
    logprobs: dict[str, float] | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()  # a reply that calls tools (text then None)


def _qr_options(k: int, read: int, lam: float) -> np.ndarray:
    """Quantal response among k options, utility +1 for the option read, −1 for the others."""
    logits = np.full(k, -2.0 * lam)
    logits[read] = 2.0 * lam
    probs = np.exp(logits - logits.max())
    return probs / probs.sum()


def _schema_of(response_format: Any) -> Mapping[str, Any] | None:
    if not isinstance(response_format, Mapping):
        return None
    js = response_format.get("json_schema")
    schema = js.get("schema") if isinstance(js, Mapping) else None
    return schema if isinstance(schema, Mapping) else None


class SimulatedExpert:
    """A planted expert. `lam1` is λ₁, the rationality at t = 1 in ψ_λ units (λ = λ₁ / t,
    greedy at t = 0); `bias` is added on the logit scale of P("L"), the same at every t
    (`bias_form="fixed"`) or divided by t with the rest of the logit (`"scaled"`); `link`
    "logit" (quantal response) or "probit";
    `mc_model` the multiple-choice reading accuracy; `invalid_rate` the
    share of replies without an answer; `posterior_of` reads a binary prompt's posterior (default:
    the paper's box-and-ball format); `beliefs` what each sample's answer-token logprobs say
    (`ChainBeliefs`: informative with κ = CHAIN_KAPPA by default, or noise)."""

    def __init__(self, *, lam1: float = 10.0, bias: float = 0.0, link: str = "logit",
                 answer_key: Mapping[str, str] | None = None, mc_model: MCModel | None = None,
                 invalid_rate: float = 0.0, seed: int = 0,
                 posterior_of: Any = None, open_answers: OpenAnswers | None = None,
                 structured: StructuredPlan | None = None, bias_form: str = "fixed",
                 difficulty_seed: int | None = None,
                 tools: ToolPlan | None = None, formats: FormatPlan | None = None,
                 beliefs: ChainBeliefs | None = None) -> None:
        if not (isinstance(lam1, (int, float)) and lam1 >= 0 and not math.isnan(lam1)):
            raise InputError(f"lam1 must be a number >= 0 (or inf), got {lam1!r}")
        if link not in LINKS:
            raise InputError(f"link must be one of {', '.join(LINKS)}, got {link!r}")
        if bias_form not in BIAS_FORMS:
            raise InputError(f"bias_form must be one of {', '.join(BIAS_FORMS)}, got "
                             f"{bias_form!r}")
        mc = mc_model or MCModel()
        if not (mc.a > 0 and mc.b > 0):
            raise InputError(f"the Beta(a, b) reading accuracy needs a, b > 0, got {mc.a}, {mc.b}")
        if not 0.0 <= invalid_rate <= 1.0:
            raise InputError(f"invalid_rate must lie in [0, 1], got {invalid_rate}")
        self.lam1 = float(lam1)
        self.bias = float(bias)
        self.bias_form = bias_form
        self.link = link
        self.answer_key = {_norm(k): v.upper() for k, v in (answer_key or {}).items()}
        self.mc = mc
        self.invalid_rate = float(invalid_rate)
        self.seed = int(seed)
        self.difficulty_seed = None if difficulty_seed is None else int(difficulty_seed)
        self.posterior_of = posterior_of or posterior_from_prompt
        self.open_answers = open_answers
        self.structured = structured
        self.tools = tools
        self.formats = formats
        self.beliefs = beliefs or ChainBeliefs()

    def lam(self, temperature: float) -> float:
        """λ at temperature t: λ₁ / t (∞ at t = 0)."""
        return math.inf if temperature <= 0 else self.lam1 / temperature

    def prob_first(self, p: float, temperature: float) -> float:
        """P("L") for posterior p at temperature t, under the expert's link."""
        lam = self.lam(temperature)
        if abs(p - 0.5) < 1e-9:
            p = 0.5  # the prompt's fractions give 0.5 only up to rounding: a tie is a tie
        scaled = self.bias_form == "scaled"
        if math.isinf(lam):
            # greedy: the sign of the logit; a scaled bias is part of it, a fixed one only
            # breaks the tie at p = 1/2
            z = (2 * self.lam1 * (2 * p - 1) + self.bias if scaled and math.isfinite(self.lam1)
                 else (2 * p - 1) * 1e9 + self.bias)
            return 1.0 if z > 0 else (0.0 if z < 0 else 0.5)
        # the logit of ψ_λ(p), shifted by the bias (b/t when scaled, as the temperature acts)
        z = 2 * lam * (2 * p - 1) + (self.bias / temperature if scaled else self.bias)
        if self.link == "probit":
            return 0.5 * math.erfc(-_PROBIT_SCALE * z / math.sqrt(2.0))
        from scipy.special import expit

        return float(expit(z))  # = psi(p, λ) when bias = 0

    def _rng(self, *parts: Any) -> np.random.Generator:
        return seeded_rng(self.seed, *parts)

    def reply(self, messages: Sequence[Mapping[str, Any]], temperature: float, index: int, *,
              short: bool = False, key: str | None = None,
              response_format: Any = None, tools: Any = None, tool_choice: Any = None
              ) -> Reply:
        """The reply to sample `index` of (messages, temperature). `short`: the bare letter (for
        max_tokens <= 5). `key`: prompt_key(messages, temperature), if already computed.
        `response_format`: the request's (a JSON schema gets a structured reply when the
        expert has a `structured` plan; a json_object one a JSON object of its planted keys).
        `tools`: the request's (a tool call when the expert has a `tools` plan; see
        `ensemble.testing.toolexpert`, which also answers a client's own format);
        `tool_choice`: the request's (a function it names is called, even after a result)."""
        pkey = key or prompt_key(list(messages), temperature)
        prompt = str(messages[-1].get("content", "")) if messages else ""
        rng = self._rng(pkey, index)
        if self.invalid_rate > 0 and rng.random() < self.invalid_rate:
            return Reply("I cannot decide which box it is.")
        if self.tools is not None and tools:
            result = tool_call_of(messages)
            forced = forced_tool(tool_choice)
            if result is None or forced is not None:
                text, calls = self.tools.reply(prompt, tools, rng, self.seed, index,
                                               forced=forced)
                return Reply(text, tool_calls=tuple(calls))
            if self.structured is None or response_format is None:
                return Reply(f"The tool answered.\nANSWER: {result}")
            # after a tool's result, a request with a format gets its typed answer (below)
        schema = _schema_of(response_format)
        if self.structured is not None and schema is not None:
            return Reply(self.structured.reply(schema, rng, prompt=prompt, index=index,
                                               seed=self.seed))
        if self.structured is not None and isinstance(response_format, Mapping) \
                and response_format.get("type") == "json_object":
            return Reply(self.structured.reply_object(rng, prompt=prompt, index=index,
                                                      seed=self.seed))
        if self.formats is not None:
            formatted = self.formats.reply(prompt, rng, self.seed)
            if formatted is not None:
                return Reply(formatted)
        if self.open_answers is not None:
            qkey = self.open_answers.key_of(prompt)
            if qkey is not None:
                return Reply(self.open_answers.reply(qkey, temperature, rng, self.seed))
        post = self.posterior_of(prompt)
        if post is not None:
            marginal = None
            if self.difficulty_seed is not None:
                rho = self._rho(prompt)
                marginal = (rho * self.prob_first(post, temperature)
                            + (1.0 - rho) * self.prob_first(1.0 - post, temperature))
                if rng.random() >= rho:
                    post = 1.0 - post  # misread: the other box, the question's one distractor
            return self._binary(post, temperature, rng, short=short, marginal=marginal,
                                belief_rng=self._rng("belief", pkey, index))
        brng = self._rng("belief", pkey, index)  # after the answer's draws: answers unchanged
        q = question_text(prompt)
        if q is not None:
            letters = _OPTION.findall(prompt[prompt.find("### Options:"):])
            return self._mc(q, letters or list("ABCDE"), temperature, rng, brng)
        h = prompt_hash(prompt)
        listed = listed_choices(prompt)
        key = self.answer_key.get(h)
        if key is not None and key not in (c.upper() for c in listed):
            letters = _OPTION.findall(prompt) or list("ABCDE")
            return self._mc(h, letters, temperature, rng, brng)
        if listed:  # "positive or negative", "Answer with one of: A, B, C"
            return self._mc(h, listed, temperature, rng, brng)
        return Reply("<reason>simulated: a generic reply.</reason>\n<answer>OK</answer>")

    def _question_rng(self, question: str) -> np.random.Generator:
        """The draws of a question's difficulty: shared by every expert of the difficulty seed,
        else the expert's own."""
        if self.difficulty_seed is not None:
            return seeded_rng(self.difficulty_seed, "mc", question)
        return self._rng("mc", question)

    def _rho(self, question: str) -> float:
        """A question's reading accuracy under the shared difficulty: the Beta(a, b) quantile
        of the question's shared uniform."""
        from scipy.special import betaincinv

        u = float(self._question_rng(question).random())
        return float(betaincinv(self.mc.a, self.mc.b, u))

    def _binary(self, p: float, temperature: float, rng: np.random.Generator, *, short: bool,
                belief_rng: np.random.Generator, marginal: float | None = None) -> Reply:
        prob_l = self.prob_first(p, temperature)
        letter = "L" if rng.random() < prob_l else "R"
        pi_l = prob_l if marginal is None else marginal  # the reading marginalised
        b = self.beliefs.draw([pi_l, 1.0 - pi_l], 0 if letter == "L" else 1, belief_rng)
        lp = {"L": math.log(max(b[0], 1e-300)), "R": math.log(max(b[1], 1e-300))}
        if short:
            return Reply(letter, lp)
        return Reply(f"<reason>simulated: posterior P(left) = {p:.4f}</reason>\n"
                     f"<answer>{letter}</answer>", lp)

    def _mc(self, question: str, letters: list[str], temperature: float,
            rng: np.random.Generator, belief_rng: np.random.Generator) -> Reply:
        qrng = self._question_rng(question)
        if self.difficulty_seed is None:
            rho = float(qrng.beta(self.mc.a, self.mc.b))
        else:
            rho = self._rho(question)
            qrng.random()  # the uniform _rho read: the draws after it are shared too
        frozen_u = float(qrng.random())
        correct = self.answer_key.get(question)
        if correct is not None and correct not in letters:
            same = [c for c in letters if c.upper() == correct.upper()]  # keys are upper-cased
            if same:
                correct = same[0]
            else:
                letters = sorted(set(letters) | {correct})
        k = len(letters)
        if correct not in letters:
            correct = letters[int(qrng.integers(k))]
        ci = letters.index(correct)
        di = (ci + 1 + int(qrng.integers(k - 1))) % k if k > 1 else ci
        lam = self.lam(temperature)
        if math.isinf(lam):
            choice = read = ci if frozen_u < rho else di
            pi = np.zeros(k)
            pi[choice] = 1.0
        else:
            read = ci if rng.random() < rho else di
            probs = _qr_options(k, read, lam)
            choice = int(rng.choice(k, p=probs))
            # the answer's distribution with the reading marginalised: what the chains vary around
            pi = rho * _qr_options(k, ci, lam) + (1.0 - rho) * _qr_options(k, di, lam)
        b = self.beliefs.draw(pi, choice, belief_rng)
        lp = {letters[j]: math.log(max(b[j], 1e-300)) for j in range(k)}
        return Reply(f"<reason>simulated: read option {letters[read]}</reason>\n"
                     f"<answer>{letters[choice]}</answer>", lp)

    def logprobs_for(self, reply: Reply, top: int, key: str, index: int) -> dict[str, Any]:
        """The OpenAI `logprobs` object of sample `index` of a prompt (`key`): the answer token
        with its top logprobs (a binary prompt's log P(L), log P(R)), then, for a reply with
        an `<answer>` tag, the closing tag's token with a logprob of its own, drawn from
        (seed, prompt, index): each sample's logprobs are its own, so a client can tell which
        sample's it was given."""
        text = reply.text or ""
        payload = self.logprobs_payload(text, reply.logprobs, top)
        if "</answer>" in text:
            own = -round(float(self._rng("logprob", key, index).random()) * 4.0 + 1e-3, 6)
            payload["content"].append({"token": "</answer>", "logprob": own, "bytes": None,
                                       "top_logprobs": [{"token": "</answer>", "logprob": own,
                                                         "bytes": None}][:max(top, 1)]})
        return payload

    @staticmethod
    def logprobs_payload(text: str, lp: dict[str, float] | None, top: int) -> dict[str, Any]:
        """The OpenAI `logprobs` object of a reply: the answer token with its top logprobs."""
        m = re.search(r"<answer>(.*?)</answer>", text)
        token = m.group(1) if m else text.strip()[:1]
        if lp is None:
            lp = {token: 0.0}
        tops = sorted(lp.items(), key=lambda kv: -kv[1])[:max(top, 1)]
        return {"content": [{"token": token, "logprob": lp.get(token, 0.0), "bytes": None,
                             "top_logprobs": [{"token": t, "logprob": v, "bytes": None}
                                              for t, v in tops]}]}

    @staticmethod
    def usage(messages: Sequence[Mapping[str, Any]], texts: Sequence[str | None]
              ) -> tuple[int, int]:
        """(prompt tokens, completion tokens), counted as whitespace-separated words."""
        ptoks = sum(len(str(m.get("content") or "").split()) for m in messages)
        return ptoks, sum(len((t or "").split()) for t in texts)
