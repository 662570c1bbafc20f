"""Install the course into the Python that runs this, around what is already there.

The notebooks' first cell (tools/install_cell.py) fetches the course's version into a folder
and runs this from there, with the kernel's Python:

    python tools/install_course.py [--loaded MODULE,MODULE...] [--dry-run]

Each step is printed before it runs:

1. torch: a torch already installed is kept, whatever its version (a hosted runtime's torch
   matches its driver, torchvision and torchaudio); one line says when it is outside the range
   the course is tested with (pyproject.toml). Where there is none, constraints.txt's version
   is installed: PyTorch's CPU build on Linux without an NVIDIA driver (PyPI's Linux torch
   bundles CUDA, several GB), else pip's choice.
2. The course itself, ``pip install --no-deps`` of this folder: a real install (not editable),
   with its recordings, importable at once by the running kernel.
3. Its other dependencies (pyproject.toml's, with the ``notebooks`` extra), only those missing, at constraints.txt's
   versions. Every distribution already installed is pinned at its installed version, so pip
   adds and never replaces or downgrades (d2l's pinned numpy broke its Colab notebooks: d2l-en
   #2067, #2608). Where the course's pins cannot be met beside what is there, it tries again
   with only the installed versions pinned.
4. One line asking for a kernel restart when something it installed or changed was already
   imported by the kernel (``--loaded``: the kernel's top-level modules).
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = "constraints.txt"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROJECT = "moving-data-course"  # pyproject.toml's name: never pinned at an older installed version
KEPT = ("torch", "numpy", "matplotlib")  # named in the messages: what a hosted runtime brings


def canonical(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503): lower case, runs of -_. as -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a requirement line names: ``"torch>=2.11,<2.15"`` -> ``"torch"``."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"{requirement!r} is not a requirement; pass one like 'torch>=2.11'")
    return canonical(match.group(1))


def read_pins(text: str) -> dict[str, str]:
    """``name==version`` lines of a constraints file, by canonical name (comments skipped)."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, pinned = line.partition("==")
        if not sep or not pinned.strip():
            raise ValueError(f"constraints line {line!r} is not name==version")
        pins[canonical(name)] = pinned.strip()
    return pins


def course_requirements(root: Path = ROOT) -> list[str]:
    """What a notebook needs, from pyproject.toml (the only place the ranges are written): its
    dependencies, the ``notebooks`` extra and the ``torch`` extra's range."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *extras["notebooks"], *extras["torch"]]


def installed_versions() -> dict[str, str]:
    """Every distribution installed for this Python, by canonical name."""
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def keeping(pins: dict[str, str], present: dict[str, str], course_pins: bool = True) -> str:
    """A constraints file: every present distribution at its installed version, and (with
    ``course_pins``) constraints.txt's version for the others."""
    chosen = {**pins, **present} if course_pins else dict(present)
    return "".join(f"{name}=={version}\n" for name, version in sorted(chosen.items()))


