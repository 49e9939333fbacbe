#!/usr/bin/env bash
# The official MCP conformance suite, client mode, against Bobbin's MCP
# client (internal/mcpconformance drives mcp.Manager the way the bot does).
#
#   - installs @modelcontextprotocol/conformance pinned (0.2.0-alpha.12, with
#     its lock file) from internal/mcpconformance/testdata/suite with npm ci;
#   - PATCH: the suite's dist/index.js imports globSync from node:fs, which
#     Node 20 lacks (added in Node 22). We rewrite that one import to take
#     globSync from the glob package (pinned in the same package.json; same
#     call shape, used only by the suite's tier-check command). The script
#     checks the patch applied and fails loudly if the suite's text changed;
#     on Node >= 22 nothing is patched;
#   - runs every client scenario the suite lists except the [extension]
#     ones, one at a time, and compares with baseline.txt: a scenario there
#     (with its reason) may fail; any other failure, or a baseline scenario
#     that now passes, fails this script.
#
# Usage: scripts/conformance.sh [scenario…]   (default: all non-extension)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
suite=internal/mcpconformance/testdata/suite
baseline=internal/mcpconformance/testdata/baseline.txt

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "conformance: node/npm not found: skipping the MCP conformance suite"
  exit 0
fi

if [ ! -d "$suite/node_modules" ] || [ "$suite/package-lock.json" -nt "$suite/node_modules/.package-lock.json" ]; then
  echo "conformance: installing the pinned suite (npm ci)"
  (cd "$suite" && npm ci --no-audit --no-fund --loglevel=error)
fi

entry="$suite/node_modules/@modelcontextprotocol/conformance/dist/index.js"
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 22 ] && ! grep -q '^import{globSync as a}from"glob";' "$entry"; then
  # Exactly the import the pinned version has; anything else is an error.
  orig='existsSync as i,globSync as a,mkdtempSync'
  if ! grep -qF "$orig" "$entry"; then
    echo "conformance: cannot patch $entry: its fs import changed (was the suite upgraded?)" >&2
    exit 1
  fi
  sed -i "2s/existsSync as i,globSync as a,mkdtempSync/existsSync as i,mkdtempSync/; 2s/^/import{globSync as a}from\"glob\";/" "$entry"
  echo "conformance: patched the suite for Node $node_major (globSync from the glob package)"
fi

bin=$(mktemp -d)/mcpconformance
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./internal/mcpconformance

if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  mapfile -t scenarios < <(node "$entry" list --client | sed -n 's/^  - \([^ ]*\) \[\(.*\)\]$/\1 \2/p' | grep -v ' extension$' | cut -d' ' -f1)
fi
declare -A expected
while read -r name reason; do
  [ -n "$name" ] && [ "${name#\#}" = "$name" ] && expected[$name]=$reason
done < "$baseline"

out=$(mktemp -d)
pass=0 fail=0 unexpected=0
start=$(date +%s)
for s in "${scenarios[@]}"; do
  log="$out/${s//\//_}.log"
  if (cd "$suite" && timeout 120 node "$root/$entry" client --command "$bin" --scenario "$s" --timeout 60000) >"$log" 2>&1 \
      && grep -q 'OVERALL: PASSED' "$log"; then
    pass=$((pass + 1))
    if [ -n "${expected[$s]+x}" ]; then
      echo "PASS $s (listed in the baseline: remove it)"; unexpected=$((unexpected + 1))
    else
      echo "PASS $s"
    fi
  else
    fail=$((fail + 1))
    if [ -n "${expected[$s]+x}" ]; then
      echo "FAIL $s (expected: ${expected[$s]})"
    else
      echo "FAIL $s"; unexpected=$((unexpected + 1))
      grep -E 'FAILURE|WARNING|Error|error' "$log" | sed 's/\x1b\[[0-9;]*m//g' | head -15 | sed 's/^/    /'
    fi
  fi
done
echo "conformance: ${#scenarios[@]} scenarios in $(( $(date +%s) - start ))s"
echo "conformance: $pass passed, $fail failed"
rm -rf "$out"
if [ "$unexpected" -gt 0 ]; then
  echo "conformance: $unexpected result(s) differ from $baseline" >&2
  exit 1
fi
