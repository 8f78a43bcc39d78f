"""The set-up promises of the README: one pinned environment, two commands, CI = `make test`."""

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for line in requirements:
        match = PIN.match(line.strip())
        assert match, f"{line!r} is not pinned with '==' (pin what the course is tested with)"
        pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return _pins(project["dependencies"] + project["optional-dependencies"]["dev"])


def _conda_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_lists) == 1, "environment.yml needs exactly one pip: section"
    return _pins(pip_lists[0])


def test_environment_yml_matches_pyproject():
    assert _conda_pins() == _pyproject_pins()


def test_required_pins_present():
    pins = _pyproject_pins()
    assert pins["torch"] == "2.13.0"
    assert pins["nbgrader"].startswith("0.9.")
    for name in ("numpy", "matplotlib", "jupyterlab", "pytest", "sacrebleu", "tokenizers",
                 "tqdm", "nbclient", "nbformat", "ruff"):
        assert name in pins, f"{name} must be pinned in pyproject.toml"


def test_pins_are_what_is_installed():
    from importlib.metadata import version

    for name, pinned in _pyproject_pins().items():
        # A local build label (torch's "+cpu" or "+cu128") is the same release.
        installed = version(name).split("+")[0]
        assert installed == pinned, f"{name}: installed {version(name)}, pinned {pinned}"


def test_ci_runs_exactly_make_test():
    commands = [
        line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[-1] == "make test"
    assert not any("pytest" in c or "ruff" in c for c in commands), "CI must not bypass make test"


def test_readme_quick_start_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1]
    commands = re.findall(r"^make \w+", quick, flags=re.M)
    assert commands[:2] == ["make lab", "make test"]


def test_make_targets_create_the_venv_and_skip_reinstall():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab: \$\(STAMP\)", makefile, flags=re.M)
    assert re.search(r"^test: ", makefile, flags=re.M)
    # The stamp only depends on pyproject.toml, so an unchanged project skips the install.
    assert re.search(r"^\$\(STAMP\): pyproject.toml$", makefile, flags=re.M)


MAX_FUNCTION_LINES = 60
LONG_ON_PURPOSE = "is long on purpose"


def test_no_function_of_the_course_code_is_over_60_lines():
    """A maintainer reads the grader, the reference and the fixtures top-down: a function over
    60 lines (docstring included) is split, or its docstring says why it "is long on purpose"."""
    long = []
    for package in ("autograder", "transformer_ref", "tests/fixtures"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and LONG_ON_PURPOSE not in (
                        ast.get_docstring(node) or ""):
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


# ---------------------------------------------------------------------------------------------
# The fixtures (the sample class, the mutants, the calibration samples) stay out of the product.

FIXTURES = ROOT / "tests" / "fixtures"
PRODUCT = ("autograder", "transformer_ref")


def _fixture_files() -> list[str]:
    """Each fixture file relative to tests/fixtures (``mutants/ch02.py``), the package's own
    ``__init__.py`` aside."""
    return sorted(path.relative_to(FIXTURES).as_posix() for path in FIXTURES.rglob("*.py")
                  if "__pycache__" not in path.parts and path != FIXTURES / "__init__.py")


def test_the_built_package_holds_no_fixture(tmp_path):
    """What ``pip install .`` installs (and ``pip show -f`` lists) is the wheel: built from the
    files git knows, it holds the product and none of tests/fixtures."""
    source = tmp_path / "source"
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "pyproject.toml", "README.md", *PRODUCT, "tests"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    for name in listed:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(tmp_path / "wheel"), str(source)], check=True,
                   capture_output=True)
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("autograder/tutorial_style/") for n in names)
    assert not [n for n in names if n.split("/")[0] not in PRODUCT and ".dist-info/" not in n]
    fixtures = _fixture_files()
    assert "sample_class.py" in fixtures and "mutants/ch02.py" in fixtures
    shipped = [n for n in names for f in fixtures if n.endswith("/" + f)]
    assert not shipped, f"fixtures in the wheel: {shipped}"


def _strings(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module, its docstrings aside."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [node for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_product_neither_imports_nor_reads_a_fixture():
    """No module of the product imports ``tests`` (or names it for importlib) or builds a path
    under tests/: the installed course has no tests folder to read."""
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            where = path.relative_to(ROOT)
            for node in ast.walk(tree):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                           [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{where}:{node.lineno} imports {m}" for m in modules
                          if m.split(".")[0] == "tests"]
            found += [f"{where}:{node.lineno} names {node.value!r}" for node in _strings(tree)
                      if re.match(r"tests($|[/.])", node.value)]
    assert not found, found
