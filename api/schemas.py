"""Request and response models of the HTTP API (the OpenAPI document is generated from these).

Every request model forbids unknown members and bounds every string and list, so a
request is refused before any work when it is malformed or oversize.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engram.protocol.schemas import MAX_QUERY_CHARS, MESH_PATTERN, REF_JSON_PATTERN, SESSION_JSON_PATTERN

B64 = r"^[A-Za-z0-9+/]*={0,2}$"
HEX64 = r"^[0-9a-f]{64}$"
AGENT = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
SESSION = SESSION_JSON_PATTERN  # engram.protocol.schemas: one rule for every schema
REF = REF_JSON_PATTERN
MESH = f"^{MESH_PATTERN.pattern}$"
KIND = r"^[a-z][a-z0-9_.]{0,63}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SignedEvent(Strict):
    """One event signed by an agent (specs/event-envelope.md), each part base64."""

    envelope: str = Field(max_length=12_000, pattern=B64, description="canonical envelope bytes")
    signature: str = Field(max_length=100, pattern=B64, description="64-byte Ed25519 signature")
    body: str = Field(max_length=100_000, pattern=B64, description="canonical body bytes")
    salt: str = Field(max_length=32, pattern=B64, description="16-byte salt")


class EventBatch(Strict):
    events: list[SignedEvent] = Field(min_length=1, max_length=256)


class ProofFromKnown(BaseModel):
    old_size: int
    proof: list[str] = Field(description="consistency proof from old_size to this receipt's checkpoint")


class ReceiptOut(BaseModel):
    index: int
    timestamp_us: int
    leaf_hash: str
    leaf: str
    agent: str
    kind: str
    version: int
    checkpoint: str
    proof: list[str]
    consistency: ProofFromKnown | None = Field(
        default=None, description="with an Engram-Known-Size request header: the proof from that size"
    )


#: What a write answer's ``redacted`` says.
REDACTED = Field(
    default=0,
    ge=0,
    description="secrets redacted before signing: the [REDACTED:<rule>] markers the event's body carries "
    "(specs/memory-events.md section 3)",
)


class CountedReceiptOut(ReceiptOut):
    """A receipt for an agent-signed event, with the redactions its body carries."""

    redacted: int = REDACTED


class Receipts(BaseModel):
    receipts: list[CountedReceiptOut]


class InclusionOut(BaseModel):
    index: int
    size: int
    leaf_hash: str
    root: str
    proof: list[str]
    checkpoint: str | None


#: Proofs one batch request may ask for (each costs O(log n) cached hashes).
MAX_BATCH_PROOFS = 256


class InclusionBatchIn(Strict):
    indices: list[Annotated[int, Field(ge=0, le=2**53, strict=True)]] = Field(
        min_length=1, max_length=MAX_BATCH_PROOFS, description="distinct leaf indices"
    )
    size: int | None = Field(
        default=None, ge=1, le=2**53, strict=True, description="tree size (default: latest)"
    )


class InclusionBatchOut(BaseModel):
    proofs: list[InclusionOut]


class ConsistencyOut(BaseModel):
    old_size: int
    new_size: int
    old_root: str
    new_root: str
    proof: list[str]


class KeyOut(BaseModel):
    key_id: str
    public_key: str
    added_at: int
    retired_at: int | None
    retired_how: str | None


class HeadOut(BaseModel):
    agent: str
    kind: str
    version: int
    index: int
    leaf_hash: str


class AgentOut(BaseModel):
    agent: str
    active_key: str | None
    keys: list[KeyOut]
    streams: list[HeadOut]


class ForceRevoke(Strict):
    reason: str = Field(min_length=1, max_length=500)


class SessionOpened(BaseModel):
    session: str
    receipt: ReceiptOut
    redacted: int = REDACTED


class SessionOut(BaseModel):
    agent: str
    session: str
    status: str
    title: str | None
    opened_index: int
    closed_index: int | None
    turns: int
    distilled: bool


class CloseOut(BaseModel):
    closed: ReceiptOut
    distilled: ReceiptOut | None
    entries: int
    decisions: list[ReceiptOut]
    redacted: int = REDACTED


class NowCurrentOut(BaseModel):
    erased: str = Field(description="an erased memory that was the current value of a fact that changed")
    current: str | None = Field(description="the earlier value current now, or null when none is left")


class WriteOut(BaseModel):
    receipt: ReceiptOut
    ref: str | None = Field(description="the memory item the entry made or confirmed, if any")
    current: list[NowCurrentOut] = Field(
        default_factory=list,
        description="a memory.erased: for each erased memory that was a fact's current value, the value "
        "current now",
    )
    redacted: int = REDACTED


class RecallIn(Strict):
    query: str = Field(default="", max_length=MAX_QUERY_CHARS)
    include_cold: bool = False
    include_archived: bool = Field(
        default=False,
        description="rank archived (decayed) memories at full weight instead of below live ones",
    )
    budget_tokens: int | None = Field(default=None, ge=1, le=100_000)
    session: str | None = Field(default=None, pattern=SESSION)
    limit: int = Field(default=10, ge=1, le=100)
    scopes: list[Annotated[str, Field(max_length=200)]] | None = Field(
        default=None,
        max_length=8,
        description="keep only memories of these scopes: global, project:<name>, user:<name> (default: all)",
    )
    meshes: list[Annotated[str, Field(max_length=97, pattern=MESH)]] | None = Field(
        default=None,
        max_length=8,
        description="the Memory Meshes whose shared memories join the ranking (default: every mesh the agent "
        "is a member of; [] for none)",
    )


class RecalledOut(BaseModel):
    index: int
    ref: str
    tier: str
    category: str
    content: str
    tags: list[str]
    confidence: int
    age_days: float
    score: float
    verify: str
    status: str = Field(
        description="active, archived (a decayed memory recalled because it matches) or superseded "
        "(a past value a newer memory replaced, recalled for a question about the past)"
    )
    session: str | None
    provenance: list[dict[str, str]]
    valid_from_us: int = Field(0, description="when the memory's fact became true (0: a session turn)")
    valid_until_us: int | None = Field(None, description="until when, once a newer memory replaced it")
    replaces: str | None = None
    replaced_by: str | None = None
    earlier: str | None = Field(None, description="what the memory it replaced said, and until when")
    author: str | None = Field(None, description="another agent's memory shared through a mesh: its author")
    mesh: str | None = Field(None, description="the Memory Mesh that shared it")


class RecallOut(BaseModel):
    agent: str
    query: str
    as_of_size: int
    session: str | None
    hot: list[RecalledOut]
    ranked: list[RecalledOut]
    hot_tokens: int
    total_tokens: int
    notes: list[str] = Field(description="what degraded this recall (e.g. the embedder was down)")
    context: str = Field(description="the <memory-context> block to place in a prompt")


class ItemOut(BaseModel):
    ref: str
    index: int
    source_kind: str
    tier: str
    status: str
    category: str
    content: str
    tags: list[str]
    confidence: int
    confirmations: int
    access_count: int
    last_access_us: int | None
    created_us: int
    decay_exempt: bool
    provenance: list[dict[str, str]]
    tier_history: list[dict[str, Any]]
    session: str | None
    superseded_by: str | None
    supersedes: str | None
    #: Validity and the ``memory.replaced`` links.
    valid_from_us: int | None = None
    valid_until_us: int | None = None
    replaced_by: str | None = None
    replaces: str | None = None
    #: The version 1 ``memory.replaced`` entries that still copy this memory's value:
    #: an erasure plan takes them with the memory.
    copies: list[dict[str, Any]] = Field(default_factory=list)


class MeshesOut(BaseModel):
    agent: str
    as_of_size: int
    meshes: list[dict[str, Any]] = Field(description="each mesh: creator, title, members with their grants")


class ItemsOut(BaseModel):
    agent: str
    as_of_size: int
    items: list[ItemOut]
    next: str | None = Field(description="pass as `after` for the next page; null at the end")


class ItemProofOut(BaseModel):
    item: ItemOut
    leaf: str = Field(description="base64 of the leaf that made the item")
    inclusion: InclusionOut
    body: str | None = Field(description="base64 of the entry's body (None once erased)")
    salt: str | None = Field(description="base64 of the body's salt (None once erased)")


class Decisions(BaseModel):
    decisions: list[ReceiptOut]


class OracleAgentOut(BaseModel):
    agent: str
    checkpoint: str
    statement: str = Field(description="C2SP signed note by the log key (specs/oracle.md)")
    payload: dict[str, Any]


class TaskClaim(Strict):
    """'completed ``count`` tasks (of ``task_type``) with mean quality ``mean_quality``'."""

    agent: str = Field(pattern=AGENT)
    count: int = Field(ge=0, le=2**53 - 1)
    task_type: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}$")
    mean_quality: str | None = Field(default=None, pattern=r"^(0|[1-9][0-9]{0,2})\.[0-9]{2}$")


class OracleClaimOut(BaseModel):
    verdict: Literal["supported", "contradicted", "unknown"]
    reason: str
    actual: dict[str, Any]
    checkpoint: str
    statement: str
    evidence: dict[str, Any] = Field(description="an attestation bundle (specs/bundle.md)")
    evidence_discloses_bodies: bool


class HealthOut(BaseModel):
    """``ok``: nothing is wrong; ``problems``: the check names of what is (details go to the
    service's log), e.g. ``signer.record_unwritable`` (appends are refused until the signer's
    record can be written) or ``memory.after_commit`` (a committed write's memory rules did not
    run: its receipt was given, the rest is done later)."""

    ok: bool
    size: int
    problems: list[str] = []


class AuditFindingOut(BaseModel):
    table: str
    row: str
    column: str | None
    message: str


class AuditOut(BaseModel):
    """``engram audit``'s report (ledger.audit): every derived row compared with the leaves."""

    clean: bool
    entries: int
    seconds: float
    findings: list[AuditFindingOut]
    more_findings: int
    notes: list[str]
