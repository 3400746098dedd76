"""One seam for embarrassingly parallel work: local processes by default, or Dask.

Every parallel job of c2np (scoring, prediction, builds, relaxations, ...) is a pure
function applied to a list of items, given a per-worker *context* built once per worker
process (an opened store, a scorer) from a picklable recipe. An :class:`Executor` maps it:

* :class:`LocalExecutor` (the default): in this process for 1 worker, else a
  ``multiprocessing`` pool (fork where available, so the context is built once in the
  parent and inherited; spawn elsewhere, built once per worker);
* :class:`DaskExecutor`: a ``distributed`` cluster, ``--scheduler local:N`` (a
  ``LocalCluster`` of N single-threaded worker processes started here) or
  ``--scheduler tcp://HOST:PORT`` (join a running scheduler, e.g. a dask-jobqueue
  ``SLURMCluster``; docs/howto/cluster.md). Dask is the optional extra ``c2np[dask]``.

Results come back in the order of the items whatever the backend, so results never
depend on it. A Dask worker that dies mid-task has its tasks rerun elsewhere by the
scheduler (``distributed``'s ``allowed-failures``); every item's result is collected
exactly once, by position.
"""

from __future__ import annotations

import ipaddress
import itertools
import queue
import re
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from c2np.errors import C2NPEnvironmentError, C2NPInputError
from c2np.threads import available_cores, set_threads, threads_per_process

__all__ = ["Context", "Executor", "LocalExecutor", "DaskExecutor", "make_executor",
           "parse_scheduler", "probe_scheduler", "same", "available_cpus"]


@dataclass(frozen=True)
class Context:
    """How a worker builds the state a job needs: ``factory(*args)``, once per process.

    ``factory`` must be a module-level function and ``args`` picklable (paths, numbers)
    for the spawn and Dask backends. ``value``: an already built context, used as is by
    the in-process and fork backends (never sent anywhere)."""

    factory: Callable[..., Any] | None
    args: tuple[Any, ...] = ()
    value: Any = field(default=None, compare=False)

    def build(self) -> Any:
        if self.value is not None or self.factory is None:
            return self.value
        return self.factory(*self.args)


def same(value: Any) -> Any:
    """The identity: a context recipe for a picklable value sent as is (e.g. a model)."""
    return value


_WORKER_CONTEXTS: dict[Any, Any] = {}  # per worker process: built contexts by recipe


def _context(ctx: Context) -> Any:
    assert ctx.factory is not None
    key = (ctx.factory.__module__, ctx.factory.__qualname__, ctx.args)
    try:
        hash(key)
    except TypeError:  # an unhashable recipe is rebuilt for every chunk
        return ctx.factory(*ctx.args)
    if key not in _WORKER_CONTEXTS:
        _WORKER_CONTEXTS.clear()  # one job at a time per worker: keep the newest only
        _WORKER_CONTEXTS[key] = ctx.factory(*ctx.args)
    return _WORKER_CONTEXTS[key]


def _run_chunk(fn: Callable[[Any, Any], Any], ctx: Context | None,
               chunk: Sequence[Any]) -> list[Any]:
    """Worker side: ``fn(context, item)`` for every item of a chunk."""
    state = _context(ctx) if ctx is not None else None
    return [fn(state, item) for item in chunk]


_FORK_STATE: Any = None


