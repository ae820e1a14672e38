"""A local HTTP server that speaks the chat-completions protocol and answers from a
script, so the agent is tested end to end over a real socket without a real model.

Each scripted step is ``(status, reply)``: ``reply`` is the assistant text for a 200, an
error message otherwise; ``("sleep", seconds)`` answers only after a delay (a slow
endpoint); ``("raw", body)`` sends ``body`` as the JSON response as it is. The last step
repeats. Every request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
    def __init__(self, script: list[tuple[Any, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    n = len(server.requests) - 1
                    step = server.script[min(n, len(server.script) - 1)]
                kind, value = step
                if kind == "sleep":
                    time.sleep(value)
                    kind, value = 200, "late"
                if kind == "raw":
                    return self._send(200, value)
                if kind != 200:
                    return self._send(kind, {"error": {"message": value, "type": "scripted"}})
                return self._send(
                    200,
                    {
                        "id": f"chatcmpl-{n}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": value},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": 11 * len(body.get("messages", [])),
                            "completion_tokens": len(value.split()),
                            "total_tokens": 0,
                        },
                    },
                )

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # shutdown() waits for the loop's next poll: 0.5 s a server at the default interval
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
