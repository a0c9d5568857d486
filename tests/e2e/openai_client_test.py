#!/usr/bin/env python3
"""The official `openai` Python client against tesserad's OpenAI-compatible API (CPU backend,
default model): completions and chat, whole and streamed; n; stop strings; seeds; logprobs;
usage; greedy text equal to gRPC Generate's; the API key; an unknown model; a bad temperature;
a full queue (429); the same over HTTPS with gRPC's certificate and key.

usage: openai_client_test.py TESSERAD TESSERA_CLI MODEL
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import openai  # scripts/setup.sh installs it (pip); missing = a failure, not a skip

from tesserad_process import Tesserad

TESSERAD, CLI, MODEL = sys.argv[1:4]
API_KEY = "test-key-123"
PROMPT = "The capital of France is"


class Daemon(Tesserad):
    def __init__(self, *extra, api_key=API_KEY, tls=None):
        super().__init__(TESSERAD, MODEL, *extra, api_key=api_key, tls=tls)
        self.ca = tls[2] if tls else None

    def client(self, api_key=API_KEY, **kw):
        if self.ca:
            kw["http_client"] = openai.DefaultHttpxClient(verify=self.ca)
        return openai.OpenAI(base_url=self.url("/v1"), api_key=api_key, max_retries=0, **kw)


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 it signed: (cert, key, ca)."""
    script = (
        "set -e; cd '%s'; "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=tessera-test-ca 2>/dev/null; "
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext; "
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
        "-subj /CN=localhost 2>/dev/null; "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile san.ext 2>/dev/null" % directory)
    subprocess.run(["bash", "-c", script], check=True)
    return tuple(os.path.join(directory, f) for f in ("server.pem", "server.key", "ca.pem"))


class OpenAiClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon()
        cls.client = cls.daemon.client()
        cls.model = cls.client.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def complete(self, **kw):
        args = dict(model=self.model, prompt=PROMPT, max_tokens=8, temperature=0)
        args.update(kw)
        return self.client.completions.create(**args)

    def test_models_lists_the_served_model(self):
        models = self.client.models.list().data
        self.assertEqual(len(models), 1)
        self.assertTrue(self.model)

    def test_completion_usage_and_greedy_text_equal_to_grpc(self):
        r = self.complete()
        self.assertEqual(len(r.choices), 1)
        self.assertTrue(r.choices[0].text)
        self.assertEqual(r.usage.completion_tokens, 8)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 8)
        grpc = subprocess.run(
            [CLI, "generate", "--server", "127.0.0.1:%d" % self.daemon.grpc_port, "--unary",
             "--api-key", API_KEY, "--temperature", "0", "--max-tokens", "8", PROMPT],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(grpc.returncode, 0, grpc.stderr)
        self.assertEqual(grpc.stdout, r.choices[0].text)

    def test_streamed_completion_matches_the_whole_one(self):
        whole = self.complete().choices[0].text
        chunks = list(self.complete(stream=True, stream_options={"include_usage": True}))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        self.assertEqual(text, whole)
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 8)
        finished = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finished, ["length"])

    def test_chat_whole_and_streamed(self):
        messages = [{"role": "system", "content": "You are brief."},
                    {"role": "user", "content": [{"type": "text", "text": "Say hello."}]}]
        r = self.client.chat.completions.create(model=self.model, messages=messages,
                                                max_completion_tokens=6, temperature=0)
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertTrue(r.choices[0].message.content)
        self.assertLessEqual(r.usage.completion_tokens, 6)
        stream = self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=6, temperature=0, stream=True,
            stream_options={"include_usage": True})
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, r.choices[0].message.content)
        self.assertEqual(chunks[-1].usage.completion_tokens, r.usage.completion_tokens)

    def test_n_choices(self):
        r = self.complete(n=2, temperature=1.0, seed=7)
        self.assertEqual([c.index for c in r.choices], [0, 1])
        self.assertEqual(r.usage.completion_tokens, 16)
        streamed = self.complete(n=2, temperature=1.0, seed=7, stream=True)
        texts = ["", ""]
        for chunk in streamed:
            for c in chunk.choices:
                texts[c.index] += c.text
        self.assertEqual(texts, [c.text for c in r.choices])

    def test_stop_string_cuts_the_text(self):
        whole = self.complete(max_tokens=12).choices[0].text
        stop = whole[len(whole) // 2:len(whole) // 2 + 2]
        self.assertTrue(stop.strip(), whole)
        r = self.complete(max_tokens=12, stop=[stop])
        self.assertEqual(r.choices[0].text, whole[:whole.index(stop)])
        self.assertEqual(r.choices[0].finish_reason, "stop")

    def test_same_seed_same_text(self):
        a = self.complete(temperature=1.0, seed=1234, max_tokens=12).choices[0].text
        b = self.complete(temperature=1.0, seed=1234, max_tokens=12).choices[0].text
        self.assertEqual(a, b)

    def test_logprobs(self):
        r = self.complete(logprobs=2)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 8)
        self.assertEqual(len(lp.token_logprobs), 8)
        self.assertTrue(all(x <= 0 for x in lp.token_logprobs))
        self.assertTrue(all(1 <= len(top) <= 2 for top in lp.top_logprobs))
        self.assertEqual("".join(lp.tokens), r.choices[0].text)
        chat = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
            temperature=0, logprobs=True, top_logprobs=3)
        content = chat.choices[0].logprobs.content
        self.assertEqual(len(content), chat.usage.completion_tokens)
        self.assertTrue(all(len(t.top_logprobs) == 3 for t in content))

    def test_logit_bias_forces_a_token(self):
        r = self.complete(logit_bias={"1000": 100}, logprobs=1)
        tokens = r.choices[0].logprobs.tokens
        self.assertEqual(len(tokens), 8)
        self.assertEqual(len(set(tokens)), 1, tokens)  # one token, eight times
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(logit_bias={"10000000": 1})
        self.assertIn("logit_bias", str(e.exception))

    def test_tools_are_accepted_and_checked(self):
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
        r = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
            temperature=0, tools=tools)
        self.assertLessEqual(r.usage.completion_tokens, 4)

    def test_api_key_is_enforced(self):
        with self.assertRaises(openai.AuthenticationError):
            self.daemon.client(api_key="wrong").completions.create(model=self.model, prompt="x")

    def test_unknown_model_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as e:
            self.complete(model="no-such-model")
        self.assertIn("no-such-model", str(e.exception))

    def test_bad_temperature_is_a_bad_request_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(temperature=-1)
        self.assertIn("temperature", str(e.exception))

    def test_unsupported_field_is_a_bad_request_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": "Hi"}],
                response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}})
        self.assertIn("response_format", str(e.exception))


