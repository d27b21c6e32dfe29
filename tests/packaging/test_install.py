"""nsqpy as users install it: ``python -m build``'s wheel and sdist, each
into a fresh virtualenv outside the checkout (no editable install, no
source tree on ``sys.path``), and the pure-Python wheel on every other
Python 3.11-3.13 this machine has. Each install runs every console
script's ``--version`` and a round trip through ``nsqpy cluster``: 1,000
messages published and consumed with the installed client, nsqadmin
answering. The wheel with the ``spark`` extra runs ``nsq_to_parquet``."""

import configparser
import fcntl
import glob
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pyarrow.dataset
import pytest

from tests.support.processes import GroupProcess, cluster_daemons
from tests.support.wire import http

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]

CHECKOUT = Path(__file__).resolve().parents[2]
OTHER_PYTHONS = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[123].*/bin/python")))

ROUND_TRIP = textwrap.dedent("""
    import asyncio, sys, nsqpy
    nsqd_tcp, lookupd_http, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with nsqpy.SyncProducer(nsqd_tcp) as producer:
        for start in range(0, count, 100):
            producer.multi_publish("installed", [b"m%d" % i for i in range(start, start + 100)])

    async def consume():
        seen, done = set(), asyncio.Event()
        async def handler(message):
            seen.add(message.body)
            if len(seen) == count:
                done.set()
        consumer = nsqpy.Consumer("installed", "check", handler)
        await consumer.connect_to_nsqlookupd(lookupd_http)
        await asyncio.wait_for(done.wait(), 120)
        await consumer.stop()
        return len(seen)

    print(asyncio.run(consume()), nsqpy.__version__, nsqpy.__file__)
""")


def run(command: list, cwd: Path, timeout: float = 600, **env: str) -> str:
    """``command``'s output; its failure shows what it printed."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "NSQPY_PURE", "VIRTUAL_ENV")}
    result = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env={**environment, **env})
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def fresh_venv(python: str, where: Path) -> Path:
    run([python, "-m", "venv", where], cwd=where.parent)
    return where / "bin"


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(directory)`` run once for the whole test run: pytest-xdist
    spreads this module's tests over its workers, and a compiled build
    costs a minute of both cores. The first worker builds under a lock in
    the run's shared temporary root; the others wait for it and reuse it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' own roots sit side by side in it
    out = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "built").exists():
            out.mkdir(exist_ok=True)
            build(out)
            (out / "built").touch()
    return out


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel ``python -m build`` makes of the checkout."""
    return built_once(tmp_path_factory, "dist", lambda out: run([sys.executable, "-m", "build", "--outdir", out,
                                                                 CHECKOUT], cwd=out))


