"""Fixtures of the Python client's tests: this build's pkserve on loopback (a port of its own
choosing, found in its log), test certificates, memory files.

CTest passes the paths: PKSERVE_BINARY (the server), PKSERVE_CLI (the C++ client),
PK_GOLDEN_FILE, PK_MAKE_CERTS (tests/reliability/make_test_certs.sh); PYTHONPATH holds the
package as the build made it (stubs included). Without PKSERVE_BINARY the tests that need a
server skip.
"""
import os
import re
import subprocess
import tempfile
import time

import pytest

LISTENING = re.compile(rb"listening on 127\.0\.0\.1:(\d+)")


class ServerExited(Exception):
    """pkserve ended before it served; the message holds its log."""


class Server:
    """A pkserve child process on 127.0.0.1; stop() kills it (this process's child only)."""

    def __init__(self, flags, start_timeout_s=20.0):
        binary = os.environ.get("PKSERVE_BINARY")
        if not binary:
            pytest.skip("PKSERVE_BINARY is not set (run these tests through CTest)")
        self._log = tempfile.NamedTemporaryFile(prefix="pkserve_py_", suffix=".log")
        self._stopped = False
        args = [binary, "--address=127.0.0.1:0", "--metrics_address=", "--backend=cpu",
                "--threads=2", "--drain_timeout_s=1", *flags]
        self.process = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + start_timeout_s
        while True:
            match = LISTENING.search(self.log_bytes())
            if match:
                self.port = int(match.group(1))
                break
            if self.process.poll() is not None:
                log = self.log()
                self.close()
                raise ServerExited(log)
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pkserve did not start within {start_timeout_s} s:\n"
                                   f"{self.log()}")
            time.sleep(0.01)
        self.target = f"127.0.0.1:{self.port}"

    def log_bytes(self):
        with open(self._log.name, "rb") as file:
            return file.read()

    def log(self):
        return self.log_bytes().decode(errors="replace")

    def stop(self):
        self._stopped = True
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def exited_by_itself(self):
        """The exit status (negative: the signal) if the server ended before stop(), else None."""
        return None if self._stopped else self.process.poll()

    def close(self):
        self.stop()
        self._log.close()


# The session's shared servers whose end has not been reported.
_shared = []


@pytest.fixture(autouse=True)
def shared_servers_stay_up():
    """Fails the test during which a shared server ended (a crash, a sanitizer's report), with
    its status and the end of its log, which would otherwise go with its temporary file; the
    tests after it fail on the refused connection."""
    yield
    for running in list(_shared):
        status = running.exited_by_itself()
        if status is None:
            continue
        _shared.remove(running)
        tail = "\n".join(running.log().splitlines()[-80:])
        pytest.fail(f"pkserve ({running.target}) ended during this test with status {status}; "
                    f"the end of its log:\n{tail}", pytrace=False)


def shared_server(flags):
    running = Server(flags)
    _shared.append(running)
    return running


@pytest.fixture(scope="session")
def server():
    running = shared_server([])
    yield running
    running.close()


@pytest.fixture(scope="session")
def limited_server():
    """A server with small request limits: 300 rows, 64 KiB messages."""
    running = shared_server(["--max_rows_per_request=300", "--max_message_bytes=65536"])
    yield running
    running.close()


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    script = os.environ.get("PK_MAKE_CERTS")
    if not script:
        pytest.skip("PK_MAKE_CERTS is not set (run these tests through CTest)")
    folder = tmp_path_factory.mktemp("certs")
    try:
        subprocess.run(["bash", script, str(folder)], check=True, capture_output=True)
    except FileNotFoundError:
        pytest.skip("bash is needed to make the test certificates")
    except subprocess.CalledProcessError as error:
        pytest.fail(f"make_test_certs.sh failed: {error.stderr.decode(errors='replace')}")
    return folder
