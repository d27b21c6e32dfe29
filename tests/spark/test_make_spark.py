"""``make spark``, the Spark page's step for a checkout set up with ``make
run``: it installs the spark extra into that venv and Java when missing,
with the Makefile's own install steps, and the Spark page and README name it."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_spark_installs_the_spark_extra_and_java_and_the_docs_name_it():
    # -n prints the recipes without running them; -B as if nothing were installed yet
    dry_run = subprocess.run(["make", "-n", "-B", "spark"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry_run.returncode == 0, dry_run.stderr
    assert ".venv/bin/pip install -q -e '.[spark]'" in dry_run.stdout
    assert "apt-get install -y -qq openjdk-17-jre-headless" in dry_run.stdout
    assert "make spark" in (ROOT / "docs" / "spark.md").read_text()
    assert "make spark" in (ROOT / "README.md").read_text()
