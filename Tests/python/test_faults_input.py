"""Hostile input: every malformed request gets the right 4xx as problem+json, the instance it
names is unchanged, and the server keeps running.

Each case goes over a raw socket so that bytes http.client would refuse to send (bad
percent-encoding, non-UTF-8, unknown methods, huge headers) reach the server as written.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time

import pytest

from conftest import Server
from faults_support import rss_kib

HOST = "127.0.0.1"


def raw_exchange(port: int, data: bytes, timeout: float = 20.0) -> tuple[int, dict[str, str], bytes]:
    """Sends `data` on a fresh connection and reads one response (Connection: close)."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        return read_response(sock)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before a full response head: {buffer[:300]!r}")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "-1"))
    body = rest
    while length < 0 or len(body) < length:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        body += chunk
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return status, headers, body[:length] if length >= 0 else body


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2:]
    return out


def request_bytes(method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                  content_type: str | None = "application/json") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}", "Connection: close"]
    if body is not None:
        if content_type is not None:
            lines.append(f"Content-Type: {content_type}")
        lines.append(f"Content-Length: {len(body)}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


@pytest.fixture(scope="module")
def hostile():
    """A server of its own, so that hostile input cannot disturb other modules' tests."""
    server = Server("--max-body-bytes", str(1 << 20), "--max-header-bytes", str(16 * 1024))
    yield server
    server.stop()


def snapshot(server: Server, instance_id: str) -> tuple[int, dict]:
    reply = server.request("GET", f"/reactors/{instance_id}")
    assert reply.status == 200, reply
    document = reply.json()
    return document["version"], document["state"]


def assert_problem(status: int, headers: dict[str, str], body: bytes, expected: set[int], case: str) -> dict:
    assert status in expected, f"{case}: status {status}, body {body[:300]!r}"
    assert headers.get("content-type", "").startswith("application/problem+json"), f"{case}: {headers} {body[:200]!r}"
    problem = json.loads(body)
    assert problem["status"] == status, case
    assert problem["type"].startswith("urn:reactor-server:problem:"), case
    return problem


NESTING = 10_000


def malformed_cases(instance_id: str) -> list[tuple[str, bytes, set[int]]]:
    actions = f"/reactors/{instance_id}/actions"
    events = f"/reactors/{instance_id}/events"
    deep_array = b"[" * NESTING + b"]" * NESTING
    deep_object = b'{"increase":' * NESTING + b"{}" + b"}" * NESTING
    deep_unclosed = b"[" * NESTING
    cases: list[tuple[str, bytes, set[int]]] = [
        ("invalid JSON", request_bytes("POST", actions, b'{"increase"'), {400}),
        ("invalid JSON token", request_bytes("POST", actions, b"increase"), {400}),
        ("wrong type: number", request_bytes("POST", actions, b"42"), {400}),
        ("wrong type: payload", request_bytes("POST", actions, b'{"increase":5}'), {400}),
        ("wrong type: array", request_bytes("POST", actions, b'["increase"]'), {400}),
        ("two cases", request_bytes("POST", actions, b'{"increase":{},"decrease":{}}'), {400}),
        ("unknown action", request_bytes("POST", actions, b'"explode"'), {400}),
        ("unknown action object", request_bytes("POST", actions, b'{"explode":{}}'), {400}),
        ("empty body", request_bytes("POST", actions, b""), {400}),
        ("whitespace body", request_bytes("POST", actions, b" \r\n\t "), {400}),
        ("null body", request_bytes("POST", actions, b"null"), {400}),
        ("wrong content type", request_bytes("POST", actions, b'"increase"', content_type="text/plain"), {415}),
        ("wrong content type xml", request_bytes("POST", actions, b"<increase/>", content_type="application/xml"), {415}),
        ("non-UTF-8 body", request_bytes("POST", actions, b'"incr\xff\xfease"'), {400}),
        ("non-UTF-8 bare bytes", request_bytes("POST", actions, bytes(range(128, 256))), {400}),
        ("UTF-16 body", request_bytes("POST", actions, '"increase"'.encode("utf-16")), {400}),
        ("NUL in body", request_bytes("POST", actions, b'"incre\x00ase"'), {400}),
        ("deep array nesting", request_bytes("POST", actions, deep_array), {400}),
        ("deep object nesting", request_bytes("POST", actions, deep_object), {400}),
        ("deep unclosed nesting", request_bytes("POST", actions, deep_unclosed), {400}),
        ("deep nesting on create", request_bytes("POST", "/reactors", b'{"type":' + deep_array + b"}"), {400}),
        ("huge number", request_bytes("POST", actions, b"1" * 100_000), {400}),
        ("long string case", request_bytes("POST", actions, b'"' + b"a" * 500_000 + b'"'), {400}),
        ("create: wrong type", request_bytes("POST", "/reactors", b'{"type":5}'), {400}),
        ("create: unknown type", request_bytes("POST", "/reactors", b'{"type":"nope"}'), {400}),
        ("create: non-UTF-8 type", request_bytes("POST", "/reactors", b'{"type":"\xc3\x28"}'), {400}),
        ("create: empty", request_bytes("POST", "/reactors", b""), {400}),
        ("bad Last-Event-ID: text", request_bytes("GET", events, headers={"Last-Event-ID": "abc"}), {400}),
        ("bad Last-Event-ID: negative", request_bytes("GET", events, headers={"Last-Event-ID": "-1"}), {400}),
        ("bad Last-Event-ID: overflow", request_bytes("GET", events, headers={"Last-Event-ID": "9" * 40}), {400}),
        ("bad Last-Event-ID: float", request_bytes("GET", events, headers={"Last-Event-ID": "1.5"}), {400}),
        ("bad Last-Event-ID: non-UTF-8", request_bytes("GET", events).replace(
            b"Connection: close\r\n", b"Connection: close\r\nLast-Event-ID: \xff\xfe\r\n"), {400}),
        ("bad lastEventId query", request_bytes("GET", events + "?lastEventId=%zz"), {400}),
        ("bad wait flag", request_bytes("POST", actions + "?wait=maybe", b'"increase"'), {400}),
        ("bad percent-encoding in id", request_bytes("GET", "/reactors/%zz"), {400, 404}),
        ("truncated percent-encoding", request_bytes("GET", f"/reactors/{instance_id}%"), {400, 404}),
        ("percent-encoded NUL", request_bytes("GET", "/reactors/%00"), {400, 404}),
        ("percent-encoded non-UTF-8", request_bytes("GET", "/reactors/%ff%fe/events"), {400, 404}),
        ("raw non-UTF-8 path", b"GET /reactors/\xff\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", {400, 404}),
        ("path traversal", request_bytes("GET", "/reactors/../../etc/passwd"), {400, 404}),
        ("encoded traversal", request_bytes("GET", "/reactors/%2e%2e/%2e%2e/etc/passwd"), {400, 404}),
        ("encoded slash traversal", request_bytes("GET", f"/reactors/{instance_id}%2f..%2f..%2fetc%2fpasswd"), {400, 404}),
        ("traversal to actions", request_bytes("POST", f"/reactors/x/../{instance_id}/actions", b'"increase"'), {400, 404}),
        ("dot id", request_bytes("GET", "/reactors/./events"), {400, 404}),
        ("unknown method", request_bytes("FROB", f"/reactors/{instance_id}"), {400, 405, 501}),
        ("unknown method with body", request_bytes("BREW", actions, b'"increase"'), {400, 405, 501}),
        ("TRACE", request_bytes("TRACE", actions), {400, 405, 501}),
        ("PUT on actions", request_bytes("PUT", actions, b'"increase"'), {405}),
        ("PATCH instance", request_bytes("PATCH", f"/reactors/{instance_id}", b"{}"), {405}),
        ("DELETE types", request_bytes("DELETE", "/types"), {405}),
        ("unknown route", request_bytes("GET", "/admin/instances"), {404}),
        ("listing attempt", request_bytes("GET", "/reactors"), {404, 405}),
        ("listing attempt with slash", request_bytes("GET", "/reactors/"), {404, 405}),
        ("wildcard id", request_bytes("GET", "/reactors/*"), {404}),
        ("id prefix", request_bytes("GET", f"/reactors/{instance_id[:-1]}"), {404}),
        ("id with suffix", request_bytes("GET", f"/reactors/{instance_id}x"), {404}),
    ]
    return cases


def test_malformed_requests_get_problems_and_change_nothing(hostile: Server):
    instance_id = hostile.create("counter")["id"]
    version_before, state_before = snapshot(hostile, instance_id)
    failures = []
    for case, data, expected in malformed_cases(instance_id):
        try:
            status, headers, body = raw_exchange(hostile.port, data)
            assert_problem(status, headers, body, expected, case)
        except (AssertionError, OSError, ValueError) as error:
            failures.append(f"{case}: {error}")
        assert hostile.process.poll() is None, f"server died on {case}: {hostile.stderr()[-2000:]}"
    assert not failures, "\n".join(failures)
    assert snapshot(hostile, instance_id) == (version_before, state_before)
    assert hostile.request("GET", "/healthz").status == 200


def test_declared_huge_body_is_refused_before_it_is_sent(hostile: Server):
    """Content-Length of 100 MB: 413 on the headers alone; the body never has to be sent."""
    instance_id = hostile.create("counter")["id"]
    before = snapshot(hostile, instance_id)
    head = (f"POST /reactors/{instance_id}/actions HTTP/1.1\r\nHost: {HOST}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {100 * 1024 * 1024}\r\n\r\n").encode()
    with socket.create_connection((HOST, hostile.port), timeout=10) as sock:
        sock.sendall(head)
        status, headers, body = read_response(sock)
    problem = assert_problem(status, headers, body, {413}, "declared 100 MB body")
    assert problem["type"].endswith("body-too-large")
    assert snapshot(hostile, instance_id) == before


def test_streamed_huge_body_is_refused_without_buffering_it(hostile: Server):
    """100 MB sent chunked (no Content-Length): drained and discarded past the limit, then 413.
    The server's RSS must not grow by anything like the body's size."""
    instance_id = hostile.create("counter")["id"]
    before = snapshot(hostile, instance_id)
    rss_before = rss_kib(hostile.process.pid)
    peak = rss_before
    piece = b"[" + b"1," * (512 * 1024 - 1) + b"1]"  # ~1 MiB of JSON-ish bytes per chunk
    total = 0
    head = (f"POST /reactors/{instance_id}/actions HTTP/1.1\r\nHost: {HOST}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    with socket.create_connection((HOST, hostile.port), timeout=30) as sock:
        sock.sendall(head)
        refused_early = False
        while total < 100 * 1024 * 1024:
            try:
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                refused_early = True
                break
            total += len(piece)
            if total % (8 * 1024 * 1024) < len(piece):
                peak = max(peak, rss_kib(hostile.process.pid))
        if not refused_early:
            sock.sendall(b"0\r\n\r\n")
        status, headers, body = read_response(sock)
    peak = max(peak, rss_kib(hostile.process.pid))
    assert_problem(status, headers, body, {413}, "streamed 100 MB body")
    growth_mib = (peak - rss_before) / 1024
    print(f"streamed body: sent {total / 2**20:.0f} MiB, RSS {rss_before} KiB -> peak {peak} KiB (+{growth_mib:.1f} MiB)")
    assert growth_mib < 32, f"RSS grew by {growth_mib:.1f} MiB while a 100 MB body streamed in"
    assert snapshot(hostile, instance_id) == before
    assert hostile.process.poll() is None


def send_big_header(server: Server, shape: str, size: int, field_size: int = 1000) -> tuple[int, dict[str, str], bytes]:
    instance_id = server.create("counter")["id"]
    before = snapshot(server, instance_id)
    if shape == "one field":
        data = request_bytes("POST", f"/reactors/{instance_id}/actions", b'"increase"', headers={"X-Big": "a" * size})
    elif shape == "many fields":
        data = request_bytes("POST", f"/reactors/{instance_id}/actions", b'"increase"',
                             headers={f"X-F{i}": "b" * field_size for i in range(size // field_size)})
    else:
        data = request_bytes("GET", f"/reactors/{instance_id}?q=" + "c" * size)
    with socket.create_connection((HOST, server.port), timeout=20) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while the rest was still on its way; the answer is already queued
        answer = read_response(sock)
    assert snapshot(server, instance_id) == before
    assert server.process.poll() is None
    return answer


@pytest.mark.parametrize("shape", ["one field", "many fields", "request line"])
def test_header_over_the_limit_is_refused_as_problem(hostile: Server, shape: str):
    """A header section over --max-header-bytes (16 KiB) but inside the connection pool (2 KiB
    larger; libmicrohttpd also spends 64 bytes of it per field, hence fields of 2 KiB): 431."""
    status, headers, body = send_big_header(hostile, shape, 17 * 1024, field_size=2048)
    problem = assert_problem(status, headers, body, {431}, f"17 KiB header ({shape})")
    assert problem["type"].endswith("headers-too-large")


@pytest.mark.parametrize("shape", ["one field", "many fields", "request line"])
def test_megabyte_header_is_refused_as_problem(hostile: Server, shape: str):
    """A header section far larger than the connection pool: libmicrohttpd refuses it before any
    handler runs; the server's problem+json takes the place of its built-in HTML page."""
    status, headers, body = send_big_header(hostile, shape, 1 << 20)
    expected = {414, 431} if shape == "request line" else {431}
    problem = assert_problem(status, headers, body, expected, f"1 MB header ({shape})")
    assert problem["type"].endswith("uri-too-long" if status == 414 else "headers-too-large")
    assert "<html>" not in problem["detail"]
    assert headers.get("connection") == "close"


@pytest.mark.parametrize("case, data, status, kind", [
    ("unsupported HTTP version", b"GET /healthz HTTP/2.5\r\nHost: x\r\n\r\n", 505, "http-version-not-supported"),
    ("malformed chunk size", b"POST /reactors HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "bad-request"),
])
def test_requests_libmicrohttpd_refuses_itself_get_problem_json(hostile: Server, case: str, data: bytes,
                                                               status: int, kind: str):
    answer_status, headers, body = raw_exchange(hostile.port, data)
    problem = assert_problem(answer_status, headers, body, {status}, case)
    assert problem["type"].endswith(kind)
    assert "<" not in problem["detail"], problem["detail"]
    assert hostile.process.poll() is None


SMUGGLED_FRAMINGS = [
    # (case, framing header lines, status, problem kind): each body, read by one of its headers,
    # ends before a second request that sends the counter an action.
    ("two different Content-Lengths", "Content-Length: 0\r\nContent-Length: {length}", 400, "bad-request"),
    ("Transfer-Encoding with Content-Length", "Content-Length: {length}\r\nTransfer-Encoding: chunked", 400,
     "bad-request"),
    ("chunked not last", "Transfer-Encoding: chunked, identity", 400, "bad-request"),
    ("a coding before chunked", "Transfer-Encoding: gzip, chunked", 501, "transfer-coding-not-supported"),
    ("two Hosts", "Host: elsewhere\r\nContent-Length: {length}", 400, "bad-request"),
    ("a space before a colon", "Transfer-Encoding : chunked\r\nContent-Length: 0", 400, "bad-request"),
    # libmicrohttpd 0.9.75 answers these itself with the response head sent twice; the server
    # refuses them instead (CMicroHTTPDErrorPages).
    ("a Content-Length that is not a number", "Content-Length: {length}x", 400, "bad-request"),
    ("a negative Content-Length", "Content-Length: -{length}", 400, "bad-request"),
    ("a Content-Length list", "Content-Length: {length}, {length}", 400, "bad-request"),
    ("an empty Content-Length", "Content-Length:", 400, "bad-request"),
    ("a Content-Length beyond 64 bits", "Content-Length: 99999999999999999999999", 413, "body-too-large"),
    # libmicrohttpd 0.9.75 adds a folded line's text to the header's name; a proxy may read the
    # fold as a space instead (RFC 9112 §5.2 allows either that or a 400).
    ("a folded header line", "Content-Length: {length}\r\nX-Pad: a\r\n Transfer-Encoding: chunked", 400,
     "bad-request"),
    ("a folded Transfer-Encoding", "Transfer-Encoding:\r\n\tchunked\r\nContent-Length: 0", 400, "bad-request"),
]


@pytest.mark.parametrize("case, framing, status, kind", SMUGGLED_FRAMINGS)
def test_a_request_whose_framing_is_ambiguous_is_refused_and_its_connection_closed(
        hostile: Server, case: str, framing: str, status: int, kind: str):
    """A body whose end two HTTP parsers (a proxy's and this server's) could see differently is
    how one request hides another (RFC 9112 §6.3, §11.2): it is refused before any route runs,
    the connection is closed after the answer, and nothing hidden in it is applied."""
    instance_id = hostile.create("counter")["id"]
    before = snapshot(hostile, instance_id)
    hidden = (f"POST /reactors/{instance_id}/actions HTTP/1.1\r\nHost: {HOST}\r\n"
              'Content-Length: 10\r\n\r\n"increase"')
    body = "0\r\n\r\n" + hidden
    head = (f"POST /reactors/{instance_id}/actions HTTP/1.1\r\nHost: {HOST}\r\n"
            f"{framing.format(length=len(body))}\r\n\r\n")
    with socket.create_connection((HOST, hostile.port), timeout=10) as sock:
        sock.sendall((head + body).encode())
        received = b""
        while chunk := sock.recv(65536):  # a connection left open fails here, on the timeout
            received += chunk
    status_lines = re.findall(rb"(?:^|\r\n)HTTP/1\.1 \d{3} ", received)
    assert len(status_lines) == 1, f"{case}: not one response: {received[:600]!r}"
    answer_head, _, answer_body = received.partition(b"\r\n\r\n")
    lines = answer_head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    problem = assert_problem(int(lines[0].split(" ")[1]), headers, answer_body, {status}, case)
    assert problem["type"].endswith(kind), problem
    assert headers.get("connection") == "close", headers
    assert snapshot(hostile, instance_id) == before, f"{case}: the hidden action was applied"


def test_an_http11_request_without_host_is_refused(hostile: Server):
    status, headers, body = raw_exchange(hostile.port, b"GET /healthz HTTP/1.1\r\n\r\n")
    problem = assert_problem(status, headers, body, {400}, "HTTP/1.1 without Host")
    assert "Host" in problem["detail"]
    status, _, body = raw_exchange(hostile.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert status == 200, body


def test_instance_ids_are_unguessable_and_unlisted(hostile: Server):
    ids = [hostile.create("counter")["id"] for _ in range(200)]
    assert len(set(ids)) == len(ids)
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    for instance_id in ids:
        assert len(instance_id) == 22 and set(instance_id) <= alphabet
    # No two consecutive ids share a long common prefix or are numerically close.
    bits = [_id_bits(i) for i in ids]
    for previous, current in zip(bits, bits[1:]):
        assert bin(previous ^ current).count("1") > 32, "consecutive ids differ in too few bits"
    # Each bit position is set in roughly half the ids (a counter or timestamp would not be).
    for bit in range(128):
        ones = sum((value >> bit) & 1 for value in bits)
        assert 40 <= ones <= 160, f"bit {bit} set in {ones} of 200 ids"
    # Nothing lists instances: no route answers with any id.
    for method, path in [("GET", "/reactors"), ("GET", "/reactors/"), ("GET", "/types"), ("GET", "/metrics"),
                         ("GET", "/healthz"), ("OPTIONS", "/reactors"), ("GET", "/reactors?list=1")]:
        reply = hostile.request(method, path)
        text = reply.body.decode(errors="replace")
        assert not any(instance_id in text for instance_id in ids), f"{method} {path} leaks an id"


def _id_bits(text: str) -> int:
    """The 128 bits of an id (six bits per character, least significant first)."""
    value = 0
    for index, character in enumerate(text):
        value |= ID_ALPHABET.index(character) << (6 * index)
    return value


ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
