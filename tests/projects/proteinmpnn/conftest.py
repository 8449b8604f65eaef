"""Module-scoped fixtures shared by the ProteinMPNN driver tests (load the weights once per module)."""

from __future__ import annotations

import pytest

from fidia_jax.protein import default_backbone_path, load_structure


@pytest.fixture(scope="module")
def model():
    from fidia_jax.models import ProteinMPNN

    return ProteinMPNN.from_checkpoint("v_48_020")


@pytest.fixture(scope="module")
def protein():
    """The default 5PTI backbone (chain A, 58 residues, author numbers 1-58)."""
    return load_structure(default_backbone_path())
