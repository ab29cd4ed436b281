// capstan's JavaScript SDK: write capstan tools, hooks and skills as functions.
//
// This file is written into a plugin project by `capstan new` and refreshed
// by `capstan plugin build`; edits to it are lost. It runs inside the
// component componentize-js builds (where `capstan plugin build` wires in the
// host's interfaces) and under Node for your unit tests (`node --test`).
//
//   import { tool, InvalidInput } from "./capstan.js";
//
//   tool({
//     name: "hello",
//     description: "Greets someone by name.",
//     input: {
//       name: { type: "string", description: "Who to greet." },
//       excitement: { type: "integer", default: 1, description: "How many !" },
//     },
//     readOnly: true,
//     run({ name, excitement }) {
//       if (excitement < 0) throw new InvalidInput("field `excitement`: must not be negative");
//       return `Hello, ${name}` + "!".repeat(excitement);
//     },
//   });
//
// Each call's input is checked against the schema before `run` (an error
// names the field); `run` may be async (use `fetch` for HTTP to granted
// hosts). Throw InvalidInput, Denied or Failed to say why a call did not
// succeed; any other exception becomes `failed` with its message.

/** Why a call did not succeed. The message is shown to the model. */
export class ToolError extends Error {
  constructor(message, kind = "failed") {
    super(message);
    this.name = "ToolError";
    this.kind = kind;
  }
}

/** The input was not valid. Name the field in the message. */
export class InvalidInput extends ToolError {
  constructor(message) {
    super(message, "invalid-input");
    this.name = "InvalidInput";
  }
}

/** The sandbox refused something the tool tried (a path, a host). */
export class Denied extends ToolError {
  constructor(message) {
    super(message, "denied");
    this.name = "Denied";
  }
}

/** The tool ran and could not do what was asked. */
export class Failed extends ToolError {
  constructor(message) {
    super(message, "failed");
    this.name = "Failed";
  }
}

/** A JSON result: `return json({ temp: 21 })`. Returning an object does the same. */
export function json(value) {
  return { __capstanJson: value };
}

// --- schemas ---------------------------------------------------------------

function describeValue(value) {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= 40 ? text : text.slice(0, 37) + "...";
}

function typeOk(value, kind) {
  switch (kind) {
    case "string": return typeof value === "string";
    case "integer": return typeof value === "number" && Number.isInteger(value);
    case "number": return typeof value === "number" && Number.isFinite(value);
    case "boolean": return typeof value === "boolean";
    case "array": return Array.isArray(value);
    case "object": return value !== null && typeof value === "object" && !Array.isArray(value);
    case "null": return value === null;
    default: return true;
  }
}

/**
 * Checks `value` against the subset of JSON Schema tools use (type,
 * properties, required, additionalProperties, items, enum, anyOf,
 * minimum/maximum, minLength); throws InvalidInput naming the field.
 */
export function check(value, schema, where = "") {
  const name = where ? `field \`${where}\`` : "the input";
  if (Array.isArray(schema.anyOf)) {
    const fits = schema.anyOf.some((option) => {
      try { check(value, option, where); return true; } catch { return false; }
    });
    if (!fits) throw new InvalidInput(`${name}: ${describeValue(value)} matches none of the allowed forms`);
  }
  if (schema.type !== undefined) {
    const kinds = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!kinds.some((k) => typeOk(value, k))) {
      throw new InvalidInput(`${name}: expected ${kinds.join(" or ")}, found ${describeValue(value)}`);
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
    throw new InvalidInput(`${name}: ${describeValue(value)} is not one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) throw new InvalidInput(`${name}: must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) throw new InvalidInput(`${name}: must be at most ${schema.maximum}`);
  }
  if (typeof value === "string" && schema.minLength !== undefined && value.length < schema.minLength) {
    throw new InvalidInput(`${name}: must be at least ${schema.minLength} characters`);
  }
  if (typeOk(value, "object")) {
    const properties = schema.properties ?? {};
    for (const key of schema.required ?? []) {
      if (!(key in value)) throw new InvalidInput(`missing field \`${where ? where + "." : ""}${key}\``);
    }
    const extra = schema.additionalProperties ?? true;
    for (const [key, item] of Object.entries(value)) {
      const path = where ? `${where}.${key}` : key;
      if (key in properties) check(item, properties[key], path);
      else if (extra === false) {
        const known = Object.keys(properties).map((k) => `\`${k}\``).join(", ") || "none";
        throw new InvalidInput(`unknown field \`${path}\` (known fields: ${known})`);
      } else if (typeof extra === "object") check(item, extra, path);
    }
  }
  if (Array.isArray(value) && schema.items && typeof schema.items === "object") {
    value.forEach((item, index) => check(item, schema.items, `${where}[${index}]`));
  }
}

