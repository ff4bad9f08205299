"""Fences every Python process the test session starts: see loopback_fence.py beside it for why.

tests/conftest.py puts this folder first on PYTHONPATH and names the session's crossing log in
KPROBE_TEST_FENCE; without that variable nothing is installed. A sitecustomize further along
sys.path (a distribution's own) would be shadowed by this one, so it is run afterwards.
"""

import os
import sys

if os.environ.get("KPROBE_TEST_FENCE"):
    import loopback_fence

    loopback_fence.FENCE.install(os.environ["KPROBE_TEST_FENCE"],
                                 lookups=bool(os.environ.get(loopback_fence.ENV_LOOKUPS)))


def _run_the_shadowed_one() -> None:
    from importlib.machinery import PathFinder

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.origin and os.path.isfile(spec.origin):
        with open(spec.origin, "rb") as source:
            exec(compile(source.read(), spec.origin, "exec"), {"__name__": "sitecustomize", "__file__": spec.origin})


_run_the_shadowed_one()
