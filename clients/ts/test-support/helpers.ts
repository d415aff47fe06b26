/** Shared test helpers: the known-answer vectors in specs/vectors/ and check assertions. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { utf8 } from "../src/bytes.js";
import { VerificationError } from "../src/errors.js";

/** specs/vectors/, found from this file's place (dist/test-support/helpers.js),
 * so the tests run from any working directory. */
const VECTORS = new URL("../../../../specs/vectors/", import.meta.url);

/** A vector file of specs/vectors/, typed by the caller. */
export function loadVectors<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(name, VECTORS), "utf8")) as T;
}

/** clients/ts/test/fixtures/, found the same way (dist/test-support/ -> test/fixtures/). */
const FIXTURES = new URL("../../test/fixtures/", import.meta.url);

/** A JSON fixture of test/fixtures/ (test data that only this client uses), typed by the caller. */
export function loadFixture<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(name, FIXTURES), "utf8")) as T;
}

/** Assert that `fn` throws a VerificationError (of `cls`, if given) whose check is `check`. */
export function throwsCheck(
  fn: () => unknown,
  check: string,
  cls: abstract new (...args: never[]) => VerificationError = VerificationError,
): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${String(e)}`);
    assert.equal((e as VerificationError).check, check, String(e));
    return true;
  });
}

/** A copy of `data` with one bit flipped. */
export function flipBit(data: Uint8Array, byte = 0, bit = 0): Uint8Array {
  const out = data.slice();
  out[byte] = (out[byte] as number) ^ (1 << bit);
  return out;
}

/** Edits of a bundle (fixtures/make_bundle_cases.py `apply_edits`). */
export type Edit =
  | ["drop_entry", number]
  | ["set", (string | number)[], unknown]
  | ["del", (string | number)[]]
  | ["set_repeat", (string | number)[], string, number]
  | ["replace", string, string];

// JSON values of the test's own making (parsed from the fixture), mutated freely.
type Obj = Record<string | number, any>;

/** The bytes of a case: the builder's bytes (edits null), or the bundle parsed, edited and
 * serialised by JSON.stringify (the same text as the generator's json.dumps). */
export function applyEdits(base: string, edits: Edit[] | null): Uint8Array {
  if (edits === null) return utf8(base);
  const doc = JSON.parse(base) as Obj;
  const replaces: [string, string][] = [];
  const walk = (path: (string | number)[]): [Obj, string | number] => {
    let target: Obj = doc;
    for (const p of path.slice(0, -1)) target = target[p] as Obj;
    return [target, path[path.length - 1] as string | number];
  };
  for (const op of edits) {
    if (op[0] === "drop_entry") {
      doc["entries"] = (doc["entries"] as Obj[]).filter((e) => e["index"] !== op[1]);
    } else if (op[0] === "set") {
      const [target, last] = walk(op[1]);
      target[last] = op[2];
    } else if (op[0] === "del") {
      const [target, last] = walk(op[1]);
      if (Array.isArray(target)) target.splice(last as number, 1);
      else delete target[last];
    } else if (op[0] === "set_repeat") {
      const [target, last] = walk(op[1]);
      target[last] = op[2].repeat(op[3]);
    } else {
      replaces.push([op[1], op[2]]);
    }
  }
  let text = JSON.stringify(doc);
  for (const [from, to] of replaces) {
    assert.ok(text.includes(from), from);
    text = text.replace(from, () => to);
  }
  return utf8(text);
}
