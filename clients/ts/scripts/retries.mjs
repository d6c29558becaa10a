// Writes src/gen/retries.ts from api/retries/retries.json, the one table
// of which calls both clients retry blindly (the Go client embeds the
// same file). Run by scripts/generate.sh after buf (which empties
// src/gen); make verify fails when the output is stale.
import { readFileSync, writeFileSync } from "node:fs";

const root = new URL("../../../", import.meta.url);
const table = JSON.parse(readFileSync(new URL("api/retries/retries.json", root), "utf8"));
const policies = Object.keys(table.policies);
const lines = Object.entries(table.methods).map(([m, p]) => {
  if (!policies.includes(p)) {
    throw new Error(`retries.json: ${m} has policy ${p}, not one of ${policies.join(", ")}`);
  }
  return `  ${m}: "${p}",`;
});
const doc = (s) => s.match(/.{1,72}(\s|$)/g).map((l) => ` * ${l.trimEnd()}`).join("\n");
const out = `// Generated from api/retries/retries.json by clients/ts/scripts/retries.mjs
// (make generate). Do not edit.

/** When a failed call is retried (RetryPolicy): ${policies.map((p) => `"${p}"`).join(" or ")}. */
export type CallRetry = ${policies.map((p) => `"${p}"`).join(" | ")};

/**
${doc(table.about)}
 *
${Object.entries(table.policies).map(([p, s]) => doc(`${p}: ${s}`)).join("\n *\n")}
 */
export const callRetry: Readonly<Record<string, CallRetry>> = {
${lines.join("\n")}
};
`;
writeFileSync(new URL("src/gen/retries.ts", new URL("../", import.meta.url)), out);
