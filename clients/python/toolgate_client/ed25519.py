"""Ed25519 (RFC 8032) in plain Python, for the two exchanges with a team's code that Toolgate signs
(docs/bus-protocol.md, "Authenticating hooks and workers"): a hook signs its replies, a worker
verifies the executor's tool requests. Adapted from RFC 8032 section 6; a few milliseconds per
operation, not constant-time: the hook's private key should live where timing is not observable
by an attacker (a team's own service), as with any pure-Python signer.
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Optional, Tuple

_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_Q = 2**252 + 27742317777372353535851937790883648493
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")

Point = Tuple[int, int, int, int]


def _add(p: Point, q: Point) -> Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f, g * h, f * g, e * h)


def _mul(s: int, p: Point) -> Point:
    q: Point = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _equal(p: Point, q: Point) -> bool:
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def _recover_x(y: int, sign: int) -> Optional[int]:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0) or 0
_G: Point = (_GX, _GY, 1, _GX * _GY % _P)


def _compress(p: Point) -> bytes:
    zinv = pow(p[2], _P - 2, _P)
    x, y = p[0] * zinv % _P, p[1] * zinv % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _decompress(s: bytes) -> Optional[Point]:
    if len(s) != 32:
        return None
    y = int.from_bytes(s, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


def _expand(seed: bytes) -> Tuple[int, bytes]:
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def _modq(data: bytes) -> int:
    return int.from_bytes(hashlib.sha512(data).digest(), "little") % _Q


def public_key(seed: bytes) -> bytes:
    """The 32-byte public key of a 32-byte private key (seed)."""
    return _compress(_mul(_expand(seed)[0], _G))


def sign(seed: bytes, message: bytes) -> bytes:
    a, prefix = _expand(seed)
    pub = _compress(_mul(a, _G))
    r = _modq(prefix + message)
    rs = _compress(_mul(r, _G))
    s = (r + _modq(rs + pub + message) * a) % _Q
    return rs + int.to_bytes(s, 32, "little")


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    if len(public) != 32 or len(signature) != 64:
        return False
    a = _decompress(public)
    r = _decompress(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _Q:
        return False
    h = _modq(signature[:32] + public + message)
    return _equal(_mul(s, _G), _add(r, _mul(h, a)))


def generate() -> Tuple[str, str]:
    """A fresh key pair as (base64 PKCS8 private key, base64 SPKI public key) -- Node's formats."""
    seed = os.urandom(32)
    return base64.b64encode(_PKCS8_PREFIX + seed).decode(), spki_of(seed)


def spki_of(seed: bytes) -> str:
    """The base64 SPKI DER of the public key of ``seed`` (what the policy's ``publicKey`` holds)."""
    return base64.b64encode(_SPKI_PREFIX + public_key(seed)).decode()


def private_seed(key: str) -> bytes:
    """The 32-byte seed of a base64 PKCS8 DER Ed25519 private key (``node:crypto`` exports)."""
    der = base64.b64decode(key)
    if len(der) != 48 or not der.startswith(_PKCS8_PREFIX):
        raise ValueError("not a base64 PKCS8 Ed25519 private key")
    return der[16:]


def public_bytes(spki: str) -> bytes:
    """The 32 bytes of a base64 SPKI DER Ed25519 public key."""
    der = base64.b64decode(spki)
    if len(der) != 44 or not der.startswith(_SPKI_PREFIX):
        raise ValueError("not a base64 SPKI Ed25519 public key")
    return der[12:]
