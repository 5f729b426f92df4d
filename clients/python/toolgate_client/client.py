"""Toolgate's bus API for Python: submit, wait, replay, serve a tool, serve a hook, approvals,
and follow a run's journal (docs/bus-protocol.md)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Awaitable, Callable, Dict, List, Optional, Set, Union

from .nats import ConnectOptions, Connection, Msg, NoRespondersError, RequestTimeoutError, connect
from .signing import EventVerifier, Verdict
from . import ed25519
from .auth import HOOK_NONCE, HOOK_SIGNATURE, ToolRequestVerifier, sign_hook_reply

Json = Any
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: As contracts' createSubjects takes it.
_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,32}")
_OPERATION = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")


class ToolgateError(Exception):
    """A typed error: ``code`` is one of the protocol's stable codes (an unknown one reads ``internal``)."""

    KNOWN = frozenset(
        "config invalid-request too-large unknown-tool invalid-arguments model-retry "
        "non-serializable-result executor-unregistered denied timeout already-resolved "
        "approval-mismatch cancelled tool-failed path-outside-scope poison-message error-cap "
        "unauthorized forbidden unknown-operation not-found conflict unavailable internal contract-drift".split()
    )

    def __init__(self, code: str, message: str, details: Optional[Json] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code if code in self.KNOWN else "internal"
        self.message = message
        self.details = details

    @classmethod
    def from_wire(cls, error: Json) -> "ToolgateError":
        if isinstance(error, dict):
            return cls(str(error.get("code", "internal")), str(error.get("message", "")), error.get("details"))
        return cls("internal", "a malformed error reply")


@dataclass(frozen=True)
class Outcome:
    """A settled call: ``outcome`` is ok, error or denied; ``result`` or ``error`` with it."""

    outcome: str
    result: Json = None
    error: Optional[Dict[str, Json]] = None

    @classmethod
    def from_json(cls, data: Dict[str, Json]) -> "Outcome":
        return cls(str(data.get("outcome")), data.get("result"), data.get("error"))


@dataclass(frozen=True)
class SubmitReply:
    """``status``: accepted or replayed; ``state``: settled, suspended or requested."""

    dispatch_id: str
    status: str
    state: str
    settled: Optional[Outcome] = None


@dataclass(frozen=True)
class JournalEvent:
    """One journal event as a plain subscriber sees it, with its signature check when asked for."""

    subject: str
    type: str
    dispatch_id: str
    body: Dict[str, Json]
    verdict: Optional[Verdict] = None


@dataclass(frozen=True)
class ToolRequest:
    """``RemoteToolRequestSchema``; ``deadline`` is this process's monotonic clock at arrival + deadlineMs."""

    dispatch_id: str
    tenant: str
    run_id: str
    tool_name: str
    contract_hash: str
    input: Json
    agent: Dict[str, Json]
    isolation: Json
    deadline_ms: int
    deadline: float
    cwd: Optional[str] = None


@dataclass(frozen=True)
class HookRequest:
    """``RemoteHookRequestSchema``: kind is hook or canUseTool."""

    kind: str
    tenant: str
    tool_name: str
    input: Json
    context: Dict[str, Json]


@dataclass(frozen=True)
class HookReply:
    """A verdict (allow, deny, ask), a substituted input, or neither (pass)."""

    verdict: Optional[str] = None
    modified_input: Json = None
    has_modified_input: bool = False
    #: Sent as ``reason``: a deny's reason reaches the settled error's message (cut to 500 chars).
    reason: Optional[str] = None

    def to_json(self) -> Dict[str, Json]:
        out: Dict[str, Json] = {}
        if self.verdict is not None:
            out["verdict"] = self.verdict
        if self.has_modified_input:
            out["modifiedInput"] = self.modified_input
        if self.reason is not None:
            out["reason"] = self.reason
        return out


class ToolFailed(Exception):
    """Raise from a served tool to reply ``{ok:false, error:{code, message}}`` (default tool-failed)."""

    def __init__(self, message: str, code: str = "tool-failed") -> None:
        super().__init__(message)
        self.code = code


ToolHandler = Callable[[ToolRequest], Awaitable[Json]]
HookHandler = Callable[[HookRequest], Awaitable[HookReply]]


class Served:
    """A running tool worker or hook; ``stop()`` unsubscribes and lets in-flight calls finish."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self._task: Optional["asyncio.Task[None]"] = None
        self._sub: Any = None
        self._inflight: Set["asyncio.Task[None]"] = set()

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
        if self._task is not None:
            await self._task
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)


MAX_JOURNAL_PARTITIONS = 64


def journal_partition_of(tenant: str, count: int) -> int:
    """The journal partition of ``tenant`` among ``count``: FNV-1a (32-bit) of its bytes modulo
    ``count``, the hash of nats-server's ``{{partition(count,…)}}`` (docs/bus-protocol.md)."""
    h = 0x811C9DC5
    for byte in tenant.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h % count


class Client:
    """One tenant's client. Use :meth:`connect`; every failed call raises :class:`ToolgateError`."""

    def __init__(
        self, nc: Connection, token: str, tenant: str, prefix: str, timeout: float, journal_partitions: int = 1
    ) -> None:
        self.nc = nc
        self.tenant = tenant
        self.prefix = prefix
        self.timeout = timeout
        # The tenant's journal subjects: `<prefix>.journal[.<partition>].<tenant>` (docs/bus-protocol.md).
        self._journal = (
            f"{prefix}.journal.{journal_partition_of(tenant, journal_partitions)}.{tenant}"
            if journal_partitions > 1
            else f"{prefix}.journal.{tenant}"
        )
        self._auth = {"Authorization": f"Bearer {token}"}
        self._served: List[Served] = []

    @classmethod
    async def connect(
        cls,
        token: str,
        tenant: str,
        url: str = "nats://127.0.0.1:4222",
        prefix: str = "toolgate",
        user: Optional[str] = None,
        password: Optional[str] = None,
        nats_token: Optional[str] = None,
        inbox_prefix: Optional[str] = None,
        timeout: float = 30.0,
        journal_partitions: int = 1,
    ) -> "Client":
        """``inbox_prefix`` defaults to ``_INBOX_<tenant>`` with a NATS user (production), else ``_INBOX``.
        ``journal_partitions``: the deployment's ``TOOLGATE_JOURNAL_PARTITIONS`` (ask its operator).
        ``timeout`` (seconds) bounds each API call: longer than the gateway's 20 s of riding out a
        stream leader's election, so an election costs a call latency, not an error."""
        _subject_token("tenant", tenant, "config")
        if not isinstance(journal_partitions, int) or not 1 <= journal_partitions <= MAX_JOURNAL_PARTITIONS:
            raise ToolgateError(
                "config",
                f"journal_partitions must be an integer from 1 to {MAX_JOURNAL_PARTITIONS}, got {journal_partitions!r}",
            )
        if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
            raise ToolgateError("config", f"prefix must be 1-32 characters of [A-Za-z0-9_-], got {prefix!r}")
        if inbox_prefix is None:
            inbox_prefix = f"_INBOX_{tenant}" if (user or nats_token) else "_INBOX"
        nc = await connect(
            ConnectOptions(url=url, user=user, password=password, token=nats_token, inbox_prefix=inbox_prefix)
        )
        return cls(nc, token, tenant, prefix, timeout, journal_partitions)

    async def close(self) -> None:
        for served in list(self._served):
            await served.stop()
        await self.nc.close()

    # -- requests ------------------------------------------------------------------------------

    async def call(self, operation: str, body: Optional[Dict[str, Json]] = None, timeout: Optional[float] = None) -> Json:
        """One ``<prefix>.api.<operation>`` request: the reply's ``data``, or a ToolgateError."""
        if not isinstance(operation, str) or not _OPERATION.fullmatch(operation):
            raise ToolgateError("invalid-request", f"{operation!r} is not an operation name (dot-separated tokens)")
        subject = f"{self.prefix}.api.{operation}"
        try:
            msg = await self.nc.request(
                subject, json.dumps(body or {}).encode(), timeout or self.timeout, headers=self._auth
            )
        except NoRespondersError:
            raise ToolgateError("unavailable", f"nobody answers {operation}: no gateway is running (an unknown operation gets unknown-operation)") from None
        except RequestTimeoutError:
            raise ToolgateError("unavailable", f"{operation}: no reply in time") from None
        try:
            reply = msg.json()
        except ValueError:
            raise ToolgateError("internal", f"{operation}: the reply is not JSON") from None
        if isinstance(reply, dict) and reply.get("ok") is True:
            return reply.get("data")
        if isinstance(reply, dict) and reply.get("ok") is False:
            raise ToolgateError.from_wire(reply.get("error"))
        raise ToolgateError("internal", f"{operation}: a malformed reply")

    async def submit(
        self,
        run_id: str,
        call_id: str,
        tool: str,
        input: Json,
        agent: Optional[Dict[str, Json]] = None,
        wait: Union[bool, int, None] = None,
        **extra: Json,
    ) -> SubmitReply:
        """``dispatch.submit``; ``wait`` in ms (or True for the gateway's default). Submitting the same
        call again is a replay: ``status == 'replayed'`` and the tool does not run again."""
        body: Dict[str, Json] = {
            "runId": run_id,
            "callId": call_id,
            "agent": agent or {"agentType": "python"},
            "tool": tool,
            "input": input,
            **extra,
        }
        timeout = self.timeout
        if wait is not None:
            body["wait"] = wait
            if isinstance(wait, bool):
                timeout = max(timeout, 35.0) if wait else timeout
            else:
                timeout = max(timeout, wait / 1000 + 5)
        data = await self.call("dispatch.submit", body, timeout)
        settled = data.get("settled")
        return SubmitReply(
            data["dispatchId"], data["status"], data["state"], Outcome.from_json(settled) if settled else None
        )

    async def get_dispatch(self, dispatch_id: str) -> Json:
        return await self.call("dispatch.get", {"dispatchId": dispatch_id})

    def journal_subject(self, run_id: str) -> str:
        """Every journal event of one of this tenant's runs: what :meth:`follow` subscribes to."""
        return f"{self._journal}.{_subject_token('runId', run_id, 'invalid-request')}.>"

    async def get_run(self, run_id: str) -> Json:
        return await self.call("run.get", {"runId": run_id})

    async def list_approvals(self, **filters: Json) -> List[Dict[str, Json]]:
        """``approvals.list``: items carry the key as ``approvalKey``. Filters: runId, tool, key, status…"""
        data = await self.call("approvals.list", dict(filters))
        return list(data["approvals"])

    async def resolve_approval(
        self,
        key: str,
        decision: str,
        reason: Optional[str] = None,
        dispatch_id: Optional[str] = None,
        run_id: Optional[str] = None,
        input_digest: Optional[str] = None,
    ) -> Json:
        """``approvals.resolve``: ``decision`` is read fail-closed (anything but "allow" denies)."""
        body: Dict[str, Json] = {"key": key, "decision": decision}
        for name, value in (("reason", reason), ("dispatchId", dispatch_id), ("runId", run_id), ("inputDigest", input_digest)):
            if value is not None:
                body[name] = value
        return await self.call("approvals.resolve", body)

    # -- the journal ---------------------------------------------------------------------------

    async def follow(
        self, run_id: str, verifier: Optional[EventVerifier] = None, started: Optional["asyncio.Event"] = None
    ) -> AsyncGenerator[JournalEvent, None]:
        """The run's journal events as they are published (core NATS), each event id once: a plain
        subscriber also sees publishes JetStream refused as duplicates. With a verifier, each event
        carries its signature check; forged events are yielded with ``verdict.trusted == False``."""
        _subject_token("runId", run_id, "invalid-request")
        sub = await self.nc.subscribe(self.journal_subject(run_id))
        await self.nc.flush()
        if started is not None:
            started.set()
        seen: Set[str] = set()
        try:
            async for msg in sub:
                try:
                    body = msg.json()
                except ValueError:
                    continue
                if not isinstance(body, dict):
                    continue
                verdict = verifier.verify(msg.subject, msg.data, msg) if verifier else None
                event_type = str(body.get("type", ""))
                if verdict is not None and verdict.trusted and event_type != msg.subject.rsplit(".", 1)[-1]:
                    verdict = Verdict(False, "subject-mismatch", verdict.signer)
                event_id = str(body.get("id", ""))
                # Dedupe only what is trusted (or unchecked), so a forgery cannot shadow the real event.
                if verdict is None or verdict.trusted:
                    if event_id in seen:
                        continue
                    seen.add(event_id)
                yield JournalEvent(msg.subject, event_type, str(body.get("dispatchId", "")), body, verdict)
        finally:
            await sub.unsubscribe()

    async def dispatch(
        self,
        run_id: str,
        call_id: str,
        tool: str,
        input: Json,
        timeout: float = 30.0,
        verifier: Optional[EventVerifier] = None,
        **extra: Json,
    ) -> Outcome:
        """Submits and waits for ``settled`` in the journal (subscribed before submitting, so nothing
        is missed). A parked call waits for its resolution up to ``timeout``."""

        async def submit() -> SubmitReply:
            return await self.submit(run_id, call_id, tool, input, **extra)

        return await self._until_settled(run_id, timeout, verifier, submit=submit)

    async def wait(
        self, run_id: str, dispatch_id: str, timeout: float = 30.0, verifier: Optional[EventVerifier] = None
    ) -> Outcome:
        """Waits for an already submitted call to settle: follows the run's journal, and reads the
        recorded dispatch (``dispatch.get``) now and every 0.5 s in case it settled before."""
        return await self._until_settled(run_id, timeout, verifier, dispatch_id=dispatch_id)

    async def _recorded_outcome(self, dispatch_id: str) -> Optional[Outcome]:
        try:
            record = await self.get_dispatch(dispatch_id)
        except ToolgateError as err:
            if err.code == "not-found":  # the projection lags a write by a fraction of a second
                return None
            raise
        for item in record.get("events", []):
            event = item.get("event", {})
            if event.get("type") == "settled":
                return Outcome.from_json(event)
        return None

    async def _until_settled(
        self,
        run_id: str,
        timeout: float,
        verifier: Optional[EventVerifier],
        submit: Optional[Callable[[], Awaitable[SubmitReply]]] = None,
        dispatch_id: str = "",
    ) -> Outcome:
        started = asyncio.Event()
        events = self.follow(run_id, verifier, started)
        pending: "asyncio.Future[JournalEvent]" = asyncio.ensure_future(events.__anext__())
        try:
            await started.wait()
            if submit is not None:
                reply = await submit()
                if reply.settled is not None:
                    return reply.settled
                dispatch_id = reply.dispatch_id
            deadline = time.monotonic() + timeout
            next_read = time.monotonic() if submit is None else float("inf")
            while True:
                now = time.monotonic()
                if now >= next_read:
                    recorded = await self._recorded_outcome(dispatch_id)
                    if recorded is not None:
                        return recorded
                    next_read = time.monotonic() + 0.5
                left = min(deadline, next_read) - time.monotonic()
                if deadline <= time.monotonic():
                    raise ToolgateError("timeout", f"{dispatch_id} did not settle in time")
                done, _ = await asyncio.wait({pending}, timeout=max(0.0, left))
                if not done:
                    continue
                event = pending.result()
                if event.dispatch_id == dispatch_id and event.type == "settled":
                    if event.verdict is None or event.verdict.trusted:
                        return Outcome.from_json(event.body)
                pending = asyncio.ensure_future(events.__anext__())
        finally:
            if not pending.done():
                pending.cancel()
                try:
                    await pending
                except (asyncio.CancelledError, StopAsyncIteration):
                    pass
            await events.aclose()

    # -- workers -------------------------------------------------------------------------------

    async def serve_tool(
        self, name: str, handler: ToolHandler, contract_hash: Optional[str] = None,
        executor_public_key: Optional[str] = None,
    ) -> Served:
        """Serves a remote tool on its queue group. The handler's return value is the result; raise
        ToolFailed for a tool error. A request for another tenant or tool, a contract other than
        ``contract_hash``, or a missed deadline is answered with an error, never run. With
        ``executor_public_key`` (base64 SPKI Ed25519, ``toolgate keys tool-request-public-key``) a
        request that is not signed by the executor, is stale or replayed is answered
        ``unauthorized`` and never run."""
        subject = f"{self.prefix}.tools.{self.tenant}.{_subject_token('tool name', name, 'config')}"
        verifier = ToolRequestVerifier(executor_public_key) if executor_public_key else None

        async def answer(msg: Msg, arrived: float) -> None:
            reply: Dict[str, Json]
            try:
                refusal = verifier.check(subject, msg) if verifier else None
                if refusal:
                    raise ToolFailed(f"the request is not the executor's ({refusal}): not run", "unauthorized")
                req = _tool_request(msg, arrived)
                if req.tenant != self.tenant or req.tool_name != name:
                    raise ToolFailed(f"this worker serves {name} of {self.tenant}", "invalid-request")
                if contract_hash is not None and req.contract_hash != contract_hash:
                    raise ToolFailed(f"this worker serves a different contract of {name}", "executor-unregistered")
                result = await asyncio.wait_for(handler(req), max(0.0, req.deadline - time.monotonic()))
                reply = {"ok": True, "result": result}
            except ToolFailed as err:
                reply = {"ok": False, "error": {"code": err.code, "message": str(err)}}
            except asyncio.TimeoutError:
                reply = {"ok": False, "error": {"code": "timeout", "message": f"{name} ran past its deadline"}}
            except Exception as err:  # a handler's bug is the tool's failure, never the worker's crash
                reply = {"ok": False, "error": {"code": "tool-failed", "message": f"{type(err).__name__}: {err}"}}
            await msg.respond(json.dumps(reply).encode())

        return await self._serve(subject, subject, answer)

    async def serve_hook(
        self, name: str, handler: HookHandler, queue: Optional[str] = None,
        signing_key: Optional[str] = None,
    ) -> Served:
        """Serves a remote hook (or canUseTool) named in the policy's ``remote`` section. A handler
        that raises answers nothing, which the evaluator reads as a deny (fail closed). With
        ``signing_key`` (base64 PKCS8 Ed25519, see ``ed25519.generate``) every reply is signed;
        the policy names the hook with the matching ``publicKey``."""
        subject = f"{self.prefix}.hooks.{self.tenant}.{_subject_token('hook name', name, 'config')}"
        seed = ed25519.private_seed(signing_key) if signing_key else None

        async def answer(msg: Msg, arrived: float) -> None:
            try:
                body = msg.json()
            except ValueError:
                return
            if not isinstance(body, dict):
                return
            req = HookRequest(
                str(body.get("kind")), str(body.get("tenant")), str(body.get("toolName")),
                body.get("input"), dict(body.get("context") or {}),
            )
            if req.tenant != self.tenant:
                return
            try:
                reply = await handler(req)
            except Exception:  # no answer: the evaluator denies at the hook's timeout
                return
            body = json.dumps(reply.to_json()).encode()
            nonce = msg.header(HOOK_NONCE)
            if seed is not None and nonce:
                await msg.respond(body, headers={HOOK_SIGNATURE: sign_hook_reply(seed, nonce, msg.data, body)})
            else:
                await msg.respond(body)

        return await self._serve(subject, queue, answer)

    async def _serve(
        self, subject: str, queue: Optional[str], answer: Callable[[Msg, float], Awaitable[None]]
    ) -> Served:
        """The loop serve_tool and serve_hook share: subscribe (flushed, so the server has it before
        this returns), answer each request in a task of its own, and stop with the client."""
        served = Served(subject)
        served._sub = await self.nc.subscribe(subject, queue=queue)
        await self.nc.flush()

        async def loop() -> None:
            async for msg in served._sub:
                task = asyncio.ensure_future(answer(msg, time.monotonic()))
                served._inflight.add(task)
                task.add_done_callback(served._inflight.discard)

        served._task = asyncio.ensure_future(loop())
        self._served.append(served)
        return served


def _subject_token(kind: str, value: object, code: str) -> str:
    """``value`` when it is one safe subject token (no dots, wildcards, spaces or line breaks: the
    NATS protocol is line-based), else a ToolgateError with ``code``."""
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise ToolgateError(code, f"{kind} must be 1-128 characters of [A-Za-z0-9_-], got {value!r}")
    return value


def _tool_request(msg: Msg, arrived: float) -> ToolRequest:
    try:
        b = msg.json()
        assert isinstance(b, dict)
        deadline_ms = int(b["deadlineMs"])
        return ToolRequest(
            dispatch_id=str(b["dispatchId"]), tenant=str(b["tenant"]), run_id=str(b["runId"]),
            tool_name=str(b["toolName"]), contract_hash=str(b["contractHash"]), input=b.get("input"),
            agent=dict(b["agent"]), isolation=b.get("isolation"), deadline_ms=deadline_ms,
            # deadlineMs is relative: from when the request reaches this worker.
            deadline=arrived + deadline_ms / 1000, cwd=b.get("cwd"),
        )
    except (ValueError, KeyError, TypeError, AssertionError):
        raise ToolFailed("malformed remote tool request", "invalid-request") from None
