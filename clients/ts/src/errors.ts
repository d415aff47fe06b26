/**
 * The exception tree of the Engram verifier (port of verifier/errors.py).
 *
 * Trust role: every failure a caller can see for untrusted input is a
 * {@link VerificationError}: "the input is bad, never retry". Each carries `check`, a stable
 * dotted name of the check that failed (for example `"note.signature"` or
 * `"inclusion.root"`). The names are the same as the Python verifier's, so that both
 * verifiers name the same failure the same way and the shared known-answer vectors in
 * specs/vectors/ can state the expected check once for both.
 *
 * ```
 * EngramError
 * └── VerificationError            untrusted input failed a check; never retry
 *     ├── MalformedError           bytes do not parse under the strict grammar
 *     │   ├── CanonicalFormError   JSON that is not RFC 8785 canonical / has floats, big ints
 *     │   └── LimitExceededError   an input is over its size or count bound
 *     ├── SignatureError           an Ed25519 signature does not verify
 *     ├── UnknownKeyError          no trusted key matches the key id / name
 *     ├── KeyStateError            the key exists but is not valid at that log position
 *     ├── OriginMismatchError      the log origin is not the expected one
 *     ├── ProofError               an inclusion or consistency proof fails
 *     └── StreamChainError         a stream's version / prev chain is broken
 * ```
 *
 * Programming errors (a caller passing a wrong argument to a helper that is not a
 * verification entry point) are plain `TypeError` / `RangeError`, never a VerificationError.
 */

/** Root of every error the Engram verifier raises on purpose. */
export class EngramError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Untrusted input failed a check. Retrying with the same input cannot succeed. */
export class VerificationError extends EngramError {
  /** The check name used when the thrower names none. */
  static readonly defaultCheck: string = "verification";

  /** Stable dotted name of the failed check, e.g. `"inclusion.root"`. */
  readonly check: string;

  constructor(message: string, options: { check?: string; cause?: unknown } = {}) {
    const ctor = new.target as typeof VerificationError;
    const check = options.check ?? ctor.defaultCheck;
    super(`[${check}] ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.check = check;
  }
}

/** The bytes do not parse under the strict grammar of their format. */
export class MalformedError extends VerificationError {
  static override readonly defaultCheck: string = "parse";
}

/** JSON is not in the one canonical form (RFC 8785, no floats, safe integers only). */
export class CanonicalFormError extends MalformedError {
  static override readonly defaultCheck: string = "canonical";
}

/** An input exceeds its size or count bound; it was rejected before further work. */
export class LimitExceededError extends MalformedError {
  static override readonly defaultCheck: string = "limit";
}

/** An Ed25519 signature does not verify over the exact signed bytes. */
export class SignatureError extends VerificationError {
  static override readonly defaultCheck: string = "signature";
}

/** No trusted key matches the key id or name the input refers to. */
export class UnknownKeyError extends VerificationError {
  static override readonly defaultCheck: string = "key.unknown";
}

/** The key is known but is not valid at that position of the log (revoked, rotated out). */
export class KeyStateError extends VerificationError {
  static override readonly defaultCheck: string = "key.state";
}

/** The input names a different log origin than the one being verified. */
export class OriginMismatchError extends VerificationError {
  static override readonly defaultCheck: string = "origin";
}

/** An RFC 9162 inclusion or consistency proof does not verify. */
export class ProofError extends VerificationError {
  static override readonly defaultCheck: string = "proof";
}

/** A stream's version sequence or `prev` link is broken. */
export class StreamChainError extends VerificationError {
  static override readonly defaultCheck: string = "stream.chain";
}
