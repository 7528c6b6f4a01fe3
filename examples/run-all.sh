#!/usr/bin/env bash
# Packs tablequeue as it would be published, installs the tarball into examples/ next to the
# examples' own dependencies (examples/package-lock.json), typechecks the examples under strict
# settings and runs each one to completion against the servers named by POSTGRES_URL,
# MARIADB_URL and NATS_URL (defaults: the local ones). Run from a checkout whose own
# dependencies are installed (npm ci): npm pack builds with its TypeScript.
#
# better-sqlite3 is not among the examples' dependencies: Node.js finds the checkout's own copy
# in ../node_modules, as it finds any package in a parent folder's node_modules. Building it
# again from source for examples/ took 2 min 16 s on the 2-core CI machine, where no prebuilt
# binary can be downloaded.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -d ../node_modules/better-sqlite3 ]; then
  echo "run-all.sh: install the checkout's dependencies first (npm ci in $(cd .. && pwd))" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd .. && npm pack --json --pack-destination "$work" >"$work/pack.json")
tarball="$work/$(node -p "require(process.argv[1])[0].filename" "$work/pack.json")"

npm ci --no-audit --no-fund
npm install --no-save --no-audit --no-fund "$tarball"

rm -rf dist
npx tsc -p tsconfig.json
npx tsc -p tsconfig.declarations.json

export QUICKSTART_DB="$work/quickstart.db"
for program in dist/*.js; do
  echo "== ${program#dist/}"
  timeout 120 node "$program"
done
echo "examples: all ran to completion"
