/**
 * A protobuf (proto2) wire-format decoder with the semantics of prost 0.10, the decoder
 * biscuit-auth 6.0.0 (biscuit-python 0.4.0) uses for share tokens (token.ts).
 *
 * Trust role: a share token is untrusted bytes. The Python verifier accepts or refuses a
 * token after prost has decoded it, so this decoder must accept exactly the bytes prost
 * accepts and read the same values from them, or the two verifiers would disagree about the
 * same token. It therefore follows prost, not a stricter reading of protobuf:
 *
 * - varints are at most 10 bytes, the tenth at most 0x01; non-minimal varints are accepted;
 *   `uint32` / `int32` / enum fields keep the low 32 bits of the varint, `bool` is "not 0";
 * - a key is a varint of at most 32 bits, field number 0 and wire types 6 and 7 are refused;
 * - a known field with another wire type than its type's is refused; repeated scalar
 *   fields are read packed or unpacked;
 * - unknown fields are skipped (groups included, up to their matching end-group key);
 * - a scalar field given twice keeps the last value, a message field given twice is merged
 *   (prost's `merge`), repeated fields append, a oneof keeps its last member (merged when
 *   the same message member is given again); absent required fields hold their defaults;
 * - strings must be UTF-8 (Rust's `str::from_utf8`);
 * - a length runs past the end of its message: refused; nested messages at most 100 deep
 *   (prost's recursion limit, which also bounds skipping).
 *
 * Bounded: the input is the caller's (a token is at most 16 KiB of base64), every length is
 * checked against the bytes left before it is used, and recursion is bounded.
 */

import { decodeUtf8Strict } from "./bytes.js";

/** A failure to decode: the caller maps it to its own check name. */
export class ProtobufError extends Error {}

export type ScalarType = "uint32" | "int32" | "uint64" | "int64" | "bool" | "enum" | "bytes" | "string";

export interface FieldSpec {
  readonly name: string;
  readonly type: ScalarType | "message";
  /** The message type of a `message` field (a thunk: schemas refer to each other). */
  readonly message?: () => MessageSchema;
  readonly repeated?: boolean;
  /** proto2 `required` (prost: a plain field holding its default when absent). */
  readonly required?: boolean;
  /** The oneof this field belongs to (prost: an `Option<enum>` named after the oneof). */
  readonly oneof?: string;
}

export interface MessageSchema {
  readonly name: string;
  readonly fields: ReadonlyMap<number, FieldSpec>;
}

/** A oneof's value: which member is set, and its value. */
export interface OneofValue {
  readonly field: string;
  value: DecodedValue;
}

export type DecodedValue = number | bigint | boolean | Uint8Array | string | DecodedMessage;

/** A decoded message: fields by name (arrays for repeated fields, `OneofValue` for oneofs,
 * `undefined` for absent optional fields). */
export interface DecodedMessage {
  [name: string]: DecodedValue | DecodedValue[] | OneofValue | undefined;
}

/** prost's RECURSION_LIMIT. */
export const RECURSION_LIMIT = 100;

const WIRE_VARINT = 0;
const WIRE_64 = 1;
const WIRE_LEN = 2;
const WIRE_START_GROUP = 3;
const WIRE_END_GROUP = 4;
const WIRE_32 = 5;

const MASK64 = (1n << 64n) - 1n;

class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  get remaining(): number {
    return this.end - this.pos;
  }

  /** prost's decode_varint: at most 10 bytes, the tenth at most 0x01. */
  varint(): bigint {
    let value = 0n;
    for (let count = 0; count < 10; count++) {
      if (this.pos >= this.end) throw new ProtobufError("invalid varint");
      const byte = this.buf[this.pos++] as number;
      value |= BigInt(byte & 0x7f) << BigInt(7 * count);
      if (byte < 0x80) {
        if (count === 9 && byte >= 0x02) throw new ProtobufError("invalid varint");
        return value & MASK64;
      }
    }
    throw new ProtobufError("invalid varint");
  }

  /** A length prefix and the bounds of the bytes it delimits. */
  delimited(): [number, number] {
    const len = this.varint();
    if (len > BigInt(this.remaining)) throw new ProtobufError("buffer underflow");
    const start = this.pos;
    this.pos += Number(len);
    return [start, this.pos];
  }

  /** prost's decode_key: a varint of at most 32 bits, wire type 0-5, field number > 0. */
  key(): [tag: number, wireType: number] {
    const key = this.varint();
    if (key > 0xffffffffn) throw new ProtobufError("invalid key value");
    const wireType = Number(key & 7n);
    if (wireType > 5) throw new ProtobufError("invalid wire type value");
    const tag = Number(key >> 3n);
    if (tag < 1) throw new ProtobufError("invalid tag value: 0");
    return [tag, wireType];
  }

  skip(n: number): void {
    if (n > this.remaining) throw new ProtobufError("buffer underflow");
    this.pos += n;
  }
}

/** prost's skip_field (an unknown field), with its recursion context. */
function skipField(r: Reader, wireType: number, tag: number, ctx: number): void {
  if (ctx === 0) throw new ProtobufError("recursion limit reached");
  switch (wireType) {
    case WIRE_VARINT:
      r.varint();
      return;
    case WIRE_64:
      r.skip(8);
      return;
    case WIRE_32:
      r.skip(4);
      return;
    case WIRE_LEN:
      r.delimited();
      return;
    case WIRE_START_GROUP:
      for (;;) {
        const [innerTag, innerWire] = r.key();
        if (innerWire === WIRE_END_GROUP) {
          if (innerTag !== tag) throw new ProtobufError("unexpected end group tag");
          return;
        }
        skipField(r, innerWire, innerTag, ctx - 1);
      }
    default: // WIRE_END_GROUP
      throw new ProtobufError("unexpected end group tag");
  }
}

