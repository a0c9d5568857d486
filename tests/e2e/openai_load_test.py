#!/usr/bin/env python3
"""The OpenAI port under load and abuse (CPU backend, default model), with raw asyncio sockets:
1,000 concurrent SSE streams all complete with the right token counts; 200 clients that hang up
mid-stream leave no KV block in use; slow readers do not grow the server's memory without
bound (RSS before and after is printed and bounded); malformed HTTP (bad request lines,
oversized headers, truncated bodies, invalid JSON and UTF-8, slow-loris) each gets its status
or a closed connection, and the server keeps serving; promtool accepts /metrics afterwards.

usage: openai_load_test.py TESSERAD MODEL
"""
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
import unittest

from tesserad_process import Tesserad

TESSERAD, MODEL = sys.argv[1:3]
STREAMS = 1000
HANG_UPS = 200
SLOW_READERS = 32
SLOW_READER_TOKENS = 400
# Server memory may grow by what the slow readers' unsent output is at most (their bodies are
# read in the end: 32 x 400 tokens) plus allocator slack; unbounded buffering of every SSE event
# would pass this only by chance.
SLOW_READER_RSS_BOUND = 64 << 20


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def post(path, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(data))) + data


async def read_head(reader):
    status = await reader.readline()
    if not status:
        return None, {}
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status.split()[1]), headers


async def read_chunk(reader):
    size = int((await reader.readline()).strip(), 16)
    data = await reader.readexactly(size + 2)
    return data[:-2]


async def sse_events(reader):
    """Yields each SSE data payload of a chunked text/event-stream body."""
    pending = b""
    while True:
        chunk = await read_chunk(reader)
        if not chunk:
            return
        pending += chunk
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            assert event.startswith(b"data: "), event
            yield event[6:].decode()


def stream_body(max_tokens):
    return {"prompt": "Hello", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}


async def one_stream(port, max_tokens):
    """(completion tokens from usage, text chunks, saw [DONE])."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(post("/v1/completions", stream_body(max_tokens)))
        status, headers = await read_head(reader)
        assert status == 200 and headers["content-type"] == "text/event-stream", (status, headers)
        usage, chunks, done = None, 0, False
        async for data in sse_events(reader):
            if data == "[DONE]":
                done = True
                continue
            event = json.loads(data)
            if event.get("usage"):
                usage = event["usage"]["completion_tokens"]
            chunks += sum(1 for c in event["choices"] if c["text"])
        return usage, chunks, done
    finally:
        writer.close()


async def hang_up_after_first_token(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(post("/v1/completions", stream_body(600)))
    status, _ = await read_head(reader)
    assert status == 200, status
    async for data in sse_events(reader):
        if json.loads(data)["choices"][0]["text"]:
            break
    writer.transport.abort()


async def exchange(port, raw, read_timeout=30):
    """Sends `raw` and returns (status or None when closed without one)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        status, _ = await asyncio.wait_for(read_head(reader), read_timeout)
        return status
    except (ConnectionResetError, asyncio.IncompleteReadError):
        return None
    finally:
        writer.close()


async def closed_without_status(port, raw, read_timeout=60):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), read_timeout)
        return data == b""
    except ConnectionResetError:
        return True
    finally:
        writer.close()


def wait_until(condition, attempts=600):
    for _ in range(attempts):
        if condition():
            return True
        time.sleep(0.1)
    return False


class OpenAiLoadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise_fd_limit()
        cls.daemon = Tesserad(TESSERAD, MODEL, "--max-num-seqs", "256", "--max-queue", "2048",
                              "--http-max-connections", "4096", "--http-request-timeout", "2s",
                              "--http-write-timeout", "10m")
        cls.port = cls.daemon.http_port

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def assert_serving(self):
        self.assertTrue(self.daemon.alive())
        usage, chunks, done = asyncio.run(one_stream(self.port, 3))
        self.assertEqual((usage, done), (3, True))

    def test_1_thousand_concurrent_streams_complete(self):
        async def run():
            return await asyncio.gather(*[one_stream(self.port, 4) for _ in range(STREAMS)])
        results = asyncio.run(run())
        self.assertEqual(len(results), STREAMS)
        self.assertEqual(sum(1 for usage, chunks, done in results if usage == 4 and done), STREAMS)
        self.assertTrue(all(1 <= chunks <= 4 for _, chunks, _ in results))

    def test_2_hang_ups_free_every_kv_block(self):
        async def run():
            await asyncio.gather(*[hang_up_after_first_token(self.port) for _ in range(HANG_UPS)])
        asyncio.run(run())
        idle = lambda: (self.daemon.metric("tessera_kv_cache_used_blocks") == 0 and
                        self.daemon.metric("tessera_num_requests_running") == 0)
        self.assertTrue(wait_until(idle), "KV blocks still in use: %s" %
                        self.daemon.metric("tessera_kv_cache_used_blocks"))
        print("hang-ups: KV blocks in use afterwards: %s" %
              self.daemon.metric("tessera_kv_cache_used_blocks"))
        self.assert_serving()

    def test_3_slow_readers_do_not_grow_memory_without_bound(self):
        async def run():
            conns = []
            for _ in range(SLOW_READERS):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", self.port))
                sock.setblocking(False)
                reader, writer = await asyncio.open_connection(sock=sock)
                writer.write(post("/v1/completions", stream_body(SLOW_READER_TOKENS)))
                conns.append((reader, writer))
            before = self.daemon.rss_bytes()
            # Nobody reads until the engine has generated every token.
            generating = lambda: self.daemon.metric("tessera_num_requests_running") != 0
            await asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: not generating(), 3000)
            after = self.daemon.rss_bytes()
            counts = []
            for reader, writer in conns:
                status, _ = await read_head(reader)
                usage = None
                async for data in sse_events(reader):
                    if data != "[DONE]" and json.loads(data).get("usage"):
                        usage = json.loads(data)["usage"]["completion_tokens"]
                counts.append(usage)
                writer.close()
            return before, after, counts
        before, after, counts = asyncio.run(run())
        print("slow readers: server RSS %.1f MiB before, %.1f MiB after generating %d x %d "
              "tokens unread" % (before / 2**20, after / 2**20, SLOW_READERS, SLOW_READER_TOKENS))
        self.assertEqual(counts, [SLOW_READER_TOKENS] * SLOW_READERS)
        self.assertLess(after - before, SLOW_READER_RSS_BOUND)

    def test_4_malformed_http_is_answered_or_closed(self):
        async def run():
            port = self.port
            out = {}
            out["bad request line"] = await exchange(port, b"NOT A REQUEST LINE\r\n\r\n")
            out["http/2 preface"] = await exchange(port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            out["oversized headers"] = await exchange(
                port, b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
            out["oversized body"] = await exchange(
                port, b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n")
            out["invalid json"] = await exchange(port, post("/v1/completions", b"{\"prompt\": "))
            out["invalid utf-8"] = await exchange(port, post("/v1/completions", b"{\"prompt\": \"\xff\xfe\"}"))
            out["wrong type"] = await exchange(port, post("/v1/completions", {"prompt": 5}))
            out["truncated body"] = await closed_without_status(
                port, b"POST /v1/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"prompt\"")
            out["slow-loris"] = await closed_without_status(port, b"GET /health HTTP/1.1\r\nX-A: b")
            return out
        out = asyncio.run(run())
        self.assertEqual(out["bad request line"], 400)
        self.assertEqual(out["http/2 preface"], 400)
        self.assertEqual(out["oversized headers"], 431)
        self.assertEqual(out["oversized body"], 413)
        self.assertEqual(out["invalid json"], 400)
        self.assertEqual(out["invalid utf-8"], 400)
        self.assertEqual(out["wrong type"], 400)
        self.assertTrue(out["truncated body"])
        self.assertTrue(out["slow-loris"])
        self.assert_serving()

    def test_5_promtool_accepts_the_metrics_after_load(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                              "check-metrics.sh")
        result = subprocess.run(
            ["bash", script, "http://127.0.0.1:%d/metrics" % self.daemon.admin_port,
             "--require", "tessera_http_requests_total", "--require",
             "tessera_generation_tokens_total"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
