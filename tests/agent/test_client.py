"""The chat-completions client against a scripted local server, over a real socket."""

import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402

pytest.importorskip("openai")
from opbench.agent.client import ChatClient, ClientError, Endpoint, is_loopback  # noqa: E402

MSG = [{"role": "user", "content": "write relu"}]


def _client(url: str, **kw) -> ChatClient:
    return ChatClient(Endpoint(base_url=url, model="scripted", **kw))


def test_a_reply_with_tokens_and_cost() -> None:
    with ChatServer([(200, "here is a kernel")]) as srv:
        c = _client(srv.url, price_in_per_mtok=2.0, price_out_per_mtok=10.0, temperature=0.2)
        out = c.complete(MSG)
    assert out.text == "here is a kernel" and out.finish_reason == "stop"
    assert (out.prompt_tokens, out.completion_tokens) == (11, 4)
    assert out.cost_usd == pytest.approx((11 * 2.0 + 4 * 10.0) / 1e6)
    assert srv.requests[0]["messages"] == MSG and srv.requests[0]["temperature"] == 0.2
    assert c.usage.to_dict()["requests"] == 1


@pytest.mark.slow
def test_server_errors_are_retried_then_succeed() -> None:
    with ChatServer([(500, "boom"), (503, "busy"), (200, "ok")]) as srv:
        out = _client(srv.url, max_retries=3).complete(MSG)
    assert out.text == "ok" and len(srv.requests) == 3


def test_retries_are_bounded_and_the_error_says_what_happened() -> None:
    with ChatServer([(429, "slow down")]) as srv:
        with pytest.raises(ClientError) as e:
            _client(srv.url, max_retries=1).complete(MSG)
    assert e.value.kind == "rate_limited" and "2 attempts" in str(e.value)
    assert len(srv.requests) == 2


def test_an_unreachable_endpoint_is_named() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ClientError) as e:
        _client(f"http://127.0.0.1:{port}/v1", max_retries=0).complete(MSG)
    assert e.value.kind == "unreachable" and str(port) in str(e.value)


def test_a_slow_endpoint_times_out() -> None:
    with ChatServer([("sleep", 3.0)]) as srv:
        t0 = time.perf_counter()
        with pytest.raises(ClientError) as e:
            _client(srv.url, timeout_s=0.5, max_retries=0).complete(MSG)
    assert e.value.kind == "timeout" and time.perf_counter() - t0 < 2.5


def test_a_response_without_a_message_is_a_bad_response() -> None:
    with ChatServer([("raw", {"id": "x", "object": "chat.completion", "choices": []})]) as srv:
        with pytest.raises(ClientError) as e:
            _client(srv.url).complete(MSG)
    assert e.value.kind == "bad_response"


def test_auth_and_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(ClientError) as e:
        ChatClient(Endpoint(base_url="https://api.example.com/v1", model="m", api_key_env="MY_KEY"))
    assert e.value.kind == "missing_key" and "MY_KEY" in str(e.value)
    with ChatServer([(401, "invalid key")]) as srv:
        with pytest.raises(ClientError) as e:
            _client(srv.url).complete(MSG)
    assert e.value.kind == "auth" and "invalid key" in str(e.value)


def test_loopback_detection() -> None:
    assert is_loopback("http://localhost:8000/v1") and is_loopback("http://127.0.0.2/v1")
    assert is_loopback("http://[::1]:8000/v1")
    assert not is_loopback("https://api.openai.com/v1") and not is_loopback("http://10.0.0.1/v1")
