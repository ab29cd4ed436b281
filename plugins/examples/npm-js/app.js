// Latest versions from the npm registry, and which dependencies of a
// package.json are behind. Shows a JavaScript tool using the network
// (fetch) and files under grants.
import { tool, fs, env, InvalidInput, Failed, log } from "./capstan.js";

const NAME = /^(@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;

function registry() {
  return (env("npm_config_registry") || "https://registry.npmjs.org").replace(/\/+$/, "");
}

export async function latest(name) {
  if (!NAME.test(name)) throw new InvalidInput(`field \`name\`: ${JSON.stringify(name)} is not an npm package name`);
  const response = await fetch(`${registry()}/${name.replace("/", "%2f")}/latest`);
  if (response.status === 404) throw new Failed(`no package called ${name} on the registry`);
  if (!response.ok) throw new Failed(`the registry answered ${response.status} for ${name}`);
  const body = await response.json();
  return body.version;
}

// The leading version numbers of a range such as ^1.2.3 or ~0.4.
function numbers(range) {
  const match = /(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(range);
  return match ? match.slice(1).map((n) => Number(n ?? 0)) : null;
}

/**
 * Whether `version` is newer than every version `range` accepts: for
 * `^1.2.3` a new major (for `^0.2.3` a new minor), for `~1.2.3` a new minor,
 * for an exact version any newer one.
 */
export function behind(range, version) {
  const wanted = numbers(range);
  const have = numbers(version);
  if (!wanted || !have) return false;
  const kind = range.trim()[0];
  let fixed = 3;
  if (kind === "^") fixed = wanted[0] === 0 ? 2 : 1;
  else if (kind === "~") fixed = 2;
  else if (kind === ">" || kind === "*") return false;
  for (let i = 0; i < 3; i++) {
    if (have[i] !== wanted[i]) return i < fixed && have[i] > wanted[i];
  }
  return false;
}

tool({
  name: "latest",
  description: "The latest published version of an npm package.",
  input: { name: { type: "string", description: "The package name, such as `left-pad` or `@scope/pkg`." } },
  readOnly: true,
  openWorld: true,
  async run({ name }) {
    return { name, version: await latest(name) };
  },
});

tool({
  name: "outdated",
  description: "Lists the dependencies of a package.json in the workspace whose range is behind the latest version.",
  input: { path: { type: "string", default: "package.json", description: "The package.json to read, relative to the workspace." } },
  readOnly: true,
  openWorld: true,
  async run({ path = "package.json" }) {
    let manifest;
    try {
      manifest = JSON.parse(await fs.readText(path));
    } catch (err) {
      if (err instanceof SyntaxError) throw new InvalidInput(`${path} is not valid JSON: ${err.message}`);
      throw err;
    }
    const deps = { ...manifest.dependencies, ...manifest.devDependencies };
    const rows = [];
    for (const [name, range] of Object.entries(deps)) {
      const version = await latest(name);
      if (behind(range, version)) rows.push({ name, range, latest: version });
    }
    log("info", `checked ${Object.keys(deps).length} dependencies of ${path}`);
    return rows;
  },
});
