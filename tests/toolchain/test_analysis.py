from __future__ import annotations

import math

from baseline.toolchain.analysis import first_divergent_layer, parse_error_analysis

# The shape of a real error_analysis.txt (2.5.0), including a fused layer without values,
# an overflow (q_nan / q_inf) and a euclidean distance wide enough to run into the next column.
TABLE = """\
# simulator_error: calculate the output error of each layer of the simulator (compared to the 'golden' value).
#              entire: output error of each layer between 'golden' and 'simulator', ...
#              single: single-layer output error between 'golden' and 'simulator', ...

layer_name                   simulator_error
                         entire              single
                      cos      euc        cos      euc
------------------------------------------------------------
[Input] x           1.00000 | 0.00000   1.00000 | 0.00000
[Conv] c1
[Relu] r1           0.99992 | 5.46549   0.99992 | 5.46549
[Conv] big          0.99990 | 330065.250000.99995 | 4.10202
[Mul] m1             q_nan  |  q_nan     q_inf  |  q_inf
"""


def test_rows_are_parsed_by_pattern_not_by_column() -> None:
    layers = parse_error_analysis(TABLE)
    assert [layer.name for layer in layers] == ["x", "r1", "big", "m1"], "fused c1 has no values"
    assert layers[1].entire_cosine == 0.99992 and layers[1].single_euclidean == 5.46549
    assert layers[2].entire_euclidean == 330065.25 and layers[2].single_cosine == 0.99995
    assert math.isnan(layers[3].entire_cosine) and math.isinf(layers[3].single_cosine)


def test_first_divergent_layer() -> None:
    layers = parse_error_analysis(TABLE)
    big, m1 = first_divergent_layer(layers, 0.99991), first_divergent_layer(layers, 0.99)
    assert big is not None and big.name == "big"
    assert m1 is not None and m1.name == "m1"
    assert first_divergent_layer(layers[:2], 0.99) is None


# 2.2.0 / 2.3.0 / 2.3.2 (measured): euclidean distances cut to six characters, zero as `0.0`.
TABLE_2_3 = """\
[Input] image                   1.00000 | 0.0       1.00000 | 0.0
[exDataConvert] image_int8      1.00000 | 0.0147    1.00000 | 0.0147
[Conv] scaled
[Relu] scaled.relu              0.99996 | 34411.    0.99996 | 34411.
[Mul] activations_int8          0.00000 | 999999    0.00000 | 999999
"""


def test_rows_of_older_toolkits_with_short_numbers() -> None:
    layers = parse_error_analysis(TABLE_2_3)
    assert [layer.name for layer in layers] == ["image", "image_int8", "scaled.relu", "activations_int8"]
    assert (layers[0].single_cosine, layers[0].single_euclidean) == (1.0, 0.0)
    assert (layers[1].entire_euclidean, layers[1].single_cosine) == (0.0147, 1.0)
    assert layers[2].single_euclidean == 34411.0 and layers[3].entire_cosine == 0.0
