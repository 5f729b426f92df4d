"""The NATS subset against a broker of its own (nats-server, no JetStream) configured like
deploy/nats/nats.conf: a team user with a password and the team's permissions, and a service user
standing in for the gateway. Proves CONNECT auth, HPUB/HMSG headers, queue groups, no responders,
and that a team user's requests are answered only under its inbox prefix ``_INBOX_<tenant>``."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from typing import List, Optional

from toolgate_client import Client, ConnectOptions, NatsError, NoRespondersError, ToolgateError, connect
from toolgate_client.nats import RequestTimeoutError

CONF = """
listen: 127.0.0.1:-1
authorization {
  users: [
    { user: gateway, password: gw-pass }
    { user: team-acme, password: acme-pass,
      permissions: {
        publish: { allow: ["toolgate.api.>"] }
        subscribe: { allow: ["_INBOX_acme.>", "toolgate.tools.acme.>", "toolgate.hooks.acme.>", "toolgate.journal.acme.>"] }
        allow_responses: true } }
  ]
}
"""


def nats_server() -> str:
    found = shutil.which("nats-server") or ("/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server") else None)
    if found is None:
        raise RuntimeError("nats-server is not installed (apt-get install nats-server)")
    return found


class Broker:
    def __init__(self, *args: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="tg-py-nats-")
        log = os.path.join(self.dir, "nats.log")
        self.proc = subprocess.Popen([nats_server(), *args, "-l", log], cwd=self.dir)
        self.url = ""
        # The server logs the port it picked (-1: any free one) once it listens.
        deadline = time.monotonic() + 10
        while not self.url and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.02)
            text = ""
            if os.path.exists(log):
                with open(log) as f:
                    text = f.read()
            m = re.search(r"Listening for client connections on (\S+)", text)
            self.url = f"nats://{m.group(1)}" if m else ""
        if not self.url:
            self.stop()
            raise RuntimeError("nats-server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


class TeamUserBroker(unittest.IsolatedAsyncioTestCase):
    broker: Broker

    @classmethod
    def setUpClass(cls) -> None:
        cls.conf_dir = tempfile.mkdtemp(prefix="tg-py-conf-")
        conf = os.path.join(cls.conf_dir, "nats.conf")
        with open(conf, "w") as f:
            f.write(CONF)
        cls.broker = Broker("-c", conf)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.broker.stop()
        shutil.rmtree(cls.conf_dir, ignore_errors=True)

    async def gateway(self) -> "asyncio.Task[None]":
        """A stand-in gateway: answers whoami with the Authorization header it received."""
        nc = await connect(ConnectOptions(url=self.broker.url, user="gateway", password="gw-pass"))
        sub = await nc.subscribe("toolgate.api.>", queue="gw")
        await nc.flush()
        self.seen: List[Optional[str]] = []

        async def serve() -> None:
            try:
                async for msg in sub:
                    self.seen.append(msg.header("authorization"))
                    await msg.respond(json.dumps({"ok": True, "data": {"tenant": "acme"}}).encode(), {"X-Reply": "1"})
            finally:
                await nc.close()

        return asyncio.ensure_future(serve())

    async def test_a_wrong_password_is_refused(self) -> None:
        with self.assertRaises(NatsError) as err:
            await connect(ConnectOptions(url=self.broker.url, user="team-acme", password="nope"))
        self.assertIn("authorization", str(err.exception).lower())

    async def test_a_team_user_is_answered_under_its_inbox_prefix_only(self) -> None:
        gw = await self.gateway()
        try:
            client = await Client.connect("tok-1", "acme", url=self.broker.url, user="team-acme", password="acme-pass")
            self.assertEqual(await client.call("whoami"), {"tenant": "acme"})
            self.assertEqual(self.seen, ["Bearer tok-1"])
            await client.close()
            # The shared `_INBOX` prefix: the broker refuses the reply subscription, so nothing comes back.
            wrong = await connect(ConnectOptions(url=self.broker.url, user="team-acme", password="acme-pass"))
            with self.assertRaises(RequestTimeoutError):
                await wrong.request("toolgate.api.whoami", b"{}", timeout=0.5, headers={"Authorization": "Bearer t"})
            await wrong.close()
        finally:
            gw.cancel()

    async def test_a_name_that_is_not_one_subject_token_is_refused_before_anything_is_sent(self) -> None:
        # A line break would end the protocol line the name is written into; a dot or wildcard would
        # subscribe to other subjects than the one meant.
        with self.assertRaises(ToolgateError) as err:
            await Client.connect("tok", "acme\n", url=self.broker.url, user="team-acme", password="acme-pass")
        self.assertEqual(err.exception.code, "config")
        for prefix in ("toolgate.>", "tg\n", ""):
            with self.assertRaises(ToolgateError) as err:
                await Client.connect("tok", "acme", url=self.broker.url, prefix=prefix, user="team-acme", password="acme-pass")
            self.assertEqual(err.exception.code, "config", prefix)
        client = await Client.connect("tok", "acme", url=self.broker.url, user="team-acme", password="acme-pass")

        async def handler(_request: object) -> None:
            return None

        try:
            for bad in ("t\n", "x.>", "*", "a b", ""):
                with self.assertRaises(ToolgateError) as err:
                    await client.serve_tool(bad, handler)
                self.assertEqual(err.exception.code, "config", bad)
                with self.assertRaises(ToolgateError) as err:
                    await client.serve_hook(bad, handler)  # type: ignore[arg-type]
                self.assertEqual(err.exception.code, "config", bad)
                with self.assertRaises(ToolgateError) as err:
                    await client.follow(bad).__anext__()
                self.assertEqual(err.exception.code, "invalid-request", bad)
            self.assertEqual(client._served, [])
        finally:
            await client.close()

    async def test_what_would_break_a_protocol_line_is_refused_and_nothing_is_sent(self) -> None:
        nc = await connect(ConnectOptions(url=self.broker.url, user="gateway", password="gw-pass"))
        try:
            sub = await nc.subscribe("t.safe")
            for bad in ("t.safe\r\nPUB t.safe 8\r\ninjected", "t.safe x", ""):
                with self.assertRaises(NatsError):
                    await nc.publish(bad, b"x")
                with self.assertRaises(NatsError):
                    await nc.subscribe(bad)
            with self.assertRaises(NatsError):
                await nc.publish("t.safe", b"x", reply="a b")
            with self.assertRaises(NatsError):
                await nc.publish("t.safe", b"x", headers={"X": "1\r\nX-Forged: 1"})
            with self.assertRaises(NatsError):
                await nc.subscribe("t.safe", queue="g h")
            await nc.publish("t.safe", b"ok")
            await nc.flush()
            # The connection is intact, and the first message on the subject is the real one.
            self.assertEqual((await sub.next_msg(1)).data, b"ok")
            self.assertEqual(sub._queue.qsize(), 0)
        finally:
            await nc.close()
        client = await Client.connect("tok", "acme", url=self.broker.url, user="team-acme", password="acme-pass")
        try:
            with self.assertRaises(ToolgateError) as err:
                await client.call("whoami\r\nPUB toolgate.api.x 0")
            self.assertEqual(err.exception.code, "invalid-request")
        finally:
            await client.close()

    async def test_headers_queue_groups_and_no_responders(self) -> None:
        nc = await connect(ConnectOptions(url=self.broker.url, user="gateway", password="gw-pass"))
        try:
            subs = [await nc.subscribe("t.q", queue="g") for _ in range(2)]
            await nc.flush()
            for i in range(10):
                await nc.publish("t.q", str(i).encode(), headers={"Toolgate-Signer": "x", "traceparent": "00-ab"})
            await nc.flush()
            got = [s._queue.qsize() for s in subs]
            self.assertEqual(sum(got), 10, "a queue group delivers each message once")
            msg = await subs[0].next_msg(1) if got[0] else await subs[1].next_msg(1)
            self.assertEqual((msg.header("toolgate-signer"), msg.header("traceparent")), ("x", "00-ab"))
            with self.assertRaises(NoRespondersError):
                await nc.request("nobody.here", b"", timeout=2)
        finally:
            await nc.close()

    async def test_an_unknown_operation_is_unavailable(self) -> None:
        client = await Client.connect("tok", "acme", url=self.broker.url, user="team-acme", password="acme-pass", timeout=2)
        try:
            with self.assertRaises(ToolgateError) as err:
                await client.call("dispatch.sumbit", {})
            self.assertEqual(err.exception.code, "unavailable")
        finally:
            await client.close()


class TokenBroker(unittest.IsolatedAsyncioTestCase):
    async def test_token_auth(self) -> None:
        broker = await asyncio.to_thread(Broker, "-a", "127.0.0.1", "-p", "-1", "--auth", "s3cret-token")
        try:
            with self.assertRaises(NatsError):
                await connect(ConnectOptions(url=broker.url, token="wrong"))
            nc = await connect(ConnectOptions(url=broker.url, token="s3cret-token"))
            await nc.flush()
            await nc.close()
        finally:
            broker.stop()


if __name__ == "__main__":
    unittest.main()
