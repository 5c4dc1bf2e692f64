"""FlexAttention study: masks, score mods, densities, the float64 reference and the sweep.

Modules: ``masks`` (mask_mod generators), ``score_mods`` (score_mod
generators), ``density`` (element and 128x128-block densities, exact
formulas), ``reference`` (float64 attention with the same mods), ``ops``
(compiled ``flex_attention`` / ``create_block_mask`` and input checks),
``study`` (the sweep, harness contract), ``tidy`` (the rows' tidy table and
derived metrics), ``numbers`` (the quoted numbers and the claims' verdicts)
and ``report`` (figures and tables, and what the workflow reads of the
other two). Importing this package imports no torch.
"""
