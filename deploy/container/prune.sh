#!/usr/bin/env bash
# What the production node_modules holds that the service never loads, removed after `npm prune --omit=dev`
# (deploy/container/build.sh runs it in the folder it builds in; docs/build.md has the figures):
#
# - uWebSockets.js ships its native addon for every platform, architecture and Node ABI (113 MB): only the one
#   this Node loads is kept (binaries/uws_<platform>_<arch>_<abi>.node, the name its loader asks for; the image's
#   build and run stages use the same Node image). Its docs and the copies under dist/ go too.
# - Source maps, TypeScript sources and declarations (*.map, *.ts, *.mts, *.cts): nothing at run time reads
#   them, and Node 20 runs no TypeScript.
# - Markdown documents (READMEs, changelogs); licence files stay.
# - Bundlers' builds: a package without an `exports` map whose `main` is build/src (the OpenTelemetry packages)
#   is loaded by Node from build/src alone; its build/esm and build/esnext serve bundlers.
# - gpt-tokenizer: the service imports its ES modules (providers/token-count.ts), so its CommonJS copy, its
#   sources and its raw .tiktoken data (both builds embed the ranks) are not loaded.
#
#   deploy/container/prune.sh <node_modules folder>
set -euo pipefail

modules=${1:?usage: deploy/container/prune.sh <node_modules folder>}
test -d "$modules" || { echo "$modules is not a folder" >&2; exit 1; }

uws="$modules/uWebSockets.js"
if [ -d "$uws" ]; then
  keep="uws_$(node -p 'process.platform + "_" + process.arch + "_" + process.versions.modules').node"
  test -f "$uws/binaries/$keep" || { echo "uWebSockets.js has no $keep for this Node: nothing removed from it" >&2; keep=""; }
  if [ -n "$keep" ]; then
    find "$uws/binaries" -name 'uws_*.node' ! -name "$keep" -delete
    find "$uws/dist" -name 'uws_*.node' -delete
    rm -rf "$uws/docs"
  fi
fi

find "$modules" -type f \( -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' \) -delete
find "$modules" -type f \( -iname '*.md' -o -iname '*.markdown' \) ! -iname 'licen*' ! -iname 'copying*' -delete

# Packages Node loads from build/src only (no exports map): their bundler builds.
node -e '
const fs = require("node:fs"), path = require("node:path");
const root = process.argv[1];
const folders = fs.readdirSync(root).flatMap((name) => (name.startsWith("@") ? fs.readdirSync(path.join(root, name)).map((sub) => path.join(name, sub)) : [name]));
for (const folder of folders) {
  const dir = path.join(root, folder);
  let pkg;
  try { pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")); } catch { continue; }
  if (pkg.exports !== undefined || !/^(\.\/)?build\/src\//.test(pkg.main ?? "")) continue;
  for (const build of ["esm", "esnext"]) fs.rmSync(path.join(dir, "build", build), { recursive: true, force: true });
}
' "$modules"

tokenizer="$modules/gpt-tokenizer"
if [ -d "$tokenizer/esm" ]; then
  rm -rf "$tokenizer/cjs" "$tokenizer/src" "$tokenizer/data"
fi