/** An object schema from `{ field: "string" | schema }`; fields without `default` or `optional: true` are required. */
function schemaFromFields(fields) {
  const properties = {};
  const required = [];
  for (const [key, spec] of Object.entries(fields)) {
    const schema = typeof spec === "string" ? { type: spec } : { ...spec };
    const optional = schema.optional === true || "default" in schema;
    delete schema.optional;
    properties[key] = schema;
    if (!optional) required.push(key);
  }
  const schema = { type: "object", properties, additionalProperties: false };
  if (required.length) schema.required = required;
  return schema;
}

// --- tools -------------------------------------------------------------------

const tools = new Map();
const NAME = /^[a-z][a-z0-9_-]*$/;

/**
 * Registers a tool: `{ name, description, input | schema, run, readOnly,
 * destructive, idempotent, openWorld }`. `input` maps field names to a type
 * name or a JSON Schema (with `default` or `optional: true` for optional
 * fields); `schema` is a whole object schema instead. `run(input, ctx)`
 * returns a string (text), an object or array (JSON), or a promise of one.
 */
export function tool(spec) {
  const { name, description, run } = spec;
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new Error(`capstan: tool name ${JSON.stringify(name)} must be lowercase letters, digits, - and _, starting with a letter`);
  }
  if (tools.has(name)) throw new Error(`capstan: two tools are called ${name}`);
  if (typeof description !== "string" || !description) throw new Error(`capstan: tool ${name} needs a description`);
  if (typeof run !== "function") throw new Error(`capstan: tool ${name} needs a run(input, ctx) function`);
  const schema = spec.schema ?? schemaFromFields(spec.input ?? {});
  tools.set(name, {
    name,
    description,
    schema,
    run,
    hints: {
      readOnly: !!spec.readOnly,
      destructive: !!spec.destructive,
      idempotent: !!spec.idempotent,
      openWorld: !!spec.openWorld,
    },
  });
}

function asError(err) {
  if (err instanceof ToolError) return err;
  const code = err?.payload ?? err?.code;
  if (code === "access" || code === "not-permitted" || code === "read-only" || code === "EACCES") {
    return new Denied(err.message || `permission denied (${code})`);
  }
  if (code === "no-entry" || code === "ENOENT") return new Failed(err.message || "no such file");
  if (globalThis.console) console.error(err?.stack ?? String(err));
  // The innermost frame of the stack, such as `run@app.js:12:11`.
  const frame = String(err?.stack ?? "").split("\n").map((l) => l.trim()).find((l) => l.startsWith("at ") || /^[\w$.<>]*@/.test(l));
  const where = frame ? ` (at ${frame.replace(/^at /, "").replace(/file:\/\/\S*\//, "")})` : "";
  return new Failed(`${err?.name ?? "Error"}: ${err?.message ?? String(err)}${where}`);
}

let currentContext = { callId: "test-call", workspace: undefined, sessionId: undefined };

/**
 * Calls tool `name` as the host would: `input` is JSON text or a value,
 * checked against the tool's schema. Resolves to what `run` returned;
 * rejects with a ToolError. Useful in unit tests.
 */
export async function callTool(name, input, ctx = {}) {
  return runTool(findTool(name), input, ctx);
}

function findTool(name) {
  const t = tools.get(name);
  if (!t) throw new InvalidInput(`unknown tool \`${name}\`; this plugin has ${[...tools.keys()].sort().join(", ") || "no tools"}`);
  return t;
}

