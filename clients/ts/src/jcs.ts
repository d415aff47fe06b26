/**
 * RFC 8785 (JCS) canonical JSON for Engram's signed data, with a strict parser.
 * Port of verifier/jcs.py: the same inputs are accepted and rejected, with the same checks.
 *
 * Trust role: every JSON object that is signed or hashed (event envelopes, leaves, bodies)
 * is accepted only if `canonicalBytes(parse(b))` equals `b` ({@link parseCanonical}).
 * Verifiers therefore check the exact bytes they were given; re-encoding is used only to
 * prove the bytes are the one canonical form.
 *
 * Invariants (specs/event-envelope.md §2):
 *
 * - Only the JSON subset without numbers other than integers is allowed: no floats, no
 *   exponents, no fractions, integers within [-(2^53-1), 2^53-1] (the I-JSON safe range).
 *   RFC 8785 serialises numbers the ECMAScript way; on safe integers that is the plain
 *   decimal form.
 * - Object keys are unique (RFC 7493); a duplicate is rejected, never silently overwritten.
 * - Keys are sorted by UTF-16 code units (RFC 8785 §3.2.3), which is the default order of
 *   JavaScript string comparison.
 * - Strings are valid Unicode scalar values (no lone surrogates); the text is UTF-8 without
 *   BOM.
 * - Nesting depth and input size are bounded by the caller-provided limits.
 *
 * The Python verifier parses with the standard library's `json.loads` and hooks; this
 * module has its own parser, written to accept exactly the same texts as that parser (the
 * C scanner of CPython's json module, strict mode) and to fail with the same check first:
 * the pre-scan of {@link checkShape}, then syntax, integer, float and duplicate-key errors
 * in the order the scanner meets them (a duplicate key when its object closes), then the
 * depth and lone-surrogate checks that Python makes in a walk after parsing.
 */

import { decodeUtf8Strict, hasLoneSurrogate, utf8 } from "./bytes.js";
import { CanonicalFormError, LimitExceededError, MalformedError, type VerificationError } from "./errors.js";

export const MAX_SAFE_INTEGER = 2 ** 53 - 1;
export const MAX_DEPTH = 32;

/** The values {@link parseStrict} returns: objects are plain objects whose own enumerable
 * properties are exactly the JSON members ("__proto__" included, as an own property). */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

// ---------------------------------------------------------------------------------------
// Canonical encoding
// ---------------------------------------------------------------------------------------

const ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"',
  "\\": "\\\\",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};

/** RFC 8785 §3.2.2.2 string escaping: \" \\ \b \f \n \r \t, other controls as \u00xx in
 * lowercase hex, everything else (DEL and U+2028/9 included) as is. */
