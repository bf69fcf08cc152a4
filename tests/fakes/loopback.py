"""The HTTP plumbing the loopback fakes share: a threading HTTP server on 127.0.0.1 at a free port,
served from a daemon thread, that stops without waiting for open connections."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """Serves `handler` on 127.0.0.1 from the moment it is made until `stop()`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
