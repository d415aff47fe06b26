// Engram verifier for the browser, built from clients/ts by `npm run build:web` (do not edit: a test checks it is current).

// src/errors.ts
var EngramError = class extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
};
var VerificationError = class extends EngramError {
  /** The check name used when the thrower names none. */
  static defaultCheck = "verification";
  /** Stable dotted name of the failed check, e.g. `"inclusion.root"`. */
  check;
  constructor(message, options = {}) {
    const ctor = new.target;
    const check = options.check ?? ctor.defaultCheck;
    super(`[${check}] ${message}`, options.cause === void 0 ? void 0 : { cause: options.cause });
    this.check = check;
  }
};
var MalformedError = class extends VerificationError {
  static defaultCheck = "parse";
};
var CanonicalFormError = class extends MalformedError {
  static defaultCheck = "canonical";
};
var LimitExceededError = class extends MalformedError {
  static defaultCheck = "limit";
};
var SignatureError = class extends VerificationError {
  static defaultCheck = "signature";
};
var UnknownKeyError = class extends VerificationError {
  static defaultCheck = "key.unknown";
};
var KeyStateError = class extends VerificationError {
  static defaultCheck = "key.state";
};
var OriginMismatchError = class extends VerificationError {
  static defaultCheck = "origin";
};
var ProofError = class extends VerificationError {
  static defaultCheck = "proof";
};
var StreamChainError = class extends VerificationError {
  static defaultCheck = "stream.chain";
};

// node_modules/@noble/hashes/_u64.js
var U32_MASK64 = /* @__PURE__ */ (() => BigInt(2 ** 32 - 1))();
var _32n = /* @__PURE__ */ BigInt(32);
function fromBig(n, le = false) {
  if (le)
    return { h: Number(n & U32_MASK64), l: Number(n >> _32n & U32_MASK64) };
  return { h: Number(n >> _32n & U32_MASK64) | 0, l: Number(n & U32_MASK64) | 0 };
}
function split(lst, le = false) {
  const len = lst.length;
  let Ah = new Uint32Array(len);
  let Al = new Uint32Array(len);
  for (let i = 0; i < len; i++) {
    const { h, l } = fromBig(lst[i], le);
    [Ah[i], Al[i]] = [h, l];
  }
  return [Ah, Al];
}
var fromNumH = (n) => n / 2 ** 32 | 0;
var fromNumL = (n) => n >>> 0;
function setU64FromNum(view, byteOffset, n, isLE) {
  const h = fromNumH(n);
  const l = fromNumL(n);
  view.setUint32(byteOffset, isLE ? l : h, isLE);
  view.setUint32(byteOffset + 4, isLE ? h : l, isLE);
}
var shrSH = (h, _l, s) => h >>> s;
var shrSL = (h, l, s) => h << 32 - s | l >>> s;
var rotrSH = (h, l, s) => h >>> s | l << 32 - s;
var rotrSL = (h, l, s) => h << 32 - s | l >>> s;
var rotrBH = (h, l, s) => h << 64 - s | l >>> s - 32;
var rotrBL = (h, l, s) => h >>> s - 32 | l << 64 - s;
function add(Ah, Al, Bh, Bl) {
  const l = (Al >>> 0) + (Bl >>> 0);
  return { h: Ah + Bh + (l / 2 ** 32 | 0) | 0, l: l | 0 };
}
var add3L = (Al, Bl, Cl) => (Al >>> 0) + (Bl >>> 0) + (Cl >>> 0);
var add3H = (low, Ah, Bh, Ch) => Ah + Bh + Ch + (low / 2 ** 32 | 0) | 0;
var add4L = (Al, Bl, Cl, Dl) => (Al >>> 0) + (Bl >>> 0) + (Cl >>> 0) + (Dl >>> 0);
var add4H = (low, Ah, Bh, Ch, Dh) => Ah + Bh + Ch + Dh + (low / 2 ** 32 | 0) | 0;
var add5L = (Al, Bl, Cl, Dl, El) => (Al >>> 0) + (Bl >>> 0) + (Cl >>> 0) + (Dl >>> 0) + (El >>> 0);
var add5H = (low, Ah, Bh, Ch, Dh, Eh) => Ah + Bh + Ch + Dh + Eh + (low / 2 ** 32 | 0) | 0;

// node_modules/@noble/hashes/utils.js
function isBytes(a) {
  return a instanceof Uint8Array || ArrayBuffer.isView(a) && a.constructor.name === "Uint8Array" && "BYTES_PER_ELEMENT" in a && a.BYTES_PER_ELEMENT === 1;
}
var atitle = (title) => title ? `"${title}" ` : "";
function anumber(n, title = "") {
  if (typeof n !== "number")
    throw new TypeError(atitle(title) + "expected number, got " + typeof n);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new RangeError(atitle(title) + "expected integer >= 0, got " + n);
  return n;
}
function abytes(value, length, title = "") {
  if (isBytes(value) && (length === void 0 || value.length === length))
    return value;
  if (length !== void 0)
    anumber(length, "length");
  const bytes = isBytes(value);
  const ofLen = length !== void 0 ? ` of length ${length}` : "";
  const got = bytes ? `length=${value.length}` : `type=${typeof value}`;
  const message = atitle(title) + "expected Uint8Array" + ofLen + ", got " + got;
  if (!bytes)
    throw new TypeError(message);
  throw new RangeError(message);
}
var aobject = (value, label) => {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new TypeError((label === "object" ? "" : `"${label}" `) + "expected object, got type=" + typeof value);
};
var aopts = (value, label) => {
  aobject(value, label);
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null)
    throw new TypeError(`"${label}" expected plain object`);
  if (Object.hasOwn(value, "__proto__"))
    throw new TypeError(`"${label}.__proto__" is not allowed`);
};
function aexists(instance, checkFinished = true) {
  if (instance.destroyed)
    throw new Error("hash was destroyed");
  if (checkFinished && instance.finished)
    throw new Error("digest() was already called");
}
function aoutput(out, instance) {
  abytes(out, void 0, "output");
  const min = instance.outputLen;
  if (!(out.length >= min)) {
    throw new RangeError('"output" expected length >= ' + min);
  }
}
function clean(...arrays) {
  for (let i = 0; i < arrays.length; i++) {
    arrays[i].fill(0);
  }
}
function createView(arr) {
  return new DataView(arr.buffer, arr.byteOffset, arr.byteLength);
}
function rotr(word, shift) {
  return word << 32 - shift | word >>> shift;
}
function checkOpts(defaults, opts, title = "opts") {
  aopts(defaults, "defaults");
  if (opts !== void 0)
    aopts(opts, title);
  const merged = Object.assign(/* @__PURE__ */ Object.create(null), defaults, opts);
  return merged;
}
function createHasher(hashCons, info = {}) {
  if (typeof hashCons !== "function")
    throw new TypeError('"hashCons" expected function, got type=' + typeof hashCons);
  info = checkOpts({}, info, "info");
  const hashC = (msg, opts) => hashCons(opts).update(msg).digest();
  const tmp = hashCons(void 0);
  hashC.outputLen = tmp.outputLen;
  hashC.blockLen = tmp.blockLen;
  hashC.canXOF = tmp.canXOF;
  hashC.create = (opts) => hashCons(opts);
  Object.assign(hashC, info);
  return Object.freeze(hashC);
}
var oidNist = (suffix) => ({
  // Current NIST hashAlgs suffixes used here fit in one DER subidentifier octet.
  // Larger suffix values would need base-128 OID encoding and a different length byte.
  oid: Uint8Array.from([6, 9, 96, 134, 72, 1, 101, 3, 4, 2, suffix])
});

// node_modules/@noble/hashes/_md.js
function Chi(a, b, c) {
  return a & b ^ ~a & c;
}
function Maj(a, b, c) {
  return a & b ^ a & c ^ b & c;
}
var HashMD = class {
  blockLen;
  outputLen;
  canXOF = false;
  padOffset;
  isLE;
  // For partial updates less than block size
  buffer;
  view;
  finished = false;
  length = 0;
  pos = 0;
  destroyed = false;
  constructor(blockLen, outputLen, padOffset, isLE) {
    this.blockLen = blockLen;
    this.outputLen = outputLen;
    this.padOffset = padOffset;
    this.isLE = isLE;
    this.buffer = new Uint8Array(blockLen);
    this.view = createView(this.buffer);
  }
  update(data) {
    aexists(this);
    abytes(data);
    const { view, buffer, blockLen } = this;
    const len = data.length;
    let processed = false;
    for (let pos = 0; pos < len; ) {
      const take = Math.min(blockLen - this.pos, len - pos);
      if (take === blockLen) {
        const dataView = createView(data);
        for (; blockLen <= len - pos; pos += blockLen)
          this.process(dataView, pos);
        processed = true;
        continue;
      }
      buffer.set(pos === 0 && take === len ? data : data.subarray(pos, pos + take), this.pos);
      this.pos += take;
      pos += take;
      if (this.pos === blockLen) {
        this.process(view, 0);
        this.pos = 0;
        processed = true;
      }
    }
    this.length += data.length;
    if (processed)
      this.roundClean();
    return this;
  }
  digestInto(out) {
    aexists(this);
    aoutput(out, this);
    this.finished = true;
    const { buffer, view, blockLen, isLE } = this;
    let { pos } = this;
    buffer[pos++] = 128;
    buffer.fill(0, pos);
    if (this.padOffset > blockLen - pos) {
      this.process(view, 0);
      buffer.fill(0);
    }
    setU64FromNum(view, blockLen - 8, this.length * 8, isLE);
    this.process(view, 0);
    this.roundClean();
    const oview = out === buffer ? view : createView(out);
    const len = this.outputLen;
    const outLen = len / 4;
    const state = this.get();
    if (len % 4 || outLen > state.length)
      throw new Error("invalid outputLen");
    for (let i = 0; i < outLen; i++)
      oview.setUint32(4 * i, state[i], isLE);
  }
  digest() {
    const { buffer, outputLen } = this;
    this.digestInto(buffer);
    const res = buffer.slice(0, outputLen);
    this.destroy();
    return res;
  }
  _cloneIntoMeta(to) {
    const { buffer, length, finished, destroyed, pos } = this;
    to.destroyed = destroyed;
    to.finished = finished;
    to.length = length;
    to.pos = pos;
    if (pos)
      to.buffer.set(buffer);
    return to;
  }
  clone() {
    return this._cloneInto();
  }
};
var SHA256_IV = /* @__PURE__ */ Uint32Array.from([
  1779033703,
  3144134277,
  1013904242,
  2773480762,
  1359893119,
  2600822924,
  528734635,
  1541459225
]);
var SHA512_IV = /* @__PURE__ */ Uint32Array.from([
  1779033703,
  4089235720,
  3144134277,
  2227873595,
  1013904242,
  4271175723,
  2773480762,
  1595750129,
  1359893119,
  2917565137,
  2600822924,
  725511199,
  528734635,
  4215389547,
  1541459225,
  327033209
]);

// node_modules/@noble/hashes/sha2.js
var SHA256_K = /* @__PURE__ */ Uint32Array.from([
  1116352408,
  1899447441,
  3049323471,
  3921009573,
  961987163,
  1508970993,
  2453635748,
  2870763221,
  3624381080,
  310598401,
  607225278,
  1426881987,
  1925078388,
  2162078206,
  2614888103,
  3248222580,
  3835390401,
  4022224774,
  264347078,
  604807628,
  770255983,
  1249150122,
  1555081692,
  1996064986,
  2554220882,
  2821834349,
  2952996808,
  3210313671,
  3336571891,
  3584528711,
  113926993,
  338241895,
  666307205,
  773529912,
  1294757372,
  1396182291,
  1695183700,
  1986661051,
  2177026350,
  2456956037,
  2730485921,
  2820302411,
  3259730800,
  3345764771,
  3516065817,
  3600352804,
  4094571909,
  275423344,
  430227734,
  506948616,
  659060556,
  883997877,
  958139571,
  1322822218,
  1537002063,
  1747873779,
  1955562222,
  2024104815,
  2227730452,
  2361852424,
  2428436474,
  2756734187,
  3204031479,
  3329325298
]);
var SHA256_W = /* @__PURE__ */ new Uint32Array(64);
var SHA2_32B = class extends HashMD {
  // We cannot use array here since array allows indexing by variable
  // which means optimizer/compiler cannot use registers.
  // Numeric initializers matter: starting the fields as `undefined` changes
  // V8's field representation and makes sha256 3x slower (measured).
  A = 0;
  B = 0;
  C = 0;
  D = 0;
  E = 0;
  F = 0;
  G = 0;
  H = 0;
  constructor(outputLen, IV) {
    super(64, outputLen, 8, false);
    this.A = IV[0] | 0;
    this.B = IV[1] | 0;
    this.C = IV[2] | 0;
    this.D = IV[3] | 0;
    this.E = IV[4] | 0;
    this.F = IV[5] | 0;
    this.G = IV[6] | 0;
    this.H = IV[7] | 0;
  }
  get() {
    const { A, B: B2, C, D, E, F, G: G3, H } = this;
    return [A, B2, C, D, E, F, G3, H];
  }
  // prettier-ignore
  set(A, B2, C, D, E, F, G3, H) {
    this.A = A | 0;
    this.B = B2 | 0;
    this.C = C | 0;
    this.D = D | 0;
    this.E = E | 0;
    this.F = F | 0;
    this.G = G3 | 0;
    this.H = H | 0;
  }
  _cloneInto(to) {
    (to ||= new this.constructor()).set(...this.get());
    return this._cloneIntoMeta(to);
  }
  process(view, offset) {
    for (let i = 0; i < 16; i++, offset += 4)
      SHA256_W[i] = view.getUint32(offset, false);
    for (let i = 16; i < 64; i++) {
      const W15 = SHA256_W[i - 15];
      const W2 = SHA256_W[i - 2];
      const s0 = rotr(W15, 7) ^ rotr(W15, 18) ^ W15 >>> 3;
      const s1 = rotr(W2, 17) ^ rotr(W2, 19) ^ W2 >>> 10;
      SHA256_W[i] = s1 + SHA256_W[i - 7] + s0 + SHA256_W[i - 16] | 0;
    }
    let { A, B: B2, C, D, E, F, G: G3, H } = this;
    for (let i = 0; i < 64; i++) {
      const sigma1 = rotr(E, 6) ^ rotr(E, 11) ^ rotr(E, 25);
      const T1 = H + sigma1 + Chi(E, F, G3) + SHA256_K[i] + SHA256_W[i] | 0;
      const sigma0 = rotr(A, 2) ^ rotr(A, 13) ^ rotr(A, 22);
      const T2 = sigma0 + Maj(A, B2, C) | 0;
      H = G3;
      G3 = F;
      F = E;
      E = D + T1 | 0;
      D = C;
      C = B2;
      B2 = A;
      A = T1 + T2 | 0;
    }
    A = A + this.A | 0;
    B2 = B2 + this.B | 0;
    C = C + this.C | 0;
    D = D + this.D | 0;
    E = E + this.E | 0;
    F = F + this.F | 0;
    G3 = G3 + this.G | 0;
    H = H + this.H | 0;
    this.set(A, B2, C, D, E, F, G3, H);
  }
  roundClean() {
    clean(SHA256_W);
  }
  destroy() {
    this.destroyed = true;
    this.set(0, 0, 0, 0, 0, 0, 0, 0);
    clean(this.buffer);
  }
};
var _SHA256 = class extends SHA2_32B {
  constructor() {
    super(32, SHA256_IV);
  }
};
var K512 = /* @__PURE__ */ (() => split([
  "0x428a2f98d728ae22",
  "0x7137449123ef65cd",
  "0xb5c0fbcfec4d3b2f",
  "0xe9b5dba58189dbbc",
  "0x3956c25bf348b538",
  "0x59f111f1b605d019",
  "0x923f82a4af194f9b",
  "0xab1c5ed5da6d8118",
  "0xd807aa98a3030242",
  "0x12835b0145706fbe",
  "0x243185be4ee4b28c",
  "0x550c7dc3d5ffb4e2",
  "0x72be5d74f27b896f",
  "0x80deb1fe3b1696b1",
  "0x9bdc06a725c71235",
  "0xc19bf174cf692694",
  "0xe49b69c19ef14ad2",
  "0xefbe4786384f25e3",
  "0x0fc19dc68b8cd5b5",
  "0x240ca1cc77ac9c65",
  "0x2de92c6f592b0275",
  "0x4a7484aa6ea6e483",
  "0x5cb0a9dcbd41fbd4",
  "0x76f988da831153b5",
  "0x983e5152ee66dfab",
  "0xa831c66d2db43210",
  "0xb00327c898fb213f",
  "0xbf597fc7beef0ee4",
  "0xc6e00bf33da88fc2",
  "0xd5a79147930aa725",
  "0x06ca6351e003826f",
  "0x142929670a0e6e70",
  "0x27b70a8546d22ffc",
  "0x2e1b21385c26c926",
  "0x4d2c6dfc5ac42aed",
  "0x53380d139d95b3df",
  "0x650a73548baf63de",
  "0x766a0abb3c77b2a8",
  "0x81c2c92e47edaee6",
  "0x92722c851482353b",
  "0xa2bfe8a14cf10364",
  "0xa81a664bbc423001",
  "0xc24b8b70d0f89791",
  "0xc76c51a30654be30",
  "0xd192e819d6ef5218",
  "0xd69906245565a910",
  "0xf40e35855771202a",
  "0x106aa07032bbd1b8",
  "0x19a4c116b8d2d0c8",
  "0x1e376c085141ab53",
  "0x2748774cdf8eeb99",
  "0x34b0bcb5e19b48a8",
  "0x391c0cb3c5c95a63",
  "0x4ed8aa4ae3418acb",
  "0x5b9cca4f7763e373",
  "0x682e6ff3d6b2b8a3",
  "0x748f82ee5defb2fc",
  "0x78a5636f43172f60",
  "0x84c87814a1f0ab72",
  "0x8cc702081a6439ec",
  "0x90befffa23631e28",
  "0xa4506cebde82bde9",
  "0xbef9a3f7b2c67915",
  "0xc67178f2e372532b",
  "0xca273eceea26619c",
  "0xd186b8c721c0c207",
  "0xeada7dd6cde0eb1e",
  "0xf57d4f7fee6ed178",
  "0x06f067aa72176fba",
  "0x0a637dc5a2c898a6",
  "0x113f9804bef90dae",
  "0x1b710b35131c471b",
  "0x28db77f523047d84",
  "0x32caab7b40c72493",
  "0x3c9ebe0a15c9bebc",
  "0x431d67c49c100d4c",
  "0x4cc5d4becb3e42b6",
  "0x597f299cfc657e2a",
  "0x5fcb6fab3ad6faec",
  "0x6c44198c4a475817"
].map((n) => BigInt(n))))();
var SHA512_Kh = /* @__PURE__ */ (() => K512[0])();
var SHA512_Kl = /* @__PURE__ */ (() => K512[1])();
var SHA512_W_H = /* @__PURE__ */ new Uint32Array(80);
var SHA512_W_L = /* @__PURE__ */ new Uint32Array(80);
var SHA2_64B = class extends HashMD {
  // We cannot use array here since array allows indexing by variable
  // which means optimizer/compiler cannot use registers.
  // h -- high 32 bits, l -- low 32 bits
  // Numeric initializers matter: starting the fields as `undefined` changes
  // V8's field representation and slows hashing down (measured on sha256).
  Ah = 0;
  Al = 0;
  Bh = 0;
  Bl = 0;
  Ch = 0;
  Cl = 0;
  Dh = 0;
  Dl = 0;
  Eh = 0;
  El = 0;
  Fh = 0;
  Fl = 0;
  Gh = 0;
  Gl = 0;
  Hh = 0;
  Hl = 0;
  constructor(outputLen, IV) {
    super(128, outputLen, 16, false);
    this.Ah = IV[0] | 0;
    this.Al = IV[1] | 0;
    this.Bh = IV[2] | 0;
    this.Bl = IV[3] | 0;
    this.Ch = IV[4] | 0;
    this.Cl = IV[5] | 0;
    this.Dh = IV[6] | 0;
    this.Dl = IV[7] | 0;
    this.Eh = IV[8] | 0;
    this.El = IV[9] | 0;
    this.Fh = IV[10] | 0;
    this.Fl = IV[11] | 0;
    this.Gh = IV[12] | 0;
    this.Gl = IV[13] | 0;
    this.Hh = IV[14] | 0;
    this.Hl = IV[15] | 0;
  }
  // prettier-ignore
  get() {
    const { Ah, Al, Bh, Bl, Ch, Cl, Dh, Dl, Eh, El, Fh, Fl, Gh, Gl, Hh, Hl } = this;
    return [Ah, Al, Bh, Bl, Ch, Cl, Dh, Dl, Eh, El, Fh, Fl, Gh, Gl, Hh, Hl];
  }
  // prettier-ignore
  set(Ah, Al, Bh, Bl, Ch, Cl, Dh, Dl, Eh, El, Fh, Fl, Gh, Gl, Hh, Hl) {
    this.Ah = Ah | 0;
    this.Al = Al | 0;
    this.Bh = Bh | 0;
    this.Bl = Bl | 0;
    this.Ch = Ch | 0;
    this.Cl = Cl | 0;
    this.Dh = Dh | 0;
    this.Dl = Dl | 0;
    this.Eh = Eh | 0;
    this.El = El | 0;
    this.Fh = Fh | 0;
    this.Fl = Fl | 0;
    this.Gh = Gh | 0;
    this.Gl = Gl | 0;
    this.Hh = Hh | 0;
    this.Hl = Hl | 0;
  }
  _cloneInto(to) {
    (to ||= new this.constructor()).set(...this.get());
    return this._cloneIntoMeta(to);
  }
  process(view, offset) {
    for (let i = 0; i < 16; i++, offset += 4) {
      SHA512_W_H[i] = view.getUint32(offset);
      SHA512_W_L[i] = view.getUint32(offset += 4);
    }
    for (let i = 16; i < 80; i++) {
      const W15h = SHA512_W_H[i - 15] | 0;
      const W15l = SHA512_W_L[i - 15] | 0;
      const s0h = rotrSH(W15h, W15l, 1) ^ rotrSH(W15h, W15l, 8) ^ shrSH(W15h, W15l, 7);
      const s0l = rotrSL(W15h, W15l, 1) ^ rotrSL(W15h, W15l, 8) ^ shrSL(W15h, W15l, 7);
      const W2h = SHA512_W_H[i - 2] | 0;
      const W2l = SHA512_W_L[i - 2] | 0;
      const s1h = rotrSH(W2h, W2l, 19) ^ rotrBH(W2h, W2l, 61) ^ shrSH(W2h, W2l, 6);
      const s1l = rotrSL(W2h, W2l, 19) ^ rotrBL(W2h, W2l, 61) ^ shrSL(W2h, W2l, 6);
      const SUMl = add4L(s0l, s1l, SHA512_W_L[i - 7], SHA512_W_L[i - 16]);
      const SUMh = add4H(SUMl, s0h, s1h, SHA512_W_H[i - 7], SHA512_W_H[i - 16]);
      SHA512_W_H[i] = SUMh | 0;
      SHA512_W_L[i] = SUMl | 0;
    }
    let { Ah, Al, Bh, Bl, Ch, Cl, Dh, Dl, Eh, El, Fh, Fl, Gh, Gl, Hh, Hl } = this;
    for (let i = 0; i < 80; i++) {
      const sigma1h = rotrSH(Eh, El, 14) ^ rotrSH(Eh, El, 18) ^ rotrBH(Eh, El, 41);
      const sigma1l = rotrSL(Eh, El, 14) ^ rotrSL(Eh, El, 18) ^ rotrBL(Eh, El, 41);
      const CHIh = Eh & Fh ^ ~Eh & Gh;
      const CHIl = El & Fl ^ ~El & Gl;
      const T1ll = add5L(Hl, sigma1l, CHIl, SHA512_Kl[i], SHA512_W_L[i]);
      const T1h = add5H(T1ll, Hh, sigma1h, CHIh, SHA512_Kh[i], SHA512_W_H[i]);
      const T1l = T1ll | 0;
      const sigma0h = rotrSH(Ah, Al, 28) ^ rotrBH(Ah, Al, 34) ^ rotrBH(Ah, Al, 39);
      const sigma0l = rotrSL(Ah, Al, 28) ^ rotrBL(Ah, Al, 34) ^ rotrBL(Ah, Al, 39);
      const MAJh = Ah & Bh ^ Ah & Ch ^ Bh & Ch;
      const MAJl = Al & Bl ^ Al & Cl ^ Bl & Cl;
      Hh = Gh | 0;
      Hl = Gl | 0;
      Gh = Fh | 0;
      Gl = Fl | 0;
      Fh = Eh | 0;
      Fl = El | 0;
      ({ h: Eh, l: El } = add(Dh | 0, Dl | 0, T1h | 0, T1l | 0));
      Dh = Ch | 0;
      Dl = Cl | 0;
      Ch = Bh | 0;
      Cl = Bl | 0;
      Bh = Ah | 0;
      Bl = Al | 0;
      const All = add3L(T1l, sigma0l, MAJl);
      Ah = add3H(All, T1h, sigma0h, MAJh);
      Al = All | 0;
    }
    ({ h: Ah, l: Al } = add(this.Ah | 0, this.Al | 0, Ah | 0, Al | 0));
    ({ h: Bh, l: Bl } = add(this.Bh | 0, this.Bl | 0, Bh | 0, Bl | 0));
    ({ h: Ch, l: Cl } = add(this.Ch | 0, this.Cl | 0, Ch | 0, Cl | 0));
    ({ h: Dh, l: Dl } = add(this.Dh | 0, this.Dl | 0, Dh | 0, Dl | 0));
    ({ h: Eh, l: El } = add(this.Eh | 0, this.El | 0, Eh | 0, El | 0));
    ({ h: Fh, l: Fl } = add(this.Fh | 0, this.Fl | 0, Fh | 0, Fl | 0));
    ({ h: Gh, l: Gl } = add(this.Gh | 0, this.Gl | 0, Gh | 0, Gl | 0));
    ({ h: Hh, l: Hl } = add(this.Hh | 0, this.Hl | 0, Hh | 0, Hl | 0));
    this.set(Ah, Al, Bh, Bl, Ch, Cl, Dh, Dl, Eh, El, Fh, Fl, Gh, Gl, Hh, Hl);
  }
  roundClean() {
    clean(SHA512_W_H, SHA512_W_L);
  }
  destroy() {
    this.destroyed = true;
    clean(this.buffer);
    this.set(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  }
};
var _SHA512 = class extends SHA2_64B {
  constructor() {
    super(64, SHA512_IV);
  }
};
var sha256 = /* @__PURE__ */ createHasher(
  () => new _SHA256(),
  /* @__PURE__ */ oidNist(1)
);
var sha512 = /* @__PURE__ */ createHasher(
  () => new _SHA512(),
  /* @__PURE__ */ oidNist(3)
);

// src/bytes.ts
var ENCODER = new TextEncoder();
var STRICT_DECODER = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
function utf8(text) {
  return ENCODER.encode(text);
}
function decodeUtf8Strict(data) {
  try {
    return STRICT_DECODER.decode(data);
  } catch {
    return null;
  }
}
var LONE_SURROGATE = /[\uD800-\uDFFF]/u;
function hasLoneSurrogate(text) {
  return LONE_SURROGATE.test(text);
}
function constantTimeEqual(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
function concatBytes(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
function toHex(data) {
  let s = "";
  for (const b of data) s += b.toString(16).padStart(2, "0");
  return s;
}
var B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
var B64_VALUES = new Map([...B64_ALPHABET].map((c, i) => [c, i]));
var B64_SHAPE = /^[A-Za-z0-9+/]*={0,2}$/;
function base64Encode(data) {
  let out = "";
  for (let i = 0; i < data.length; i += 3) {
    const b0 = data[i];
    const b1 = data[i + 1];
    const b2 = data[i + 2];
    const n = b0 << 16 | (b1 ?? 0) << 8 | (b2 ?? 0);
    out += B64_ALPHABET[n >> 18 & 63];
    out += B64_ALPHABET[n >> 12 & 63];
    out += b1 === void 0 ? "=" : B64_ALPHABET[n >> 6 & 63];
    out += b2 === void 0 ? "=" : B64_ALPHABET[n & 63];
  }
  return out;
}
function base64DecodeLoose(text) {
  if (text.length % 4 !== 0 || !B64_SHAPE.test(text)) return null;
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array(text.length / 4 * 3 - pad);
  let at = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const c = text[i + j];
      n = n << 6 | (c === "=" ? 0 : B64_VALUES.get(c));
    }
    const bytes = [n >> 16 & 255, n >> 8 & 255, n & 255];
    for (const b of bytes) if (at < out.length) out[at++] = b;
  }
  return out;
}

// src/merkle.ts
var HASH_SIZE = 32;
var MAX_PROOF_HASHES = 64;
var MAX_TREE_SIZE = 2n ** 63n - 1n;
var EMPTY_ROOT = sha256(new Uint8Array(0));
var LEAF_PREFIX = Uint8Array.of(0);
var NODE_PREFIX = Uint8Array.of(1);
function leafHash(leaf) {
  return sha256(concatBytes(LEAF_PREFIX, leaf));
}
function nodeHash(left, right) {
  return sha256(concatBytes(NODE_PREFIX, left, right));
}
function bitLength(n) {
  return n === 0n ? 0 : n.toString(2).length;
}
function popCount(n) {
  let count = 0;
  for (const c of n.toString(2)) if (c === "1") count++;
  return count;
}
function split2(n) {
  return 1n << BigInt(bitLength(n - 1n) - 1);
}
function rootFromLeafHashes(hashes3) {
  const n = hashes3.length;
  if (n === 0) return EMPTY_ROOT;
  if (n === 1) return hashes3[0];
  const k = Number(split2(BigInt(n)));
  return nodeHash(rootFromLeafHashes(hashes3.slice(0, k)), rootFromLeafHashes(hashes3.slice(k)));
}
function inclusionProofLength(index, size) {
  if (!(0n <= index && index < size)) throw new RangeError(`index ${index} is not below size ${size}`);
  const inner = bitLength(index ^ size - 1n);
  return inner + popCount(index >> BigInt(inner));
}
function consistencyProofLength(oldSize, newSize) {
  if (!(0n <= oldSize && oldSize <= newSize)) {
    throw new RangeError(`old size ${oldSize} is not within [0, ${newSize}]`);
  }
  if (oldSize === 0n || oldSize === newSize) return 0;
  let count = 0;
  let lo = 0n;
  let hi = newSize;
  let m = oldSize;
  let complete = true;
  for (; ; ) {
    const n = hi - lo;
    if (m === n) {
      if (!complete) count++;
      return count;
    }
    const k = split2(n);
    count++;
    if (m <= k) {
      hi = lo + k;
    } else {
      lo += k;
      m -= k;
      complete = false;
    }
  }
}
function checkHash(value, what) {
  if (!(value instanceof Uint8Array) || value.length !== HASH_SIZE) {
    throw new ProofError(`${what} must be ${HASH_SIZE} bytes`, { check: "proof.hash_size" });
  }
}
function checkProofList(proof, what) {
  if (!Array.isArray(proof)) {
    throw new ProofError(`${what} proof must be a list of hashes`, { check: "proof.hash_size" });
  }
  if (proof.length > MAX_PROOF_HASHES) {
    throw new ProofError(`${what} has ${proof.length} hashes, more than ${MAX_PROOF_HASHES}`, {
      check: `${what}.length`
    });
  }
  proof.forEach((p, i) => checkHash(p, `${what} hash ${i}`));
}
function asInteger(value) {
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  return null;
}
function verifyInclusion(args) {
  const { leafHash: leaf, proof, root } = args;
  checkHash(leaf, "leaf hash");
  checkHash(root, "root");
  checkProofList(proof, "inclusion");
  const index = asInteger(args.index);
  const size = asInteger(args.size);
  if (index === null || size === null || !(0n <= index && index < size && size <= MAX_TREE_SIZE)) {
    throw new ProofError(`index ${String(args.index)} is not within a tree of size ${String(args.size)}`, {
      check: "inclusion.range"
    });
  }
  const expected = inclusionProofLength(index, size);
  if (proof.length !== expected) {
    throw new ProofError(`proof has ${proof.length} hashes; index ${index} in size ${size} needs ${expected}`, {
      check: "inclusion.length"
    });
  }
  let fn = index;
  let sn = size - 1n;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) {
      throw new ProofError("proof is longer than the path to the root", { check: "inclusion.length" });
    }
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) {
    throw new ProofError("proof is shorter than the path to the root", { check: "inclusion.length" });
  }
  if (!constantTimeEqual(r, root)) {
    throw new ProofError("recomputed root does not match the checkpoint root", { check: "inclusion.root" });
  }
  return { leafHash: leaf, index, size, root };
}
function verifyConsistency(args) {
  const { oldRoot, newRoot, proof } = args;
  checkHash(oldRoot, "old root");
  checkHash(newRoot, "new root");
  checkProofList(proof, "consistency");
  const oldSize = asInteger(args.oldSize);
  const newSize = asInteger(args.newSize);
  if (oldSize === null || newSize === null || !(0n <= oldSize && oldSize <= newSize && newSize <= MAX_TREE_SIZE)) {
    throw new ProofError(
      `old size ${String(args.oldSize)} is not within [0, new size ${String(args.newSize)}]`,
      { check: "consistency.range" }
    );
  }
  const verified = { oldSize, oldRoot, newSize, newRoot };
  if (newSize === 0n && !constantTimeEqual(newRoot, EMPTY_ROOT)) {
    throw new ProofError(`the empty tree's root must be SHA-256("")`, { check: "consistency.new_root" });
  }
  if (oldSize === 0n) {
    if (proof.length) {
      throw new ProofError("a proof from the empty tree must be empty", { check: "consistency.empty" });
    }
    if (!constantTimeEqual(oldRoot, EMPTY_ROOT)) {
      throw new ProofError(`the empty tree's root must be SHA-256("")`, { check: "consistency.old_root" });
    }
    return verified;
  }
  if (oldSize === newSize) {
    if (proof.length) {
      throw new ProofError("a proof between equal sizes must be empty", { check: "consistency.empty" });
    }
    if (!constantTimeEqual(oldRoot, newRoot)) {
      throw new ProofError("equal sizes with different roots", { check: "consistency.new_root" });
    }
    return verified;
  }
  const expected = consistencyProofLength(oldSize, newSize);
  if (proof.length !== expected) {
    throw new ProofError(`proof has ${proof.length} hashes; sizes ${oldSize}->${newSize} need ${expected}`, {
      check: "consistency.length"
    });
  }
  const path = [...proof];
  if ((oldSize & oldSize - 1n) === 0n) {
    path.unshift(oldRoot);
  }
  let fn = oldSize - 1n;
  let sn = newSize - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0];
  let sr = fr;
  for (const c of path.slice(1)) {
    if (sn === 0n) {
      throw new ProofError("proof is longer than the tree allows", { check: "consistency.length" });
    }
    if ((fn & 1n) === 1n || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) {
    throw new ProofError("proof is shorter than the tree requires", { check: "consistency.length" });
  }
  if (!constantTimeEqual(fr, oldRoot)) {
    throw new ProofError("recomputed old root does not match", { check: "consistency.old_root" });
  }
  if (!constantTimeEqual(sr, newRoot)) {
    throw new ProofError("recomputed new root does not match", { check: "consistency.new_root" });
  }
  return verified;
}