class QueueFullTest(unittest.TestCase):
    def test_a_full_queue_answers_429(self):
        daemon = Daemon("--max-num-seqs", "1", "--max-queue", "1", api_key=None)
        try:
            client = daemon.client(api_key="unused")
            model = client.models.list().data[0].id
            outcomes = []
            lock = threading.Lock()

            def one():
                try:
                    client.completions.create(model=model, prompt=PROMPT, max_tokens=200,
                                              temperature=0, extra_body={"ignore_eos": True})
                    result = "ok"
                except openai.RateLimitError:
                    result = "429"
                with lock:
                    outcomes.append(result)

            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                for f in [pool.submit(one) for _ in range(6)]:
                    f.result()
            self.assertIn("429", outcomes)
            self.assertIn("ok", outcomes)
        finally:
            daemon.stop()


class TlsTest(unittest.TestCase):
    def test_the_openai_port_serves_https_with_grpcs_certificate(self):
        with tempfile.TemporaryDirectory() as directory:
            daemon = Daemon(tls=make_certificates(directory))
            try:
                client = daemon.client()
                model = client.models.list().data[0].id
                r = client.completions.create(model=model, prompt=PROMPT, max_tokens=4,
                                              temperature=0)
                self.assertEqual(r.usage.completion_tokens, 4)
                text = "".join(c.choices[0].text for c in client.completions.create(
                    model=model, prompt=PROMPT, max_tokens=4, temperature=0, stream=True))
                self.assertEqual(text, r.choices[0].text)
                with self.assertRaises(openai.APIConnectionError):  # plain HTTP is refused
                    openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % daemon.http_port,
                                  api_key=API_KEY, max_retries=0).models.list()
            finally:
                daemon.stop()


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
