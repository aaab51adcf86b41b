"""Serving a :class:`~aem_envs.webshop.site.app.Site` on 127.0.0.1 for a real browser.

A standard-library HTTP server in a daemon thread, on a port the OS picks: nothing to install,
nothing reachable from outside the machine, and :meth:`SiteServer.close` returns only once the
socket is closed, so an env's ``close()`` leaves no server behind.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from aem_envs.webshop.site.app import Response, Site


class SiteServer:
    """``Site`` over HTTP at :attr:`base_url` until :meth:`close`."""

    def __init__(self, site: Site, host: str = "127.0.0.1") -> None:
        self.site = site
        handler = type("_BoundHandler", (_Handler,), {"site": site})
        self._httpd = ThreadingHTTPServer((host, 0), handler)
        self._httpd.daemon_threads = True
        host_name, port = self._httpd.server_address[:2]
        # Bound, the address is getsockname()'s: the host is a str (bytes are only accepted).
        assert isinstance(host_name, str)
        self.base_url = f"http://{host_name}:{port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    site: Site
    protocol_version = "HTTP/1.1"
    #: Headers and body go out in two writes; with Nagle's algorithm the body would wait for
    #: the client's delayed ACK (~40 ms on loopback) on every page.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self._answer(self.site.handle("GET", self.path))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        form = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
        self._answer(self.site.handle("POST", self.path, form))

    def _answer(self, response: Response) -> None:
        payload = response.body.encode("utf-8")
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        if response.location is not None:
            self.send_header("Location", response.location)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        """Requests are the env's business, not the terminal's."""