// node_modules/@noble/ed25519/index.js
var freeze = Object.freeze;
var P = 0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffedn;
var N = 0x1000000000000000000000000000000014def9dea2f79cd65812631a5cf5d3edn;
var _d = 0x52036cee2b6ffe738cc740797779e89800700a4d4141d8ab75eb4dca135978a3n;
var Gx = 0x216936d3cd6e53fec0a4e231fdd6dc5c692cc7609525a7b2c9562d608f25d51an;
var Gy = 0x6666666666666666666666666666666666666666666666666666666666666658n;
var _a = P - 1n;
var ed25519_CURVE = freeze({
  p: P,
  n: N,
  h: 8n,
  a: _a,
  d: _d,
  Gx,
  Gy
});
var LEN = 32;
var isBytes2 = (a) => {
  return a instanceof Uint8Array || ArrayBuffer.isView(a) && a.constructor.name === "Uint8Array" && a.BYTES_PER_ELEMENT === 1;
};
var abytes2 = (value, length, title = "") => {
  if (isBytes2(value) && (length === void 0 || value.length === length))
    return value;
  const bytes = isBytes2(value);
  const ofLen = length !== void 0 ? ` of length ${length}` : "";
  const got = bytes ? `length=${value.length}` : `type=${typeof value}`;
  const message = (title ? `"${title}" ` : "") + "expected Uint8Array" + ofLen + ", got " + got;
  if (!bytes)
    throw new TypeError(message);
  throw new RangeError(message);
};
var snapshotBytes = (value, title = "", length) => Uint8Array.from(abytes2(value, length, title));
var padh = (n, pad) => n.toString(16).padStart(pad, "0");
var bytesToHex = (bytes) => {
  let hex = "";
  for (const byte of abytes2(bytes))
    hex += padh(byte, 2);
  return hex;
};
var hexToBytes = (hex) => {
  const e = "hex invalid";
  if (typeof hex !== "string")
    throw new TypeError(e);
  if (hex.length % 2 || !/^[\da-f]*$/i.test(hex))
    throw new RangeError(e);
  const array = new Uint8Array(hex.length / 2);
  for (let ai = 0, hi = 0; ai < array.length; ai++, hi += 2) {
    const n1 = hex.charCodeAt(hi);
    const n2 = hex.charCodeAt(hi + 1);
    array[ai] = ((n1 & 15) + (n1 >> 6) * 9) * 16 + (n2 & 15) + (n2 >> 6) * 9;
  }
  return array;
};
var concatBytes2 = (...arrays) => {
  let sum = 0;
  for (const a of arrays)
    sum += abytes2(a).length;
  const res = new Uint8Array(sum);
  let pad = 0;
  for (const a of arrays) {
    res.set(a, pad);
    pad += a.length;
  }
  return res;
};
var arange = (n, min, max, msg = "bad number: out of range") => {
  if (typeof n !== "bigint")
    throw new TypeError(msg);
  if (min <= n && n < max)
    return n;
  throw new RangeError(msg);
};
var mod = (a, b = P) => (a %= b) >= 0n ? a : b + a;
var P_MASK = (1n << 255n) - 1n;
var modP = (num) => {
  if (num < 0n)
    throw new RangeError("negative coordinate");
  let r = (num >> 255n) * 19n + (num & P_MASK);
  r = (r >> 255n) * 19n + (r & P_MASK);
  return r % P;
};
var modN = (a) => mod(a, N);
var invert = (number, modulo) => {
  if (number === 0n)
    throw new Error("invert: expected non-zero number");
  if (modulo <= 1n)
    throw new Error("invert: expected modulus > 1, got " + modulo);
  let a = mod(number, modulo);
  let b = modulo;
  let x = 0n, u = 1n;
  while (a !== 0n) {
    const q = b / a;
    const r = b - a * q;
    const m = x - u * q;
    b = a, a = r, x = u, u = m;
  }
  const gcd = b;
  if (gcd !== 1n)
    throw new Error("invert: does not exist");
  return mod(x, modulo);
};
var _hash = (name) => {
  const fn = hashes[name];
  if (typeof fn !== "function")
    throw new Error("hashes." + name + " not set");
  return fn;
};
var callHash = (name, ...m) => abytes2(_hash(name)(concatBytes2(...m)), 64, "digest");
var apoint = (p) => {
  if (p instanceof Point)
    return p;
  throw new TypeError("Point expected");
};
var B256 = 2n ** 256n;
var Point = class _Point {
  static BASE;
  static ZERO;
  X;
  Y;
  Z;
  T;
  // Constructor only bounds-checks and freezes XYZT coordinates; it does not prove the point is
  // on-curve or that T matches X*Y/Z.
  constructor(X, Y, Z, T) {
    const max = B256;
    this.X = arange(X, 0n, max);
    this.Y = arange(Y, 0n, max);
    this.Z = arange(Z, 1n, max);
    this.T = arange(T, 0n, max);
    freeze(this);
  }
  static CURVE() {
    return ed25519_CURVE;
  }
  static fromAffine(p) {
    return new _Point(p.x, p.y, 1n, modP(p.x * p.y));
  }
  /** RFC8032 5.1.3: Uint8Array to Point. */
  static fromBytes(bytes, zip215 = false) {
    const normed = snapshotBytes(bytes, "point", LEN);
    const lastByte = normed[31];
    normed[31] = lastByte & ~128;
    const y = bytesToNumberLE(normed);
    if (!zip215)
      arange(y, 0n, P);
    const y2 = modP(y * y);
    const u = mod(y2 - 1n);
    const v = modP(_d * y2 + 1n);
    let { isValid, value: x } = uvRatio(u, v);
    if (!isValid)
      throw new Error("bad point: y not sqrt");
    const isLastByteOdd = !!(lastByte & 128);
    if (!zip215 && x === 0n && isLastByteOdd)
      throw new Error("bad point: x==0, isLastByteOdd");
    if (isLastByteOdd !== !!(x & 1n))
      x = mod(-x);
    return new _Point(x, y, 1n, modP(x * y));
  }
  static fromHex(hex, zip215) {
    return _Point.fromBytes(hexToBytes(hex), zip215);
  }
  get x() {
    return this.toAffine().x;
  }
  get y() {
    return this.toAffine().y;
  }
  /** Checks if the point is valid and on-curve. */
  assertValidity() {
    const a = _a;
    const d = _d;
    const p = this;
    if (p.is0())
      throw new Error("bad point: ZERO");
    const { X, Y, Z, T } = p;
    const X2 = modP(X * X);
    const Y2 = modP(Y * Y);
    const Z2 = modP(Z * Z);
    const Z4 = modP(Z2 * Z2);
    const aX2 = modP(X2 * a);
    const left = modP(Z2 * (aX2 + Y2));
    const right = mod(Z4 + modP(d * modP(X2 * Y2)));
    if (left !== right)
      throw new Error("bad point: equation left != right (1)");
    const XY = modP(X * Y);
    const ZT = modP(Z * T);
    if (XY !== ZT)
      throw new Error("bad point: equation left != right (2)");
    return this;
  }
  /** Equality check: compare points P&Q. */
  equals(other) {
    const { X: X1, Y: Y1, Z: Z1 } = this;
    const { X: X2, Y: Y2, Z: Z2 } = apoint(other);
    return modP(X1 * Z2) === modP(X2 * Z1) && modP(Y1 * Z2) === modP(Y2 * Z1);
  }
  is0() {
    return this.equals(I);
  }
  /** Flip point over y coordinate. */
  negate() {
    return new _Point(mod(-this.X), this.Y, this.Z, mod(-this.T));
  }
  /** Point doubling. Complete formula. Cost: `4M + 4S + 1*a + 6add + 1*2`. */
  double() {
    const { X: X1, Y: Y1, Z: Z1 } = this;
    const a = _a;
    const A = modP(X1 * X1);
    const B2 = modP(Y1 * Y1);
    const C = modP(2n * Z1 * Z1);
    const D = modP(a * A);
    const x1y1 = mod(X1 + Y1);
    const E = mod(modP(x1y1 * x1y1) - A - B2);
    const G3 = mod(D + B2);
    const F = mod(G3 - C);
    const H = mod(D - B2);
    const X3 = modP(E * F);
    const Y3 = modP(G3 * H);
    const T3 = modP(E * H);
    const Z3 = modP(F * G3);
    return new _Point(X3, Y3, Z3, T3);
  }
  /** Point addition. Complete formula. Cost: `9M + 1*a + 1*d + 7add`. */
  add(other) {
    const { X: X1, Y: Y1, Z: Z1, T: T1 } = this;
    const { X: X2, Y: Y2, Z: Z2, T: T2 } = apoint(other);
    const a = _a;
    const d = _d;
    const A = modP(X1 * X2);
    const B2 = modP(Y1 * Y2);
    const C = modP(modP(T1 * d) * T2);
    const D = modP(Z1 * Z2);
    const E = mod(modP(mod(X1 + Y1) * mod(X2 + Y2)) - A - B2);
    const F = mod(D - C);
    const G3 = mod(D + C);
    const H = mod(B2 - modP(a * A));
    const X3 = modP(E * F);
    const Y3 = modP(G3 * H);
    const T3 = modP(E * H);
    const Z3 = modP(F * G3);
    return new _Point(X3, Y3, Z3, T3);
  }
  subtract(other) {
    return this.add(apoint(other).negate());
  }
  /**
   * Point-by-scalar multiplication. Safe mode requires `1 <= n < CURVE.n`.
   * Unsafe mode additionally permits `n = 0` and returns the identity point for that case.
   * Uses {@link wNAF} for base point.
   * Uses fake point to mitigate side-channel leakage.
   * @param n - scalar by which point is multiplied
   * @param safe - safe mode guards against timing attacks; unsafe mode is faster
   */
  multiply(n, safe = true) {
    if (!safe && n === 0n)
      return I;
    arange(n, 1n, N);
    if (!safe && this.is0())
      return I;
    if (n === 1n)
      return this;
    if (this.equals(G))
      return wNAF(n).p;
    let p = I;
    let f2 = G;
    let d = this;
    for (let i = 0; safe ? i < 256 : n > 0n; i++) {
      if (n & 1n)
        p = p.add(d);
      else if (safe)
        f2 = f2.add(d);
      d = d.double();
      n >>= 1n;
    }
    return p;
  }
  multiplyUnsafe(scalar) {
    return this.multiply(scalar, false);
  }
  /** Convert point to 2d xy affine point. (X, Y, Z) ∋ (x=X/Z, y=Y/Z) */
  toAffine() {
    const { X, Y, Z } = this;
    if (this.equals(I))
      return { x: 0n, y: 1n };
    const iz = invert(Z, P);
    if (modP(Z * iz) !== 1n)
      throw new Error("invalid inverse");
    return { x: modP(X * iz), y: modP(Y * iz) };
  }
  toBytes() {
    const { x, y } = this.toAffine();
    const b = numTo32bLE(y);
    b[31] |= x & 1n ? 128 : 0;
    return b;
  }
  toHex() {
    return bytesToHex(this.toBytes());
  }
  clearCofactor() {
    return this.multiply(8n, false);
  }
  isSmallOrder() {
    return this.clearCofactor().is0();
  }
  isTorsionFree() {
    return this.multiply(N / 2n, false).double().add(this).is0();
  }
};
var G = new Point(Gx, Gy, 1n, mod(Gx * Gy));
var I = new Point(0n, 1n, 1n, 0n);
Point.BASE = G;
Point.ZERO = I;
var numTo32bLE = (num) => hexToBytes(padh(arange(num, 0n, B256), 64)).reverse();
var bytesToNumberLE = (b) => BigInt("0x" + bytesToHex(Uint8Array.from(abytes2(b)).reverse()));
var pow2 = (x, power) => {
  let r = x;
  while (power-- > 0) {
    r = modP(r * r);
  }
  return r;
};
var pow_2_252_3 = (x) => {
  const x2 = modP(x * x);
  const b2 = modP(x2 * x);
  const b4 = modP(pow2(b2, 2) * b2);
  const b5 = modP(pow2(b4, 1) * x);
  const b10 = modP(pow2(b5, 5) * b5);
  const b20 = modP(pow2(b10, 10) * b10);
  const b40 = modP(pow2(b20, 20) * b20);
  const b80 = modP(pow2(b40, 40) * b40);
  const b160 = modP(pow2(b80, 80) * b80);
  const b240 = modP(pow2(b160, 80) * b80);
  const b250 = modP(pow2(b240, 10) * b10);
  return modP(pow2(b250, 2) * x);
};
var RM1 = 0x2b8324804fc1df0b2b4d00993dfbd7a72f431806ad2fe478c4ee1b274a0ea0b0n;
var uvRatio = (u, v) => {
  const v3 = modP(v * modP(v * v));
  const v7 = modP(modP(v3 * v3) * v);
  const pow3 = pow_2_252_3(modP(u * v7));
  let x = modP(u * modP(v3 * pow3));
  const vx2 = modP(v * modP(x * x));
  const root1 = x;
  const root2 = modP(x * RM1);
  const useRoot1 = vx2 === u;
  const useRoot2 = vx2 === mod(-u);
  const noRoot = vx2 === mod(-u * RM1);
  if (useRoot1)
    x = root1;
  if (useRoot2 || noRoot)
    x = root2;
  if ((mod(x) & 1n) === 1n)
    x = mod(-x);
  return { isValid: useRoot1 || useRoot2, value: x };
};
var modL_LE = (hash) => modN(bytesToNumberLE(hash));
var hashedToExtK = (hashed) => {
  const copy = snapshotBytes(hashed);
  const head = copy.slice(0, 32);
  head[0] &= 248;
  head[31] &= 127;
  head[31] |= 64;
  const prefix = copy.slice(32);
  const scalar = modL_LE(head);
  const point = G.multiply(scalar);
  const pointBytes = point.toBytes();
  return { head, prefix, scalar, point, pointBytes };
};
var getExtendedPublicKey = (secretKey) => hashedToExtK(callHash("sha512", abytes2(secretKey, LEN, "secretKey")));
var getPublicKey = (secretKey) => getExtendedPublicKey(secretKey).pointBytes;
var hashFinishSync = (res) => res[1](callHash("sha512", res[0]));
var _sign = (e, rBytes, msg) => {
  const { pointBytes: A, scalar: s } = e;
  const r = modL_LE(rBytes);
  const R = G.multiply(r).toBytes();
  const hashable = concatBytes2(R, A, msg);
  const finish = (hashed) => {
    const S2 = modN(r + modL_LE(hashed) * s);
    return abytes2(concatBytes2(R, numTo32bLE(S2)), 64);
  };
  return [hashable, finish];
};
var sign = (message, secretKey) => {
  const m = snapshotBytes(message, "message");
  const e = getExtendedPublicKey(secretKey);
  return hashFinishSync(_sign(e, callHash("sha512", e.prefix, m), m));
};
var getZip215 = (options) => {
  if (options === null || typeof options !== "object")
    throw new TypeError("expected valid options object");
  return options.zip215 ?? true;
};
var _verify = (sig, msg, publicKey, options) => {
  sig = abytes2(sig, 64, "signature");
  msg = abytes2(msg, void 0, "message");
  publicKey = abytes2(publicKey, LEN, "publicKey");
  const zip215 = getZip215(options);
  const r = sig.subarray(0, LEN);
  const s = bytesToNumberLE(sig.subarray(LEN, 64));
  let A, R, SB;
  let hashable = Uint8Array.of();
  let finished = false;
  try {
    A = Point.fromBytes(publicKey, zip215);
    R = Point.fromBytes(r, zip215);
    SB = G.multiply(s, false);
    hashable = concatBytes2(r, publicKey, msg);
    finished = true;
  } catch (error) {
  }
  const finish = (hashed) => {
    if (!finished)
      return false;
    if (!zip215 && A.isSmallOrder())
      return false;
    const k = modL_LE(hashed);
    const RkA = R.add(A.multiply(k, false));
    return RkA.subtract(SB).clearCofactor().is0();
  };
  return [hashable, finish];
};
var verify = (signature, message, publicKey, opts = {}) => hashFinishSync(_verify(signature, message, publicKey, opts));
var hashes = {
  sha512Async: async (message) => {
    const s = globalThis?.crypto?.subtle;
    if (!s)
      throw new Error("crypto.subtle must be defined, consider polyfill");
    return new Uint8Array(await s.digest("SHA-512", concatBytes2(message)));
  },
  sha512: void 0
};
var precompute = () => {
  const points = [];
  let p = G;
  let b;
  for (let w = 0; w < 33; w++) {
    b = p;
    points.push(b);
    for (let i = 1; i < 128; i++) {
      b = b.add(p);
      points.push(b);
    }
    p = b.double();
  }
  return points;
};
var Gpows = void 0;
var ctneg = (cnd, p) => {
  const n = p.negate();
  return cnd ? n : p;
};
var wNAF = (n) => {
  const comp = Gpows || (Gpows = precompute());
  let p = I;
  let f2 = G;
  for (let w = 0; w < 33; w++) {
    let wbits = Number(n & 255n);
    n >>= 8n;
    if (wbits > 128) {
      wbits -= 256;
      n += 1n;
    }
    const off = w * 128;
    const offP = off + Math.abs(wbits) - 1;
    const isOddW = w % 2 !== 0;
    const isNeg = wbits < 0;
    if (wbits === 0) {
      f2 = f2.add(ctneg(isOddW, comp[off]));
    } else {
      p = p.add(ctneg(isNeg, comp[offP]));
    }
  }
  if (n !== 0n)
    throw new Error("invalid wnaf");
  return { p, f: f2 };
};

