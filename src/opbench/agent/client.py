"""A client for any OpenAI-compatible chat-completions endpoint: hosted APIs and local
servers (vLLM, SGLang, Ollama, LiteLLM proxies), built on the official ``openai``
package (``pip install 'opbench[agent]'``).

What it adds to ``openai.OpenAI``: the API key from ``OPENAI_API_KEY`` or the variable
the user names, not required for a loopback URL (local servers take any key); bounded
retries with exponential backoff and a per-request timeout (the library's own, which
also honours ``Retry-After``); token usage and, given prices, cost, per request and in
total (thread-safe: many ops ask in parallel); and one error type whose ``kind`` says
what went wrong in words a user can act on (``unreachable``, ``timeout``, ``auth``,
``missing_key``, ``rate_limited``, ``server_error``, ``bad_request``, ``bad_response``).
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

__all__ = ["ChatClient", "ClientError", "Completion", "Endpoint", "Usage", "is_loopback"]


class ClientError(RuntimeError):
    """A request that could not be completed; ``kind`` names the reason."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Endpoint:
    """Where and how to ask. Prices are USD per million tokens (None: cost unknown)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 300.0
    max_retries: int = 3
    temperature: float | None = None
    max_tokens: int | None = None
    price_in_per_mtok: float | None = None
    price_out_per_mtok: float | None = None


@dataclass
class Completion:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float
    model: str


# Like instrument.neighbours._Window, kept apart: request totals, not CPU times
@dataclass
class Usage:
    """Totals over every request a client made."""

    requests: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, c: Completion | None) -> None:
        with self._lock:
            self.requests += 1
            if c is None:
                self.failures += 1
                return
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            if c.cost_usd is None:
                self.cost_usd = None
            elif self.cost_usd is not None:
                self.cost_usd += c.cost_usd

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.requests,
                "failures": self.failures,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            }


def is_loopback(url: str) -> bool:
    """True for a URL on this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ChatClient:
    """Chat completions from one endpoint; safe to share between threads."""

    def __init__(self, endpoint: Endpoint) -> None:
        try:
            import openai
        except ImportError as e:  # pragma: no cover - the [agent] extra is missing
            raise ClientError(
                "missing_dependency", "the agent needs openai: pip install 'opbench[agent]'"
            ) from e
        self.endpoint = endpoint
        key = os.environ.get(endpoint.api_key_env)
        if not key:
            if not is_loopback(endpoint.base_url):
                raise ClientError(
                    "missing_key",
                    f"no API key for {endpoint.base_url}: set {endpoint.api_key_env} (or name "
                    "another variable with --api-key-env); a loopback URL needs none",
                )
            key = "not-needed"  # local servers accept any key
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=key,
            timeout=endpoint.timeout_s,
            max_retries=endpoint.max_retries,
        )
        self.usage = Usage()

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        """One chat completion (retried per the endpoint's settings); raises
        :class:`ClientError`."""
        ep = self.endpoint
        kwargs: dict[str, Any] = {"model": ep.model, "messages": messages}
        if ep.temperature is not None:
            kwargs["temperature"] = ep.temperature
        if ep.max_tokens is not None:
            kwargs["max_tokens"] = ep.max_tokens
        t0 = time.perf_counter()
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except Exception as e:
            self.usage.add(None)
            raise self._explain(e) from e
        latency = time.perf_counter() - t0
        try:
            choice = resp.choices[0]
            text = choice.message.content or ""
            finish = choice.finish_reason
        except (AttributeError, IndexError, TypeError) as e:
            self.usage.add(None)
            raise ClientError(
                "bad_response", f"{ep.base_url} answered without a message ({e}): {resp!r}"[:500]
            ) from e
        usage = getattr(resp, "usage", None)
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = None
        if ep.price_in_per_mtok is not None and ep.price_out_per_mtok is not None:
            cost = (p_tok * ep.price_in_per_mtok + c_tok * ep.price_out_per_mtok) / 1e6
        out = Completion(
            text, finish, p_tok, c_tok, cost, latency, getattr(resp, "model", ep.model)
        )
        self.usage.add(out)
        return out

    def _explain(self, e: Exception) -> ClientError:
        o, ep = self._openai, self.endpoint
        tries = f"after {ep.max_retries + 1} attempts" if ep.max_retries else "(no retries)"
        # One branch per openai error class, kept apart: each names its own cause and fix
        if isinstance(e, o.APITimeoutError):
            return ClientError(
                "timeout", f"{ep.base_url} did not answer within {ep.timeout_s:g} s {tries}"
            )
        if isinstance(e, o.APIConnectionError):
            return ClientError(
                "unreachable", f"cannot reach {ep.base_url} {tries}: {e.__cause__ or e}"
            )
        if isinstance(e, o.AuthenticationError):
            return ClientError(
                "auth", f"{ep.base_url} rejected the API key from {ep.api_key_env}: {_detail(e)}"
            )
        if isinstance(e, o.RateLimitError):
            return ClientError(
                "rate_limited", f"{ep.base_url} kept rate-limiting {tries}: {_detail(e)}"
            )
        if isinstance(e, o.InternalServerError):
            return ClientError("server_error", f"{ep.base_url} failed {tries}: {_detail(e)}")
        if isinstance(e, o.APIStatusError):
            return ClientError(
                "bad_request",
                f"{ep.base_url} refused the request for model {ep.model!r}: {_detail(e)}",
            )
        return ClientError("bad_response", f"{ep.base_url}: {type(e).__name__}: {e}"[:500])


def _detail(e: Any) -> str:
    status = getattr(e, "status_code", None)
    msg = str(getattr(e, "message", "") or e)
    return f"HTTP {status}: {msg}"[:400] if status else msg[:400]