def _ignore_interrupts() -> None:
    """In a worker: Ctrl-C is the parent's to handle (it ends the pool); a worker that raised
    KeyboardInterrupt too would print its traceback and be replaced by the pool. On Linux the
    worker is also killed when the process (or pool thread) that started it ends, so that no
    worker, not even one the pool started as a replacement, outlives an interrupted command."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # no prctl: the parent's close() still terminates and kills its workers


def _fork_init(state: Any, threads: int = 1) -> None:
    global _FORK_STATE
    _ignore_interrupts()
    set_threads(threads)
    _FORK_STATE = state


def _run_chunk_fork(job: tuple[Callable[[Any, Any], Any], Sequence[Any]]) -> list[Any]:
    fn, chunk = job
    return [fn(_FORK_STATE, item) for item in chunk]


def _spawn_init(ctx: Context | None, threads: int = 1) -> None:
    global _FORK_STATE
    _ignore_interrupts()
    set_threads(threads)
    _FORK_STATE = ctx.factory(*ctx.args) if ctx is not None and ctx.factory is not None else None


class Executor:
    """Maps ``fn(context, item)`` over items, results in item order (see module doc)."""

    workers: int = 1
    kind: str = "local"

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], *,
            context: Context | None = None, chunk: int = 1) -> Iterator[list[Any]]:
        """Yield the results chunk by chunk (``chunk`` items each, in order)."""
        raise NotImplementedError

    def map_unordered(self, fn: Callable[[Any, Any], Any], items: Iterable[Any], *,
                      context: Context | None = None, chunk: int = 1) -> Iterator[list[Any]]:
        """Yield the results of ``items`` (any iterable, read lazily) chunk by chunk
        (``chunk`` items each) in any order, as they finish: for jobs whose results carry
        their own position. This default sends batches of ``4 x workers`` chunks through
        :meth:`map`; the local pool overrides it with a window of chunks in flight, so that
        no worker waits for the slowest chunk of a batch."""
        it = iter(items)
        size = max(int(chunk), 1)
        while True:
            batch = list(itertools.islice(it, size * 4 * max(self.workers, 1)))
            if not batch:
                return
            yield from self.map(fn, batch, context=context, chunk=size)

    def close(self) -> None:
        """Release the workers (a Dask cluster started here is shut down)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        """What ran the job, for results and logs (never part of a result's content)."""
        return {"kind": self.kind, "workers": self.workers}


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    size = max(int(size), 1)
    return [items[i:i + size] for i in range(0, len(items), size)]


class LocalExecutor(Executor):
    """This process (``workers == 1``) or a pool of ``workers`` local processes, kept for
    as long as the same context is used (so a job mapped in batches forks once)."""

    kind = "local"

    def __init__(self, workers: int = 1, *, start_method: str | None = None) -> None:
        import multiprocessing as mp

        if workers < 1:
            raise C2NPInputError(f"workers must be >= 1, got {workers}")
        self.workers = int(workers)
        methods = mp.get_all_start_methods()
        self.start_method = start_method or ("fork" if "fork" in methods else "spawn")
        if self.start_method not in methods:
            raise C2NPEnvironmentError(f"start method {self.start_method!r} is not available here")
        self._pool: Any = None
        self._ctx: Any = None
        self._state: Any = None
        self._state_ctx: Any = None

    def _serial_state(self, context: Context | None) -> Any:
        if context is None:
            return None
        if self._state_ctx is not context:
            self._state, self._state_ctx = context.build(), context
        return self._state

    def _pool_for(self, context: Context | None) -> Any:
        import multiprocessing as mp

        if self._pool is not None and self._ctx is context:
            return self._pool
        self.close()
        mpc = mp.get_context(self.start_method)
        threads = threads_per_process(self.workers)  # each worker's share of the cores (c2np.threads)
        if self.start_method == "fork":
            self._pool = mpc.Pool(self.workers, initializer=_fork_init,
                                  initargs=(self._serial_state(context), threads))
        else:
            self._pool = mpc.Pool(self.workers, initializer=_spawn_init, initargs=(context, threads))
        self._ctx = context
        return self._pool

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], *,
            context: Context | None = None, chunk: int = 1) -> Iterator[list[Any]]:
        parts = _chunks(items, chunk)
        if self.workers == 1:
            state = self._serial_state(context)
            for part in parts:
                yield [fn(state, item) for item in part]
            return
        yield from self._pool_for(context).imap(_run_chunk_fork, [(fn, part) for part in parts])

    def map_unordered(self, fn: Callable[[Any, Any], Any], items: Iterable[Any], *,
                      context: Context | None = None, chunk: int = 1) -> Iterator[list[Any]]:
        """:meth:`Executor.map_unordered`: the pool is started (forked) first, then
        ``items`` are read in this process, ``chunk`` at a time, keeping 2 chunks per
        worker submitted, so a worker that finishes takes the next chunk at once; an error
        of ``items`` or of a chunk is raised here (the chunks still running are dropped)."""
        size = max(int(chunk), 1)
        if self.workers == 1:
            state = self._serial_state(context)
            it = iter(items)
            while part := list(itertools.islice(it, size)):
                yield [fn(state, item) for item in part]
            return
        pool = self._pool_for(context)  # before the first item is read (no fork after)
        done: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        it = iter(items)
        in_flight = 0
        exhausted = False
        while True:
            while not exhausted and in_flight < 2 * self.workers:
                part = list(itertools.islice(it, size))
                if not part:
                    exhausted = True
                    break
                pool.apply_async(_run_chunk_fork, ((fn, part),),
                                 callback=lambda r: done.put((True, r)),
                                 error_callback=lambda e: done.put((False, e)))
                in_flight += 1
            if in_flight == 0:
                return
            ok, result = done.get()
            in_flight -= 1
            if not ok:
                raise result
            yield result

    def close(self) -> None:
        """End the pool's workers, whatever they are doing, within a few seconds: the pool is
        terminated (SIGTERM) by a helper thread; workers still alive after
        :data:`CLOSE_WAIT_S` are killed (SIGKILL), so a Ctrl-C never leaves a process behind."""
        pool, self._pool, self._ctx = self._pool, None, None
        if pool is None:
            return
        procs = list(getattr(pool, "_pool", []))
        closer = threading.Thread(target=_terminate_pool, args=(pool,), daemon=True, name="c2np-pool-close")
        closer.start()
        closer.join(CLOSE_WAIT_S)
        for proc in list(getattr(pool, "_pool", [])) + procs:
            if proc.is_alive():
                proc.kill()
        for proc in procs:
            proc.join(CLOSE_WAIT_S)


