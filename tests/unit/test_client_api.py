"""The client's public names, as ``help()`` shows them to its users.

Every name ``nsqpy`` and ``nsqpy.client`` export says what it is for in a
docstring of its own, and pydoc renders each: ``help(nsqpy.Producer)`` is
where a user meets the API first. ``nsqpy`` exports the client lazily, so
that a daemon importing ``nsqpy.version`` never loads it; ``help(nsqpy)``
shows the client all the same.
"""

import inspect
import pydoc
import subprocess
import sys

import pytest

import nsqpy
import nsqpy.client

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls

PUBLIC = [(module, name) for module in (nsqpy, nsqpy.client) for name in module.__all__ if name != "__version__"]


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m.__name__}.{n}" for m, n in PUBLIC])
def test_each_public_name_has_a_docstring_of_its_own(module, name):
    value = getattr(module, name)
    assert inspect.isclass(value) or inspect.isroutine(value), f"{name} is neither a class nor a function"
    doc = vars(value).get("__doc__") if inspect.isclass(value) else value.__doc__
    assert doc and doc.strip(), f"{module.__name__}.{name} has no docstring"
    assert not doc.startswith(f"{name}("), f"{name}'s docstring is the signature a dataclass makes up"
    assert name in pydoc.render_doc(value, renderer=pydoc.plaintext)


def test_the_version_is_exported():
    assert isinstance(nsqpy.__version__, str) and nsqpy.__version__


@pytest.mark.parametrize("module", [nsqpy, nsqpy.client], ids=lambda module: module.__name__)
def test_pydoc_renders_the_packages_with_the_clients_classes(module):
    text = pydoc.render_doc(module, renderer=pydoc.plaintext)
    for name in ("Config", "Consumer", "Message", "Producer", "SyncProducer"):
        assert f"class {name}(" in text


def test_importing_nsqpy_and_listing_it_leaves_the_client_unloaded():
    code = "import sys, nsqpy, nsqpy.version; dir(nsqpy); print('nsqpy.client' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
