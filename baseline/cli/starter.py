"""`baseline init`: from "my model" to a reviewed intent and a first lock."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from baseline.cli.options import JobsOption
from baseline.cli.output import output
from baseline.errors import InputError
from baseline.files.textsafe import markup_safe as escape


def init(
    onnx: Annotated[Path, typer.Argument(help="The ONNX model, inside the project.", dir_okay=False)],
    name: Annotated[str | None, typer.Option(help="The model's name (default: from the file name).")] = None,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            "-t",
            help="A platform (fp16 build), or PLATFORM-w8a8 / -w8a16 / -w16a16i_dfp / -w4a16 for a "
            "quantized one; repeat for several (default: rk3588).",
        ),
    ] = None,
    images: Annotated[
        str | None,
        typer.Option(help="Photos for an image input: a folder, glob or dataset.txt inside the project."),
    ] = None,
    normalise: Annotated[
        str | None,
        typer.Option(
            help="With --images, how the model expects pixels: 0-1, imagenet, pm1, 0-255 or caffe (BGR "
            "less a mean; default: measured from the model's first BatchNormalization where it has one, "
            "else 0-1)."
        ),
    ] = None,
    shape: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=D0,D1,... sizes of an input whose dynamic dims init cannot read from the graph."
        ),
    ] = None,
    config: Annotated[
        Path, typer.Option("--config", help="The intent file to write or add to.", dir_okay=False)
    ] = Path("baseline.toml"),
    lock_now: Annotated[bool, typer.Option("--lock/--no-lock", help="Lock right after writing.")] = True,
    jobs: JobsOption = 1,
) -> None:
    """Write a commented intent for a model from its graph, then lock it."""
    from baseline.project.paths import find_project_root
    from baseline.project.scaffold import NORMALISATIONS, InitRequest, model_name, parse_shape, write_intent

    if normalise is not None and normalise not in NORMALISATIONS:
        raise InputError(f"--normalise {normalise!r}: one of {', '.join(NORMALISATIONS)}")
    root = find_project_root(config.resolve().parent)
    request = InitRequest(
        onnx_path=_inside(onnx, root),
        root=root,
        name=name or model_name(onnx),
        targets=target or ["rk3588"],
        images=_relative_images(images, root),
        normalisation=normalise,
        shapes=dict(parse_shape(text) for text in shape or []),
    )
    written = write_intent(request, config)
    output.line(f"{config}: model {request.name!r} written from {escape(str(onnx))}")
    for line in written.confirm:
        output.line(f"  confirm: {escape(line)}")
    if lock_now:
        from baseline.cli.locks import lock

        lock(lock=config.with_suffix(".lock"), config=config, root=root, jobs=jobs)
    _next_steps(config, lock_now)


def _inside(path: Path, root: Path) -> Path:
    if not path.is_file():
        raise InputError(f"{path}: ONNX file not found")
    if not path.resolve().is_relative_to(root):
        raise InputError(f"{path}: outside the project ({root}); copy the model into it and run init there")
    return path.resolve()


def _relative_images(images: str | None, root: Path) -> str | None:
    """The photos as a project-relative path (a glob stays a glob)."""
    if images is None:
        return None
    candidate = Path(images)
    absolute = candidate if candidate.is_absolute() else Path.cwd() / candidate
    try:
        return absolute.resolve().relative_to(root).as_posix() if "*" not in images else images
    except ValueError:
        raise InputError(
            f"--images {images}: outside the project ({root}); copy the photos into it"
        ) from None


def _next_steps(config: Path, locked: bool) -> None:
    lock = config.with_suffix(".lock")
    if not locked:
        output.line(f"next: review {config}, then `baseline lock --lock {lock}`")
        return
    output.line(
        f"commit {config}, {lock} and the tensors folder beside it (fixtures, references, .rknn); "
        f"in CI run `baseline verify --lock {lock}` (exit 0 green, 1 a gate failed, 2 bad input)"
    )
