#!/usr/bin/env bash
# The whole test suite. Does its own set-up:
#   - installs the pinned MCP test peers with npm (when node is on PATH);
#   - when REDIS_URL is unset, starts a throwaway redis-server on a free port
#     (when one is on PATH) and points the tests at it; otherwise tests fall
#     back to the in-process Redis and say so.
# Extra arguments go to `go test` (default: -race ./...).
set -euo pipefail
cd "$(dirname "$0")/.."

peers=mcp/testdata/mcp-peers
if [ -f "$peers/package-lock.json" ]; then
  if command -v npm >/dev/null 2>&1; then
    if [ ! -d "$peers/node_modules" ] || [ "$peers/package-lock.json" -nt "$peers/node_modules/.package-lock.json" ]; then
      echo "test.sh: installing MCP test peers (npm ci)"
      (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  else
    echo "test.sh: npm not found: tests that need the MCP npm peers will skip"
  fi
fi

redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  if [ -n "${redis_dir:-}" ]; then rm -rf "$redis_dir"; fi
}
trap cleanup EXIT

if [ -z "${REDIS_URL:-}" ] && command -v redis-server >/dev/null 2>&1; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 16379)
  redis_dir=$(mktemp -d)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$redis_dir" \
    --logfile "$redis_dir/redis.log" >/dev/null 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 50); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
    sleep 0.1
  done
  export REDIS_URL="redis://127.0.0.1:$port/0"
  echo "test.sh: throwaway redis-server at $REDIS_URL"
elif [ -z "${REDIS_URL:-}" ]; then
  echo "test.sh: no redis-server on PATH and REDIS_URL unset: tests use the in-process Redis"
fi

if [ $# -eq 0 ]; then set -- -race ./...; fi
go test "$@"
