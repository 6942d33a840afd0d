"""Serve a GGUF model with llama.cpp's own server code, from the `xllamacpp` wheel (a
prebuilt llama-server, no compiler needed):

    python scripts/serve_xllamacpp.py MODEL.gguf PORT [CHAT_TEMPLATE.jinja]

Listens on 127.0.0.1:PORT (`/v1/chat/completions`, `/v1/models`) until SIGTERM/SIGINT.
The same as `llama-server -m MODEL.gguf --port PORT --jinja [--chat-template-file T]`.
"""

from __future__ import annotations

import signal
import sys

import xllamacpp as xlc


def main() -> None:
    params = xlc.CommonParams()
    params.model.path = sys.argv[1]
    params.hostnames = ["127.0.0.1"]
    params.port = int(sys.argv[2])
    params.use_jinja = True
    if len(sys.argv) > 3:
        with open(sys.argv[3], encoding="utf-8") as f:
            params.chat_template = f.read()
    params.n_ctx = 4096
    params.n_parallel = 1
    # One thread: on a busy 2-core machine, two spin-waiting threads are slower.
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    server = xlc.Server(params)
    print("listening", server.listening_address, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


if __name__ == "__main__":
    main()