function expectWire(actual: number, expected: number): void {
  if (actual !== expected) throw new ProtobufError(`invalid wire type: expected ${expected}, got ${actual}`);
}

function scalarFromVarint(type: ScalarType, v: bigint): DecodedValue {
  switch (type) {
    case "uint32":
      return Number(v & 0xffffffffn);
    case "int32":
    case "enum":
      return Number(BigInt.asIntN(32, v));
    case "uint64":
      return v;
    case "int64":
      return BigInt.asIntN(64, v);
    case "bool":
      return v !== 0n;
    default:
      throw new ProtobufError(`not a varint type: ${type}`);
  }
}

function readScalar(r: Reader, type: ScalarType, wireType: number): DecodedValue {
  if (type === "bytes" || type === "string") {
    expectWire(wireType, WIRE_LEN);
    const [start, end] = r.delimited();
    const bytes = r.buf.slice(start, end);
    if (type === "bytes") return bytes;
    const text = decodeUtf8Strict(bytes);
    if (text === null) throw new ProtobufError("invalid string value: data is not UTF-8 encoded");
    return text;
  }
  expectWire(wireType, WIRE_VARINT);
  return scalarFromVarint(type, r.varint());
}

/** A fresh message of `schema`: repeated fields empty, required scalars at their default,
 * required messages fresh, optional fields and oneofs absent. */
export function defaultMessage(schema: MessageSchema): DecodedMessage {
  const msg: DecodedMessage = {};
  for (const spec of schema.fields.values()) {
    if (spec.oneof !== undefined) continue;
    if (spec.repeated) msg[spec.name] = [];
    else if (spec.required) msg[spec.name] = defaultValue(spec);
  }
  return msg;
}

function defaultValue(spec: FieldSpec): DecodedValue {
  switch (spec.type) {
    case "message":
      return defaultMessage((spec.message as () => MessageSchema)());
    case "bytes":
      return new Uint8Array(0);
    case "string":
      return "";
    case "bool":
      return false;
    case "uint64":
    case "int64":
      return 0n;
    default:
      return 0;
  }
}

/** Merge a length-delimited nested message into `target` (prost's message::merge). */
function mergeNested(r: Reader, wireType: number, schema: MessageSchema, target: DecodedMessage, ctx: number): void {
  expectWire(wireType, WIRE_LEN);
  if (ctx === 0) throw new ProtobufError("recursion limit reached");
  const [start, end] = r.delimited();
  mergeFields(new Reader(r.buf, start, end), schema, target, ctx - 1);
}

function mergeFields(r: Reader, schema: MessageSchema, msg: DecodedMessage, ctx: number): void {
  while (r.remaining > 0) {
    const [tag, wireType] = r.key();
    const spec = schema.fields.get(tag);
    if (spec === undefined) {
      skipField(r, wireType, tag, ctx);
      continue;
    }
    if (spec.oneof !== undefined) {
      const current = msg[spec.oneof] as OneofValue | undefined;
      if (spec.type === "message") {
        const sub = (spec.message as () => MessageSchema)();
        let target: DecodedMessage;
        if (current !== undefined && current.field === spec.name) {
          target = current.value as DecodedMessage;
        } else {
          target = defaultMessage(sub);
        }
        mergeNested(r, wireType, sub, target, ctx);
        msg[spec.oneof] = { field: spec.name, value: target };
      } else {
        msg[spec.oneof] = { field: spec.name, value: readScalar(r, spec.type, wireType) };
      }
      continue;
    }
    if (spec.type === "message") {
      const sub = (spec.message as () => MessageSchema)();
      if (spec.repeated) {
        const target = defaultMessage(sub);
        mergeNested(r, wireType, sub, target, ctx);
        (msg[spec.name] as DecodedValue[]).push(target);
      } else {
        let target = msg[spec.name] as DecodedMessage | undefined;
        if (target === undefined) target = defaultMessage(sub);
        mergeNested(r, wireType, sub, target, ctx);
        msg[spec.name] = target;
      }
      continue;
    }
    if (spec.repeated) {
      const list = msg[spec.name] as DecodedValue[];
      if (wireType === WIRE_LEN && spec.type !== "bytes" && spec.type !== "string") {
        // packed
        const [start, end] = r.delimited();
        const inner = new Reader(r.buf, start, end);
        while (inner.remaining > 0) list.push(scalarFromVarint(spec.type, inner.varint()));
      } else {
        list.push(readScalar(r, spec.type, wireType));
      }
      continue;
    }
    msg[spec.name] = readScalar(r, spec.type, wireType);
  }
}

/** Decode a top-level message (prost's `Message::decode`). Throws {@link ProtobufError}. */
export function decodeMessage(data: Uint8Array, schema: MessageSchema): DecodedMessage {
  const msg = defaultMessage(schema);
  mergeFields(new Reader(data, 0, data.length), schema, msg, RECURSION_LIMIT);
  return msg;
}

/** Build a schema from `[field number, spec]` pairs. */
export function schema(name: string, fields: readonly (readonly [number, FieldSpec])[]): MessageSchema {
  return Object.freeze({ name, fields: new Map(fields) });
}
