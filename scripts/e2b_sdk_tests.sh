#!/usr/bin/env bash
# E2B's own SDK tests, unmodified, against this service: how close "E2B to the letter"
# is. Not part of `make test`: the tests live in E2B's repository
# (packages/python-sdk/tests and packages/js-sdk/tests of github.com/e2b-dev/E2B),
# which CI cannot download.
#
#   scripts/e2b_sdk_tests.sh E2B_CHECKOUT [PYTEST TARGETS...]
#   SDK=js scripts/e2b_sdk_tests.sh E2B_CHECKOUT [VITEST FILTERS...]
#
# SDK=js: the JavaScript SDK's tests (vitest), run from the checkout's own sources
# (packages/js-sdk/src, as its tests import them) with the dependencies of its
# package.json plus vitest, dotenv, msw and error-stack-parser-es, installed from npm into $WORK/js-deps the
# first time. Its vitest configuration needs browser packages the sandbox tests do
# not use, so a configuration with the same options as its `unit` project runs them.
# Default: tests/sandbox. The log is $WORK/run-js.log.
#
# E2B_CHECKOUT: a checkout of e2b-dev/E2B at the SDK's release tag (e.g.
# @e2b/python-sdk@2.45.1). A virtualenv with that SDK and the tests' packages is made
# in $WORK/venv the first time (e2b==$E2B_VERSION pytest pytest-asyncio pytest-xdist
# pytest-timeout python-dotenv). The service runs from this checkout on $PORT with the
# Docker provider, a data folder of its own and the pool off; the tests reach it by
# E2B's environment variables only. Defaults: the sandbox-facing tests (tests/sync,
# tests/async, tests/shared/git). The log is $WORK/run.log.
#
# The tests reach sandbox ports at https://PORT-ID.e2b.localhost (port 443), as on E2B,
# where TLS ends at the edge: scripts/tls_edge.py stands in for that edge (a
# deployment's ingress) on 127.0.0.1:443 when the port is free (TLS_EDGE=0: none),
# and SSL_CERT_FILE makes the tests trust it.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
E2B=$(cd "${1:?usage: $0 E2B_CHECKOUT [TARGETS...]}" && pwd)
shift
WORK=${WORK:-/var/tmp/siesta-e2b-sdk-tests}
PORT=${PORT:-18000}
E2B_VERSION=${E2B_VERSION:-2.45.1}
TOKEN="e2b_$(printf 'a1%.0s' {1..20})" # the form the SDKs validate: e2b_ and 40 hex
SHA=$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)

# E2B sandboxes reach the internet by default: the whole public address space (the
# egress proxy still refuses private, loopback and metadata addresses).
EGRESS_ALLOW=${EGRESS_ALLOW:-0.0.0.0/0,::/0}
mkdir -p "$WORK/data"
rm -f "$WORK/edge-ca.pem"
if [ "${SDK:-python}" = js ]; then
  JS="$WORK/js"
  rm -rf "$JS" && mkdir -p "$JS"
  cp -r "$E2B/packages/js-sdk/"{src,tests,tsconfig.json,package.json} "$JS/"
  if [ ! -d "$WORK/js-deps/node_modules/vitest" ]; then
    mkdir -p "$WORK/js-deps"
    node -e '
      const sdk = require(process.argv[1]);
      const dev = sdk.devDependencies;
      // error-stack-parser-es: bundled into the published package, imported by src.
      const wanted = ["vitest", "dotenv", "msw", "error-stack-parser-es"];
      const deps = { ...sdk.dependencies };
      for (const name of wanted) deps[name] = dev[name];
      console.log(JSON.stringify({ name: "e2b-sdk-tests", private: true, dependencies: deps }));
    ' "$E2B/packages/js-sdk/package.json" >"$WORK/js-deps/package.json"
    (cd "$WORK/js-deps" && npm install --no-audit --no-fund --loglevel=error)
  fi
  ln -s "$WORK/js-deps/node_modules" "$JS/node_modules"
  cat >"$JS/vitest.config.mts" <<'CONFIG'
