"""Create, find and list toolkit environments in the cache.

An environment is complete only when its marker file exists: the marker is written last,
so a build that was interrupted (Ctrl-C, full disk, killed) is recognised and rebuilt,
never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from baseline.errors import BaselineError, ConfigError
from baseline.files.fsutil import exclusive_lock, write_atomic
from baseline.models.intent import DEFAULT_TOOLKIT_VERSION

CACHE_ENV = "BASELINE_TOOLCHAINS"
TORCH_ENV = "BASELINE_TORCH"
PIP_ARGS_ENV = "BASELINE_PIP_ARGS"
INSTALLER_ENV = "BASELINE_INSTALLER"
PYTHON_ENV = "BASELINE_TOOLKIT_PYTHON"
TORCH_INDEX_ENV = "BASELINE_TORCH_INDEX"
DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
"""Where torch comes from when no wheel on disk satisfies it: PyTorch's CPU-only index. PyPI's
torch 2.13.0 for Linux x86_64 is the CUDA build, which pulls 17 nvidia / cuda packages and
triton (several GB); the CPU index's `2.13.0+cpu` has none of them. `BASELINE_TORCH_INDEX` names
another (a mirror), or is empty to take torch from the configured indexes like any package."""
TORCH_STUB = "stub"
"""`--torch stub`: baseline's stand-in (`torch_stub.py`) instead of torch, 0.9 GB less per
environment. rknn.api imports torch at start-up, and loading, fp16 and int8 builds of some
ONNX graphs, the simulator and accuracy analysis run without it (measured on 2.2.0, 2.3.2,
2.5.0) — but build passes call it for others (`torch.arange` for the demo detector, a plain
Conv / Reshape / Transpose / Sigmoid graph), and `gdq` quantization always does. So it is
opt-in, for teams whose models are known to build with it."""
DEFAULT_TORCH = "torch==2.13.0"
"""The CPU build of it is installed: a wheel on disk when pip's find-links folders hold one, else
from `DEFAULT_TORCH_INDEX` (`_install_torch`)."""
STUB_FILE = Path(__file__).with_name("torch_stub.py")
SETUPTOOLS = "setuptools>=77.0.3,<81"
"""The toolkit imports pkg_resources (gone in setuptools 81); torch 2.13 wants >=77.0.3."""
ONNX_CEILING = "<1.19"
"""rknn.api's ONNX loader uses `onnx.mapping`, removed in onnx 1.19 (measured with 2.3.x, whose
wheels declare onnx without an upper bound, so pip would pick an onnx every load fails with)."""
MARKER = "baseline-toolchain.json"
KNOWN_VERSIONS = ("2.2.0", "2.3.0", "2.3.2", "2.5.0")
DEFAULT_VERSION = DEFAULT_TOOLKIT_VERSION
VERSION_PATTERN = re.compile(r"^\d+\.\d+\.\d+$")
REPORTED_PACKAGES = ("rknn-toolkit2", "onnx", "onnxruntime", "numpy", "torch", "protobuf")
SMOKE_TEST = """\
import os, tempfile
from onnx import TensorProto, helper, save
from rknn.api import RKNN
os.chdir(tempfile.mkdtemp())
x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 4]) for n in "xy")
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "smoke", [x], [y])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), "smoke.onnx")
rknn = RKNN()
assert rknn.config(target_platform="rk3588") == 0, "config failed"
assert rknn.load_onnx(model="smoke.onnx") == 0, "load_onnx failed"
assert rknn.build(do_quantization=False) == 0, "build failed"
"""
"""Convert a one-Relu model: `import rknn.api` alone succeeds in an environment whose every
load_onnx fails (2.3.x with onnx 1.19+, measured)."""

Progress = Callable[[str], None]


class ToolchainError(BaselineError):
    """A toolkit environment could not be created or used."""


@dataclass(frozen=True)
class InstallOptions:
    """How to build an environment; the torch requirement, installer and its arguments are overridable."""

    torch: str = field(default_factory=lambda: os.environ.get(TORCH_ENV, DEFAULT_TORCH))
    """A requirement (default `torch==2.13.0`), or `stub` for baseline's stand-in."""
    pip_args: tuple[str, ...] = field(default_factory=lambda: tuple(os.environ.get(PIP_ARGS_ENV, "").split()))
    installer: str = field(default_factory=lambda: os.environ.get(INSTALLER_ENV, "auto"))
    """`uv`, `pip`, or `auto`: uv when it is installed (faster, and it reuses its cache), else pip."""
    torch_index: str = field(
        default_factory=lambda: os.environ.get(TORCH_INDEX_ENV, DEFAULT_TORCH_INDEX).strip()
    )
    """The index torch alone is installed from when no wheel on disk satisfies it; empty: none."""