function isPromise(value) {
  return value !== null && (typeof value === "object" || typeof value === "function") && typeof value.then === "function";
}

// Runs `t` on `input`: what `run` returned, or a promise of it when `run` is
// async. A tool that needs no promise creates none (each one costs a
// fresh instance time); errors become ToolErrors either way.
function runTool(t, input, ctx) {
  let value = input;
  if (typeof input === "string") {
    try { value = JSON.parse(input); } catch (err) { throw new InvalidInput(`the input is not valid JSON: ${err.message}`); }
  }
  check(value, t.schema);
  const context = { callId: "test-call", ...ctx };
  currentContext = context;
  let result;
  try {
    result = t.run(value, context);
  } catch (err) {
    throw asError(err);
  }
  return isPromise(result) ? result.then(undefined, (err) => { throw asError(err); }) : result;
}

// --- hooks ---------------------------------------------------------------------

const EVENTS = [
  "session-start", "session-end", "user-prompt-submit", "pre-tool-use", "post-tool-use",
  "post-tool-use-failure", "permission-request", "stop", "subagent-start", "subagent-stop",
  "pre-compact", "post-compact", "notification",
];

const hooks = [];

/** Decisions a hook returns. */
export const proceed = (systemMessage) => ({ kind: "proceed", systemMessage });
export const allow = (systemMessage) => ({ kind: "allow", systemMessage });
export const ask = (reason, systemMessage) => ({ kind: "ask", value: reason, systemMessage });
export const deny = (reason, systemMessage) => ({ kind: "deny", value: reason, systemMessage });
export const modify = (toolInput, systemMessage) => ({ kind: "modify", value: JSON.stringify(toolInput), systemMessage });
export const addContext = (text, systemMessage) => ({ kind: "add-context", value: text, systemMessage });
export const keepGoing = (text, systemMessage) => ({ kind: "keep-going", value: text, systemMessage });

/**
 * Registers a hook on `event` ("pre-tool-use" or "PreToolUse"), for the
 * tools `matcher` picks (a name, `a|b`, or a regular expression). The
 * handler takes the event's payload (an object) and returns a decision
 * (`proceed()`, `deny(reason)`, ...); returning nothing means proceed.
 */
export function hook(event, matcher, handler) {
  if (typeof matcher === "function") { handler = matcher; matcher = undefined; }
  const kebab = event.replace(/(?<!^)(?=[A-Z])/g, "-").toLowerCase();
  if (!EVENTS.includes(kebab)) throw new Error(`capstan: unknown hook event ${event}; one of ${EVENTS.join(", ")}`);
  if (matcher !== undefined) new RegExp(matcher);
  hooks.push({ event: kebab, matcher, handler });
}

function matches(matcher, payload) {
  const name = payload?.tool_name;
  if (matcher === undefined || matcher === null || name === undefined) return true;
  if (matcher.split("|").includes(name)) return true;
  return new RegExp(`^(?:${matcher})$`).test(name);
}

const STRENGTH = { deny: 6, ask: 5, modify: 4, "keep-going": 3, allow: 2, "add-context": 1, proceed: 0 };

/**
 * Runs the hooks registered for `event` and combines their decisions: the
 * strictest wins (deny, ask, modify, keep-going, allow, add-context), and
 * added contexts are joined. Useful in unit tests.
 */
export async function handleEvent(event, payload) {
  const value = typeof payload === "string" ? JSON.parse(payload) : payload;
  const decisions = [];
  for (const h of hooks) {
    if (h.event === event && matches(h.matcher, value)) {
      const decision = (await h.handler(value)) ?? proceed();
      if (!(decision.kind in STRENGTH)) throw new Error(`hook returned ${JSON.stringify(decision)}; return a decision such as proceed()`);
      decisions.push(decision);
    }
  }
  if (!decisions.length) return proceed();
  let strongest = decisions.reduce((a, b) => (STRENGTH[b.kind] > STRENGTH[a.kind] ? b : a));
  if (strongest.kind === "add-context") {
    strongest = { ...strongest, value: decisions.filter((d) => d.kind === "add-context" && d.value).map((d) => d.value).join("\n\n") };
  }
  const messages = decisions.map((d) => d.systemMessage).filter(Boolean);
  return { ...strongest, systemMessage: messages.length ? messages.join("\n") : undefined };
}

