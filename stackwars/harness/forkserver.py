"""Fresh cell-processes without paying for the imports each time: a preloading fork server.

A cell-process on a GPU spent 1.3-1.7 s starting the interpreter (as psutil read it, which
holds up to a second of boot-time rounding: measure.since_process_start) and 3-5 s importing PyTorch
(0.7-1.2 s JAX) before it did anything of its own; on the 2-core CPU, starting and importing
were a third of a small cell's wall time. What is the same in every process is paid once
per server instead (multiprocessing's forkserver, pyperf's workers):

* a server is ``python -m stackwars.harness.forkserver``, started with the environment the
  cell-processes will have (the frameworks read much of it at import: JAX_PLATFORMS, thread
  counts, XLA flags), which imports the modules it is told to preload (the framework, its
  compiler stack, the backend's module) and nothing else: no device is initialised, no
  framework function is called, no plugin or user model is loaded. It checks this before it
  answers "ready" (``fresh_state``: a CUDA context, the CUDA driver touched (a child forked to
  ask PyTorch), an XLA client, a second thread), and refuses to serve otherwise. A preloaded
  module that asks for the CUDA device count (one the torch-compile server preloaded did on
  an H200, through ``torch.cuda.is_available()``) is answered from NVML, never the driver;
* each task is a ``fork()`` of the server: a distinct process in its own session, with its
  own device context and allocator (made after the fork, by the cell), which sets its
  environment from the request, among it the variables no server reads (``read_after_fork``:
  the compile-cache folders, stackwars's own, pytest's test name) and runs the worker as a
  spawned worker would, then ``_exit``s;
* servers are keyed by what they preloaded, the environment they were started with (every
  variable a server may read) and a ``generation``: the runner gives each process number
  of a cell its own generation, so the processes of one cell come from different servers,
  each a fresh ``exec`` with its own address-space layout and hash seed, as spawned
  processes would be (forks of one server share both; Kalibera and Jones's between-process
  variance comes partly from them).

A server that cannot start (an import fails, a device was initialised) is reported and the
task is spawned as before (``isolation.run_task``); ``STACKWARS_FORKSERVER=0`` spawns every
task. Each record says how its process was made (``settings.process``).

Protocol: the client writes one JSON request per line on the server's stdin; the server
writes JSON lines on its original stdout (its Python-level stdout goes to its log, so a
module that prints at import cannot break the protocol): ``ready``, ``started`` (with the
child's pid) and ``exit`` (with the child's wait status, as it reaps it). A server whose
stdin closes (its client died) exits; its children, orphaned, kill themselves
(``worker._exit_when_orphaned``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
import time
import traceback
from typing import Any, Sequence

ENABLE_ENV = "STACKWARS_FORKSERVER"  # "0": spawn every task (as before servers existed)
# variables no server reads, so a child may set its own: first those the frameworks read after
# import, when they first compile or touch a device (test_forkserver checks each takes effect per
# cell), then those nothing a server preloads reads at all
LATE_ENV = frozenset({
    "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",  # read when Inductor compiles (cache_dir_utils)
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",  # read by the CUDA driver when a device is initialised
    # read by nothing a server preloads: pytest's name of the running test, the terminal's size
    # (read when something is printed). Under pytest (the suite) the name changes with every
    # test, and a test that sets a width started servers of its own: keyed without them, a
    # test's runs fork from the servers earlier tests of its pytest worker started, as a
    # process's later runs always did
    "PYTEST_CURRENT_TEST", "COLUMNS", "LINES",
    # written into this process's environment by the frameworks as it works, read by nothing a server
    # preloads: Inductor's pointer for the library it is about to load (codecache: each process sets its
    # own before it loads one; inherited, it points into another process), and Ray's client-mode switch
    # (set to its default, "0", when Ray is imported). Keyed by them, the servers started before this
    # process first loaded a compiled program or imported Ray were started again after it (a suite run:
    # 138 servers of 119 keys, 112 without these two)
    "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR", "RAY_CLIENT_MODE",
})
OURS = "STACKWARS_"  # stackwars's own variables: read as it runs, never at import (test_forkserver reads the source)
GENERATION_ENV = "STACKWARS_FORKSERVER_GENERATION"


def read_after_fork(name: str) -> bool:
    """A variable no server reads, so none is keyed by it: the child sets it from its request, as
    every other (``_child``). Ours among them: the plugin list (the registry loads in the child; a
    server loads no plugin or model file, and a run naming a model file adds the file to it), the
    progress file, the database and cache folders (a test sets its own)."""
    return name in LATE_ENV or (name.startswith(OURS) and name != GENERATION_ENV)


def fresh_state() -> dict[str, Any]:
    """What the server holds before it forks: threads, and whether any device backend exists
    (it must not: a CUDA context or an XLA client does not survive a fork)."""
    state: dict[str, Any] = {"python_threads": threading.active_count()}
    try:
        state["native_threads"] = len(os.listdir("/proc/self/task"))
    except OSError:
        state["native_threads"] = None
    torch = sys.modules.get("torch")
    state["cuda_initialised"] = bool(torch is not None and torch.cuda.is_initialized())
    state["cuda_fork_poisoned"] = _fork_poisoned(torch)
    state["cuda_driver_queries"] = _DRIVER_QUERIES[:3]  # the first callers' stacks (answered by NVML)
    bridge = sys.modules.get("jax._src.xla_bridge")
    state["jax_backends"] = sorted(getattr(bridge, "_backends", {}) or {}) if bridge is not None else []
    state["hash_seed"] = os.environ.get("PYTHONHASHSEED", "random")
    return state


# Who asked the CUDA driver for its device count while the server preloaded. PyTorch's
# torch._C._cuda_getDeviceCount (torch.cuda.is_available() unless PYTORCH_NVML_BASED_CUDA_CHECK=1)
# initialises the driver without a context: torch.cuda.is_initialized() stays False, but a
# forked child then fails its first CUDA call ("Cannot re-initialize CUDA in forked subprocess";
# every torch-compile cell of the first forked H200 run). During the preload the query is
# answered from NVML instead (the same count, no driver), each caller's stack kept here.
_DRIVER_QUERIES: list[str] = []


def _answer_device_count_from_nvml(torch: Any) -> Any:
    """Replace torch._C._cuda_getDeviceCount with an NVML count for the preload; return the
    original (None where this torch has no CUDA) for ``serve`` to put back before any fork."""
    c = getattr(torch, "_C", None)
    original = getattr(c, "_cuda_getDeviceCount", None)
    if original is None or getattr(original, "stackwars_nvml", False):
        return None

    def nvml_count() -> int:
        _DRIVER_QUERIES.append("".join(traceback.format_stack(limit=6)[:-1]))
        count = torch.cuda._device_count_nvml()
        if count < 0:  # NVML unreadable: refuse rather than touch the driver before a fork
            raise RuntimeError("the CUDA device count asked during a fork server's preload, NVML unreadable")
        return count

    nvml_count.stackwars_nvml = True  # type: ignore[attr-defined]
    c._cuda_getDeviceCount = nvml_count
    return original


def _fork_poisoned(torch: Any) -> bool:
    """Whether a child forked now would find PyTorch's CUDA unusable: fork one that asks."""
    if torch is None or not getattr(torch.cuda, "_is_compiled", lambda: False)():
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 3


