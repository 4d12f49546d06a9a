"""Fixtures of the Python client's tests: this build's pkserve on loopback (a port of its own
choosing, found in its log), test certificates, memory files.

CTest passes the paths: PKSERVE_BINARY (the server), PKSERVE_CLI (the C++ client),
PK_GOLDEN_FILE, PK_MAKE_CERTS (tests/reliability/make_test_certs.sh); PYTHONPATH holds the
package as the build made it (stubs included). Without PKSERVE_BINARY the tests that need a
server skip.
"""
import faulthandler
import os
import re
import subprocess
import tempfile
import threading
import time

import pytest

LISTENING = re.compile(rb"listening on 127\.0\.0\.1:(\d+)")

# A hang is a failure that says where it hung, not a CTest timeout with nothing printed: a test
# past TEST_BOUND_S, or the interpreter's exit (where gRPC's threads are joined) past EXIT_BOUND_S,
# writes every thread's stack (and, for a test, the end of each open server's log) to the
# terminal and ends the process with status 1. PK_PY_TEST_BOUND_S overrides the test bound.
TEST_BOUND_S = float(os.environ.get("PK_PY_TEST_BOUND_S", "120"))
EXIT_BOUND_S = 60.0
_terminal = None  # stderr as it was before pytest captured the tests' output (a duplicate fd)


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
        _started.append(self)
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
# Every server this process started, for a hang's report to stop.
_started = []


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


def pytest_configure(config):
    global _terminal
    _terminal = os.dup(2)


def pytest_unconfigure(config):
    faulthandler.dump_traceback_later(EXIT_BOUND_S, exit=True, file=_terminal)


def _report_hang(nodeid):
    out = os.fdopen(os.dup(_terminal), "w")
    out.write(f"\n{nodeid} still runs after {TEST_BOUND_S:g} s: it hangs. The logs of the "
              "servers not yet closed end:\n")
    for running in _started:
        if running._log.closed:
            continue
        tail = "\n".join(running.log().splitlines()[-30:])
        out.write(f"--- pkserve {running.target} (status {running.process.poll()}):\n{tail}\n")
    out.write("--- every thread's stack:\n")
    out.flush()
    faulthandler.dump_traceback(file=out, all_threads=True)
    out.flush()
    for running in _started:
        if running.process.poll() is None:
            running.process.kill()
    os._exit(1)


@pytest.fixture(autouse=True)
def hang_watch(request):
    """Ends the run, saying where, when a test hangs (TEST_BOUND_S); faulthandler's own timer
    backs the Python one up for a hang that holds the GIL."""
    timer = threading.Timer(TEST_BOUND_S, _report_hang, args=(request.node.nodeid,))
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(TEST_BOUND_S + 15, exit=True, file=_terminal)
    yield
    faulthandler.cancel_dump_traceback_later()
    timer.cancel()
