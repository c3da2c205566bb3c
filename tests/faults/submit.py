"""`python -m tests.faults.submit AGENT COUNT INPUT_JSON`: submit COUNT tasks through
task_submit in a process of its own, against whatever DATABASE_URL names, and print
their ids as JSON. For fault tests whose database is not the test process's own."""

from __future__ import annotations

import json
import os
import sys

import django


def main(agent: str, count: int, payload: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    import tests.agents  # noqa: F401 - the agents the tests run
    from runtime.tasks.services import task_submit

    ids = [
        str(
            task_submit(
                agent=agent, input=json.loads(payload), tenant="acme", owner="user:alice", actor="user:alice"
            ).task_id
        )
        for _ in range(count)
    ]
    print(json.dumps(ids))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
