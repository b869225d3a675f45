"""Record a local model's samples with their token logprobs (issue 37's real recordings).

One llama.cpp server (xllamacpp, the engine of the `local` provider) with `--slots` parallel
sequences; each question is one chat request with `n` = the samples per question, so the
prompt is read once and the samples decode side by side (SmolLM2-135M, one thread, a loaded
2-core machine: 2.5 samples/s at n = 20 against 0.9 at n = 1 one request at a time, measured
in docs/adaptive.md's recording notes). Every choice keeps its whole `logprobs.content`
(token, logprob and the top `--top` alternatives at each position) in a raw gzip'd JSONL
outside the repository; `ensemble.sampling.logprobs.compact` then reduces each sample to the
compact form the soft rules read (tests/bench/data/*/recording.jsonl).

The reported logprobs are the model's own distribution (llama.cpp reports them before its
sampling chain: the same values at every temperature); the samples are drawn at `--t`.

A base model with no chat format of its own (Gemma 3 270M: its GGUF carries a ChatML template
it never saw, so through it the model continues the user's turn instead of answering) is served
with `--template raw`: the messages' text as a plain document, the task's prompt few-shot.

    nice -n 10 python tests/bench/record_soft.py --model PATH.gguf --task TASK.yaml
        --t 0.5 1.0 --samples 20 --out runs/rec/X.jsonl.gz [--template raw] [--limit N]
        [--stop STRING]

Resumable: a (question, t) already in --out is not asked again. Then, per temperature:

    python tests/bench/record_soft.py --compact runs/rec/X.jsonl.gz --task FOLDER/task.yaml
        --t 0.5 --into FOLDER          (writes FOLDER/recording.jsonl)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

TEMPLATES = {
    # the messages' text, nothing around it: a base model reads the task's prompt as a document
    "raw": "{{ bos_token }}{%- for message in messages -%}{{ message.content }}{%- endfor -%}",
}


def start_server(path: Path, *, slots: int, threads: int, template: str | None) -> Any:
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(path)
    p.n_ctx = 512 * slots
    p.n_parallel = slots
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.port = 0
    p.hostnames = ["127.0.0.1"]
    p.verbosity = -1
    if template is not None:
        p.use_jinja = True
        p.chat_template = TEMPLATES[template]
    return xllamacpp.Server(p)


def wait_ready(addr: str) -> None:
    import httpx

    for _ in range(1200):
        try:
            if httpx.get(addr + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"the server at {addr} did not answer")


def questions(task: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import yaml

    spec = yaml.safe_load(task.read_text())
    rows = [json.loads(x) for x in (task.parent / spec["data"]).read_text().splitlines()
            if x.strip()]
    return rows, spec


def seed_of(qid: str, t: float) -> int:
    return int(hashlib.sha256(f"{qid}|{t:g}".encode()).hexdigest()[:8], 16)


def _whole_lines(raw: Path) -> list[dict]:
    """The whole lines of a raw recording (one still being written ends mid-stream)."""
    out = []
    try:
        with gzip.open(raw, "rt") as f:
            for line in f:
                out.append(json.loads(line))
    except (EOFError, json.JSONDecodeError):
        pass
    return out


def compact_raw(raw: Path, task_path: Path, t: float, into: Path, *, top: int = 5) -> dict:
    """Write the samples of `raw` at temperature `t` as a replay recording (one line per
    question, in the task's order: its prompt, t and its samples as {"text", "tokens", "lp"},
    "lp" the compact logprobs located with the task's own parser) into `into`/recording.jsonl;
    returns counts. Every recorded prompt must be the one the task renders (else the replay
    could not find it)."""
    from ensemble.sampling.logprobs import compact
    from ensemble.tasks.taskfile import TaskFile

    task = TaskFile(data=task_path)
    by_prompt = {q.prompt: q for q in task.questions()}
    ids = {str(q.id) for q in task.questions()}
    lines: dict[str, dict] = {}
    for d in _whole_lines(raw):
        if abs(float(d["t"]) - t) > 1e-9 or str(d["id"]) not in ids:
            continue  # another temperature, or a question the task's data file leaves out
        if d["prompt"] not in by_prompt:
            raise SystemExit(f"{raw}: question {d['id']}'s prompt is not one {task_path} "
                             "renders")
        samples = []
        for c in d["choices"]:
            full = {"content": [{"token": x["token"], "logprob": x["logprob"],
                                 "top_logprobs": [{"token": a, "logprob": b}
                                                  for a, b in x["top"]]}
                                for x in c["logprobs"]]}
            text = c["text"]
            samples.append({"text": text, "tokens": len(c["logprobs"]),
                            "lp": compact(full, task.parse(text) if text else None,
                                          task.parse, top_k=top)})
        lines[d["prompt"]] = {"prompt": d["prompt"], "t": t, "samples": samples}
    into.mkdir(parents=True, exist_ok=True)
    order = list(dict.fromkeys(q.prompt for q in task.questions() if q.prompt in lines))
    with open(into / "recording.jsonl", "w") as out:
        for prompt in order:
            out.write(json.dumps(lines[prompt], separators=(",", ":")) + "\n")
    n = sum(len(x["samples"]) for x in lines.values())
    return {"questions": len(order), "samples": n,
            "located": sum(1 for x in lines.values() for s in x["samples"]
                           if s["lp"] and "s" in s["lp"]),
            "bytes": (into / "recording.jsonl").stat().st_size}


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--compact"]:
        cp = argparse.ArgumentParser(description="compact a raw recording into a replay one")
        cp.add_argument("--compact", type=Path, required=True, metavar="RAW")
        cp.add_argument("--task", type=Path, required=True)
        cp.add_argument("--t", type=float, required=True)
        cp.add_argument("--into", type=Path, required=True)
        c = cp.parse_args()
        print(json.dumps(compact_raw(c.compact, c.task, c.t, c.into)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--task", type=Path, required=True)
    ap.add_argument("--t", type=float, nargs="+", required=True)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--slots", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--template", choices=sorted(TEMPLATES))
    ap.add_argument("--limit", type=int)
    ap.add_argument("--stop", nargs="*")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    import httpx

    from ensemble.local import sha256_of

    rows, spec = questions(a.task)
    rows = rows[:a.limit] if a.limit else rows
    stop = a.stop
    done: set[tuple[str, float]] = set()
    if a.out.exists():  # keep every whole line; a file cut by a kill is rewritten without its tail
        kept: list[str] = []
        try:
            with gzip.open(a.out, "rt") as f:
                for line in f:
                    d = json.loads(line)
                    kept.append(line if line.endswith("\n") else line + "\n")
                    done.add((d["id"], float(d["t"])))
        except (EOFError, OSError, json.JSONDecodeError):
            with gzip.open(a.out, "wt") as f:
                f.writelines(kept)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    srv = start_server(a.model, slots=max(a.slots, a.samples), threads=a.threads,
                       template=a.template)
    addr = str(srv.listening_address).rstrip("/")
    wait_ready(addr)
    meta = {"model": a.model.name, "sha256": sha256_of(a.model), "template": a.template,
            "top": a.top, "slots": max(a.slots, a.samples), "threads": a.threads}
    print(json.dumps(meta), file=sys.stderr)
    t0 = time.time()
    asked = samples = tokens = 0
    with httpx.Client(timeout=1800) as client, gzip.open(a.out, "at") as out:
        for row in rows:  # question-major: a recording cut short holds both temperatures
            for t in a.t:
                qid = str(row[spec.get("id", "id")])
                if (qid, t) in done:
                    continue
                prompt = spec["prompt"].format(**row)
                body = {"model": "x", "messages": [{"role": "user", "content": prompt}],
                        "temperature": t, "max_tokens": spec.get("max_tokens", 16),
                        "n": a.samples, "logprobs": True, "top_logprobs": a.top,
                        "seed": seed_of(qid, t)}
                if stop:
                    body["stop"] = stop
                started = time.time()
                r = client.post(addr + "/v1/chat/completions", json=body)
                r.raise_for_status()
                doc = r.json()
                choices = sorted(doc["choices"], key=lambda c: c["index"])
                rec = {"id": qid, "t": t, "prompt": prompt, "seed": body["seed"],
                       "wall_s": round(time.time() - started, 3),
                       "usage": doc.get("usage"),
                       "choices": [{"text": c["message"]["content"],
                                    "finish_reason": c.get("finish_reason"),
                                    "logprobs": [{"token": x["token"], "logprob": x["logprob"],
                                                  "top": [[y["token"], y["logprob"]]
                                                          for y in x.get("top_logprobs", [])]}
                                                 for x in (c.get("logprobs") or {}).get(
                                                     "content") or []]}
                                   for c in choices]}
                out.write(json.dumps(rec) + "\n")
                out.flush()
                asked += 1
                samples += len(choices)
                tokens += sum(len(c["logprobs"]) for c in rec["choices"])
                if asked % 10 == 0:
                    dt = time.time() - t0
                    print(f"{asked} questions, {samples} samples, {samples / dt:.2f} samples/s, "
                          f"{tokens / dt:.1f} tokens/s", file=sys.stderr, flush=True)
    dt = time.time() - t0
    print(json.dumps({**meta, "questions": asked, "samples": samples, "tokens": tokens,
                      "wall_s": round(dt, 1)}), file=sys.stderr)
    del srv
    return 0


if __name__ == "__main__":
    sys.exit(main())
