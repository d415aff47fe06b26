// An independent MCP client (the official TypeScript SDK) against `engram mcp`.
// Usage: node client.mjs stdio <engram> <key-file>   |   node client.mjs http <url> <bearer-token>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, a, b] = process.argv.slice(2);
const transport = mode === "stdio"
  ? new StdioClientTransport({ command: a, args: ["mcp", "--key-file", b], env: process.env })
  : new StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${b}` } } });
const client = new Client({ name: "engram-ts-check", version: "1.0.0" });
await client.connect(transport);
const out = {};
out.protocol = client.getServerVersion();
out.tools = (await client.listTools()).tools.map((t) => t.name);
const w = await client.callTool({ name: "memory_write", arguments: { content: "The TypeScript client wrote this fact about port 7443", category: "LEARNING" } });
out.write = w.structuredContent ?? JSON.parse(w.content[0].text);
const r = await client.callTool({ name: "memory_recall", arguments: { query: "which port did the TypeScript client mention?" } });
out.recall = (r.structuredContent ?? JSON.parse(r.content[0].text)).context;
const bad = await client.callTool({ name: "memory_write", arguments: { content: "x", category: "NOPE" } });
out.bad = { isError: bad.isError, text: bad.content[0].text.slice(0, 200) };
const nf = await client.callTool({ name: "memory_show", arguments: { ref: "99999.0" } });
out.notFound = { isError: nf.isError, text: nf.content[0].text };
const res = await client.readResource({ uri: "engram://log/key" });
out.logKey = res.contents[0].text.trim();
await client.close();
console.log(JSON.stringify(out));
