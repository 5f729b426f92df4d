"""Checking Toolgate's journal-event signatures (docs/bus-protocol.md, "Signatures").

Each event carries ``Toolgate-Signer`` and, per reader, an HMAC-SHA256 under the pairwise key
K(signer -> reader) = HKDF-SHA256(X25519(signer, reader), salt="", info="toolgate/v1/<signer>-><reader>").
v2: ``Toolgate-Sigs: v2 <reader>=<b64url MAC> ...`` over ``v2\\n`` + SHA-256(``<subject>\\n<payload>``);
v1: ``Toolgate-Sig-<reader>: <b64url MAC>`` over ``v1\\n<subject>\\n<payload>``.
Only holders of a reader's private key (Toolgate's services, an operator's ``ops`` key) can check
them. X25519 is RFC 7748 in plain Python (the standard library has none); verification only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from .nats import Msg

#: Who may produce each event type (contracts/src/signing.ts, EVENT_SIGNING).
EVENT_PRODUCERS: Mapping[str, Tuple[str, ...]] = {
    "requested": ("gateway",),
    "decided": ("permission-evaluator",),
    "suspended": ("permission-evaluator",),
    "resolved": ("gateway", "journal"),
    "started": ("tool-executor",),
    "settled": ("permission-evaluator", "tool-executor"),
    "error-streak": ("gateway", "permission-evaluator", "tool-executor"),
    "script-installed": ("gateway",),
    **{
        f"worktree-{s}": ("worktree",)
        for s in ("acquired", "collected", "retained", "dropped", "disposed", "restarted")
    },
}

_P = 2**255 - 19
_PKCS8_X25519 = bytes.fromhex("302e020100300506032b656e04220420")
_SPKI_X25519 = bytes.fromhex("302a300506032b656e032100")


def x25519(scalar: bytes, u: bytes) -> bytes:
    """RFC 7748 X25519 (the Montgomery ladder), for deriving pairwise keys; not constant-time."""
    k = bytearray(scalar)
    k[0] &= 248
    k[31] &= 127
    k[31] |= 64
    kn = int.from_bytes(bytes(k), "little")
    x1 = int.from_bytes(u, "little") & ((1 << 255) - 1)
    x2, z2, x3, z3, swap = 1, 0, x1, 1, 0
    for t in range(254, -1, -1):
        bit = (kn >> t) & 1
        swap ^= bit
        if swap:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = bit
        a, b = (x2 + z2) % _P, (x2 - z2) % _P
        aa, bb = a * a % _P, b * b % _P
        e = (aa - bb) % _P
        c, d = (x3 + z3) % _P, (x3 - z3) % _P
        da, cb = d * a % _P, c * b % _P
        x3, z3 = (da + cb) ** 2 % _P, x1 * (da - cb) ** 2 % _P
        x2, z2 = aa * bb % _P, e * (aa + 121665 * e) % _P
    if swap:
        x2, z2 = x3, z3
    return (x2 * pow(z2, _P - 2, _P) % _P).to_bytes(32, "little")


def _der_key(b64: str, prefix: bytes, what: str) -> bytes:
    raw = base64.b64decode(b64)
    if len(raw) != len(prefix) + 32 or not raw.startswith(prefix):
        raise ValueError(f"{what} is not an X25519 key in base64 DER")
    return raw[len(prefix):]


def _hkdf32(ikm: bytes, info: str) -> bytes:
    prk = hmac.new(b"\0" * 32, ikm, hashlib.sha256).digest()
    return hmac.new(prk, info.encode() + b"\x01", hashlib.sha256).digest()


def _b64url(mac: bytes) -> str:
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


@dataclass(frozen=True)
class Verdict:
    """``trusted`` or why not: unsigned, unknown-signer, wrong-producer, bad-signature, subject-mismatch."""

    trusted: bool
    reason: Optional[str] = None
    signer: Optional[str] = None


class EventVerifier:
    """Verifies events as ``reader`` (e.g. ``ops``) from its private key and the public key map
    (``toolgate keys generate --json``: base64 PKCS#8 / SPKI DER). Key material is never printed."""

    def __init__(self, reader: str, private_key_b64: str, public_keys_b64: Mapping[str, str]) -> None:
        self.reader = reader
        private = _der_key(private_key_b64, _PKCS8_X25519, "the private key")
        self._keys: Dict[str, bytes] = {}
        for signer, pub in public_keys_b64.items():
            shared = x25519(private, _der_key(pub, _SPKI_X25519, f"the public key of {signer}"))
            self._keys[signer] = _hkdf32(shared, f"toolgate/v1/{signer}->{reader}")

    def __repr__(self) -> str:
        return f"EventVerifier(reader={self.reader!r})"

    def verify(self, subject: str, payload: bytes, msg: Msg) -> Verdict:
        signer = msg.header("Toolgate-Signer") or ""
        sigs = msg.header("Toolgate-Sigs") or ""
        if sigs:
            sig = ""
            if sigs.startswith("v2 "):
                for entry in sigs[3:].split(" "):
                    name, _, value = entry.partition("=")
                    if name == self.reader:
                        sig = value
        else:
            sig = msg.header(f"Toolgate-Sig-{self.reader}") or ""
        if not signer or not sig:
            return Verdict(False, "unsigned")
        event_type = subject.rsplit(".", 1)[-1]
        if signer not in EVENT_PRODUCERS.get(event_type, ()):
            return Verdict(False, "wrong-producer", signer)
        key = self._keys.get(signer)
        if key is None:
            return Verdict(False, "unknown-signer", signer)
        if sigs:
            digest = hashlib.sha256(subject.encode() + b"\n" + payload).digest()
            expected = hmac.new(key, b"v2\n" + digest, hashlib.sha256).digest()
        else:
            expected = hmac.new(key, b"v1\n" + subject.encode() + b"\n" + payload, hashlib.sha256).digest()
        if not hmac.compare_digest(_b64url(expected), sig):
            return Verdict(False, "bad-signature", signer)
        return Verdict(True, None, signer)
