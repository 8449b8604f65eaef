"""fidia_jax.protein: FASTA reading and design problems on a structure (``prepare_design``)."""

import numpy as np
import pytest

from fidia_jax.errors import ConfigError, DataError
from fidia_jax.protein import (
    ALPHABET,
    default_backbone_path,
    load_structure,
    prepare_design,
    read_fasta,
)


def test_fasta_reader_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        read_fasta(tmp_path / "none.fa")
    (tmp_path / "a.fa").write_text("ACDE\n>x\nAC\n")
    with pytest.raises(DataError, match="before the first"):
        read_fasta(tmp_path / "a.fa")
    (tmp_path / "b.fa").write_text(">x\nAC\nDE\n\n>y\nW\n")
    assert read_fasta(tmp_path / "b.fa") == [("x", "ACDE"), ("y", "W")]


def test_fasta_reader_lines_headers_and_duplicates(tmp_path):
    path = tmp_path / "c.fa"
    path.write_text("\n\nAC\n")
    with pytest.raises(DataError, match=r"c\.fa:3: sequence line before"):
        read_fasta(path)
    path.write_text(">  x 1 \r\n A C\r\n>x 1\n>empty\n")
    assert read_fasta(path) == [("x 1", "A C"), ("x 1", ""), ("empty", "")]
    path.write_text("\n \n")
    with pytest.raises(DataError, match="no FASTA records"):
        read_fasta(path)


def test_prepare_design_masks():
    protein = load_structure(default_backbone_path())
    setup = prepare_design(fixed="A10-20")
    assert setup.design_chains == ("A",) and setup.fixed_spec == "A10-20"
    assert int(setup.fixed.sum()) == 11
    np.testing.assert_array_equal(setup.designed, (protein.mask > 0) & ~setup.fixed)
    np.testing.assert_array_equal(setup.designed_slots(), np.arange(protein.length))
    assert setup.chain_strings(protein.S) == protein.sequence
    assert setup.chain_strings(np.zeros(protein.length, int)) == ALPHABET[0] * protein.length
    assert prepare_design(design_chains="A").design_chains == ("A",)


def test_prepare_design_nothing_left_to_design():
    protein = load_structure(default_backbone_path())
    chain = protein.chain_order[0]
    lo, hi = int(protein.resnum[0]), int(protein.resnum[-1])
    with pytest.raises(ConfigError, match="no position left to design"):
        prepare_design(fixed=f"{chain}{lo}-{hi}")
