// Engram web UI: the checks that run in the browser. Plain JavaScript (no build), on the
// TypeScript verifier in engram-verify.js (built from clients/ts by `npm run build:web`).
// Nothing here sends data anywhere: it fetches public proofs from this server (or a bundle
// from a URL the user gives) and verifies them locally.

import * as ev from "./engram-verify.js";

const enc = new TextEncoder();

function $(id) {
  return document.getElementById(id);
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function b64(text) {
  return ev.b64decodeStrict(text, "ui.base64");
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function checkOf(e) {
  return e && typeof e.check === "string" ? e.check : "error";
}

async function getJson(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

// -- the log verifier key, pinned per origin in this browser ---------------------------------

function pinnedKey(origin) {
  try {
    return localStorage.getItem(`engram.logKey:${origin}`);
  } catch {
    return null;
  }
}

function pinKey(origin, vkey) {
  try {
    localStorage.setItem(`engram.logKey:${origin}`, vkey);
  } catch {
    /* storage disabled: the key is used for this page only */
  }
}

// -- home: the checkpoint's signature -----------------------------------------------------------

function checkHomeCheckpoint() {
  const box = $("cp-check");
  if (!box) return;
  const note = box.dataset.note;
  const served = box.dataset.vkey;
  let key;
  try {
    key = ev.VerifierKey.parse(served);
  } catch (e) {
    box.textContent = `FAILED at key (${checkOf(e)}): ${e.message}`;
    box.className = "check bad";
    return;
  }
  const pinned = pinnedKey(key.name);
  try {
    const cp = ev.verifyCheckpoint(enc.encode(note), pinned ? ev.VerifierKey.parse(pinned) : key);
    box.textContent =
      `Verified in your browser: the checkpoint of size ${cp.size} is signed by ${cp.origin}` +
      (pinned ? " under the key you pinned." : " under the key this server gives (pin it on an entry page).");
    box.className = "check ok";
  } catch (e) {
    box.textContent = `FAILED at checkpoint (${checkOf(e)}): ${e.message}`;
    box.className = "check bad";
  }
}

// -- entry: inclusion proof and event signature ------------------------------------------------

async function verifyEntry() {
  const box = $("inclusion");
  if (!box) return;
  const list = $("inclusion-steps");
  const result = $("inclusion-result");
  const pin = $("pin");
  list.replaceChildren();
  result.textContent = "";
  result.className = "result";
  const index = BigInt(box.dataset.index);
  const origin = box.dataset.origin;
  let step = "key";
  const ok = (check, detail) => list.append(el("li", `[ok] ${check}: ${detail}`));
  try {
    if (!pin.value.trim()) {
      pin.value = pinnedKey(origin) || (await (await fetch("/v1/log/key", { cache: "no-store" })).text()).trim();
    }
    const key = ev.VerifierKey.parse(pin.value.trim());
    pinKey(key.name, pin.value.trim());
    ok("key", `log verifier key ${key.name}`);
    step = "checkpoint";
    const proof = await getJson(`/v1/proofs/inclusion?index=${index}`);
    const cp = ev.verifyCheckpoint(enc.encode(proof.checkpoint), key, origin);
    if (BigInt(proof.size) !== cp.size) {
      throw Object.assign(new Error(`the proof is for size ${proof.size}, the checkpoint is ${cp.size}`), {
        check: "inclusion.size",
      });
    }
    ok("checkpoint", `signed by ${cp.origin}: size ${cp.size}, root ${hex(cp.root)}`);
    step = "leaf";
    const raw = b64(box.dataset.leaf);
    const leaf = ev.Leaf.fromBytes(raw, { origin: cp.origin });
    if (BigInt(leaf.index) !== index) {
      throw Object.assign(new Error(`the leaf says index ${leaf.index}`), { check: "leaf.index" });
    }
    const lh = ev.leafHash(raw);
    ok("leaf", `parsed; leaf hash ${hex(lh)}`);
    step = "inclusion";
    ev.verifyInclusion({ leafHash: lh, index, size: cp.size, proof: proof.proof.map(b64), root: cp.root });
    ok("inclusion", `${proof.proof.length} proof hashes lead from the leaf to the signed root`);
    step = "signature";
    const agent = await getJson(`/v1/agents/${encodeURIComponent(box.dataset.agent)}`);
    const k = agent.keys.find((x) => x.key_id === leaf.envelope.keyId);
    if (!k) {
      throw Object.assign(new Error(`the log lists no key ${leaf.envelope.keyId} for ${box.dataset.agent}`), {
        check: "key.unknown",
      });
    }
    ev.verifyEventSignature(leaf.envelope, leaf.signature, b64(k.public_key));
    ok("signature", `the event verifies under ${box.dataset.agent}'s key ${k.key_id} (the key history a bundle proves)`);
    result.textContent = `VERIFIED: entry ${index} is in the log ${cp.origin} of size ${cp.size}`;
    result.className = "result ok";
  } catch (e) {
    list.append(el("li", `[FAIL] ${step}: ${e.message}`));
    result.textContent = `FAILED at ${step} (${checkOf(e)})`;
    result.className = "result bad";
  }
}

// -- the buyer's bundle verifier --------------------------------------------------------------

// The report step a failed check belongs to (verifier/cli.py _bundle_step).
const STEP_OF = {
  format: "format",
  canonical: "format",
  json: "format",
  limit: "format",
  checkpoint: "checkpoint",
  note: "checkpoint",
  origin: "checkpoint",
  trusted: "trusted",
  consistency: "trusted",
  inclusion: "inclusion",
  leaf: "inclusion",
  envelope: "inclusion",
  heads: "heads",
  key: "signatures",
  event: "signatures",
  completeness: "completeness",
  token: "token",
  body: "bodies",
  claim: "claim",
  witness: "witnesses",
};

export function bundleStep(check) {
  const head = check.split(".")[0];
  return STEP_OF[head] ?? head;
}

/** Verify bundle bytes; returns {checks, verified, failed, claims} as `engram-verify bundle --json` prints. */
export function verifyBundleReport(data, vkey, { audience, witnessPolicy, at } = {}) {
  const checks = [];
  const push = (check, ok, detail, failedCheck) => {
    const c = { n: checks.length + 1, check, ok, detail };
    if (!ok) c.failed_check = failedCheck;
    checks.push(c);
    return c;
  };
  let key;
  try {
    key = ev.VerifierKey.parse(vkey.trim());
  } catch (e) {
    const c = push("key", false, `the log key is not a valid Ed25519 verifier key: ${e.message}`, checkOf(e));
    return { checks, verified: false, failed: c, claims: [] };
  }
  const steps = [];
  const options = { steps };
  if (audience) options.audience = audience;
  if (at !== undefined) options.now = at;
  try {
    if (witnessPolicy && witnessPolicy.trim()) {
      options.witnesses = ev.witnessCheck(witnessPolicy, at);
    }
    const verified = ev.verifyBundle(data, key, options);
    for (const [check, detail] of steps) push(check, true, detail);
    return {
      checks,
      verified: true,
      failed: null,
      claims: verified.claims.map((c) => ({
        statement: ev.describeStatement(c.statement, c.recomputed),
        holds: c.holds,
      })),
    };
  } catch (e) {
    for (const [check, detail] of steps) push(check, true, detail);
    const c = push(bundleStep(checkOf(e)), false, String(e.message), checkOf(e));
    return { checks, verified: false, failed: c, claims: [] };
  }
}

function showReport(title, report) {
  $("report-title").textContent = title;
  const list = $("report-steps");
  list.replaceChildren();
  for (const c of report.checks) {
    const li = el("li", `[${c.ok ? "ok  " : "FAIL"}] ${c.check}: ${c.detail}`, c.ok ? "ok" : "bad");
    li.dataset.check = c.check;
    if (!c.ok) li.dataset.failedCheck = c.failed_check;
    list.append(li);
  }
  const verdict = $("verdict");
  if (report.verified) {
    verdict.textContent = "VERIFIED";
    verdict.className = "result ok";
  } else {
    verdict.textContent = `FAILED at check ${report.failed.n} (${report.failed.check}: ${report.failed.failed_check})`;
    verdict.className = "result bad";
  }
  const claims = $("claims");
  claims.replaceChildren();
  for (const c of report.claims) claims.append(el("p", c.statement, c.holds ? "claim ok" : "claim bad"));
  // The verdict is below the form: bring it into view (and to a screen reader's focus).
  verdict.scrollIntoView({ block: "center" });
  verdict.focus({ preventScroll: true });
}

async function readSource() {
  const file = $("bundle-file").files[0];
  if (file) {
    if (file.size > ev.MAX_BUNDLE_BYTES) throw new Error(`the file is larger than ${ev.MAX_BUNDLE_BYTES} bytes`);
    return { name: file.name, data: new Uint8Array(await file.arrayBuffer()) };
  }
  const url = $("bundle-url").value.trim();
  if (url) {
    const r = await fetch(url, { cache: "no-store", credentials: "omit" });
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    const data = new Uint8Array(await r.arrayBuffer());
    if (data.length > ev.MAX_BUNDLE_BYTES) throw new Error(`the bundle is larger than ${ev.MAX_BUNDLE_BYTES} bytes`);
    return { name: url, data };
  }
  return null;
}

function setUpVerifier() {
  const form = $("verify-form");
  if (!form) return;
  const drop = $("drop");
  const file = $("bundle-file");
  drop.addEventListener("dragover", (e) => {
    e.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files.length) {
      file.files = e.dataTransfer.files;
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    $("verdict").textContent = "Verifying…";
    $("verdict").className = "result";
    let source;
    try {
      source = await readSource();
    } catch (err) {
      showReport("bundle", {
        checks: [{ n: 1, check: "input", ok: false, detail: err.message, failed_check: "input.read" }],
        verified: false,
        failed: { n: 1, check: "input", failed_check: "input.read" },
        claims: [],
      });
      return;
    }
    if (!source) {
      $("verdict").textContent = "Choose a bundle file or give its URL.";
      return;
    }
    const report = verifyBundleReport(source.data, $("log-key").value, {
      audience: $("audience").value.trim() || undefined,
      witnessPolicy: $("witness-policy").value,
    });
    showReport(`bundle ${source.name}`, report);
  });
}

function setUpEntry() {
  const button = $("verify-entry");
  if (!button) return;
  const box = $("inclusion");
  const pinned = pinnedKey(box.dataset.origin);
  if (pinned) $("pin").value = pinned;
  button.addEventListener("click", () => verifyEntry());
  verifyEntry();
}

checkHomeCheckpoint();
setUpEntry();
setUpVerifier();
window.engramUi = { verifyBundleReport, bundleStep, ready: true };
