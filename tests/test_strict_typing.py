"""The engine passes ``mypy --strict``, and what ``make test``'s ``mypy`` checks cannot be
weakened without a test failing (issue 27).

- pyproject.toml's override for the engine lists exactly the engine's modules (the modules
  of tests/test_layering.py's :data:`ENGINE_LAYERS`, the one list of them), and no other
  override touches them;
- it sets exactly the flags ``--strict`` implies that mypy takes per module, each as
  ``--strict`` sets it; the two that mypy takes only for the whole run are set in
  ``[tool.mypy]`` itself; and these are what the installed mypy's ``--strict`` means;
- ``mypy --strict`` run on the engine's files finds no error in the modules of
  :data:`STRICT_CLEAN` (and does find the one in a probe file written to fail).

Not named ``test_engine_*``: ``make test-min`` runs those with the lowest mypy that
pyproject.toml allows, whose ``--strict`` is another set of flags.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from test_layering import ENGINE_LAYERS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: mypy's own TOML reader there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "autodiff_lab"
ENGINE_MODULES = [f"autodiff_lab.{m}" for layer in ENGINE_LAYERS for m in layer]

# The engine modules held to no error under --strict: all of them.
STRICT_CLEAN = ENGINE_MODULES

# What --strict turns on, by the names of the configuration file (mypy 1.20: `mypy --help`
# lists the flags; --no-implicit-reexport is `implicit_reexport = false` there).
STRICT_PER_MODULE = {
    "check_untyped_defs": True,
    "disallow_any_generics": True,
    "disallow_incomplete_defs": True,
    "disallow_subclassing_any": True,
    "disallow_untyped_calls": True,
    "disallow_untyped_decorators": True,
    "disallow_untyped_defs": True,
    "extra_checks": True,
    "implicit_reexport": False,
    "strict_equality": True,
    "warn_return_any": True,
    "warn_unused_ignores": True,
}
STRICT_GLOBAL = {"warn_redundant_casts": True, "strict_bytes": True}


def _config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["mypy"]


def _matches(pattern: str, module: str) -> bool:
    """Whether a module pattern of mypy's configuration covers ``module`` (``a.b``, ``a.*``
    for ``a`` and everything under it, ``a.*.c``)."""
    regex = re.escape(pattern).replace(r"\.\*", r"(\..*)?")
    return re.fullmatch(regex, module) is not None


def _engine_override() -> dict:
    overrides = [o for o in _config().get("overrides", []) if "autodiff_lab.kinds" in o["module"]]
    assert len(overrides) == 1, f"one override for the engine, found {len(overrides)}"
    return overrides[0]


def test_module_patterns_match_as_mypy_matches_them():
    assert _matches("autodiff_lab.primitives.*", "autodiff_lab.primitives")
    assert _matches("autodiff_lab.primitives.*", "autodiff_lab.primitives.entries")
    assert not _matches("autodiff_lab.primitives.*", "autodiff_lab.primitivesx")
    assert _matches("autodiff_lab.*", "autodiff_lab.kinds")
    assert not _matches("autodiff_lab.kinds", "autodiff_lab.kinds2")


def test_the_override_lists_exactly_the_engine_modules():
    patterns = _engine_override()["module"]
    named = [p for p in patterns if not p.endswith(".*")]
    assert sorted(named) == sorted(ENGINE_MODULES), (
        f"not in the override: {sorted(set(ENGINE_MODULES) - set(named))}; "
        f"not engine modules: {sorted(set(named) - set(ENGINE_MODULES))}"
    )
    for p in patterns:  # a wildcard only for the submodules of an engine module
        assert not p.endswith(".*") or p[: -len(".*")] in ENGINE_MODULES, p


def test_no_other_override_touches_the_engine():
    engine = _engine_override()
    for override in _config().get("overrides", []):
        if override == engine:
            continue
        patterns = override["module"]
        patterns = [patterns] if isinstance(patterns, str) else patterns
        touched = [m for m in ENGINE_MODULES for p in patterns if _matches(p, m)]
        assert not touched, f"another override covers engine modules {touched}: {override}"


def test_the_override_sets_exactly_the_strict_flags():
    flags = {k: v for k, v in _engine_override().items() if k != "module"}
    assert flags == STRICT_PER_MODULE
    config = _config()
    assert {k: config.get(k) for k in STRICT_GLOBAL} == STRICT_GLOBAL
    for weakening in ("ignore_errors", "disable_error_code", "allow_untyped_globals"):
        assert weakening not in config, f"[tool.mypy] sets {weakening}"


def test_the_strict_flags_are_what_the_installed_mypys_strict_means():
    from mypy.main import define_options
    from mypy.options import PER_MODULE_OPTIONS

    _, _, assignments = define_options()  # (destination, value) for each flag of --strict
    strict = dict(assignments)
    assert {k: v for k, v in strict.items() if k in PER_MODULE_OPTIONS} == STRICT_PER_MODULE
    assert {k: v for k, v in strict.items() if k not in PER_MODULE_OPTIONS} == STRICT_GLOBAL


def _engine_files() -> list[Path]:
    files = []
    for module in ENGINE_MODULES:
        path = PACKAGE.joinpath(*module.split(".")[1:])
        files.append(path if path.is_dir() else path.with_suffix(".py"))
    return files


def test_mypy_strict_finds_no_error_in_the_strict_modules(tmp_path):
    probe = tmp_path / "strict_probe.py"
    probe.write_text("def untyped(x):\n    return x\n", encoding="utf-8")
    files = [*_engine_files(), probe]
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent"]
        + ["--cache-dir", str(tmp_path / "cache"), *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode in (0, 1), run.stdout + run.stderr  # 2: mypy itself failed
    errors: dict[str, list[str]] = {}
    for line in run.stdout.splitlines():
        found = re.match(r"(.+?\.py):\d+: error: ", line)
        if found:
            errors.setdefault(Path(found[1]).resolve().as_posix(), []).append(line)
    assert errors.get(probe.resolve().as_posix()), "the probe's missing annotation was not found"
    for module in STRICT_CLEAN:
        path = PACKAGE.joinpath(*module.split(".")[1:])
        mine = [
            line
            for name, lines in errors.items()
            if name == path.with_suffix(".py").resolve().as_posix()
            or name.startswith(path.resolve().as_posix() + "/")
            for line in lines
        ]
        assert not mine, f"mypy --strict: {len(mine)} error(s) in {module}:\n" + "\n".join(mine)
