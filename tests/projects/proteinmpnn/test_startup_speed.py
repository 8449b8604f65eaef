"""Start-up work of ``fidia-jax proteinmpnn sample`` that the start-up cache avoids (issue 44):
the seed's key is built without compiling a program, and equals ``jax.random.key`` bitwise."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from fidia_jax.projects.proteinmpnn import _startup


@pytest.mark.parametrize("seed", [0, 1, 3, 37, 123456789, 2**31 - 1, np.int64(5), -1, 2**31])
def test_seed_key_is_jax_random_key(seed):
    want = jax.random.key(seed)
    got = _startup.seed_key(seed)
    assert got.dtype == want.dtype and got.shape == want.shape == ()
    assert np.array_equal(jax.random.key_data(got), jax.random.key_data(want))
    # and it draws the same numbers (a fold_in of the next temperature too)
    for k in (got, jax.random.fold_in(got, 1)):
        w = want if k is got else jax.random.fold_in(want, 1)
        assert np.array_equal(jax.random.uniform(k, (4,)), jax.random.uniform(w, (4,)))


def test_seed_key_compiles_nothing():
    """In a fresh process (no in-memory cache of an earlier call), ``seed_key(5)`` compiles no
    program; ``jax.random.key(5)`` compiles one (the check's own control)."""
    code = (
        "import jax\n"
        "from fidia_jax.projects.proteinmpnn._startup import seed_key\n"
        "n = []\n"
        "jax.monitoring.register_event_duration_secs_listener(\n"
        "    lambda e, s, **k: n.append(e) if e.endswith('backend_compile_duration') else None)\n"
        "seed_key(5)\n"
        "mine = len(n)\n"
        "jax.random.key(5)\n"
        "print(mine, len(n) - mine)\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "FIDIA_COMPILATION_CACHE": "off"}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120,
                         capture_output=True, text=True).stdout.split()  # fmt: skip
    assert out[0] == "0" and int(out[1]) >= 1, out
