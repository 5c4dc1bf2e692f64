"""FlexAttention study: masks, score mods, densities, the float64 reference and the sweep.

Modules: ``masks`` (mask_mod generators), ``score_mods`` (score_mod
generators), ``density`` (element and 128x128-block densities, exact
formulas), ``reference`` (float64 attention with the same mods), ``ops``
(compiled ``flex_attention`` / ``create_block_mask`` and input checks),
``study`` (the sweep, harness contract) and ``report`` (figures, tables,
macros). Importing this package imports no torch.
"""