def only(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def console_scripts(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
        entry_points = configparser.ConfigParser()
        entry_points.read_string(archive.read(name).decode())
    return sorted(entry_points["console_scripts"])


def check_installed(bin_dir: Path, scripts: list[str], cwd: Path, compiled: bool, also=None) -> None:
    """Every console script answers ``--version``; the modules come from
    the venv, compiled or not as expected; ``pip check`` is clean; a
    cluster started by the installed ``nsqpy`` carries 1,000 messages, and
    nsqadmin shows their topic. ``also(daemons)`` runs while it is up."""
    for script in scripts:
        line = run([bin_dir / script, "--version"], cwd=cwd).strip()
        assert line.startswith(script + " "), line
    where = run([bin_dir / "python", "-c", "import nsqpy.nsqd.channel as m; print(m.__file__)"], cwd=cwd).strip()
    assert where.startswith(str(bin_dir.parent)) and where.endswith(".so" if compiled else ".py"), where
    run([bin_dir / "python", "-m", "pip", "check"], cwd=cwd)
    cluster = GroupProcess([str(bin_dir / "nsqpy"), "cluster", "--ephemeral-ports", "--data-path", str(cwd / "data")])
    try:
        cluster.wait_for("^cluster up", timeout=60)
        daemons = cluster_daemons(cluster.output)
        assert {"nsqlookupd", "nsqd0", "nsqadmin"} <= set(daemons), cluster.output
        answer = run([bin_dir / "python", "-c", ROUND_TRIP, daemons["nsqd0"]["tcp"],
                      daemons["nsqlookupd"]["http"].removeprefix("http://"), "1000"], cwd=cwd, timeout=180)
        count, _, module = answer.split()
        assert (count, module.startswith(str(bin_dir.parent))) == ("1000", True), answer
        status, _, page = http("GET", f"{daemons['nsqadmin']['http']}/topics/installed")
        assert status == 200 and b"installed" in page
        if also is not None:
            also(daemons)
    finally:
        cluster.stop(30)


def test_the_wheel_with_spark_installs_and_runs_compiled_outside_the_checkout(dist, tmp_path):
    wheel = only(dist, "nsqpy-*-cp*.whl")
    bin_dir = fresh_venv(sys.executable, tmp_path / "venv")
    run([bin_dir / "pip", "install", "-q", f"{wheel}[spark]"], cwd=tmp_path)

    def archive(daemons):
        nsqd_tcp, nsqd_http = daemons["nsqd0"]["tcp"], daemons["nsqd0"]["http"]
        for start in range(0, 1000, 250):
            assert http("POST", f"{nsqd_http}/mpub?topic=archived",
                        b"\n".join(b"a%d" % i for i in range(start, start + 250)))[0] == 200
        run([bin_dir / "nsq_to_parquet", "--topic=archived", f"--nsqd-tcp-address={nsqd_tcp}",
             f"--nsqd-http-address={nsqd_http.removeprefix('http://')}", f"--output-dir={tmp_path / 'out'}",
             "--master=local[2]", "--available-now"], cwd=tmp_path, timeout=300,
            NSQPY_SPARK_CLASS_CACHE="0")  # a class archive for a virtualenv that goes with the test is waste
        archived = pyarrow.dataset.dataset(str(tmp_path / "out"), format="parquet", partitioning="hive")
        assert sorted(archived.to_table(columns=["body"]).column("body").to_pylist()) == \
            sorted(b"a%d" % i for i in range(1000))

    check_installed(bin_dir, console_scripts(wheel), tmp_path, compiled=True, also=archive)


def test_the_sdist_installs_as_pure_python_where_no_compiler_is_found(dist, tmp_path):
    sdist = only(dist, "nsqpy-*.tar.gz")
    bin_dir = fresh_venv(sys.executable, tmp_path / "venv")
    run([bin_dir / "pip", "install", "-q", sdist], cwd=tmp_path, CC="no-such-compiler")
    check_installed(bin_dir, console_scripts(only(dist, "nsqpy-*-cp*.whl")), tmp_path, compiled=False)


@pytest.fixture(scope="session")
def pure_wheel(tmp_path_factory) -> Path:
    """The wheel a build without a compiler makes: for every Python 3."""
    out = built_once(tmp_path_factory, "pure", lambda out: run([sys.executable, "-m", "build", "--wheel", "--outdir",
                                                                 out, CHECKOUT], cwd=out, NSQPY_PURE="1"))
    return only(out, "nsqpy-*-py3-none-any.whl")


@pytest.mark.parametrize("python", [path for path in OTHER_PYTHONS if not Path(path).parent.parent.name.startswith(
    "%d.%d." % sys.version_info[:2])], ids=lambda path: Path(path).parent.parent.name)
def test_the_pure_wheel_installs_and_runs_on_the_other_pythons(pure_wheel, python, tmp_path):
    bin_dir = fresh_venv(python, tmp_path / "venv")
    run([bin_dir / "pip", "install", "-q", pure_wheel], cwd=tmp_path)
    check_installed(bin_dir, console_scripts(pure_wheel), tmp_path, compiled=False)
