"""Continual-learning metrics from an accuracy matrix (standard definitions).

``acc[t, j]`` is the accuracy on task ``j``'s test set after training on tasks ``0..t``
(``j <= t``; entries with ``j > t`` are ignored). With ``T`` tasks:

* average accuracy ``A_t`` after step ``t``: the mean of ``acc[t, j]`` over ``j <= t`` weighted
  by the test-set sizes ``n_j`` (= the accuracy on all classes seen so far); the **average
  (incremental) accuracy** is ``(1/T) sum_t A_t`` (Rebuffi et al., iCaRL, CVPR 2017);
* **last accuracy** ``A_{T-1}`` (the final accuracy on every class; "ACC" of Lopez-Paz & Ranzato,
  GEM, NeurIPS 2017, when the tasks are equal-sized);
* **average forgetting** ``(1/(T-1)) sum_{j<T-1} max_{t<T-1} (acc[t, j] - acc[T-1, j])``
  (Chaudhry et al., "Riemannian Walk for Incremental Learning", ECCV 2018).
"""

from __future__ import annotations

import numpy as np

__all__ = ["continual_metrics"]


def continual_metrics(acc, task_sizes=None) -> dict[str, float | list[float]]:
    """Average accuracy, last accuracy and average forgetting of an accuracy matrix.

    Args:
      acc: ``(T, T)`` accuracies in ``[0, 1]``; only the lower triangle ``j <= t`` is read.
      task_sizes: ``(T,)`` test-set sizes (weights of the per-step accuracy); default equal.

    Returns:
      ``{"average_accuracy", "last_accuracy", "average_forgetting", "step_accuracy": [A_t]}``;
      forgetting is ``0.0`` when ``T == 1``.

    Raises:
      ValueError: ``acc`` is not square, or ``task_sizes`` has the wrong length or a value <= 0.
    """
    acc = np.asarray(acc, np.float64)
    if acc.ndim != 2 or acc.shape[0] != acc.shape[1] or acc.shape[0] < 1:
        raise ValueError(f"continual_metrics: acc must be a square (T, T) matrix, got {acc.shape}")
    low = acc[np.tril_indices(acc.shape[0])]
    if not np.all(np.isfinite(low)) or low.min() < 0 or low.max() > 1:
        raise ValueError("continual_metrics: acc[t, j <= t] must be finite accuracies in [0, 1]")
    t_count = acc.shape[0]
    sizes = np.ones(t_count) if task_sizes is None else np.asarray(task_sizes, np.float64)
    if sizes.shape != (t_count,) or np.any(sizes <= 0):
        raise ValueError(f"continual_metrics: task_sizes must be {t_count} positive numbers")
    steps = [
        float(np.dot(acc[t, : t + 1], sizes[: t + 1]) / sizes[: t + 1].sum())
        for t in range(t_count)
    ]
    if t_count > 1:
        best = np.array([acc[j : t_count - 1, j].max() for j in range(t_count - 1)])
        forgetting = float(np.mean(best - acc[t_count - 1, : t_count - 1]))
    else:
        forgetting = 0.0
    return {
        "average_accuracy": float(np.mean(steps)),
        "last_accuracy": steps[-1],
        "average_forgetting": forgetting,
        "step_accuracy": steps,
    }
