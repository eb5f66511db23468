"""Wiring: settings + NVML module + clocks -> sampler, feed, collector, loop and HTTP server."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry
from statictrain.channel import STEPS_FILE

from .collector import SidecarCollector
from .nvml import GpuSampler, NvmlApi
from .pod_gpus import reader
from .profiles import ProfileRequests
from .sampling import SamplingLoop
from .server import SidecarHTTPServer, make_server
from .settings import Settings, read_token
from .tailer import ChannelTailer
from .training import TrainingFeed, TrainingState

__all__ = ["Clocks", "Sidecar", "build"]

_log = logging.getLogger("statictrain_sidecar")


@dataclass(frozen=True)
class Clocks:
    """Time sources, injected so tests can drive them."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


def _version() -> str:
    try:
        return version("statictrain-sidecar")
    except PackageNotFoundError:
        return "unknown"


def _new_profile_id(wall: Callable[[], float]) -> Callable[[], str]:
    def new() -> str:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(wall()))
        return f"{stamp}-{secrets.token_hex(3)}"

    return new


PROFILE_HOUSEKEEPING_S = 5.0
"""Seconds between profile housekeeping rounds (directory scans), whatever the sample interval."""


def _at_most_every(
    period_s: float, clock: Callable[[], float], task: Callable[[], None]
) -> Callable[[], None]:
    last: list[float] = []

    def run() -> None:
        now = clock()
        if last and now - last[0] < period_s:
            return
        last[:] = [now]
        task()

    return run


def loop_health(loop: SamplingLoop, feed: TrainingFeed) -> Callable[[], tuple[bool, str]]:
    """/healthz: fails only when the sampling thread has died (a restart would help then).

    A broken channel does not fail it (restarting the sidecar mends no file the trainer writes,
    and would reset its counters): the body names the channel's status, as statictrain_channel_up does."""

    def health() -> tuple[bool, str]:
        if not loop.alive():
            return False, "sampling loop stopped"
        status = feed.status
        return True, "ok" if status == "ok" else f"ok (trainer channel: {status})"

    return health


@dataclass
class Sidecar:
    """A built sidecar; ``start()`` opens NVML, starts the loop and serves HTTP on a thread."""

    settings: Settings
    gpus: GpuSampler
    feed: TrainingFeed
    profiles: ProfileRequests | None
    registry: CollectorRegistry
    loop: SamplingLoop
    server: SidecarHTTPServer
    clocks: Clocks
    _http: threading.Thread | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        """The port actually bound."""
        return int(self.server.server_address[1])

    def health(self) -> tuple[bool, str]:
        """Healthy while the sampling loop runs; GPU absence is reported in metrics, not here."""
        return loop_health(self.loop, self.feed)()

    def start(self) -> None:
        """Open NVML (never fails), start sampling and serving."""
        self.gpus.open()
        if self.settings.stats_dir is None:
            _log.warning("STATICTRAIN_STATS_DIR is not set: no training metrics and no profile requests")
        self.loop.start()
        self._http = threading.Thread(target=self.server.serve_forever, name="statictrain-http", daemon=True)
        self._http.start()
        _log.info("serving /metrics on %s:%d", self.settings.bind, self.port)

    def stop(self) -> None:
        """Stop serving and sampling, release NVML."""
        if self._http is not None:
            self.server.shutdown()
        self.server.server_close()
        self.loop.stop()
        self.feed.close()
        self.gpus.close()


def build(settings: Settings, nvml: NvmlApi | None, clocks: Clocks | None = None) -> Sidecar:
    """Assemble a sidecar; binds the port now. ``nvml``: the pynvml module, a fake, or None.

    Raises SettingsError when the profile token file is set but unusable."""
    clocks = clocks or Clocks()
    # With a channel and no explicit GPU list, report the GPUs the pod's trainer publishes.
    published = reader(settings.stats_dir) if settings.stats_dir is not None and not settings.gpus else None
    gpus = GpuSampler(nvml, select=settings.gpus, enabled=settings.nvml, logger=_log, published=published)
    tailer = ChannelTailer(settings.stats_dir / STEPS_FILE) if settings.stats_dir is not None else None
    feed = TrainingFeed(tailer, TrainingState(clocks.monotonic()), clocks.monotonic)
    profiles = None
    if settings.stats_dir is not None:
        profiles = ProfileRequests(
            settings.stats_dir,
            max_steps=settings.profile_max_steps,
            timeout_s=settings.profile_timeout_s,
            max_bytes=settings.profile_max_bytes,
            clock=clocks.wall,
            new_id=_new_profile_id(clocks.wall),
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        SidecarCollector(
            settings.identity,
            gpus,
            feed,
            version=_version(),
            profile_outcomes=(lambda: dict(profiles.outcomes)) if profiles is not None else None,
            dcgm=settings.dcgm,
        )
    )
    tasks: list[tuple[str, Callable[[], None]]] = [
        ("channel", feed.refresh),
        ("gpu", lambda: gpus.tick(clocks.monotonic())),
    ]
    if profiles is not None:
        tasks.append(
            ("profiles", _at_most_every(PROFILE_HOUSEKEEPING_S, clocks.monotonic, profiles.housekeep))
        )
    loop = SamplingLoop(settings.sample_interval_s, tasks, clocks.monotonic, _log)
    token = read_token(settings.profile_token_file) if settings.profile_token_file is not None else None
    server = make_server(settings.bind, settings.port, registry, loop_health(loop, feed), profiles, profile_token=token)
    sidecar = Sidecar(settings, gpus, feed, profiles, registry, loop, server, clocks)
    return sidecar
