"""Durable records. Models stay thin: fields, constraints, __str__ and small pure
properties. Writes happen in the services (submission, transitions, effects, ...), each
a conditional UPDATE or a fenced INSERT that reports whether it won.

Table names are explicit because the hot paths use hand-written SQL (runtime/sql/).

Every stored time is the database's clock (now(), Now(), clock_timestamp()), never a
worker's: the claim order compares times written by different hosts, and a skewed
clock there would reorder the queue.
"""

from runtime.models.agent_version import RetiredVersion
from runtime.models.approval import Approval
from runtime.models.attempt import Attempt
from runtime.models.audit import AuditEvent
from runtime.models.budget import Budget, Quota, TokenUsage
from runtime.models.decision import Decision
from runtime.models.effect import Effect
from runtime.models.gateway_call import GatewayCall
from runtime.models.grant import AuthzRevision, Grant
from runtime.models.lifecycle import ErasureReceipt, RetentionPolicy
from runtime.models.memory import MemoryRecord
from runtime.models.partition import AuditArchive, AuditBoundary
from runtime.models.pause import TreePause
from runtime.models.pool import Pool, PoolCount
from runtime.models.process import Process, ProcessMinute
from runtime.models.seal import AuditSeal, AuditSealHead
from runtime.models.slot import Slot
from runtime.models.step import Step
from runtime.models.stop import AgentSwitch, Stop, StopAck
from runtime.models.task import Task
from runtime.models.trigger import DependencyTrigger, Schedule, Webhook, WebhookDelivery
from runtime.models.worker_credential import WorkerCredential

__all__ = [
    "AgentSwitch",
    "Approval",
    "Attempt",
    "AuditArchive",
    "AuditBoundary",
    "AuditEvent",
    "AuditSeal",
    "AuditSealHead",
    "AuthzRevision",
    "Budget",
    "Decision",
    "DependencyTrigger",
    "Effect",
    "ErasureReceipt",
    "GatewayCall",
    "Grant",
    "MemoryRecord",
    "Pool",
    "PoolCount",
    "Process",
    "ProcessMinute",
    "Quota",
    "RetentionPolicy",
    "RetiredVersion",
    "Schedule",
    "Slot",
    "Step",
    "Stop",
    "StopAck",
    "Task",
    "TokenUsage",
    "TreePause",
    "Webhook",
    "WebhookDelivery",
    "WorkerCredential",
]
