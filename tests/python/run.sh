#!/usr/bin/env bash
# Runs tests/python/test_trino_client.py (Trino's Python client and its SQLAlchemy
# dialect), tests/python/test_statement_forms.py (every statement form) and
# tests/python/test_trino_docs.py (Trino's documented function examples)
# against a real cluster: a coordinator and 2 workers of the given binary;
# then tests/python/test_trino_https.py against a second cluster serving HTTPS with a
# CA made here by openssl and a password file (PBKDF2 entry).
#
#   tests/python/run.sh path/to/flotilla
#
# Creates a throwaway virtualenv (pip install trino sqlalchemy, from PyPI), so it needs
# network access to PyPI. Exits with the test's status; 0 with a message when python3
# is missing.
set -uo pipefail

if ! command -v python3 >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
        echo "python3 not found (CI=true: a missing service is a failure)" >&2
        exit 2
    fi
    echo "SKIPPED trino_python_client: python3 not found (Debian's python3 and python3-venv)"
    exit 0
fi
BIN=${1:?usage: $0 path/to/flotilla}
HERE=$(cd "$(dirname "$0")" && pwd)
WORKERS=2

# The binary may be replaced by a concurrent build; give it a moment to reappear.
for _ in $(seq 1 30); do
    [ -x "$BIN" ] && break
    sleep 1
done
if [ ! -x "$BIN" ]; then
    echo "no executable flotilla binary at $BIN" >&2
    exit 2
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

TMP=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-pyclient.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "creating virtualenv in $TMP/venv"
if ! python3 -m venv "$TMP/venv"; then
    echo "python3 -m venv failed (is the venv module installed?)" >&2
    exit 2
fi
PY=$TMP/venv/bin/python
if ! "$PY" -m pip install --quiet --disable-pip-version-check trino sqlalchemy; then
    echo "pip install trino sqlalchemy failed" >&2
    exit 2
fi
"$PY" -c 'import importlib.metadata as m; print("trino", m.version("trino"), "sqlalchemy", m.version("sqlalchemy"))'

# A coordinator prints "flotilla coordinator listening on SCHEME://HOST:PORT" first.
# Prints that URL once it appears in FILE (up to 10 s), nothing if process PID ends first.
coordinator_url() {
    local file=$1 pid=$2 line
    for _ in $(seq 1 100); do
        line=$(head -n 1 "$file" 2>/dev/null)
        case "$line" in
            *" listening on http"*) echo "${line##* listening on }"; return ;;
        esac
        if ! kill -0 "$pid" 2>/dev/null; then return; fi
        sleep 0.1
    done
}

# A data directory, so the files catalog keeps tables (test_statement_forms writes one);
# the built-in tpch spelled as the TPC-H queries the tests run spell it.
TPCH_BENCHMARK=(--tpch-column-naming STANDARD --tpch-double-type-mapping DECIMAL)
"$BIN" coordinator --bind 127.0.0.1:0 --data-dir "$TMP/data" "${TPCH_BENCHMARK[@]}" \
    >"$TMP/coordinator.out" 2>"$TMP/coordinator.err" &
PIDS+=($!)
URL=$(coordinator_url "$TMP/coordinator.out" "${PIDS[0]}")
if [ -z "$URL" ]; then
    echo "coordinator did not print its URL" >&2
    cat "$TMP/coordinator.out" "$TMP/coordinator.err" >&2
    exit 1
fi
echo "coordinator at $URL"

for i in $(seq 1 "$WORKERS"); do
    # No --files-allowed-locations: a worker takes its coordinator's data directory.
    "$BIN" worker --coordinator "$URL" --bind 127.0.0.1:0 >"$TMP/worker$i.out" 2>"$TMP/worker$i.err" &
    PIDS+=($!)
done

# Wait (at most 20 s) until GET /v1/node lists $WORKERS alive workers.
alive=0
for _ in $(seq 1 200); do
    alive=$("$PY" - "$URL" <<'PYEOF'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1] + "/v1/node", timeout=2) as r:
        print(sum(1 for n in json.load(r) if n.get("alive")))
except Exception:
    print(0)
PYEOF
)
    [ "$alive" -ge "$WORKERS" ] && break
    sleep 0.1
