/**
 * Agent key history: which key may sign which event at which log position.
 * Port of verifier/keys.py: the same rules, in the same order, with the same check names.
 *
 * Trust role: the log itself is the key registry. An event's signature is checked against
 * the key that was valid for its agent *at that index*, derived only from earlier log
 * entries, so a verifier never trusts a key shipped beside the data (the attack that breaks
 * verifiers that read keys from the bundle or from the row being checked).
 *
 * Rules (specs/event-envelope.md §5), applied in log order to entry `i`:
 *
 * 1. `key.registered`: the envelope's `key_id` is the new key's id (self-signed, so the
 *    signature plus the proof of possession show control of the key); the agent has no
 *    active key; the key id was never seen before. Afterwards the key is the agent's
 *    active key.
 * 2. `key.rotated`: signed by the agent's active key; introduces a never-seen key with a
 *    valid proof of possession. Afterwards the old key is retired at `i` and the new key
 *    is active; events after `i` signed by the old key are rejected.
 * 3. `key.revoked`: signed by the agent's active key, or by the active key of the ledger's
 *    policy agent (forced revocation of a lost or compromised key). Afterwards the agent
 *    has no active key until a new `key.registered`.
 * 4. Policy kinds (`memory.distilled`, `memory.tier_changed`, `memory.archived`,
 *    `memory.replaced`, `memory.accessed`): decisions the ledger takes about an agent's
 *    memory, written in that agent's streams and signed by the active key of the ledger's
 *    policy agent, never by the agent. `memory.decay_exempted` may be signed by either.
 * 5. Every other kind: signed by the agent's active key. The policy key can never sign an
 *    agent's records (pact outcomes, evaluations, commitments, memories it wrote).
 *
 * Events signed before a rotation or revocation stay valid: history does not break when a
 * key is retired.
 *
 * Check names: `key.registered`, `key.rotated`, `key.revoked` (the key event breaks its
 * rule, or the signing key was retired that way), `key.unknown`, `key.authority`,
 * `key.owner`, `key.state`, `key.pop`, and the signature checks of
 * {@link verifyEventSignature} (`event.key_id`, `event.signature`).
 */

import { constantTimeEqual, utf8 } from "./bytes.js";
import { KeyStateError, MalformedError, UnknownKeyError } from "./errors.js";
import {
  AGENT_OR_POLICY_KINDS,
  POLICY_AGENT,
  POLICY_KINDS,
  agentKeyId,
  verifyEventSignature,
  verifyPop,
  type Envelope,
  type Leaf,
} from "./event.js";

/** How a key was retired. */
export type RetiredHow = "rotated" | "revoked";

/** An agent key and the log span in which it may sign. */
export interface KeyRecord {
  readonly keyId: string;
  readonly agent: string;
  readonly publicKey: Uint8Array;
  readonly addedAt: number;
  readonly retiredAt: number | null;
  readonly retiredHow: RetiredHow | null;
}

/** Read access to key state *before* the entry being checked. */
export interface KeyView {
  key(keyId: string): KeyRecord | null;
  activeKey(agent: string): string | null;
}

/** State change caused by a key event: a new active key and/or a retired key. */
export interface KeyChange {
  readonly add: KeyRecord | null;
  readonly retireKeyId: string | null;
  readonly retireHow: RetiredHow | null;
  readonly agent: string;
}

/** The key that must have signed the entry, and what applying the entry changes. */
export interface KeyDecision {
  readonly signerPublicKey: Uint8Array;
  readonly change: KeyChange | null;
}

function record(fields: { keyId: string; agent: string; publicKey: Uint8Array; addedAt: number }): KeyRecord {
  return Object.freeze({ ...fields, publicKey: fields.publicKey.slice(), retiredAt: null, retiredHow: null });
}

function change(fields: Partial<KeyChange> & { agent: string }): KeyChange {
  return Object.freeze({ add: null, retireKeyId: null, retireHow: null, ...fields });
}

/**
 * Decide which key must sign `envelope` at `index` and what it changes.
 *
 * @throws UnknownKeyError `key.unknown`: the signing key id was never registered.
 * @throws KeyStateError `key.registered` / `key.rotated` / `key.revoked` / `key.authority` /
 *   `key.owner` / `key.state`: the key is retired, belongs to another agent, or the agent's
 *   key state does not allow this key event.
 * @throws SignatureError `key.pop`: a new key's proof of possession fails.
 */
