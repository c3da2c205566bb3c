"""Where an approval's resume spends its time (runnable alone as
`python -m tests.bench_approvals`): one JSON object on stdout, progress on stderr.

The path `approval_resume_ms` in tests/bench.py times as one figure, cut into phases by
the times each part leaves behind, over the same agent (t.approve_then_step) on one idle
`celery worker --pool=solo`:

    decide_ms      the approval_decide() call, as this process sees it (its wake-up is
                   sent on commit, before the call returns)
    to_claim_ms    the decision's statement (approval.decided_at) to the claim
                   (the attempt's started_at): the commit, the wake-up through Redis,
                   Celery handing it to run_pool
    to_check_ms    the claim to the journaled re-check (the approval_check step's
                   finished_at): the journal's load, the agent's replay and the re-check
    to_step_ms     the re-check to the approved step's start
    resume_ms      the call's start to the approved step's start (tests/bench.py's figure)
    dispatch_ms    task_submit() to the first step's start on the same worker
                   (tests/bench.py's dispatch_ms), sampled alternately with the resumes,
                   so the two compare within a run

Medians of STEWARD_BENCH_APPROVAL_SAMPLES (default 60) each after five warm-up pairs,
resume_ms_p90, and the load average before and after. STEWARD_BENCH_APPROVAL_PAUSE:
seconds to wait between the task reading `blocked` and the decision (default 0, as
tests/bench.py). A/B two commits by running this in each one's tree with the same
venv, alternating (docs/performance.md, "Comparing commits"). Its own database (STEWARD_BENCH_APPROVALS_DB, default
steward_bench_approvals), made anew.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from tests.bench import bench_fleet, submit, wait_done, wait_status

DB = os.environ.get("STEWARD_BENCH_APPROVALS_DB", "steward_bench_approvals")
SAMPLES = int(os.environ.get("STEWARD_BENCH_APPROVAL_SAMPLES", "60"))
# Seconds between the task reading `blocked` and the decision (tests/bench.py: none, so
# a decision can land while the worker is still finishing the request's attempt).
PAUSE = float(os.environ.get("STEWARD_BENCH_APPROVAL_PAUSE", "0"))


def log(message: str) -> None:
    print(f"bench-approvals: {message}", file=sys.stderr, flush=True)


def one_resume(i: int) -> dict:
    from runtime.approvals.services import approval_decide
    from runtime.models import Approval, Attempt, Step

    task_id = submit("t.approve_then_step", {"n": i})
    wait_status([task_id], "blocked", pause=0.002)
    approval_id = Approval.objects.values_list("id", flat=True).get(task_id=task_id)
    time.sleep(PAUSE)
    called = time.time()
    approval_decide(approval_id=approval_id, tenant="bench", actor="user:bench-approver", decision="approve")
    returned = time.time()
    wait_done([task_id])
    decided = Approval.objects.get(id=approval_id).decided_at.timestamp()
    claimed = Attempt.objects.get(task_id=task_id, epoch=2).started_at.timestamp()
    checked = Step.objects.get(task_id=task_id, kind="approval_check").finished_at.timestamp()
    started = Step.objects.get(task_id=task_id, name="approved").started_at.timestamp()
    return {
        "decide_ms": returned - called,
        "to_claim_ms": claimed - decided,
        "to_check_ms": checked - claimed,
        "to_step_ms": started - checked,
        "resume_ms": started - called,
    }


def one_dispatch() -> float:
    from runtime.models import Step

    submitted = time.time()
    task_id = submit("t.steps", {"n": 1})
    wait_done([task_id])
    return Step.objects.get(task_id=task_id, seq=0).started_at.timestamp() - submitted


def main() -> dict:
    os.environ["STEWARD_LOG_LEVEL"] = "WARNING"
    fleet = bench_fleet(DB, "steward-bench-approvals")
    load_before = os.getloadavg()[0]
    try:
        (worker,) = fleet.workers(1)
        log(f"worker pid {worker.pid}")
        for i in range(5):  # warm-up: the worker's imports, prepared statements
            one_resume(-i - 1)
            one_dispatch()
        resumes, dispatches = [], []
        for i in range(SAMPLES):
            resumes.append(one_resume(i))
            dispatches.append(one_dispatch())
    finally:
        fleet.stop_all()
    result = {key: round(statistics.median(r[key] for r in resumes) * 1000, 2) for key in resumes[0]}
    ordered = sorted(r["resume_ms"] for r in resumes)
    result["resume_ms_p90"] = round(ordered[int(len(ordered) * 0.9) - 1] * 1000, 2)
    result["dispatch_ms"] = round(statistics.median(dispatches) * 1000, 2)
    result["resume_over_dispatch"] = round(result["resume_ms"] / result["dispatch_ms"], 2)
    result["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
