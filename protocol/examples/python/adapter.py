"""The rewind-conformance driver protocol v1 over HTTP, mapped onto `rewind_impl`.

Usage: python3 adapter.py --listen 127.0.0.1:8765
"""

import argparse
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import rewind_impl as impl
from rewind_impl import DriverError, Refusal

SESSIONS: dict[str, impl.Session] = {}
SESSIONS_LOCK = threading.Lock()


def session(sid):
    with SESSIONS_LOCK:
        if sid not in SESSIONS:
            raise DriverError(404, "unknown_session", f"no open session `{sid}`")
        return SESSIONS[sid]


def refuse_nul(value, path=""):
    """No id or text can hold a NUL character (PostgreSQL's text refuses it): a request that
    carries one anywhere is a `bad_request`, answered before the database sees it."""
    if isinstance(value, str) and "\0" in value:
        raise DriverError(400, "bad_request", f"`{path or 'the request'}` holds a NUL character")
    if isinstance(value, dict):
        for key, item in value.items():
            refuse_nul(item, f"{path}.{key}" if path else key)
    if isinstance(value, list):
        for i, item in enumerate(value):
            refuse_nul(item, f"{path}[{i}]")


def need(body, *names):
    """The named fields of a JSON object, or a `bad_request` naming the first one missing."""
    for name in names:
        if not isinstance(body, dict) or name not in body:
            raise DriverError(400, "bad_request", f"missing field `{name}`")
    return [body[name] for name in names]


def attach(body):
    database, limits = need(body, "database", "limits")
    s = impl.Session(*need(database, "url"), *need(limits, "requestTimeoutMs"))
    sid = f"s-{uuid.uuid4().hex[:12]}"
    with SESSIONS_LOCK:
        SESSIONS[sid] = s
    return 201, {"sessionId": sid}


def detach(_, sid):
    session(sid)
    with SESSIONS_LOCK:
        SESSIONS.pop(sid).close()
    return 204, None


def rewind(b, sid):
    try:
        return 200, impl.rewind(session(sid), *need(b, "actor", "scopeId", "targetMessageId"))
    except Refusal as r:
        answer = {"outcome": "refused", "code": r.code, "message": r.message}
        return 200, answer | ({"operationId": r.operation_id} if r.operation_id else {})


ROUTES = {  # (method, path pattern) -> handler(body or query, session id)
    ("GET", r"/rewind-driver"): lambda *_: (200, {
        "protocol": "rewind-driver", "version": 1,
        "implementation": {"name": "python-example", "version": "0.1.0"}}),
    ("POST", r"/v1/sessions"): attach,
    ("DELETE", r"/v1/sessions/([^/]+)"): detach,
    ("POST", r"/v1/sessions/([^/]+)/rewind"): rewind,
    ("POST", r"/v1/sessions/([^/]+)/messages"): lambda b, sid: (201, impl.send_message(
        session(sid), *need(b, "actor", "scopeId", "content"))),
    ("POST", r"/v1/sessions/([^/]+)/recovery-points/prune"): lambda b, sid: (200, {
        "prunedIds": impl.prune_recovery_points(session(sid), *need(b, "agentId"))}),
    ("GET", r"/v1/sessions/([^/]+)/read-state"): lambda q, sid: (200, {
        "readState": impl.read_state(session(sid), *need(q, "scopeId", "userId"))}),
    ("POST", r"/v1/sessions/([^/]+)/sync"): lambda b, sid: (200, impl.sync_messages(
        session(sid), *need(b, "userId", "scopeId", "afterSeq", "limit"))),
    ("POST", r"/v1/sessions/([^/]+)/read"): lambda b, sid: (200, impl.read(session(sid), b)),
    ("POST", r"/v1/sessions/([^/]+)/events/take"): lambda _, sid: (200, {
        "events": session(sid).take_events()}),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every answer carries a Content-Length

    def handle_one(self):
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        for (method, pattern), handler in ROUTES.items():
            match = re.fullmatch(pattern, url.path)
            if method == self.command and match:
                break
        else:
            message = f"no route {self.command} {url.path}"
            return 404, {"error": {"code": "not_found", "message": message}}
        try:
            if self.command == "GET":
                arg = {k: v[0] for k, v in parse_qs(url.query).items()}
            else:
                arg = json.loads(raw or b"{}")
            refuse_nul(arg)
            return handler(arg, *match.groups())
        except DriverError as e:
            return e.status, {"error": {"code": e.code, "message": e.message}}
        except json.JSONDecodeError as e:
            return 400, {"error": {"code": "bad_request", "message": f"not JSON: {e}"}}
        except Exception as e:  # anything else failed outside the contract
            return 500, {"error": {"code": "internal", "message": f"{type(e).__name__}: {e}"}}

    def answer(self):
        status, body = self.handle_one()
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = answer

    def log_message(self, *args):  # quiet: the harness reports what matters
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:8765", help="HOST:PORT (port 0: any)")
    host, port = parser.parse_args().listen.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    print(f"listening on http://{host}:{server.server_address[1]}", flush=True)
    server.serve_forever()