function encodeString(s: string, out: string[]): void {
  if (hasLoneSurrogate(s)) {
    throw new CanonicalFormError("string holds a lone surrogate", { check: "canonical.string" });
  }
  out.push(
    '"' +
      s.replace(/[\x00-\x1f"\\]/g, (c) => ESCAPES[c] ?? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")) +
      '"',
  );
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function encode(value: unknown, out: string[], depth: number): void {
  if (depth > MAX_DEPTH) {
    throw new LimitExceededError(`nesting deeper than ${MAX_DEPTH}`, { check: "canonical.depth" });
  }
  if (value === null) {
    out.push("null");
  } else if (value === true) {
    out.push("true");
  } else if (value === false) {
    out.push("false");
  } else if (typeof value === "number") {
    // A JS number does not say whether it was written as a float; a non-integer (or NaN,
    // Infinity) is a float, an integer outside the safe range is refused as an integer.
    if (!Number.isInteger(value)) {
      throw new CanonicalFormError("floats are not allowed in signed data; use integers or decimal strings", {
        check: "canonical.float",
      });
    }
    if (Math.abs(value) > MAX_SAFE_INTEGER) {
      throw new CanonicalFormError(`integer ${value} is outside the safe range +-(2^53-1)`, {
        check: "canonical.integer",
      });
    }
    out.push(String(value === 0 ? 0 : value)); // -0 is 0
  } else if (typeof value === "bigint") {
    if (value > BigInt(MAX_SAFE_INTEGER) || value < -BigInt(MAX_SAFE_INTEGER)) {
      throw new CanonicalFormError(`integer ${value} is outside the safe range +-(2^53-1)`, {
        check: "canonical.integer",
      });
    }
    out.push(value.toString());
  } else if (typeof value === "string") {
    encodeString(value, out);
  } else if (Array.isArray(value)) {
    out.push("[");
    for (let i = 0; i < value.length; i++) {
      if (i) out.push(",");
      encode(value[i], out, depth + 1);
    }
    out.push("]");
  } else if (typeof value === "object" && isPlainObject(value)) {
    if (Object.getOwnPropertySymbols(value).length) {
      throw new CanonicalFormError("object keys must be strings", { check: "canonical.key" });
    }
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    for (const k of keys) {
      if (hasLoneSurrogate(k)) {
        throw new CanonicalFormError("key holds a lone surrogate", { check: "canonical.string" });
      }
    }
    keys.sort(); // RFC 8785 §3.2.3: UTF-16 code unit order, JavaScript's default
    out.push("{");
    keys.forEach((k, i) => {
      if (i) out.push(",");
      encodeString(k, out);
      out.push(":");
      encode(record[k], out, depth + 1);
    });
    out.push("}");
  } else {
    const what = value === undefined ? "undefined" : typeof value === "object" ? value.constructor?.name : typeof value;
    throw new CanonicalFormError(`type ${String(what)} has no JSON form`, { check: "canonical.type" });
  }
}

/**
 * Return the RFC 8785 canonical UTF-8 bytes of `value`.
 *
 * @throws CanonicalFormError floats, out-of-range integers, lone surrogates, symbol keys,
 *   values that are not JSON (undefined, functions, class instances, ...).
 * @throws LimitExceededError nesting deeper than {@link MAX_DEPTH}.
 */
export function canonicalBytes(value: unknown): Uint8Array {
  const out: string[] = [];
  encode(value, out, 0);
  return utf8(out.join(""));
}

// ---------------------------------------------------------------------------------------
// Shape pre-scan
// ---------------------------------------------------------------------------------------

export interface ShapeLimits {
  maxDepth?: number;
  maxContainers?: number;
  maxValues?: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Bound a JSON text's nesting depth, containers and values before parsing it; return the
 * deepest bracket nesting (0: no container).
 *
 * The same count as verifier/jcs.py `check_shape`, which blanks strings with the regular
 * expression `"[^"\\]*(?:\\.[^"\\]*)*"` and counts what is left: strings are skipped
 * (quote, then plain characters and backslash pairs, up to a closing quote), containers are
 * the `{` and `[` outside strings, values are bounded by commas + containers + 1, and the
 * depth is the deepest bracket nesting. An unterminated string is not blanked, and once one
 * is found no later string can be either (every later quote lies inside it, at a point
 * where the same scan resumes), so the rest of the text is counted as it is: one linear
 * pass.
 *
 * @throws LimitExceededError check `json.containers`, `json.values` or `canonical.depth`.
 */
export function checkShape(text: string, limits: ShapeLimits = {}): number {
  const maxDepth = limits.maxDepth ?? MAX_DEPTH;
  let containers = 0;
  let commas = 0;
  let depth = 0;
  let deepest = 0;
  let stringsEnded = false; // an unterminated string was met: nothing more is blanked
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE && !stringsEnded) {
      let j = i + 1;
      let closed = false;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === QUOTE) {
          closed = true;
          break;
        }
        j += d === BACKSLASH ? 2 : 1;
      }
      if (closed) {
        i = j + 1;
        continue;
      }
      stringsEnded = true;
    } else if (c === 0x7b || c === 0x5b) {
      // { [
      containers++;
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d) {
      // } ]
      depth--;
    } else if (c === 0x2c) {
      commas++;
    }
    i++;
  }
  if (limits.maxContainers !== undefined && containers > limits.maxContainers) {
    throw new LimitExceededError(`${containers} objects and arrays exceed the limit of ${limits.maxContainers}`, {
      check: "json.containers",
    });
  }
  if (limits.maxValues !== undefined) {
    const values = commas + containers + 1;
    if (values > limits.maxValues) {
      throw new LimitExceededError(`about ${values} values exceed the limit of ${limits.maxValues}`, {
        check: "json.values",
      });
    }
  }
  if (!containers) return 0;
  if (deepest > maxDepth + 1) {
    throw new LimitExceededError(`nesting deeper than ${maxDepth}`, { check: "canonical.depth" });
  }
  return deepest;
}