def outside_range(requirement: str, installed: str) -> bool:
    """Whether version ``installed`` falls outside ``requirement``'s range (local labels such
    as ``+cu130`` ignored)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip always has it
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    return not Requirement(requirement).specifier.contains(installed, prereleases=True)


@dataclass
class Step:
    """One thing the installer does: what it prints, and the pip arguments (None: print only)."""

    says: str
    pip: list[str] | None = None
    fallback: list[str] | None = None  # tried when ``pip`` fails, with its own line


def plan(root: Path, present: dict[str, str], linux_without_driver: bool) -> list[Step]:
    """The steps that install the course in ``root`` beside the ``present`` distributions."""
    pins = read_pins((root / CONSTRAINTS).read_text())
    requirements = {requirement_name(r): r for r in course_requirements(root)}
    steps = []
    torch_req = requirements["torch"]
    if "torch" in present:
        note = (
            f"; the course is tested with {torch_req}: if a notebook fails, install one of those "
            "and restart the kernel"
            if outside_range(torch_req, present["torch"])
            else ""
        )
        steps.append(Step(f"torch {present['torch']} is installed: kept{note}"))
    else:
        torch = [f"torch=={pins['torch']}"] if "torch" in pins else [torch_req]
        if linux_without_driver:
            steps.append(
                Step(
                    f"no torch here: installing {torch[0]}, PyTorch's CPU build (no NVIDIA driver)",
                    ["--index-url", CPU_INDEX, *torch],
                    fallback=torch,
                )
            )
        else:
            steps.append(Step(f"no torch here: installing {torch[0]}", torch))
    steps.append(
        Step(
            f"installing the course from {root} (no dependencies: those come next)",
            ["--no-deps", "--force-reinstall", str(root)],
        )
    )
    missing = sorted(name for name in requirements if name not in present and name != "torch")
    kept = ", ".join(f"{n} {present[n]}" for n in KEPT if n in present)
    if missing:
        steps.append(
            Step(
                f"installing what it needs and lacks: {', '.join(missing)}"
                + (f" (keeping {kept} and everything else installed)" if kept else ""),
                [requirements[n] for n in missing],
            )
        )
    else:
        steps.append(
            Step("its dependencies are all installed" + (f" ({kept}): kept" if kept else ""))
        )
    return steps


def needs_restart(changed: list[str], loaded: set[str]) -> list[str]:
    """The modules among ``loaded`` (the kernel's top-level modules) that come from the
    distributions in ``changed``: the kernel holds an older copy of them."""
    owners = metadata.packages_distributions()
    changed_names = {canonical(n) for n in changed}
    return sorted(
        m for m in loaded if any(canonical(d) in changed_names for d in owners.get(m, []))
    )


def _pip(args: list[str], constraints: Path) -> int:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--progress-bar",
        "off",
        "--constraint",
        str(constraints),
        *args,
    ]
    return subprocess.run(command, check=False).returncode


def install(root: Path, loaded: set[str], dry_run: bool = False) -> int:
    """Run ``plan``'s steps with pip, printing each; returns 0, or 1 with the reason printed."""
    present = {name: v for name, v in installed_versions().items() if name != PROJECT}
    linux_without_driver = sys.platform == "linux" and shutil.which("nvidia-smi") is None
    steps = plan(root, present, linux_without_driver)
    pins = read_pins((root / CONSTRAINTS).read_text())
    with tempfile.TemporaryDirectory(prefix="course-install-") as tmp:
        constraints = Path(tmp) / "constraints.txt"
        loose = Path(tmp) / "installed-only.txt"
        constraints.write_text(keeping(pins, present))
        loose.write_text(keeping(pins, present, course_pins=False))
        for step in steps:
            print(step.says, flush=True)
            if step.pip is None or dry_run:
                continue
            if _pip(step.pip, constraints) == 0:
                continue
            retry = step.fallback or step.pip
            print(
                "  that did not work; trying again "
                + (
                    "from pip's own indexes"
                    if step.fallback
                    else "with only the installed versions pinned"
                ),
                flush=True,
            )
            if _pip(retry, constraints if step.fallback else loose) != 0:
                print(
                    f"could not install the course without replacing what is installed (pip's message is "
                    f"above); install by hand: {sys.executable} -m pip install {' '.join(retry)}",
                    flush=True,
                )
                return 1
    if dry_run:
        return 0
    changed = [
        name for name, version in installed_versions().items() if present.get(name) != version
    ]
    if stale := needs_restart(changed, loaded):
        print(
            f"Restart the kernel (Colab: Runtime > Restart session), then run the notebook from the top: "
            f"{', '.join(stale)} changed after this kernel imported it.",
            flush=True,
        )
    else:
        print(
            f"the course is installed ({len(changed)} distributions added or changed); no restart needed",
            flush=True,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Install the course from the folder this script is in (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--loaded", default="", help="the kernel's imported top-level modules, comma-separated"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps, install nothing")
    args = parser.parse_args(argv)
    return install(ROOT, {m for m in args.loaded.split(",") if m}, dry_run=args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
