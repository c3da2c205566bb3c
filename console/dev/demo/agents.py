"""The demo agents that `make run` seeds, written the way a developer would.

* research.batch: an overnight research batch. It plans experiments, spawns one child
  task per experiment, waits for them durably, sleeps "overnight" without holding a
  worker, then submits the results to an outside service that deduplicates by key. With
  `approve_results` it first asks a person to approve the submission (the summary laid
  out for them) and submits only once approved; a request found stale (a grant of the
  tenant changed before it acted) is asked again, a denied or expired one is not.
* research.assistant: a research assistant written in plain Pydantic AI, wrapped by
  StewardAgent (console/dev/demo/assistant.py): each model request and search is journaled.
* research.briefer: the same, written with the OpenAI Agents SDK and run by StewardRunner
  (console/dev/demo/briefer.py).
* notify.send: sends a notification through a service that does NOT deduplicate, so
  an interrupted send is marked `unknown` for an operator instead of being re-sent.
* research.digest: a nightly digest, deployed in two versions served at once
  (docs/adr/0037-agent-versions.md): version 1 gathers, sleeps overnight and writes;
  version 2 (current) does the same and then ranks what it wrote. Version 1's journal
  replays on version 2, so an operator can upgrade a sleeping version 1 task from its
  page; the seed pins one task to version 1 for that.

The outside services are the fake service (console/dev/demo/fake_service.py), reached over
real HTTP; STEWARD_DEMO_RESULTS_URL / STEWARD_DEMO_NOTIFY_URL or the input choose them.
"""

from __future__ import annotations

import hashlib
import os

from pydantic import BaseModel, Field

from console.dev.demo import (
    assistant,  # noqa: F401  (importing it registers research.assistant)
    briefer,  # noqa: F401  (importing it registers research.briefer)
    fake_service,
)
from runtime.agents import agent
from runtime.errors import EffectNotApplied

RESULTS_URL = os.environ.get("STEWARD_DEMO_RESULTS_URL", "http://127.0.0.1:8765")
NOTIFY_URL = os.environ.get("STEWARD_DEMO_NOTIFY_URL", "http://127.0.0.1:8766")


class ResearchInput(BaseModel):
    question: str = Field(min_length=1, max_length=500)
    experiments: int = Field(default=3, ge=1, le=20)
    overnight_seconds: float = Field(default=30, ge=0, le=7 * 24 * 3600)
    results_url: str = RESULTS_URL
    approve_results: bool = False
    approval_hours: float = Field(default=24, gt=0, le=7 * 24)


class ExperimentInput(BaseModel):
    question: str
    index: int = Field(ge=0)
    seed: int
    cooldown_seconds: float = Field(default=0, ge=0)


class DigestInput(BaseModel):
    topic: str = Field(min_length=1, max_length=200)
    overnight_seconds: float = Field(default=600, ge=0, le=7 * 24 * 3600)


class NotifyInput(BaseModel):
    to: str = Field(min_length=1, max_length=200)
    message: str = Field(min_length=1, max_length=2000)
    notify_url: str = NOTIFY_URL


def submit(url: str, body: dict, *, idempotency_key: str) -> dict:
    """POST to the outside service. A 4xx/5xx answer means it did not act."""
    try:
        return fake_service.call(url, body, key=idempotency_key, timeout=30)
    except fake_service.ServiceRejected as exc:
        raise EffectNotApplied(str(exc)) from exc


@agent("research.batch", pool="research", input=ResearchInput)
def research_batch(ctx, input):
    """Plan experiments, run them as children, sleep overnight, submit the results."""
    params = ResearchInput.model_validate(input)
    seeds = [int(ctx.random() * 1_000_000) for _ in range(params.experiments)]
    plan = ctx.step("plan", _plan, params.question, seeds)
    children = [ctx.spawn("research.experiment", item) for item in plan]
    results = ctx.wait(children)
    ctx.sleep(params.overnight_seconds)
    summary = ctx.step("summarise", _summarise, params.question, [r.__dict__ for r in results])
    if params.approve_results:
        decision = _approval(ctx, params, summary)
        if not decision.approved:
            return {"summary": summary, "submitted": False, "approval": decision.state}
    receipt = ctx.effect("submit-results", submit, params.results_url, summary, effect_class="reversible", keyed=True)
    return {"summary": summary, "receipt": receipt}


