"""Who may see and do what: the one access package of the web side.

Every view, htmx fragment and API route asks it, in three steps:

1. *Who is this?* A console session (the person and the tenant they switched to) or an
   API token (`Authorization: Bearer stw_...`: its person, its tenant and its scope) is
   turned into a `Principal`, or refused with AUTH_REQUIRED (401).
2. *May they?* `require(principal, OPERATE)`: a viewer, or a read token, gets FORBIDDEN
   (403) on an action; only an admin administers (members, other people's tokens).
   Grants are one step finer: an admin changes any grant of the tenant, an operator only
   an agent's whose identity an admin gave them the right over (a django-guardian object
   permission on its AgentIdentity row: `may_change_grants`); a viewer, a read token
   and anything that is not a person never do.
3. *Is it theirs?* Objects are looked up inside the principal's tenant only, so another
   tenant's task, effect or audit event is not found (404), never forbidden: a 403
   would tell a stranger that the id exists.

While a request acts, `acting(principal)` files every audit event it writes under the
person (actor), the channel (`console` or `api`) and the token or session that carried it.

The four ideas live in a module each: principals.py (who is asking, their role, the
session), tokens.py (API tokens), members.py (a tenant's members), rights.py (rights per
agent: grants, approvals). The web side imports them from here.
"""

from console.access.members import (
    MemberImpact,
    Removed,
    member_impact,
    member_of,
    member_remove,
    member_seed,
    member_set_role,
    members_of,
)
from console.access.principals import (
    ADMINISTER,
    OPERATE_ACTION,
    READ_ACTION,
    SESSION_TENANT,
    AdminScope,
    Principal,
    acting,
    admin_scope,
    person_principal,
    require,
    session_principal,
    switch_tenant,
    tenants_of,
)
from console.access.rights import (
    AGENT_PREFIX,
    agent_identity,
    agent_steward_seed,
    agent_steward_set,
    agent_stewards,
    may_change_grants,
    require_approval_right,
    require_grant_change,
)
from console.access.tokens import (
    LAST_USED_EVERY,
    TOKEN_PREFIX,
    TOKENS_BY_ID,
    NewToken,
    token_create,
    token_page,
    token_principal,
    token_revoke,
    tokens_visible_to,
)

__all__ = [
    "ADMINISTER",
    "AGENT_PREFIX",
    "LAST_USED_EVERY",
    "OPERATE_ACTION",
    "READ_ACTION",
    "SESSION_TENANT",
    "TOKEN_PREFIX",
    "AdminScope",
    "MemberImpact",
    "NewToken",
    "Principal",
    "Removed",
    "acting",
    "admin_scope",
    "agent_identity",
    "agent_steward_set",
    "agent_stewards",
    "may_change_grants",
    "member_impact",
    "member_of",
    "member_remove",
    "member_set_role",
    "members_of",
    "person_principal",
    "require",
    "require_approval_right",
    "require_grant_change",
    "session_principal",
    "switch_tenant",
    "tenants_of",
    "token_create",
    "token_principal",
    "token_revoke",
    "tokens_visible_to",
    "TOKENS_BY_ID",
    "token_page",
    "member_seed",
    "agent_steward_seed",
]
