"""Alembic migrations owning Engram's schema (reviewed like code).

``ledger.storage.db.migrate`` runs them programmatically; ``alembic -c alembic.ini check``
(with ``ENGRAM_DATABASE_URL`` set) shows that the models and the migrations agree.
"""