@dataclass(frozen=True)
class Toolchain:
    """A complete environment: its interpreter and what got installed in it."""

    version: str
    path: Path
    packages: dict[str, str]
    python_version: str

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "baseline" / "toolchains"


def check_version(version: str) -> str:
    if not VERSION_PATTERN.match(version):
        raise ConfigError(
            f"toolkit version {version!r} is not a version number; known: {', '.join(KNOWN_VERSIONS)}"
        )
    return version


def toolkit_python() -> str | None:
    """`BASELINE_TOOLKIT_PYTHON` (e.g. `3.11`): the toolkit's Python when it is not baseline's.

    RKNN-Toolkit2 ships wheels for some Pythons only; uv finds (or is told where to find) a
    3.11 for the toolkit on a 3.12 host. Unset, the toolkit runs on baseline's own Python.
    """
    wanted = os.environ.get(PYTHON_ENV, "").strip()
    if not wanted:
        return None
    if not re.fullmatch(r"3\.\d+", wanted):
        raise ConfigError(f"{PYTHON_ENV}={wanted!r} is not a Python version such as 3.11")
    return wanted


def environment_dir(version: str) -> Path:
    wanted = toolkit_python()
    tag = "py" + (wanted.replace(".", "") if wanted else f"{sys.version_info.major}{sys.version_info.minor}")
    return cache_root() / f"rknn-toolkit2-{check_version(version)}-{tag}"


def find_toolchain(version: str) -> Toolchain | None:
    """The complete environment for `version`, or None if it is missing or half-built."""
    return _read_marker(environment_dir(version))


def list_toolchains() -> list[Toolchain]:
    root = cache_root()
    if not root.is_dir():
        return []
    found = (_read_marker(path) for path in sorted(root.glob("rknn-toolkit2-*")))
    return [toolchain for toolchain in found if toolchain is not None]


MAX_MARKER_BYTES = 1 << 20
"""The marker lists a few dozen packages; anything larger was not written by `_build`."""


