"""A small OpenAI-compatible chat-completions server on loopback that answers from the real
embedded model (test code, not product). Knobs let tests make it fail or drop logprobs."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from derivaudit.models.base import Prompt


class ModelServer:
    def __init__(self, backend, *, fail_first: int = 0, fail_status: int = 503, no_logprobs: bool = False,
                 max_top_logprobs: int = 20, die_after: int | None = None):
        self.backend = backend
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.no_logprobs = no_logprobs
        self.max_top_logprobs = max_top_logprobs
        self.requests: list[dict] = []
        self.answered = 0
        self.die_after = die_after  # answer this many requests, then go away as a killed node does
        self.dead = threading.Event()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    if server.die_after is not None and server.answered >= server.die_after:
                        if not server.dead.is_set():
                            server.dead.set()
                            threading.Thread(target=server.kill, daemon=True).start()
                        self.close_connection = True
                        return  # no answer: the connection drops mid-request
                    server.requests.append(body)
                    failing = len(server.requests) <= server.fail_first
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "not found"})
                if failing:
                    return self._send(server.fail_status, {"error": "overloaded"})
                k = body.get("top_logprobs") or 0
                if k > server.max_top_logprobs:
                    return self._send(400, {"error": f"top_logprobs > {server.max_top_logprobs}"})
                msgs = body["messages"]
                system = next((m["content"] for m in msgs if m["role"] == "system"), None)
                user = next(m["content"] for m in msgs if m["role"] == "user")
                prompt = Prompt(shared="", task=user, system=system)
                with server.lock:  # one model, one request at a time
                    if body.get("max_tokens") == 1 and body.get("logprobs"):
                        top = server.backend.top_logprobs([prompt], k)[0]
                        content = top[0][0]
                        logprobs = {"content": [{"token": top[0][0], "logprob": top[0][1],
                                                 "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}]}
                    else:
                        content = server.backend.generate([prompt], max_new_tokens=body.get("max_tokens", 64))[0]
                        logprobs = None
                choice = {"index": 0, "message": {"role": "assistant", "content": content},
                          "finish_reason": "length"}
                if logprobs is not None and not server.no_logprobs:
                    choice["logprobs"] = logprobs
                with server.lock:
                    server.answered += 1
                self._send(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                                 "choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 1}})

            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def kill(self):
        """Stop listening: later connections are refused, as on a node that died."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def __exit__(self, *exc):
        if not self.dead.is_set():
            self.kill()