#: Seconds :meth:`LocalExecutor.close` waits for the pool to end before killing its workers.
CLOSE_WAIT_S = 3.0


def _terminate_pool(pool: Any) -> None:
    try:
        pool.terminate()
        pool.join()
    except Exception:  # noqa: BLE001  the workers are killed by the caller anyway
        pass


class DaskExecutor(Executor):
    """A ``distributed`` client: a ``LocalCluster`` started here or a running scheduler."""

    kind = "dask"

    def __init__(self, client: Any, *, cluster: Any = None, address: str = "") -> None:
        self.client = client
        self.cluster = cluster
        self.address = address
        self.workers = max(len(client.scheduler_info().get("workers", {})), 1)

    @classmethod
    def local(cls, n_workers: int) -> DaskExecutor:
        """A ``LocalCluster`` of ``n_workers`` single-threaded worker processes."""
        distributed = _import_distributed()
        if n_workers < 1:
            raise C2NPInputError(f"--scheduler local:N needs N >= 1, got {n_workers}")
        cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                           processes=True, dashboard_address=None)
        return cls(distributed.Client(cluster), cluster=cluster, address=cluster.scheduler_address)

    @classmethod
    def connect(cls, address: str) -> DaskExecutor:
        """Join a running scheduler at ``tcp://HOST:PORT``."""
        distributed = _import_distributed()
        probe_scheduler(address)
        try:
            client = distributed.Client(address, timeout=f"{2 * HANDSHAKE_TIMEOUT_S:g}s")
        except OSError as exc:
            raise C2NPEnvironmentError(f"--scheduler {address}: cannot reach the scheduler ({exc})") from None
        return cls(client, address=address)

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], *,
            context: Context | None = None, chunk: int = 1) -> Iterator[list[Any]]:
        if context is not None and context.factory is None:
            raise C2NPInputError("this job cannot run on Dask: its state has no recipe a worker "
                                 "can rebuild (e.g. a store without a file)")
        parts = _chunks(items, chunk)
        ctx = Context(context.factory, context.args) if context is not None else None
        futures = self.client.map(_run_chunk, [fn] * len(parts), [ctx] * len(parts), parts,
                                  pure=False)
        try:
            for fut in futures:  # in order; the scheduler reruns tasks of lost workers
                yield fut.result()
        finally:
            self.client.cancel(futures)

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "workers": self.workers, "address": self.address}


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise C2NPEnvironmentError(
            "--scheduler needs Dask: pip install 'c2np[dask]' (dask and distributed)") from None
    return distributed


#: Seconds to connect to a scheduler and receive its greeting (the distributed handshake).
HANDSHAKE_TIMEOUT_S = 5.0
#: Largest greeting accepted from a scheduler (a real one sends a few hundred bytes).
MAX_HANDSHAKE_BYTES = 1 << 20
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")


