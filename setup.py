"""Build hook: compile mqttq's pure layers with mypyc, or install them as pure Python.

pyproject.toml holds the metadata; this file only adds the C extensions. The modules of
`mqttq.build.COMPILED_MODULES` are compiled with mypyc (the mypy pinned in pyproject's build
requirements) into extensions that sit next to their `.py` files, which are always installed.
`MQTTQ_COMPILE=0` skips the compile. When it cannot be done (mypyc missing, no C compiler, a
failed compile), the install goes on in pure Python with a one-line warning (pip shows it
with -v; `python mqttq/build.py` tells what was built). A pure build also removes the
extensions an earlier build left in ./build (and in the source tree, for an editable
install), so that none of them is imported in place of its source.
"""

from __future__ import annotations

import os
import runpy
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
_BUILD = runpy.run_path(str(ROOT / "mqttq" / "build.py"))
COMPILED_MODULES: tuple[str, ...] = _BUILD["COMPILED_MODULES"]
SHARED_LIBRARY: str = _BUILD["SHARED_LIBRARY"]
GROUP_NAME = SHARED_LIBRARY.removesuffix("__mypyc")

COMPILE = os.environ.get("MQTTQ_COMPILE", "1") != "0"

_PLACEHOLDER = Extension(SHARED_LIBRARY, sources=[])
"""Stands for the mypyc extensions until build_ext runs: setup.py is also run only to read
metadata, and mypyc's code generation (a mypy run) is worth doing only for a build."""


def _remove_extensions(root: Path) -> None:
    """Delete this interpreter's extensions of the compiled modules under `root`."""
    for module in (*COMPILED_MODULES, SHARED_LIBRARY):
        base = root.joinpath(*module.split("."))
        for suffix in EXTENSION_SUFFIXES:
            base.with_name(base.name + suffix).unlink(missing_ok=True)


class BuildPy(build_py):
    """build_py that, for a pure build, clears the extensions an earlier build left: in the
    build directory, and in the source tree too for an editable install."""

    def run(self) -> None:
        if not self.distribution.ext_modules:
            _remove_extensions(Path(self.build_lib))
            if self.editable_mode:
                _remove_extensions(ROOT)
        super().run()


class MypycBuildExt(build_ext):
    """build_ext that makes the mypyc extensions, and turns a failure into a pure install."""

    def finalize_options(self) -> None:
        failure = None
        if self.distribution.ext_modules == [_PLACEHOLDER]:
            try:
                self.distribution.ext_modules = _mypyc_extensions()
            except (Exception, SystemExit) as exc:  # mypy reports errors by exiting
                failure = exc
                self.distribution.ext_modules = []
        super().finalize_options()
        self.in_tree = self.inplace or self.editable_mode
        if failure is not None:
            self._fall_back(failure)

    def build_extensions(self) -> None:
        try:
            super().build_extensions()
        except Exception as exc:  # a compiler's failure has many types: all mean "pure"
            self._fall_back(exc)
            return
        # A rebuild that finds its C unchanged keeps the old file; the new time says these
        # extensions match the sources as they are now (mqttq.build compares the times).
        for ext in self.extensions:
            os.utime(self.get_ext_fullpath(ext.name))

    def _fall_back(self, exc: BaseException) -> None:
        """Warn, and drop every extension, built now or before, so that only sources run."""
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if len(reason) > 150:
            reason = reason[:147] + "..."  # a compiler command line: pip -v shows it whole
        print(f"WARNING: mqttq: not compiled with mypyc ({reason}): pure Python", file=sys.stderr)
        self.extensions = []
        self.distribution.ext_modules = []
        _remove_extensions(Path(self.build_lib))
        if self.in_tree:
            _remove_extensions(ROOT)


def _mypyc_extensions() -> list[Extension]:
    """mypyc's extensions for COMPILED_MODULES (C code generated now, compiled later)."""
    from mypyc.build import mypycify  # noqa: PLC0415 (a build needs it; it may be missing)

    sources = [str(Path(*module.split(".")).with_suffix(".py")) for module in COMPILED_MODULES]
    return mypycify(sources, group_name=GROUP_NAME)


setup(
    ext_modules=[_PLACEHOLDER] if COMPILE else [],
    cmdclass={"build_py": BuildPy, "build_ext": MypycBuildExt},
)
