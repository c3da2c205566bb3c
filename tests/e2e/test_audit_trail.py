"""Journey 3: alice filters the audit trail to one task, verifies the trail, and exports
the filter: the file holds exactly the events the filter shows, in the database's words."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import expect

from runtime.models import AuditEvent
from runtime.stops.services import task_stop
from tests.e2e.stack import EVENT_MS, screenshot
from tests.faults.support import submit
from tests.tamper import bypassing_the_triggers


def shown(page) -> list[int]:
    rows = page.locator("tr[id^=audit-]")
    return sorted(int(row_id.removeprefix("audit-")) for row_id in rows.evaluate_all("rs => rs.map(r => r.id)"))


def export(page) -> tuple[str, list[dict]]:
    """Click the page's export link and read the file it downloads."""
    with page.expect_download(timeout=EVENT_MS) as download_info:
        page.locator("a[href*='/audit/export.jsonl']").first.click()
    download = download_info.value
    assert download.suggested_filename.endswith(".jsonl")
    text = Path(download.path()).read_text(encoding="utf-8")
    return text, [json.loads(line) for line in text.splitlines() if line]


def apply_filter(page, **values) -> None:
    """Type the filter into the form, as a person would, and send it with Enter."""
    for name in ("actor", "task", "kind"):
        page.fill(f"[name={name}]", values.get(name, ""))
    page.locator("[name=kind]").press("Enter")
    for name, value in values.items():  # kept in the URL: a link a colleague can open
        expect(page).to_have_url(re.compile(rf"[?&]{name}={re.escape(value)}(&|$)"), timeout=EVENT_MS)


def test_alice_filters_verifies_and_exports_the_audit_trail_and_the_export_holds_exactly_the_filtered_events(person):
    # Two tasks, so that each filter has something to leave out; the kept one has a history.
    kept = submit("t.steps", {"n": 2}).task_id
    other = submit("t.steps", {"n": 2}).task_id
    task_stop(task_id=kept, actor="user:alice", reason="the filter's subject")
    acme = AuditEvent.objects.filter(tenant="acme").order_by("id")
    of_kept = list(acme.filter(task_id=kept).values_list("id", flat=True))
    submitted = list(acme.filter(kind="task.submitted").values_list("id", flat=True))
    assert len(of_kept) >= 2 and len(submitted) == 2 and acme.count() > max(len(of_kept), len(submitted))

    page = person("alice")
    page.goto("/audit/")
    rows = page.locator("tr[id^=audit-]")
    expect(rows).to_have_count(acme.count())  # unfiltered, every event of acme's (one page of them)

    apply_filter(page, task=str(kept))
    expect(rows).to_have_count(len(of_kept), timeout=EVENT_MS)
    assert shown(page) == of_kept
    screenshot(page, "audit")

    verify = page.locator("form[action$='/audit/verify/'] button, button:has-text('Verify')").first
    verify.click()
    verdict = page.locator("#verify-result")
    expect(verdict).to_be_visible(timeout=EVENT_MS)
    expect(verdict).not_to_be_empty()
    intact = verdict.inner_text()
    screenshot(page, "audit-verify")

    text, lines = export(page)
    assert sorted(event["id"] for event in lines) == of_kept, "the export holds other events than the filter shows"
    by_id = {event.id: event for event in AuditEvent.objects.filter(id__in=of_kept)}
    for event in lines:  # each line is that event, with its place in the hash chain
        row = by_id[event["id"]]
        assert (event["kind"], event["actor"], event["task_id"] if "task_id" in event else event.get("task")) == (
            row.kind,
            row.actor,
            str(kept),
        )
        assert event["chain_seq"] == row.chain_seq
    assert str(other) not in text

    # Another filter, across both tasks: the export follows whatever the page shows.
    apply_filter(page, kind="task.submitted")
    expect(rows).to_have_count(len(submitted), timeout=EVENT_MS)
    assert shown(page) == submitted
    _, lines = export(page)
    assert sorted(event["id"] for event in lines) == submitted
    assert {event["kind"] for event in lines} == {"task.submitted"}

    # The verdict is the database's: a row altered behind the triggers' back is named.
    tampered = of_kept[1]
    bypassing_the_triggers("UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %s", [tampered])
    verify.click()
    expect(verdict).not_to_have_text(intact, timeout=EVENT_MS)
    expect(verdict).to_contain_text(re.compile(rf"\b{tampered}\b"))
