"""Signature checking without a server: RFC 7748's X25519 vectors, and a v1/v2 event MAC round trip."""

from __future__ import annotations

import base64
import hashlib
import hmac
import unittest

from toolgate_client.nats import Msg
from toolgate_client.signing import EventVerifier, x25519, _hkdf32


class X25519(unittest.TestCase):
    def test_rfc7748_section_6_1(self) -> None:
        alice = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        bob_pub = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        shared = bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        self.assertEqual(x25519(alice, bob_pub), shared)


class EventMacs(unittest.TestCase):
    def setUp(self) -> None:
        priv = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        bob_pub = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        pkcs8 = base64.b64encode(bytes.fromhex("302e020100300506032b656e04220420") + priv).decode()
        spki = base64.b64encode(bytes.fromhex("302a300506032b656e032100") + bob_pub).decode()
        self.verifier = EventVerifier("ops", pkcs8, {"tool-executor": spki})
        self.key = _hkdf32(x25519(priv, bob_pub), "toolgate/v1/tool-executor->ops")
        self.subject = "tg.journal.acme.r1.k1.settled"
        self.payload = b'{"type":"settled"}'

    def mac(self, message: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self.key, message, hashlib.sha256).digest()).rstrip(b"=").decode()

    def test_v2_and_v1_verify_and_a_changed_byte_does_not(self) -> None:
        v2 = self.mac(b"v2\n" + hashlib.sha256(self.subject.encode() + b"\n" + self.payload).digest())
        msg = Msg(self.subject, self.payload, headers={"Toolgate-Signer": ["tool-executor"], "Toolgate-Sigs": [f"v2 journal=x ops={v2}"]})
        self.assertTrue(self.verifier.verify(self.subject, self.payload, msg).trusted)
        self.assertEqual(self.verifier.verify(self.subject, self.payload + b" ", msg).reason, "bad-signature")
        v1 = self.mac(b"v1\n" + self.subject.encode() + b"\n" + self.payload)
        msg1 = Msg(self.subject, self.payload, headers={"Toolgate-Signer": ["tool-executor"], "Toolgate-Sig-ops": [v1]})
        self.assertTrue(self.verifier.verify(self.subject, self.payload, msg1).trusted)
        # A v1 MAC moved into a v2 header is not a v2 MAC.
        moved = Msg(self.subject, self.payload, headers={"Toolgate-Signer": ["tool-executor"], "Toolgate-Sigs": [f"v2 ops={v1}"]})
        self.assertEqual(self.verifier.verify(self.subject, self.payload, moved).reason, "bad-signature")

    def test_a_signer_that_may_not_produce_the_type_is_refused(self) -> None:
        msg = Msg(self.subject, self.payload, headers={"Toolgate-Signer": ["gateway"], "Toolgate-Sigs": ["v2 ops=AAAA"]})
        self.assertEqual(self.verifier.verify(self.subject, self.payload, msg).reason, "wrong-producer")
        unsigned = Msg(self.subject, self.payload)
        self.assertEqual(self.verifier.verify(self.subject, self.payload, unsigned).reason, "unsigned")


if __name__ == "__main__":
    unittest.main()
