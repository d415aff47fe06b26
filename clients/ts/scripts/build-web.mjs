// Build the verifier for the browser: one ES module, src/index.ts and its two dependencies
// (@noble/ed25519, @noble/hashes, pinned by package-lock.json), written to the web UI's
// static files (api/ui/static/engram-verify.js) or to the path given as the argument.
// esbuild's output is deterministic: tests/interop/test_ts_verifier.py rebuilds it and
// checks that the committed file is current.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL("..", import.meta.url));
const outfile = process.argv[2] ?? `${here}../../api/ui/static/engram-verify.js`;

await build({
  entryPoints: [`${here}src/index.ts`],
  bundle: true,
  format: "esm",
  target: "es2022",
  charset: "utf8",
  legalComments: "eof",
  banner: {
    js: "// Engram verifier for the browser, built from clients/ts by `npm run build:web` (do not edit: a test checks it is current).",
  },
  outfile,
  logLevel: "warning",
});
