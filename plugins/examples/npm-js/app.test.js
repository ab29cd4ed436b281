import { test } from "node:test";
import assert from "node:assert/strict";

import { callTool, InvalidInput } from "./capstan.js";
import { behind } from "./app.js";

test("a range behind the latest version is noticed", () => {
  assert.equal(behind("^1.2.3", "2.0.0"), true);
  assert.equal(behind("^1.2.3", "1.9.0"), false);
  assert.equal(behind("^0.2.3", "0.3.0"), true);
  assert.equal(behind("~1.2.3", "1.2.9"), false);
  assert.equal(behind("~1.2.3", "1.3.0"), true);
  assert.equal(behind("1.2.3", "1.2.4"), true);
  assert.equal(behind(">=1.0.0", "9.0.0"), false);
});

test("a bad package name is invalid input", async () => {
  await assert.rejects(callTool("latest", { name: "Not A Name" }), InvalidInput);
});

test("a missing field is invalid input", async () => {
  await assert.rejects(callTool("latest", {}), (err) => err instanceof InvalidInput && /name/.test(err.message));
});