export function authorize(view: KeyView, envelope: Envelope, index: number): KeyDecision {
  const kind = envelope.kind;
  if (kind === "key.registered") {
    const nk = verifyPop(envelope);
    if (envelope.keyId !== nk.keyId) {
      throw new KeyStateError("key.registered must be signed by the key it registers", { check: "key.registered" });
    }
    if (view.key(nk.keyId) !== null) {
      throw new KeyStateError(`key ${nk.keyId} is already registered`, { check: "key.registered" });
    }
    if (view.activeKey(envelope.agent) !== null) {
      throw new KeyStateError(`agent ${envelope.agent} already has an active key; rotate it instead`, {
        check: "key.registered",
      });
    }
    const add = record({ keyId: nk.keyId, agent: envelope.agent, publicKey: nk.publicKey, addedAt: index });
    return Object.freeze({ signerPublicKey: nk.publicKey, change: change({ add, agent: envelope.agent }) });
  }

  const signer = view.key(envelope.keyId);
  if (signer === null) {
    throw new UnknownKeyError(`key ${envelope.keyId} is not registered in this log`, { check: "key.unknown" });
  }
  if (signer.retiredAt !== null) {
    throw new KeyStateError(`key ${signer.keyId} was ${signer.retiredHow} at index ${signer.retiredAt}`, {
      check: `key.${signer.retiredHow}`,
    });
  }

  if (kind === "key.revoked") {
    const target = view.activeKey(envelope.agent);
    if (target === null) {
      throw new KeyStateError(`agent ${envelope.agent} has no active key to revoke`, { check: "key.revoked" });
    }
    const own = signer.agent === envelope.agent && signer.keyId === target;
    const forced = signer.agent === POLICY_AGENT && view.activeKey(POLICY_AGENT) === signer.keyId;
    if (!(own || forced)) {
      throw new KeyStateError("key.revoked must be signed by the agent's active key or the ledger policy key", {
        check: "key.revoked",
      });
    }
    return Object.freeze({
      signerPublicKey: signer.publicKey,
      change: change({ retireKeyId: target, retireHow: "revoked", agent: envelope.agent }),
    });
  }

  const policySigned = signer.agent === POLICY_AGENT && envelope.agent !== POLICY_AGENT;
  if (POLICY_KINDS.has(kind) || (AGENT_OR_POLICY_KINDS.has(kind) && policySigned)) {
    // Decisions of the ledger's policy about an agent's memory, in the agent's streams.
    if (signer.agent !== POLICY_AGENT || view.activeKey(POLICY_AGENT) !== signer.keyId) {
      throw new KeyStateError(`${kind} is signed by the ledger's active policy key only`, {
        check: "key.authority",
      });
    }
    return Object.freeze({ signerPublicKey: signer.publicKey, change: null });
  }
  if (signer.agent !== envelope.agent) {
    throw new KeyStateError(`key ${signer.keyId} belongs to ${signer.agent}, not ${envelope.agent}`, {
      check: "key.owner",
    });
  }
  if (view.activeKey(envelope.agent) !== signer.keyId) {
    throw new KeyStateError(`key ${signer.keyId} is not the agent's active key`, { check: "key.state" });
  }

  if (kind === "key.rotated") {
    const nk = verifyPop(envelope);
    if (view.key(nk.keyId) !== null) {
      throw new KeyStateError(`key ${nk.keyId} is already registered`, { check: "key.rotated" });
    }
    const add = record({ keyId: nk.keyId, agent: envelope.agent, publicKey: nk.publicKey, addedAt: index });
    return Object.freeze({
      signerPublicKey: signer.publicKey,
      change: change({ add, retireKeyId: signer.keyId, retireHow: "rotated", agent: envelope.agent }),
    });
  }
  if (envelope.newKey !== null) {
    // Envelope.fromObj forbids this; a guard for envelopes built by hand.
    throw new MalformedError("only key events carry new_key", { check: "envelope.new_key" });
  }
  return Object.freeze({ signerPublicKey: signer.publicKey, change: null });
}

/** In-memory key state, advanced entry by entry in log order (used for replay and bundles).
 * Maps, not plain objects, so that no agent id or key id can name an inherited member. */
export class KeyHistory implements KeyView {
  /** Every key seen, by key id. */
  readonly keys = new Map<string, KeyRecord>();
  /** Each agent's active key id. */
  readonly active = new Map<string, string>();

  key(keyId: string): KeyRecord | null {
    return this.keys.get(keyId) ?? null;
  }

  activeKey(agent: string): string | null {
    return this.active.get(agent) ?? null;
  }

  /** Apply a decision's change as of entry `index`. */
  apply(change: KeyChange | null, index: number): void {
    if (change === null) return;
    if (change.retireKeyId !== null) {
      const old = this.keys.get(change.retireKeyId);
      if (old === undefined) throw new RangeError(`no key ${change.retireKeyId} to retire`); // Python: KeyError
      this.keys.set(old.keyId, Object.freeze({ ...old, retiredAt: index, retiredHow: change.retireHow }));
      if (this.active.get(old.agent) === old.keyId) this.active.delete(old.agent);
    }
    if (change.add !== null) {
      this.keys.set(change.add.keyId, change.add);
      this.active.set(change.add.agent, change.add.keyId);
    }
  }

  /**
   * Authorize the leaf, verify its agent signature, then advance the state.
   *
   * `verifiedWith`: a public key this leaf's signature was already verified under; the
   * Ed25519 check is skipped only if it is exactly the key authorized here and the key the
   * envelope names.
   *
   * @throws everything {@link authorize} throws; SignatureError `event.key_id` /
   *   `event.signature` from {@link verifyEventSignature}. Nothing changes on a failure.
   */
  checkAndApply(leaf: Leaf, options: { verifiedWith?: Uint8Array } = {}): KeyDecision {
    const decision = authorize(this, leaf.envelope, leaf.index);
    const key = decision.signerPublicKey;
    const verified = options.verifiedWith;
    if (
      !(
        verified !== undefined &&
        constantTimeEqual(verified, key) &&
        constantTimeEqual(utf8(agentKeyId(key)), utf8(leaf.envelope.keyId))
      )
    ) {
      verifyEventSignature(leaf.envelope, leaf.signature, key, { envelopeJcs: leaf.envelopeJcs() });
    }
    this.apply(decision.change, leaf.index);
    return decision;
  }
}