def parse_scheduler(spec: str | None) -> tuple[str, Any]:
    """``None``/``""``/``"processes"`` -> ("local", None); ``"local:N"`` -> ("dask-local", N)
    with N within the limit ``workers``; ``"tcp://HOST:PORT"`` (or ``tls://``) -> ("dask",
    address) with HOST a host name, an IPv4 address or a bracketed IPv6 address and PORT
    1 .. 65535. Anything else is bad input, found before any connection is tried."""
    from c2np.limits import check as check_limit
    from c2np.terminal import shortened

    if spec is None or spec in ("", "processes"):
        return "local", None
    shown = shortened(spec, 60)
    if spec.startswith("local:"):
        n = spec.split(":", 1)[1]
        if not (n.isascii() and n.isdigit()) or len(n) > 9 or int(n) < 1:
            raise C2NPInputError(f"--scheduler {shown}: expected local:N with N >= 1")
        check_limit("workers", int(n), what="--scheduler local:N")
        return "dask-local", int(n)
    if spec.startswith(("tcp://", "tls://")):
        hostport = spec.split("://", 1)[1]
        host, sep, port = hostport.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            try:
                ipaddress.IPv6Address(host[1:-1])
            except ValueError:
                raise C2NPInputError(f"--scheduler {shown}: {shortened(host, 60)} is not an IPv6 address") from None
        elif not sep or not _HOST.fullmatch(host) or len(host) > 253:
            raise C2NPInputError(f"--scheduler {shown}: expected tcp://HOST:PORT (HOST a name or an address)")
        if not (port.isascii() and port.isdigit()) or len(port) > 5 or not 1 <= int(port) <= 65535:
            raise C2NPInputError(f"--scheduler {shown}: the port must be a number 1 .. 65535")
        return "dask", spec
    raise C2NPInputError(f"--scheduler {shown}: expected local:N or tcp://HOST:PORT "
                         "(or leave it out for local processes)")


def probe_scheduler(address: str, *, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """Check that a Dask scheduler answers at ``tcp://HOST:PORT`` before the Dask client is
    started: connect, then receive the greeting a scheduler sends first (an 8-byte length
    and that many bytes), all within ``timeout_s``. A refused connection, silence (a server
    that accepts and never answers, or one that waits for a request, such as an HTTP server)
    or a greeting that is not a scheduler's is :class:`C2NPEnvironmentError`, one line."""
    import socket
    import time

    scheme, rest = address.split("://", 1)
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    deadline = time.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as exc:
        raise C2NPEnvironmentError(f"--scheduler {address}: cannot connect ({exc.strerror or exc})") from None
    if scheme != "tcp":
        sock.close()
        return  # a TLS greeting needs the certificates the Dask client holds

    def receive(n: int) -> bytes:
        data = b""
        while len(data) < n:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            block = sock.recv(min(n - len(data), 1 << 16))
            if not block:
                raise ConnectionError("the server closed the connection")
            data += block
        return data

    try:
        with sock:
            (size,) = struct.unpack("<Q", receive(8))
            if not 8 <= size <= MAX_HANDSHAKE_BYTES:
                raise ValueError("its first bytes are not a Dask scheduler's greeting (another kind of server?)")
            (frames,) = struct.unpack("<Q", receive(8))
            if not 1 <= frames <= 1000:
                raise ValueError("its greeting is not a Dask scheduler's (another kind of server?)")
    except TimeoutError:
        raise C2NPEnvironmentError(f"--scheduler {address}: no answer within {timeout_s:g} s (not a Dask "
                                   "scheduler, or one that is stuck)") from None
    except (OSError, ValueError) as exc:
        raise C2NPEnvironmentError(f"--scheduler {address}: {exc}") from None


def make_executor(workers: int = 1, scheduler: str | None = None) -> Executor:
    """The executor for ``--workers`` / ``--scheduler`` (see :func:`parse_scheduler`)."""
    kind, arg = parse_scheduler(scheduler)
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "dask-local":
        return DaskExecutor.local(arg)
    return DaskExecutor.connect(arg)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    return available_cores()
