/** Shared test helpers: the known-answer vectors in specs/vectors/ and check assertions. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

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
