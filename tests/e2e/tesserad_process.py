"""tesserad as a subprocess for the Python e2e tests: ephemeral loopback ports read from its log,
the CPU backend, the default model; waits until /health answers 200."""
import ctypes
import os
import re
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request


PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """A test killed by its timeout takes its tesserad with it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Tesserad:
    def __init__(self, tesserad, model, *extra, api_key=None, tls=None):
        """`tls`: (cert, key, ca) PEM paths: both listeners serve TLS and clients verify with ca."""
        self.log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        env.pop("TESSERA_API_KEY", None)
        args = [tesserad, "--model", model, "--backend", "cpu", "--threads", "2",
                "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                "--openai-listen", "127.0.0.1:0", "--kv-cache-bytes", "128MiB",
                "--max-model-len", "1024", "--log-level", "info", *extra]
        if api_key:
            args += ["--api-key", api_key]
        self.ssl_context = None
        if tls:
            cert, key, ca = tls
            args += ["--tls-cert", cert, "--tls-key", key]
            self.ssl_context = ssl.create_default_context(cafile=ca)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log, env=env,
                                     preexec_fn=_die_with_parent)
        try:
            self.grpc_port = self._wait_for(r"listening on 127\.0\.0\.1:(\d+)")
            self.admin_port = self._wait_for(r"admin listener .* on 127\.0\.0\.1:(\d+)")
            self.http_port = self._wait_for(r"OpenAI API on 127\.0\.0\.1:(\d+)")
            self._wait_healthy()
        except RuntimeError:
            self.proc.kill()
            self.proc.wait()
            raise

    def log_text(self):
        self.log.seek(0)
        return self.log.read()

    def _wait_for(self, pattern):
        for _ in range(600):
            m = re.search(pattern, self.log_text())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("tesserad did not log " + pattern + ":\n" + self.log_text())

    def _wait_healthy(self):
        for _ in range(1200):
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=5,
                                            context=self.ssl_context) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("tesserad never became healthy:\n" + self.log_text())

    def url(self, path):
        scheme = "https" if self.ssl_context else "http"
        return "%s://127.0.0.1:%d%s" % (scheme, self.http_port, path)

    def metric(self, name):
        """The value of an unlabelled-or-single-series metric on the admin listener."""
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.admin_port, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    return float(line.rsplit(" ", 1)[1])
        return None

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(timeout=60)
