"""Headless chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
commands to its fd 3, replies and events from its fd 4, each message ending in a NUL byte), so
a test can type, click and wait for what a page's scripts do (the docs site's search runs in
a web worker, which ``--dump-dom`` never waits for). Standard library only.

Everything a chromium writes lands in one folder of its own, removed after (``chromium_folder``):
its profile, its temporary files and its home. Left to itself it wrote its singleton socket's folder
into the machine's /tmp (``org.chromium.Chromium.*``, one a suite run, never removed once the browser
was killed), its crash reports and dconf cache into the user's home, and ``--dump-dom`` its profile
into ``~/.config/chromium-headless``."""

from __future__ import annotations

import contextlib
import json
import signal
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Iterator

# what DevTools answers an evaluation made while the page navigates (a click on a link, then a
# wait for the new page): the old page's context is gone before the new one exists. A wait
# asks again; any other error is the page's or the test's and fails at once.
NAVIGATING = ("Inspected target navigated or closed", "Execution context was destroyed",
              "Cannot find context with specified id")


@contextlib.contextmanager
def chromium_folder() -> Iterator[tuple[str, dict[str, str]]]:
    """A folder for one chromium and the environment that keeps it there: its profile
    (``FOLDER/profile``, for ``--user-data-dir``), TMPDIR and HOME (the XDG folders under it)."""
    folder = tempfile.mkdtemp(prefix="sw-chromium-")
    env = {**os.environ, "TMPDIR": os.path.join(folder, "tmp"), "HOME": os.path.join(folder, "home"),
           "XDG_CONFIG_HOME": os.path.join(folder, "home", ".config"),
           "XDG_CACHE_HOME": os.path.join(folder, "home", ".cache")}
    for name in ("profile", "tmp", "home"):
        os.mkdir(os.path.join(folder, name))
    try:
        yield folder, env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Browser:
    def __init__(self, exe: str):
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()

        def child_fds() -> None:
            a, b = os.dup(r_in), os.dup(w_out)  # above 4 first, so neither dup2 clobbers the other
            os.dup2(a, 3)
            os.dup2(b, 4)

        # a profile of its own: two browsers at once (pytest -n) never meet in one profile's lock; and
        # a session of its own, so that what it started goes with it
        self._left = contextlib.ExitStack()  # what close() undoes
        folder, env = self._left.enter_context(chromium_folder())
        try:
            self.proc = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                                          f"--user-data-dir={os.path.join(folder, 'profile')}", "about:blank"],
                                         preexec_fn=child_fds, close_fds=False, env=env, start_new_session=True,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except BaseException:
            os.close(w_in)
            os.close(r_out)
            self._left.close()
            raise
        finally:
            os.close(r_in)
            os.close(w_out)
        self._w, self._r, self._buf, self._id = w_in, r_out, b"", 0
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.send("Page.enable", session=self.session)
            self.send("Runtime.enable", session=self.session)
        except BaseException:  # a browser that did not come up is not left running, nor its folder
            self.close()
            raise

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _receive(self) -> dict:
        while b"\0" not in self._buf:
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\0", 1)
        return json.loads(line)

    def js(self, expression: str) -> Any:
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                        session=self.session)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression[:80]}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def wait(self, expression: str, timeout_s: float = 30.0) -> Any:
        """The value of ``expression`` once it is truthy, asking again while the page navigates
        (``NAVIGATING``); fails after ``timeout_s``."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                value = self.js(expression)
            except RuntimeError as exc:
                if not any(m in str(exc) for m in NAVIGATING):
                    raise
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"not true after {timeout_s} s: {expression}")

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=self.session)
        self.wait("document.readyState === 'complete' && location.href !== 'about:blank'")

    def close(self) -> None:
        """Asked to close, as a user closes it (a killed chromium leaves its singleton socket behind),
        then what is left of its session killed (all of it where it did not end within 10 s), and its
        folder removed. The browser is reaped last: until then its process group's id cannot be reused."""
        with contextlib.suppress(OSError, RuntimeError):
            self.send("Browser.close")
        end = time.monotonic() + 10
        while time.monotonic() < end and os.waitid(os.P_PID, self.proc.pid,
                                                    os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self._w)
        os.close(self._r)
        self._left.close()
