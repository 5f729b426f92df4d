"""The Python client against a running Toolgate stack on a real NATS server.

Started by test/src/python-client/python-client.int.spec.ts, which passes the stack through the
environment: TG_NATS_URL, TG_PREFIX, TG_TENANT, TG_ADMIN_TOKEN, TG_AGENT_TOKEN, TG_APPROVER_TOKEN,
TG_OPS_PRIVATE_KEY and TG_PUBLIC_KEYS (the operator's key, to check event signatures).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import unittest
from typing import Any, Dict, List

from toolgate_client import (
    Client,
    EventVerifier,
    HookReply,
    HookRequest,
    JournalEvent,
    ToolFailed,
    ToolgateError,
    ToolRequest,
    ed25519,
)

ENV = os.environ
PREFIX = ENV.get("TG_PREFIX", "toolgate")
TENANT = ENV.get("TG_TENANT", "acme")
RUN = f"py{int(time.time() * 1000)}"
SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "sleepMs": {"type": "integer"}},
    "required": ["text"],
    "additionalProperties": False,
}
# The hook's key pair: the policy registers its public key, the hook signs with the private one.
HOOK_PRIVATE_KEY, HOOK_PUBLIC_KEY = ed25519.generate()
POLICY = {
    "engine": {"ask": [{"tool": "py_ask"}]},
    "remote": {"engine": {"hooks": [{"name": "py-guard", "timeoutMs": 5000, "publicKey": HOOK_PUBLIC_KEY}]}},
}
#: The executor's tool-request public key (``toolgate keys tool-request-public-key``).
EXECUTOR_PUBLIC_KEY = ENV.get("TG_EXECUTOR_PUBLIC_KEY") or None

# Derived once: pure-Python X25519 for each public key.
VERIFIER = EventVerifier("ops", ENV.get("TG_OPS_PRIVATE_KEY", ""), json.loads(ENV.get("TG_PUBLIC_KEYS", "{}"))) if ENV.get("TG_OPS_PRIVATE_KEY") else None
calls: List[ToolRequest] = []
hook_calls: List[HookRequest] = []


async def upper(req: ToolRequest) -> Any:
    calls.append(req)
    text = str(req.input["text"])
    if text == "fail":
        raise ToolFailed("asked to fail")
    await asyncio.sleep(int(req.input.get("sleepMs", 0)) / 1000)
    return {"upper": text.upper(), "dispatchId": req.dispatch_id}


async def guard(req: HookRequest) -> HookReply:
    hook_calls.append(req)
    if "forbidden" in json.dumps(req.input):
        return HookReply(verdict="deny", reason="the python guard refuses forbidden words")
    return HookReply()


async def client_with(token: str) -> Client:
    return await Client.connect(token, TENANT, url=ENV.get("TG_NATS_URL", "nats://127.0.0.1:4222"), prefix=PREFIX)


async def eventually(probe: Any, timeout: float = 5.0) -> Any:
    """Reads follow writes by a fraction of a second (the projection): poll a read."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.05)


