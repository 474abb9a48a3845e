#!/usr/bin/env bash
# Create or refresh .venv, start armada-server with embedded defaults (gRPC on
# localhost:50051, SQLite in the user's data directory, the local executor running jobs as
# local processes), and demonstrate it: a gang submitted with the `armada` CLI and another
# with the Python client, each followed through its events to the end.
#
#   scripts/serve.sh          demo, then keep serving until Ctrl-C
#   scripts/serve.sh --demo   demo, then stop the server and exit (non-zero if the demo failed)
#
# Extra arguments go to armada-server, e.g. `scripts/serve.sh --nodes 2x4x8Gi`.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" --inexact --package armada-server
demo_only=0
if [ "${1:-}" = "--demo" ]; then demo_only=1; shift; fi
# The server says where it listens (--ready-file), wherever the ports were set: arguments,
# --config file or defaults.
run_dir="$(mktemp -d -t armada-serve.XXXXXX)"
log="$run_dir/armada-server.log"
ready="$run_dir/ready.json"
echo "==> starting armada-server (log: $log)" >&2
.venv/bin/armada-server --ready-file "$ready" "$@" >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 1 300); do
  [ -s "$ready" ] && break
  if ! kill -0 $server 2>/dev/null; then cat "$log" >&2; echo "armada-server did not start" >&2; exit 1; fi
  sleep 0.1
done
[ -s "$ready" ] || { cat "$log" >&2; echo "armada-server did not start in 30s" >&2; exit 1; }
awk '/ listening on /{shown=1; print; next} shown && /^  /{print; next} {shown=0}' "$log"
{ read -r grpc; read -r web_url; } < <(.venv/bin/python -c \
  'import json, sys; r = json.load(open(sys.argv[1])); print(r["grpc"]); print(r["http"] or "")' \
  "$ready")
export ARMADA_URL="$grpc"
echo "==> the demo talks to armada-server at $ARMADA_URL" >&2

status=0
echo "==> armada CLI: a gang of 3 (examples/standalone/gang.yaml)" >&2
.venv/bin/armada queue get demo >/dev/null 2>&1 || .venv/bin/armada queue create demo
job_set="gang-demo-$(date +%s)"
.venv/bin/armada submit examples/standalone/gang.yaml --job-set "$job_set" &&
  .venv/bin/armada watch demo "$job_set" --exit-if-inactive --fail-on-failure || status=1
echo "==> Python client: a gang of 2 (examples/standalone/submit_gang.py)" >&2
.venv/bin/python examples/standalone/submit_gang.py --url "$ARMADA_URL" || status=1

if [ $demo_only = 1 ]; then
  [ $status = 0 ] && echo "==> demo succeeded" >&2 || echo "==> demo FAILED" >&2
  exit $status
fi
echo "==> armada-server keeps serving on $ARMADA_URL (Ctrl-C stops it)" >&2
if [ -n "$web_url" ]; then
  echo "    web UI: ${web_url}queues (the demo's jobs are in queue 'demo')" >&2
fi
echo "    try:" >&2
echo "    .venv/bin/armada queue list; .venv/bin/armada watch demo $job_set" >&2
wait $server
