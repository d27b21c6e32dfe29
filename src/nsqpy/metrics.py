"""``GET /metrics``: the daemons' state in Prometheus' text format.

Beyond NSQ (which only pushes to statsd). Every daemon keeps its own
``CollectorRegistry`` rather than prometheus_client's global one, so several
daemons in one process (tests, an embedding program) never mix their
figures. A daemon contributes collectors that read its live state when
Prometheus scrapes: nothing is counted per message, so the data path pays
nothing and a scrape shows the same numbers as ``/stats`` at that instant.

Per-topic and per-channel figures can run to 100,000 samples on a busy nsqd;
building one prometheus_client ``Sample`` per value and formatting each one
generically takes seconds of event-loop time there, so those families are
written by ``TextFamily``, which renders each topic's or channel's labels
once and reuses them for every figure. The output is the same format
(checked with prometheus_client's own parser in the tests).
"""

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from .protocol import NSQ_VERSION


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def label_text(**labels: str) -> str:
    """``{name="value",...}``, rendered once per topic or channel."""
    return "{" + ",".join(f'{name}="{_escape_label(value)}"' for name, value in labels.items()) + "}"


class TextFamily:
    """One metric family written straight to the exposition format."""

    __slots__ = ("name", "lines")

    def __init__(self, name: str, kind: str, help_text: str):
        self.name = name
        help_text = help_text.replace("\\", "\\\\").replace("\n", "\\n")
        self.lines = [f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"]

    def add(self, labels: str, value: int | float) -> None:
        self.lines.append(f"{self.name}{labels} {value}\n")

    def add_rows(self, rows, read) -> None:
        """One sample per ``(source, labels)`` row, valued ``read(source)``:
        the whole family in one pass, the cost of a scrape of many topics."""
        name = self.name
        self.lines += [f"{name}{labels} {read(source)}\n" for source, labels in rows]

    def text(self) -> str:
        return "".join(self.lines)


class BuildInfo:
    """``<daemon>_build_info{version=...} 1``: which NSQ version a target speaks."""

    def __init__(self, daemon: str):
        self.daemon = daemon

    def collect(self):
        info = GaugeMetricFamily(f"{self.daemon}_build_info", f"The NSQ version {self.daemon} implements.",
                                 labels=["version"])
        info.add_metric([NSQ_VERSION], 1)
        yield info


def daemon_registry(daemon: str, collector=None) -> CollectorRegistry:
    """A registry with the process, Python runtime and build figures of
    ``daemon``, plus its own ``collector`` when it has one."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(BuildInfo(daemon))
    if collector is not None:
        registry.register(collector)
    return registry


def metrics_endpoint(registry: CollectorRegistry, text_families=None):
    """An aiohttp handler answering the scrape, in text format 0.0.4 (what
    every Prometheus release, Debian's included, reads). ``text_families``:
    a callable returning ``TextFamily`` objects appended to the registry's."""
    async def metrics(request):
        body = generate_latest(registry)
        if text_families is not None:
            body += "".join([family.text() for family in text_families()]).encode()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
    return metrics
