#!/usr/bin/env bash
# End-to-end suites: tests/e2e/browser.test.ts (Debian's chromium
# driven by playwright-core) and tests/e2e/worker.test.ts (the worker in
# workerd through `wrangler dev`, against PostgreSQL and Redis).
#
#   bash .ci/e2e.sh [vitest-json-report]
#
# .ci/run calls it after the integration step, with the servers of
# .ci/services.sh still running (TEST_PG_URL, TEST_PG_APP_URL, TEST_REDIS_URL
# exported). Run on its own, it starts (and stops) those servers itself.
# Needs root (or chromium already installed) and the npm registry for one
# pinned package (swagger-ui-dist, see below); downloads no browser build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

report="${1:-}"
_e2e_log() { printf '[e2e] %s\n' "$*" >&2; }

# --- Chromium from Debian's packages --------------------------------------
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    _e2e_log "$CHROMIUM is missing; install it (apt-get install chromium) or run as root"
    exit 1
  fi
  _e2e_log "installing chromium (Debian package)"
  apt-get update </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium </dev/null
  [ -x "$CHROMIUM" ] || { _e2e_log "chromium not found at $CHROMIUM after install"; exit 1; }
fi
"$CHROMIUM" --version 2>/dev/null | head -n 1 >&2 || true

# --- Swagger UI's assets, for /api/docs in a closed network -----------------
# /api/docs loads swagger-ui-dist from the CDN; the browser test routes those
# requests to a local copy. It is not among the project's dependencies, so a
# pinned version is fetched with npm and checked against its registry integrity.
SWAGGER_UI_VERSION=5.35.0
SWAGGER_UI_INTEGRITY='sha512-U06rpMtW9V3XPGOBeamTUSr0Z09jMX4IJuANpE/EZbAhw0G8CgwrzU4YmXkn/h0wCDNsXdGarTNNHC3sU8yVUQ=='
swagger_cache=node_modules/.cache/gatehouse-e2e
if [ ! -f node_modules/swagger-ui-dist/swagger-ui-bundle.js ] && [ ! -f "$swagger_cache/swagger-ui-dist/swagger-ui-bundle.js" ]; then
  _e2e_log "fetching swagger-ui-dist@$SWAGGER_UI_VERSION"
  mkdir -p "$swagger_cache"
  tarball="$swagger_cache/swagger-ui-dist-$SWAGGER_UI_VERSION.tgz"
  (cd "$swagger_cache" && npm pack "swagger-ui-dist@$SWAGGER_UI_VERSION" --silent --no-audit --no-fund >/dev/null </dev/null)
  actual="$(node -e 'const c=require("node:crypto");const f=require("node:fs");process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$tarball")"
  if [ "$actual" != "$SWAGGER_UI_INTEGRITY" ]; then
    _e2e_log "swagger-ui-dist integrity mismatch: $actual"
    rm -f "$tarball"
    exit 1
  fi
  rm -rf "$swagger_cache/swagger-ui-dist" && mkdir -p "$swagger_cache/swagger-ui-dist"
  tar -xzf "$tarball" -C "$swagger_cache/swagger-ui-dist" --strip-components=1
  rm -f "$tarball"
fi

# --- PostgreSQL + PgBouncer + Redis (when the caller has not started them) --
if [ -z "${TEST_PG_URL:-}" ] || [ -z "${TEST_PG_APP_URL:-}" ] || [ -z "${TEST_POOLER_APP_URL:-}" ] || [ -z "${TEST_REDIS_URL:-}" ]; then
  # shellcheck source=.ci/services.sh
  source .ci/services.sh
  trap services_stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  services_start
fi

# --- The suites ---------------------------------------------------------------
# npm run test:e2e: vitest's e2e project (vitest.config.ts).
args=(--reporter=default)
if [ -n "$report" ]; then
  args+=(--reporter=json "--outputFile.json=$report")
fi
npm run test:e2e -- "${args[@]}"
