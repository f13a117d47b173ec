#!/usr/bin/env bash
# The production build, as the image's build stage runs it (deploy/container/Dockerfile) and as
# test/deploy/production-install.test.ts runs it on a copy of the repository, so the two cannot drift.
#
#   deploy/container/build.sh <output folder>
#
# From the repository root: installs every dependency from the lockfile (`npm ci`, whose `prepare` runs
# `npm run build`: the dashboard bundle, then the service compiled into dist/), then keeps only the
# production dependencies (`npm prune --omit=dev`, then deploy/container/prune.sh: what no run loads) and copies
# what the service needs at run time into
# the output folder: package.json, package-lock.json, dist/ and node_modules/. `npm start` there runs
# `node --max-semi-space-size=32 dist/app/main.js`; nothing a devDependency provides is left.
#
# WITH_FFMPEG=false leaves the bundled ffmpeg binary out (about 70 MB): the local provider's audio and
# video models then fail with `encoder_unavailable`; text and images do not need it.
set -euo pipefail

out=${1:?usage: deploy/container/build.sh <output folder>}
cd "$(dirname "$0")/../.."

npm ci --no-audit --no-fund
# `prepare` built it; a prepare changed to build nothing must not give an image without the service.
test -f dist/app/main.js || { echo "dist/app/main.js is missing: npm run build did not run" >&2; exit 1; }
test -f dist/dashboard/dist/index.html || { echo "dist/dashboard/dist/index.html is missing" >&2; exit 1; }

# --workspaces=false: the client SDK (an npm workspace) is not part of the service.
npm prune --omit=dev --workspaces=false --no-audit --no-fund
rm -rf node_modules/@generation-service
# What no production run loads: other platforms' uWebSockets.js addons, source maps, TypeScript, docs (prune.sh).
bash deploy/container/prune.sh node_modules
if [ "${WITH_FFMPEG:-true}" = false ]; then
  rm -rf node_modules/@ffmpeg-installer/darwin-* node_modules/@ffmpeg-installer/linux-* node_modules/@ffmpeg-installer/win32-*
fi

mkdir -p "$out"
cp -a package.json package-lock.json dist node_modules "$out"/
echo "production build in $out: $(du -sh --apparent-size "$out" | cut -f1) of files, $(du -sh "$out" | cut -f1) on disk (dist $(du -sh --apparent-size dist | cut -f1), node_modules $(du -sh --apparent-size node_modules | cut -f1))"
