"""Hook replies and tool requests, authenticated (docs/bus-protocol.md, "Authenticating hooks and
workers"): a hook signs ``toolgate-hook-reply/v1\\n<nonce>\\n<hex sha256(request)>\\n<reply>``; a
worker checks the executor's signature over
``toolgate-tool-request/v1\\n<subject>\\n<signed-at>\\n<nonce>\\n<request>``, its age and its nonce."""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Dict, Optional

from . import ed25519
from .nats import Msg

HOOK_NONCE = "Toolgate-Hook-Nonce"
HOOK_SIGNATURE = "Toolgate-Hook-Signature"
REQUEST_SIGNATURE = "Toolgate-Request-Signature"
SIGNED_AT = "Toolgate-Signed-At"
NONCE = "Toolgate-Nonce"
#: How far a tool request's signed-at may be from this worker's clock, either way.
TOOL_REQUEST_MAX_AGE_MS = 60_000


def sign_hook_reply(seed: bytes, nonce: str, request: bytes, reply: bytes) -> str:
    digest = hashlib.sha256(request).hexdigest()
    message = f"toolgate-hook-reply/v1\n{nonce}\n{digest}\n".encode() + reply
    return base64.b64encode(ed25519.sign(seed, message)).decode()


class ToolRequestVerifier:
    """Checks that a tool request is the executor's, fresh, and seen once."""

    def __init__(self, executor_public_key: str) -> None:
        self._key = ed25519.public_bytes(executor_public_key)
        self._nonces: Dict[str, float] = {}

    def check(self, subject: str, msg: Msg, now_ms: Optional[float] = None) -> Optional[str]:
        """None when the request may run; else why not (unsigned, bad-signature, stale, replayed)."""
        now = time.time() * 1000 if now_ms is None else now_ms
        sig, signed_at, nonce = msg.header(REQUEST_SIGNATURE), msg.header(SIGNED_AT), msg.header(NONCE)
        if not sig or not signed_at or not nonce:
            return "unsigned"
        message = f"toolgate-tool-request/v1\n{subject}\n{signed_at}\n{nonce}\n".encode() + msg.data
        try:
            ok = ed25519.verify(self._key, message, base64.b64decode(sig))
        except ValueError:
            ok = False
        if not ok or not signed_at.isdigit():
            return "bad-signature"
        at = int(signed_at)
        if abs(now - at) > TOOL_REQUEST_MAX_AGE_MS:
            return "stale"
        self._nonces = {n: exp for n, exp in self._nonces.items() if exp > now}
        if nonce in self._nonces:
            return "replayed"
        self._nonces[nonce] = at + TOOL_REQUEST_MAX_AGE_MS
        return None
