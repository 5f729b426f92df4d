"""A small, typed Toolgate client over the bus protocol, on the Python standard library only."""

from .client import (
    Client,
    HookReply,
    HookRequest,
    JournalEvent,
    Outcome,
    Served,
    SubmitReply,
    ToolFailed,
    ToolgateError,
    ToolRequest,
    journal_partition_of,
)
from .nats import ConnectOptions, Connection, Msg, NatsError, NoRespondersError, connect
from .signing import EventVerifier, Verdict
from . import ed25519
from .auth import ToolRequestVerifier, sign_hook_reply

__all__ = [
    "Client", "HookReply", "HookRequest", "JournalEvent", "Outcome", "Served", "SubmitReply",
    "ToolFailed", "ToolgateError", "ToolRequest", "ConnectOptions", "Connection", "Msg",
    "NatsError", "NoRespondersError", "connect", "EventVerifier", "Verdict", "ed25519",
    "ToolRequestVerifier", "sign_hook_reply", "journal_partition_of",
]
__version__ = "0.1.0"