def _read_marker(path: Path) -> Toolchain | None:
    """The environment a folder holds, or None when it is half-built: no marker, or one that is
    unreadable or of the wrong shape (a damaged marker must mean "rebuild", never a traceback)."""
    try:
        marker = path / MARKER
        if marker.stat().st_size > MAX_MARKER_BYTES:
            return None
        data = json.loads(marker.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    toolchain = _marker_toolchain(path, data)
    return toolchain if toolchain is not None and toolchain.python.exists() else None


def _marker_toolchain(path: Path, data: object) -> Toolchain | None:
    """The marker's fields, checked for the types `_build` writes."""
    if not isinstance(data, dict):
        return None
    version, python, packages = data.get("version"), data.get("python"), data.get("packages")
    if not (isinstance(version, str) and VERSION_PATTERN.match(version) and isinstance(python, str)):
        return None
    if not isinstance(packages, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in packages.items()
    ):
        return None
    return Toolchain(version=version, path=path, packages=packages, python_version=python)


def half_built() -> list[Path]:
    """Environment folders without a readable marker: interrupted or damaged builds."""
    return [path for path in environments() if _read_marker(path) is None]


def ensure_toolchain(
    version: str, options: InstallOptions | None = None, progress: Progress | None = None
) -> Toolchain:
    """The environment for `version`, built first if it is missing or broken."""
    existing = find_toolchain(version)
    if existing is not None:
        return existing
    return install_toolchain(
        version, options or InstallOptions(), progress or (lambda _: None), rebuild=False
    )


def install_toolchain(
    version: str, options: InstallOptions, progress: Progress, *, rebuild: bool = True
) -> Toolchain:
    """Build the environment from scratch under a file lock, replacing any existing one.

    `rebuild=False` returns a complete environment as it is (one another process may have
    finished while we waited for the lock); `baseline toolchain install --force` rebuilds.
    """
    target = environment_dir(version)
    _check_python_reachable(options)
    with exclusive_lock(target.with_name(f".{target.name}.lock")):
        existing = _read_marker(target)
        if existing is not None and not rebuild:
            return existing
        if target.exists():
            progress(f"removing {'incomplete ' if existing is None else ''}environment {target}")
            shutil.rmtree(target)
        try:
            return _build(version, target, options, progress)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise


def _check_python_reachable(options: InstallOptions) -> None:
    """Another Python for the toolkit is uv's to find; pip's venv can only copy its own."""
    wanted = toolkit_python()
    own = f"{sys.version_info.major}.{sys.version_info.minor}"
    if wanted is not None and wanted != own and find_uv(options.installer) is None:
        raise ConfigError(f"{PYTHON_ENV}={wanted} needs uv to find that Python: pip install uv")


def _build(version: str, target: Path, options: InstallOptions, progress: Progress) -> Toolchain:
    uv = find_uv(options.installer)
    wanted = toolkit_python()
    progress(f"creating environment {target} (installing with {'uv' if uv else 'pip'})")
    if uv is not None:
        _run_tool([uv, "venv", "--quiet", "--python", wanted or sys.executable, str(target)])
    else:
        venv.EnvBuilder(with_pip=True, clear=True).create(target)
    python = target / "bin" / "python"
    install = _installer(python, options, uv)
    progress(f"installing rknn-toolkit2=={version} (no dependencies)")
    install(f"rknn-toolkit2=={version}", "--no-deps")
    requirements = toolkit_requirements(_declared_requirements(python), options.torch)
    torch_source = "stub" if options.torch == TORCH_STUB else _install_torch(install, options, progress)
    progress(f"installing its dependencies: {' '.join(requirements)}")
    install(*requirements)
    if options.torch == TORCH_STUB:
        progress("installing baseline's stand-in for torch (--torch stub)")
        install_torch_stub(python)
    progress("checking that the toolkit converts a one-layer model")
    _run(python, "-c", SMOKE_TEST)
    packages = _installed_versions(python)
    python_version = _python_version(python)
    marker = {
        "version": version,
        "python": python_version,
        "packages": packages,
        "torch_requirement": options.torch,
        "torch_source": torch_source,
        "installer": "uv" if uv is not None else "pip",
    }
    write_atomic(target / MARKER, json.dumps(marker, indent=2, sort_keys=True).encode())
    progress(f"rknn-toolkit2 {version} ready in {target}")
    return Toolchain(version=version, path=target, packages=packages, python_version=python_version)


def _install_torch(install: Callable[..., None], options: InstallOptions, progress: Progress) -> str:
    """Install torch alone (no dependencies) before the rest, as a CPU build; returns its source.

    First from the wheels on disk only (`--no-index` keeps pip's find-links and uv's
    `--find-links`): a machine that keeps a CPU build there never reaches out, so an index it
    cannot reach costs nothing. Otherwise from `options.torch_index` in place of the configured
    index for this one call, so the CUDA build on PyPI is not a candidate; torch's own dependencies
    (sympy, networkx, ...) then come from the configured indexes with the toolkit's, where the
    installed torch already satisfies the requirement. An empty `torch_index` leaves torch to
    that second call, as any other package.
    """
    with contextlib.suppress(ToolchainError):
        install("--no-deps", "--no-index", options.torch)
        progress(f"installed {options.torch} from a wheel on disk (no dependencies yet)")
        return "find-links"
    if not options.torch_index:
        progress(f"{TORCH_INDEX_ENV} is empty: {options.torch} comes from the configured indexes")
        return "indexes"
    progress(f"installing {options.torch} (CPU build, no dependencies yet) from {options.torch_index}")
    try:
        install("--no-deps", "--index-url", options.torch_index, options.torch)
    except ToolchainError as error:
        raise ToolchainError(
            f"{error}; {options.torch} is installed from {options.torch_index} (its CPU-only build); "
            f"set {TORCH_INDEX_ENV} to a mirror of that index, put a torch wheel in a find-links "
            f"folder, or set {TORCH_INDEX_ENV}= (empty) to take torch from the configured indexes "
            "(on PyPI that is the CUDA build: several GB more)"
        ) from error
    return options.torch_index


def toolkit_requirements(declared: list[str], torch: str) -> list[str]:
    """The toolkit's own declared pins, with the three substitutions the recipe needs.

    torch → the configured requirement (the declared <=2.4 has no wheel here), or nothing
    when the stand-in is installed instead;
    opencv-python → opencv-python-headless (no X libraries on CI machines);
    an onnx requirement without an upper bound gets one below 1.19;
    plus a setuptools that still has pkg_resources.
    """
    requirements = []
    for requirement in declared:
        name = re.split(r"[ <>=!~;\[]", requirement, maxsplit=1)[0].lower()
        if name == "torch":
            continue
        if name == "opencv-python":
            requirement = "opencv-python-headless" + requirement[len(name) :]
        if name == "onnx" and not re.search(r"<|==|~=", requirement):
            bounds = requirement[len(name) :].strip()
            requirement = f"onnx{bounds + ',' if bounds else ''}{ONNX_CEILING}"
        requirements.append(requirement.replace(" ", ""))
    return [*requirements, *([] if torch == TORCH_STUB else [torch]), SETUPTOOLS]


def _declared_requirements(python: Path) -> list[str]:
    code = "import importlib.metadata as m, json; print(json.dumps(m.requires('rknn-toolkit2') or []))"
    declared: list[str] = json.loads(_run(python, "-c", code))
    return [requirement for requirement in declared if "extra ==" not in requirement]


def _installed_versions(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json\n"
        f"names = {list(REPORTED_PACKAGES)!r}\n"
        "out = {}\n"
        "for n in names:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    versions: dict[str, str] = json.loads(_run(python, "-c", code))
    return versions


def _python_version(python: Path) -> str:
    return _run(python, "-c", "import platform; print(platform.python_version())").strip()


def find_uv(installer: str) -> str | None:
    """The uv executable to install with, or None for pip."""
    if installer not in {"auto", "uv", "pip"}:
        raise ConfigError(f"{INSTALLER_ENV}={installer!r} is not an installer; use uv, pip or auto")
    if installer == "pip":
        return None
    # `pip install uv` puts it next to this interpreter, which need not be on PATH
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if found is None and installer == "uv":
        raise ConfigError(f"{INSTALLER_ENV}=uv but uv is not installed: pip install uv")
    return found


def _installer(python: Path, options: InstallOptions, uv: str | None) -> Callable[..., None]:
    """`install(*requirements)` into the environment of `python`, with uv or with its own pip."""

    def with_uv(*args: str) -> None:
        command = [uv or "uv", "pip", "install", "--quiet", "--python", str(python), *_pip_find_links()]
        _run_tool([*command, *options.pip_args, *args])

    def with_pip(*args: str) -> None:
        command = ["-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
        _run(python, *command, *options.pip_args, *args)

    return with_uv if uv is not None else with_pip


def _pip_find_links() -> list[str]:
    """pip's `PIP_FIND_LINKS` for uv, which reads only its own settings.

    A machine that keeps wheels on disk for pip (a CPU build of torch, say) should get the
    same wheels when uv installs: without them uv takes the index's CUDA build of the same pin.
    """
    return [
        arg for folder in os.environ.get("PIP_FIND_LINKS", "").split() for arg in ("--find-links", folder)
    ]


def install_torch_stub(python: Path) -> None:
    """Install `torch_stub.py` as the package `torch`, with metadata so it shows as such.

    RECORD lists its files, so `pip uninstall torch` removes it before a real torch goes in.
    """
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    write_torch_stub(purelib)


def write_torch_stub(purelib: Path) -> None:
    version = "0.0.0+baseline.stub"
    package, info = purelib / "torch", purelib / f"torch-{version}.dist-info"
    package.mkdir()
    info.mkdir()
    (package / "__init__.py").write_bytes(STUB_FILE.read_bytes())
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
        "Summary: baseline's stand-in for torch in an RKNN-Toolkit2 environment\n"
    )
    (info / "INSTALLER").write_text("baseline\n")
    files = ["torch/__init__.py", *(f"{info.name}/{name}" for name in ("METADATA", "INSTALLER", "RECORD"))]
    (info / "RECORD").write_text("".join(f"{name},,\n" for name in files))


def _run_tool(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise ToolchainError(f"{' '.join(command[:4])}… failed: {tail}")


def _run(python: Path, *args: str) -> str:
    result = subprocess.run([str(python), *args], capture_output=True, text=True)
    if result.returncode != 0:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        command = " ".join(arg.split("\n", 1)[0] for arg in args[:4])  # a -c program: its first line
        raise ToolchainError(f"{python} {command}… failed: {tail}")
    return result.stdout


def remove_environment(path: Path) -> int:
    """Delete one environment folder under its build lock; returns the bytes freed.

    The lock makes a removal wait for a build of the same environment to finish; a run that
    is using the environment at that moment loses it (its next job reports the missing toolkit).
    """
    with exclusive_lock(path.with_name(f".{path.name}.lock")):
        if not path.exists():
            return 0
        size = folder_size(path)
        shutil.rmtree(path)
        return size


def environments() -> list[Path]:
    """Every environment folder in the cache, complete or not, for any Python."""
    root = cache_root()
    return sorted(path for path in root.glob("rknn-toolkit2-*") if path.is_dir()) if root.is_dir() else []


def environment_version(path: Path) -> str | None:
    """The toolkit version a folder was built for, or None for a half-built one (no marker)."""
    toolchain = _read_marker(path)
    return toolchain.version if toolchain is not None else None


def folder_size(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file that vanished meanwhile frees nothing
                total += (Path(folder) / name).lstat().st_size
    return total


def ensure_toolchains(versions: set[str], progress: Progress | None) -> None:
    """Provision every toolkit the models need before any work starts (cached after the first)."""
    for version in sorted(versions):
        ensure_toolchain(version, progress=progress)
