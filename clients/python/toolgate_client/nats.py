"""The subset of the core NATS client protocol Toolgate needs, on asyncio and the standard library.

CONNECT (user/password or token), PUB/HPUB, SUB/UNSUB (with queue groups), MSG/HMSG with headers,
PING/PONG, and request/reply over one wildcard inbox subscription under a configurable inbox prefix
(a production team user must use ``_INBOX_<tenant>``). Plain TCP only: no TLS, no reconnect, no
JetStream API (a team user has none; journal events reach plain subscribers).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlparse

_CRLF = b"\r\n"
#: What a subject, reply subject or queue group may be written as on a protocol line: printable
#: characters without spaces (a space splits the line's arguments, a line break ends it).
_PROTOCOL_WORD = re.compile(r"[!-~]+")
#: A header name or value: no line break (it would end the header early).
_HEADER_TEXT = re.compile(r"[^\r\n]*")


def _word(what: str, value: str) -> str:
    if not isinstance(value, str) or not _PROTOCOL_WORD.fullmatch(value):
        raise NatsError(f"{what} {value!r} cannot be sent: it is empty or has spaces or control characters")
    return value


class NatsError(Exception):
    """A protocol or connection failure (an ``-ERR`` from the server, a closed socket)."""


class NoRespondersError(NatsError):
    """A request no subscriber answered: the server's 503 status (e.g. a mistyped subject)."""


class RequestTimeoutError(NatsError):
    """A request not answered within its timeout."""


@dataclass
class Msg:
    """One delivered message. Header names keep their case; ``header()`` looks them up without it."""

    subject: str
    data: bytes
    reply: Optional[str] = None
    headers: Dict[str, List[str]] = field(default_factory=dict)
    status: Optional[int] = None
    _conn: Optional["Connection"] = field(default=None, repr=False)

    def header(self, name: str) -> Optional[str]:
        lower = name.lower()
        for key, values in self.headers.items():
            if key.lower() == lower and values:
                return values[0]
        return None

    def json(self) -> object:
        return json.loads(self.data.decode("utf-8"))

    async def respond(self, data: bytes, headers: Optional[Dict[str, str]] = None) -> None:
        if self.reply is None or self._conn is None:
            return
        await self._conn.publish(self.reply, data, headers=headers)


