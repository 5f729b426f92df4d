"""Ed25519 and the tool-request check, offline (docs/bus-protocol.md, "Authenticating hooks and workers")."""

from __future__ import annotations

import base64
import unittest

from toolgate_client import Msg, ToolRequestVerifier, ed25519
from toolgate_client.auth import NONCE, REQUEST_SIGNATURE, SIGNED_AT


def signed(seed: bytes, subject: str, payload: bytes, at: int, nonce: str) -> Msg:
    message = f"toolgate-tool-request/v1\n{subject}\n{at}\n{nonce}\n".encode() + payload
    sig = base64.b64encode(ed25519.sign(seed, message)).decode()
    return Msg(subject, payload, None, {REQUEST_SIGNATURE: [sig], SIGNED_AT: [str(at)], NONCE: [nonce]})


class Ed25519(unittest.TestCase):
    def test_rfc8032_vector_1(self) -> None:
        seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
        public = ed25519.public_key(seed)
        self.assertEqual(public.hex(), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        sig = ed25519.sign(seed, b"")
        self.assertEqual(sig.hex()[:32], "e5564300c360ac729086e2cc806e828a")
        self.assertTrue(ed25519.verify(public, b"", sig))
        self.assertFalse(ed25519.verify(public, b"x", sig))


class ToolRequests(unittest.TestCase):
    def test_only_a_fresh_request_signed_by_the_executor_for_this_subject_passes_once(self) -> None:
        private, public = ed25519.generate()
        seed = ed25519.private_seed(private)
        verifier = ToolRequestVerifier(public)
        now = 1_700_000_000_000
        ok = signed(seed, "tg.tools.acme.t", b"{}", now, "n1")
        self.assertIsNone(verifier.check("tg.tools.acme.t", ok, now))
        self.assertEqual(verifier.check("tg.tools.acme.t", ok, now), "replayed")
        self.assertEqual(verifier.check("tg.tools.acme.other", signed(seed, "tg.tools.acme.t", b"{}", now, "n2"), now), "bad-signature")
        self.assertEqual(verifier.check("tg.tools.acme.t", Msg("tg.tools.acme.t", b"{}"), now), "unsigned")
        foreign = ed25519.private_seed(ed25519.generate()[0])
        self.assertEqual(verifier.check("tg.tools.acme.t", signed(foreign, "tg.tools.acme.t", b"{}", now, "n3"), now), "bad-signature")
        self.assertEqual(verifier.check("tg.tools.acme.t", signed(seed, "tg.tools.acme.t", b"{}", now - 120_000, "n4"), now), "stale")


if __name__ == "__main__":
    unittest.main()
