"""A local HTTP retrieval server with Search-R1's API.

API (the one Search-R1's ``retrieval_server.py`` serves and its agent loop calls):

``POST /retrieve`` with JSON ``{"queries": ["q1", ...], "topk": 3, "return_scores": true}`` answers
``{"result": [[{"document": {"id": "...", "contents": "title\\ntext"}, "score": 12.3}, ...], ...]}``:
one ranked list per query. verl-agent's single-query shape ``{"query": "q1", "topk": 3, ...}`` is
answered the same way, with one list in ``result``. With ``"return_scores": false`` (Search-R1's default)
each list holds the bare documents. A missing, null or zero ``topk`` uses the server's default (as
upstream's ``if not request.topk``). ``contents`` is the corpus record's own text, so wiki-18 titles
keep their quotes (``"\\"Aaron\\"\\n..."``), as Search-R1's server returns them. ``GET /health`` (and
``HEAD``) answers ``{"status": "ok", ...}``. Malformed requests, bodies over the size limit and JSON
nested too deeply get HTTP 400 with ``{"error": "..."}``; a failing retriever gives HTTP 500.

:class:`RetrievalServer` serves any :class:`~agentgym_credit.envs.searchqa.retrieval.Retriever` with the
standard library's ``HTTPServer`` on 127.0.0.1 and an ephemeral port unless told otherwise. Under load
it behaves as a production server should: a listen backlog of 1,024 connections (a burst of 500
simultaneous requests is served in full), a bounded pool of worker threads (``threads``), at most
``threads + max_pending`` accepted connections in memory (the rest wait in the kernel's backlog), one
request per connection (``Connection: close``, so an idle keep-alive client never holds a worker), a
socket timeout against stalled clients, and an answer to every request, even one whose body is too
large (up to 64 MiB of the body is read and dropped after the 400, so the client reads the 400
instead of a connection reset).
:class:`~agentgym_credit.envs.searchqa.retrieval.RemoteRetriever` implements the ``Retriever``
interface over such an endpoint, so the environment can use a server of the user's own (e.g.
Search-R1's E5 server over Wikipedia); it and :class:`~agentgym_credit.envs.searchqa.retrieval.RetrieverUnavailableError`
are also importable from here, where they were first defined.

Command line: ``python -m agentgym_credit.envs.searchqa.server --retriever bm25 --port 8000``.

Contents: :class:`RetrievalServer`, :func:`main`.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from agentgym_credit.envs.searchqa.retrieval import (
    RETRIEVER_KINDS,
    RemoteRetriever,
    Retriever,
    RetrieverUnavailableError,
)

__all__ = ["RemoteRetriever", "RetrievalServer", "RetrieverUnavailableError", "main"]

DEFAULT_MAX_BODY = 16 * 1024 * 1024
LISTEN_BACKLOG = 1024
_DRAIN_LIMIT = 64 * 1024 * 1024  # bytes of an oversized body read (and dropped) after its 400
_DRAIN_SECONDS = 10.0


class _BadRequest(ValueError):
    """A request the server answers with HTTP 400."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        """Keep the console quiet (one line per request would flood training logs)."""

    def setup(self) -> None:
        self.timeout = self.server.client_timeout  # the socket timeout of this connection
        super().setup()

    def _reply(self, status: int, payload: dict[str, Any], *, head: bool = False, **headers: str) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self.close_connection = True

    def _route(self) -> str:
        return urllib.parse.urlsplit(self.path).path.rstrip("/")

    def _get(self, head: bool) -> None:
        route = self._route()
        if route in ("", "/health"):
            self._reply(HTTPStatus.OK, {"status": "ok", "retriever": repr(self.server.retriever)}, head=head)
        elif route == "/retrieve":
            error = {"error": "use POST /retrieve with a JSON body"}
            self._reply(HTTPStatus.METHOD_NOT_ALLOWED, error, head=head, Allow="POST")
        else:
            error = {"error": f"unknown path {self.path!r}; use POST /retrieve"}
            self._reply(HTTPStatus.NOT_FOUND, error, head=head)

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._get(head=False)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
        self._get(head=True)

    def _content_length(self) -> int:
        if self.headers.get("Transfer-Encoding", "").lower() not in ("", "identity"):
            raise _BadRequest("send the body with a Content-Length (chunked bodies are not accepted)")
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise _BadRequest("Content-Length must be an integer") from None
        if length <= 0:
            raise _BadRequest("the request needs a JSON body (Content-Length > 0)")
        return length

    def _drain(self, length: int) -> None:
        """Read and drop up to ``length`` unread body bytes, so closing does not reset the connection."""
        left, deadline = min(length, _DRAIN_LIMIT), time.monotonic() + _DRAIN_SECONDS
        try:
            while left > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        if self._route() != "/retrieve":
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"unknown path {self.path!r}; use POST /retrieve"})
            return
        limit = self.server.max_body
        try:
            length = self._content_length()
        except _BadRequest as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        if length > limit:
            error = f"the request body is {length} bytes; the limit is {limit}"
            self._reply(HTTPStatus.BAD_REQUEST, {"error": error})
            self.wfile.flush()
            self._drain(length)
            return
        try:
            request = _loads(self.rfile.read(length))
            queries, topk, return_scores, single = self.server.parse_request(request)
        except _BadRequest as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        try:
            with self.server.lock:
                results = self.server.retriever.search(queries, topk)
        except Exception as exc:  # a failing retriever is the server's error, reported to the client
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"retrieval failed: {exc!r:.500}"})
            return
        if return_scores:
            payload = [[hit.to_search_r1() for hit in hits] for hits in results]
        else:
            payload = [[hit.passage.to_json() for hit in hits] for hits in results]
        self._reply(HTTPStatus.OK, {"result": payload[:1] if single else payload})


def _loads(body: bytes) -> Any:
    """Decode a JSON body; every failure (bad UTF-8, bad JSON, nesting too deep) is a :class:`_BadRequest`."""
    try:
        return json.loads(body)
    except RecursionError:
        raise _BadRequest("the JSON body is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise _BadRequest(f"the body is not valid JSON: {exc}") from None


class _Server(HTTPServer):
    """``HTTPServer`` with a large listen backlog and a bounded pool of worker threads."""

    def __init__(
        self,
        address: tuple[str, int],
        retriever: Retriever,
        default_topk: int,
        *,
        threads: int,
        max_pending: int,
        max_body: int,
        client_timeout: float,
        backlog: int,
    ) -> None:
        if ":" in address[0]:  # an IPv6 literal such as "::1"
            self.address_family = socket.AF_INET6
        self.request_queue_size = backlog  # read by server_activate's listen()
        super().__init__(address, _Handler)
        self.retriever = retriever
        self.default_topk = default_topk
        self.max_body = max_body
        self.client_timeout = client_timeout
        self.lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(threads + max_pending)
        self._pool = ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix=f"searchqa-retrieval-{self.server_address[1]}-worker"
        )

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the connection to the pool; block accepting while ``threads + max_pending`` are taken."""
        self._slots.acquire()
        try:
            self._pool.submit(self._serve_one, request, client_address)
        except RuntimeError:  # the pool is shutting down
            self._slots.release()
            self.shutdown_request(request)

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke (client gone, timeout) concerns that client only: stay quiet."""

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=True)

    def parse_request(self, request: Any) -> tuple[list[str], int, bool, bool]:
        """The queries, topk, return_scores and whether the single-``query`` shape was used."""
        if not isinstance(request, dict):
            raise _BadRequest(
                'the body must be a JSON object {"queries": [...], "topk": k, "return_scores": b} '
                'or {"query": "...", "topk": k, "return_scores": b}'
            )
        if "queries" in request and "query" in request:
            raise _BadRequest('give either "queries" (a list) or "query" (one string), not both')
        single = "query" in request
        if single:
            if not isinstance(request["query"], str):
                raise _BadRequest('"query" must be a string')
            queries = [request["query"]]
        else:
            queries = request.get("queries")
            if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
                raise _BadRequest('"queries" must be a list of strings')
        topk = request.get("topk")
        topk = self.default_topk if topk is None or (topk == 0 and not isinstance(topk, bool)) else topk
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise _BadRequest(f'"topk" must be a positive integer (0 or null: the default), got {topk!r}')
        return queries, topk, bool(request.get("return_scores", False)), single


class RetrievalServer:
    """Serve a retriever over HTTP with Search-R1's ``/retrieve`` API.

    Args:
        retriever: the retriever to serve.
        host: the interface to bind (loopback by default).
        port: the port; 0 picks a free ephemeral port (see :attr:`port` after :meth:`start`).
        default_topk: ``topk`` for requests that give none (or 0).
        threads: worker threads answering requests.
        max_pending: accepted connections that may wait for a worker (more wait in the listen backlog).
        max_body: the largest request body in bytes; larger ones get HTTP 400.
        client_timeout: seconds a connection may stall (sending its request) before it is dropped.
        backlog: the listen backlog (connections the kernel queues before the server accepts them;
            capped by the system's ``somaxconn``).

    Examples:
        >>> with RetrievalServer(get_retriever("bm25")) as server:  # doctest: +SKIP
        ...     RemoteRetriever(server.url).search(["Tarsk"], 3)
    """

    def __init__(
        self,
        retriever: Retriever,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        default_topk: int = 3,
        threads: int = 8,
        max_pending: int = 256,
        max_body: int = DEFAULT_MAX_BODY,
        client_timeout: float = 30.0,
        backlog: int = LISTEN_BACKLOG,
    ) -> None:
        positive = {"default_topk": default_topk, "threads": threads, "max_body": max_body, "backlog": backlog}
        for name, value in positive.items():
            if int(value) < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if int(max_pending) < 0 or not float(client_timeout) > 0:
            raise ValueError(
                f"need max_pending >= 0 and client_timeout > 0, got {max_pending} and {client_timeout}"
            )
        self.retriever = retriever
        self.host = host
        self._requested_port = int(port)
        self.default_topk = int(default_topk)
        self.threads, self.max_pending = int(threads), int(max_pending)
        self.max_body, self.client_timeout = int(max_body), float(client_timeout)
        self.backlog = int(backlog)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the server is serving."""
        return self._server is not None

    @property
    def port(self) -> int:
        """The bound port (the requested one until started)."""
        return self._server.server_address[1] if self._server is not None else self._requested_port

    @property
    def url(self) -> str:
        """The ``/retrieve`` endpoint URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/retrieve"

    def start(self) -> RetrievalServer:
        """Bind and serve in a background thread; returns ``self``."""
        if self._server is not None:
            raise RuntimeError(f"the retrieval server is already running at {self.url}")
        self._server = _Server(
            (self.host, self._requested_port),
            self.retriever,
            self.default_topk,
            threads=self.threads,
            max_pending=self.max_pending,
            max_body=self.max_body,
            client_timeout=self.client_timeout,
            backlog=self.backlog,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="searchqa-retrieval", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve (starting if needed) and block until interrupted (Ctrl-C), then stop."""
        if self._server is None:
            self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(timeout=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop serving and release the port (no-op when not running)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> RetrievalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running at {self.url}" if self.running else "stopped"
        return f"RetrievalServer({self.retriever!r}, {state})"


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a local retriever from the command line (Ctrl-C stops it)."""
    from agentgym_credit.envs.searchqa.corpus import load_corpus
    from agentgym_credit.envs.searchqa.retrieval import get_retriever

    parser = argparse.ArgumentParser(description="Search-R1-compatible retrieval server (POST /retrieve).",
                                     allow_abbrev=False)
    parser.add_argument("--corpus", default=None, help="JSONL corpus (default: the shipped encyclopedia)")
    parser.add_argument("--retriever", choices=RETRIEVER_KINDS, default="bm25")
    parser.add_argument("--model", default=None, help="sentence-transformers model for dense/hybrid")
    parser.add_argument("--index", default=None, help="prebuilt FAISS index for dense retrieval")
    parser.add_argument("--query-prefix", default="", help='e.g. "query: " for E5 models')
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--topk", type=int, default=3, help="default topk of requests that give none")
    parser.add_argument("--threads", type=int, default=8, help="worker threads answering requests")
    args = parser.parse_args(argv)

    options: dict[str, Any] = {}
    if args.cache_dir:
        options["cache_dir"] = args.cache_dir
    if args.retriever != "bm25":
        options.update(model=args.model, query_prefix=args.query_prefix)
        if args.index:
            options["index_path"] = args.index
    retriever = get_retriever(args.retriever, load_corpus(args.corpus), **options)
    server = RetrievalServer(
        retriever, args.host, args.port, default_topk=args.topk, threads=args.threads
    ).start()
    print(f"serving {retriever!r} at {server.url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":  # pragma: no cover - command line
    main()
