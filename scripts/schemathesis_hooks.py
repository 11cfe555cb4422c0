"""Schemathesis hooks for scripts/check-schemathesis.sh.

One rule of the API cannot be written in JSON Schema: `metadata` may take at most 1024 bytes
once serialized (compact JSON, UTF-8). Generated bodies whose metadata comes near that are
left out rather than sent: everything else schemathesis generates is sent as generated. The
margin (1000) covers the few bytes by which Python's and serde_json's number formatting differ.
"""

import json

import schemathesis

METADATA_BYTES_SENT = 1000


@schemathesis.hook
def filter_body(context, body):
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        text = json.dumps(body["metadata"], separators=(",", ":"), ensure_ascii=False)
        return len(text.encode("utf-8", "surrogatepass")) <= METADATA_BYTES_SENT
    return True
