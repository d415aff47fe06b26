/**
 * Checkpoints the verifier already holds: `requireExtends`, the check that a checkpoint
 * extends one verified before (port of `require_extends` and `StateError` of
 * verifier/state.py, with the same check names).
 *
 * Trust role: a verifier that forgets what it verified can be shown an old log (rollback)
 * or a rewritten one (fork) tomorrow. Whoever keeps the newest verified checkpoint (a
 * buyer, a browser's storage) passes it back, and every later checkpoint must extend it: an
 * older checkpoint is a rollback (`state.rollback`, or `trusted.stale` for a checkpoint the
 * caller trusts), a different root at the same size or a failing consistency proof is a
 * fork (`*.fork`), a larger checkpoint without a proof is `*.missing`.
 *
 * Not ported: `CheckpointStore` (the Python verifier's directory of remembered checkpoints,
 * with file locks): storage is the caller's in a browser or in Node.
 */

import { toHex } from "./bytes.js";
import { ProofError } from "./errors.js";
import { verifyConsistency } from "./merkle.js";
import type { VerifiedCheckpoint } from "./note.js";

/** What the verifier is shown does not extend what it verified before (a rollback or a
 * fork: a consistency failure, hence a {@link ProofError}). */
export class StateError extends ProofError {
  static override readonly defaultCheck: string = "state";
}

/** Which checks {@link requireExtends} names: `state.*` for a remembered checkpoint,
 * `trusted.*` for one the caller passed in. */
export type StatePrefix = "state" | "trusted";

/**
 * `cp` must extend `remembered`: same origin, not smaller, the same root at the same size,
 * and (when larger) a consistency `proof` from `remembered.size`.
 *
 * @throws StateError `<prefix>.origin`, `state.rollback` / `trusted.stale`,
 *   `<prefix>.fork`, `<prefix>.missing`.
 */
export function requireExtends(
  remembered: VerifiedCheckpoint,
  cp: VerifiedCheckpoint,
  proof: readonly Uint8Array[] | null,
  prefix: StatePrefix,
): void {
  if (remembered.origin !== cp.origin) {
    throw new StateError(
      `checkpoint of ${JSON.stringify(cp.origin)} checked against state of ${JSON.stringify(remembered.origin)}`,
      { check: `${prefix}.origin` },
    );
  }
  if (remembered.size > cp.size) {
    throw new StateError(
      `rollback: the checkpoint of size ${cp.size} is older than the checkpoint of size ` +
        `${remembered.size} already verified for ${cp.origin}`,
      { check: prefix === "state" ? `${prefix}.rollback` : `${prefix}.stale` },
    );
  }
  if (remembered.size === cp.size) {
    if (toHex(remembered.root) !== toHex(cp.root)) {
      throw new StateError(
        `FORK: the log signed two different roots at size ${cp.size} ` +
          `(${toHex(remembered.root).slice(0, 16)}... verified before, ${toHex(cp.root).slice(0, 16)}... now)`,
        { check: `${prefix}.fork` },
      );
    }
    return;
  }
  if (proof === null) {
    throw new StateError(`no consistency proof from the size ${remembered.size} already verified to ${cp.size}`, {
      check: `${prefix}.missing`,
    });
  }
  try {
    verifyConsistency({
      oldSize: remembered.size,
      newSize: cp.size,
      oldRoot: remembered.root,
      newRoot: cp.root,
      proof: [...proof],
    });
  } catch (e) {
    if (!(e instanceof ProofError)) throw e;
    throw new StateError(
      `FORK: the checkpoint of size ${cp.size} does not extend the one of size ${remembered.size} ` +
        `verified before (${e.message})`,
      { check: `${prefix}.fork`, cause: e },
    );
  }
}
