"""Lock cycles (acquire, then release with the token) from one client on one keep-alive
connection, on 50 names of its own: bench/instructions.sh runs several at once.

Usage: python3 bench/cycles.py PORT CYCLES CLIENT_NAME
"""

import http.client
import json
import sys

port, cycles, client = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port)
for i in range(cycles):
    path = f"/locks/bench-{client}-{i % 50}"
    conn.request("POST", path, body=b'{"ttl_ms":10000}', headers={"content-type": "application/json"})
    answer = conn.getresponse()
    body = answer.read()
    if answer.status != 201:
        sys.exit(f"acquire: {answer.status} {body!r}")
    token = json.loads(body)["token"]
    conn.request("DELETE", path, headers={"lock-token": token})
    answer = conn.getresponse()
    answer.read()
    if answer.status != 204:
        sys.exit(f"release: {answer.status}")