// --- skills --------------------------------------------------------------------

const skills = new Map();

/**
 * Registers a skill whose Markdown is computed from the user's arguments:
 * `{ name, description, whenToUse, argumentHint, userInvocable,
 * modelInvocable, allowedTools, resources, load(arguments) }`.
 */
export function skill(spec) {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(spec.name ?? "")) throw new Error(`capstan: skill name ${JSON.stringify(spec.name)} must be lowercase letters, digits and -`);
  if (!spec.description) throw new Error(`capstan: skill ${spec.name} needs a description`);
  if (typeof spec.load !== "function") throw new Error(`capstan: skill ${spec.name} needs a load(arguments) function`);
  skills.set(spec.name, spec);
}

/** The text of skill `name`. Useful in unit tests. */
export async function loadSkill(name, args = "") {
  const s = skills.get(name);
  if (!s) throw new Error(`unknown skill \`${name}\`; this plugin has ${[...skills.keys()].join(", ") || "no skills"}`);
  const text = await s.load(args);
  if (typeof text !== "string") throw new Error(`skill ${name} returned ${typeof text}; return the Markdown text`);
  return text;
}

// --- host calls and files -------------------------------------------------------

let host = null;
let preopens = null;
let environment = null;

/** Wires the host's interfaces in; called by the entry `capstan plugin build` writes. */
export function bindHost(bindings) {
  host = bindings.host ?? null;
  preopens = bindings.preopens ?? null;
  environment = bindings.environment ?? null;
}

// --- warm-up -------------------------------------------------------------------

// componentize-js runs the plugin's modules once, while the component is
// built, and every call starts from a snapshot of the engine taken then.
// SpiderMonkey sets up a built-in class (Promise, async functions, typed
// arrays, the text codecs) the first time a script uses it, and compiles a
// function the first time it runs. Walking a call's path here, once, puts
// all of that into the snapshot instead of into every call.

const WARM_UP_TOOL = {
  name: "warm-up",
  schema: {
    type: "object",
    properties: {
      text: { type: "string", minLength: 1 },
      count: { type: "integer", minimum: 0, maximum: 9 },
      ratio: { type: "number" },
      flag: { type: "boolean" },
      list: { type: "array", items: { type: "string" } },
      choice: { enum: ["a", "b"] },
      maybe: { anyOf: [{ type: "string" }, { type: "null" }] },
      extra: { type: "object" },
    },
    required: ["text"],
    additionalProperties: false,
  },
  async run(input) {
    await null;
    return { echoed: input.text };
  },
};

const WARM_UP_SYNC_TOOL = { ...WARM_UP_TOOL, run: (input) => `${input.text}` };

/**
 * Walks a call's path once, so the engine's snapshot has it set up; the
 * entry `capstan plugin build` writes awaits it at the top level, which
 * componentize-js runs while building the component.
 */
export async function warmUp() {
  const input = { text: "x", count: 1, ratio: 0.5, flag: true, list: ["a"], choice: "a", maybe: null, extra: {} };
  const pending = [];
  const text = JSON.stringify(input);
  for (const [t, arg] of [[WARM_UP_TOOL, text], [WARM_UP_SYNC_TOOL, text], [WARM_UP_TOOL, "{}"], [WARM_UP_TOOL, "{"]]) {
    try {
      pending.push(Promise.resolve(callExport(t, arg, { callId: "warm-up" })).catch(() => undefined));
    } catch {
      try { failExport(new InvalidInput("warm-up")); } catch { /* the error path, warmed */ }
    }
  }
  new TextDecoder().decode(new TextEncoder().encode("x"));
  new DataView(new ArrayBuffer(8)).setUint32(0, 1, true);
  // componentize-js's bindings (the code between the component's exports
  // and this module) run in a global of their own: warm that one too, through
  // the Function constructor of one of the functions they define.
  try {
    const glue = host?.log?.constructor?.("return this")?.();
    if (glue && glue !== globalThis && typeof glue.Function === "function") {
      pending.push(glue.Function(
        "const touch = () => [new DataView(new ArrayBuffer(8)).setUint32(0, 1, true), new Uint8Array(1), " +
          "'x'.length, 'x'.charCodeAt(0), (1).toString(), true.toString(), [].length, Symbol.iterator, JSON.stringify({})];" +
          "return (async () => { touch(); await null; touch(); return { tag: 'ok', val: [] }; })()",
      )());
    }
  } catch {
    // Nothing to warm: the call path sets those classes up itself.
  }
  await Promise.allSettled(pending);
  currentContext = { callId: "test-call", workspace: undefined, sessionId: undefined };
}