done
if [ "$alive" -lt "$WORKERS" ]; then
    echo "only $alive of $WORKERS workers alive after 20 s" >&2
    tail -n 20 "$TMP"/*.err >&2
    exit 1
fi
echo "$alive workers alive"

FLOTILLA_URL=$URL "$PY" "$HERE/test_trino_client.py"
status=$?
# Every statement form Trino documents, through the same client.
if [ "$status" -eq 0 ]; then
    FLOTILLA_URL=$URL "$PY" "$HERE/test_statement_forms.py"
    status=$?
fi
# Trino's documented function examples, with a pass count per document.
if [ "$status" -eq 0 ]; then
    FLOTILLA_URL=$URL "$PY" "$HERE/test_trino_docs.py"
    status=$?
fi
if [ "$status" -ne 0 ]; then
    echo "--- coordinator stderr (last 30 lines) ---" >&2
    tail -n 30 "$TMP/coordinator.err" >&2
    exit "$status"
fi

# --- The same client over HTTPS with a password, against a second cluster. -----------
if ! command -v openssl >/dev/null 2>&1; then
    echo "SKIPPED trino_python_client over HTTPS: openssl not found to make a test CA (Debian's openssl)"
    exit 0
fi
TLS=$TMP/tls
mkdir -p "$TLS"
(
    cd "$TLS" &&
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=flotilla test CA" &&
    openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj "/CN=localhost" &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >ext.cnf &&
    openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.crt -days 2 -extfile ext.cnf &&
    cat node.crt node.key >node.pem
) >"$TLS/openssl.log" 2>&1 || { echo "making the test certificates failed" >&2; cat "$TLS/openssl.log" >&2; exit 1; }
PASSWORD=pw-$RANDOM$RANDOM
# A PBKDF2 entry of Trino's password file (iterations:salt:hash, HMAC-SHA256).
"$PY" - "$PASSWORD" >"$TLS/password.db" <<'PYEOF'
import hashlib, os, sys
salt = os.urandom(16)
print("alice:1000:%s:%s" % (salt.hex(), hashlib.pbkdf2_hmac("sha256", sys.argv[1].encode(), salt, 1000).hex()))
PYEOF
SECRET=secret-$RANDOM$RANDOM
"$BIN" coordinator --bind 127.0.0.1:0 "${TPCH_BENCHMARK[@]}" --shared-secret "$SECRET" --https-cert "$TLS/node.pem" \
    --truststore "$TLS/ca.pem" --password-file "$TLS/password.db" >"$TMP/tls-coordinator.out" 2>"$TMP/tls-coordinator.err" &
PIDS+=($!)
TLS_PID=$!
HTTPS_URL=$(coordinator_url "$TMP/tls-coordinator.out" "$TLS_PID")
if [ -z "$HTTPS_URL" ] || [ "${HTTPS_URL#https://}" = "$HTTPS_URL" ]; then
    echo "the HTTPS coordinator did not print its URL" >&2
    cat "$TMP/tls-coordinator.err" >&2
    exit 1
fi
for i in $(seq 1 "$WORKERS"); do
    "$BIN" worker --coordinator "$HTTPS_URL" --bind 127.0.0.1:0 --shared-secret "$SECRET" \
        --https-cert "$TLS/node.pem" --truststore "$TLS/ca.pem" >"$TMP/tls-worker$i.out" 2>"$TMP/tls-worker$i.err" &
    PIDS+=($!)
done
alive=0
for _ in $(seq 1 200); do
    alive=$("$PY" - "$HTTPS_URL" "$TLS/ca.pem" "$PASSWORD" <<'PYEOF'
import base64, json, ssl, sys, urllib.request
try:
    req = urllib.request.Request(sys.argv[1] + "/v1/node")
    req.add_header("Authorization", "Basic " + base64.b64encode(("alice:" + sys.argv[3]).encode()).decode())
    with urllib.request.urlopen(req, timeout=2, context=ssl.create_default_context(cafile=sys.argv[2])) as r:
        print(sum(1 for n in json.load(r) if n.get("alive")))
except Exception:
    print(0)
PYEOF
)
    [ "$alive" -ge "$WORKERS" ] && break
    sleep 0.1
done
if [ "$alive" -lt "$WORKERS" ]; then
    echo "only $alive of $WORKERS HTTPS workers alive after 20 s" >&2
    tail -n 20 "$TMP"/tls-*.err >&2
    exit 1
fi
echo "HTTPS cluster at $HTTPS_URL with $alive workers"
# requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's `verify`, so
# with them set the client would not trust the test CA it is given.
env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE FLOTILLA_HTTPS_URL="$HTTPS_URL" FLOTILLA_CA="$TLS/ca.pem" \
    FLOTILLA_TEST_PASSWORD="$PASSWORD" "$PY" "$HERE/test_trino_https.py"
