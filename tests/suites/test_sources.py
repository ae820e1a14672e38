"""Where traces come from: explicit path, OPBENCH_TRACES, or a verified one-time download.

The download code is tested against a real HTTP server on 127.0.0.1 (no internet here):
good files, a hash mismatch, a size mismatch, a truncated body and a closed port.
"""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from opbench.suites.sources import (
    DownloadError,
    Published,
    download,
    fetch_published,
    resolve_traces,
)

TRACE = b"Operator: aten.relu.default\ncnt: 2, ((T([8, 8], f16),), {})\n"
OTHER = b"Operator: aten.add.Tensor\ncnt: 1, ((T([4], f32), T([4], f32)), {})\n"


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        if self.path == "/truncated.txt":
            self.send_response(200)
            self.send_header("Content-Length", str(len(TRACE) * 10))
            self.end_headers()
            self.wfile.write(TRACE)
            self.wfile.flush()
            self.close_connection = True
            return
        if self.path == "/lfs.txt":  # like Hugging Face: the LFS sha256 in X-Linked-Etag
            self.send_response(200)
            self.send_header("Content-Length", str(len(TRACE)))
            self.send_header("X-Linked-Etag", '"' + "0" * 64 + '"')
            self.end_headers()
            self.wfile.write(TRACE)
            return
        super().do_GET()


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "www"
    root.mkdir()
    (root / "model_a.txt").write_bytes(TRACE)
    (root / "model_b.txt").write_bytes(OTHER)
    _Handler.requests = []

    def handler(*args, **kwargs):
        return _Handler(*args, directory=str(root), **kwargs)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits for the loop's next poll: 0.5 s a test at the default interval
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".part")]


def test_download_verifies_sha256_and_size(server: str, tmp_path: Path) -> None:
    dest = tmp_path / "dl" / "model_a.txt"
    sha = hashlib.sha256(TRACE).hexdigest()
    out = download(f"{server}/model_a.txt", dest, sha256=sha, size=len(TRACE), progress=False)
    assert out == dest and dest.read_bytes() == TRACE
    assert not _leftovers(dest.parent)


def test_hash_mismatch_leaves_nothing(server: str, tmp_path: Path) -> None:
    dest = tmp_path / "dl" / "model_b.txt"
    with pytest.raises(DownloadError, match="sha256"):
        download(
            f"{server}/model_b.txt", dest, sha256=hashlib.sha256(TRACE).hexdigest(), progress=False
        )
    assert not dest.exists() and not _leftovers(dest.parent)


def test_size_mismatch_leaves_nothing(server: str, tmp_path: Path) -> None:
    dest = tmp_path / "dl" / "model_b.txt"
    with pytest.raises(DownloadError, match="bytes"):
        download(f"{server}/model_b.txt", dest, size=len(OTHER) + 1, progress=False)
    assert not dest.exists() and not _leftovers(dest.parent)


def test_truncated_download_is_rejected(server: str, tmp_path: Path) -> None:
    dest = tmp_path / "dl" / "truncated.txt"
    with pytest.raises(DownloadError, match="cut off"):
        download(f"{server}/truncated.txt", dest, progress=False)
    assert not dest.exists() and not _leftovers(dest.parent)


def test_server_reported_hash_is_checked_without_a_pin(server: str, tmp_path: Path) -> None:
    dest = tmp_path / "dl" / "lfs.txt"
    with pytest.raises(DownloadError, match="sha256"):
        download(f"{server}/lfs.txt", dest, progress=False)
    assert not dest.exists()


def test_missing_file_and_offline_give_clear_errors(server: str, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(f"{server}/nope.txt", tmp_path / "x.txt", progress=False)
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match="OPBENCH_TRACES"):
        download(
            f"http://127.0.0.1:{port}/model_a.txt", tmp_path / "y.txt", progress=False, timeout=5
        )


def test_fetch_published_downloads_once(server: str, tmp_path: Path) -> None:
    src = Published(
        url=f"{server}/model_a.txt",
        filename="model_a.txt",
        revision="r1",
        sha256=hashlib.sha256(TRACE).hexdigest(),
        size=len(TRACE),
    )
    first = fetch_published(src, dest_dir=tmp_path / "cache")
    second = fetch_published(src, dest_dir=tmp_path / "cache")
    assert first == second and first.read_bytes() == TRACE
    assert _Handler.requests.count("/model_a.txt") == 1
    assert first.parent.name == "r1"


def test_resolve_order(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = tmp_path / "mine.txt"
    explicit.write_bytes(OTHER)
    env_copy = tmp_path / "env.txt"
    env_copy.write_bytes(TRACE)
    monkeypatch.setenv("OPBENCH_TRACES", str(env_copy))
    assert resolve_traces(explicit) == explicit
    assert resolve_traces(None) == env_copy
    with pytest.raises(FileNotFoundError):
        resolve_traces(tmp_path / "missing")
    monkeypatch.delenv("OPBENCH_TRACES")
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPBENCH_TRACES_URL", f"{server}/model_b.txt")
    monkeypatch.setenv("OPBENCH_TRACES_SHA256", hashlib.sha256(OTHER).hexdigest())
    got = resolve_traces(None)
    assert got.read_bytes() == OTHER and (tmp_path / "cache") in got.parents


def test_downloaded_traces_build_a_suite(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    from opbench.suites.traces import build_trace_cases

    path = download(f"{server}/model_a.txt", tmp_path / "t" / "model_a.txt", progress=False)
    (case,) = build_trace_cases(path)
    assert case.op == "relu.default" and case.count == 2 and case.models == ("model_a",)