/**
 * An environment variable, or undefined. A plugin sees only the variables
 * its manifest requests under `env` (and the user granted).
 */
export function env(name) {
  if (environment) {
    const found = environment.getEnvironment().find(([key]) => key === name);
    return found ? found[1] : undefined;
  }
  return globalThis.process?.env?.[name];
}

const LEVELS = ["trace", "debug", "info", "warn", "error"];

/** Writes a line to the host's log; shown to the user at warn and error. */
export function log(level, message) {
  if (!LEVELS.includes(level)) throw new Error(`log level must be one of ${LEVELS.join(", ")}`);
  if (host) host.log(level, String(message));
  else console.error(`[${level}] ${message}`);
}

/** Reports progress on a long call. */
export function progress(message, done, total) {
  if (host) host.progress(String(message), BigInt(done), total === undefined ? undefined : BigInt(total));
}

function nodeFs() {
  const name = "node:fs";
  return import(name);
}

/** Finds the granted folder holding `path` (relative paths are in the workspace). */
function locate(path) {
  const absolute = path.startsWith("/") ? path : `${currentContext.workspace ?? ""}/${path}`;
  const parts = [];
  for (const part of absolute.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  const normal = "/" + parts.join("/");
  let best = null;
  for (const [descriptor, root] of preopens.getDirectories()) {
    const prefix = root.endsWith("/") ? root : root + "/";
    if ((normal === root || normal.startsWith(prefix) || root === "/") && (!best || root.length > best[1].length)) {
      best = [descriptor, root];
    }
  }
  if (!best) throw new Denied(`${path}: outside the folders granted to this plugin`);
  const rest = normal.slice(best[1].length).replace(/^\/+/, "") || ".";
  return [best[0], rest];
}

function fsError(err, path) {
  const code = err?.payload ?? err?.code;
  if (code === "no-entry" || code === "ENOENT") return new Failed(`${path}: no such file`);
  if (code === "access" || code === "not-permitted" || code === "read-only" || code === "EACCES" || code === "EROFS") {
    return new Denied(`${path}: not allowed (${code}); the plugin has no write grant there`);
  }
  if (err instanceof ToolError) return err;
  return new Failed(`${path}: ${code ?? err?.message ?? err}`);
}

/** Files under the folders granted to the plugin (a workspace-relative or absolute path). */
export const fs = {
  /** The file's text (UTF-8). */
  async readText(path) {
    if (!preopens) return (await nodeFs()).readFileSync(path, "utf8");
    const [dir, rest] = locate(path);
    try {
      const file = dir.openAt({ symlinkFollow: true }, rest, {}, { read: true });
      const chunks = [];
      let offset = 0n;
      for (;;) {
        const [bytes, end] = file.read(65536n, offset);
        chunks.push(bytes);
        offset += BigInt(bytes.length);
        if (end || bytes.length === 0) break;
      }
      const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) { all.set(c, at); at += c.length; }
      return new TextDecoder().decode(all);
    } catch (err) {
      throw fsError(err, path);
    }
  },
  /** Writes `text` to the file, creating or replacing it. */
  async writeText(path, text) {
    if (!preopens) return (await nodeFs()).writeFileSync(path, text);
    const [dir, rest] = locate(path);
    try {
      const file = dir.openAt({ symlinkFollow: true }, rest, { create: true, truncate: true }, { write: true });
      const bytes = new TextEncoder().encode(text);
      let offset = 0;
      while (offset < bytes.length) {
        offset += Number(file.write(bytes.subarray(offset), BigInt(offset)));
      }
    } catch (err) {
      throw fsError(err, path);
    }
  },
  /** The names in a folder, sorted. */
  async list(path = ".") {
    if (!preopens) return (await nodeFs()).readdirSync(path).sort();
    const [dir, rest] = locate(path);
    try {
      const folder = rest === "." ? dir : dir.openAt({ symlinkFollow: true }, rest, { directory: true }, { read: true });
      const stream = folder.readDirectory();
      const names = [];
      for (let entry = stream.readDirectoryEntry(); entry; entry = stream.readDirectoryEntry()) names.push(entry.name);
      return names.sort();
    } catch (err) {
      throw fsError(err, path);
    }
  },
};

