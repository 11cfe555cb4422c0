#!/usr/bin/env python3
"""A stand-in OpenTelemetry collector for benchmarks: accepts OTLP/HTTP posts, answers 200,
and counts requests and bytes (printed on SIGTERM or Ctrl-C). It decodes nothing, so what the
gateway pays for its spans is measured, not what a collector pays for them.

Usage: bench/otlp-sink.py PORT
Then:  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT lockgate ...
"""

import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

posts = 0
received = 0


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global posts, received
        length = int(self.headers.get("content-length", 0))
        received += len(self.rfile.read(length))
        posts += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def report(*_):
    print(f"otlp-sink: {posts} posts, {received} bytes", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, report)
    signal.signal(signal.SIGINT, report)
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
