"""Attn-QAT: FP4 attention training with a matched backward."""
