// Drives `capstan mcp serve` with the official MCP TypeScript SDK.
//
// Usage: node typescript_sdk.mjs CONFIG_JSON
//
// CONFIG_JSON is what python_sdk.py takes (transport, command, cwd, env,
// errlog, url, roots, steps), plus "sdk": the npm prefix the SDK is
// installed in. Prints one JSON object: what each step saw, in the same
// shape as python_sdk.py.

import { openSync } from "node:fs";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const sdk = (path) =>
  import(
    pathToFileURL(`${config.sdk}/node_modules/@modelcontextprotocol/sdk/dist/esm/${path}`).href
  );
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ListRootsRequestSchema } = await sdk("types.js");

const capabilities = config.roots ? { roots: {} } : {};
const client = new Client({ name: "capstan-test", version: "1" }, { capabilities });
if (config.roots) {
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: `file://${config.roots}`, name: "project" }],
  }));
}

const transport =
  config.transport === "stdio"
    ? new StdioClientTransport({
        command: config.command[0],
        args: config.command.slice(1),
        cwd: config.cwd,
        env: config.env,
        stderr: openSync(config.errlog, "w"),
      })
    : new StreamableHTTPClientTransport(new URL(config.url));
let negotiated;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (version) => {
  negotiated = version;
  setVersion?.(version);
};
await client.connect(transport);

const textOf = (result) => ({
  isError: Boolean(result.isError),
  text: result.content.map((c) => c.text ?? "").join(""),
});
const call = (name, args, options) =>
  client.callTool({ name, arguments: args }, undefined, options);

const steps = {
  async tools() {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    return {
      names: Object.keys(byName).sort(),
      fs__read: byName.fs__read,
      fs__write: byName.fs__write,
    };
  },
  read: async () => textOf(await call("fs__read", { path: "hello.txt" })),
  write: async () => textOf(await call("fs__write", { path: "written.txt", content: "new" })),
  invalid: async () => textOf(await call("fs__read", { no_such_field: 1 })),
  tool_error: async () => textOf(await call("misbehave__fail", { message: "it broke" })),
  missing_file: async () => textOf(await call("fs__read", { path: "missing.txt" })),
  async unknown() {
    try {
      await call("nosuch__tool", {});
    } catch (e) {
      return { raised: true, message: String(e.message) };
    }
    return { raised: false };
  },
  async concurrent() {
    const calls = [];
    for (let n = 0; n < 20; n++) {
      calls.push(call("fs__read", { path: `many/f${n}.txt` }).then(textOf));
    }
    return Promise.all(calls);
  },
  async progress() {
    const reports = [];
    const result = await call(
      "misbehave__chatty",
      { message: "hi" },
      { onprogress: (p) => reports.push({ progress: p.progress, total: p.total, message: p.message }) },
    );
    return { result: textOf(result), reports };
  },
  roots: async () => textOf(await call("fs__read", { path: "only-in-root.txt" })),
  async cancel() {
    // Aborting the signal makes the SDK send notifications/cancelled.
    const abort = new AbortController();
    const slow = call("misbehave__sleep", { bytes: 25 }, { signal: abort.signal, timeout: 60000 });
    setTimeout(() => abort.abort("the test cancelled it"), 1500);
    let cancelled = false;
    try {
      await slow;
    } catch {
      cancelled = true;
    }
    const after = textOf(await call("fs__read", { path: "hello.txt" }));
    return { cancelled, after };
  },
};

const seen = {
  sdk: "typescript",
  protocolVersion: negotiated,
  serverName: client.getServerVersion()?.name,
};
for (const step of config.steps) {
  seen[step] = await steps[step]();
}
await client.close();
console.log(JSON.stringify(seen));
