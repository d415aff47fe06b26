/**
 * @engram/verifier: the TypeScript port of Engram's verifier (issue 31).
 *
 * This first slice verifies C2SP signed-note checkpoints, RFC 9162 inclusion and
 * consistency proofs, and RFC 8785 canonical JSON, failing with the same dotted check
 * names as the Python verifier (verifier/). It runs the shared known-answer vectors in
 * specs/vectors/.
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
