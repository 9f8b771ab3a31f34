"""A ``placer serve`` process on a free loopback port, for the tests that talk to it over HTTP
(with the test's environment: ``PYTHONPATH`` decides which placer runs)."""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


class Server:
    """A ``placer serve`` process on a free loopback port."""

    def __init__(self, tmp: Path, *extra: str, document: dict | None = None) -> None:
        snapshot = tmp / "cluster.json"
        if document is None:
            from test_extender import cluster_document  # the extender tests' cluster

            document = cluster_document()
        snapshot.write_text(json.dumps(document))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "placer", "serve", "--snapshot", str(snapshot), "--port", "0", *extra],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=tmp,
        )
        self.notes: list[str] = []  # the lines before the banner
        self._lines: list[str] = []  # the lines after it, read as written: a full pipe would stall the server
        self._reader: threading.Thread | None = None
        while True:
            line = self.proc.stderr.readline()
            found = re.search(r"listening on (https?)://\S+:(\d+) ", line)
            if found is not None or not line.startswith(("placer: serve: note: ", "placer: serve: warning: ")):
                break
            self.notes.append(line)
        if found is None:
            rest = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.stop()
            raise AssertionError(f"placer serve did not start: {''.join(self.notes)}{line}{rest}")
        self.port = int(found.group(2))
        self.banner = line
        self.log = ""
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        self.tls_context: ssl.SSLContext | None = None  # set by a test serving HTTPS

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self._lines.append(line)

    def written(self) -> str:
        """What the server has written to stderr after its banner so far."""
        return "".join(self._lines)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
                ) -> tuple[int, Any, str]:
        if self.tls_context is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=30, context=self.tls_context
            )
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        data = json.loads(text) if response.getheader("content-type", "").startswith("application/json") else text
        return response.status, data, text

    def post(self, verb: str, payload: Any) -> tuple[int, Any]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        status, data, _ = self.request("POST", f"/{verb}", body)
        return status, data

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=10)
        self.log = self.written()  # what it wrote after the banner
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.proc.stderr.close()
