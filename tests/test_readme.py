"""The README's optimiser snippet runs as written and PASO matches sequential training."""

import pathlib
import re

import jax
import numpy as np
import optax

from fidia_jax import optim

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_optimiser_snippet_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    snippet = next(b for b in blocks if "optim.paso" in b)
    namespace: dict = {}
    exec(compile(snippet, str(README), "exec"), namespace)
    res = namespace["res"]
    assert int(res.num_iterations) < 256
    seq_params, _, _ = optim.sequential_optimize(
        namespace["loss_fn"], optax.adam(1e-2), {"w": np.zeros(8, np.float32)}, namespace["batch_fn"], 256
    )
    np.testing.assert_allclose(res.params["w"], seq_params["w"], rtol=1e-5, atol=1e-6)
    updates, _ = namespace["tx"].update(namespace["params"], namespace["opt_state"], namespace["params"])
    assert jax.tree.map(np.shape, updates) == jax.tree.map(np.shape, namespace["params"])