// ---------------------------------------------------------------------------------------
// Strict parser
// ---------------------------------------------------------------------------------------

function syntax(message: string, at: number): MalformedError {
  return new MalformedError(`not JSON: ${message} at ${at}`, { check: "json.syntax" });
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/**
 * A recursive-descent parser over the decoded text, mirroring CPython's json scanner
 * (whitespace is space, tab, LF, CR; numbers are matched greedily and a fraction or
 * exponent is taken only when a digit follows; strings reject raw C0 controls; NaN,
 * Infinity and -Infinity are refused). Depth and lone-surrogate failures are deferred
 * until the parse has succeeded, keeping the first in document order, as Python's
 * post-parse walk does.
 */
class Parser {
  private pos = 0;
  private deferred: VerificationError | null = null;

  constructor(private readonly text: string) {}

  parseDocument(): JSONValue {
    this.skipWhitespace();
    const value = this.parseValue(0);
    this.skipWhitespace();
    if (this.pos !== this.text.length) throw syntax("extra data", this.pos);
    if (this.deferred !== null) throw this.deferred;
    return value;
  }

  private defer(error: VerificationError): void {
    if (this.deferred === null) this.deferred = error;
  }

  /** The post-parse walk's checks of one value (or key) at `depth`. */
  private noteDepth(depth: number): void {
    if (depth > MAX_DEPTH) {
      this.defer(new LimitExceededError(`nesting deeper than ${MAX_DEPTH}`, { check: "canonical.depth" }));
    }
  }

  private noteString(s: string): void {
    if (hasLoneSurrogate(s)) {
      this.defer(new CanonicalFormError("string holds a lone surrogate", { check: "canonical.string" }));
    }
  }

  private skipWhitespace(): void {
    while (this.pos < this.text.length && isWhitespace(this.text.charCodeAt(this.pos))) this.pos++;
  }

  private parseValue(depth: number): JSONValue {
    this.noteDepth(depth);
    const t = this.text;
    const at = this.pos;
    if (at >= t.length) throw syntax("expecting value", at);
    switch (t[at]) {
      case '"': {
        const s = this.parseString();
        this.noteString(s);
        return s;
      }
      case "{":
        return this.parseObject(depth);
      case "[":
        return this.parseArray(depth);
      case "n":
        if (t.startsWith("null", at)) {
          this.pos += 4;
          return null;
        }
        break;
      case "t":
        if (t.startsWith("true", at)) {
          this.pos += 4;
          return true;
        }
        break;
      case "f":
        if (t.startsWith("false", at)) {
          this.pos += 5;
          return false;
        }
        break;
      case "N":
        if (t.startsWith("NaN", at)) throw syntax("NaN is not JSON", at);
        break;
      case "I":
        if (t.startsWith("Infinity", at)) throw syntax("Infinity is not JSON", at);
        break;
      case "-":
        if (t.startsWith("-Infinity", at)) throw syntax("-Infinity is not JSON", at);
        break;
      default:
        break;
    }
    return this.parseNumber();
  }

  /** CPython's number matcher: `-?(0|[1-9][0-9]*)`, then `.digits` only if a digit follows
   * the dot, then an exponent only if it has a digit (else it is left unread). */
  private parseNumber(): number {
    const t = this.text;
    const n = t.length;
    const start = this.pos;
    let i = start;
    if (t.charCodeAt(i) === 0x2d) {
      i++;
      if (i >= n) throw syntax("expecting value", start);
    }
    const first = t.charCodeAt(i);
    if (first >= 0x31 && first <= 0x39) {
      i++;
      while (i < n && isDigit(t.charCodeAt(i))) i++;
    } else if (first === 0x30) {
      i++;
    } else {
      throw syntax("expecting value", start);
    }
    let isFloat = false;
    if (i < n - 1 && t.charCodeAt(i) === 0x2e && isDigit(t.charCodeAt(i + 1))) {
      isFloat = true;
      i += 2;
      while (i < n && isDigit(t.charCodeAt(i))) i++;
    }
    if (i < n - 1 && (t.charCodeAt(i) === 0x65 || t.charCodeAt(i) === 0x45)) {
      const eStart = i;
      i++;
      if (i < n - 1 && (t.charCodeAt(i) === 0x2d || t.charCodeAt(i) === 0x2b)) i++;
      while (i < n && isDigit(t.charCodeAt(i))) i++;
      if (isDigit(t.charCodeAt(i - 1))) isFloat = true;
      else i = eStart;
    }
    const literal = t.slice(start, i);
    this.pos = i;
    if (isFloat) {
      throw new CanonicalFormError(`number ${JSON.stringify(literal)} is not an integer`, {
        check: "canonical.float",
      });
    }
    // Bound the digits before converting, so a huge literal costs nothing.
    if (literal.length > 17) {
      throw new CanonicalFormError(`integer literal of ${literal.length} digits is outside the safe range`, {
        check: "canonical.integer",
      });
    }
    const value = BigInt(literal); // exact, unlike Number() on 16-17 digits
    if (value > BigInt(MAX_SAFE_INTEGER) || value < -BigInt(MAX_SAFE_INTEGER)) {
      throw new CanonicalFormError(`integer ${value} is outside the safe range +-(2^53-1)`, {
        check: "canonical.integer",
      });
    }
    return Number(value); // "-0" is 0, as in Python
  }

  /** A string starting at the opening quote at `pos`. Escapes: \" \\ \/ \b \f \n \r \t and
   * \uXXXX (either case); each \u escape is one UTF-16 code unit, so an escaped surrogate
   * pair joins as in Python and an unpaired one stays a lone surrogate (deferred check). */
  private parseString(): string {
    const t = this.text;
    const n = t.length;
    const begin = this.pos;
    let i = begin + 1;
    let out = "";
    let chunk = i;
    for (;;) {
      if (i >= n) throw syntax("unterminated string", begin);
      const c = t.charCodeAt(i);
      if (c === QUOTE) {
        out += t.slice(chunk, i);
        this.pos = i + 1;
        return out;
      }
      if (c <= 0x1f) throw syntax("invalid control character in string", i);
      if (c !== BACKSLASH) {
        i++;
        continue;
      }
      out += t.slice(chunk, i);
      if (i + 1 >= n) throw syntax("unterminated string", begin);
      const e = t[i + 1];
      switch (e) {
        case '"':
        case "\\":
        case "/":
          out += e;
          i += 2;
          break;
        case "b":
          out += "\b";
          i += 2;
          break;
        case "f":
          out += "\f";
          i += 2;
          break;
        case "n":
          out += "\n";
          i += 2;
          break;
        case "r":
          out += "\r";
          i += 2;
          break;
        case "t":
          out += "\t";
          i += 2;
          break;
        case "u": {
          let unit = 0;
          for (let k = 0; k < 4; k++) {
            const h = i + 2 + k < n ? hexValue(t.charCodeAt(i + 2 + k)) : -1;
            if (h < 0) throw syntax("invalid \\uXXXX escape", i);
            unit = (unit << 4) | h;
          }
          out += String.fromCharCode(unit);
          i += 6;
          break;
        }
        default:
          throw syntax("invalid \\escape", i);
      }
      chunk = i;
    }
  }

  private parseObject(depth: number): JSONValue {
    const t = this.text;
    const obj: { [key: string]: JSONValue } = {};
    const seen = new Set<string>();
    let duplicate: string | null = null;
    this.pos++; // {
    this.skipWhitespace();
    if (t[this.pos] !== "}") {
      for (;;) {
        if (t[this.pos] !== '"') throw syntax("expecting property name enclosed in double quotes", this.pos);
        this.noteDepth(depth + 1);
        const key = this.parseString();
        this.noteString(key);
        this.skipWhitespace();
        if (t[this.pos] !== ":") throw syntax("expecting ':' delimiter", this.pos);
        this.pos++;
        this.skipWhitespace();
        const value = this.parseValue(depth + 1);
        if (seen.has(key)) {
          duplicate ??= key;
        } else {
          seen.add(key);
          // defineProperty, not assignment: a "__proto__" member must stay an own property.
          Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
        }
        this.skipWhitespace();
        if (t[this.pos] === "}") break;
        if (t[this.pos] !== ",") throw syntax("expecting ',' delimiter", this.pos);
        this.pos++;
        this.skipWhitespace();
      }
    }
    this.pos++; // }
    // Python's object_pairs_hook sees the pairs once the object has closed.
    if (duplicate !== null) {
      throw new MalformedError(`duplicate object key ${JSON.stringify(duplicate)}`, {
        check: "json.duplicate_key",
      });
    }
    return obj;
  }

  private parseArray(depth: number): JSONValue {
    const t = this.text;
    const arr: JSONValue[] = [];
    this.pos++; // [
    this.skipWhitespace();
    if (t[this.pos] !== "]") {
      for (;;) {
        arr.push(this.parseValue(depth + 1));
        this.skipWhitespace();
        if (t[this.pos] === "]") break;
        if (t[this.pos] !== ",") throw syntax("expecting ',' delimiter", this.pos);
        this.pos++;
        this.skipWhitespace();
      }
    }
    this.pos++; // ]
    return arr;
  }
}

export interface ParseLimits {
  /** Refuse inputs longer than this many bytes (`json.size`). */
  maxBytes: number;
  /** Refuse more objects and arrays than this (`json.containers`), if given. */
  maxContainers?: number;
  /** Refuse more values than about this (`json.values`), if given. */
  maxValues?: number;
}

/**
 * Parse JSON strictly: UTF-8 without BOM, no duplicate keys, integers only, bounded.
 *
 * The size is checked first, then the linear pre-scan {@link checkShape} bounds the
 * nesting depth and, when given, the number of containers and values before anything is
 * built.
 *
 * @throws LimitExceededError `json.size`, `json.containers`, `json.values`, `canonical.depth`.
 * @throws MalformedError `json.type`, `json.encoding` (not UTF-8, BOM), `json.syntax`
 *   (not JSON, NaN/Infinity), `json.duplicate_key`.
 * @throws CanonicalFormError `canonical.float`, `canonical.integer`, `canonical.string`
 *   (a lone surrogate from an escape).
 */
export function parseStrict(data: Uint8Array, limits: ParseLimits): JSONValue {
  if (!(data instanceof Uint8Array)) throw new MalformedError("input must be bytes", { check: "json.type" });
  if (data.length > limits.maxBytes) {
    throw new LimitExceededError(`${data.length} bytes exceeds the limit of ${limits.maxBytes}`, {
      check: "json.size",
    });
  }
  if (data.length >= 3 && data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf) {
    throw new MalformedError("byte order mark is not allowed", { check: "json.encoding" });
  }
  const text = decodeUtf8Strict(data);
  if (text === null) throw new MalformedError("not valid UTF-8", { check: "json.encoding" });
  const shape: ShapeLimits = { maxDepth: MAX_DEPTH };
  if (limits.maxContainers !== undefined) shape.maxContainers = limits.maxContainers;
  if (limits.maxValues !== undefined) shape.maxValues = limits.maxValues;
  checkShape(text, shape);
  return new Parser(text).parseDocument();
}

/**
 * Parse `data` strictly and require it to be exactly its RFC 8785 canonical form.
 *
 * @throws CanonicalFormError `canonical.form`: the bytes parse but are not the canonical
 *   encoding (key order, whitespace, escapes, "-0"); and everything {@link parseStrict} throws.
 */
export function parseCanonical(data: Uint8Array, limits: { maxBytes: number }): JSONValue {
  const value = parseStrict(data, { maxBytes: limits.maxBytes });
  const canonical = canonicalBytes(value);
  let same = canonical.length === data.length;
  for (let i = 0; same && i < data.length; i++) same = canonical[i] === data[i];
  if (!same) {
    throw new CanonicalFormError("JSON is not in RFC 8785 canonical form (key order, whitespace or escapes)", {
      check: "canonical.form",
    });
  }
  return value;
}
