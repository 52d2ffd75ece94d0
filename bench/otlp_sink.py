"""``python -m bench.otlp_sink [--port 4318]``: an OTLP/HTTP endpoint that accepts every export and
keeps nothing, so that a traced worker pays its whole export path (batching, protobuf, HTTP) and
no collector's CPU lands on the machine (docs/DEPLOY.md, "What tracing costs")."""

from __future__ import annotations

import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a collector serves the exporter

    def do_POST(self) -> None:
        size = len(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        print(f"export {self.path} {size} bytes", flush=True)  # one line per batch: proof spans arrived
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.otlp_sink")
    parser.add_argument("--port", type=int, default=4318)
    ThreadingHTTPServer(("127.0.0.1", parser.parse_args().port), _Sink).serve_forever()


if __name__ == "__main__":
    main()
