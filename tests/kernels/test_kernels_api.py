"""The public names of fidia_jax.kernels exist and are listed in __all__."""

import fidia_jax.kernels as K


def test_public_api():
    for mod, names in [
        (K, ["fake_quant_nvfp4", "round_to_e2m1", "round_to_e4m3", "santa", "attn_qat"]),
        (
            K.santa,
            [
                "santa_decode",
                "flash_decode",
                "santa_decode_pallas",
                "flash_decode_pallas",
                "santa_decode_reference",
                "make_uniforms",
                "make_santa_attention",
                "BlockSizes",
            ],
        ),
        (
            K.attn_qat,
            [
                "attn_qat",
                "attn_qat_pallas",
                "attn_qat_reference",
                "hp_path_reference",
                "BlockSizes",
                "VARIANTS",
            ],
        ),
    ]:
        for n in names:
            assert n in mod.__all__, n
            assert hasattr(mod, n), n
        for n in mod.__all__:
            assert hasattr(mod, n), n
