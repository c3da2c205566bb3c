"""Every console URL, in one table (ROUTES): the access tests walk it, so a route added
here is checked for 404 across tenants, 403 for viewers and sign-in for strangers.

`object` names what a route's URL points into (a task, an effect, ...), `action` marks
the POSTs that change something (operators only), `fragment` the htmx-only parts.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import path

from console.ui import (
    agents,
    approvals,
    audit,
    auth,
    budgets,
    dashboard,
    decisions,
    effects,
    grant_change,
    grants,
    lifecycle,
    members,
    memory,
    owners,
    pools,
    stops,
    submit,
    task,
    tasks,
    tokens,
    triggers,
)


@dataclass(frozen=True)
class Route:
    name: str
    pattern: str
    view: object
    object: str = ""  # "task", "step", "effect", "audit", "pool", "token", "member", "agent", "grant", "stop",
    # "approval", "schedule", "webhook", "decision", "erasure", "memory" or ""
    action: bool = False  # a POST that changes something: operators only (members: admins only; grants:
    # admins, or operators with the right over that agent: console/access/rights.py; tokens: every
    # member their own, a viewer read ones only: console/access/tokens.py)
    fragment: bool = False  # an htmx fragment (401, not a redirect, when signed out)
    public: bool = False  # reachable signed out (the login page)


ROUTES = [
    Route("login", "login/", auth.login, public=True),
    Route("logout", "logout/", auth.logout),
    Route("tenant", "tenant/", auth.tenant),
    Route("dashboard", "", dashboard.dashboard),
    Route("dashboard-live", "live/", dashboard.dashboard_live, fragment=True),
    Route("tasks", "tasks/", tasks.task_list),
    Route("tasks-live", "tasks/live/", tasks.task_list_live, fragment=True),
    Route("task-new", "tasks/new/", submit.submit, action=True),
    Route("task", "tasks/<uuid:task_id>/", task.task_page_view, object="task"),
    Route("task-live", "tasks/<uuid:task_id>/live/", task.task_live, object="task", fragment=True),
    Route("task-steps", "tasks/<uuid:task_id>/steps/", task.task_steps, object="task"),
    Route("task-step", "tasks/<uuid:task_id>/steps/<int:seq>/", task.task_step, object="step"),
    Route("task-stop", "tasks/<uuid:task_id>/stop/", stops.task_stop_view, object="task", action=True),
    # Its former name: the same confirmation and the same stop.
    Route("task-cancel", "tasks/<uuid:task_id>/cancel/", stops.task_stop_view, object="task", action=True),
    Route("task-rerun", "tasks/<uuid:task_id>/rerun/", stops.task_rerun_view, object="task", action=True),
    Route("stop", "stops/<uuid:stop_id>/", stops.stop_page, object="stop"),
    Route("stop-panel", "stops/<uuid:stop_id>/panel/", stops.stop_panel, object="stop", fragment=True),
    Route("task-resume", "tasks/<uuid:task_id>/resume/", task.resume, object="task", action=True),
    Route("task-upgrade", "tasks/<uuid:task_id>/upgrade/", task.upgrade, object="task", action=True),
    Route("effects", "effects/", effects.effect_list),
    Route("effect", "effects/<int:effect_id>/", effects.effect_detail, object="effect"),
    Route("effect-resolve", "effects/<int:effect_id>/resolve/", effects.resolve, object="effect", action=True),
    Route("approvals", "approvals/", approvals.approval_list),
    Route("approvals-live", "approvals/live/", approvals.approval_list_live, fragment=True),
    Route("approval", "approvals/<uuid:approval_id>/", approvals.approval_detail, object="approval"),
    Route(
        "approval-approve", "approvals/<uuid:approval_id>/approve/", approvals.approve, object="approval", action=True
    ),
    Route("approval-deny", "approvals/<uuid:approval_id>/deny/", approvals.deny, object="approval", action=True),
    Route("pools", "pools/", pools.pool_list),
    Route("pool", "pools/<slug:name>/", pools.pool_detail, object="pool"),
    Route("pool-limits", "pools/<slug:name>/limits/", pools.pool_limits, object="pool", action=True),
    Route("budgets", "budgets/", budgets.budget_page),
    Route("budget-set", "budgets/set/", budgets.budget_set_view, action=True),
    Route("retention", "retention/", lifecycle.retention_page),
    Route("retention-set", "retention/set/", lifecycle.retention_set_view, action=True),
    Route("erasures", "erasures/", lifecycle.erasure_list),
    Route("erasure-new", "erasures/new/", lifecycle.erasure_new, action=True),
    Route("erasure", "erasures/<uuid:receipt_id>/", lifecycle.erasure_detail, object="erasure"),
    Route("audit", "audit/", audit.audit_list),
    Route("audit-verify", "audit/verify/", audit.audit_verify_view),
    Route("audit-export", "audit/export.jsonl", audit.audit_export),
    Route("audit-seals", "audit/seals.jsonl", audit.audit_seals_export),
    Route("audit-event", "audit/<int:event_id>/", audit.audit_event, object="audit"),
    Route("tokens", "tokens/", tokens.token_list),
    Route("token-new", "tokens/new/", tokens.token_new, action=True),
    Route("token-revoke", "tokens/<int:token_id>/revoke/", tokens.token_revoke_view, object="token", action=True),
    Route("members", "members/", members.member_list),
    Route("member-add", "members/add/", members.member_add, action=True),
    Route("member-role", "members/<str:username>/role/", members.member_role, object="member", action=True),
    Route("member-remove", "members/<str:username>/remove/", members.member_remove_view, object="member", action=True),
    Route("agents", "agents/", agents.agent_list_view),
    Route("agent", "agents/<str:name>/", agents.agent_page, object="agent"),
    Route("agent-stewards", "agents/<str:name>/stewards/", agents.agent_steward, object="agent", action=True),
    Route("agent-stop", "agents/<str:name>/stop/", stops.agent_stop_view, object="agent", action=True),
    Route("agent-reopen", "agents/<str:name>/reopen/", stops.agent_reopen_view, object="agent", action=True),
    Route("agent-memory", "agents/<str:name>/memory/", memory.memory_list, object="agent"),
    Route(
        "memory-record", "agents/<str:name>/memory/<str:kind>/<str:key>/", memory.memory_record_page, object="memory"
    ),
    Route("grants", "grants/", grants.grant_list),
    Route("grant-new", "grants/new/", grants.grant_new, action=True),
    Route("grant", "grants/<int:grant_id>/", grants.grant_page, object="grant"),
    Route("grant-revoke", "grants/<int:grant_id>/revoke/", grant_change.grant_revoke_view, object="grant", action=True),
    Route("grant-narrow", "grants/<int:grant_id>/narrow/", grant_change.grant_narrow_view, object="grant", action=True),
    Route("owner", "owners/<str:username>/", owners.owner_page, object="member"),
    Route("decisions", "decisions/", decisions.decision_list),
    Route("decision", "decisions/<uuid:decision_id>/", decisions.decision_page, object="decision"),
    Route("schedules", "schedules/", triggers.schedule_list_view),
    Route("schedule-new", "schedules/new/", triggers.schedule_new, action=True),
    Route("schedule", "schedules/<uuid:schedule_id>/", triggers.schedule_page, object="schedule"),
    Route(
        "schedule-pause",
        "schedules/<uuid:schedule_id>/pause/",
        triggers.schedule_pause_view,
        object="schedule",
        action=True,
    ),
    Route(
        "schedule-resume",
        "schedules/<uuid:schedule_id>/resume/",
        triggers.schedule_resume_view,
        object="schedule",
        action=True,
    ),
    Route("dependencies", "dependencies/", triggers.dependency_list_view),
    Route("webhooks", "webhooks/", triggers.webhook_list_view),
    Route("webhook-new", "webhooks/new/", triggers.webhook_new, action=True),
    Route("webhook", "webhooks/<uuid:webhook_id>/", triggers.webhook_page, object="webhook"),
    Route(
        "webhook-pause", "webhooks/<uuid:webhook_id>/pause/", triggers.webhook_pause_view, object="webhook", action=True
    ),
    Route(
        "webhook-resume",
        "webhooks/<uuid:webhook_id>/resume/",
        triggers.webhook_resume_view,
        object="webhook",
        action=True,
    ),
]

app_name = "ui"
urlpatterns = [path(r.pattern, r.view, name=r.name) for r in ROUTES]