def _problem(state: dict[str, Any]) -> str | None:
    if state["cuda_initialised"]:
        return "a preloaded module initialised CUDA: a forked child cannot use that context"
    if state.get("cuda_fork_poisoned"):
        return "a preloaded module initialised the CUDA driver: a forked child cannot use CUDA"
    if state["jax_backends"]:
        return f"a preloaded module initialised JAX's backends ({', '.join(state['jax_backends'])})"
    if state["python_threads"] != 1:
        return f"{state['python_threads']} Python threads after the preload: a fork copies only one"
    return None


def _child(req: dict[str, Any], server_pid: int, info: dict[str, Any]) -> None:
    """In the forked child: become a fresh worker and never return."""
    code = 1
    try:
        os.setsid()  # its own session: a timeout kills its whole tree (Inductor's compile workers)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.environ.clear()
        os.environ.update(req["env"])
        from stackwars.harness import worker

        worker.ORIGIN = {"how": "forked from a preloading server", "server_pid": server_pid, "pid": os.getpid(),
                         **info, **req.get("note", {})}
        code = worker.main(req["argv"], parent=server_pid)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the log says what happened; the missing result says it failed
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(preload: list[str]) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the preloaded modules print goes to the log, not into the protocol
    sys.stdout = sys.stderr

    def send(**msg: Any) -> None:
        proto.write(json.dumps(msg) + "\n")

    t0 = time.perf_counter()
    loaded, absent = [], []
    # torch.cuda.is_available() by NVML, not the driver, for any preloaded module that asks
    nvml_check = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    original = None
    try:
        import importlib

        for name in preload:
            optional = name.startswith("?")  # "?triton": preloaded where installed (a CPU build has none)
            try:
                importlib.import_module(name.lstrip("?"))
                loaded.append(name.lstrip("?"))
            except ImportError:
                if not optional:
                    raise
                absent.append(name.lstrip("?"))
            if original is None and "torch" in sys.modules:
                original = _answer_device_count_from_nvml(sys.modules["torch"])
    except BaseException as exc:  # noqa: BLE001 - told to the client, which spawns instead
        send(event="failed", error=f"preloading {name}: {type(exc).__name__}: {exc}")
        return 1
    finally:
        if original is not None:  # the children get PyTorch as it was
            sys.modules["torch"]._C._cuda_getDeviceCount = original
        if nvml_check is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = nvml_check
    state = fresh_state()
    problem = _problem(state)
    if problem:
        send(event="failed", error=problem, state=state)
        return 1
    info = {"preloaded": loaded, "not_installed": absent, "preload_s": time.perf_counter() - t0, "before_fork": state,
            "generation": os.environ.get(GENERATION_ENV)}
    send(event="ready", pid=os.getpid(), **info)
    # an idle server must cost the machine nothing (its cells' neighbours are timed): it sleeps in
    # select() until a request comes or a child ends (SIGCHLD, through a wake-up pipe), never polls
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stdin = sys.stdin.buffer
    running: set[int] = set()
    server_pid = os.getpid()
    buf = b""
    while True:
        ready, _, _ = select.select([stdin, wake_r], [], [])
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        for pid in list(running):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                running.discard(pid)
                send(event="exit", pid=pid, code=os.waitstatus_to_exitcode(status))
        if stdin not in ready:
            continue
        chunk = os.read(stdin.fileno(), 1 << 16)
        if not chunk:  # the client is gone: so are we; orphaned children end themselves
            # at once: nothing here needs tearing down (no device, nothing compiled), and an
            # interpreter that loaded PyTorch took a second to finalise, on the run's clock
            proto.flush()
            sys.stderr.flush()
            os._exit(0)
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            pid = os.fork()
            if pid == 0:
                proto.close()
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                # our pid, not the child's getppid(): a server killed before the child first ran
                # has already handed it to init, whose pid it would then watch for ever
                _child(req, server_pid, info)
            running.add(pid)
            send(event="started", id=req["id"], pid=pid)


