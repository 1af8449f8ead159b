#!/usr/bin/env python3
"""Test clients for MicroHTTP (standard library only, 127.0.0.1 only).

Every mode prints a one-line JSON result on stdout and exits 0 on success.
"""
import asyncio
import http.client
import json
import resource
import socket
import sys
import threading


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n + 100))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def sse_events(response):
    """Yields (event, data) pairs parsed from a text/event-stream body."""
    event, data = None, []
    while True:
        line = response.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line == "":
            if data:
                yield event or "message", "\n".join(data)
            event, data = None, []
        elif line.startswith(":"):
            yield "comment", line[1:].strip()
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def mode_sse(port, path, count):
    """Reads `count` data events, then prints them."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", path)
    response = conn.getresponse()
    received = []
    for event, data in sse_events(response):
        if event == "comment":
            continue
        received.append(data)
        if len(received) == count:
            break
    print(json.dumps({"status": response.status, "chunked": response.chunked,
                      "type": response.getheader("Content-Type"), "events": received}))


def mode_sse_until_end(port, path):
    """Reads every event until the body ends cleanly (a terminated chunked body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", path)
    response = conn.getresponse()
    received = [[event, data] for event, data in sse_events(response)]
    print(json.dumps({"status": response.status, "events": received}))


def mode_body_start(port, path, count):
    """Reads the first `count` bytes of the body, waiting for them, then prints them."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read(count)
    print(json.dumps({"status": response.status, "body": body.decode(errors="replace")}))


def mode_disconnect(port, path, how="reset"):
    """Reads the first event, then closes the socket: abruptly (`reset`, a TCP reset) or in
    order (`close`, a FIN)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
        _, separator, body = data.partition(b"\r\n\r\n")
        if separator and b"\n\n" in body:
            break
    if how == "reset":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()
    print(json.dumps({"received": len(data)}))


async def open_stream(port, path):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    return reader, writer, head


async def many_streams(port, path, n, marker):
    raise_nofile(n)
    streams = await asyncio.gather(*(open_stream(port, path) for _ in range(n)))
    ok = sum(1 for _, _, head in streams if head.startswith(b"HTTP/1.1 200"))

    async def wait_marker(reader):
        buffer = b""
        while marker.encode() not in buffer:
            chunk = await reader.read(4096)
            if not chunk:
                return False
            buffer += chunk
        return True

    results = await asyncio.wait_for(asyncio.gather(*(wait_marker(r) for r, _, _ in streams)), 30)
    for _, writer, _ in streams:
        writer.close()
    print(json.dumps({"opened": ok, "received": sum(results)}))


async def get_hello(reader, writer):
    """One keep-alive GET /hello; whether it was answered 200 (its body read and dropped)."""
    writer.write(b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return head.startswith(b"HTTP/1.1 200")


async def burst(port, n, rounds):
    """Opens n connections at once; each sends `rounds` keep-alive GETs."""
    raise_nofile(n)

    async def client():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        done = 0
        for _ in range(rounds):
            if await get_hello(reader, writer):
                done += 1
        writer.close()
        return done

    results = await asyncio.wait_for(asyncio.gather(*(client() for _ in range(n))), 30)
    print(json.dumps({"ok": sum(results)}))


async def idle_then_speak(port, n):
    """Opens n keep-alive connections with one GET each, waits until every one has its answer
    and sits idle, then sends a second GET on every one; counts the 200s of that second round."""
    raise_nofile(n)

    connections = [await asyncio.open_connection("127.0.0.1", port) for _ in range(n)]
    first = await asyncio.wait_for(asyncio.gather(*(get_hello(r, w) for r, w in connections)), 30)
    second = await asyncio.wait_for(asyncio.gather(*(get_hello(r, w) for r, w in connections)), 30)
    for _, writer in connections:
        writer.close()
    print(json.dumps({"first": sum(first), "second": sum(second)}))


def concurrent(port, threads, per_thread):
    """`threads` threads, each sending `per_thread` POSTs on its own keep-alive connection."""
    failures = []
    ok = [0]
    lock = threading.Lock()

    def worker(index):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        for i in range(per_thread):
            body = f"{index}-{i}".encode()
            conn.request("POST", "/echo", body=body)
            response = conn.getresponse()
            answer = response.read()
            with lock:
                if response.status == 200 and answer == body:
                    ok[0] += 1
                else:
                    failures.append((response.status, answer[:40].decode(errors="replace")))
        conn.close()

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(json.dumps({"ok": ok[0], "failures": failures[:5]}))


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    args = sys.argv[3:]
    if mode == "sse":
        mode_sse(port, args[0], int(args[1]))
    elif mode == "sse-until-end":
        mode_sse_until_end(port, args[0])
    elif mode == "body-start":
        mode_body_start(port, args[0], int(args[1]))
    elif mode == "disconnect":
        mode_disconnect(port, *args[:2])
    elif mode == "many-streams":
        asyncio.run(many_streams(port, args[0], int(args[1]), args[2]))
    elif mode == "burst":
        asyncio.run(burst(port, int(args[0]), int(args[1])))
    elif mode == "idle-then-speak":
        asyncio.run(idle_then_speak(port, int(args[0])))
    elif mode == "concurrent":
        concurrent(port, int(args[0]), int(args[1]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