class LiveStack(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        assert VERIFIER is not None, "TG_OPS_PRIVATE_KEY and TG_PUBLIC_KEYS are required"
        self.admin = await client_with(ENV["TG_ADMIN_TOKEN"])
        for name, policy in (("py_upper", {"executor": "remote"}), ("py_ask", {"executor": "remote", "risk": "execute"})):
            await self.admin.call("tools.register", {
                "tool": {"name": name, "description": "Upper-cases text (python worker).", "parameters": SCHEMA, "policy": policy},
            })
        await self.admin.call("policy.put", {"document": POLICY})
        assert EXECUTOR_PUBLIC_KEY is not None, "TG_EXECUTOR_PUBLIC_KEY is required"
        await self.admin.serve_tool("py_upper", upper, executor_public_key=EXECUTOR_PUBLIC_KEY)
        await self.admin.serve_tool("py_ask", upper, executor_public_key=EXECUTOR_PUBLIC_KEY)
        await self.admin.serve_hook("py-guard", guard, signing_key=HOOK_PRIVATE_KEY)
        self.verifier = VERIFIER

    async def asyncTearDown(self) -> None:
        await self.admin.close()

    async def test_submit_wait_and_replay(self) -> None:
        before = len(calls)
        first = await self.admin.submit(f"{RUN}-a", "c1", "py_upper", {"text": "ada"}, wait=10_000)
        self.assertEqual((first.status, first.state), ("accepted", "settled"))
        assert first.settled is not None
        self.assertEqual(first.settled.outcome, "ok")
        self.assertEqual(first.settled.result, {"upper": "ADA", "dispatchId": first.dispatch_id})
        self.assertEqual(len(calls), before + 1)
        req = calls[-1]
        self.assertEqual((req.tenant, req.run_id, req.tool_name), (TENANT, f"{RUN}-a", "py_upper"))
        self.assertGreater(req.deadline_ms, 0)

        again = await self.admin.submit(f"{RUN}-a", "c1", "py_upper", {"text": "ada"}, wait=10_000)
        self.assertEqual((again.status, again.state, again.dispatch_id), ("replayed", "settled", first.dispatch_id))
        self.assertEqual(again.settled, first.settled)
        self.assertEqual(len(calls), before + 1, "a replay must not run the tool again")
        # dispatch() of a recorded call returns the recorded outcome from the submit reply.
        self.assertEqual(await self.admin.dispatch(f"{RUN}-a", "c1", "py_upper", {"text": "ada"}), first.settled)
        self.assertEqual(len(calls), before + 1)

        failed = await self.admin.submit(f"{RUN}-a", "c2", "py_upper", {"text": "fail"}, wait=10_000)
        assert failed.settled is not None and failed.settled.error is not None
        self.assertEqual((failed.settled.outcome, failed.settled.error["code"]), ("error", "tool-failed"))

        record = await eventually(lambda: self._get(first.dispatch_id))
        self.assertEqual(record["dispatch"]["dispatchId"], first.dispatch_id)

    async def _get(self, dispatch_id: str) -> Any:
        try:
            return await self.admin.get_dispatch(dispatch_id)
        except ToolgateError as err:
            if err.code == "not-found":
                return None
            raise

    async def _get_settled(self, dispatch_id: str) -> Any:
        """The dispatch once the projection holds its settlement (reads lag the journal a moment)."""
        record = await self._get(dispatch_id)
        if record and any(e["event"]["type"] == "settled" for e in record["events"]):
            return record
        return None

    async def test_follow_checks_signatures_and_ignores_a_forgery(self) -> None:
        run = f"{RUN}-f"
        seen: List[JournalEvent] = []
        started = asyncio.Event()

        async def watch() -> None:
            async for event in self.admin.follow(run, self.verifier, started):
                seen.append(event)

        watcher = asyncio.ensure_future(watch())
        await started.wait()
        forger = await client_with("not-a-token")

        async def forge_when_running() -> None:
            # Once the real call is journaled, plant an unsigned and a badly signed `settled`
            # for it in the same run, as any client on an open broker can.
            while not any(e.type == "requested" for e in seen):
                await asyncio.sleep(0.01)
            real = next(e for e in seen if e.type == "requested")
            forged = {**real.body, "id": "forged-1", "type": "settled", "outcome": "ok", "result": {"upper": "FORGED"}}
            subject = f"{PREFIX}.journal.{TENANT}.{run}.forgedkey.settled"
            await forger.nc.publish(subject, json.dumps(forged).encode())
            await forger.nc.publish(subject, json.dumps({**forged, "id": "forged-2"}).encode(), headers={
                "Toolgate-Signer": "tool-executor", "Toolgate-Sigs": "v2 ops=AAAA journal=AAAA"})

        forging = asyncio.ensure_future(forge_when_running())
        outcome = await self.admin.dispatch(run, "c1", "py_upper", {"text": "bob", "sleepMs": 400}, verifier=self.verifier)
        await forging
        await forger.close()
        self.assertEqual(outcome.outcome, "ok")
        self.assertEqual(outcome.result["upper"], "BOB", "the forged settled event must not win")
        await asyncio.sleep(0.2)
        watcher.cancel()
        types = [e.type for e in seen if e.verdict and e.verdict.trusted]
        for t in ("requested", "decided", "started", "settled"):
            self.assertIn(t, types)
        untrusted = {e.body["id"]: e.verdict.reason for e in seen if e.verdict and not e.verdict.trusted}
        self.assertEqual(untrusted, {"forged-1": "unsigned", "forged-2": "bad-signature"})
        signers = {e.type: e.verdict.signer for e in seen if e.verdict and e.verdict.trusted}
        self.assertEqual(signers["requested"], "gateway")
        self.assertEqual(signers["settled"], "tool-executor")

    async def test_hook_served_in_python_denies(self) -> None:
        before = len(hook_calls)
        # A second responder on the hook's subject answers allow at once, as anyone can on an open
        # broker: its reply is not signed with the hook's key, so the Python hook's deny wins.
        forger = await client_with("not-a-token")
        sub = await forger.nc.subscribe(f"{PREFIX}.hooks.{TENANT}.py-guard")
        await forger.nc.flush()

        async def forge() -> None:
            async for msg in sub:
                await msg.respond(json.dumps({"verdict": "allow"}).encode())

        forging = asyncio.ensure_future(forge())
        try:
            reply = await self.admin.submit(f"{RUN}-h", "c1", "py_upper", {"text": "forbidden words"}, wait=10_000)
        finally:
            forging.cancel()
            await forger.close()
        assert reply.settled is not None and reply.settled.error is not None
        self.assertEqual(reply.settled.outcome, "denied")
        self.assertEqual(reply.settled.error["code"], "denied")
        # The signed verdict was read, and the hook's own reason reaches the settled message.
        self.assertEqual(
            "permission hook 'remote:py-guard' returned deny: the python guard refuses forbidden words",
            reply.settled.error["message"],
        )
        self.assertGreater(len(hook_calls), before)
        self.assertEqual((hook_calls[-1].kind, hook_calls[-1].tool_name), ("hook", "py_upper"))
        record = await eventually(lambda: self._get_settled(reply.dispatch_id))
        decided = next(e["event"] for e in record["events"] if e["event"]["type"] == "decided")
        self.assertEqual((decided["verdict"], decided["decidedBy"]), ("deny", "hook"))
        self.assertEqual((decided["rule"]["kind"], decided["rule"]["name"]), ("hook", "remote:py-guard"))

        allowed = await self.admin.submit(f"{RUN}-h", "c2", "py_upper", {"text": "fine"}, wait=10_000)
        assert allowed.settled is not None
        self.assertEqual(allowed.settled.outcome, "ok")

    async def test_worker_refuses_a_forged_tool_request(self) -> None:
        before = len(calls)
        forger = await client_with("not-a-token")
        try:
            request = {
                "dispatchId": "f" * 64, "tenant": TENANT, "runId": f"{RUN}-x", "toolName": "py_upper",
                "contractHash": "c" * 64, "input": {"text": "forged"}, "agent": {"agentType": "eve"},
                "isolation": "none", "deadlineMs": 5000,
            }
            subject = f"{PREFIX}.tools.{TENANT}.py_upper"
            for headers in (None, {"Toolgate-Request-Signature": "AAAA", "Toolgate-Signed-At": str(int(time.time() * 1000)), "Toolgate-Nonce": "n1"}):
                msg = await forger.nc.request(subject, json.dumps(request).encode(), 5.0, headers=headers)
                answer = msg.json()
                assert isinstance(answer, dict)
                self.assertEqual(answer["ok"], False)
                self.assertEqual(answer["error"]["code"], "unauthorized")
        finally:
            await forger.close()
        self.assertEqual(len(calls), before, "a forged request must never run the tool")

    async def test_approvals_list_and_resolve(self) -> None:
        run = f"{RUN}-p"
        approver = await client_with(ENV["TG_APPROVER_TOKEN"])
        try:
            reply = await self.admin.submit(run, "c1", "py_ask", {"text": "deploy"}, wait=5_000)
            self.assertEqual(reply.state, "suspended")
            listed = await eventually(lambda: approver.list_approvals(runId=run))
            self.assertEqual(len(listed), 1)
            item = listed[0]
            self.assertEqual((item["dispatchId"], item["toolName"], item["status"]), (reply.dispatch_id, "py_ask", "pending"))
            before = len(calls)
            done = asyncio.ensure_future(self.admin.wait(run, reply.dispatch_id, timeout=10, verifier=self.verifier))
            resolved = await approver.resolve_approval(
                item["approvalKey"], "allow", reason="ok by python", dispatch_id=item["dispatchId"], input_digest=item["inputDigest"])
            self.assertEqual(resolved["resolved"]["decision"], "allow")
            outcome = await done
            self.assertEqual((outcome.outcome, outcome.result["upper"]), ("ok", "DEPLOY"))
            self.assertEqual(len(calls), before + 1)
            # Waiting after the fact reads the recorded outcome (the event is long gone).
            self.assertEqual(await self.admin.wait(run, reply.dispatch_id, timeout=10), outcome)
            with self.assertRaises(ToolgateError) as again:
                await approver.resolve_approval(item["approvalKey"], "deny", dispatch_id=item["dispatchId"])
            self.assertEqual(again.exception.code, "already-resolved")
        finally:
            await approver.close()

    async def test_typed_errors(self) -> None:
        agent = await client_with(ENV["TG_AGENT_TOKEN"])
        try:
            with self.assertRaises(ToolgateError) as denied:
                await agent.call("policy.put", {"document": POLICY})
            self.assertEqual(denied.exception.code, "forbidden")
            with self.assertRaises(ToolgateError) as typo:
                await agent.call("dispatch.sumbit", {})
            self.assertEqual(typo.exception.code, "unknown-operation")
            self.assertIn("dispatch.submit", typo.exception.details["operations"])
            # A call that breaks the tool's contract is journaled and settles as an error; it never runs.
            before = len(calls)
            bad = await agent.submit(f"{RUN}-e", "c1", "py_upper", {"text": 3}, wait=5_000)
            assert bad.settled is not None and bad.settled.error is not None
            self.assertEqual((bad.settled.outcome, bad.settled.error["code"]), ("error", "invalid-arguments"))
            self.assertEqual(len(calls), before)
        finally:
            await agent.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