import { defineConfig } from 'vitest/config'
// The options of the SDK's own `unit` project (vitest.config.mts), for its sandbox tests.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    isolate: true,
    globals: false,
    testTimeout: 60_000,
    environment: 'node',
    setupFiles: ['tests/globalFetchFallback.setup.ts'],
    deps: { interopDefault: true },
  },
})
CONFIG
else
  rm -rf "$WORK/tests" && cp -r "$E2B/packages/python-sdk/tests" "$WORK/tests"
  cp "$E2B/packages/python-sdk/pytest.ini" "$WORK/"
fi
if [ "${SDK:-python}" = python ] && [ ! -x "$WORK/venv/bin/python" ]; then
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q "e2b==$E2B_VERSION" pytest pytest-asyncio pytest-xdist \
    pytest-timeout python-dotenv
fi

(
  cd "$REPO"
  SIESTA_DATA_DIR="$WORK/data" \
    SIESTA_DEPLOYMENT_ID=e2b-sdk-tests \
    SIESTA_PROVIDER__TYPE=docker \
    SIESTA_POOL__ENABLED=false \
    SIESTA_TOKENS="[{\"name\": \"e2b-tests\", \"sha256\": \"$SHA\", \"scopes\": [\"sandbox\"], \"org\": \"e2b-tests\"}]" \
    SIESTA_E2B__PORTS_DOMAIN=e2b.localhost \
    SIESTA_EGRESS__ALLOW="$EGRESS_ALLOW" \
    SIESTA_HTTP__DRAIN_SECONDS=5 \
    exec .venv/bin/siesta-runtime serve --host 127.0.0.1 --port "$PORT"
) >"$WORK/data/service.log" 2>&1 &
SERVICE=$!
EDGE=
trap 'kill $SERVICE $EDGE 2>/dev/null; wait $SERVICE 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null || {
  echo "the service did not start: $WORK/data/service.log" >&2
  exit 1
}

if [ "${TLS_EDGE:-1}" = 1 ]; then
  getent hosts probe.e2b.localhost >/dev/null || {
    echo "*.e2b.localhost does not resolve: install libnss-myhostname (or TLS_EDGE=0)" >&2
    exit 1
  }
  "$REPO/.venv/bin/python" "$REPO/scripts/tls_edge.py" e2b.localhost "$PORT" "$WORK/edge-ca.pem" \
    >"$WORK/data/edge.log" 2>&1 &
  EDGE=$!
  for _ in $(seq 40); do [ -s "$WORK/edge-ca.pem" ] && break; sleep 0.25; done
  [ -s "$WORK/edge-ca.pem" ] || {
    echo "the TLS edge did not start (port 443 taken?): $WORK/data/edge.log" >&2
    exit 1
  }
  BUNDLE=$("$REPO/.venv/bin/python" -c 'import certifi; print(certifi.where())')
  cat "$BUNDLE" "$WORK/edge-ca.pem" >"$WORK/trust.pem"
  export SSL_CERT_FILE="$WORK/trust.pem" NODE_EXTRA_CA_CERTS="$WORK/edge-ca.pem"
fi

export E2B_API_URL="http://127.0.0.1:$PORT/e2b"
export E2B_SANDBOX_URL="http://127.0.0.1:$PORT/e2b/envd"
export E2B_API_KEY="$TOKEN"
export E2B_DOMAIN=e2b.localhost
unset E2B_DEBUG E2B_ACCESS_TOKEN # E2B_DEBUG would bypass the control plane
set +e
if [ "${SDK:-python}" = js ]; then
  [ $# -eq 0 ] && set -- tests/sandbox
  cd "$JS"
  ./node_modules/.bin/vitest run --maxWorkers "${JOBS:-4}" --reporter verbose "$@" 2>&1 |
    tee "$WORK/run-js.log"
  exit "${PIPESTATUS[0]}"
fi
[ $# -eq 0 ] && set -- tests/sync tests/async tests/shared/git
cd "$WORK"
"$WORK/venv/bin/python" -m pytest -p no:cacheprovider -q -rA --timeout 120 -n "${JOBS:-4}" "$@" \
  2>&1 | tee "$WORK/run.log"
exit "${PIPESTATUS[0]}"
