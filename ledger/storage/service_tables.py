"""The service's own tables beside the log: witness cosignatures, web UI sign-outs and
signed-request nonces. Each write is one short transaction of its own (never the log's
writer lock); each table stays bounded by pruning in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import func, insert, select
from sqlalchemy.exc import DBAPIError, IntegrityError

from engram.protocol.errors import StorageError
from ledger.storage.base import StoreBase
from ledger.storage.db import WRITE_OPTION
from ledger.storage.dbapi import storage_error, transaction
from ledger.storage.schema import cosignatures, ui_revoked_sessions

__all__ = ["ServiceTables"]


class ServiceTables(StoreBase):
    """Witness cosignatures, UI session sign-outs and request nonces."""

    # -- witness cosignatures -------------------------------------------------------------

    def cosignature_lines(self, size: int) -> list[str]:
        """The witness cosignature lines stored for the checkpoint of ``size``, by witness."""
        with self.read() as conn:
            rows = conn.execute(
                select(cosignatures.c.line)
                .where(cosignatures.c.size == size)
                .order_by(cosignatures.c.witness)
            )
            return [r[0] for r in rows]

    def witnessed_sizes(self) -> dict[str, int]:
        """For each witness key, the largest checkpoint size it cosigned for this log."""
        with self.read() as conn:
            rows = conn.execute(
                select(cosignatures.c.witness, func.max(cosignatures.c.size)).group_by(cosignatures.c.witness)
            )
            return {r[0]: int(r[1]) for r in rows}

    def add_cosignatures(self, size: int, lines: Mapping[str, str], *, now_us: int) -> None:
        """Store verified cosignature lines (witness key -> line) of checkpoint ``size``;
        a witness already stored for that size keeps its first line."""
        if not lines:
            return
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    have = {
                        r[0]
                        for r in conn.execute(
                            select(cosignatures.c.witness).where(cosignatures.c.size == size)
                        )
                    }
                    rows = [
                        {"size": size, "witness": w, "line": line, "received_at_us": now_us}
                        for w, line in sorted(lines.items())
                        if w not in have
                    ]
                    if rows:
                        conn.execute(insert(cosignatures), rows)
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e

    # -- HTTP request replay protection ---------------------------------------------------

    def revoke_ui_session(
        self, session: str, agent: str, *, now_s: int, expires_s: int, grace_s: int = 300
    ) -> None:
        """Record that the web UI session ``session`` of ``agent`` was signed out; it stays
        refused by every worker sharing this database until ``expires_s`` (when its cookie
        expires anyway). Rows expired for more than ``grace_s`` are pruned in the same
        transaction (the grace covers a worker whose clock runs behind, as for nonces).
        Durable when it returns; a session signed out twice is recorded once."""
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    conn.execute(
                        ui_revoked_sessions.delete().where(ui_revoked_sessions.c.expires_s < now_s - grace_s)
                    )
                    conn.execute(
                        insert(ui_revoked_sessions).values(session=session, agent=agent, expires_s=expires_s)
                    )
        except IntegrityError:
            return  # signed out already
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e

    def ui_session_revoked(self, session: str) -> bool:
        """Whether web UI session ``session`` was signed out (read on every owner request)."""
        with self.fast_read() as db:
            rows = db.rows(f'SELECT "session" FROM ui_revoked_sessions WHERE "session" = {db.ph}', (session,))  # noqa: S608
        return bool(rows)

    def claim_nonce(self, signer: str, nonce: str, *, now_s: int, expires_s: int, grace_s: int = 300) -> bool:
        """Record ``(signer, nonce)`` until ``expires_s``; False if it was already used.

        Rows expired for more than ``grace_s`` are pruned in the same transaction, so the
        table stays bounded by the request rate times the window, and a server whose clock
        runs up to ``grace_s`` ahead of another's cannot delete a row the other still needs.
        """
        # On the driver's connection (ledger.storage.dbapi): every signed request spends one.
        try:
            with transaction(self.engine, **{WRITE_OPTION: True}) as db:
                ph = db.ph
                db.execute(f"DELETE FROM request_nonces WHERE expires_s < {ph}", (now_s - grace_s,))  # noqa: S608
                db.execute(
                    f"INSERT INTO request_nonces (signer, nonce, expires_s) VALUES ({ph}, {ph}, {ph})",  # noqa: S608
                    (signer, nonce, expires_s),
                )
        except (IntegrityError, self.engine.dialect.loaded_dbapi.IntegrityError):
            return False  # spent already (the primary key)
        except (DBAPIError, self.driver_error) as e:
            raise storage_error("database error", e) from e
        return True