@agent("research.experiment", pool="research", input=ExperimentInput)
def research_experiment(ctx, input):
    """One experiment: deterministic 'training' from its seed, then a cool-down."""
    params = ExperimentInput.model_validate(input)
    metrics = ctx.step("train", _train, params.question, params.seed)
    if params.cooldown_seconds:
        ctx.sleep(params.cooldown_seconds)
    return {"index": params.index, **metrics}


@agent("research.digest", pool="research", input=DigestInput, version="1")
def research_digest_v1(ctx, input):
    """Version 1 of the nightly digest: gather, sleep overnight, write."""
    params = DigestInput.model_validate(input)
    notes = ctx.step("gather", _gather, params.topic)
    ctx.sleep(params.overnight_seconds)
    digest = ctx.step("write", _write, params.topic, notes)
    return {"version": "1", "digest": digest}


@agent("research.digest", pool="research", input=DigestInput, version="2")
def research_digest(ctx, input):
    """Version 2 (current: registered last): version 1's steps, then a ranking. A task
    that ran version 1 up to its sleep replays here, so it may be upgraded."""
    params = DigestInput.model_validate(input)
    notes = ctx.step("gather", _gather, params.topic)
    ctx.sleep(params.overnight_seconds)
    digest = ctx.step("write", _write, params.topic, notes)
    ranked = ctx.step("rank", sorted, notes)
    return {"version": "2", "digest": digest, "ranked": ranked}


def _gather(topic: str) -> list[str]:
    return [f"{topic}: note {i}" for i in range(3, 0, -1)]


def _write(topic: str, notes: list[str]) -> str:
    return f"{topic}: {len(notes)} notes"


@agent("notify.send", pool="notifications", input=NotifyInput)
def notify_send(ctx, input):
    """Send one notification through a service that does not deduplicate."""
    params = NotifyInput.model_validate(input)
    receipt = ctx.effect(
        "send",
        submit,
        params.notify_url,
        {"to": params.to, "message": params.message},
        effect_class="irreversible",
        keyed=False,
    )
    return {"receipt": receipt}


ASKS = 3  # a stale request is asked again, at most this many times in all


def _approval(ctx, params: ResearchInput, summary: dict):
    """Ask a person to approve submitting `summary`; ask anew (another step name) while
    the answer is stale, since a stale package is never approvable again (ADR 0017)."""
    action = {
        "op": "submit results",
        "to": params.results_url,
        "question": params.question,
        "experiments": summary["experiments"],
        "completed": summary["completed"],
        "best": summary["best"],
    }
    for ask in range(ASKS):
        decision = ctx.request_approval(
            action,
            effect_class="reversible",
            expires_in=params.approval_hours * 3600,
            name="approve-results" if ask == 0 else f"approve-results-{ask + 1}",
        )
        if not decision.stale:
            break
    return decision


def _plan(question: str, seeds: list[int]) -> list[dict]:
    return [{"question": question, "index": i, "seed": seed, "cooldown_seconds": 1} for i, seed in enumerate(seeds)]


def _train(question: str, seed: int) -> dict:
    digest = hashlib.sha256(f"{question}:{seed}".encode()).digest()
    return {"seed": seed, "loss": round(digest[0] / 255, 4), "accuracy": round(0.5 + digest[1] / 510, 4)}


def _summarise(question: str, results: list[dict]) -> dict:
    finished = [r["output"] for r in results if r["status"] == "completed"]
    best = min(finished, key=lambda m: m["loss"]) if finished else None
    return {"question": question, "experiments": len(results), "completed": len(finished), "best": best}