class Subscription:
    """A subscription: iterate it (``async for msg in sub``) or read ``next_msg()``."""

    def __init__(self, conn: "Connection", sid: int, subject: str, queue: Optional[str]) -> None:
        self._conn = conn
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self._queue: "asyncio.Queue[Optional[Msg]]" = asyncio.Queue()
        self.closed = False

    def _deliver(self, msg: Optional[Msg]) -> None:
        self._queue.put_nowait(msg)

    async def next_msg(self, timeout: Optional[float] = None) -> Msg:
        item = await asyncio.wait_for(self._queue.get(), timeout)
        if item is None:
            raise NatsError("subscription closed")
        return item

    def __aiter__(self) -> AsyncIterator[Msg]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Msg]:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            yield item

    async def unsubscribe(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self._conn._unsubscribe(self)


@dataclass
class ConnectOptions:
    url: str = "nats://127.0.0.1:4222"
    user: Optional[str] = None
    password: Optional[str] = None
    token: Optional[str] = None
    inbox_prefix: str = "_INBOX"
    name: str = "toolgate-python"
    connect_timeout: float = 5.0


class Connection:
    """One connection to one NATS server. Use :func:`connect`."""

    def __init__(self, options: ConnectOptions) -> None:
        self._options = options
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._subs: Dict[int, Subscription] = {}
        self._next_sid = 1
        self._pongs: List["asyncio.Future[None]"] = []
        self._read_task: Optional["asyncio.Task[None]"] = None
        self._inbox_base = f"{options.inbox_prefix}.{secrets.token_hex(11)}"
        self._inbox_sub: Optional[Subscription] = None
        self._inbox_task: Optional["asyncio.Task[None]"] = None
        self._pending: Dict[str, "asyncio.Future[Msg]"] = {}
        self._write_lock = asyncio.Lock()
        self._error: Optional[NatsError] = None
        self.server_info: Dict[str, object] = {}

    async def _open(self) -> None:
        parsed = urlparse(self._options.url if "://" in self._options.url else f"nats://{self._options.url}")
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 4222
        user = self._options.user or (parsed.username if parsed.password is not None else None)
        password = self._options.password or parsed.password
        token = self._options.token or (parsed.username if parsed.password is None else None)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), self._options.connect_timeout
        )
        self._reader, self._writer = reader, writer
        line = await asyncio.wait_for(reader.readline(), self._options.connect_timeout)
        if not line.startswith(b"INFO "):
            raise NatsError("the server did not greet with INFO")
        self.server_info = json.loads(line[5:].decode())
        connect: Dict[str, object] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "lang": "python-toolgate",
            "version": "0.1.0",
            "protocol": 1,
            "name": self._options.name,
        }
        if user is not None:
            connect["user"] = user
            connect["pass"] = password or ""
        if token is not None:
            connect["auth_token"] = token
        writer.write(b"CONNECT " + json.dumps(connect).encode() + _CRLF + b"PING" + _CRLF)
        await writer.drain()
        # The first answer is PONG (accepted) or -ERR (e.g. 'Authorization Violation').
        while True:
            line = await asyncio.wait_for(reader.readline(), self._options.connect_timeout)
            if not line:
                raise NatsError("the server closed the connection while connecting")
            if line.startswith(b"-ERR"):
                raise NatsError(line[5:].decode().strip().strip("'"))
            if line.startswith(b"PONG"):
                break
        self._read_task = asyncio.ensure_future(self._read_loop())
        self._inbox_sub = await self.subscribe(f"{self._inbox_base}.*")
        self._inbox_task = asyncio.ensure_future(self._route_replies(self._inbox_sub))

    # -- writing -------------------------------------------------------------------------------

    async def _send(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        if self._writer is None:
            raise NatsError("not connected")
        async with self._write_lock:
            self._writer.write(data)
            await self._writer.drain()

    async def publish(
        self,
        subject: str,
        data: bytes = b"",
        reply: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
    ) -> None:
        _word("subject", subject)
        reply_part = f" {_word('reply subject', reply)}" if reply else ""
        if headers:
            for k, v in headers.items():
                if not _PROTOCOL_WORD.fullmatch(k) or ":" in k or not _HEADER_TEXT.fullmatch(v):
                    raise NatsError(f"header {k!r} cannot be sent: a line break, or a name with spaces or ':'")
            head = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            hb = head.encode()
            line = f"HPUB {subject}{reply_part} {len(hb)} {len(hb) + len(data)}\r\n".encode()
            await self._send(line + hb + data + _CRLF)
        else:
            line = f"PUB {subject}{reply_part} {len(data)}\r\n".encode()
            await self._send(line + data + _CRLF)

    async def subscribe(self, subject: str, queue: Optional[str] = None) -> Subscription:
        _word("subject", subject)
        if queue:
            _word("queue group", queue)
        sid = self._next_sid
        self._next_sid += 1
        sub = Subscription(self, sid, subject, queue)
        self._subs[sid] = sub
        q = f" {queue}" if queue else ""
        await self._send(f"SUB {subject}{q} {sid}\r\n".encode())
        return sub

    async def _unsubscribe(self, sub: Subscription) -> None:
        self._subs.pop(sub.sid, None)
        sub._deliver(None)
        if self._error is None and self._writer is not None:
            await self._send(f"UNSUB {sub.sid}\r\n".encode())

    async def flush(self, timeout: float = 5.0) -> None:
        """A PING answered by PONG: everything sent before it reached the server."""
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._pongs.append(fut)
        await self._send(b"PING\r\n")
        await asyncio.wait_for(fut, timeout)

    def new_inbox(self) -> str:
        return f"{self._options.inbox_prefix}.{secrets.token_hex(11)}"

    async def request(
        self,
        subject: str,
        data: bytes,
        timeout: float = 5.0,
        headers: Optional[Dict[str, str]] = None,
    ) -> Msg:
        token = secrets.token_hex(8)
        fut: "asyncio.Future[Msg]" = asyncio.get_running_loop().create_future()
        self._pending[token] = fut
        try:
            await self.publish(subject, data, reply=f"{self._inbox_base}.{token}", headers=headers)
            try:
                msg = await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                raise RequestTimeoutError(f"no reply on {subject} within {timeout} s") from None
        finally:
            self._pending.pop(token, None)
        if msg.status == 503:
            raise NoRespondersError(f"no responders on {subject}")
        return msg

    async def _route_replies(self, sub: Subscription) -> None:
        async for msg in sub:
            fut = self._pending.get(msg.subject.rsplit(".", 1)[-1])
            if fut is not None and not fut.done():
                fut.set_result(msg)

    # -- reading -------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self._reader is not None
        reader = self._reader
        try:
            while True:
                line = await reader.readline()
                if not line:
                    raise NatsError("the server closed the connection")
                if line.startswith(b"MSG "):
                    parts = line[4:].split()
                    size = int(parts[-1])
                    body = await reader.readexactly(size + 2)
                    reply = parts[2].decode() if len(parts) == 4 else None
                    self._dispatch(int(parts[1]), Msg(parts[0].decode(), body[:-2], reply))
                elif line.startswith(b"HMSG "):
                    parts = line[5:].split()
                    hsize, total = int(parts[-2]), int(parts[-1])
                    body = await reader.readexactly(total + 2)
                    reply = parts[2].decode() if len(parts) == 5 else None
                    headers, status = _parse_headers(body[:hsize])
                    msg = Msg(parts[0].decode(), body[hsize:total], reply, headers, status)
                    self._dispatch(int(parts[1]), msg)
                elif line.startswith(b"PING"):
                    await self._send(b"PONG\r\n")
                elif line.startswith(b"PONG"):
                    if self._pongs:
                        fut = self._pongs.pop(0)
                        if not fut.done():
                            fut.set_result(None)
                elif line.startswith(b"-ERR"):
                    text = line[5:].decode().strip().strip("'")
                    # Permission violations are per subject; the connection stays open.
                    if "permissions violation" not in text.lower():
                        raise NatsError(text)
                # +OK and INFO need nothing.
        except (NatsError, asyncio.IncompleteReadError, ConnectionError) as err:
            self._error = err if isinstance(err, NatsError) else NatsError(str(err))
            for sub in list(self._subs.values()):
                sub._deliver(None)
        except asyncio.CancelledError:
            pass

    def _dispatch(self, sid: int, msg: Msg) -> None:
        sub = self._subs.get(sid)
        if sub is not None:
            msg._conn = self
            sub._deliver(msg)

    async def close(self) -> None:
        for sub in list(self._subs.values()):
            sub.closed = True
            sub._deliver(None)
        self._subs.clear()
        if self._writer is not None:
            try:
                async with self._write_lock:
                    await self._writer.drain()
            except ConnectionError:
                pass
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
        for task in (self._read_task, self._inbox_task):
            if task is not None:
                task.cancel()
        self._error = NatsError("closed")


def _parse_headers(raw: bytes) -> Tuple[Dict[str, List[str]], Optional[int]]:
    lines = raw.decode("utf-8", "replace").split("\r\n")
    status: Optional[int] = None
    first = lines[0].split(" ", 2)
    if len(first) >= 2 and first[1].isdigit():
        status = int(first[1])
    headers: Dict[str, List[str]] = {}
    for line in lines[1:]:
        if not line or ":" not in line:
            continue
        key, value = line.split(":", 1)
        headers.setdefault(key.strip(), []).append(value.strip())
    return headers, status


async def connect(options: Optional[ConnectOptions] = None) -> Connection:
    conn = Connection(options or ConnectOptions())
    try:
        await conn._open()
    except BaseException:
        await conn.close()
        raise
    return conn


MessageHandler = Callable[[Msg], Awaitable[None]]