# ---- the client: in the process that runs the cells ----------------------------------------

START_TIMEOUT_S = 180.0  # a preload this slow is a broken server: its tasks are spawned instead
MAX_SERVERS = 6  # servers kept alive at once (each holds its preloaded frameworks' memory, mostly shared)


def enabled() -> bool:
    return sys.platform.startswith("linux") and os.environ.get(ENABLE_ENV, "1") != "0"


class Child:
    """A forked worker, as ``isolation.run_task`` sees a ``subprocess.Popen``: ``pid``,
    ``poll``, ``wait`` and ``returncode`` (from the server, which reaps it)."""

    def __init__(self, server: "Server", pid: int):
        self.server, self.pid, self.returncode = server, pid, None

    @property
    def orphaned(self) -> str | None:
        """Why its server could not report how it ended ("ended", "was stopped"), or None."""
        return self.server.orphaned.get(self.pid)

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
            self.server.wait_event(0.01 if end is None else max(0.0, min(0.05, end - time.monotonic())))
        return self.returncode


class Server:
    """One running server: started, read by a thread, asked to fork."""

    def __init__(self, preload: tuple[str, ...], env: dict[str, str]):
        import subprocess

        from stackwars.harness import tmp

        self.folder = tmp.mkdtemp("forkserver")  # its own: the log, removed when it closes
        self.ahead: dict[str, Any] | None = None  # the batch start_ahead started it in, until its first child
        self.preload, self.log_path = preload, os.path.join(self.folder, "server.log")
        self.info: dict[str, Any] | None = None
        self.error: str | None = None
        self._cond = threading.Condition()
        self._exits: dict[int, int] = {}
        self.orphaned: dict[int, str] = {}  # a child whose end the server could not report: why not
        self._started: dict[int, int] = {}
        self._next = 0
        self._eof = False
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "stackwars.harness.forkserver", *preload],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         env=env, start_new_session=True)
        threading.Thread(target=self._read, daemon=True, name="stackwars-forkserver-reader").start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                if msg["event"] == "ready":
                    self.info = msg
                elif msg["event"] == "failed":
                    self.error = msg["error"]
                elif msg["event"] == "started":
                    self._started[msg["id"]] = msg["pid"]
                elif msg["event"] == "exit":
                    self._exits[msg["pid"]] = msg["code"]
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_event(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait(timeout)

    def ready(self, timeout: float = START_TIMEOUT_S) -> bool:
        """Whether the server answered it has preloaded: False where it failed, ended, was stopped
        from outside (SIGSTOP: it would never answer, and the run said nothing for the whole
        timeout), or gave no answer within ``timeout``; its tasks are spawned instead."""
        import psutil

        end = time.monotonic() + timeout
        with self._cond:
            while self.info is None and self.error is None and not self._eof:
                left = end - time.monotonic()
                if left <= 0:
                    self.error = f"no answer within {timeout:g} s of starting"
                    break
                self._cond.wait(min(left, 0.5))
                try:
                    if psutil.Process(self.proc.pid).status() == psutil.STATUS_STOPPED:
                        self.error = "it was stopped from outside (SIGSTOP?) while preloading"
                        break
                except psutil.NoSuchProcess:
                    pass  # it ended: its end of file says so
            if self.info is None and self.error is None:
                self.error = "it exited while preloading"
        if self.info is None:
            tail = _tail(self.log_path)
            self.error = f"{self.error}{chr(10)}{tail}" if tail else self.error
            self.close()
            return False
        return True

    @property
    def alive(self) -> bool:
        return self.info is not None and not self._eof and self.proc.poll() is None

    def fork(self, argv: list[str], env: dict[str, str], log: str, note: dict[str, Any] | None = None,
             timeout: float = 30.0) -> Child | None:
        """A child running the worker on ``argv``; None where the server did not answer.
        ``note``: what the child's record says besides (that this task waited for the server)."""
        with self._cond:
            self._next += 1
            rid = self._next
            req = {"id": rid, "argv": argv, "env": env, "log": log, "note": note or {}}
            try:
                self.proc.stdin.write((json.dumps(req) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                return None
            end = time.monotonic() + timeout
            while rid not in self._started and not self._eof and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
            pid = self._started.pop(rid, None)
        return Child(self, pid) if pid is not None else None

    def exit_code(self, pid: int) -> int | None:
        import psutil

        with self._cond:
            if pid in self._exits:
                return self._exits.pop(pid)
            gone = self._eof
        stopped = False
        if not gone:
            try:  # a server stopped from outside (SIGSTOP) reaps and reports nothing until it is continued
                stopped = psutil.Process(self.proc.pid).status() == psutil.STATUS_STOPPED
            except psutil.NoSuchProcess:
                return None  # it ended: its end of file comes next
            if not stopped:
                return None
        # nobody reports this child: it is done once it no longer runs, how it ended unknown
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return None
        except psutil.NoSuchProcess:
            pass
        self.orphaned[pid] = "was stopped" if stopped else "ended"
        return -signal.SIGKILL

    def close(self) -> None:
        self.shutdown()
        self.join()

    def shutdown(self) -> None:
        """Tell the server to go (its stdin closed) without waiting: an interpreter that loaded
        PyTorch takes about a second to leave."""
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def join(self) -> None:
        """Wait for a server told to go; one that does not leave within 5 s is killed."""
        try:
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - a server that does not leave is killed
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()


def _tail(path: str, chars: int = 2000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-chars:].strip()
    except OSError:
        return ""


_servers: dict[tuple, Server] = {}
_failed: dict[tuple, str] = {}


_LOCK = threading.Lock()


def server_key(preload: tuple[str, ...], env: dict[str, str], generation: int) -> tuple:
    """Servers differ in what they preloaded, what their children read at import, and generation."""
    return (preload, tuple(sorted((k, v) for k, v in env.items() if not read_after_fork(k))), generation)


def _server_env(env: dict[str, str], generation: int) -> dict[str, str]:
    out = {k: v for k, v in env.items() if not read_after_fork(k)}
    out[GENERATION_ENV] = str(generation)
    return out


def _make_room(keep: set, room: int) -> list[Server]:
    """Tell the oldest servers outside ``keep`` to go until ``room`` more fit under
    MAX_SERVERS; the caller joins them."""
    going = []
    for key in [k for k in _servers if k not in keep]:
        if len(_servers) + room <= MAX_SERVERS:
            break
        going.append(_servers.pop(key))
        going[-1].shutdown()
    return going


_BATCHES = [0]


def start_ahead(requests: Sequence[tuple[Sequence[str], dict[str, str], int]], during: str | None = None
                ) -> dict[str, Any] | None:
    """Start together, before their first task, the servers that ``requests`` (preload, env,
    generation: what ``fork`` will be asked, in the order it will be) need and that are not
    running: their imports overlap, where started one by one each task waited for its own.
    Only between tasks (no cell is being timed: the imports take CPUs). Up to MAX_SERVERS
    running at once, the earliest requests first: servers no request names make room, those
    a request names are kept; the rest start when their task comes, as before. Each server
    started here records the batch on its first child (``server_started_ahead``: its id, how
    many servers, their seconds together), so the run's account of the harness's time keeps
    what no worker's wall time holds; ``during``: what else the run was doing meanwhile (the
    machine probe), so that account does not count those seconds twice. Returns that batch, or
    None where nothing was started."""
    import atexit

    with _LOCK:
        named: dict[tuple, tuple[tuple[str, ...], dict[str, str], int]] = {}
        for preload, env, generation in requests:
            named.setdefault(server_key(tuple(preload), env, generation), (tuple(preload), env, generation))
        for key in [k for k in named if k in _servers and not _servers[k].alive]:
            _servers.pop(key).close()  # a server that died: replaced
        kept = sum(1 for k in named if k in _servers)
        wanted = {k: v for k, v in named.items() if k not in _servers and k not in _failed}
        wanted = dict(list(wanted.items())[:max(0, MAX_SERVERS - kept)])
        if not wanted:
            return None
        if not _servers:
            atexit.register(close_all)
        _BATCHES[0] += 1
        t0 = time.perf_counter()
        # the servers that make room leave while the new ones import; both are done before the
        # next cell starts, and their time is the batch's
        going = _make_room(set(named), len(wanted))
        servers = {key: Server(preload, _server_env(env, generation)) for key, (preload, env, generation)
                   in wanted.items()}
        ready = {key: server.ready() for key, server in servers.items()}
        for server in going:
            server.join()
        batch = {"batch": f"{os.getpid()}-{_BATCHES[0]}", "servers": len(servers),
                 "seconds": time.perf_counter() - t0, **({"during": during} if during else {})}
        for key, server in servers.items():
            if ready[key]:
                server.ahead = batch
                _servers[key] = server
            else:
                _failed[key] = f"the fork server could not start ({server.error})"
        batch["failed"] = sum(1 for ok in ready.values() if not ok)
        return batch


def fork(argv: list[str], env: dict[str, str], log: str, preload: tuple[str, ...], generation: int = 0
         ) -> tuple[Child | None, dict[str, Any]]:
    """A forked worker from the server for (``preload``, ``env``, ``generation``), started if
    need be; (None, why) where there is none and the task must be spawned."""
    import atexit

    key = server_key(tuple(preload), env, generation)
    note: dict[str, Any] = {"started_the_server": False}
    with _LOCK:
        if key in _failed:
            return None, {"spawned_because": _failed[key]}
        server = _servers.get(key)
        if server is not None and not server.alive:
            _servers.pop(key).close()
            server = None
        if server is None:
            while len(_servers) >= MAX_SERVERS:  # the oldest goes: runs proceed generation by generation
                _servers.pop(next(iter(_servers))).close()
            if not _servers:
                atexit.register(close_all)
            t0 = time.perf_counter()
            server = Server(tuple(preload), _server_env(env, generation))
            ready = server.ready()
            # this task waited for the server: its wall time holds the server's start
            note = {"started_the_server": True, "server_start_s": time.perf_counter() - t0}
            if not ready:
                _failed[key] = f"the fork server could not start ({server.error})"
                return None, {"spawned_because": _failed[key]}
            _servers[key] = server
        else:
            _servers[key] = _servers.pop(key)  # most recently used last
            if server.ahead is not None:  # its first child carries the batch it was started in
                note["server_started_ahead"], server.ahead = server.ahead, None
    child = server.fork(argv, env, log, note)
    if child is None:
        return None, {"spawned_because": "the fork server did not answer"}
    return child, {"server_pid": server.proc.pid}


def close_all() -> None:
    """Every server told to go at once, then waited for (each takes about a second to leave)."""
    with _LOCK:
        going = list(_servers.values())
        _servers.clear()
        for server in going:
            server.shutdown()
        for server in going:
            server.join()
        _failed.clear()


if __name__ == "__main__":
    sys.exit(serve([m for m in sys.argv[1:] if m]))