// --- the exports componentize-js binds ---------------------------------------------

function toContent(result) {
  if (result === undefined || result === null) return [];
  if (typeof result === "string") return [{ tag: "text", val: result }];
  if (result.__capstanJson !== undefined) return [{ tag: "json", val: JSON.stringify(result.__capstanJson) }];
  if (typeof result === "object" || typeof result === "number" || typeof result === "boolean") {
    return [{ tag: "json", val: JSON.stringify(result) }];
  }
  return [{ tag: "text", val: String(result) }];
}

function witError(payload) {
  const err = new Error(payload.val);
  err.payload = payload;
  return err;
}

function failExport(err) {
  const e = err instanceof ToolError ? err : asError(err);
  throw witError({ tag: e.kind, val: e.message || e.name });
}

// A call through the export: its result, or a promise of it for an async tool.
function callExport(t, input, ctx) {
  const context = { callId: ctx.callId, workspace: ctx.workspace, sessionId: ctx.sessionId };
  const result = runTool(t, input, context);
  return isPromise(result)
    ? result.then((r) => ({ content: toContent(r) }), failExport)
    : { content: toContent(result) };
}

/** The `capstan:plugin/tool` export. */
export const toolExport = {
  describe() {
    return [...tools.values()].map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: JSON.stringify(t.schema),
      hints: t.hints,
    }));
  },
  call(name, input, ctx) {
    try {
      return callExport(findTool(name), input, ctx);
    } catch (err) {
      return failExport(err);
    }
  },
};

/** The `capstan:plugin/hook` export. */
export const hookExport = {
  subscriptions() {
    return hooks.map((h) => ({ event: h.event, matcher: h.matcher }));
  },
  async handle(input) {
    try {
      const d = await handleEvent(input.event, input.payload);
      const decision = d.kind === "proceed" || d.kind === "allow" ? { tag: d.kind } : { tag: d.kind, val: d.value };
      return { decision, systemMessage: d.systemMessage };
    } catch (err) {
      console.error(err?.stack ?? String(err));
      const e = new Error(String(err?.message ?? err));
      e.payload = `${err?.name ?? "Error"}: ${err?.message ?? err}`;
      throw e;
    }
  },
};

/** The `capstan:plugin/skill` export. */
export const skillExport = {
  list() {
    return [...skills.values()].map((s) => ({
      name: s.name,
      description: s.description,
      whenToUse: s.whenToUse,
      argumentHint: s.argumentHint,
      userInvocable: s.userInvocable ?? true,
      modelInvocable: s.modelInvocable ?? true,
      allowedTools: s.allowedTools ?? [],
    }));
  },
  async load(name, args) {
    try {
      return await loadSkill(name, args);
    } catch (err) {
      const e = new Error(String(err?.message ?? err));
      e.payload = e.message;
      throw e;
    }
  },
  resource(name, path) {
    const s = skills.get(name);
    const value = s?.resources?.[path];
    if (value === undefined) {
      const e = new Error(`skill \`${name}\` has no resource \`${path}\``);
      e.payload = e.message;
      throw e;
    }
    return typeof value === "string" ? new TextEncoder().encode(value) : value;
  },
};
