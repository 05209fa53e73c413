"""The dashboard's web server: Python's own `http.server` (threads), a JSON API over
`SweepView`, a static page and plotly.js served from the installed `plotly` package (no CDN:
it works offline on a cluster head).

Security: binds 127.0.0.1 by default and refuses any other address unless `allow_remote`;
then every request must carry the token (`?token=` once, then a cookie; or the
`X-Sweeper-Token` header). On loopback, requests whose Host header is not a loopback name
are refused (a web page elsewhere cannot reach the dashboard through DNS rebinding). Every
response forbids other origins' scripts (Content-Security-Policy); the API only reads.
"""

from __future__ import annotations

import gzip
import hmac
import importlib.util
import ipaddress
import json
import os
import secrets
import sys
import threading
import time
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from sweeper.numbers import check_int, shown
from sweeper.results.errors import ResultsInputError, one_line

from ..errors import AnalysisInputError
from .data import TABLE_PAGE, SweepView
from .params import MAX_MIN_SEEDS, MAX_OFFSET, MAX_TABLE_PAGE, MAX_TRIAL_IDS, Params

STATIC = Path(__file__).with_name("static")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")
COOKIE = "sweeper_dashboard_token"


def plotly_js() -> Path:
    """plotly.js as the `plotly` package ships it (MIT), found without importing plotly."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise AnalysisInputError("the dashboard needs the plotly package for its plotting "
                                 "library (pip install plotly); it is a dependency of sweeper")
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    if not path.exists():
        raise AnalysisInputError(f"plotly.js not found at {path}; reinstall plotly")
    return path


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


MAX_VIEWS = 16  # sweeps whose read state (summary, trials) a server keeps at once


class Dashboard:
    """The state shared by the server's threads: the results root and its sweeps' views."""

    def __init__(self, results: str, sweep: str | None, token: str | None):
        from sweeper.results.reading import list_sweeps

        from ..load import resolve_root

        self.fs, self.root = resolve_root(results)
        self.available = lambda: list_sweeps(self.fs, self.root)
        found = self.available()
        if sweep is not None:  # it may not exist yet: a sweep about to start is shown as it lands
            from sweeper.results import check_sweep_name

            check_sweep_name(sweep, "SWEEP")
        self.named = sweep
        self.first = sweep or self.preferred(found)
        self.token = token
        self.views: dict[str, SweepView] = {}
        self.lock = threading.Lock()
        self.plotly = plotly_js()
        self._plotly_gz: bytes | None = None

    def preferred(self, found: list[str]) -> str | None:
        """The sweep to open: the one named on the command line, else the one whose driver is
        running, else the most recently updated (its progress file, else its manifest)."""
        if self.named:
            return self.named
        from sweeper.results.reading import read_manifest
        from sweeper.results.summary import driver_state, read_progress

        def recency(name: str) -> tuple[bool, str]:
            folder = f"{self.root}/{name}"
            progress = read_progress(self.fs, folder)
            updated = (progress or {}).get("updated") or (
                read_manifest(self.fs, folder, reader=True) or {}).get("updated")
            return driver_state(progress)[0] == "running", str(updated or "")

        return max(found, key=recency, default=None)

    def view(self, name: str | None) -> SweepView:
        from sweeper.results import check_sweep_name

        if not name:
            raise AnalysisInputError("sweep: required; allowed: a sweep name (see /api/sweeps)")
        check_sweep_name(name, "sweep")
        with self.lock:  # the most recently asked MAX_VIEWS: made-up names cannot grow it
            view = self.views.pop(name, None) or SweepView(self.fs, self.root, name)
            self.views[name] = view
            while len(self.views) > MAX_VIEWS:
                del self.views[next(iter(self.views))]
            return view

    def plotly_gz(self) -> bytes:
        if self._plotly_gz is None:
            self._plotly_gz = gzip.compress(self.plotly.read_bytes(), 6)
        return self._plotly_gz


class Handler(BaseHTTPRequestHandler):
    server_version = "sweeper-dashboard"
    dashboard: Dashboard  # set on the class made per server

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet by default
        if os.environ.get("SWEEPER_DASHBOARD_LOG"):
            super().log_message(format, *args)

    # ---------------------------------------------------------------- plumbing
    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        for k, v in {**getattr(self, "_auth_headers", {}), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data, status: int = 200) -> None:
        body = json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
        self._send(status, body, "application/json", {"Cache-Control": "no-store"})

    def _error(self, status: int, message: str) -> None:
        self._json({"error": message}, status)

    def _authorised(self, query: dict) -> tuple[bool, dict[str, str]]:
        """Host check on loopback; the token when the server was opened to other hosts."""
        d = self.dashboard
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        if d.token is None:
            return host in LOOPBACK_NAMES, {}
        given = (query.get("token", [None])[0] or self.headers.get("X-Sweeper-Token")
                 or _cookie(self.headers.get("Cookie"), COOKIE))
        ok = given is not None and hmac.compare_digest(given.encode(), d.token.encode())
        headers = {}
        if ok and "token" in query:
            headers["Set-Cookie"] = f"{COOKIE}={d.token}; HttpOnly; SameSite=Strict; Path=/"
        return ok, headers

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        ok, headers = self._authorised(query)
        if not ok:
            self._error(HTTPStatus.FORBIDDEN, "forbidden: give the dashboard's token"
                        if self.dashboard.token else "forbidden: not a loopback Host")
            return
        self._auth_headers = headers  # the token's cookie, on whatever answers the request
        try:
            self._route(url.path, query, headers)
        except ResultsInputError as exc:  # the analysis' and the contract's (a sweep name)
            self._error(HTTPStatus.BAD_REQUEST, one_line(str(exc)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception:  # noqa: BLE001 - one request fails, the server goes on
            import traceback

            traceback.print_exc(file=sys.stderr)  # the text stays in the server's log
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR,
                        "internal error (the dashboard's terminal shows it)")

    def _route(self, path: str, query: dict, headers: dict[str, str]) -> None:
        d = self.dashboard
        params = Params(path, query) if path.startswith("/api/") else None
        arg = params.text if params is not None else None

        if path in ("/", "/index.html"):
            body = (STATIC / "index.html").read_bytes()
            self._send(200, body, TYPES[".html"], {**headers, "Cache-Control": "no-store"})
        elif path.startswith("/static/"):
            name = path[len("/static/"):]
            if name == "plotly.min.js":
                self._plotly()
                return
            file = STATIC / name
            if "/" in name or name.startswith(".") or not file.is_file():
                self._error(HTTPStatus.NOT_FOUND, "not found")
                return
            self._send(200, file.read_bytes(), TYPES.get(file.suffix, "text/plain"),
                       {"Cache-Control": "no-cache"})
        elif path == "/api/sweeps":
            found = d.available()
            first = d.preferred(found)
            self._json({"sweeps": sorted({*found, *([first] if first else [])}),
                        "first": first})
        elif path == "/api/state":
            self._json(d.view(arg("sweep")).state())
        elif path == "/api/phase":
            view = d.view(arg("sweep"))
            x, y = (params.required(a, "a column of the sweep (see /api/state's axes)")
                    for a in ("x", "y"))
            facet = arg("facet") or None
            self._json(view.phase(x, y, None if facet == "none" else facet, arg("outcome"),
                                  params.integer("min_seeds", 3, 1, MAX_MIN_SEEDS)))
            view.warm()  # after the first view: failed trials and a search need the trials
        elif path == "/api/cell":
            conditions = params.conditions("cell")
            view = d.view(arg("sweep"))
            self._json(view.cell(conditions, _metrics(view, arg("metrics")),
                                 arg("where") or None))
        elif path == "/api/failed":
            self._json(d.view(arg("sweep")).failed())
        elif path == "/api/search":
            self._json(d.view(arg("sweep")).search())
        elif path == "/api/trials":
            view = d.view(arg("sweep"))
            self._json(view.table(arg("where"), arg("sort") or None,
                                  params.choice("order", ("asc", "desc")) == "desc",
                                  params.integer("offset", 0, 0, MAX_OFFSET),
                                  params.integer("limit", TABLE_PAGE, 1, MAX_TABLE_PAGE)))
        elif path == "/api/curves":
            view = d.view(arg("sweep"))
            self._json(view.curves(params.names("trials", MAX_TRIAL_IDS),
                                   _metrics(view, arg("metrics"))))
        elif path == "/api/metrics":
            view = d.view(arg("sweep"))
            self._json({"metrics": view.metrics(), "default": view.seed_metrics()})
        else:
            self._error(HTTPStatus.NOT_FOUND, "not found")

    def _plotly(self) -> None:
        d = self.dashboard
        headers = {"Cache-Control": "public, max-age=86400"}
        if "gzip" in (self.headers.get("Accept-Encoding") or "") and d.token is not None:
            headers["Content-Encoding"] = "gzip"  # over a network: 1.4 MB instead of 4.8
            self._send(200, d.plotly_gz(), TYPES[".js"], headers)
        else:
            self._send(200, d.plotly.read_bytes(), TYPES[".js"], headers)


def _metrics(view: SweepView, text: str | None) -> list[str] | None:
    """`?metrics=a,b`: trajectory metrics of the sweep (None: its defaults)."""
    metrics = list(dict.fromkeys(m for m in (text or "").split(",") if m))  # once each
    if not metrics:
        return None
    known = view.metrics()
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise AnalysisInputError(f"metrics: got {shown(unknown[0])}; allowed: "
                                 f"{', '.join(known) or '(no trajectories stored yet)'}")
    return metrics


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    jar = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # noqa: BLE001
        return None
    return jar[name].value if name in jar else None


def make_server(results: str, sweep: str | None = None, *, host: str = "127.0.0.1",
                port: int = 8787, allow_remote: bool = False, token: str | None = None
                ) -> tuple[ThreadingHTTPServer, Dashboard]:
    """A server bound and ready (serve_forever() runs it); refuses a non-loopback host unless
    allow_remote, and then requires a token (given, $SWEEPER_DASHBOARD_TOKEN, or random)."""
    port = check_int(port, "--port", 0, 65535, error=AnalysisInputError)
    if not is_loopback(host):
        if not allow_remote:
            raise AnalysisInputError(
                f"--host {host}: the dashboard binds loopback (127.0.0.1) only; allowed: a "
                "loopback address, or --allow-remote (then every request needs the token)")
        token = token or os.environ.get("SWEEPER_DASHBOARD_TOKEN") or secrets.token_urlsafe(24)
    elif token is None and allow_remote:
        token = os.environ.get("SWEEPER_DASHBOARD_TOKEN") or None
    dashboard = Dashboard(results, sweep, token)
    handler = type("BoundHandler", (Handler,), {"dashboard": dashboard})
    ThreadingHTTPServer.allow_reuse_address = True
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise AnalysisInputError(f"--port {port}: cannot listen on {host}:{port} ({exc})"
                                 ) from None
    server.daemon_threads = True
    return server, dashboard


def serve(results: str, sweep: str | None = None, *, host: str = "127.0.0.1",
          port: int = 8787, allow_remote: bool = False, token: str | None = None,
          open_browser: bool = False) -> int:
    """Run the dashboard until interrupted (Ctrl-C, SIGTERM); prints its URL."""
    import signal

    start = time.perf_counter()
    server, dashboard = make_server(results, sweep, host=host, port=port,
                                    allow_remote=allow_remote, token=token)
    bound_host, bound_port = server.server_address[:2]
    shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
    params = []
    if dashboard.named:  # else the page opens the running sweep, or the latest updated
        params.append(f"sweep={dashboard.named}")
    if dashboard.token:
        params.append(f"token={dashboard.token}")
    url = f"http://{shown}:{bound_port}/" + ("?" + "&".join(params) if params else "")
    print(f"sweeper dashboard: {url} (serving {dashboard.root}; ready in "
          f"{time.perf_counter() - start:.1f} s; Ctrl-C to stop)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
