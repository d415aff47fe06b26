/**
 * @engram/verifier: the TypeScript port of Engram's verifier (issue 31).
 *
 * It verifies C2SP signed-note checkpoints, RFC 9162 inclusion and consistency proofs,
 * RFC 8785 canonical JSON, log leaves, event envelopes, agent event signatures, proofs of
 * possession and body commitments, failing with the same dotted check names as the Python
 * verifier (verifier/). It runs the shared known-answer vectors in specs/vectors/.
 */

export * from "./errors.js";
export {
  EMPTY_ROOT,
  HASH_SIZE,
  MAX_PROOF_HASHES,
  MAX_TREE_SIZE,
  consistencyProofLength,
  inclusionProofLength,
  leafHash,
  nodeHash,
  rootFromLeafHashes,
  verifyConsistency,
  verifyInclusion,
  type ConsistencyArgs,
  type InclusionArgs,
  type VerifiedConsistency,
  type VerifiedInclusion,
} from "./merkle.js";
export { checkPublicKey, verifySignature } from "./ed25519.js";
export {
  ALG_ED25519,
  MAX_NOTE_BYTES,
  MAX_SIGNATURES,
  Checkpoint,
  SignedNote,
  VerifierKey,
  b64decodeStrict,
  b64encode,
  checkOrigin,
  checkpointText,
  ed25519KeyId,
  encodesAsUtf8,
  formatVerifierKey,
  parseDecimal,
  signNote,
  verifyCheckpoint,
  type NoteSignature,
  type VerifiedCheckpoint,
} from "./note.js";
export {
  MAX_DEPTH,
  MAX_SAFE_INTEGER,
  canonicalBytes,
  checkShape,
  parseCanonical,
  parseStrict,
  type JSONValue,
  type ParseLimits,
  type ShapeLimits,
} from "./jcs.js";
export {
  AGENT_OR_POLICY_KINDS,
  BODY_DOMAIN,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_LEAF_BYTES,
  ENVELOPE_VERSION,
  EVENT_DOMAIN,
  KEY_ID_DOMAIN,
  KEY_KINDS,
  LEAF_FORMAT,
  MAX_ENVELOPE_BYTES,
  POLICY_AGENT,
  POLICY_KINDS,
  POP_DOMAIN,
  SALT_SIZE,
  Envelope,
  Leaf,
  NewKey,
  agentKeyId,
  bodyCommitment,
  checkAgentId,
  checkKind,
  eventSigningInput,
  popSigningInput,
  signEvent,
  signPop,
  verifyBody,
  verifyEventSignature,
  verifyPop,
  type EnvelopeFields,
  type LeafFields,
} from "./event.js";
