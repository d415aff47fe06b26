"""What client and server agree on, pure: errors (:mod:`.errors`), wire types (:mod:`.wire`),
the event signer (:mod:`.signer`), the kind registry with body schemas (:mod:`.kinds`,
:mod:`.schemas`), the write gate (:mod:`.gate`), body builders (:mod:`.bodies`), records and
claims, request signing (:mod:`.httpsign`) and key files (:mod:`.keyfiles`). Imports only
:mod:`verifier` (tests/unit/test_house_imports.py). Import the submodules; this package
loads nothing."""
