#!/usr/bin/env python3
"""Opens N event streams to 127.0.0.1:PORT/events and measures broadcast delivery latency on a
sample of them (the rest stay idle and unread). Usage: streams-client.py PORT N SECONDS [SAMPLE]"""
import asyncio
import json
import resource
import sys
import time


async def open_stream(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    return reader, writer


async def sample(reader, latencies, since, until):
    """Records latencies of messages sent after `since` (older ones were queued while opening)."""
    buffer = b""
    while time.monotonic() < until:
        try:
            chunk = await asyncio.wait_for(reader.read(4096), until - time.monotonic())
        except asyncio.TimeoutError:
            return
        if not chunk:
            return
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        buffer += chunk
        while b"\n\n" in buffer:
            line, buffer = buffer.split(b"\n\n", 1)
            for part in line.split(b"\n"):
                if part.startswith(b"data: ") and int(part[6:]) >= since:
                    latencies.append((now - int(part[6:])) / 1e6)


async def main():
    port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    sample_size = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 200), hard))
    streams = []
    for start in range(0, n, 500):
        streams += await asyncio.gather(*(open_stream(port) for _ in range(min(500, n - start))))
    for _, writer in streams[sample_size:]:
        writer.transport.pause_reading()  # unsampled streams stay unread: the client must not be the bottleneck
    latencies = []
    until = time.monotonic() + seconds
    since = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    await asyncio.gather(*(sample(r, latencies, since, until) for r, _ in streams[:sample_size]))
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else None
    print(json.dumps({"streams": len(streams), "samples": len(latencies), "p50_ms": pick(0.5), "p99_ms": pick(0.99)}))
    for _, writer in streams:
        writer.close()


asyncio.run(main())
