"""fidia_jax.projects.proteinmpnn: sequence design and scoring with ProteinMPNN.

``fidia-jax proteinmpnn sample`` draws sequences for a backbone (designed chains, a motif kept
native) and writes them as FASTA with a JSON summary; ``fidia-jax proteinmpnn score`` scores the
sequences of a FASTA file on a backbone by teacher-forced log-likelihood. The short forms
``fidia-jax sample`` and ``fidia-jax score`` run the same commands. From Python,
:class:`Designer` does the same in three calls (``Designer.from_pdb(...)``, ``.sample(n)``,
``.score(["SEQ", ...])``), with the command line's numbers.

Primitives used: :func:`fidia_jax.protein.prepare_design` (structure, designed chains, motif),
:func:`fidia_jax.protein.read_fasta`, and ``fidia_jax.models`` (``ProteinMPNN``,
``MPNNInputs``, ``sample``, ``score``, ``random_decoding_order``).

References:
  Dauparas, Anishchenko, Bennett, Bai, Ragotte, Milles, Wicky, Courbet, de Haas, Bethel, Leung,
  Huddy, Pellock, Tischer, Chan, Koepnick, Nguyen, Kang, Sankaran, Bera, King, Baker, "Robust
  deep learning-based protein sequence design using ProteinMPNN", Science 378 (2022) 49-56.
  https://doi.org/10.1126/science.add2656
"""

from fidia_jax.projects.proteinmpnn.design import run_sample as run_sample
from fidia_jax.projects.proteinmpnn.design import run_score as run_score
from fidia_jax.projects.proteinmpnn.designer import Designer as Designer
from fidia_jax.projects.proteinmpnn.designer import Designs as Designs
from fidia_jax.projects.proteinmpnn.designer import DesignScores as DesignScores

__all__ = ["DesignScores", "Designer", "Designs", "run_sample", "run_score"]