// src/ed25519.ts
hashes.sha512 = sha512;
var PUBLIC_KEY_SIZE = 32;
var SIGNATURE_SIZE = 64;
var L = 2n ** 252n + 27742317777372353535851937790883648493n;
function bytesToNumberLE2(data) {
  let n = 0n;
  for (let i = data.length - 1; i >= 0; i--) n = n << 8n | BigInt(data[i]);
  return n;
}
var CHECKED = /* @__PURE__ */ new Set();
var CHECKED_MAX = 16384;
function checkPublicKey(publicKey) {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== PUBLIC_KEY_SIZE) {
    throw new MalformedError("Ed25519 public keys are 32 bytes", { check: "key.encoding" });
  }
  const hex = toHex(publicKey);
  if (CHECKED.has(hex)) return publicKey;
  let point;
  try {
    point = Point.fromBytes(publicKey, false);
  } catch (e) {
    throw new MalformedError("Ed25519 public key is not a canonically encoded curve point", {
      check: "key.encoding",
      cause: e
    });
  }
  if (point.isSmallOrder()) {
    throw new MalformedError("Ed25519 public key has small order; signatures under it prove nothing", {
      check: "key.small_order"
    });
  }
  if (CHECKED.size >= CHECKED_MAX) CHECKED.clear();
  CHECKED.add(hex);
  return publicKey;
}
function verifySignature(signature, message, publicKey) {
  if (signature.length !== SIGNATURE_SIZE || publicKey.length !== PUBLIC_KEY_SIZE) return false;
  let libraryOk;
  try {
    libraryOk = verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
  if (!libraryOk) return false;
  const rBytes = signature.subarray(0, 32);
  const s = bytesToNumberLE2(signature.subarray(32, 64));
  if (s >= L) return false;
  const k = bytesToNumberLE2(sha512(concatBytes(rBytes, publicKey, message))) % L;
  try {
    const a = Point.fromBytes(publicKey, false);
    const sB = Point.BASE.multiply(s, false);
    const kA = a.multiply(k, false);
    return bytesEqual(sB.subtract(kA).toBytes(), rBytes);
  } catch {
    return false;
  }
}
function publicKeyFromSeed(seed) {
  return getPublicKey(seed);
}
function signWithSeed(message, seed) {
  return sign(message, seed);
}
function isDalekPoint(bytes) {
  if (bytes.length !== PUBLIC_KEY_SIZE) return false;
  try {
    Point.fromBytes(bytes, true);
    return true;
  } catch {
    return false;
  }
}
function verifyDalekStrict(signature, message, publicKey) {
  if (signature.length !== SIGNATURE_SIZE || publicKey.length !== PUBLIC_KEY_SIZE) return false;
  let a;
  let r;
  try {
    a = Point.fromBytes(publicKey, true);
    r = Point.fromBytes(signature.subarray(0, 32), true);
  } catch {
    return false;
  }
  const s = bytesToNumberLE2(signature.subarray(32, 64));
  if (s >= L) return false;
  if (r.isSmallOrder() || a.isSmallOrder()) return false;
  const rBytes = signature.subarray(0, 32);
  const k = bytesToNumberLE2(sha512(concatBytes(rBytes, publicKey, message))) % L;
  const expected = Point.BASE.multiply(s, false).subtract(a.multiply(k, false));
  return bytesEqual(expected.toBytes(), rBytes);
}

// src/note.ts
var ALG_ED25519 = 1;
var MAX_NOTE_BYTES = 64 * 1024;
var MAX_SIGNATURES = 100;
var SIG_PREFIX = "— ";
var DECIMAL = /^(?:0|[1-9][0-9]{0,18})$/;
var UNICODE_SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;
var CONTROL = /[\x00-\x09\x0b-\x1f\x7f]/;
function b64encode(data) {
  return base64Encode(data);
}
function b64decodeStrict(text, check) {
  const raw = base64DecodeLoose(text);
  if (raw === null) {
    throw new MalformedError(`invalid base64: ${JSON.stringify(text.slice(0, 40))}`, { check });
  }
  if (base64Encode(raw) !== text) {
    throw new MalformedError(`non-canonical base64: ${JSON.stringify(text.slice(0, 40))}`, { check });
  }
  return raw;
}
function parseDecimal(text, check, maximum = MAX_TREE_SIZE) {
  if (!DECIMAL.test(text)) {
    throw new MalformedError(`not a canonical decimal: ${JSON.stringify(text.slice(0, 40))}`, { check });
  }
  const value = BigInt(text);
  if (value > maximum) throw new MalformedError(`${value} exceeds ${maximum}`, { check });
  return value;
}
function encodesAsUtf8(text) {
  return !hasLoneSurrogate(text);
}
function codePointLength(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
function checkKeyName(name, check) {
  if (!name || name.includes("+") || UNICODE_SPACE.test(name) || !encodesAsUtf8(name)) {
    throw new MalformedError(
      `key name ${JSON.stringify(name.slice(0, 60))} must be non-empty UTF-8 text, without spaces or '+'`,
      { check }
    );
  }
}
function checkOrigin(origin) {
  if (typeof origin !== "string" || !(origin.length > 0 && origin.length <= 255) || !/^[\x21-\x7e]*$/.test(origin) || origin.includes("+")) {
    throw new MalformedError(
      `origin ${JSON.stringify(String(origin).slice(0, 80))} must be 1-255 printable ASCII characters without spaces or '+'`,
      { check: "origin.format" }
    );
  }
  return origin;
}
function ed25519KeyId(name, publicKey) {
  if (!encodesAsUtf8(name)) throw new TypeError("key name holds a lone surrogate");
  return sha256(concatBytes(utf8(name), Uint8Array.of(10, ALG_ED25519), publicKey)).slice(0, 4);
}
function formatVerifierKey(name, publicKey) {
  const keyId = ed25519KeyId(name, publicKey);
  return `${name}+${toHex(keyId)}+${base64Encode(concatBytes(Uint8Array.of(ALG_ED25519), publicKey))}`;
}
var VerifierKey = class _VerifierKey {
  constructor(name, keyId, publicKey) {
    this.name = name;
    this.keyId = keyId;
    this.publicKey = publicKey;
    Object.freeze(this);
  }
  name;
  keyId;
  publicKey;
  /** Parse `<name>+<hex8 key id>+<base64(0x01 || pubkey)>`; the key id must match. */
  static parse(vkey) {
    if (typeof vkey !== "string" || vkey.length > 2048 || codePointLength(vkey) > 1024) {
      throw new MalformedError("verifier key must be a short string", { check: "vkey.format" });
    }
    const first = vkey.indexOf("+");
    const second = first < 0 ? -1 : vkey.indexOf("+", first + 1);
    if (second < 0) {
      throw new MalformedError("verifier key must be name+keyid+key", { check: "vkey.format" });
    }
    const name = vkey.slice(0, first);
    const hexId = vkey.slice(first + 1, second);
    const b642 = vkey.slice(second + 1);
    checkKeyName(name, "vkey.name");
    if (!/^[0-9a-f]{8}$/.test(hexId)) {
      throw new MalformedError("key id must be 8 lowercase hex digits", { check: "vkey.key_id" });
    }
    const raw = b64decodeStrict(b642, "vkey.key");
    if (raw.length !== 33 || raw[0] !== ALG_ED25519) {
      throw new MalformedError("only Ed25519 verifier keys (type 0x01, 32 bytes) are supported", {
        check: "vkey.alg"
      });
    }
    const publicKey = checkPublicKey(raw.slice(1));
    const keyId = Uint8Array.from(hexId.match(/../g), (h) => parseInt(h, 16));
    if (!constantTimeEqual(keyId, ed25519KeyId(name, publicKey))) {
      throw new MalformedError("key id does not match name and public key", { check: "vkey.key_id" });
    }
    return new _VerifierKey(name, keyId, publicKey);
  }
  /** Build the verifier key of an Ed25519 public key under `name`. */
  static fromPublicKey(name, publicKey) {
    checkKeyName(name, "vkey.name");
    checkPublicKey(publicKey);
    const pk = publicKey.slice();
    return new _VerifierKey(name, ed25519KeyId(name, pk), pk);
  }
  toString() {
    return formatVerifierKey(this.name, this.publicKey);
  }
};
var SignedNote = class _SignedNote {
  constructor(text, signatures) {
    this.text = text;
    this.signatures = signatures;
    Object.freeze(this);
  }
  text;
  signatures;
  /** Parse note bytes strictly (see the module doc). Throws MalformedError. */
  static parse(data) {
    if (!(data instanceof Uint8Array)) {
      throw new MalformedError("note must be bytes", { check: "note.type" });
    }
    if (data.length > MAX_NOTE_BYTES) {
      throw new LimitExceededError(`note of ${data.length} bytes exceeds ${MAX_NOTE_BYTES}`, {
        check: "note.size"
      });
    }
    const msg = decodeUtf8Strict(data);
    if (msg === null) throw new MalformedError("note is not valid UTF-8", { check: "note.encoding" });
    if (CONTROL.test(msg)) throw new MalformedError("note contains control characters", { check: "note.encoding" });
    if (!msg.endsWith("\n")) {
      throw new MalformedError("note does not end with a newline", { check: "note.format" });
    }
    const split3 = msg.lastIndexOf("\n\n");
    if (split3 < 0) {
      throw new MalformedError("note has no blank line before signatures", { check: "note.format" });
    }
    const text = msg.slice(0, split3 + 1);
    const sigBlock = msg.slice(split3 + 2);
    let lines = sigBlock.split("\n");
    if (lines[lines.length - 1] !== "") {
      throw new MalformedError("signature block must end with a newline", { check: "note.format" });
    }
    lines = lines.slice(0, -1);
    if (lines.length === 0) throw new MalformedError("note has no signatures", { check: "note.signatures" });
    if (lines.length > MAX_SIGNATURES) {
      throw new LimitExceededError(`note has ${lines.length} signatures, more than ${MAX_SIGNATURES}`, {
        check: "note.signatures"
      });
    }
    const sigs = [];
    for (const line of lines) {
      if (!line.startsWith(SIG_PREFIX)) {
        throw new MalformedError("signature line must start with '— '", { check: "note.signature_line" });
      }
      const fields = line.slice(SIG_PREFIX.length).split(" ");
      if (fields.length !== 2) {
        throw new MalformedError("signature line must be '— <name> <base64>'", {
          check: "note.signature_line"
        });
      }
      const [name, b642] = fields;
      checkKeyName(name, "note.signature_line");
      const raw = b64decodeStrict(b642, "note.signature_line");
      if (raw.length < 5) {
        throw new MalformedError("signature is shorter than 5 bytes", { check: "note.signature_line" });
      }
      sigs.push(Object.freeze({ name, keyId: raw.slice(0, 4), signature: raw.slice(4) }));
    }
    return new _SignedNote(text, Object.freeze(sigs));
  }
  /**
   * Verify against trusted keys; return the keys whose signatures verified.
   *
   * Signatures whose (name, key id) pair matches no trusted key are ignored. A matching
   * signature that fails throws {@link SignatureError} `note.signature` (the note is
   * rejected whole). No verified signature at all throws {@link UnknownKeyError}
   * `note.trusted_signature`.
   */
  verify(keys) {
    const trusted = /* @__PURE__ */ new Map();
    for (const k of keys) trusted.set(`${k.name}+${toHex(k.keyId)}`, k);
    const verified = [];
    const message = utf8(this.text);
    for (const sig of this.signatures) {
      const key = trusted.get(`${sig.name}+${toHex(sig.keyId)}`);
      if (key === void 0) continue;
      if (!verifySignature(sig.signature, message, key.publicKey)) {
        throw new SignatureError(`signature by ${key.name} does not verify`, { check: "note.signature" });
      }
      if (!verified.includes(key)) verified.push(key);
    }
    if (verified.length === 0) {
      throw new UnknownKeyError("no signature by a trusted key", { check: "note.trusted_signature" });
    }
    return verified;
  }
};
function signNote(text, name, seed) {
  if (!text.endsWith("\n") || text.includes("\n\n")) {
    throw new RangeError("note text must end in one newline and hold no blank lines");
  }
  checkKeyName(name, "note.signature_line");
  const publicKey = publicKeyFromSeed(seed);
  const sig = signWithSeed(utf8(text), seed);
  const blob = base64Encode(concatBytes(ed25519KeyId(name, publicKey), sig));
  return utf8(`${text}
${SIG_PREFIX}${name} ${blob}
`);
}
var Checkpoint = class _Checkpoint {
  constructor(origin, size, root) {
    this.origin = origin;
    this.size = size;
    this.root = root;
    Object.freeze(this);
  }
  origin;
  size;
  root;
  /** Parse checkpoint note text (no extension lines allowed). */
  static parseText(text) {
    const lines = text.split("\n");
    if (lines[lines.length - 1] !== "" || lines.length < 4) {
      throw new MalformedError("checkpoint needs origin, size and root lines", { check: "checkpoint.format" });
    }
    const body = lines.slice(0, -1);
    if (body.length !== 3) {
      throw new MalformedError("checkpoint has extension lines; Engram checkpoints carry none", {
        check: "checkpoint.extensions"
      });
    }
    const [origin, sizeText, rootText] = body;
    if (!origin) throw new MalformedError("checkpoint origin is empty", { check: "checkpoint.origin" });
    const size = parseDecimal(sizeText, "checkpoint.size");
    const root = b64decodeStrict(rootText, "checkpoint.root");
    if (root.length !== HASH_SIZE) {
      throw new MalformedError("checkpoint root is not 32 bytes", { check: "checkpoint.root" });
    }
    return new _Checkpoint(origin, size, root);
  }
  text() {
    return checkpointText(this.origin, this.size, this.root);
  }
};
function checkpointText(origin, size, root) {
  return `${origin}
${BigInt(size)}
${base64Encode(root)}
`;
}
function verifyCheckpoint(data, logKey, origin) {
  const note = SignedNote.parse(data);
  const cp = Checkpoint.parseText(note.text);
  if (cp.origin !== logKey.name) {
    throw new OriginMismatchError(
      `checkpoint origin ${JSON.stringify(cp.origin)} is not the log key's name ${JSON.stringify(logKey.name)}`,
      { check: "checkpoint.origin" }
    );
  }
  if (origin !== void 0 && cp.origin !== origin) {
    throw new OriginMismatchError(
      `checkpoint origin ${JSON.stringify(cp.origin)} is not the expected ${JSON.stringify(origin)}`,
      { check: "checkpoint.origin" }
    );
  }
  const signedBy = note.verify([logKey]);
  return Object.freeze({ origin: cp.origin, size: cp.size, root: cp.root, note: data.slice(), signedBy });
}

// src/jcs.ts
var MAX_SAFE_INTEGER = 2 ** 53 - 1;
var MAX_DEPTH = 32;
var ESCAPES = {
  '"': '\\"',
  "\\": "\\\\",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "	": "\\t"
};
function encodeString(s, out) {
  if (hasLoneSurrogate(s)) {
    throw new CanonicalFormError("string holds a lone surrogate", { check: "canonical.string" });
  }
  out.push(
    '"' + s.replace(/[\x00-\x1f"\\]/g, (c) => ESCAPES[c] ?? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")) + '"'
  );
}
function isPlainObject(value) {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
function encode(value, out, depth) {
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
    if (!Number.isInteger(value)) {
      throw new CanonicalFormError("floats are not allowed in signed data; use integers or decimal strings", {
        check: "canonical.float"
      });
    }
    if (Math.abs(value) > MAX_SAFE_INTEGER) {
      throw new CanonicalFormError(`integer ${value} is outside the safe range +-(2^53-1)`, {
        check: "canonical.integer"
      });
    }
    out.push(String(value === 0 ? 0 : value));
  } else if (typeof value === "bigint") {
    if (value > BigInt(MAX_SAFE_INTEGER) || value < -BigInt(MAX_SAFE_INTEGER)) {
      throw new CanonicalFormError(`integer ${value} is outside the safe range +-(2^53-1)`, {
        check: "canonical.integer"
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
    const record2 = value;
    const keys = Object.keys(record2);
    for (const k of keys) {
      if (hasLoneSurrogate(k)) {
        throw new CanonicalFormError("key holds a lone surrogate", { check: "canonical.string" });
      }
    }
    keys.sort();
    out.push("{");
    keys.forEach((k, i) => {
      if (i) out.push(",");
      encodeString(k, out);
      out.push(":");
      encode(record2[k], out, depth + 1);
    });
    out.push("}");
  } else {
    const what = value === void 0 ? "undefined" : typeof value === "object" ? value.constructor?.name : typeof value;
    throw new CanonicalFormError(`type ${String(what)} has no JSON form`, { check: "canonical.type" });
  }
}
function canonicalBytes(value) {
  const out = [];
  encode(value, out, 0);
  return utf8(out.join(""));
}
var QUOTE = 34;
var BACKSLASH = 92;
function checkShape(text, limits = {}) {
  const maxDepth = limits.maxDepth ?? MAX_DEPTH;
  let containers = 0;
  let commas = 0;
  let depth = 0;
  let deepest = 0;
  let stringsEnded = false;
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
    } else if (c === 123 || c === 91) {
      containers++;
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 125 || c === 93) {
      depth--;
    } else if (c === 44) {
      commas++;
    }
    i++;
  }
  if (limits.maxContainers !== void 0 && containers > limits.maxContainers) {
    throw new LimitExceededError(`${containers} objects and arrays exceed the limit of ${limits.maxContainers}`, {
      check: "json.containers"
    });
  }
  if (limits.maxValues !== void 0) {
    const values = commas + containers + 1;
    if (values > limits.maxValues) {
      throw new LimitExceededError(`about ${values} values exceed the limit of ${limits.maxValues}`, {
        check: "json.values"
      });
    }
  }
  if (!containers) return 0;
  if (deepest > maxDepth + 1) {
    throw new LimitExceededError(`nesting deeper than ${maxDepth}`, { check: "canonical.depth" });
  }
  return deepest;
}
function syntax(message, at) {
  return new MalformedError(`not JSON: ${message} at ${at}`, { check: "json.syntax" });
}
function isDigit(c) {
  return c >= 48 && c <= 57;
}
function isWhitespace(c) {
  return c === 32 || c === 9 || c === 10 || c === 13;
}
function hexValue(c) {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 97 + 10;
  if (c >= 65 && c <= 70) return c - 65 + 10;
  return -1;
}
var Parser = class {
  constructor(text) {
    this.text = text;
  }
  text;
  pos = 0;
  deferred = null;
  parseDocument() {
    this.skipWhitespace();
    const value = this.parseValue(0);
    this.skipWhitespace();
    if (this.pos !== this.text.length) throw syntax("extra data", this.pos);
    if (this.deferred !== null) throw this.deferred;
    return value;
  }
  defer(error) {
    if (this.deferred === null) this.deferred = error;
  }
  /** The post-parse walk's checks of one value (or key) at `depth`. */
  noteDepth(depth) {
    if (depth > MAX_DEPTH) {
      this.defer(new LimitExceededError(`nesting deeper than ${MAX_DEPTH}`, { check: "canonical.depth" }));
    }
  }
  noteString(s) {
    if (hasLoneSurrogate(s)) {
      this.defer(new CanonicalFormError("string holds a lone surrogate", { check: "canonical.string" }));
    }
  }
  skipWhitespace() {
    while (this.pos < this.text.length && isWhitespace(this.text.charCodeAt(this.pos))) this.pos++;
  }
  parseValue(depth) {
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
  parseNumber() {
    const t = this.text;
    const n = t.length;
    const start = this.pos;
    let i = start;
    if (t.charCodeAt(i) === 45) {
      i++;
      if (i >= n) throw syntax("expecting value", start);
    }
    const first = t.charCodeAt(i);
    if (first >= 49 && first <= 57) {
      i++;
      while (i < n && isDigit(t.charCodeAt(i))) i++;
    } else if (first === 48) {
      i++;
    } else {
      throw syntax("expecting value", start);
    }
    let isFloat = false;
    if (i < n - 1 && t.charCodeAt(i) === 46 && isDigit(t.charCodeAt(i + 1))) {
      isFloat = true;
      i += 2;
      while (i < n && isDigit(t.charCodeAt(i))) i++;
    }
    if (i < n - 1 && (t.charCodeAt(i) === 101 || t.charCodeAt(i) === 69)) {
      const eStart = i;
      i++;
      if (i < n - 1 && (t.charCodeAt(i) === 45 || t.charCodeAt(i) === 43)) i++;
      while (i < n && isDigit(t.charCodeAt(i))) i++;
      if (isDigit(t.charCodeAt(i - 1))) isFloat = true;
      else i = eStart;
    }
    const literal = t.slice(start, i);
    this.pos = i;
    if (isFloat) {
      throw new CanonicalFormError(`number ${JSON.stringify(literal)} is not an integer`, {
        check: "canonical.float"
      });
    }
    if (literal.length > 17) {
      throw new CanonicalFormError(`integer literal of ${literal.length} digits is outside the safe range`, {
        check: "canonical.integer"
      });
    }
    const value = BigInt(literal);
    if (value > BigInt(MAX_SAFE_INTEGER) || value < -BigInt(MAX_SAFE_INTEGER)) {
      throw new CanonicalFormError(`integer ${value} is outside the safe range +-(2^53-1)`, {
        check: "canonical.integer"
      });
    }
    return Number(value);
  }
  /** A string starting at the opening quote at `pos`. Escapes: \" \\ \/ \b \f \n \r \t and
   * \uXXXX (either case); each \u escape is one UTF-16 code unit, so an escaped surrogate
   * pair joins as in Python and an unpaired one stays a lone surrogate (deferred check). */
  parseString() {
    const t = this.text;
    const n = t.length;
    const begin = this.pos;
    let i = begin + 1;
    let out = "";
    let chunk = i;
    for (; ; ) {
      if (i >= n) throw syntax("unterminated string", begin);
      const c = t.charCodeAt(i);
      if (c === QUOTE) {
        out += t.slice(chunk, i);
        this.pos = i + 1;
        return out;
      }
      if (c <= 31) throw syntax("invalid control character in string", i);
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
          out += "	";
          i += 2;
          break;
        case "u": {
          let unit = 0;
          for (let k = 0; k < 4; k++) {
            const h = i + 2 + k < n ? hexValue(t.charCodeAt(i + 2 + k)) : -1;
            if (h < 0) throw syntax("invalid \\uXXXX escape", i);
            unit = unit << 4 | h;
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
  parseObject(depth) {
    const t = this.text;
    const obj = {};
    const seen = /* @__PURE__ */ new Set();
    let duplicate = null;
    this.pos++;
    this.skipWhitespace();
    if (t[this.pos] !== "}") {
      for (; ; ) {
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
          Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
        }
        this.skipWhitespace();
        if (t[this.pos] === "}") break;
        if (t[this.pos] !== ",") throw syntax("expecting ',' delimiter", this.pos);
        this.pos++;
        this.skipWhitespace();
      }
    }
    this.pos++;
    if (duplicate !== null) {
      throw new MalformedError(`duplicate object key ${JSON.stringify(duplicate)}`, {
        check: "json.duplicate_key"
      });
    }
    return obj;
  }
  parseArray(depth) {
    const t = this.text;
    const arr = [];
    this.pos++;
    this.skipWhitespace();
    if (t[this.pos] !== "]") {
      for (; ; ) {
        arr.push(this.parseValue(depth + 1));
        this.skipWhitespace();
        if (t[this.pos] === "]") break;
        if (t[this.pos] !== ",") throw syntax("expecting ',' delimiter", this.pos);
        this.pos++;
        this.skipWhitespace();
      }
    }
    this.pos++;
    return arr;
  }
};
function parseStrict(data, limits) {
  if (!(data instanceof Uint8Array)) throw new MalformedError("input must be bytes", { check: "json.type" });
  if (data.length > limits.maxBytes) {
    throw new LimitExceededError(`${data.length} bytes exceeds the limit of ${limits.maxBytes}`, {
      check: "json.size"
    });
  }
  if (data.length >= 3 && data[0] === 239 && data[1] === 187 && data[2] === 191) {
    throw new MalformedError("byte order mark is not allowed", { check: "json.encoding" });
  }
  const text = decodeUtf8Strict(data);
  if (text === null) throw new MalformedError("not valid UTF-8", { check: "json.encoding" });
  const shape = { maxDepth: MAX_DEPTH };
  if (limits.maxContainers !== void 0) shape.maxContainers = limits.maxContainers;
  if (limits.maxValues !== void 0) shape.maxValues = limits.maxValues;
  checkShape(text, shape);
  return new Parser(text).parseDocument();
}
function parseCanonical(data, limits) {
  const value = parseStrict(data, { maxBytes: limits.maxBytes });
  const canonical = canonicalBytes(value);
  let same2 = canonical.length === data.length;
  for (let i = 0; same2 && i < data.length; i++) same2 = canonical[i] === data[i];
  if (!same2) {
    throw new CanonicalFormError("JSON is not in RFC 8785 canonical form (key order, whitespace or escapes)", {
      check: "canonical.form"
    });
  }
  return value;
}

// src/event.ts
var ENVELOPE_VERSION = 1;
var LEAF_FORMAT = "engram.leaf/v1";
var EVENT_DOMAIN = utf8("engram/event/v1\0");
var POP_DOMAIN = utf8("engram/key-pop/v1\0");
var BODY_DOMAIN = utf8("engram/body/v1\0");
var DIGEST_BODY_DOMAIN = utf8("engram/body-digest/v1\0");
var DISTILLED_ENTRY_DOMAIN = utf8("engram/distilled-entry/v1\0");
var DISCLOSURE_MEMBER = "disclosure";
var PER_ENTRY = "per-entry/v1";
var KEY_ID_DOMAIN = utf8("engram/agent-key/v1\0");
var SALT_SIZE = 16;
var DEFAULT_MAX_LEAF_BYTES = 65535;
var DEFAULT_MAX_BODY_BYTES = 64 * 1024;
var MAX_ENVELOPE_BYTES = 8 * 1024;
var POLICY_AGENT = "engram.policy";
function frozenSet(items) {
  const set = new Set(items);
  const refuse2 = () => {
    throw new TypeError("this set is frozen");
  };
  Object.defineProperties(set, { add: { value: refuse2 }, delete: { value: refuse2 }, clear: { value: refuse2 } });
  return Object.freeze(set);
}
var KEY_KINDS = frozenSet(["key.registered", "key.rotated", "key.revoked"]);
var POLICY_KINDS = frozenSet([
  "memory.distilled",
  "memory.tier_changed",
  "memory.archived",
  "memory.replaced",
  "memory.accessed"
]);
var AGENT_OR_POLICY_KINDS = frozenSet(["memory.decay_exempted"]);
var AGENT_ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;
var KIND = /^[a-z][a-z0-9_]{0,31}(?:\.[a-z][a-z0-9_]{0,31}){0,3}$/;
var KEY_ID = /^[0-9a-f]{32}$/;
var HEX_HASH = /^[0-9a-f]{64}$/;
function preview(value) {
  let text;
  try {
    text = typeof value === "string" ? value : String(value);
  } catch {
    text = typeof value;
  }
  return JSON.stringify(text.slice(0, 80));
}
function codePointLength2(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
function stringsEqualCT(a, b) {
  return constantTimeEqual(utf8(a), utf8(b));
}
function isPlainObject2(value) {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
function member(obj, name) {
  return Object.hasOwn(obj, name) ? obj[name] : void 0;
}
function checkAgentId(agent) {
  if (typeof agent !== "string" || !AGENT_ID.test(agent)) {
    throw new MalformedError(`agent id ${preview(agent)} must match [a-z0-9][a-z0-9._-]{0,63}`, {
      check: "envelope.agent"
    });
  }
  return agent;
}
function checkKind(kind) {
  if (typeof kind !== "string" || !KIND.test(kind)) {
    throw new MalformedError(`kind ${preview(kind)} is not a valid kind name`, { check: "envelope.kind" });
  }
  return kind;
}
function agentKeyId(publicKey) {
  if (publicKey.length !== 32) {
    throw new MalformedError("Ed25519 public keys are 32 bytes", { check: "key.public_key" });
  }
  return toHex(sha256(concatBytes(KEY_ID_DOMAIN, publicKey)).subarray(0, 16));
}
function bodyCommitment(salt, bodyJcs) {
  if (salt.length !== SALT_SIZE) {
    throw new MalformedError(`salt must be ${SALT_SIZE} bytes`, { check: "body.salt" });
  }
  return toHex(sha256(concatBytes(BODY_DOMAIN, salt, bodyJcs)));
}
var NONCE = /^[0-9a-f]{32}$/;
var HEX64 = /^[0-9a-f]{64}$/;
function formError(why) {
  return new MalformedError(`a per-entry memory.distilled body ${why}`, { check: "body.form" });
}
function entryDigest(entry) {
  if (!isPlainObject2(entry)) throw formError("has an entry without a 16-byte hex nonce");
  const nonce = Object.hasOwn(entry, "nonce") ? entry["nonce"] : void 0;
  if (typeof nonce !== "string" || !NONCE.test(nonce)) throw formError("has an entry without a 16-byte hex nonce");
  return toHex(sha256(concatBytes(DISTILLED_ENTRY_DOMAIN, canonicalBytes(entry))));
}
function perEntry(kind, body) {
  if (kind !== "memory.distilled" || !isPlainObject2(body) || !Object.hasOwn(body, DISCLOSURE_MEMBER)) return false;
  const form = body[DISCLOSURE_MEMBER];
  if (form !== PER_ENTRY) {
    throw formError(`names disclosure ${JSON.stringify(String(form).slice(0, 40))}, not "${PER_ENTRY}"`);
  }
  return true;
}
function digestForm(body) {
  const entries = Object.hasOwn(body, "entries") ? body["entries"] : void 0;
  if (!Array.isArray(entries)) throw formError("has no list of entries");
  const out = entries.map((e) => {
    if (typeof e === "string") {
      if (!HEX64.test(e)) throw formError("gives an undisclosed entry that is not a hex SHA-256");
      return e;
    }
    return entryDigest(e);
  });
  return { ...body, entries: out };
}
function commitmentOf(kind, salt, bodyJcs, parsed) {
  if (kind !== "memory.distilled") return bodyCommitment(salt, bodyJcs);
  const value = parsed === void 0 ? parseCanonical(bodyJcs, { maxBytes: Math.max(bodyJcs.length, 1) }) : parsed;
  if (!perEntry(kind, value)) return bodyCommitment(salt, bodyJcs);
  if (salt.length !== SALT_SIZE) {
    throw new MalformedError(`salt must be ${SALT_SIZE} bytes`, { check: "body.salt" });
  }
  return toHex(sha256(concatBytes(DIGEST_BODY_DOMAIN, salt, canonicalBytes(digestForm(value)))));
}
function intField(obj, name, minimum = 0) {
  const value = member(obj, name);
  if (typeof value !== "number" || !Number.isInteger(value) || !(minimum <= value && value <= MAX_SAFE_INTEGER)) {
    throw new MalformedError(`${name} must be an integer >= ${minimum}`, { check: `envelope.${name}` });
  }
  return value === 0 ? 0 : value;
}
function strField(obj, name, pattern, check) {
  const value = member(obj, name);
  if (typeof value !== "string" || !pattern.test(value)) {
    throw new MalformedError(`${name} is malformed`, { check });
  }
  return value;
}
function exactFields(obj, required, optional, check) {
  if (!isPlainObject2(obj)) throw new MalformedError("expected a JSON object", { check });
  const keys = Object.keys(obj);
  const missing = required.filter((k) => !Object.hasOwn(obj, k)).sort();
  const extra = keys.filter((k) => !required.includes(k) && !optional.includes(k)).sort();
  if (missing.length) throw new MalformedError(`missing fields ${JSON.stringify(missing)}`, { check });
  if (extra.length) throw new MalformedError(`unknown fields ${JSON.stringify(extra)}`, { check });
  return obj;
}
var NewKey = class _NewKey {
  keyId;
  publicKey;
  pop;
  constructor(fields) {
    this.keyId = fields.keyId;
    this.publicKey = fields.publicKey.slice();
    this.pop = fields.pop.slice();
    Object.freeze(this);
  }
  /**
   * Validate a parsed `new_key` object: exactly alg / key_id / public_key / pop, alg
   * `ed25519`, canonical base64 of 32 and 64 bytes, a valid public key of large order, and
   * the key id of that key.
   *
   * @throws MalformedError `envelope.new_key`; `key.encoding` / `key.small_order` (the key).
   */
  static fromObj(obj) {
    const o = exactFields(obj, ["alg", "key_id", "public_key", "pop"], [], "envelope.new_key");
    if (o["alg"] !== "ed25519") {
      throw new MalformedError("only ed25519 agent keys are supported", { check: "envelope.new_key" });
    }
    const publicKeyText = o["public_key"];
    const popText = o["pop"];
    if (typeof publicKeyText !== "string" || typeof popText !== "string") {
      throw new MalformedError("public_key and pop are base64 strings", { check: "envelope.new_key" });
    }
    const publicKey = b64decodeStrict(publicKeyText, "envelope.new_key");
    const pop = b64decodeStrict(popText, "envelope.new_key");
    const keyId = strField(o, "key_id", KEY_ID, "envelope.new_key");
    if (publicKey.length !== 32 || pop.length !== 64) {
      throw new MalformedError("bad public key or pop length", { check: "envelope.new_key" });
    }
    checkPublicKey(publicKey);
    if (!stringsEqualCT(keyId, agentKeyId(publicKey))) {
      throw new MalformedError("new key id does not match its public key", { check: "envelope.new_key" });
    }
    return new _NewKey({ keyId, publicKey, pop });
  }
  toObj() {
    return {
      alg: "ed25519",
      key_id: this.keyId,
      public_key: base64Encode(this.publicKey),
      pop: base64Encode(this.pop)
    };
  }
};
var Envelope = class _Envelope {
  origin;
  agent;
  keyId;
  kind;
  version;
  prev;
  clientTimeUs;
  bodyCommitment;
  newKey;
  constructor(fields) {
    this.origin = fields.origin;
    this.agent = fields.agent;
    this.keyId = fields.keyId;
    this.kind = fields.kind;
    this.version = fields.version;
    this.prev = fields.prev;
    this.clientTimeUs = fields.clientTimeUs;
    this.bodyCommitment = fields.bodyCommitment;
    this.newKey = fields.newKey ?? null;
    Object.freeze(this);
  }
  get stream() {
    return [this.agent, this.kind];
  }
  /** The envelope as the JSON object that is signed (`prev` and `new_key` only when set). */
  toObj() {
    const obj = {
      v: ENVELOPE_VERSION,
      origin: this.origin,
      agent: this.agent,
      key_id: this.keyId,
      kind: this.kind,
      version: this.version,
      client_time_us: this.clientTimeUs,
      body_commitment: this.bodyCommitment
    };
    if (this.prev !== null) obj["prev"] = this.prev;
    if (this.newKey !== null) obj["new_key"] = this.newKey.toObj();
    return obj;
  }
  /** JCS(envelope): the bytes an agent signs (after {@link EVENT_DOMAIN}). */
  canonical() {
    return canonicalBytes(this.toObj());
  }
  /**
   * Validate a parsed envelope object (exact field set, types, ranges, prev rule).
   *
   * Checks, in this order: `envelope.fields`, `envelope.v`, `envelope.origin`,
   * `envelope.version`, `envelope.prev`, `envelope.kind`, the new key (`envelope.new_key`,
   * `key.encoding`, `key.small_order`), `envelope.new_key` (present exactly for
   * key.registered / key.rotated), `envelope.agent`, `envelope.key_id`,
   * `envelope.client_time_us`, `envelope.body_commitment`.
   *
   * @throws MalformedError with one of those checks.
   */
  static fromObj(obj) {
    const o = exactFields(
      obj,
      ["v", "origin", "agent", "key_id", "kind", "version", "client_time_us", "body_commitment"],
      ["prev", "new_key"],
      "envelope.fields"
    );
    if (o["v"] !== ENVELOPE_VERSION) {
      throw new MalformedError(`unsupported envelope version ${preview(o["v"])}`, { check: "envelope.v" });
    }
    const origin = o["origin"];
    if (typeof origin !== "string" || !(origin.length > 0 && codePointLength2(origin) <= 255)) {
      throw new MalformedError("origin must be a non-empty string", { check: "envelope.origin" });
    }
    const version = intField(o, "version");
    const prev = member(o, "prev");
    if (version === 0 && Object.hasOwn(o, "prev")) {
      throw new MalformedError("version 0 has no prev member", { check: "envelope.prev" });
    }
    if (version > 0 && (typeof prev !== "string" || !HEX_HASH.test(prev))) {
      throw new MalformedError(`version ${version} needs prev, a hex leaf hash`, { check: "envelope.prev" });
    }
    const kind = checkKind(o["kind"]);
    const newKey = Object.hasOwn(o, "new_key") ? NewKey.fromObj(o["new_key"]) : null;
    if ((kind === "key.registered" || kind === "key.rotated") !== (newKey !== null)) {
      throw new MalformedError("new_key is required for key.registered/key.rotated and forbidden otherwise", {
        check: "envelope.new_key"
      });
    }
    const agent = checkAgentId(o["agent"]);
    const keyId = strField(o, "key_id", KEY_ID, "envelope.key_id");
    const clientTimeUs = intField(o, "client_time_us");
    const commitment = strField(o, "body_commitment", HEX_HASH, "envelope.body_commitment");
    return new _Envelope({
      origin,
      agent,
      keyId,
      kind,
      version,
      prev: prev ?? null,
      clientTimeUs,
      bodyCommitment: commitment,
      newKey
    });
  }
  /**
   * Parse envelope bytes that must be canonical JCS (at most {@link MAX_ENVELOPE_BYTES})
   * and exactly this envelope's encoding.
   *
   * @throws LimitExceededError / MalformedError / CanonicalFormError `json.*`, `canonical.*`;
   *   everything {@link Envelope.fromObj} throws; `envelope.form` (a guard).
   */
  static fromBytes(data) {
    const env = _Envelope.fromObj(parseCanonical(data, { maxBytes: MAX_ENVELOPE_BYTES }));
    if (!bytesEqual(env.canonical(), data)) {
      throw new CanonicalFormError("envelope does not re-encode to its bytes", { check: "envelope.form" });
    }
    return env;
  }
};
function eventSigningInput(envelopeJcs) {
  return concatBytes(EVENT_DOMAIN, envelopeJcs);
}
function popSigningInput(args) {
  const statement = {
    origin: args.origin,
    agent: args.agent,
    key_id: args.keyId,
    public_key: base64Encode(args.publicKey)
  };
  return concatBytes(POP_DOMAIN, canonicalBytes(statement));
}
function signEvent(envelope, seed) {
  return signWithSeed(eventSigningInput(envelope.canonical()), seed);
}
function signPop(args) {
  const publicKey = publicKeyFromSeed(args.seed);
  const keyId = agentKeyId(publicKey);
  const pop = signWithSeed(
    popSigningInput({ origin: args.origin, agent: args.agent, keyId, publicKey }),
    args.seed
  );
  return new NewKey({ keyId, publicKey, pop });
}
function verifyEventSignature(envelope, signature, publicKey, options = {}) {
  if (!stringsEqualCT(agentKeyId(publicKey), envelope.keyId)) {
    throw new SignatureError("envelope key_id does not belong to that public key", { check: "event.key_id" });
  }
  if (signature.length !== 64) {
    throw new SignatureError("Ed25519 signatures are 64 bytes", { check: "event.signature" });
  }
  const signed = options.envelopeJcs ?? envelope.canonical();
  if (!verifySignature(signature, eventSigningInput(signed), publicKey)) {
    throw new SignatureError(
      `event signature of ${envelope.agent}/${envelope.kind} v${envelope.version} does not verify`,
      { check: "event.signature" }
    );
  }
}
function verifyPop(envelope) {
  const nk = envelope.newKey;
  if (nk === null) throw new MalformedError("envelope introduces no key", { check: "envelope.new_key" });
  const message = popSigningInput({
    origin: envelope.origin,
    agent: envelope.agent,
    keyId: nk.keyId,
    publicKey: nk.publicKey
  });
  if (!verifySignature(nk.pop, message, nk.publicKey)) {
    throw new SignatureError(`proof of possession for key ${nk.keyId} does not verify`, { check: "key.pop" });
  }
  return nk;
}
function verifyBody(envelope, salt, body, options = {}) {
  const value = parseCanonical(body, { maxBytes: options.maxBytes ?? DEFAULT_MAX_BODY_BYTES });
  if (!isPlainObject2(value)) throw new MalformedError("a body is a JSON object", { check: "body.type" });
  if (!stringsEqualCT(commitmentOf(envelope.kind, salt, body, value), envelope.bodyCommitment)) {
    throw new SignatureError("body does not match the signed commitment", { check: "body.commitment" });
  }
  return value;
}
var Leaf = class _Leaf {
  index;
  timestampUs;
  envelope;
  signature;
  raw;
  constructor(fields) {
    this.index = fields.index;
    this.timestampUs = fields.timestampUs;
    this.envelope = fields.envelope;
    this.signature = fields.signature.slice();
    this.raw = fields.raw.slice();
    Object.freeze(this);
  }
  /** The RFC 9162 leaf hash of the leaf's bytes. */
  get hash() {
    return leafHash(this.raw);
  }
  /** The envelope's canonical bytes, as they appear inside this leaf (what its agent signed). */
  envelopeJcs() {
    return this.envelope.canonical();
  }
  static obj(fields) {
    return {
      format: LEAF_FORMAT,
      index: fields.index,
      timestamp_us: fields.timestampUs,
      event: fields.envelope.toObj(),
      sig: base64Encode(fields.signature)
    };
  }
  /** The leaf of these values (its bytes are their JCS encoding). */
  static build(fields) {
    const raw = canonicalBytes(_Leaf.obj(fields));
    return new _Leaf({ ...fields, raw });
  }
  /**
   * Parse leaf bytes: canonical JCS, exact fields, valid envelope, bounded size.
   *
   * Steps: `leaf.size` bound (`maxBytes`, 65,535 by default); `json.*` / `canonical.*` JCS
   * form; `leaf.fields`; `leaf.format`; `envelope.index`; `envelope.timestamp_us` (>= 1);
   * `leaf.sig`; `envelope.*` ({@link Envelope.fromObj}); `leaf.origin` when the expected
   * `origin` is given; `leaf.form` (a guard). The agent signature is *not* checked here
   * (it needs the key valid at `index`): use `KeyHistory.checkAndApply` (keys.ts), or
   * {@link verifyEventSignature} with that key.
   */
  static fromBytes(data, options = {}) {
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_LEAF_BYTES;
    if (data.length > maxBytes) {
      throw new LimitExceededError(`leaf of ${data.length} bytes exceeds ${maxBytes}`, { check: "leaf.size" });
    }
    const obj = parseCanonical(data, { maxBytes });
    const o = exactFields(obj, ["format", "index", "timestamp_us", "event", "sig"], [], "leaf.fields");
    if (o["format"] !== LEAF_FORMAT) {
      throw new MalformedError(`unknown leaf format ${preview(o["format"])}`, { check: "leaf.format" });
    }
    const index = intField(o, "index");
    const timestampUs = intField(o, "timestamp_us", 1);
    const sigText = o["sig"];
    if (typeof sigText !== "string") throw new MalformedError("sig must be base64", { check: "leaf.sig" });
    const signature = b64decodeStrict(sigText, "leaf.sig");
    if (signature.length !== 64) throw new MalformedError("sig must be 64 bytes", { check: "leaf.sig" });
    const envelope = Envelope.fromObj(o["event"]);
    if (options.origin !== void 0 && envelope.origin !== options.origin) {
      throw new OriginMismatchError(
        `leaf names origin ${preview(envelope.origin)}, expected ${preview(options.origin)}`,
        { check: "leaf.origin" }
      );
    }
    const rebuilt = canonicalBytes(_Leaf.obj({ index, timestampUs, envelope, signature }));
    if (!bytesEqual(rebuilt, data)) {
      throw new CanonicalFormError("leaf does not re-encode to its bytes", { check: "leaf.form" });
    }
    return new _Leaf({ index, timestampUs, envelope, signature, raw: data });
  }
};

// src/keys.ts
function record(fields) {
  return Object.freeze({ ...fields, publicKey: fields.publicKey.slice(), retiredAt: null, retiredHow: null });
}
function change(fields) {
  return Object.freeze({ add: null, retireKeyId: null, retireHow: null, ...fields });
}
function authorize(view, envelope, index) {
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
        check: "key.registered"
      });
    }
    const add3 = record({ keyId: nk.keyId, agent: envelope.agent, publicKey: nk.publicKey, addedAt: index });
    return Object.freeze({ signerPublicKey: nk.publicKey, change: change({ add: add3, agent: envelope.agent }) });
  }
  const signer = view.key(envelope.keyId);
  if (signer === null) {
    throw new UnknownKeyError(`key ${envelope.keyId} is not registered in this log`, { check: "key.unknown" });
  }
  if (signer.retiredAt !== null) {
    throw new KeyStateError(`key ${signer.keyId} was ${signer.retiredHow} at index ${signer.retiredAt}`, {
      check: `key.${signer.retiredHow}`
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
        check: "key.revoked"
      });
    }
    return Object.freeze({
      signerPublicKey: signer.publicKey,
      change: change({ retireKeyId: target, retireHow: "revoked", agent: envelope.agent })
    });
  }
  const policySigned = signer.agent === POLICY_AGENT && envelope.agent !== POLICY_AGENT;
  if (POLICY_KINDS.has(kind) || AGENT_OR_POLICY_KINDS.has(kind) && policySigned) {
    if (signer.agent !== POLICY_AGENT || view.activeKey(POLICY_AGENT) !== signer.keyId) {
      throw new KeyStateError(`${kind} is signed by the ledger's active policy key only`, {
        check: "key.authority"
      });
    }
    return Object.freeze({ signerPublicKey: signer.publicKey, change: null });
  }
  if (signer.agent !== envelope.agent) {
    throw new KeyStateError(`key ${signer.keyId} belongs to ${signer.agent}, not ${envelope.agent}`, {
      check: "key.owner"
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
    const add3 = record({ keyId: nk.keyId, agent: envelope.agent, publicKey: nk.publicKey, addedAt: index });
    return Object.freeze({
      signerPublicKey: signer.publicKey,
      change: change({ add: add3, retireKeyId: signer.keyId, retireHow: "rotated", agent: envelope.agent })
    });
  }
  if (envelope.newKey !== null) {
    throw new MalformedError("only key events carry new_key", { check: "envelope.new_key" });
  }
  return Object.freeze({ signerPublicKey: signer.publicKey, change: null });
}
var KeyHistory = class {
  /** Every key seen, by key id. */
  keys = /* @__PURE__ */ new Map();
  /** Each agent's active key id. */
  active = /* @__PURE__ */ new Map();
  key(keyId) {
    return this.keys.get(keyId) ?? null;
  }
  activeKey(agent) {
    return this.active.get(agent) ?? null;
  }
  /** Apply a decision's change as of entry `index`. */
  apply(change2, index) {
    if (change2 === null) return;
    if (change2.retireKeyId !== null) {
      const old = this.keys.get(change2.retireKeyId);
      if (old === void 0) throw new RangeError(`no key ${change2.retireKeyId} to retire`);
      this.keys.set(old.keyId, Object.freeze({ ...old, retiredAt: index, retiredHow: change2.retireHow }));
      if (this.active.get(old.agent) === old.keyId) this.active.delete(old.agent);
    }
    if (change2.add !== null) {
      this.keys.set(change2.add.keyId, change2.add);
      this.active.set(change2.add.agent, change2.add.keyId);
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
  checkAndApply(leaf, options = {}) {
    const decision = authorize(this, leaf.envelope, leaf.index);
    const key = decision.signerPublicKey;
    const verified = options.verifiedWith;
    if (!(verified !== void 0 && constantTimeEqual(verified, key) && constantTimeEqual(utf8(agentKeyId(key)), utf8(leaf.envelope.keyId)))) {
      verifyEventSignature(leaf.envelope, leaf.signature, key, { envelopeJcs: leaf.envelopeJcs() });
    }
    this.apply(decision.change, leaf.index);
    return decision;
  }
};

// src/mesh.ts
var MeshRuleError = class extends VerificationError {
  static defaultCheck = "mesh.rule";
};
var MESH_KINDS = Object.freeze([
  "mesh.created",
  "mesh.invited",
  "mesh.joined",
  "mesh.granted",
  "mesh.left",
  "mesh.removed",
  "mesh.dissolved"
]);
var CREATOR_KINDS = Object.freeze([
  "mesh.created",
  "mesh.invited",
  "mesh.removed",
  "mesh.dissolved",
  "mesh.granted",
  "mesh.left"
]);
var MEMBER_KINDS = Object.freeze(["mesh.joined", "mesh.granted", "mesh.left"]);
var MEMORY_KINDS = Object.freeze(["memory.written", "memory.distilled"]);
var MESH_ID = /^[a-z0-9][a-z0-9._-]{0,63}\/[a-z0-9][a-z0-9._-]{0,31}$/;
var CATEGORY_NAMES = /* @__PURE__ */ new Set([
  "COMMITMENT",
  "PERFORMANCE",
  "LEARNING",
  "FAILURE",
  "PREFERENCE",
  "ANOMALY",
  "CONTEXT"
]);
function creatorOf(mesh) {
  const slash = mesh.indexOf("/");
  return slash < 0 ? mesh : mesh.slice(0, slash);
}
function compareCodePoints(a, b) {
  const x = a[Symbol.iterator]();
  const y = b[Symbol.iterator]();
  for (; ; ) {
    const p = x.next();
    const q = y.next();
    if (p.done || q.done) return p.done && q.done ? 0 : p.done ? -1 : 1;
    const c = p.value.codePointAt(0) - q.value.codePointAt(0);
    if (c !== 0) return c;
  }
}
function sortedStrings(items) {
  return [...items].sort(compareCodePoints);
}
function isObject(value) {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
function get(body, name) {
  return Object.hasOwn(body, name) ? body[name] : void 0;
}
var Member = class {
  agent;
  joinedIndex;
  leftIndex = null;
  /** The member's grants in log order. */
  grants = [];
  constructor(agent, joinedIndex) {
    this.agent = agent;
    this.joinedIndex = joinedIndex;
  }
  get active() {
    return this.leftIndex === null;
  }
  /** The categories the member's grant reads. */
  get reads() {
    const last = this.grants[this.grants.length - 1];
    return last === void 0 ? /* @__PURE__ */ new Set() : last[2];
  }
  /** Per category the member shares now, the log index from which its memories flow: the
   * grant that began sharing it without a break since (0 with `backfill`). */
  sharedSince() {
    let since = /* @__PURE__ */ new Map();
    for (const [index, share] of this.grants) {
      const next = /* @__PURE__ */ new Map();
      for (const c of share) next.set(c, since.get(c) ?? index);
      since = next;
    }
    const last = this.grants[this.grants.length - 1];
    if (last !== void 0 && last[3]) {
      since = new Map([...since.keys()].map((c) => [c, 0]));
    }
    return since;
  }
};
var Mesh = class {
  mesh;
  creator;
  createdIndex;
  title;
  dissolvedIndex = null;
  members = /* @__PURE__ */ new Map();
  /** Pending invitations: agent -> the index of the invitation. */
  invited = /* @__PURE__ */ new Map();
  constructor(fields) {
    this.mesh = fields.mesh;
    this.creator = fields.creator;
    this.createdIndex = fields.createdIndex;
    this.title = fields.title;
  }
  get dissolved() {
    return this.dissolvedIndex !== null;
  }
  activeMembers() {
    return [...this.members.values()].filter((m) => m.active);
  }
  toJson() {
    const invited = Object.fromEntries(
      [...this.invited.entries()].sort((a, b) => compareCodePoints(a[0], b[0]))
    );
    return {
      mesh: this.mesh,
      creator: this.creator,
      created_index: this.createdIndex,
      title: this.title,
      dissolved_index: this.dissolvedIndex,
      invited,
      members: [...this.members.values()].sort((a, b) => compareCodePoints(a.agent, b.agent)).map((m) => {
        const g = m.grants[m.grants.length - 1];
        return {
          agent: m.agent,
          joined_index: m.joinedIndex,
          left_index: m.leftIndex,
          grant: g === void 0 ? null : { index: g[0], share: sortedStrings(g[1]), read: sortedStrings(g[2]), backfill: g[3] }
        };
      })
    };
  }
};
function refuse(message, check) {
  return new MeshRuleError(message, { check });
}
function checkShape2(kind, body) {
  let ok = isObject(body) && typeof get(body, "mesh") === "string" && MESH_ID.test(get(body, "mesh"));
  if (ok && (kind === "mesh.invited" || kind === "mesh.removed")) {
    ok = typeof get(body, "agent") === "string";
  }
  if (ok && kind === "mesh.granted") {
    const b = body;
    ok = ["share", "read"].every((k) => {
      const list = get(b, k);
      return Array.isArray(list) && list.every((c) => typeof c === "string" && CATEGORY_NAMES.has(c));
    }) && typeof (Object.hasOwn(b, "backfill") ? b["backfill"] : false) === "boolean";
  }
  if (!ok) throw refuse(`a ${kind} body of the wrong shape`, "mesh.malformed");
}
function applyEvent(state, index, agent, kind, body, mesh = null) {
  if (body === null) {
    if (mesh === null || !MESH_ID.test(mesh)) throw new Error("a body-less mesh entry is folded for a named mesh");
    return applyBodyless(state, index, agent, kind, mesh);
  }
  checkShape2(kind, body);
  return applyBodied(state, index, agent, kind, body);
}
function applyBodied(state, index, agent, kind, body) {
  const mesh = body.mesh;
  if (kind === "mesh.created") {
    if (agent !== creatorOf(mesh)) {
      throw refuse(`mesh ${mesh} can only be created by ${creatorOf(mesh)}`, "mesh.policy");
    }
    if (state !== null) throw refuse(`mesh ${mesh} already exists`, "mesh.exists");
    const title = get(body, "title");
    const created = new Mesh({
      mesh,
      creator: agent,
      createdIndex: index,
      title: typeof title === "string" ? title : null
    });
    created.members.set(agent, new Member(agent, index));
    return created;
  }
  if (state === null) throw refuse(`there is no mesh ${mesh}`, "mesh.missing");
  if (state.dissolved) throw refuse(`mesh ${mesh} is dissolved`, "mesh.dissolved");
  const member2 = state.members.get(agent);
  if ((kind === "mesh.invited" || kind === "mesh.removed" || kind === "mesh.dissolved") && agent !== state.creator) {
    throw refuse(`only ${state.creator}, who created mesh ${mesh}, may do that`, "mesh.policy");
  }
  if (kind === "mesh.invited") {
    const who = get(body, "agent");
    const target = state.members.get(who);
    if (target !== void 0 && target.active) throw refuse(`${who} is already a member of ${mesh}`, "mesh.member");
    state.invited.set(who, index);
  } else if (kind === "mesh.joined") {
    if (member2 !== void 0 && member2.active) throw refuse(`${agent} is already a member of ${mesh}`, "mesh.member");
    if (!state.invited.has(agent)) throw refuse(`${agent} is not invited to ${mesh}`, "mesh.not_invited");
    state.invited.delete(agent);
    state.members.set(agent, new Member(agent, index));
  } else if (kind === "mesh.granted") {
    if (member2 === void 0 || !member2.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    member2.grants.push([
      index,
      new Set(get(body, "share")),
      new Set(get(body, "read")),
      Object.hasOwn(body, "backfill") ? body["backfill"] : false
    ]);
  } else if (kind === "mesh.left") {
    if (member2 === void 0 || !member2.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    if (agent === state.creator) throw refuse(`the creator of ${mesh} dissolves it instead of leaving`, "mesh.policy");
    member2.leftIndex = index;
  } else if (kind === "mesh.removed") {
    const who = get(body, "agent");
    const target = state.members.get(who);
    if (target === void 0 || !target.active || target.agent === state.creator) {
      throw refuse(`${who} is not a removable member of ${mesh}`, "mesh.not_member");
    }
    target.leftIndex = index;
    state.invited.delete(target.agent);
  } else if (kind === "mesh.dissolved") {
    state.dissolvedIndex = index;
  }
  return state;
}
function applyBodyless(state, index, agent, kind, mesh) {
  const creator = creatorOf(mesh);
  if (kind === "mesh.created") {
    if (agent !== creator) throw refuse(`mesh ${mesh} can only be created by ${creator}`, "mesh.policy");
    if (state !== null) throw refuse(`mesh ${mesh} already exists`, "mesh.exists");
    const created = new Mesh({ mesh, creator: agent, createdIndex: index, title: null });
    created.dissolvedIndex = index;
    return created;
  }
  if (state === null) throw refuse(`there is no mesh ${mesh}`, "mesh.missing");
  if (state.dissolved) throw refuse(`mesh ${mesh} is dissolved`, "mesh.dissolved");
  const member2 = state.members.get(agent);
  if ((kind === "mesh.invited" || kind === "mesh.removed" || kind === "mesh.dissolved") && agent !== state.creator) {
    throw refuse(`only ${state.creator}, who created mesh ${mesh}, may do that`, "mesh.policy");
  }
  if (kind === "mesh.invited") {
    throw refuse(`an invitation without a body invites no one to ${mesh}`, "mesh.erased");
  } else if (kind === "mesh.joined") {
    if (!state.invited.delete(agent)) throw refuse(`${agent} is not invited to ${mesh}`, "mesh.not_invited");
  } else if (kind === "mesh.granted") {
    if (member2 === void 0 || !member2.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    member2.grants.push([index, /* @__PURE__ */ new Set(), /* @__PURE__ */ new Set(), false]);
  } else if (kind === "mesh.left") {
    if (member2 === void 0 || !member2.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    if (agent === state.creator) throw refuse(`the creator of ${mesh} dissolves it instead of leaving`, "mesh.policy");
    member2.leftIndex = index;
  } else if (kind === "mesh.removed") {
    for (const m of state.members.values()) {
      if (m.active && m.agent !== state.creator) {
        m.leftIndex = index;
        state.invited.delete(m.agent);
      }
    }
  } else if (kind === "mesh.dissolved") {
    state.dissolvedIndex = index;
  }
  return state;
}
function fold(events, mesh = null) {
  let state = null;
  for (const [index, agent, kind, body] of [...events].sort((a, b) => a[0] - b[0])) {
    try {
      state = applyEvent(state, index, agent, kind, body, mesh);
    } catch (e) {
      if (!(e instanceof MeshRuleError)) throw e;
    }
  }
  return state;
}
function statementAgents(s) {
  if (s["predicate"] === "mesh_read") {
    return [.../* @__PURE__ */ new Set([String(s["agent"]), String(s["author"]), creatorOf(String(s["mesh"]))])];
  }
  return [String(s["agent"])];
}
function statementStreams(s) {
  if (s["predicate"] !== "mesh_read") return [[String(s["agent"]), String(s["kind"])]];
  return [];
}
function memoryCategory(s, memory) {
  const ref = String(s["ref"]);
  const dot = ref.indexOf(".");
  const index = dot < 0 ? ref : ref.slice(0, dot);
  const pos = dot < 0 ? "" : ref.slice(dot + 1);
  const author = String(s["author"]);
  const [agent, kind, body] = memory;
  if (agent !== author || kind !== s["kind"]) {
    return [null, `entry ${index} is a ${kind} of ${agent}, not a ${String(s["kind"])} of ${author}`];
  }
  if (body === null) return [null, `entry ${index}'s body is not disclosed (erased?)`];
  let category;
  if (kind === "memory.distilled") {
    const entries = get(body, "entries");
    if (!Array.isArray(entries) || !(Number(pos) < entries.length)) {
      return [null, `entry ${index} has no memory ${pos}`];
    }
    const entry = entries[Number(pos)];
    category = isObject(entry) ? get(entry, "category") : void 0;
  } else {
    category = pos === "0" ? get(body, "category") : void 0;
  }
  if (typeof category !== "string") return [null, `memory ${ref} has no category`];
  return [category, ""];
}
function meshRead(s, events, memory) {
  const meshId = String(s["mesh"]);
  const reader = String(s["agent"]);
  const author = String(s["author"]);
  const ref = String(s["ref"]);
  const dot = ref.indexOf(".");
  const index = dot < 0 ? ref : ref.slice(0, dot);
  const [category, why] = memoryCategory(s, memory);
  if (category === null) return [false, why];
  const own = [];
  for (const e of events) {
    const b = e[3];
    if (MESH_KINDS.includes(e[2]) && (b === null || isObject(b) && get(b, "mesh") === meshId)) own.push(e);
  }
  const mesh = fold(own, meshId);
  if (mesh === null || mesh.dissolved) return [false, `mesh ${meshId} does not exist or is dissolved`];
  const a = mesh.members.get(author);
  const r = mesh.members.get(reader);
  if (a === void 0 || !a.active || r === void 0 || !r.active) {
    return [false, `${author} and ${reader} are not both members of ${meshId}`];
  }
  const since = a.sharedSince().get(category);
  if (since === void 0 || since > Number(index)) {
    return [false, `${author}'s grant does not share ${category} memories from entry ${index}`];
  }
  if (!r.reads.has(category)) return [false, `${reader}'s grant does not read ${category}`];
  return [true, `${author}'s ${category} memory ${ref} flows to ${reader} through ${meshId}`];
}

// src/tiers.ts
var DEFAULT_TIER_V2_FROM_US = 17954784e8;
var CATEGORIES = /* @__PURE__ */ new Set([
  "COMMITMENT",
  "PERFORMANCE",
  "LEARNING",
  "FAILURE",
  "PREFERENCE",
  "ANOMALY",
  "CONTEXT"
]);
var DISCLOSED_STATUS_KINDS = Object.freeze([
  "memory.tier_changed",
  "memory.archived",
  "memory.superseded",
  "memory.replaced",
  "memory.erased"
]);
var EXEMPT_KIND = "memory.decay_exempted";
var USE_KIND = "memory.accessed";
function isObject2(value) {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
function get2(body, name) {
  return Object.hasOwn(body, name) ? body[name] : void 0;
}
function isInt(v) {
  return typeof v === "number" && Number.isInteger(v);
}
function defaultTier(category, tags, session) {
  return session || category === "PREFERENCE" || tags.includes("blocker") ? "HOT" : "WARM";
}
function refIndex(ref) {
  return Number(ref.slice(0, ref.indexOf(".")));
}
function namesMemory(kind, body, ref) {
  if (DISCLOSED_STATUS_KINDS.includes(kind) && kind !== "memory.erased") return get2(body, "item") === ref;
  if (kind === EXEMPT_KIND) return get2(body, "item") === ref;
  if (kind === USE_KIND) {
    const items = get2(body, "items");
    return Array.isArray(items) && items.includes(ref);
  }
  if (kind === "memory.erased") {
    const refs = get2(body, "refs");
    const also = get2(body, "also");
    const index = get2(body, "index");
    const i = refIndex(ref);
    return Array.isArray(refs) && refs.includes(ref) || isInt(index) && index === i || Array.isArray(also) && also.some((a) => isInt(a) && a === i);
  }
  return false;
}
function lastActivity(st) {
  return Math.max(st.createdUs, st.lastUseUs);
}
function initial(ref, kind, timestampUs, body) {
  const pos = Number(ref.slice(ref.indexOf(".") + 1));
  if (body === null) return [null, null, `the body of entry ${refIndex(ref)} is not disclosed (erased?)`];
  let entry;
  let tier;
  if (kind === "memory.distilled") {
    const entries = get2(body, "entries");
    if (!Array.isArray(entries) || pos >= entries.length) {
      return [null, null, `entry ${refIndex(ref)} has no memory ${pos}`];
    }
    const e = entries[pos];
    if (!isObject2(e)) return [null, null, `memory ${ref} is not disclosed`];
    entry = e;
    tier = "HOT";
  } else if (kind === "memory.written" && pos === 0) {
    entry = body;
    const t = get2(body, "tier");
    if (typeof t === "string") {
      tier = t;
    } else if (timestampUs >= DEFAULT_TIER_V2_FROM_US) {
      const tags = get2(body, "tags");
      const session = get2(body, "session");
      tier = defaultTier(
        String(get2(body, "category")),
        Array.isArray(tags) ? tags.filter((x) => typeof x === "string") : [],
        typeof session === "string" ? session : null
      );
    } else {
      tier = "HOT";
    }
  } else {
    return [null, null, `entry ${refIndex(ref)} has no memory ${pos}`];
  }
  const category = get2(entry, "category");
  if (typeof category !== "string" || !CATEGORIES.has(category)) return [null, null, `memory ${ref} has no category`];
  const provenance = get2(entry, "provenance");
  const linked = Array.isArray(provenance) && provenance.some((p) => isObject2(p) && (get2(p, "source_type") === "pact" || get2(p, "source_type") === "eval"));
  return [
    category,
    {
      tier,
      status: "active",
      exempt: get2(entry, "decay_exempt") === true,
      linked,
      createdUs: timestampUs,
      lastUseUs: 0,
      why: `${ref} written ${tier}`
    },
    ""
  ];
}
function timeBasisHolds(st, timestampUs, body) {
  const la = get2(body, "last_activity_us");
  const nb = get2(body, "not_before_us");
  if (Object.hasOwn(body, "last_activity_us") && (!isInt(la) || la !== lastActivity(st))) return false;
  return !(Object.hasOwn(body, "not_before_us") && (!isInt(nb) || timestampUs < nb));
}
function apply(st, index, timestampUs, kind, body) {
  if (kind === USE_KIND) {
    st.lastUseUs = timestampUs;
    return;
  }
  if (kind === EXEMPT_KIND) {
    st.exempt = true;
    if (st.status === "archived") {
      st.status = "active";
      st.why = `restored by the exemption at entry ${index}`;
    }
    return;
  }
  if (body === null) {
    st.status = "unknown";
    st.why = `entry ${index} names the memory but its body is not disclosed`;
    return;
  }
  if (kind === "memory.erased") {
    st.status = "erased";
    st.why = `erased by entry ${index}`;
  } else if (kind === "memory.superseded" || kind === "memory.replaced") {
    if (st.status === "active") {
      st.status = "superseded";
      st.why = `${kind === "memory.superseded" ? "corrected" : "replaced"} by entry ${index}`;
    }
  } else if (kind === "memory.tier_changed") {
    const src = get2(body, "from");
    const dst = get2(body, "to");
    if (typeof src !== "string" || typeof dst !== "string") {
      st.status = "unknown";
      st.why = `entry ${index} is a tier change without from and to`;
    } else if (st.status === "active" && st.tier === src && st.tier !== "COLD" && timeBasisHolds(st, timestampUs, body)) {
      if (Object.hasOwn(body, "confirms")) {
        st.status = "superseded";
        st.why = `confirmed into another memory by entry ${index}`;
      } else {
        st.tier = dst;
        st.why = `moved ${src} to ${dst} by entry ${index}`;
      }
    }
  } else if (kind === "memory.archived" && st.status === "active" && st.tier === "WARM" && !st.exempt && !st.linked && timeBasisHolds(st, timestampUs, body)) {
    st.status = "archived";
    st.why = `archived by entry ${index}`;
  }
}
function foldStatus(ref, memory, entries) {
  const [index, timestampUs, kind, body] = memory;
  const [category, st, why] = initial(ref, kind, timestampUs, body);
  if (st === null) {
    return Object.freeze({ ref, category: null, tier: "NONE", status: "unknown", why, shareable: false });
  }
  for (const [i, ts, k, b] of [...entries].sort((a, c) => a[0] - c[0])) {
    if (i > index) apply(st, i, ts, k, b);
  }
  return Object.freeze({
    ref,
    category,
    tier: st.tier,
    status: st.status,
    why: st.why,
    shareable: st.status === "active" && st.tier === "WARM" && category !== null
  });
}

// src/mesh_index.ts
var INDEX_HEADER = "engram.mesh-read/v1";
var ROLES = Object.freeze(["memory", "status", "exempt", "use", "mesh"]);
var HEX_HASH2 = /^[0-9a-f]{64}$/;
var MeshIndexError = class extends VerificationError {
  static defaultCheck = "index";
};
function claimLine(s) {
  return `claim ${String(s["agent"])} ${String(s["author"])} ${String(s["mesh"])} ${String(s["kind"])} ${String(s["ref"])}`;
}
function get3(body, name) {
  return Object.hasOwn(body, name) ? body[name] : void 0;
}
var MeshReadIndex = class {
  entries;
  constructor(entries) {
    this.entries = entries;
  }
  of(role) {
    return [...this.entries.entries()].filter(([, [r]]) => r === role).map(([i]) => i);
  }
};
function parseIndex(note, key, cp, statement) {
  const signed = SignedNote.parse(note);
  signed.verify([key]);
  const lines = signed.text.replace(/\n+$/, "").split("\n");
  if (lines[0] !== INDEX_HEADER) {
    throw new MalformedError(
      `mesh-read index ${JSON.stringify(lines[0].slice(0, 40))} is not ${INDEX_HEADER}`,
      { check: "index.version" }
    );
  }
  const binding = [`origin ${cp.origin}`, `size ${cp.size}`, `root ${base64Encode(cp.root)}`];
  if (lines.length < 4 || binding.some((b, i) => lines[i + 1] !== b)) {
    throw new ProofError("the mesh-read index is not bound to this checkpoint", { check: "index.binding" });
  }
  if (lines.length < 5 || lines[4] !== claimLine(statement)) {
    throw new MeshIndexError("the mesh-read index is for another claim", { check: "index.claim" });
  }
  const entries = /* @__PURE__ */ new Map();
  let last = -1n;
  for (const line of lines.slice(5)) {
    const parts = line.split(" ");
    if (parts.length !== 3 || !ROLES.includes(parts[0]) || !HEX_HASH2.test(parts[2])) {
      throw new MalformedError(`bad index line ${JSON.stringify(line.slice(0, 80))}`, { check: "index.format" });
    }
    const index = parseDecimal(parts[1], "index.format");
    if (index <= last || index >= cp.size) {
      throw new MalformedError("index lines are in strictly increasing order, below the checkpoint's size", {
        check: "index.format"
      });
    }
    last = index;
    entries.set(Number(index), [parts[0], parts[2]]);
  }
  const ref = String(statement["ref"]);
  const memoryIndex = Number(ref.slice(0, ref.indexOf(".")));
  const memories = [...entries.entries()].filter(([, [r]]) => r === "memory").map(([i]) => i);
  if (memories.length !== 1 || memories[0] !== memoryIndex) {
    throw new MeshIndexError("the index lists the memory's entry once, at its ref's index", { check: "index.format" });
  }
  return new MeshReadIndex(entries);
}
function agentsOf(s) {
  return [String(s["agent"]), String(s["author"]), creatorOf(String(s["mesh"]))];
}
function mismatch(index, role, what) {
  return new MeshIndexError(
    `the log listed entry ${index} as a ${role} entry of this claim, but it is ${what}: the index contradicts the entries it lists`,
    { check: "index.mismatch" }
  );
}
function inMeshStream(s, leaf) {
  const [reader, author, creator] = agentsOf(s);
  const env = leaf.envelope;
  return env.agent === creator && CREATOR_KINDS.includes(env.kind) || (env.agent === reader || env.agent === author) && MEMBER_KINDS.includes(env.kind);
}
function checkMemoryDisclosure(s, i, kind, body) {
  if (kind !== "memory.distilled" || body === null) return;
  const ref = String(s["ref"]);
  const pos = Number(ref.slice(ref.indexOf(".") + 1));
  const entries = get3(body, "entries");
  if (get3(body, "disclosure") !== PER_ENTRY || !Array.isArray(entries)) {
    throw new MeshIndexError(
      `entry ${i} is a distillation without per-entry commitments: disclosing it would hand over every memory of its session`,
      { check: "claim.disclosure" }
    );
  }
  const shown = entries.flatMap((e, n) => typeof e === "string" ? [] : [n]);
  if (!(shown.length === 0 || shown.length === 1 && shown[0] === pos)) {
    throw new MeshIndexError(`entry ${i} discloses the session's memories [${shown.join(", ")}], not memory ${pos} alone`, {
      check: "claim.disclosure"
    });
  }
}
function checkIndex(s, index, leaves, bodies) {
  const [, author] = agentsOf(s);
  const ref = String(s["ref"]);
  const mesh = String(s["mesh"]);
  for (const [i, [role, leafHash2]] of index.entries) {
    const leaf = leaves.get(i);
    if (leaf === void 0) {
      throw new MeshIndexError(`the index lists entry ${i}, which the bundle does not carry`, { check: "index.missing" });
    }
    if (toHex(leaf.hash) !== leafHash2) {
      throw new MeshIndexError(`entry ${i} is not the leaf the index lists`, { check: "index.leaf" });
    }
    const env = leaf.envelope;
    const body = bodies.get(i) ?? null;
    const what = `a ${env.kind} of ${env.agent}`;
    if (role === "memory") {
      checkMemoryDisclosure(s, i, env.kind, body);
      continue;
    }
    if (role === "mesh") {
      if (!MESH_KINDS.includes(env.kind) || !inMeshStream(s, leaf)) throw mismatch(i, role, what);
      if (body !== null && get3(body, "mesh") !== mesh) throw mismatch(i, role, `${what} of another mesh`);
      continue;
    }
    if (env.agent !== author) throw mismatch(i, role, what);
    if (role === "status") {
      if (!DISCLOSED_STATUS_KINDS.includes(env.kind)) throw mismatch(i, role, what);
      if (body === null) {
        throw new MeshIndexError(`entry ${i} names the memory; its body is needed and not disclosed`, {
          check: "index.undisclosed"
        });
      }
      if (!namesMemory(env.kind, body, ref)) throw mismatch(i, role, `${what} that does not name memory ${ref}`);
    } else if (role === "exempt" || role === "use") {
      if (env.kind !== (role === "exempt" ? EXEMPT_KIND : USE_KIND)) throw mismatch(i, role, what);
      if (body !== null) {
        throw new MeshIndexError(`entry ${i} (${env.kind}) is disclosed: its text is not the shared memory's`, {
          check: "claim.disclosure"
        });
      }
    }
  }
}
function allowedEntries(statements, indexes, leaves, bodies) {
  const agents = /* @__PURE__ */ new Set([POLICY_AGENT, ...statements.flatMap((s) => agentsOf(s))]);
  const listed = new Set(indexes.flatMap((idx) => [...idx.entries.keys()]));
  for (const [i, leaf] of [...leaves.entries()].sort((a, b) => a[0] - b[0])) {
    if (listed.has(i)) continue;
    const env = leaf.envelope;
    const body = bodies.get(i) ?? null;
    if (KEY_KINDS.has(env.kind) && agents.has(env.agent)) {
      if (body !== null) throw new MeshIndexError(`entry ${i}'s key event body is disclosed`, { check: "claim.disclosure" });
      continue;
    }
    statements.forEach((s, n) => {
      if (body === null) return;
      const idx = indexes[n];
      const ofMesh = MESH_KINDS.includes(env.kind) && inMeshStream(s, leaf) && get3(body, "mesh") === s["mesh"];
      const names = env.agent === String(s["author"]) && [...DISCLOSED_STATUS_KINDS, EXEMPT_KIND].includes(env.kind) && i > idx.of("memory")[0] && namesMemory(env.kind, body, String(s["ref"]));
      if (ofMesh || names) {
        throw new ProofError(
          `fraud proof: entry ${i} (${env.kind} of ${env.agent}) bears on the claim ${claimLine(s).slice(6)} and the log's index for it leaves the entry out`,
          { check: "index.fraud" }
        );
      }
    });
    throw new MeshIndexError(
      `entry ${i} (${env.kind} of ${env.agent}) is not listed by the mesh-read index: a mesh_read bundle discloses nothing else`,
      { check: "claim.disclosure" }
    );
  }
}

// src/state.ts
var StateError = class extends ProofError {
  static defaultCheck = "state";
};
function requireExtends(remembered, cp, proof, prefix) {
  if (remembered.origin !== cp.origin) {
    throw new StateError(
      `checkpoint of ${JSON.stringify(cp.origin)} checked against state of ${JSON.stringify(remembered.origin)}`,
      { check: `${prefix}.origin` }
    );
  }
  if (remembered.size > cp.size) {
    throw new StateError(
      `rollback: the checkpoint of size ${cp.size} is older than the checkpoint of size ${remembered.size} already verified for ${cp.origin}`,
      { check: prefix === "state" ? `${prefix}.rollback` : `${prefix}.stale` }
    );
  }
  if (remembered.size === cp.size) {
    if (toHex(remembered.root) !== toHex(cp.root)) {
      throw new StateError(
        `FORK: the log signed two different roots at size ${cp.size} (${toHex(remembered.root).slice(0, 16)}... verified before, ${toHex(cp.root).slice(0, 16)}... now)`,
        { check: `${prefix}.fork` }
      );
    }
    return;
  }
  if (proof === null) {
    throw new StateError(`no consistency proof from the size ${remembered.size} already verified to ${cp.size}`, {
      check: `${prefix}.missing`
    });
  }
  try {
    verifyConsistency({
      oldSize: remembered.size,
      newSize: cp.size,
      oldRoot: remembered.root,
      newRoot: cp.root,
      proof: [...proof]
    });
  } catch (e) {
    if (!(e instanceof ProofError)) throw e;
    throw new StateError(
      `FORK: the checkpoint of size ${cp.size} does not extend the one of size ${remembered.size} verified before (${e.message})`,
      { check: `${prefix}.fork`, cause: e }
    );
  }
}

// src/p256.ts
var P2 = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn;
var B = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn;
var N2 = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
var GX = 0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296n;
var GY = 0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5n;
function mod2(a, m = P2) {
  const r = a % m;
  return r < 0n ? r + m : r;
}
function pow(base, exp, m) {
  let result = 1n;
  let b = mod2(base, m);
  let e = exp;
  while (e > 0n) {
    if (e & 1n) result = result * b % m;
    b = b * b % m;
    e >>= 1n;
  }
  return result;
}
function invert2(a, m) {
  return pow(a, m - 2n, m);
}
var INFINITY = [0n, 1n, 0n];
function double(p) {
  const [x, y, z] = p;
  if (z === 0n || y === 0n) return INFINITY;
  const delta = mod2(z * z);
  const gamma = mod2(y * y);
  const beta = mod2(x * gamma);
  const alpha = mod2(3n * (x - delta) * (x + delta));
  const x3 = mod2(alpha * alpha - 8n * beta);
  const z3 = mod2((y + z) * (y + z) - gamma - delta);
  const y3 = mod2(alpha * (4n * beta - x3) - 8n * gamma * gamma);
  return [x3, y3, z3];
}
function add2(p, q) {
  if (p[2] === 0n) return q;
  if (q[2] === 0n) return p;
  const [x1, y1, z1] = p;
  const [x2, y2, z2] = q;
  const z1z1 = mod2(z1 * z1);
  const z2z2 = mod2(z2 * z2);
  const u1 = mod2(x1 * z2z2);
  const u2 = mod2(x2 * z1z1);
  const s1 = mod2(y1 * z2 * z2z2);
  const s2 = mod2(y2 * z1 * z1z1);
  if (u1 === u2) return s1 === s2 ? double(p) : INFINITY;
  const h = mod2(u2 - u1);
  const i = mod2(4n * h * h);
  const j = mod2(h * i);
  const r = mod2(2n * (s2 - s1));
  const v = mod2(u1 * i);
  const x3 = mod2(r * r - j - 2n * v);
  const y3 = mod2(r * (v - x3) - 2n * s1 * j);
  const z3 = mod2(((z1 + z2) * (z1 + z2) - z1z1 - z2z2) * h);
  return [x3, y3, z3];
}
function multiply(p, k) {
  let result = INFINITY;
  let d = p;
  let n = k;
  while (n > 0n) {
    if (n & 1n) result = add2(result, d);
    d = double(d);
    n >>= 1n;
  }
  return result;
}
function toAffine(p) {
  if (p[2] === 0n) return null;
  const zi = invert2(p[2], P2);
  const zi2 = mod2(zi * zi);
  return { x: mod2(p[0] * zi2), y: mod2(p[1] * zi2 * zi) };
}
var G2 = [GX, GY, 1n];
function bytesToBig(data) {
  let n = 0n;
  for (const b of data) n = n << 8n | BigInt(b);
  return n;
}
function bigTo32(n) {
  const out = new Uint8Array(32);
  let v = n;
  for (let i = 31; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}
function onCurve(x, y) {
  return mod2(y * y) === mod2(x * x * x - 3n * x + B);
}
function decompress(x, odd) {
  const rhs = mod2(x * x * x - 3n * x + B);
  const y = pow(rhs, (P2 + 1n) / 4n, P2);
  if (mod2(y * y) !== rhs) return null;
  return (y & 1n) === (odd ? 1n : 0n) ? y : mod2(-y);
}
function parsePublicKey(data) {
  const tag = data[0];
  if (tag === 2 || tag === 3) {
    if (data.length !== 33) return null;
    const x = bytesToBig(data.subarray(1));
    if (x >= P2) return null;
    const y = decompress(x, tag === 3);
    return y === null ? null : { x, y };
  }
  if (tag === 4) {
    if (data.length !== 65) return null;
    const x = bytesToBig(data.subarray(1, 33));
    const y = bytesToBig(data.subarray(33));
    if (x >= P2 || y >= P2 || !onCurve(x, y)) return null;
    return { x, y };
  }
  if (tag === 5) {
    if (data.length !== 33) return null;
    const x = bytesToBig(data.subarray(1));
    if (x >= P2) return null;
    const y = decompress(x, false);
    if (y === null) return null;
    return { x, y: y < P2 - y ? y : P2 - y };
  }
  return null;
}
function compressPublicKey(point) {
  const out = new Uint8Array(33);
  out[0] = point.y & 1n ? 3 : 2;
  out.set(bigTo32(point.x), 1);
  return out;
}
function publicKeyFromSecret(secret) {
  if (secret.length !== 32) return null;
  const d = bytesToBig(secret);
  if (d === 0n || d >= N2) return null;
  return toAffine(multiply(G2, d));
}
function pointsEqual(a, b) {
  return a.x === b.x && a.y === b.y;
}
function derLength(data, pos) {
  const first = data[pos];
  if (first === void 0) return null;
  if (first < 128) return [first, pos + 1];
  if (first === 128 || first > 132) return null;
  const n = first - 128;
  if (pos + 1 + n > data.length) return null;
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + data[pos + 1 + i];
  const needed = len < 128 ? 0 : len <= 255 ? 129 : len <= 65535 ? 130 : len <= 16777215 ? 131 : 132;
  if (needed !== first) return null;
  return [len, pos + 1 + n];
}
function derUint(data, pos, end) {
  if (pos >= end || data[pos] !== 2) return null;
  const len = derLength(data.subarray(0, end), pos + 1);
  if (len === null) return null;
  const [n, start] = len;
  if (start + n > end) return null;
  const bytes = data.subarray(start, start + n);
  if (bytes.length === 0) return null;
  let value;
  if (bytes.length === 1 && bytes[0] === 0) value = bytes;
  else if (bytes[0] === 0) {
    if (bytes[1] < 128) return null;
    value = bytes.subarray(1);
  } else if (bytes[0] >= 128) return null;
  else value = bytes;
  return [value, start + n];
}
function parseDerSignature(data) {
  if (data[0] !== 48) return null;
  const len = derLength(data, 1);
  if (len === null) return null;
  const [n, start] = len;
  if (start + n !== data.length) return null;
  const r = derUint(data, start, data.length);
  if (r === null) return null;
  const s = derUint(data, r[1], data.length);
  if (s === null || s[1] !== data.length) return null;
  if (r[0].length > 32 || s[0].length > 32) return null;
  const rv = bytesToBig(r[0]);
  const sv = bytesToBig(s[0]);
  if (rv === 0n || rv >= N2 || sv === 0n || sv >= N2) return null;
  return [rv, sv];
}
function verifyEcdsa(signature, message, publicKey) {
  const rs = parseDerSignature(signature);
  if (rs === null) return false;
  const [r, s] = rs;
  const z = bytesToBig(sha256(message)) % N2;
  const w = invert2(s, N2);
  const u1 = z * w % N2;
  const u2 = r * w % N2;
  const point = toAffine(add2(multiply(G2, u1), multiply([publicKey.x, publicKey.y, 1n], u2)));
  if (point === null) return false;
  return point.x % N2 === r;
}

// src/protobuf.ts
var ProtobufError = class extends Error {
};
var RECURSION_LIMIT = 100;
var WIRE_VARINT = 0;
var WIRE_64 = 1;
var WIRE_LEN = 2;
var WIRE_START_GROUP = 3;
var WIRE_END_GROUP = 4;
var WIRE_32 = 5;
var MASK64 = (1n << 64n) - 1n;
var Reader = class {
  constructor(buf, start, end) {
    this.buf = buf;
    this.end = end;
    this.pos = start;
  }
  buf;
  end;
  pos;
  get remaining() {
    return this.end - this.pos;
  }
  /** prost's decode_varint: at most 10 bytes, the tenth at most 0x01. */
  varint() {
    let value = 0n;
    for (let count = 0; count < 10; count++) {
      if (this.pos >= this.end) throw new ProtobufError("invalid varint");
      const byte = this.buf[this.pos++];
      value |= BigInt(byte & 127) << BigInt(7 * count);
      if (byte < 128) {
        if (count === 9 && byte >= 2) throw new ProtobufError("invalid varint");
        return value & MASK64;
      }
    }
    throw new ProtobufError("invalid varint");
  }
  /** A length prefix and the bounds of the bytes it delimits. */
  delimited() {
    const len = this.varint();
    if (len > BigInt(this.remaining)) throw new ProtobufError("buffer underflow");
    const start = this.pos;
    this.pos += Number(len);
    return [start, this.pos];
  }
  /** prost's decode_key: a varint of at most 32 bits, wire type 0-5, field number > 0. */
  key() {
    const key = this.varint();
    if (key > 0xffffffffn) throw new ProtobufError("invalid key value");
    const wireType = Number(key & 7n);
    if (wireType > 5) throw new ProtobufError("invalid wire type value");
    const tag = Number(key >> 3n);
    if (tag < 1) throw new ProtobufError("invalid tag value: 0");
    return [tag, wireType];
  }
  skip(n) {
    if (n > this.remaining) throw new ProtobufError("buffer underflow");
    this.pos += n;
  }
};
function skipField(r, wireType, tag, ctx) {
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
      for (; ; ) {
        const [innerTag, innerWire] = r.key();
        if (innerWire === WIRE_END_GROUP) {
          if (innerTag !== tag) throw new ProtobufError("unexpected end group tag");
          return;
        }
        skipField(r, innerWire, innerTag, ctx - 1);
      }
    default:
      throw new ProtobufError("unexpected end group tag");
  }
}
function expectWire(actual, expected) {
  if (actual !== expected) throw new ProtobufError(`invalid wire type: expected ${expected}, got ${actual}`);
}
function scalarFromVarint(type, v) {
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
function readScalar(r, type, wireType) {
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
function defaultMessage(schema2) {
  const msg = {};
  for (const spec of schema2.fields.values()) {
    if (spec.oneof !== void 0) continue;
    if (spec.repeated) msg[spec.name] = [];
    else if (spec.required) msg[spec.name] = defaultValue(spec);
  }
  return msg;
}
function defaultValue(spec) {
  switch (spec.type) {
    case "message":
      return defaultMessage(spec.message());
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
function mergeNested(r, wireType, schema2, target, ctx) {
  expectWire(wireType, WIRE_LEN);
  if (ctx === 0) throw new ProtobufError("recursion limit reached");
  const [start, end] = r.delimited();
  mergeFields(new Reader(r.buf, start, end), schema2, target, ctx - 1);
}
function mergeFields(r, schema2, msg, ctx) {
  while (r.remaining > 0) {
    const [tag, wireType] = r.key();
    const spec = schema2.fields.get(tag);
    if (spec === void 0) {
      skipField(r, wireType, tag, ctx);
      continue;
    }
    if (spec.oneof !== void 0) {
      const current = msg[spec.oneof];
      if (spec.type === "message") {
        const sub2 = spec.message();
        let target;
        if (current !== void 0 && current.field === spec.name) {
          target = current.value;
        } else {
          target = defaultMessage(sub2);
        }
        mergeNested(r, wireType, sub2, target, ctx);
        msg[spec.oneof] = { field: spec.name, value: target };
      } else {
        msg[spec.oneof] = { field: spec.name, value: readScalar(r, spec.type, wireType) };
      }
      continue;
    }
    if (spec.type === "message") {
      const sub2 = spec.message();
      if (spec.repeated) {
        const target = defaultMessage(sub2);
        mergeNested(r, wireType, sub2, target, ctx);
        msg[spec.name].push(target);
      } else {
        let target = msg[spec.name];
        if (target === void 0) target = defaultMessage(sub2);
        mergeNested(r, wireType, sub2, target, ctx);
        msg[spec.name] = target;
      }
      continue;
    }
    if (spec.repeated) {
      const list = msg[spec.name];
      if (wireType === WIRE_LEN && spec.type !== "bytes" && spec.type !== "string") {
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
function decodeMessage(data, schema2) {
  const msg = defaultMessage(schema2);
  mergeFields(new Reader(data, 0, data.length), schema2, msg, RECURSION_LIMIT);
  return msg;
}
function schema(name, fields) {
  return Object.freeze({ name, fields: new Map(fields) });
}

// src/token.ts
var TOKEN_FORMAT = "engram.share/v1";
var MAX_TOKEN_CHARS = 16 * 1024;
var KIND2 = /^[a-z][a-z0-9_.]{0,63}$/;
var AUDIENCE = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;
var MAX_ATTENUATION_EXPIRY = 999999999999n;
var I64_MIN = -(1n << 63n);
var I64_MAX = (1n << 63n) - 1n;
var TokenError = class extends VerificationError {
  static defaultCheck = "token";
};
var URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
var URL_VALUES = new Map([...URL_ALPHABET].map((c, i) => [c, i]));
function decodeBase64Url(text) {
  const n = text.length;
  const rem = n % 8;
  if (rem === 1 || rem === 5) return null;
  const lastStart = rem === 0 ? Math.max(0, n - 8) : n - rem;
  const morsels = [];
  for (let i = 0; i < lastStart; i++) {
    const v = URL_VALUES.get(text[i]);
    if (v === void 0) return null;
    morsels.push(v);
  }
  let padding = 0;
  for (let i = lastStart; i < n; i++) {
    const c = text[i];
    if (c === "=") {
      if ((i - lastStart) % 4 < 2) return null;
      padding++;
      continue;
    }
    if (padding > 0) return null;
    const v = URL_VALUES.get(c);
    if (v === void 0) return null;
    morsels.push(v);
  }
  const out = new Uint8Array(Math.floor(morsels.length * 6 / 8));
  let acc = 0;
  let bits = 0;
  let at = 0;
  for (const m of morsels) {
    acc = (acc << 6 | m) & 65535;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = acc >> bits & 255;
    }
  }
  if (bits > 0 && (acc & (1 << bits) - 1) !== 0) return null;
  return out;
}
var f = (name, type, opts = {}) => ({ name, type, ...opts });
var S = {};
S["PublicKey"] = schema("PublicKey", [
  [1, f("algorithm", "enum", { required: true })],
  [2, f("key", "bytes", { required: true })]
]);
S["ExternalSignature"] = schema("ExternalSignature", [
  [1, f("signature", "bytes", { required: true })],
  [2, f("publicKey", "message", { message: () => S["PublicKey"], required: true })]
]);
S["SignedBlock"] = schema("SignedBlock", [
  [1, f("block", "bytes", { required: true })],
  [2, f("nextKey", "message", { message: () => S["PublicKey"], required: true })],
  [3, f("signature", "bytes", { required: true })],
  [4, f("externalSignature", "message", { message: () => S["ExternalSignature"] })],
  [5, f("version", "uint32")]
]);
S["Proof"] = schema("Proof", [
  [1, f("nextSecret", "bytes", { oneof: "content" })],
  [2, f("finalSignature", "bytes", { oneof: "content" })]
]);
S["Biscuit"] = schema("Biscuit", [
  [1, f("rootKeyId", "uint32")],
  [2, f("authority", "message", { message: () => S["SignedBlock"], required: true })],
  [3, f("blocks", "message", { message: () => S["SignedBlock"], repeated: true })],
  [4, f("proof", "message", { message: () => S["Proof"], required: true })]
]);
S["Scope"] = schema("Scope", [
  [1, f("scopeType", "enum", { oneof: "content" })],
  [2, f("publicKey", "int64", { oneof: "content" })]
]);
S["Empty"] = schema("Empty", []);
S["TermSet"] = schema("TermSet", [[1, f("set", "message", { message: () => S["TermV2"], repeated: true })]]);
S["Array"] = schema("Array", [[1, f("array", "message", { message: () => S["TermV2"], repeated: true })]]);
S["MapKey"] = schema("MapKey", [
  [1, f("integer", "int64", { oneof: "content" })],
  [2, f("string", "uint64", { oneof: "content" })]
]);
S["MapEntry"] = schema("MapEntry", [
  [1, f("key", "message", { message: () => S["MapKey"], required: true })],
  [2, f("value", "message", { message: () => S["TermV2"], required: true })]
]);
S["Map"] = schema("Map", [[1, f("entries", "message", { message: () => S["MapEntry"], repeated: true })]]);
S["TermV2"] = schema("TermV2", [
  [1, f("variable", "uint32", { oneof: "content" })],
  [2, f("integer", "int64", { oneof: "content" })],
  [3, f("string", "uint64", { oneof: "content" })],
  [4, f("date", "uint64", { oneof: "content" })],
  [5, f("bytes", "bytes", { oneof: "content" })],
  [6, f("bool", "bool", { oneof: "content" })],
  [7, f("set", "message", { message: () => S["TermSet"], oneof: "content" })],
  [8, f("null", "message", { message: () => S["Empty"], oneof: "content" })],
  [9, f("array", "message", { message: () => S["Array"], oneof: "content" })],
  [10, f("map", "message", { message: () => S["Map"], oneof: "content" })]
]);
S["PredicateV2"] = schema("PredicateV2", [
  [1, f("name", "uint64", { required: true })],
  [2, f("terms", "message", { message: () => S["TermV2"], repeated: true })]
]);
S["OpUnary"] = schema("OpUnary", [
  [1, f("kind", "enum", { required: true })],
  [2, f("ffiName", "uint64")]
]);
S["OpBinary"] = schema("OpBinary", [
  [1, f("kind", "enum", { required: true })],
  [2, f("ffiName", "uint64")]
]);
S["OpClosure"] = schema("OpClosure", [
  [1, f("params", "uint32", { repeated: true })],
  [2, f("ops", "message", { message: () => S["Op"], repeated: true })]
]);
S["Op"] = schema("Op", [
  [1, f("value", "message", { message: () => S["TermV2"], oneof: "content" })],
  [2, f("unary", "message", { message: () => S["OpUnary"], oneof: "content" })],
  [3, f("binary", "message", { message: () => S["OpBinary"], oneof: "content" })],
  [4, f("closure", "message", { message: () => S["OpClosure"], oneof: "content" })]
]);
S["ExpressionV2"] = schema("ExpressionV2", [
  [1, f("ops", "message", { message: () => S["Op"], repeated: true })]
]);
S["RuleV2"] = schema("RuleV2", [
  [1, f("head", "message", { message: () => S["PredicateV2"], required: true })],
  [2, f("body", "message", { message: () => S["PredicateV2"], repeated: true })],
  [3, f("expressions", "message", { message: () => S["ExpressionV2"], repeated: true })],
  [4, f("scope", "message", { message: () => S["Scope"], repeated: true })]
]);
S["CheckV2"] = schema("CheckV2", [
  [1, f("queries", "message", { message: () => S["RuleV2"], repeated: true })],
  [2, f("kind", "enum")]
]);
S["FactV2"] = schema("FactV2", [
  [1, f("predicate", "message", { message: () => S["PredicateV2"], required: true })]
]);
S["Block"] = schema("Block", [
  [1, f("symbols", "string", { repeated: true })],
  [2, f("context", "string")],
  [3, f("version", "uint32")],
  [4, f("facts", "message", { message: () => S["FactV2"], repeated: true })],
  [5, f("rules", "message", { message: () => S["RuleV2"], repeated: true })],
  [6, f("checks", "message", { message: () => S["CheckV2"], repeated: true })],
  [7, f("scope", "message", { message: () => S["Scope"], repeated: true })],
  [8, f("publicKeys", "message", { message: () => S["PublicKey"], repeated: true })]
]);
var msgs = (m, name) => m[name] ?? [];
var sub = (m, name) => m[name];
var oneof = (m) => m["content"];
var ALG_ED255192 = 0;
var ALG_SECP256R1 = 1;
function parseKey(proto) {
  const alg = proto["algorithm"];
  const key = proto["key"];
  if (alg === ALG_ED255192) return isDalekPoint(key) ? { alg, bytes: key } : null;
  if (alg === ALG_SECP256R1) {
    const point = parsePublicKey(key);
    return point === null ? null : { alg, point };
  }
  return null;
}
function keyBytes(k) {
  return k.alg === ALG_ED255192 ? k.bytes : compressPublicKey(k.point);
}
function keysEqual(a, b) {
  if (a.alg === ALG_ED255192) return b.alg === ALG_ED255192 && bytesEqual(a.bytes, b.bytes);
  return b.alg === ALG_SECP256R1 && pointsEqual(a.point, b.point);
}
function verifyWith(k, signature, message) {
  return k.alg === ALG_ED255192 ? verifyDalekStrict(signature, message, k.bytes) : verifyEcdsa(signature, message, k.point);
}
function keyOfSecret(alg, secret) {
  if (secret.length !== 32) return null;
  if (alg === ALG_ED255192) return { alg, bytes: publicKeyFromSeed(secret) };
  const point = publicKeyFromSecret(secret);
  return point === null ? null : { alg: ALG_SECP256R1, point };
}
var le32 = (n) => {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n >>> 0, true);
  return out;
};
var TAG = (s) => utf8(s);
function blockPayload(b, previous) {
  const alg = le32(b.nextKey.alg);
  const next = keyBytes(b.nextKey);
  if (b.version === 0) {
    return concatBytes(b.data, b.external?.signature ?? new Uint8Array(0), alg, next);
  }
  const parts = [TAG("\0BLOCK\0\0VERSION\0"), le32(b.version), TAG("\0PAYLOAD\0"), b.data];
  parts.push(TAG("\0ALGORITHM\0"), alg, TAG("\0NEXTKEY\0"), next);
  if (previous !== null) {
    parts.push(TAG("\0PREVSIG\0"), previous);
    if (b.external !== null) parts.push(TAG("\0EXTERNALSIG\0"), b.external.signature);
  }
  return concatBytes(...parts);
}
function externalPayload(b, previous) {
  return concatBytes(TAG("\0EXTERNAL\0\0VERSION\0"), le32(b.version), TAG("\0PAYLOAD\0"), b.data, TAG("\0PREVSIG\0"), previous);
}
var DEFAULT_SYMBOLS = [
  "read",
  "write",
  "resource",
  "operation",
  "right",
  "time",
  "role",
  "owner",
  "tenant",
  "namespace",
  "user",
  "team",
  "service",
  "admin",
  "email",
  "group",
  "member",
  "ip_address",
  "client",
  "client_ip",
  "domain",
  "path",
  "version",
  "cluster",
  "node",
  "hostname",
  "nonce",
  "query"
];
var DEFAULT_SET = new Set(DEFAULT_SYMBOLS);
var OFFSET = 1024n;
var Symbols = class {
  constructor(custom, keys) {
    this.custom = custom;
    this.keys = keys;
  }
  custom;
  keys;
  get(index) {
    if (index < OFFSET) return index < BigInt(DEFAULT_SYMBOLS.length) ? DEFAULT_SYMBOLS[Number(index)] : void 0;
    const i = index - OFFSET;
    return i < BigInt(this.custom.length) ? this.custom[Number(i)] : void 0;
  }
};
var LoadError = class extends Error {
};
function fail(message) {
  throw new LoadError(message);
}
function decodeBlock(data) {
  try {
    return decodeMessage(data, S["Block"]);
  } catch (e) {
    if (e instanceof ProtobufError) fail(`block: ${e.message}`);
    throw e;
  }
}
function load(token) {
  const raw = decodeBase64Url(token);
  if (raw === null) fail("not base64url");
  let wrapper;
  try {
    wrapper = decodeMessage(raw, S["Biscuit"]);
  } catch (e) {
    if (e instanceof ProtobufError) fail(`token: ${e.message}`);
    throw e;
  }
  const signedOf = (m, authority2) => {
    const nextKey = parseKey(sub(m, "nextKey")) ?? fail("bad next key");
    const version = m["version"];
    let external = null;
    const ext = m["externalSignature"];
    if (ext !== void 0) {
      if (authority2) fail("the authority block must not contain an external signature");
      if (version !== 1) fail("unsupported third party block version");
      const key = parseKey(sub(ext, "publicKey")) ?? fail("bad external key");
      external = { key, signature: ext["signature"] };
    }
    return { data: m["block"], nextKey, signature: m["signature"], external, version: version ?? 0 };
  };
  const signed = [signedOf(sub(wrapper, "authority"), true), ...msgs(wrapper, "blocks").map((b) => signedOf(b, false))];
  const last = signed[signed.length - 1];
  const proof = oneof(sub(wrapper, "proof")) ?? fail("could not find proof");
  const proofValue = proof.value;
  let secretKey = null;
  if (proof.field === "nextSecret") secretKey = keyOfSecret(last.nextKey.alg, proofValue) ?? fail("bad proof secret");
  for (const b of signed) if (b.version !== 0 && b.version !== 1) fail(`unsupported block version ${b.version}`);
  for (let i = 1; i < signed.length; i++) {
    const b = signed[i];
    const prev = signed[i - 1];
    if (!verifyWith(prev.nextKey, b.signature, blockPayload(b, prev.signature))) fail(`block ${i} signature`);
    if (b.external !== null && !verifyWith(b.external.key, b.external.signature, externalPayload(b, prev.signature))) {
      fail(`block ${i} external signature`);
    }
  }
  if (secretKey !== null) {
    if (!keysEqual(secretKey, last.nextKey)) fail("the last public key does not match the private key");
  } else {
    const seal = concatBytes(last.data, le32(last.nextKey.alg), keyBytes(last.nextKey), last.signature);
    if (!verifyWith(last.nextKey, proofValue, seal)) fail("seal signature");
  }
  const custom = [];
  const keys = [];
  const decoded = signed.map((b) => decodeBlock(b.data));
  decoded.forEach((block, i) => {
    if (signed[i].external !== null) return;
    const symbols = block["symbols"];
    if (symbols.some((s) => DEFAULT_SET.has(s))) fail("symbol table overlap (default symbols)");
    const seen = new Set(custom);
    if (symbols.some((s) => seen.has(s))) fail("symbol table overlap");
    custom.push(...symbols);
    for (const pk of msgs(block, "publicKeys")) {
      const key = parseKey(pk) ?? fail("bad public key in a block");
      if (keys.some((k) => keysEqual(k, key))) fail("public key table overlap");
      keys.push(key);
    }
  });
  const tokenSymbols = new Symbols(custom, keys);
  const blocks = decoded.map((block, i) => {
    const s = signed[i];
    if (s.external === null) return { signed: s, block, symbols: tokenSymbols };
    const own = [];
    for (const pk of msgs(block, "publicKeys")) {
      const key = parseKey(pk);
      if (key !== null) own.push(key);
    }
    return { signed: s, block, symbols: new Symbols(block["symbols"], own) };
  });
  const authority = signed[0];
  const verifyRoot = (rootKey) => rootKey.length === 32 && isDalekPoint(rootKey) && verifyWith({ alg: ALG_ED255192, bytes: rootKey }, authority.signature, blockPayload(authority, null));
  return { blocks, verifyRoot };
}
var BIN_LESS_OR_EQUAL = 2;
var BIN_EQUAL = 4;
var BIN_CONTAINS = 5;
var BIN_HETEROGENEOUS_EQUAL = 21;
var NotTemplate = class extends Error {
};
function termOf(term) {
  return term === void 0 ? null : oneof(term) ?? null;
}
function matchCheck(check, symbols, attenuation) {
  const kindField = check["kind"];
  if (kindField !== void 0 && kindField !== 0) throw new NotTemplate();
  const queries = msgs(check, "queries");
  if (queries.length !== 1) throw new NotTemplate();
  const q = queries[0];
  const head = sub(q, "head");
  const body = msgs(q, "body");
  const exprs = msgs(q, "expressions");
  if (msgs(head, "terms").length !== 0 || body.length !== 1 || exprs.length !== 1 || msgs(q, "scope").length !== 0) {
    throw new NotTemplate();
  }
  const pred = body[0];
  const predTerms = msgs(pred, "terms");
  if (predTerms.length !== 1) throw new NotTemplate();
  const bodyVar = termOf(predTerms[0]);
  const ops = msgs(exprs[0], "ops");
  if (bodyVar?.field !== "variable" || ops.length !== 3) throw new NotTemplate();
  const op = (i) => oneof(ops[i]) ?? { field: "", value: 0 };
  const [o0, o1, o2] = [op(0), op(1), op(2)];
  if (o2.field !== "binary" || o2.value["ffiName"] !== void 0) throw new NotTemplate();
  const binary = o2.value["kind"];
  if (o0.field !== "value" || o1.field !== "value") throw new NotTemplate();
  const t0 = termOf(o0.value);
  const t1 = termOf(o1.value);
  const name = (index) => {
    const s = symbols.get(index);
    if (s === void 0) throw new NotTemplate();
    return s;
  };
  const predName = name(pred["name"]);
  const varName = name(BigInt(bodyVar.value));
  const sameVar = (t) => t?.field === "variable" && name(BigInt(t.value)) === varName;
  let template;
  if (binary === BIN_CONTAINS && t0?.field === "set" && sameVar(t1)) {
    const values = /* @__PURE__ */ new Set();
    const elements = msgs(t0.value, "set");
    if (attenuation && elements.length === 0) throw new NotTemplate();
    for (const e of elements) {
      const t = termOf(e);
      if (t?.field !== "string") throw new NotTemplate();
      const s = name(t.value);
      if (attenuation && !KIND2.test(s)) throw new NotTemplate();
      values.add(s);
    }
    if (predName !== "kind" || attenuation && varName !== "k") throw new NotTemplate();
    template = { kind: "kinds", values };
  } else if (binary === BIN_LESS_OR_EQUAL && sameVar(t0) && t1?.field === "integer") {
    const expires = t1.value;
    if (predName !== "time" || attenuation && (varName !== "t" || expires < 0n || expires > MAX_ATTENUATION_EXPIRY)) {
      throw new NotTemplate();
    }
    template = { kind: "time", expires };
  } else if (!attenuation && (binary === BIN_EQUAL || binary === BIN_HETEROGENEOUS_EQUAL) && sameVar(t0) && t1?.field === "string") {
    if (predName !== "audience") throw new NotTemplate();
    template = { kind: "audience", value: name(t1.value) };
  } else {
    throw new NotTemplate();
  }
  return template;
}
var V3_1_BINARY = /* @__PURE__ */ new Set([17, 18, 19, 20]);
var V3_3_BINARY = /* @__PURE__ */ new Set([21, 22, 23, 24, 25, 26, 28]);
var MAX_BINARY = 29;
var UNARY_FFI = 4;
var BINARY_FFI = 28;
var Unreadable = class extends Error {
};
function unreadable(message) {
  throw new Unreadable(message);
}
function convertTerm(term) {
  const t = oneof(term) ?? unreadable("empty term");
  if (t.field === "set") {
    let kind = null;
    for (const e of msgs(t.value, "set")) {
      const c = oneof(e) ?? unreadable("empty term");
      if (c.field === "variable" || c.field === "set") unreadable("a set holds a variable or a set");
      if (kind !== null && kind !== c.field) unreadable("set elements of two types");
      kind = c.field;
      convertTerm(e);
    }
  } else if (t.field === "array") {
    for (const e of msgs(t.value, "array")) convertTerm(e);
  } else if (t.field === "map") {
    for (const entry of msgs(t.value, "entries")) {
      if (oneof(sub(entry, "key")) === void 0) unreadable("empty map key");
      convertTerm(sub(entry, "value"));
    }
  }
}
function convertOp(op) {
  const o = oneof(op) ?? unreadable("empty op");
  const m = o.value;
  if (o.field === "value") convertTerm(m);
  else if (o.field === "closure") for (const inner of msgs(m, "ops")) convertOp(inner);
  else {
    const kind = m["kind"];
    const [max, ffi] = o.field === "unary" ? [UNARY_FFI, UNARY_FFI] : [MAX_BINARY, BINARY_FFI];
    if (kind < 0 || kind > max) unreadable(`${o.field} operation ${kind}`);
    if (kind === ffi !== (m["ffiName"] !== void 0)) unreadable("ffi name");
  }
}
function convertScope(scope) {
  const c = oneof(scope) ?? unreadable("empty scope");
  if (c.field === "scopeType" && c.value !== 0 && c.value !== 1) unreadable(`scope type ${String(c.value)}`);
}
function convertPredicate(p) {
  for (const t of msgs(p, "terms")) convertTerm(t);
}
function convertRule(rule, version) {
  msgs(rule, "body").forEach(convertPredicate);
  for (const e of msgs(rule, "expressions")) for (const op of msgs(e, "ops")) convertOp(op);
  if (version < 4 && msgs(rule, "scope").length > 0) unreadable("scopes need datalog v3.1");
  msgs(rule, "scope").forEach(convertScope);
  convertPredicate(sub(rule, "head"));
}
function isV33Term(term) {
  const t = oneof(term);
  if (t?.field === "null") return true;
  return t?.field === "set" && msgs(t.value, "set").some((e) => oneof(e)?.field === "null");
}
function opsOf(rule) {
  return msgs(rule, "expressions").flatMap((e) => msgs(e, "ops"));
}
function isV33Op(op) {
  const o = oneof(op);
  const m = o.value;
  if (o.field === "value") return isV33Term(m);
  if (o.field === "closure") return true;
  if (o.field === "unary") return m["kind"] === 3 || m["kind"] === UNARY_FFI;
  return V3_3_BINARY.has(m["kind"]);
}
function conversionError(b) {
  const block = b.block;
  const version = block["version"] ?? 0;
  try {
    if (version < 3 || version > 6) unreadable(`block version ${version}`);
    for (const fact of msgs(block, "facts")) convertPredicate(sub(fact, "predicate"));
    for (const rule of msgs(block, "rules")) convertRule(rule, version);
    const checks = msgs(block, "checks");
    for (const c of checks) {
      const kind = c["kind"];
      if (version < 4 && kind !== void 0) unreadable("check kinds need datalog v3.1");
      if (version < 6 && kind === 2) unreadable("reject if needs datalog v3.3");
    }
    if (version < 5 && b.signed.external !== null) unreadable("third-party blocks need datalog v3.2");
    for (const c of checks) {
      for (const q of msgs(c, "queries")) convertRule(q, version);
      const kind = c["kind"];
      if (kind !== void 0 && (kind < 0 || kind > 2)) unreadable("check kind");
    }
    msgs(block, "scope").forEach(convertScope);
    const own = [];
    for (const pk of msgs(block, "publicKeys")) {
      const key = parseKey(pk) ?? unreadable("public key");
      if (own.some((k) => keysEqual(k, key))) unreadable("a public key twice");
      own.push(key);
    }
    if (block["symbols"].some((s) => DEFAULT_SET.has(s))) unreadable("symbol table overlap");
    const rules = msgs(block, "rules");
    const queries = checks.flatMap((c) => msgs(c, "queries"));
    const scopes = msgs(block, "scope").length > 0 || [...rules, ...queries].some((r) => msgs(r, "scope").length > 0);
    const checkAll = checks.some((c) => c["kind"] === 1);
    const v31 = [...rules, ...queries].some(
      (r) => opsOf(r).some((o) => oneof(o)?.field === "binary" && V3_1_BINARY.has((oneof(o)?.value)["kind"]))
    );
    const v33 = checks.some((c) => c["kind"] === 2) || rules.some(
      (r) => msgs(sub(r, "head"), "terms").some(isV33Term) || msgs(r, "body").some((p) => msgs(p, "terms").some(isV33Term)) || opsOf(r).some(isV33Op)
    ) || queries.some((q) => msgs(q, "body").some((p) => msgs(p, "terms").some(isV33Term)) || opsOf(q).some(isV33Op)) || msgs(block, "facts").some((fact) => msgs(sub(fact, "predicate"), "terms").some(isV33Term));
    if (version < 4 && (scopes || v31 || checkAll)) unreadable("datalog v3.1 features");
    if (version >= 4 && version < 6 && v33) unreadable("datalog v3.3 features");
  } catch (e) {
    if (e instanceof Unreadable) return e.message;
    throw e;
  }
  return null;
}
function translatable(b) {
  const s = b.symbols;
  const known = (i) => s.get(BigInt(i)) !== void 0;
  const term = (t) => {
    const c = oneof(t);
    switch (c.field) {
      case "variable":
      case "string":
        return known(c.value);
      case "set":
        return msgs(c.value, "set").every(term);
      case "array":
        return msgs(c.value, "array").every(term);
      case "map":
        return msgs(c.value, "entries").every((e) => {
          const k = oneof(sub(e, "key"));
          return (k.field !== "string" || known(k.value)) && term(sub(e, "value"));
        });
      default:
        return true;
    }
  };
  const op = (o) => {
    const c = oneof(o);
    const m = c.value;
    if (c.field === "value") return term(m);
    if (c.field === "closure") return m["params"].every(known) && msgs(m, "ops").every(op);
    return m["ffiName"] === void 0 || known(m["ffiName"]);
  };
  const scope = (sc) => {
    const c = oneof(sc);
    return c.field !== "publicKey" || BigInt.asUintN(64, c.value) < BigInt(s.keys.length);
  };
  const predicate = (p) => known(p["name"]) && msgs(p, "terms").every(term);
  const rule = (r) => predicate(sub(r, "head")) && msgs(r, "body").every(predicate) && opsOf(r).every(op) && msgs(r, "scope").every(scope);
  const vars = (p) => msgs(p, "terms").flatMap((t) => oneof(t)?.field === "variable" ? [oneof(t)?.value] : []);
  const safe = (r) => {
    const body = new Set(msgs(r, "body").flatMap(vars));
    return vars(sub(r, "head")).every((v) => body.has(v));
  };
  return msgs(b.block, "scope").every(scope) && msgs(b.block, "facts").every((f2) => predicate(sub(f2, "predicate"))) && msgs(b.block, "rules").every((r) => safe(r) && rule(r)) && msgs(b.block, "checks").every((c) => msgs(c, "queries").every(rule));
}
var AUTHORITY_FACTS = /* @__PURE__ */ new Set(["token_format", "origin", "agent", "right"]);
function attenuations(blocks) {
  const checks = [];
  for (let i = 1; i < blocks.length; i++) {
    const b = blocks[i];
    const notAttenuation = () => {
      throw new TokenError(`block ${i} is not an engram.share/v1 attenuation`, { check: "token.template" });
    };
    if (conversionError(b) !== null) notAttenuation();
    const blockChecks = msgs(b.block, "checks");
    if (msgs(b.block, "facts").length || msgs(b.block, "rules").length || blockChecks.length === 0) notAttenuation();
    for (const c of blockChecks) {
      try {
        checks.push(matchCheck(c, b.symbols, true));
      } catch (e) {
        if (e instanceof NotTemplate) notAttenuation();
        throw e;
      }
    }
  }
  return checks;
}
function interpret(blocks) {
  const checks = attenuations(blocks);
  const a = blocks[0];
  if (conversionError(a) !== null || !blocks.every(translatable)) {
    throw new TokenError("the token cannot be evaluated: the authorizer cannot load its blocks", {
      check: "token.limits"
    });
  }
  const notTemplate = () => {
    throw new TokenError("the token is not an engram.share/v1 token of this agent and log", {
      check: "token.template"
    });
  };
  if (msgs(a.block, "rules").length) notTemplate();
  const facts = [];
  for (const fact of msgs(a.block, "facts")) {
    const pred = sub(fact, "predicate");
    const terms = msgs(pred, "terms");
    const t = termOf(terms[0]);
    if (terms.length !== 1 || t?.field !== "string") notTemplate();
    const name = a.symbols.get(pred["name"]);
    if (!AUTHORITY_FACTS.has(name)) notTemplate();
    facts.push([name, a.symbols.get(t.value)]);
  }
  const authorityChecks = [];
  for (const c of msgs(a.block, "checks")) {
    try {
      authorityChecks.push(matchCheck(c, a.symbols, false));
    } catch (e) {
      if (e instanceof NotTemplate) notTemplate();
      throw e;
    }
  }
  const values = (name) => [...new Set(facts.filter(([n]) => n === name).map(([, v]) => v))].sort(compareCodePoints);
  return {
    formats: values("token_format"),
    origins: values("origin"),
    agents: values("agent"),
    rights: new Set(values("right")),
    checks: [...authorityChecks, ...checks]
  };
}
function checkAudience(audience) {
  if (typeof audience !== "string" || !AUDIENCE.test(audience)) {
    throw new MalformedError("audience must be 1-128 characters of [A-Za-z0-9._:@/-]", { check: "token.audience" });
  }
  return audience;
}
function codePointLength3(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
function parse(token, agentKeys) {
  if (typeof token !== "string" || token.length === 0 || codePointLength3(token) > MAX_TOKEN_CHARS) {
    throw new TokenError(`a token is 1-${MAX_TOKEN_CHARS} characters`, { check: "token.format" });
  }
  let loaded = null;
  try {
    loaded = load(token);
  } catch (e) {
    if (!(e instanceof LoadError)) throw e;
  }
  if (loaded !== null) {
    for (const key of agentKeys) {
      if (key instanceof Uint8Array && loaded.verifyRoot(key)) return { blocks: loaded.blocks, rootKey: key.slice() };
    }
  }
  throw new SignatureError("the token is not signed by a valid key of this agent", { check: "token.signature" });
}
function revocationIds(token, options) {
  const { blocks } = parse(token, options.agentKeys);
  attenuations(blocks);
  return blocks.map((b) => toHex(b.signed.signature));
}
function toI64(at) {
  const value = at === void 0 ? BigInt(Math.floor(Date.now() / 1e3)) : typeof at === "bigint" ? at : Number.isFinite(at) ? BigInt(Math.trunc(at)) : null;
  return value !== null && value >= I64_MIN && value <= I64_MAX ? value : null;
}
function allows(t, kind, audience, at) {
  if (at === null) return false;
  if (!t.rights.has(kind)) return false;
  return t.checks.every(
    (c) => c.kind === "audience" ? c.value === audience : c.kind === "time" ? at <= c.expires : c.values.has(kind)
  );
}
function verifyToken(token, options) {
  const audience = checkAudience(options.audience);
  const { blocks, rootKey } = parse(token, options.agentKeys);
  const t = interpret(blocks);
  if (t.formats.length !== 1 || t.formats[0] !== TOKEN_FORMAT || t.origins.length !== 1 || t.origins[0] !== options.origin || t.agents.length !== 1 || t.agents[0] !== options.agent) {
    throw new TokenError("the token is not an engram.share/v1 token of this agent and log", {
      check: "token.template"
    });
  }
  const ids = blocks.map((b) => toHex(b.signed.signature));
  const revokedSource = options.revokedIds ?? [];
  const revokedList = typeof revokedSource === "function" ? revokedSource() : revokedSource;
  const idSet = new Set(ids);
  const revoked = [...new Set(revokedList)].filter((id) => idSet.has(id)).sort(compareCodePoints);
  if (revoked.length > 0) {
    throw new TokenError(`the token was revoked (${revoked[0].slice(0, 16)}...)`, { check: "token.revoked" });
  }
  const at = toI64(options.at);
  const required = new Set(options.kinds);
  const all = [.../* @__PURE__ */ new Set([...options.kinds, ...options.candidates ?? []])].sort(compareCodePoints);
  const allowed = [];
  for (const kind of all) {
    if (typeof kind !== "string" || !KIND2.test(kind)) {
      if (required.has(kind)) {
        throw new MalformedError(`${JSON.stringify(String(kind).slice(0, 64))} is not a kind`, { check: "token.kinds" });
      }
      continue;
    }
    if (!allows(t, kind, audience, at)) {
      if (!required.has(kind)) continue;
      throw new TokenError(
        `the token does not allow disclosing ${kind} to ${audience} at ${String(options.at ?? at)} (scope, audience or expiry)`,
        { check: "token.scope" }
      );
    }
    allowed.push(kind);
  }
  return Object.freeze({
    agent: options.agent,
    origin: options.origin,
    audience,
    kinds: Object.freeze(allowed),
    revocationIds: Object.freeze(ids),
    rootKey
  });
}

// src/witness.ts
var ALG_COSIGNATURE_V1 = 4;
var ALG_MLDSA44_COSIGNATURE = 6;
var EM_DASH_PREFIX = "— ";
var COSIGNATURE_BYTES = 4 + 8 + 64;
var MAX_TIMESTAMP = (1n << 63n) - 1n;
var MAX_POLICY_BYTES = 64 * 1024;
var MAX_POLICY_ENTRIES = 256;
var MAX_PROOF_LINES = 63;
var MAX_REQUEST_BYTES = MAX_NOTE_BYTES + 8 * 1024;
var DEFAULT_MAX_SKEW_S = 600;
var PY_SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
var PY_SPACES = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
var POLICY_CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/;
var WitnessError = class extends VerificationError {
  static defaultCheck = "witness";
};
function codePointLength4(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
function preview2(text, n) {
  return JSON.stringify([...text].slice(0, n).join(""));
}
function checkWitnessName(name) {
  if (typeof name !== "string" || name.length === 0 || name.includes("+") || PY_SPACE.test(name) || codePointLength4(name) > 255 || !encodesAsUtf8(name)) {
    throw new WitnessError(
      `witness name ${preview2(String(name), 60)} must be 1-255 characters of UTF-8 text without spaces or '+'`,
      { check: "witness.key" }
    );
  }
  return name;
}
function cosignerKeyId(name, publicKey) {
  return sha256(concatBytes(utf8(name), Uint8Array.of(10, ALG_COSIGNATURE_V1), publicKey)).slice(0, 4);
}
function formatVkey(name, publicKey) {
  const blob = base64Encode(concatBytes(Uint8Array.of(ALG_COSIGNATURE_V1), publicKey));
  return `${name}+${toHex(cosignerKeyId(name, publicKey))}+${blob}`;
}
var WitnessKey = class _WitnessKey {
  constructor(name, keyId, publicKey) {
    this.name = name;
    this.keyId = keyId;
    this.publicKey = publicKey;
    Object.freeze(this);
  }
  name;
  keyId;
  publicKey;
  /** Parse `<name>+<hex8>+<base64(0x04 || key)>`; the key id must match (`witness.key`). */
  static parse(vkey) {
    if (typeof vkey !== "string" || codePointLength4(vkey) > 1024) {
      throw new WitnessError("witness key must be a short string", { check: "witness.key" });
    }
    const first = vkey.indexOf("+");
    const second = first < 0 ? -1 : vkey.indexOf("+", first + 1);
    if (second < 0) throw new WitnessError("witness key must be name+keyid+key", { check: "witness.key" });
    const name = checkWitnessName(vkey.slice(0, first));
    const hexId = vkey.slice(first + 1, second);
    if (!/^[0-9a-f]{8}$/.test(hexId)) {
      throw new WitnessError("key id must be 8 lowercase hex digits", { check: "witness.key" });
    }
    let raw;
    try {
      raw = b64decodeStrict(vkey.slice(second + 1), "witness.key");
    } catch (e) {
      if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.key", cause: e });
      throw e;
    }
    if (raw[0] === ALG_MLDSA44_COSIGNATURE) {
      throw new WitnessError("ML-DSA-44 cosigners (type 0x06) are not supported", { check: "witness.key" });
    }
    if (raw.length !== 33 || raw[0] !== ALG_COSIGNATURE_V1) {
      throw new WitnessError("a witness key is an Ed25519 cosignature/v1 key (type 0x04, 32 bytes)", {
        check: "witness.key"
      });
    }
    let publicKey;
    try {
      publicKey = checkPublicKey(raw.slice(1));
    } catch (e) {
      if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.key", cause: e });
      throw e;
    }
    const keyId = Uint8Array.from(hexId.match(/../g), (h) => parseInt(h, 16));
    if (!constantTimeEqual(keyId, cosignerKeyId(name, publicKey))) {
      throw new WitnessError("key id does not match name and public key", { check: "witness.key" });
    }
    return new _WitnessKey(name, keyId, publicKey);
  }
  static fromPublicKey(name, publicKey) {
    return _WitnessKey.parse(formatVkey(checkWitnessName(name), publicKey));
  }
  toString() {
    return formatVkey(this.name, this.publicKey);
  }
};
function cosignatureMessage(checkpointText2, timestamp) {
  const t = BigInt(timestamp);
  if (t < 0n || t > MAX_TIMESTAMP) throw new RangeError("cosignature timestamp is outside [0, 2**63-1]");
  return utf8(`cosignature/v1
time ${t}
${checkpointText2}`);
}
function cosign(checkpointText2, name, seed, timestamp) {
  const t = BigInt(timestamp);
  if (t < 1n) throw new RangeError("a cosignature carries a non-zero timestamp");
  const publicKey = publicKeyFromSeed(seed);
  const sig = signWithSeed(cosignatureMessage(checkpointText2, t), seed);
  const ts = new Uint8Array(8);
  new DataView(ts.buffer).setBigUint64(0, t, false);
  return `${EM_DASH_PREFIX}${name} ${base64Encode(concatBytes(cosignerKeyId(name, publicKey), ts, sig))}
`;
}
function inFuture(ts, now, skew) {
  if (typeof now === "bigint") return ts > now + BigInt(Math.trunc(skew));
  const limit = (now ?? Date.now() / 1e3) + skew;
  if (Number.isNaN(limit) || limit === Infinity) return false;
  if (limit === -Infinity) return true;
  return ts > BigInt(Math.floor(limit));
}
function verifyCosignatures(note, witnesses, options = {}) {
  const parsed = note instanceof SignedNote ? note : SignedNote.parse(note);
  const known = /* @__PURE__ */ new Map();
  for (const w of witnesses) known.set(`${w.name}
${toHex(w.keyId)}`, w);
  const skew = options.maxSkewS ?? DEFAULT_MAX_SKEW_S;
  const out = /* @__PURE__ */ new Map();
  for (const sig of parsed.signatures) {
    const key = known.get(`${sig.name}
${toHex(sig.keyId)}`);
    if (key === void 0) continue;
    if (sig.signature.length !== COSIGNATURE_BYTES - 4) {
      throw new WitnessError(
        `cosignature by ${key.name} is ${sig.signature.length + 4} bytes, not ${COSIGNATURE_BYTES}`,
        { check: "witness.format" }
      );
    }
    const ts = new DataView(sig.signature.buffer, sig.signature.byteOffset, 8).getBigUint64(0, false);
    if (ts > MAX_TIMESTAMP) {
      throw new WitnessError(`cosignature by ${key.name}: timestamp exceeds 2**63-1`, { check: "witness.format" });
    }
    if (ts === 0n) {
      throw new WitnessError(`cosignature by ${key.name} carries a zero timestamp`, { check: "witness.timestamp" });
    }
    if (inFuture(ts, options.now, skew)) {
      throw new WitnessError(`cosignature by ${key.name} is dated ${ts}, in the future`, {
        check: "witness.timestamp"
      });
    }
    if (!verifySignature(sig.signature.subarray(8), cosignatureMessage(parsed.text, ts), key.publicKey)) {
      throw new WitnessError(`cosignature by ${key.name} does not verify`, { check: "witness.signature" });
    }
    const seen = out.get(key);
    if (seen === void 0 || seen.timestamp < ts) out.set(key, Object.freeze({ witness: key.name, timestamp: ts }));
  }
  return out;
}
var WitnessPolicy = class _WitnessPolicy {
  constructor(logs, logUrls, witnesses, groups, quorum) {
    this.logs = logs;
    this.logUrls = logUrls;
    this.witnesses = witnesses;
    this.groups = groups;
    this.quorum = quorum;
    Object.freeze(this);
  }
  logs;
  logUrls;
  witnesses;
  groups;
  quorum;
  /** Parse a policy file strictly (names must be UTF-8; see the module doc). */
  static parse(data) {
    let raw;
    if (typeof data === "string") {
      if (!encodesAsUtf8(data)) throw new WitnessError("policy is not UTF-8", { check: "witness.policy" });
      raw = utf8(data);
    } else if (data instanceof Uint8Array) {
      raw = data;
    } else {
      throw new WitnessError("a policy is text or bytes", { check: "witness.policy" });
    }
    if (raw.length > MAX_POLICY_BYTES) {
      throw new LimitExceededError(`policy exceeds ${MAX_POLICY_BYTES} bytes`, { check: "witness.policy" });
    }
    for (const b of raw) {
      if (POLICY_CONTROL.test(String.fromCharCode(b))) {
        throw new WitnessError("policy holds control characters other than tab and newline", {
          check: "witness.policy"
        });
      }
    }
    const text = decodeUtf8Strict(raw);
    if (text === null) throw new WitnessError("policy is not UTF-8", { check: "witness.policy" });
    const logs = [];
    const logUrls = /* @__PURE__ */ new Map();
    const witnesses = [];
    const groups = /* @__PURE__ */ new Map();
    const names = /* @__PURE__ */ new Set();
    const publicKeys = /* @__PURE__ */ new Set();
    let quorum = null;
    let seenQuorum = false;
    let entries = 0;
    const fail2 = (lineno, msg, cause) => new WitnessError(`policy line ${lineno}: ${msg}`, { check: "witness.policy", cause });
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const lineno = i + 1;
      const fields = lines[i].replace(/\t/g, " ").split(PY_SPACES).filter((x) => x !== "");
      if (fields.length === 0 || fields[0].startsWith("#")) continue;
      entries += 1;
      if (entries > MAX_POLICY_ENTRIES) {
        throw new LimitExceededError(`policy has more than ${MAX_POLICY_ENTRIES} entries`, {
          check: "witness.policy"
        });
      }
      const word = fields[0];
      if (word === "log") {
        if (fields.length !== 2 && fields.length !== 3) throw fail2(lineno, "expected 'log <vkey> [<url>]'");
        let key;
        try {
          key = VerifierKey.parse(fields[1]);
        } catch (e) {
          if (e instanceof MalformedError) throw fail2(lineno, `log key: ${e.message}`, e);
          throw e;
        }
        const pk = toHex(key.publicKey);
        if (publicKeys.has(pk)) throw fail2(lineno, "duplicate public key");
        publicKeys.add(pk);
        logs.push(key);
        if (fields.length === 3) logUrls.set(key.name, fields[2]);
      } else if (word === "witness") {
        if (fields.length !== 3 && fields.length !== 4) throw fail2(lineno, "expected 'witness <name> <vkey> [<url>]'");
        const name = fields[1];
        if (names.has(name) || name === "none") throw fail2(lineno, `name ${preview2(name, 60)} is already defined`);
        let wkey;
        try {
          wkey = WitnessKey.parse(fields[2]);
        } catch (e) {
          if (e instanceof WitnessError) throw fail2(lineno, e.message, e);
          throw e;
        }
        const pk = toHex(wkey.publicKey);
        if (publicKeys.has(pk)) throw fail2(lineno, "duplicate public key");
        publicKeys.add(pk);
        names.add(name);
        witnesses.push(Object.freeze({ name, key: wkey, url: fields.length === 4 ? fields[3] : null }));
      } else if (word === "group") {
        if (fields.length < 4) throw fail2(lineno, "expected 'group <name> <k|all|any> <member>...'");
        const name = fields[1];
        const kText = fields[2];
        const members = fields.slice(3);
        if (names.has(name) || name === "none") throw fail2(lineno, `name ${preview2(name, 60)} is already defined`);
        if (new Set(members).size !== members.length) throw fail2(lineno, "a member is listed twice");
        for (const m of members) {
          if (!names.has(m)) throw fail2(lineno, `member ${preview2(m, 60)} is not defined on an earlier line`);
        }
        const n = members.length;
        let k;
        if (kText === "all") k = n;
        else if (kText === "any") k = 1;
        else {
          try {
            k = Number(parseDecimal(kText, "witness.policy", BigInt(n)));
          } catch (e) {
            if (e instanceof MalformedError) {
              throw fail2(lineno, `threshold ${preview2(kText, 60)} is not a decimal in [1, ${n}]`, e);
            }
            throw e;
          }
          if (k < 1) throw fail2(lineno, `threshold ${preview2(kText, 60)} is not a decimal in [1, ${n}]`);
        }
        names.add(name);
        groups.set(name, Object.freeze({ name, threshold: k, members: Object.freeze(members) }));
      } else if (word === "quorum") {
        if (fields.length !== 2) throw fail2(lineno, "expected 'quorum <name>'");
        if (seenQuorum) throw fail2(lineno, "a policy has exactly one quorum line");
        seenQuorum = true;
        const q = fields[1];
        if (q === "none") quorum = null;
        else if (names.has(q)) quorum = q;
        else throw fail2(lineno, `quorum ${preview2(q, 60)} is not defined on an earlier line`);
      } else {
        throw fail2(lineno, `unknown keyword ${preview2(word, 60)}`);
      }
    }
    if (!seenQuorum) throw new WitnessError("policy has no quorum line", { check: "witness.policy" });
    return new _WitnessPolicy(Object.freeze(logs), logUrls, Object.freeze(witnesses), groups, quorum);
  }
  /** A policy of `k` of the given witness keys (no log restriction). */
  static threshold(keys, k) {
    const parsed = keys.map((w) => w instanceof WitnessKey ? w : WitnessKey.parse(w));
    if (parsed.length === 0) {
      throw new WitnessError("a witness quorum needs at least one witness key", { check: "witness.policy" });
    }
    const lines = parsed.map((w, i) => `witness w${i} ${w.toString()}`);
    lines.push(`group quorum ${k} ` + parsed.map((_, i) => `w${i}`).join(" "));
    lines.push("quorum quorum");
    return _WitnessPolicy.parse(lines.join("\n") + "\n");
  }
  get keys() {
    return this.witnesses.map((w) => w.key);
  }
  /** Whether the witnesses named (policy names) satisfy the quorum. */
  satisfied(cosigned) {
    if (this.quorum === null) return true;
    const done = new Set(cosigned);
    const memo = /* @__PURE__ */ new Map();
    const met = (name) => {
      let value = memo.get(name);
      if (value === void 0) {
        const group = this.groups.get(name);
        value = group === void 0 ? done.has(name) : group.members.filter((m) => met(m)).length >= group.threshold;
        memo.set(name, value);
      }
      return value;
    };
    return met(this.quorum);
  }
  /** Require the policy's quorum of cosignatures on a verified checkpoint; return the policy
   * names of the witnesses that cosigned (sorted). */
  check(cp, options = {}) {
    if (this.logs.length > 0 && !this.logs.some((k) => k.name === cp.origin && cp.signedBy.some((s) => constantTimeEqual(s.publicKey, k.publicKey)))) {
      throw new WitnessError(
        `the witness policy does not list the log ${JSON.stringify(cp.origin)} under the key that signed it`,
        { check: "witness.policy" }
      );
    }
    const verified = verifyCosignatures(cp.note, this.keys, options);
    const byKey = new Map(this.witnesses.map((w) => [w.key, w.name]));
    const cosigned = [...verified.keys()].map((k) => byKey.get(k)).sort(compareCodePoints);
    if (!this.satisfied(cosigned)) {
      const have = cosigned.join(", ") || "no policy witness";
      throw new WitnessError(
        `checkpoint ${cp.origin} size ${cp.size} is cosigned by ${have}: the witness quorum ${JSON.stringify(this.quorum)} is not met`,
        { check: "witness.quorum" }
      );
    }
    return cosigned;
  }
};
function witnessCheck(policy, at) {
  const p = policy instanceof WitnessPolicy ? policy : WitnessPolicy.parse(policy);
  return (cp) => p.check(cp, at === void 0 ? {} : { now: at });
}
function formatAddCheckpoint(oldSize, proof, checkpoint) {
  if (proof.length > MAX_PROOF_LINES) throw new RangeError(`at most ${MAX_PROOF_LINES} consistency proof lines`);
  const head = `old ${BigInt(oldSize)}
` + proof.map((h) => base64Encode(h) + "\n").join("") + "\n";
  return concatBytes(utf8(head), checkpoint);
}
function parseAddCheckpoint(body) {
  if (body.length > MAX_REQUEST_BYTES) {
    throw new LimitExceededError(`request exceeds ${MAX_REQUEST_BYTES} bytes`, { check: "witness.request" });
  }
  let split3 = -1;
  for (let i = 0; i + 1 < body.length; i++) {
    if (body[i] === 10 && body[i + 1] === 10) {
      split3 = i;
      break;
    }
  }
  if (split3 < 0) throw new WitnessError("request has no empty line before the checkpoint", { check: "witness.request" });
  const headBytes = body.subarray(0, split3 + 1);
  if (headBytes.some((b) => b > 127)) throw new WitnessError("request header is not ASCII", { check: "witness.request" });
  const lines = decodeUtf8Strict(headBytes).split("\n").slice(0, -1);
  const first = lines[0];
  if (!first.startsWith("old ")) throw new WitnessError("request must start with 'old <size>'", { check: "witness.request" });
  let old;
  try {
    old = parseDecimal(first.slice(4), "witness.request", MAX_TREE_SIZE);
  } catch (e) {
    if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.request", cause: e });
    throw e;
  }
  if (lines.length - 1 > MAX_PROOF_LINES) {
    throw new WitnessError(`more than ${MAX_PROOF_LINES} consistency proof lines`, { check: "witness.request" });
  }
  const proof = [];
  for (const line of lines.slice(1)) {
    let h;
    try {
      h = b64decodeStrict(line, "witness.request");
    } catch (e) {
      if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.request", cause: e });
      throw e;
    }
    if (h.length !== HASH_SIZE) {
      throw new WitnessError("a consistency proof line is not a 32-byte hash", { check: "witness.request" });
    }
    proof.push(h);
  }
  return Object.freeze({ oldSize: old, proof: Object.freeze(proof), checkpoint: body.slice(split3 + 2) });
}

// src/bundle.ts
var MEDIA_TYPE = "application/vnd.engram.bundle.v2+json";
var HEADS_HEADER = "engram.stream-heads/v2";
var RETIRED_MEDIA_TYPES = /* @__PURE__ */ new Map([
  [
    "application/vnd.engram.bundle.v1+json",
    "bundle v1 is no longer accepted: its stream-head statement does not say which agents it covers, so it cannot prove that an agent has no records; ask for a v2 bundle (engram >= 0.9, `engram bundle create`)"
  ]
]);
var MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
var MAX_ENTRIES = 1e5;
var MAX_STATEMENTS = 32;
var MAX_CONSISTENCY_PROOFS = 8;
var MAX_PROOF_HASHES2 = 64;
var MAX_CONTAINERS = 2 * MAX_ENTRIES + 4096;
var MAX_VALUES = 2e6;
var MAX_TOKEN_CHARS2 = 16384;
var HEX_HASH3 = /^[0-9a-f]{64}$/;
var TOKEN_ID = /^[A-Za-z0-9_-]{1,128}$/;
var REF = /^(?:0|[1-9][0-9]{0,15})\.(?:0|[1-9][0-9]?)$/;
var ClaimError = class extends VerificationError {
  static defaultCheck = "claim";
};
function streamKey(agent, kind) {
  return `${agent}/${kind}`;
}
function compareStreams(a, b) {
  return compareCodePoints(a[0], b[0]) || compareCodePoints(a[1], b[1]);
}
function show(value) {
  return typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
}
function isObject3(value) {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
function get4(obj, name) {
  return Object.hasOwn(obj, name) ? obj[name] : void 0;
}
function has(obj, name) {
  return Object.hasOwn(obj, name);
}
function isInt2(value) {
  return typeof value === "number" && Number.isInteger(value);
}
function codePointLength5(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
function b64(value, what) {
  if (typeof value !== "string") throw new MalformedError(`${what} must be base64`, { check: "format" });
  return b64decodeStrict(value, "format");
}
function hashes2(value, what) {
  if (!Array.isArray(value) || value.length > MAX_PROOF_HASHES2) {
    throw new MalformedError(`${what} is a list of at most ${MAX_PROOF_HASHES2} base64 hashes`, { check: "format" });
  }
  const out = value.map((h) => b64(h, what));
  if (out.some((h) => h.length !== HASH_SIZE)) {
    throw new MalformedError(`${what} holds a hash that is not ${HASH_SIZE} bytes`, { check: "format" });
  }
  return out;
}
function exact(obj, required, optional, what) {
  if (!isObject3(obj)) throw new MalformedError(`${what} must be an object`, { check: "format" });
  const missing = required.filter((k) => !has(obj, k)).sort();
  const extra = Object.keys(obj).filter((k) => !required.includes(k) && !optional.includes(k)).sort();
  if (missing.length || extra.length) {
    throw new MalformedError(`${what}: missing ${JSON.stringify(missing)}, unknown ${JSON.stringify(extra)}`, {
      check: "format"
    });
  }
  return obj;
}
function utf8Text(text) {
  if (hasLoneSurrogate(text)) {
    throw new MalformedError("text is not valid Unicode (lone surrogate)", { check: "format" });
  }
  return utf8(text);
}
function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "list";
  return typeof value === "object" ? "dict" : typeof value;
}
function same(a, b) {
  const t = typeOf(a);
  if (t !== typeOf(b)) return false;
  if (t === "dict") {
    const x = a;
    const y = b;
    const kx = Object.keys(x);
    const ky = Object.keys(y);
    return kx.length === ky.length && kx.every((k) => has(y, k)) && kx.every((k) => same(x[k], y[k]));
  }
  if (t === "list") {
    const x = a;
    const y = b;
    return x.length === y.length && x.every((v, i) => same(v, y[i]));
  }
  return a === b;
}
function matches(body, where) {
  return Object.keys(where).every((k) => has(body, k) && same(body[k], where[k]));
}
function pythonJsonDumps(value, options = {}) {
  const item = options.compact ? "," : ", ";
  const key = options.compact ? ":" : ": ";
  const str = (s) => {
    let out = '"';
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      const ch = s[i];
      if (ch === '"') out += '\\"';
      else if (ch === "\\") out += "\\\\";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "	") out += "\\t";
      else if (ch === "\b") out += "\\b";
      else if (ch === "\f") out += "\\f";
      else if (c >= 32 && c <= 126) out += ch;
      else out += "\\u" + c.toString(16).padStart(4, "0");
    }
    return out + '"';
  };
  const dump = (v) => {
    if (v === null) return "null";
    if (v === true) return "true";
    if (v === false) return "false";
    if (typeof v === "number") return String(v);
    if (typeof v === "string") return str(v);
    if (Array.isArray(v)) return "[" + v.map(dump).join(item) + "]";
    const o = v;
    const keys = Object.keys(o);
    if (options.sortKeys) keys.sort(compareCodePoints);
    return "{" + keys.map((k) => str(k) + key + dump(o[k])).join(item) + "}";
  };
  return dump(value);
}
function describeStatement(statement, value = null) {
  const shown = value === null ? get4(statement, "value") : value;
  if (statement["predicate"] === "mesh_read") {
    return `mesh_read of ${show(statement["author"])}'s ${show(statement["kind"])} ${show(statement["ref"])} by ${show(statement["agent"])} through mesh ${show(statement["mesh"])} = ${pythonJsonDumps(shown)}`;
  }
  const where = get4(statement, "where");
  let text = show(statement["predicate"]);
  const field = get4(statement, "field");
  if (field !== void 0 && field !== null) text += ` ${show(field)}`;
  text += ` of ${show(statement["agent"])}/${show(statement["kind"])}`;
  if (isObject3(where) ? Object.keys(where).length > 0 : Boolean(where)) {
    text += " where " + pythonJsonDumps(where, { sortKeys: true, compact: true });
  }
  return `${text} = ${pythonJsonDumps(shown)}`;
}
function meanQuality(values) {
  if (values.length === 0) throw new RangeError("the mean of no values");
  let sum = 0n;
  for (const v of values) sum += BigInt(v);
  const n = BigInt(values.length);
  const negative = sum < 0n;
  const scaled = (negative ? -sum : sum) * 100n;
  let q = scaled / n;
  const twice = scaled % n * 2n;
  if (twice > n || twice === n && q % 2n === 1n) q += 1n;
  const digits = q.toString().padStart(3, "0");
  return `${negative ? "-" : ""}${digits.slice(0, -2)}.${digits.slice(-2)}`;
}
function evaluate(statement, records) {
  const pred = statement["predicate"];
  const rawWhere = get4(statement, "where");
  const where = isObject3(rawWhere) ? rawWhere : {};
  const hasWhere = Object.keys(where).length > 0;
  if (pred === "count" && !hasWhere) return records.length;
  if (records.some((r) => r === null)) {
    throw new ClaimError("the claim needs bodies that are erased or undisclosed", { check: "claim.undisclosed" });
  }
  const bodies = records.filter((r) => matches(r, where));
  if (pred === "count") return bodies.length;
  if (pred === "exists") return bodies.length > 0;
  if (pred === "mean") {
    const name = statement["field"];
    const values = bodies.map((b) => get4(b, name));
    const ints = values.filter(isInt2);
    if (values.length === 0 || ints.length !== values.length) {
      throw new ClaimError(`no integer ${JSON.stringify(name)} to average`, { check: "claim.field" });
    }
    return meanQuality(ints);
  }
  throw new MalformedError(`unknown predicate ${show(pred)}`, { check: "format.claim" });
}
function headsText(origin, size, rootB64, heads, agents) {
  const groups = /* @__PURE__ */ new Map();
  for (const a of agents) groups.set(checkAgentId(a), []);
  for (const [a, k, v, i, h] of heads) {
    const group = groups.get(a);
    if (group === void 0) {
      throw new RangeError(`head of ${JSON.stringify(a)}, an agent the statement does not cover`);
    }
    group.push([k, BigInt(v), BigInt(i), h]);
  }
  const lines = [HEADS_HEADER, `origin ${origin}`, `size ${BigInt(size)}`, `root ${rootB64}`];
  for (const a of [...groups.keys()].sort(compareCodePoints)) {
    const group = groups.get(a).sort(
      (x, y) => compareCodePoints(x[0], y[0]) || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0) || (x[2] < y[2] ? -1 : x[2] > y[2] ? 1 : 0) || compareCodePoints(x[3], y[3])
    );
    lines.push(`agent ${a} ${group.length}`);
    for (const [k, v, i, h] of group) lines.push(`head ${a} ${k} ${v} ${i} ${h}`);
  }
  return lines.join("\n") + "\n";
}
function claimStatements(claim) {
  const c = exact(claim, ["statements"], [], "claim");
  const stmts = c["statements"];
  if (!Array.isArray(stmts) || !(stmts.length > 0 && stmts.length <= MAX_STATEMENTS)) {
    throw new MalformedError(`a claim holds 1-${MAX_STATEMENTS} statements`, { check: "format.claim" });
  }
  const out = [];
  for (const raw of stmts) {
    if (isObject3(raw) && get4(raw, "predicate") === "mesh_read") {
      out.push(meshStatement(raw));
      continue;
    }
    const s = exact(raw, ["predicate", "agent", "kind", "value"], ["where", "field"], "statement");
    const pred = s["predicate"];
    if (pred !== "count" && pred !== "mean" && pred !== "exists") {
      throw new MalformedError(`unknown predicate ${show(pred)}`, { check: "format.claim" });
    }
    checkAgentId(s["agent"]);
    checkKind(s["kind"]);
    if (has(s, "where") && (!isObject3(s["where"]) || Object.keys(s["where"]).length > 8)) {
      throw new MalformedError("where is an object of at most 8 members", { check: "format.claim" });
    }
    if (pred === "mean" && typeof get4(s, "field") !== "string") {
      throw new MalformedError("mean needs a field", { check: "format.claim" });
    }
    if (pred !== "mean" && has(s, "field")) {
      throw new MalformedError("only mean takes a field", { check: "format.claim" });
    }
    const where = get4(s, "where");
    if (isObject3(where) && Object.values(where).some((v) => v === null)) {
      throw new MalformedError("where values cannot be null", { check: "format.claim" });
    }
    const value = s["value"];
    const ok = pred === "count" ? isInt2(value) : pred === "exists" ? typeof value === "boolean" : typeof value === "string";
    if (!ok) {
      const expected = { count: "int", exists: "bool", mean: "str" }[pred];
      throw new MalformedError(`a ${pred} value is a ${expected}`, { check: "format.claim" });
    }
    out.push(s);
  }
  return out;
}
function meshStatement(raw) {
  const s = exact(raw, ["predicate", "agent", "author", "mesh", "kind", "ref", "value"], [], "statement");
  checkAgentId(s["agent"]);
  checkAgentId(s["author"]);
  const mesh = s["mesh"];
  if (typeof mesh !== "string" || !MESH_ID.test(mesh)) {
    throw new MalformedError("mesh is a mesh id <creator>/<name>", { check: "format.claim" });
  }
  if (!MEMORY_KINDS.includes(s["kind"])) {
    throw new MalformedError(`a mesh_read names a ${MEMORY_KINDS.join(" or ")} entry`, { check: "format.claim" });
  }
  const ref = s["ref"];
  if (typeof ref !== "string" || !REF.test(ref)) {
    throw new MalformedError("ref is a memory reference <index>.<n>", { check: "format.claim" });
  }
  if (s["value"] !== true) throw new MalformedError("a mesh_read value is true", { check: "format.claim" });
  return s;
}
function stepFormat(data) {
  if (!(data instanceof Uint8Array)) throw new MalformedError("a bundle is bytes", { check: "format" });
  if (data.length > MAX_BUNDLE_BYTES) {
    throw new LimitExceededError(`bundle of ${data.length} bytes exceeds ${MAX_BUNDLE_BYTES}`, {
      check: "format.size"
    });
  }
  const doc = parseStrict(data, { maxBytes: MAX_BUNDLE_BYTES, maxContainers: MAX_CONTAINERS, maxValues: MAX_VALUES });
  const mediaType = isObject3(doc) ? get4(doc, "media_type") : void 0;
  if (typeof mediaType === "string" && RETIRED_MEDIA_TYPES.has(mediaType)) {
    throw new MalformedError(RETIRED_MEDIA_TYPES.get(mediaType), { check: "format.version" });
  }
  const b = exact(
    doc,
    ["media_type", "origin", "checkpoint", "stream_heads", "entries", "claim"],
    ["consistency", "token", "mesh_indexes"],
    "bundle"
  );
  if (b["media_type"] !== MEDIA_TYPE) {
    throw new MalformedError(`unknown media type ${JSON.stringify(show(b["media_type"]).slice(0, 80))}`, {
      check: "format.version"
    });
  }
  const checkpoint = b["checkpoint"];
  const streamHeads = b["stream_heads"];
  if (typeof checkpoint !== "string" || typeof streamHeads !== "string") {
    throw new MalformedError("checkpoint and stream_heads are note texts", { check: "format" });
  }
  const entries = b["entries"];
  if (!Array.isArray(entries) || !(entries.length > 0 && entries.length <= MAX_ENTRIES)) {
    throw new MalformedError(`a bundle holds 1-${MAX_ENTRIES} entries`, { check: "format" });
  }
  const consistency = /* @__PURE__ */ new Map();
  if (has(b, "consistency")) {
    const items = b["consistency"];
    if (!Array.isArray(items) || !(items.length > 0 && items.length <= MAX_CONSISTENCY_PROOFS)) {
      throw new MalformedError(`consistency is a list of 1-${MAX_CONSISTENCY_PROOFS} proofs`, {
        check: "format.consistency"
      });
    }
    for (const raw of items) {
      const c = exact(raw, ["old_size", "proof"], [], "consistency proof");
      const old = c["old_size"];
      if (!isInt2(old) || old < 0 || consistency.has(BigInt(old))) {
        throw new MalformedError("consistency old_size values are distinct non-negative integers", {
          check: "format.consistency"
        });
      }
      consistency.set(BigInt(old), hashes2(c["proof"], "consistency hash"));
    }
  }
  const token = get4(b, "token");
  const tokenOk = typeof token === "string" && token.length > 0 && codePointLength5(token) <= MAX_TOKEN_CHARS2;
  if (has(b, "token") && !tokenOk) {
    throw new MalformedError("token is a non-empty string of at most 16 KiB", { check: "format" });
  }
  const statements = claimStatements(b["claim"]);
  return {
    origin: b["origin"],
    checkpointNote: checkpoint,
    streamHeads,
    entries,
    statements,
    consistency,
    token: typeof token === "string" ? token : null,
    meshIndexes: meshIndexes(b, statements),
    leaves: []
  };
}
function meshIndexes(b, statements) {
  const reads = statements.filter((s) => s["predicate"] === "mesh_read");
  if (reads.length === 0) {
    if (has(b, "mesh_indexes")) {
      throw new MalformedError("mesh_indexes come only with mesh_read statements", { check: "format" });
    }
    return [];
  }
  if (reads.length !== statements.length) {
    throw new MalformedError("a bundle with a mesh_read statement makes mesh_read statements only", {
      check: "format.claim"
    });
  }
  if (!has(b, "mesh_indexes")) {
    throw new MalformedError(
      "a mesh_read statement needs the log's mesh-read index (mesh_indexes): bundles made before it proved memories that were never shared (HOT, replaced, erased) and carried other meshes' and other memories' bodies, so they are refused; ask for a new proof (engram mesh prove)",
      { check: "format.mesh_index" }
    );
  }
  const notes = b["mesh_indexes"];
  if (!Array.isArray(notes) || notes.length !== reads.length || !notes.every((n) => typeof n === "string" && n.length > 0 && codePointLength5(n) <= 64 * 1024)) {
    throw new MalformedError("mesh_indexes is a list of one note text (at most 64 KiB) per mesh_read statement", {
      check: "format.mesh_index"
    });
  }
  return notes;
}
function stepTrusted(bundle, cp, logKey, anchors, prefix) {
  for (const raw of anchors) {
    const anchor = verifyCheckpoint(raw, logKey);
    if (anchor.size >= cp.size) {
      requireExtends(anchor, cp, null, prefix);
      continue;
    }
    if ([...bundle.consistency.keys()].some((old) => old > cp.size)) {
      throw new MalformedError("a consistency proof starts beyond the checkpoint", { check: "format.consistency" });
    }
    if (!bundle.consistency.has(anchor.size) && anchor.origin === cp.origin) {
      const what = prefix === "state" ? "remembered" : "trusted";
      throw new StateError(
        `the bundle carries no consistency proof from the size ${anchor.size} ${what} to ${cp.size}: ask the agent for a bundle built for it (engram bundle create ... --trusted-size ${anchor.size})`,
        { check: `${prefix}.missing` }
      );
    }
    requireExtends(anchor, cp, bundle.consistency.get(anchor.size) ?? null, prefix);
  }
  const sizes = anchors.map((a) => String(verifyCheckpoint(a, logKey).size)).join(", ");
  return `consistent with the ${prefix === "state" ? "remembered" : "trusted"} checkpoint(s) at size ${sizes}`;
}
function stepInclusion(bundle, cp) {
  const seen = /* @__PURE__ */ new Set();
  for (const rawEntry of bundle.entries) {
    const e = exact(rawEntry, ["index", "leaf", "proof"], ["body", "salt", "erased"], "entry");
    const index = e["index"];
    if (!isInt2(index) || seen.has(index)) {
      throw new MalformedError("entry indices are distinct integers", { check: "format" });
    }
    seen.add(index);
    const leaf = Leaf.fromBytes(b64(e["leaf"], "leaf"), { origin: cp.origin });
    if (leaf.index !== index) {
      throw new MalformedError(`entry ${index} holds the leaf of index ${leaf.index}`, { check: "inclusion.index" });
    }
    verifyInclusion({
      leafHash: leaf.hash,
      index: leaf.index,
      size: cp.size,
      proof: hashes2(e["proof"], "proof hash"),
      root: cp.root
    });
    bundle.leaves.push([leaf, e]);
  }
  bundle.leaves.sort((x, y) => x[0].index - y[0].index);
  return `${bundle.leaves.length} leaves proven in the checkpoint's tree`;
}
function stepTimestamps(bundle) {
  let previous = null;
  for (const [leaf] of bundle.leaves) {
    if (previous !== null && leaf.timestampUs <= previous.timestampUs) {
      throw new ProofError(
        `fraud proof: the log signed entry ${leaf.index} with server time ${leaf.timestampUs}, not after entry ${previous.index} (${previous.timestampUs}): timestamps must strictly increase with the index`,
        { check: "timestamps.fraud" }
      );
    }
    previous = leaf;
  }
  return `server timestamps strictly increase over ${bundle.leaves.length} entries`;
}
function headsName(check, text) {
  try {
    return check(text);
  } catch (e) {
    if (!(e instanceof MalformedError)) throw e;
    throw new MalformedError(`bad name in the stream-head statement: ${e.message}`, {
      check: "heads.format",
      cause: e
    });
  }
}
function parseHeads(note, key, cp) {
  const signed = SignedNote.parse(note);
  signed.verify([key]);
  const lines = signed.text.replace(/\n+$/, "").split("\n");
  if (lines[0] !== HEADS_HEADER) {
    throw new MalformedError(
      `stream-head statement ${JSON.stringify(lines[0].slice(0, 40))} is not ${HEADS_HEADER}: older statements do not name the agents they cover`,
      { check: "heads.version" }
    );
  }
  const binding = [`origin ${cp.origin}`, `size ${cp.size}`, `root ${base64Encode(cp.root)}`];
  if (lines.length < 4 || binding.some((b, i) => lines[i + 1] !== b)) {
    throw new ProofError("the stream-head statement is not bound to this checkpoint", { check: "heads.binding" });
  }
  const covered = [];
  const heads = /* @__PURE__ */ new Map();
  let remaining = 0n;
  for (const line of lines.slice(4)) {
    const parts = line.split(" ");
    if (parts[0] === "agent" && parts.length === 3) {
      const agent = headsName(checkAgentId, parts[1]);
      const last = covered[covered.length - 1];
      if (remaining !== 0n || last !== void 0 && compareCodePoints(agent, last) <= 0) {
        throw new MalformedError("agents are listed once, in order, each after all of its counted head lines", {
          check: "heads.format"
        });
      }
      covered.push(agent);
      remaining = parseDecimal(parts[2], "heads.format");
    } else if (parts[0] === "head" && parts.length === 6) {
      if (covered.length === 0 || parts[1] !== covered[covered.length - 1] || remaining === 0n) {
        throw new MalformedError("a head line outside its agent's group", { check: "heads.format" });
      }
      remaining -= 1n;
      const agent = parts[1];
      const kind = headsName(checkKind, parts[2]);
      const version = parseDecimal(parts[3], "heads.format");
      const index = parseDecimal(parts[4], "heads.format");
      const leafHash2 = parts[5];
      const key2 = streamKey(agent, kind);
      if (index >= cp.size || !HEX_HASH3.test(leafHash2) || heads.has(key2)) {
        throw new MalformedError("head index beyond the checkpoint, bad leaf hash, or a stream listed twice", {
          check: "heads.format"
        });
      }
      heads.set(key2, Object.freeze({ agent, kind, version, index, leafHash: leafHash2 }));
    } else {
      throw new MalformedError(`bad line ${JSON.stringify(line.slice(0, 80))}`, { check: "heads.format" });
    }
  }
  if (remaining !== 0n) {
    throw new MalformedError("the last agent has fewer head lines than it counts", { check: "heads.format" });
  }
  return Object.freeze({ covered: new Set(covered), heads });
}
function stepSignatures(bundle) {
  const history = new KeyHistory();
  for (const [leaf] of bundle.leaves) history.checkAndApply(leaf);
  return history;
}
function statementsAgents(bundle) {
  return new Set(bundle.statements.flatMap((s) => statementAgents(s)));
}
function neededStreams(bundle, heads) {
  const needed = /* @__PURE__ */ new Map();
  const add3 = (s) => void needed.set(streamKey(s[0], s[1]), s);
  for (const s of bundle.statements) for (const st of statementStreams(s)) add3(st);
  const claimAgents = statementsAgents(bundle);
  if (bundle.token !== null) {
    if (bundle.statements.some((s) => s["predicate"] === "mesh_read")) {
      throw new MalformedError("a bundle with a share token makes no mesh_read claim", { check: "format.claim" });
    }
    if (claimAgents.size !== 1) {
      throw new MalformedError("a bundle with a share token makes claims about one agent", { check: "format.claim" });
    }
    for (const a of claimAgents) if (heads.heads.has(streamKey(a, "share.revoked"))) add3([a, "share.revoked"]);
  }
  const agents = /* @__PURE__ */ new Set([...claimAgents, POLICY_AGENT]);
  for (const h of heads.heads.values()) if (agents.has(h.agent) && KEY_KINDS.has(h.kind)) add3([h.agent, h.kind]);
  return needed;
}
function leavesByStream(bundle) {
  const byStream = /* @__PURE__ */ new Map();
  for (const [leaf] of bundle.leaves) {
    const key = streamKey(leaf.envelope.agent, leaf.envelope.kind);
    const list = byStream.get(key);
    if (list === void 0) byStream.set(key, [leaf]);
    else list.push(leaf);
  }
  return byStream;
}
function byVersion(leaves) {
  return [...leaves ?? []].sort((a, b) => a.envelope.version - b.envelope.version);
}
function stepCompleteness(bundle, heads) {
  for (const agent of [...statementsAgents(bundle), POLICY_AGENT].filter((a, i, all2) => all2.indexOf(a) === i).sort(compareCodePoints)) {
    if (!heads.covered.has(agent)) {
      const covered = [...heads.covered].sort(compareCodePoints).join(", ");
      throw new StreamChainError(
        `the log's stream-head statement does not cover agent ${JSON.stringify(agent)}, so this bundle proves nothing about ${agent}'s records (covered: ${covered})`,
        { check: "completeness.coverage" }
      );
    }
  }
  const needed = neededStreams(bundle, heads);
  const byStream = leavesByStream(bundle);
  const all = new Map(needed);
  for (const leaves of byStream.values()) {
    const env = leaves[0].envelope;
    all.set(streamKey(env.agent, env.kind), [env.agent, env.kind]);
  }
  for (const stream of [...all.values()].sort(compareStreams)) {
    const key = streamKey(stream[0], stream[1]);
    const got = byVersion(byStream.get(key));
    const head = heads.heads.get(key);
    if (head === void 0) {
      if (needed.has(key) && got.length === 0) continue;
      throw new StreamChainError(`stream ${key} has no attested head`, { check: "completeness.head" });
    }
    for (const lf of got) {
      if (BigInt(lf.envelope.version) > head.version) {
        throw new StreamChainError(
          `fraud proof: entry ${lf.index} is version ${lf.envelope.version} of ${key}, beyond the head version ${head.version} the log signed`,
          { check: "completeness.fraud" }
        );
      }
    }
    if (!needed.has(key)) continue;
    if (BigInt(got.length) !== head.version + 1n || got.some((lf, i) => lf.envelope.version !== i)) {
      const present = new Set(got.map((lf) => lf.envelope.version));
      const missing = [];
      for (let v = 0n; v <= head.version && missing.length < 10; v++) if (!present.has(Number(v))) missing.push(v);
      throw new StreamChainError(`stream ${key} lacks versions [${missing.join(", ")}]`, {
        check: "completeness.missing"
      });
    }
    let prev = null;
    for (const lf of got) {
      if (lf.envelope.prev !== prev) {
        throw new StreamChainError(`stream ${key} version ${lf.envelope.version}: broken prev link`, {
          check: "completeness.prev"
        });
      }
      prev = toHex(lf.hash);
    }
    const last = got[got.length - 1];
    if (BigInt(last.index) !== head.index || toHex(last.hash) !== head.leafHash) {
      throw new StreamChainError(`stream ${key} ends before its attested head`, { check: "completeness.head" });
    }
  }
  return needed;
}
function stepBodies(bundle) {
  const bodyOf = (leaf, e) => verifyBody(leaf.envelope, b64(get4(e, "salt"), "salt"), b64(e["body"], "body"), { maxBytes: 1 << 20 });
  const erasures = /* @__PURE__ */ new Set();
  for (const [lf, e] of bundle.leaves) {
    if (lf.envelope.kind === "memory.erased" && has(e, "body")) {
      const index = get4(bodyOf(lf, e), "index");
      if (isInt2(index)) erasures.add(index);
    }
  }
  const bodies = /* @__PURE__ */ new Map();
  const erased = [];
  for (const [leaf, e] of bundle.leaves) {
    if (has(e, "erased")) {
      if (e["erased"] !== true) throw new MalformedError("erased is true or absent", { check: "format" });
      if (!erasures.has(leaf.index)) {
        throw new MalformedError(`entry ${leaf.index} is marked erased, but no proven memory.erased entry erases it`, {
          check: "bodies.erased"
        });
      }
      if (has(e, "body") || has(e, "salt")) {
        throw new MalformedError(`entry ${leaf.index} is marked erased but carries a body`, { check: "format" });
      }
      bodies.set(leaf.index, null);
      erased.push(leaf.index);
    } else if (has(e, "body")) {
      bodies.set(leaf.index, bodyOf(leaf, e));
    } else {
      if (has(e, "salt")) {
        throw new MalformedError(`entry ${leaf.index} carries a salt without a body`, { check: "format" });
      }
      bodies.set(leaf.index, null);
    }
  }
  return { bodies, erased };
}
function stepIndex(bundle, bodies, key, cp) {
  const leaves = new Map(bundle.leaves.map(([lf]) => [lf.index, lf]));
  const shown = bodies;
  const indexes = [];
  bundle.statements.forEach((s, n) => {
    const idx = parseIndex(utf8Text(bundle.meshIndexes[n]), key, cp, s);
    checkIndex(s, idx, leaves, shown);
    indexes.push(idx);
  });
  allowedEntries(bundle.statements, indexes, leaves, shown);
  const listed = indexes.reduce((n, i) => n + i.entries.size, 0);
  return [
    indexes,
    `${listed} entries listed by the log's mesh-read index for this checkpoint, all carried; nothing else disclosed`
  ];
}
function stepToken(bundle, bodies, history, origin, audience, at) {
  const token = bundle.token;
  if (audience === void 0) {
    throw new TokenError("this bundle carries a share token: give the audience you verify as", {
      check: "token.audience"
    });
  }
  const agent = String(bundle.statements[0]["agent"]);
  const disclosed = (lf) => (bodies.get(lf.index) ?? null) !== null;
  for (const [lf] of bundle.leaves) {
    if (disclosed(lf) && lf.envelope.agent !== agent) {
      throw new TokenError(`entry ${lf.index} of another agent is disclosed`, { check: "token.scope" });
    }
  }
  const revoked = [];
  for (const [lf] of bundle.leaves) {
    if (lf.envelope.kind !== "share.revoked" || lf.envelope.agent !== agent) continue;
    const body = bodies.get(lf.index) ?? null;
    if (body === null) throw new TokenError("the revocation list is not fully disclosed", { check: "token.revoked" });
    const tokenId = get4(body, "token_id");
    if (typeof tokenId !== "string" || !TOKEN_ID.test(tokenId)) {
      throw new TokenError(
        `share.revoked entry ${lf.index} names no valid token id: the revocation list cannot be read`,
        { check: "token.revoked" }
      );
    }
    revoked.push(tokenId);
  }
  const scope = /* @__PURE__ */ new Set([
    ...bundle.leaves.filter(([lf]) => disclosed(lf)).map(([lf]) => lf.envelope.kind),
    ...bundle.statements.map((st) => st["kind"])
  ]);
  scope.delete("share.revoked");
  scope.delete("memory.erased");
  const active = history.activeKey(agent);
  const record2 = active === null ? void 0 : history.keys.get(active);
  const verified = verifyToken(token, {
    agentKeys: record2 === void 0 ? [] : [record2.publicKey],
    origin,
    agent,
    audience,
    kinds: [...scope].sort(compareCodePoints),
    ...at === void 0 ? {} : { at },
    revokedIds: revoked
  });
  return `share token of ${agent} allows ${verified.kinds.join(", ")} to ${audience}; not revoked (${revoked.length} revocations checked)`;
}
function stepClaim(bundle, bodies, indexes = []) {
  const byStream = leavesByStream(bundle);
  const leaves = new Map(bundle.leaves.map(([lf]) => [lf.index, lf]));
  const results = [];
  let reads = 0;
  for (const s of bundle.statements) {
    if (s["predicate"] === "mesh_read") {
      results.push(meshClaim(s, indexes[reads++], leaves, bodies));
      continue;
    }
    const stream = byVersion(byStream.get(streamKey(s["agent"], s["kind"])));
    const value = evaluate(
      s,
      stream.map((lf) => bodies.get(lf.index) ?? null)
    );
    const holds = same(value, s["value"]);
    results.push(Object.freeze({ statement: s, recomputed: value, holds }));
    if (!holds) {
      throw new ClaimError(`claim says ${describeStatement(s)}; the records say ${JSON.stringify(value)}`, {
        check: "claim.value"
      });
    }
  }
  return results;
}
function withheld(kind, body, pos) {
  if (body === null) return true;
  const entries = kind === "memory.distilled" ? get4(body, "entries") : void 0;
  return Array.isArray(entries) && pos < entries.length && typeof entries[pos] === "string";
}
function meshClaim(s, index, leaves, bodies) {
  const ref = s["ref"];
  const memoryIndex = index.of("memory")[0];
  const memory = leaves.get(memoryIndex);
  const env = memory.envelope;
  const body = bodies.get(memoryIndex) ?? null;
  const ours = env.agent === s["author"] && env.kind === s["kind"];
  if (ours && withheld(env.kind, body, Number(ref.slice(ref.indexOf(".") + 1)))) {
    throw new ClaimError(`claim says ${describeStatement(s)}; the memory's body is not disclosed (erased?)`, {
      check: "claim.undisclosed"
    });
  }
  const named = ["status", "exempt", "use"].flatMap((role) => index.of(role));
  const entry = (i) => {
    const lf = leaves.get(i);
    return [i, lf.timestampUs, lf.envelope.kind, bodies.get(i) ?? null];
  };
  const status = foldStatus(ref, [memoryIndex, memory.timestampUs, env.kind, body], named.map(entry));
  if (ours && !status.shareable) {
    throw new ClaimError(
      `claim says ${describeStatement(s)}; the log says memory ${ref} was not an active WARM memory at the checkpoint (${status.status}, ${status.tier}: ${status.why})`,
      { check: "claim.status" }
    );
  }
  const events = index.of("mesh").map((i) => {
    const lf = leaves.get(i);
    return [i, lf.envelope.agent, lf.envelope.kind, bodies.get(i) ?? null];
  });
  const [holds, why] = meshRead(s, events, [env.agent, env.kind, body]);
  if (!holds) {
    throw new ClaimError(`claim says ${describeStatement(s)}; the log says no: ${why}`, { check: "claim.mesh" });
  }
  return Object.freeze({ statement: s, recomputed: true, holds: true });
}
function verifyBundle(data, logKey, options = {}) {
  const steps = options.steps ?? [];
  const at = options.at ?? options.now;
  let witnessCheck2 = options.witnesses;
  if (options.witnessPolicy !== void 0) {
    if (witnessCheck2 !== void 0) throw new TypeError("give either witnesses or witnessPolicy, not both");
    witnessCheck2 = witnessCheck(options.witnessPolicy, at);
  }
  const bundle = stepFormat(data);
  steps.push([
    "format",
    `${MEDIA_TYPE}, ${bundle.entries.length} entries, ${bundle.statements.length} claim statements`
  ]);
  const cp = verifyCheckpoint(
    utf8Text(bundle.checkpointNote),
    logKey,
    bundle.origin === null ? void 0 : bundle.origin
  );
  steps.push(["checkpoint", `signed by ${logKey.name}: size ${cp.size}`]);
  let cosigned = [];
  if (witnessCheck2 !== void 0) {
    cosigned = witnessCheck2(cp);
    steps.push(["witnesses", `cosigned by ${cosigned.join(", ")}: the witness policy's quorum is met`]);
  }
  const anchors = [
    ...options.trustedCheckpoint === void 0 ? [] : [options.trustedCheckpoint],
    ...options.trustedCheckpoints ?? []
  ];
  if (anchors.length) steps.push(["trusted", stepTrusted(bundle, cp, logKey, anchors, "trusted")]);
  if (options.remembered !== void 0) {
    steps.push(["trusted", stepTrusted(bundle, cp, logKey, [options.remembered], "state")]);
  }
  steps.push(["inclusion", stepInclusion(bundle, cp)]);
  steps.push(["timestamps", stepTimestamps(bundle)]);
  const heads = parseHeads(utf8Text(bundle.streamHeads), logKey, cp);
  steps.push([
    "heads",
    `${heads.heads.size} stream heads of ${heads.covered.size} agents, signed by the log for this checkpoint`
  ]);
  const history = stepSignatures(bundle);
  steps.push([
    "signatures",
    `every signature valid under the key of its agent at its index (${history.keys.size} keys)`
  ]);
  const needed = stepCompleteness(bundle, heads);
  const agents = [...statementsAgents(bundle)].sort(compareCodePoints);
  steps.push([
    "completeness",
    `${agents.join(", ")} covered; ${needed.size} streams complete from version 0 to their attested heads`
  ]);
  const { bodies, erased } = stepBodies(bundle);
  const shown = [...bodies.values()].filter((v) => v !== null).length;
  steps.push(["bodies", `${shown} bodies match their commitments; ${erased.length} erased`]);
  let indexes = [];
  if (bundle.meshIndexes.length > 0) {
    const [found, detail] = stepIndex(bundle, bodies, logKey, cp);
    indexes = found;
    steps.push(["index", detail]);
  }
  if (bundle.token !== null) {
    steps.push(["token", stepToken(bundle, bodies, history, cp.origin, options.audience, at)]);
  }
  const results = stepClaim(bundle, bodies, indexes);
  steps.push(["claim", results.map((r) => describeStatement(r.statement, r.recomputed)).join("; ")]);
  const streams = /* @__PURE__ */ new Map();
  for (const key of needed.keys()) {
    const head = heads.heads.get(key);
    if (head !== void 0) streams.set(key, head.version);
  }
  return Object.freeze({
    checkpoint: cp,
    entries: bundle.leaves.length,
    streams,
    erased,
    claims: results,
    steps,
    covered: heads.covered,
    witnesses: cosigned,
    consistency: bundle.consistency
  });
}
export {
  AGENT_OR_POLICY_KINDS,
  ALG_COSIGNATURE_V1,
  ALG_ED25519,
  BODY_DOMAIN,
  CATEGORIES,
  CREATOR_KINDS,
  CanonicalFormError,
  Checkpoint,
  ClaimError,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_LEAF_BYTES,
  DEFAULT_MAX_SKEW_S,
  DEFAULT_TIER_V2_FROM_US,
  DISCLOSED_STATUS_KINDS,
  EMPTY_ROOT,
  ENVELOPE_VERSION,
  EVENT_DOMAIN,
  EXEMPT_KIND,
  EngramError,
  Envelope,
  HASH_SIZE,
  HEADS_HEADER,
  INDEX_HEADER,
  KEY_ID_DOMAIN,
  KEY_KINDS,
  KeyHistory,
  KeyStateError,
  LEAF_FORMAT,
  Leaf,
  LimitExceededError,
  MAX_BUNDLE_BYTES,
  MAX_CONSISTENCY_PROOFS,
  MAX_CONTAINERS,
  MAX_DEPTH,
  MAX_ENTRIES,
  MAX_ENVELOPE_BYTES,
  MAX_NOTE_BYTES,
  MAX_POLICY_BYTES,
  MAX_POLICY_ENTRIES,
  MAX_PROOF_HASHES,
  MAX_PROOF_LINES,
  MAX_REQUEST_BYTES,
  MAX_SAFE_INTEGER,
  MAX_SIGNATURES,
  MAX_STATEMENTS,
  MAX_TIMESTAMP,
  MAX_TOKEN_CHARS,
  MAX_TREE_SIZE,
  MAX_VALUES,
  MEDIA_TYPE,
  MEMBER_KINDS,
  MEMORY_KINDS,
  MESH_ID,
  MESH_KINDS,
  MalformedError,
  Member,
  Mesh,
  MeshIndexError,
  MeshReadIndex,
  MeshRuleError,
  NewKey,
  OriginMismatchError,
  POLICY_AGENT,
  POLICY_KINDS,
  POP_DOMAIN,
  ProofError,
  RETIRED_MEDIA_TYPES,
  ROLES,
  SALT_SIZE,
  SignatureError,
  SignedNote,
  StateError,
  StreamChainError,
  TOKEN_FORMAT,
  TokenError,
  USE_KIND,
  UnknownKeyError,
  VerificationError,
  VerifierKey,
  WitnessError,
  WitnessKey,
  WitnessPolicy,
  agentKeyId,
  allowedEntries,
  applyEvent,
  authorize,
  b64decodeStrict,
  b64encode,
  bodyCommitment,
  canonicalBytes,
  checkAgentId,
  checkIndex,
  checkKind,
  checkOrigin,
  checkPublicKey,
  checkShape,
  checkWitnessName,
  checkpointText,
  commitmentOf,
  compareCodePoints,
  consistencyProofLength,
  cosign,
  cosignatureMessage,
  cosignerKeyId,
  creatorOf,
  decodeBase64Url,
  defaultTier,
  describeStatement,
  digestForm,
  ed25519KeyId,
  encodesAsUtf8,
  entryDigest,
  eventSigningInput,
  fold,
  foldStatus,
  formatAddCheckpoint,
  formatVerifierKey,
  headsText,
  inclusionProofLength,
  leafHash,
  meanQuality,
  memoryCategory,
  meshRead,
  namesMemory,
  nodeHash,
  parseAddCheckpoint,
  parseCanonical,
  parseDecimal,
  parseHeads,
  parseIndex,
  parseStrict,
  popSigningInput,
  pythonJsonDumps,
  requireExtends,
  revocationIds,
  rootFromLeafHashes,
  signEvent,
  signNote,
  signPop,
  statementAgents,
  statementStreams,
  streamKey,
  verifyBody,
  verifyBundle,
  verifyCheckpoint,
  verifyConsistency,
  verifyCosignatures,
  verifyEventSignature,
  verifyInclusion,
  verifyPop,
  verifySignature,
  verifyToken,
  witnessCheck
};
/*! Bundled license information:

@noble/ed25519/index.js:
  (*! noble-ed25519 - MIT License (c) 2019 Paul Miller (paulmillr.com) *)
*/
