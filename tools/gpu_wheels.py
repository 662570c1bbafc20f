"""Download, here, the wheels the lent GPU machines lack, into ``.whl/`` (ignored by git).

The GPU machines have PyTorch 2.11 on Python 3.12 (x86-64) and many packages, but no Jupyter,
nbmake or tensordict, and no network. This resolves what those need for that Python and
platform, drops what the machines' image already has, and downloads the rest:

    python tools/gpu_wheels.py            # run by `make gpu-wheels`

On the GPU machine, `make gpu-all` installs them with pip --no-index into /tmp/site.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WHEELS = Path(".whl")
# What the notebooks need on top of the image, resolved with their dependencies.
TOP_LEVEL = ["nbmake>=1.5", "ipykernel>=6"]
# Pure-Python packages added without resolving their dependencies (tensordict's would
# otherwise pull a whole CUDA build of torch); their other needs are in the image.
NO_DEPS = [
    "tensordict==0.15.3",
    "pyvers==0.2.3",
    # NVML's bindings for the 580 drivers there (05 reads the NVLink topology; datamove
    # doctor; named nvidia-*, so resolve() would drop it) and tqdm (datamove's progress bar).
    "nvidia-ml-py==13.580.126",
    "tqdm==4.67.1",
]
TARGET = [
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux_2_27_x86_64",
    "--platform",
    "manylinux_2_17_x86_64",
    "--platform",
    "manylinux2014_x86_64",
    "--platform",
    "manylinux1_x86_64",
]
# The GPU machines' image ('cuda'), as the device tool's KINDS.md lists it (read 2026-11-17).
IN_IMAGE = set(
    """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn
einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec
gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio
iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml
markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda
numpy numpyro onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum
opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip
pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo
pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov
pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex
requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn
sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions
typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split()
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def resolve() -> list[str]:
    """``name==version`` for every package the top-level list needs that the image lacks."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip(
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            *TARGET,
            "--target",
            str(Path(tmp) / "t"),
            *TOP_LEVEL,
        )
        installs = json.loads(report.read_text())["install"]
    wanted = []
    for item in installs:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if canonical(name) not in IN_IMAGE and not canonical(name).startswith("nvidia-"):
            wanted.append(f"{name}=={version}")
    return wanted + NO_DEPS


def main() -> int:
    shutil.rmtree(WHEELS, ignore_errors=True)
    WHEELS.mkdir()
    wanted = resolve()
    print("downloading:", " ".join(wanted))
    pip("download", "--no-deps", "--quiet", *TARGET, "-d", str(WHEELS), *wanted)
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=12"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    (WHEELS / "COMMIT").write_text((commit or "unknown") + "\n")
    size = sum(p.stat().st_size for p in WHEELS.glob("*.whl"))
    print(
        f"{len(list(WHEELS.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB in {WHEELS}/ (carry it to the GPU machine)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
