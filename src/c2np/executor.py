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

import itertools
import queue
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from c2np.errors import C2NPEnvironmentError, C2NPInputError
from c2np.threads import available_cores, set_threads, threads_per_process

__all__ = ["Context", "Executor", "LocalExecutor", "DaskExecutor", "make_executor",
           "parse_scheduler", "same", "available_cpus"]


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


def _fork_init(state: Any, threads: int = 1) -> None:
    global _FORK_STATE
    set_threads(threads)
    _FORK_STATE = state


def _run_chunk_fork(job: tuple[Callable[[Any, Any], Any], Sequence[Any]]) -> list[Any]:
    fn, chunk = job
    return [fn(_FORK_STATE, item) for item in chunk]


def _spawn_init(ctx: Context | None, threads: int = 1) -> None:
    global _FORK_STATE
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
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
        self._pool = self._ctx = None


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
        try:
            client = distributed.Client(address, timeout="30s")
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


def parse_scheduler(spec: str | None) -> tuple[str, Any]:
    """``None``/``""``/``"processes"`` -> ("local", None); ``"local:N"`` -> ("dask-local", N);
    ``"tcp://HOST:PORT"`` -> ("dask", address). Anything else is bad input."""
    if spec is None or spec in ("", "processes"):
        return "local", None
    if spec.startswith("local:"):
        n = spec.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise C2NPInputError(f"--scheduler {spec!r}: expected local:N with N >= 1")
        return "dask-local", int(n)
    if spec.startswith(("tcp://", "tls://")):
        host = spec.split("://", 1)[1]
        if ":" not in host or not host.rsplit(":", 1)[1].isdigit():
            raise C2NPInputError(f"--scheduler {spec!r}: expected tcp://HOST:PORT")
        return "dask", spec
    raise C2NPInputError(f"--scheduler {spec!r}: expected local:N or tcp://HOST:PORT "
                         "(or leave it out for local processes)")


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
