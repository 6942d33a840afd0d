"""A recording proxy for an OpenAI-compatible server: every request body and the status
of its answer go to a JSON-lines file; requests and answers pass through unchanged.

    python scripts/record_proxy.py UPSTREAM_BASE PORT LOG.jsonl
    # e.g. http://127.0.0.1:8391 8392 /tmp/bodies.jsonl, then use http://127.0.0.1:8392/v1

Used by scripts/local_model.sh to record what threadlog sends a real server (the
fixtures under tests/fixtures/wire/recorded/ come from it). Streams are relayed line by
line, so streaming clients see tokens as they come.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def main(upstream: str, port: int, log_path: str) -> None:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _relay(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() in (
                "content-type", "authorization", "accept")}
            request = urllib.request.Request(
                upstream.rstrip("/") + self.path, data=raw, headers=headers, method=method
            )
            try:
                response = urllib.request.urlopen(request, timeout=900)
                status = response.status
            except urllib.error.HTTPError as e:
                response, status = e, e.code
            head = b""
            self.send_response(status)
            for k, v in response.headers.items():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            while True:
                line = response.readline()
                if not line:
                    break
                if len(head) < 4000:
                    head += line
                self.wfile.write(line)
                self.wfile.flush()
            if raw is not None:
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                record = {
                    "path": self.path,
                    "status": status,
                    "request": body,
                    "response_head": head.decode("utf-8", "replace"),
                }
                with lock, open(log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")

        def do_GET(self) -> None:
            self._relay("GET")

        def do_POST(self) -> None:
            self._relay("POST")

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
