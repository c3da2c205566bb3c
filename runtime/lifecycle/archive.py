"""The audit trail's own, longer period: once a day's audit partition lies past it, the
partition is written out as JSON lines with the seals over its rows, recorded
(steward_audit_archive), and only then dropped (docs/adr/0040-partitions.md).

An archive file, one JSON object a line:
    {"archive": "steward-audit/1", "partition": ..., "lower": ..., "upper": ...}
    {"row": {"id", "chain", "chain_seq", "at", "at_us", "actor", "tenant", "task_id",
             "kind", "data", "prev_hash", "hash"}}   in (chain, chain_seq) order
    {"seal": {... as `steward audit seals` prints it, plus "behind" and "heads"}}
    {"end": {"rows": N, "seals": M}}
`data` is the row's jsonb as PostgreSQL prints it (`data::text`) and `at_us` its time in
microseconds: exactly what steward_audit_hash() hashed, so the archive is checked
without a database: every row's hash, every link within a chain, each seal's MAC (with
the configured keys) and Merkle root, and every sealed head the archive holds.

The live trail after the drop starts each chain from its boundary (steward_audit_boundary:
the chain's last archived row), recorded by steward_partition_drop() in the drop's own
transaction; `audit verify` on the database checks each chain's first live row against it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

from django.db import transaction

from runtime import arguments, config, db
from runtime.audit import AuditKind, audit_append
from runtime.lifecycle.partitions import SYSTEM_TENANT, Dropped, PartitionedTable, partitions_drop_before
from runtime.models import AuditArchive, AuditSeal
from runtime.trail.seals import VERSION, _mac, merkle_root, seal_export, seal_heads

FORMAT = "steward-audit/1"
FETCH_ROWS = 5_000  # rows a round trip (keyset pages): a day's partition is never held whole


@db.reads("partitions_list")
@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    lower_at: datetime | None  # None: from the beginning (the legacy partition)
    upper_at: datetime


@db.reads("audit_archive_rows")
@dataclass(frozen=True, slots=True)
class _Row:
    id: int
    chain: str
    chain_seq: int
    at: datetime
    at_us: int
    actor: str
    tenant: str
    task_id: UUID | None
    kind: str
    data: str
    prev_hash: bytes
    hash: bytes


@db.reads("audit_archive_seals")
@dataclass(frozen=True, slots=True)
class _SealId:
    seal_id: int


@dataclass(frozen=True, slots=True)
class Archived:
    partition: str
    path: str
    rows: int
    seals: int
    sha256: str


def audit_archive(*, before: datetime, out: Path | str, actor: str) -> tuple[list[Archived], list[Dropped]]:
    """Archive every audit partition whose whole range ends at or before `before` and is
    not archived yet, into `out` (one file per partition), then drop the archived ones.

    1. For each such partition, in its own durable transaction: write its rows and the
       seals over them to `<partition>.jsonl.part`, fsync, rename to `<partition>.jsonl`;
       record it (steward_audit_archive, with the file's sha256) and its audit row
       (audit.archived) together. A crash before the record leaves a file and no row: the
       next run writes the file again.
    2. partitions_drop_before(steward_audit, before): drops what is archived, each chain's
       last archived row kept as its boundary.
    """
    arguments.actor(actor)
    if not isinstance(before, datetime) or before.tzinfo is None:
        raise TypeError("before must be an aware datetime")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    done = set(AuditArchive.objects.values_list("partition", flat=True))
    archived = []
    for part in db.fetchall("partitions_list", {"table": str(PartitionedTable.AUDIT)}, row=Partition):
        if part.upper_at > before or part.name in done:
            continue
        archived.append(_archive_one(part, folder, actor))
    dropped = partitions_drop_before(table=PartitionedTable.AUDIT, cutoff=before, actor=actor)
    return archived, dropped


def _archive_one(part: Partition, folder: Path, actor: str) -> Archived:
    path = folder / f"{part.name}.jsonl"
    temporary = path.with_suffix(".jsonl.part")
    digest = hashlib.sha256()
    rows = seals = 0
    with transaction.atomic(durable=True):
        with open(temporary, "wb") as f:

            def put(obj: dict) -> None:
                line = (json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n").encode()
                digest.update(line)
                f.write(line)

            put(
                {
                    "archive": FORMAT,
                    "partition": part.name,
                    "lower": part.lower_at.isoformat() if part.lower_at else None,
                    "upper": part.upper_at.isoformat(),
                }
            )
            params = {"lower": part.lower_at, "upper": part.upper_at}
            after: tuple[str, int] = ("", 0)
            while True:
                batch = db.fetchall(
                    "audit_archive_rows",
                    {**params, "chain": after[0], "seq": after[1], "limit": FETCH_ROWS},
                    row=_Row,
                )
                for r in batch:
                    put({"row": _row_json(r)})
                rows += len(batch)
                if len(batch) < FETCH_ROWS:
                    break
                after = (batch[-1].chain, batch[-1].chain_seq)
            for found in db.fetchall("audit_archive_seals", params, row=_SealId):
                seal = AuditSeal.objects.get(id=found.seal_id)
                put({"seal": _seal_json(seal)})
                seals += 1
            put({"end": {"rows": rows, "seals": seals}})
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
        sha = digest.hexdigest()
        AuditArchive.objects.create(
            partition=part.name,
            lower=part.lower_at,
            upper=part.upper_at,
            rows=rows,
            sha256=sha,
            path=str(path),
            actor=actor,
        )
        audit_append(
            actor=actor,
            tenant=SYSTEM_TENANT,
            kind=AuditKind.AUDIT_ARCHIVED,
            data={"partition": part.name, "rows": rows, "seals": seals, "sha256": sha, "path": str(path)},
        )
    return Archived(part.name, str(path), rows, seals, sha)


def _row_json(r: _Row) -> dict:
    return {
        "id": r.id,
        "chain": r.chain,
        "chain_seq": r.chain_seq,
        "at": r.at.isoformat(),
        "at_us": r.at_us,
        "actor": r.actor,
        "tenant": r.tenant,
        "task_id": str(r.task_id) if r.task_id is not None else None,
        "kind": r.kind,
        "data": r.data,
        "prev_hash": bytes(r.prev_hash).hex(),
        "hash": bytes(r.hash).hex(),
    }


def _seal_json(seal: AuditSeal) -> dict:
    heads = [[chain, seq, digest.hex()] for chain, seq, digest in seal_heads(seal)]
    return {**seal_export(seal), "behind": seal.behind, "heads": heads}


# --- checking an archive, without the database -----------------------------------------


def row_hash(row: dict) -> str:
    """steward_audit_hash() (runtime/sql/schema/steward_audit_hash.sql) in Python."""
    text = "\x1f".join(
        [
            row["prev_hash"],
            row["chain"],
            str(row["chain_seq"]),
            str(row["at_us"]),
            row["actor"],
            row["tenant"],
            row["task_id"] or "",
            row["kind"],
            row["data"],
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class ArchiveCheck:
    """What `audit verify --archive` found: files, rows and seals checked, chains that
    continue from an archive not given (their first row's prev_hash), and problems."""

    files: int = 0
    rows: int = 0
    seals: int = 0
    continued: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def audit_archive_verify(path: Path | str, *, keys: dict[str, bytes] | None = None) -> ArchiveCheck:
    """Check an archive file, or every `*.jsonl` archive in a folder (oldest partition
    first, chains linked across them), without the database.

    1. Each file: its header, every row's hash, each chain's numbering and links within
       it, its end line's counts (a cut file is found).
    2. Across files: a chain's first row in a file links to its last row in the file before.
    3. Each seal: its MAC with the configured key (STEWARD_AUDIT_SEAL_KEY and old keys),
       its heads' Merkle root and count, and each sealed head that falls within a chain's
       rows in this archive is there with that hash.
    """
    keys = dict(config.audit_seal_keys()) if keys is None else keys
    target = Path(path)
    files = sorted(target.glob("*.jsonl")) if target.is_dir() else [target]
    check = ArchiveCheck()
    if not files:
        check.problems.append(f"{target}: no archive files")
        return check
    parsed = []
    for file in files:
        header, rows, seals, end = _read(file, check)
        if header is not None:
            parsed.append((header, file, rows, seals, end))
    parsed.sort(key=lambda p: (p[0].get("lower") is not None, p[0].get("lower") or ""))
    tails: dict[str, tuple[int, str]] = {}
    for _header, file, rows, seals, end in parsed:
        check.files += 1
        name = file.name
        if end is None:
            check.problems.append(f"{name}: no end line: the file is cut short")
        elif end.get("rows") != len(rows) or end.get("seals") != len(seals):
            check.problems.append(f"{name}: holds {len(rows)} rows and {len(seals)} seals, its end line says {end}")
        spans: dict[str, tuple[int, int]] = {}
        held: dict[tuple[str, int], str] = {}
        previous = None
        for row in rows:
            check.rows += 1
            where = f"{name}: {row['chain']} #{row['chain_seq']} (id {row['id']})"
            if row_hash(row) != row["hash"]:
                check.problems.append(f"{where}: hash (its content does not match its hash)")
            if previous is not None and previous["chain"] == row["chain"]:
                if row["chain_seq"] != previous["chain_seq"] + 1:
                    check.problems.append(f"{where}: gap (the row before it is missing)")
                elif row["prev_hash"] != previous["hash"]:
                    check.problems.append(f"{where}: link (the row before it changed)")
            elif row["chain_seq"] == 1:
                if row["prev_hash"] != "":
                    check.problems.append(f"{where}: link (a chain's first row links to nothing)")
            elif row["chain"] in tails:
                seq, digest = tails[row["chain"]]
                if row["chain_seq"] != seq + 1:
                    check.problems.append(f"{where}: gap (the earlier archive ends at #{seq})")
                elif row["prev_hash"] != digest:
                    check.problems.append(f"{where}: link (the earlier archive's last row differs)")
            else:
                check.continued += 1
            low, _ = spans.get(row["chain"], (row["chain_seq"], row["chain_seq"]))
            spans[row["chain"]] = (low, row["chain_seq"])
            held[(row["chain"], row["chain_seq"])] = row["hash"]
            tails[row["chain"]] = (row["chain_seq"], row["hash"])
            previous = row
        for seal in seals:
            check.seals += 1
            check.problems += _seal_problems(name, seal, keys, spans, held)
    return check


def _read(file: Path, check: ArchiveCheck):
    header, rows, seals, end = None, [], [], None
    try:
        with open(file, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    obj = json.loads(line)
                except ValueError:
                    check.problems.append(f"{file.name}:{number}: not JSON")
                    continue
                if not isinstance(obj, dict) or len(obj) < 1:
                    check.problems.append(f"{file.name}:{number}: not an archive line")
                elif number == 1:
                    if obj.get("archive") != FORMAT:
                        check.problems.append(f"{file.name}: not a Steward audit archive ({FORMAT})")
                        return None, [], [], None
                    header = obj
                elif "row" in obj and isinstance(obj["row"], dict):
                    rows.append(obj["row"])
                elif "seal" in obj and isinstance(obj["seal"], dict):
                    seals.append(obj["seal"])
                elif "end" in obj and isinstance(obj["end"], dict):
                    end = obj["end"]
                else:
                    check.problems.append(f"{file.name}:{number}: not an archive line")
    except (OSError, UnicodeDecodeError) as exc:
        check.problems.append(f"{file.name}: cannot be read ({exc.__class__.__name__})")
        return None, [], [], None
    if header is None:
        check.problems.append(f"{file.name}: empty, or no archive header")
        return None, [], [], None
    try:
        for row in rows:
            for key in ("chain", "actor", "tenant", "kind", "data", "prev_hash", "hash"):
                if not isinstance(row[key], str):
                    raise KeyError(key)
            if not isinstance(row["chain_seq"], int) or not isinstance(row["at_us"], int):
                raise KeyError("chain_seq")
    except (KeyError, TypeError):
        check.problems.append(f"{file.name}: a row lacks a field the hash covers")
        return None, [], [], None
    return header, rows, seals, end


def _seal_problems(name: str, seal: dict, keys: dict, spans: dict, held: dict) -> list[str]:
    where = f"{name}: seal {seal.get('tenant')} #{seal.get('seq')}"
    try:
        heads = [(chain, int(seq), bytes.fromhex(digest)) for chain, seq, digest in seal["heads"]]
        through = seal.get("through")
        shaped = AuditSeal(
            tenant=seal["tenant"],
            seq=seal["seq"],
            sealed_at=datetime.fromisoformat(seal["sealed_at"]).astimezone(UTC),
            version=seal["version"],
            root=bytes.fromhex(seal["root"]),
            chains=seal["chains"],
            through_at=datetime.fromisoformat(through[0]) if through else None,
            through_id=through[1] if through else None,
            behind=seal["behind"],
            key_id=seal["key_id"],
            prev_mac=bytes.fromhex(seal["prev_mac"]),
            mac=bytes.fromhex(seal["mac"]),
        )
    except (KeyError, TypeError, ValueError):
        return [f"{where}: not a version {VERSION} seal as the archive writes them"]
    problems = []
    key = keys.get(shaped.key_id)
    if key is None:
        problems.append(f"{where}: made with key {shaped.key_id}, which is not configured")
    elif not hmac.compare_digest(bytes(shaped.mac), _mac(key, shaped)):
        problems.append(f"{where}: not authentic (its MAC does not match its content)")
    if len(heads) != shaped.chains or merkle_root(sorted(heads, key=lambda h: h[0].encode())) != shaped.root:
        problems.append(f"{where}: its heads no longer hash to its root")
    for chain, seq, digest in heads:
        low_high = spans.get(chain)
        if low_high is None or not low_high[0] <= seq <= low_high[1]:
            continue  # a head in another partition: checked there, or in the live trail
        found = held.get((chain, seq))
        if found is None:
            problems.append(f"{where}: sealed row {chain} #{seq} is missing")
        elif found != digest.hex():
            problems.append(f"{where}: sealed row {chain} #{seq} has another hash")
    return problems
