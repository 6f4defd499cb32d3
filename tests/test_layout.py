"""The layout rules: schemas <- services.core <- the rest, services never meet, no import cycles, the core's parts
import only downward, every rule registered once, every event type folded once, no test tooling in the product."""

from __future__ import annotations

import ast
import functools
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import get_args

import pytest

from schemas import AnyEvent, NodeDied
from services.core.framework import registry
from services.core.state.folds import FOLDS, fold_of

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.xdist_group("tests.test_layout")
"""On one xdist worker: the rules share `parsed`, a parse of every file once per process."""


SERVICES = ("labels", "taints", "vclusters", "scheduler", "decider", "autoscaler", "gateway")

PURE_STDLIB = (
    "__future__",
    "typing",
    "collections",
    "collections.abc",
    "dataclasses",
    "enum",
    "functools",
    "itertools",
    "math",
    "bisect",
    "heapq",
    "hashlib",
    "re",
    "reprlib",  # services.core.errors shows values in messages, cut short
    "difflib",  # an explanation suggests the closest label key to a mistyped one
    "operator",
    "types",
    "abc",
    "copy",  # ClusterView.with_candidates: a shallow copy of one view, for one decision
    "importlib",  # services.core.plugins imports its rule modules as `import` statements would
    "pkgutil",
)

IMPURE = (
    "asyncio",
    "anyio",
    "nats",
    "redis",
    "os",
    "time",
    "random",
    "logging",
    "socket",
    "subprocess",
    "threading",
    "opentelemetry",
    "datetime",
    "uuid",
    "secrets",
    "services.runtime",
    "services.client",
    "services.cli",
    "services.local",
    *(f"services.{svc}" for svc in SERVICES),
)


@dataclass(frozen=True)
class Rule:
    """What the modules under `folder` may import: only `allowed` (when given), never `forbidden`."""

    sentence: str
    folder: str
    allowed: tuple[str, ...] | None
    forbidden: tuple[str, ...]
    required: bool = True


RULES = [
    Rule(
        "schemas imports only the standard library and msgspec",
        "schemas",
        allowed=("schemas", "msgspec", "__future__", "typing", "collections.abc", "enum", "dataclasses", "re"),
        forbidden=("services",),
    ),
    Rule(
        "services.core imports only pure modules",
        "services/core",
        allowed=("schemas", "services.core", "msgspec", "yaml", *PURE_STDLIB),
        forbidden=IMPURE,
    ),
    *(
        Rule(
            f"services.{svc} never imports another service",
            f"services/{svc}",
            allowed=None,
            forbidden=tuple(f"services.{other}" for other in SERVICES if other != svc),
        )
        for svc in SERVICES
    ),
    Rule(
        "services.local (the embedded mesh) imports no service, no client and no CLI: they import it",
        "services/local",
        allowed=None,
        forbidden=("services.cli", "services.client", *(f"services.{svc}" for svc in SERVICES)),
    ),
]


def module_name(path: Path, root: Path) -> str:
    """The dotted module name of a source file below `root` (a package's `__init__.py` names the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once per run (the rules below read every file several times)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_modules(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """Every module a file imports, with its line: relative imports resolved, `from a import b` as `a.b`."""
    tree = parsed(path)
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                base += node.module.split(".") if node.module else []
                module = ".".join(base)
            else:
                module = node.module or ""
            for alias in node.names:
                yield node.lineno, module if alias.name == "*" else f"{module}.{alias.name}"


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    """Whether `module` is one of `prefixes` or inside one of them (`a.b` is inside `a`, `ab` is not)."""
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def python_files(folder: str) -> list[Path]:
    """The Python source files under a folder of the repository, sorted."""
    return sorted((ROOT / folder).rglob("*.py"))


def violations(rule: Rule) -> list[str]:
    """Each import under the rule's folder that breaks it, as `path:line imports module (why)`."""
    found = []
    for path in python_files(rule.folder):
        for line, module in imported_modules(path):
            if within(module, rule.forbidden):
                why = "forbidden"
            elif rule.allowed is not None and not within(module, rule.allowed):
                why = "not on the allow-list"
            else:
                continue
            found.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({why})")
    return found


@pytest.mark.parametrize("rule", RULES, ids=[rule.sentence for rule in RULES])
def test_dependency_rule(rule: Rule) -> None:
    if not python_files(rule.folder):
        if rule.required:
            pytest.fail(f"{rule.folder}/ holds no Python files: the rule would check nothing")
        pytest.skip(f"{rule.folder}/ does not exist yet")
    found = violations(rule)
    assert not found, "\n".join([f"{rule.sentence}, but:", *found])


def test_the_core_allow_list_lets_nothing_impure_in() -> None:
    assert [module for module in PURE_STDLIB if within(module, IMPURE)] == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os.path", {"os.path"}),
        ("from services import runtime", {"services.runtime"}),
        ("from services import core", {"services.core"}),
        ("from . import state", {"services.core.state"}),
        ("from ..runtime.bus import Bus", {"services.runtime.bus.Bus"}),
        ("def f() -> None:\n    import random", {"random"}),
    ],
    ids=[
        "a plain import is seen",
        "a module imported from its package is seen",
        "the core imported from its package counts as services.core, not services",
        "a relative import resolves against the package",
        "a parent-relative import resolves two levels up",
        "an import inside a function is seen",
    ],
)
def test_import_collector(tmp_path: Path, source: str, expected: set[str]) -> None:
    path = tmp_path / "services" / "core" / "scratch.py"
    path.parent.mkdir(parents=True)
    path.write_text(source + "\n", encoding="utf-8")
    assert {module for _, module in imported_modules(path, root=tmp_path)} == expected


@pytest.mark.parametrize(
    "folder",
    ["schemas", "services"],
    ids=lambda folder: f"every module under {folder} starts with a docstring",
)
def test_docstrings(folder: str) -> None:
    missing = [str(path.relative_to(ROOT)) for path in python_files(folder) if ast.get_docstring(parsed(path)) is None]
    assert not missing, "\n".join(["these modules have no docstring:", *missing])


# no import cycles among the project's own modules

PROJECT = ("schemas", "services", "loadtest")


def deferred_import_lines(path: Path) -> set[int]:
    """The lines of the imports inside function bodies: they run when called, not when the module loads."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    tree = parsed(path)
    return {
        inner.lineno
        for node in ast.walk(tree)
        if isinstance(node, functions)
        for inner in ast.walk(node)
        if isinstance(inner, ast.Import | ast.ImportFrom)
    }


def module_level_imports(path: Path, modules: set[str], root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """The project modules a file imports as it loads (`if TYPE_CHECKING:` blocks included), with their lines:
    `from a import b` is the module `a.b` when there is one, else `a`; other libraries are left out."""
    deferred = deferred_import_lines(path)
    for line, name in imported_modules(path, root):
        module = name if name in modules else name.rpartition(".")[0]
        if line not in deferred and module in modules:
            yield line, module


def import_graph(folders: tuple[str, ...] = PROJECT) -> dict[str, dict[str, list[str]]]:
    """Module -> the project modules it imports at module level -> where (`path:line`); no module imports
    itself (a package naming its own attributes)."""
    paths = {module_name(path, ROOT): path for folder in folders for path in python_files(folder)}
    graph: dict[str, dict[str, list[str]]] = {module: {} for module in paths}
    for module, path in paths.items():
        for line, imported in module_level_imports(path, set(paths)):
            where = f"{path.relative_to(ROOT)}:{line}"
            if imported != module and where not in graph[module].setdefault(imported, []):
                graph[module][imported].append(where)
    return graph


def reachable(graph: Mapping[str, Iterable[str]], start: str) -> set[str]:
    """Every node a path of one edge or more leads to from `start`."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import cycles: each set of nodes that all reach one another (sorted), sorted by first member."""
    reach = {node: reachable(graph, node) for node in graph}
    found = {
        tuple(sorted(other for other in reach[node] if node in reach.get(other, ())))
        for node in graph
        if node in reach[node]
    }
    return sorted(list(members) for members in found)


def test_the_projects_modules_import_no_cycle() -> None:
    graph = import_graph()
    report = []
    for members in cycles(graph):
        report.append("cycle: " + ", ".join(members))
        report += [
            f"  {where} imports {imported}"
            for module in members
            for imported, lines in graph[module].items()
            if imported in members
            for where in lines
        ]
    assert not report, "\n".join(["the project's modules import each other in a circle:", *report])


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": ["b"], "b": ["c"], "c": []}, []),
        ({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}, [["a", "b", "c"]]),
        ({"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c", "a"]}, [["a", "b"], ["c", "d"]]),
        ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": ["a"]}, [["a", "b", "c", "d"]]),
    ],
    ids=[
        "a chain has no cycle",
        "a triangle is one cycle; a module importing into it is not in it",
        "two cycles joined one way stay two",
        "two paths back to the start make one cycle of all their members",
    ],
)
def test_the_cycle_finder(graph: dict[str, list[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from pkg import leaf", {"pkg.leaf"}),
        ("from pkg.leaf import Thing", {"pkg.leaf"}),
        ("from pkg import Thing", {"pkg"}),
        ("import json\nfrom msgspec import Struct", set()),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import leaf", {"pkg.leaf"}),
        ("def f() -> None:\n    from pkg import leaf", set()),
    ],
    ids=[
        "a module imported from its package is that module",
        "a name imported from a module is that module",
        "a name imported from a package is the package",
        "other libraries are left out",
        "an import for the type checker counts",
        "an import inside a function does not count",
    ],
)
def test_module_level_imports(tmp_path: Path, source: str, expected: set[str]) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "leaf.py").write_text("", encoding="utf-8")
    path = tmp_path / "scratch.py"
    path.write_text(source + "\n", encoding="utf-8")
    modules = {"pkg", "pkg.leaf", "scratch"}
    assert {module for _, module in module_level_imports(path, modules, root=tmp_path)} == expected


TEST_TOOLING = ("tests", "testcontainers")
"""Test tooling: the tests' own modules (tests/support: the servers in Docker containers) and the library that
starts them."""

PRODUCT_PACKAGES = (
    "labels",
    "taints",
    "vclusters",
    "scheduler",
    "autoscaler",
    "runtime",
    "core",
    "client",
    "cli",
    "local",
    "gateway",
    "decider",
)

TOOLING_RULES = [
    Rule(f"services.{package} never imports test tooling", f"services/{package}", allowed=None, forbidden=TEST_TOOLING)
    for package in PRODUCT_PACKAGES
]


@pytest.mark.parametrize("rule", TOOLING_RULES, ids=[rule.sentence for rule in TOOLING_RULES])
def test_no_service_and_no_command_imports_test_tooling(rule: Rule) -> None:
    test_dependency_rule(rule)


def test_only_the_tests_import_testcontainers() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for folder in ("schemas", "services", "loadtest")
        for path in python_files(folder)
        for line, module in imported_modules(path)
        if within(module, ("testcontainers",))
    ]
    assert not found, "\n".join(["testcontainers is test tooling (tests/support), but:", *found])


def test_the_test_tooling_is_not_shipped() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    shipped = setuptools["packages"]["find"]["include"]
    assert [pattern for pattern in shipped if fnmatch("tests.support", pattern)] == []


def test_testcontainers_is_a_dev_dependency_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = [requirement for requirement in project["dependencies"] if requirement.startswith("testcontainers")]
    dev = [
        requirement
        for requirement in project["optional-dependencies"]["dev"]
        if requirement.startswith("testcontainers")
    ]
    assert (runtime, len(dev)) == ([], 1)


def registration_problems(modules: list[str], rules: tuple[registry.Rule, ...]) -> list[str]:
    """Each rule module that does not register exactly one rule, and each rule from elsewhere (or whose factories
    come from another module), as a sentence."""
    counts = Counter(rule.module for rule in rules)
    found = [f"{module} registers {counts[module]} rules, not one" for module in modules if counts[module] != 1]
    found += [
        f"a rule is registered by {module}, outside the rule modules" for module in counts if module not in modules
    ]
    for rule in rules:
        makers = [maker for maker in (rule.actor, rule.option, rule.bundle) if maker is not None]
        found += [
            f"{rule.module} registers {maker.__qualname__} of {maker.__module__}"
            for maker in makers
            if maker.__module__ != rule.module
        ]
    return found


def rule_modules() -> list[str]:
    """The modules of services/core/plugins, by name."""
    return [module_name(path, ROOT) for path in python_files("services/core/plugins") if path.name != "__init__.py"]


def test_every_rule_module_registers_one_rule() -> None:
    import services.core.plugins  # noqa: F401, PLC0415 - importing the package registers every rule

    assert registration_problems(rule_modules(), registry.registered()) == []


def _noop(_view: object, _work: object) -> tuple[()]:
    return ()


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (
            (registry.Rule("services.core.plugins.a", 0), registry.Rule("services.core.plugins.a", 1)),
            ["services.core.plugins.a registers 2 rules, not one"],
        ),
        ((), ["services.core.plugins.a registers 0 rules, not one"]),
        (
            (registry.Rule("services.core.plugins.a", 0), registry.Rule("services.core.cluster", 1)),
            ["a rule is registered by services.core.cluster, outside the rule modules"],
        ),
        (
            (registry.Rule("services.core.plugins.a", 0, actor=_noop),),
            ["services.core.plugins.a registers _noop of tests.test_layout"],
        ),
    ],
    ids=[
        "a rule registered twice",
        "a rule module registering nothing",
        "a rule registered outside the rule modules",
        "a rule whose factory comes from another module",
    ],
)
def test_registration_check(rules: tuple[registry.Rule, ...], expected: list[str]) -> None:
    assert registration_problems(["services.core.plugins.a"], rules) == expected


# the core's packages import only downward

CORE_RANKS = {
    **dict.fromkeys(("errors", "documents", "labels", "selectors", "amounts", "prng", "ring", "type_tests"), 0),
    "state": 1,
    **dict.fromkeys(("request", "node_events", "liveness", "waiting"), 2),
    "framework": 3,
    "plugins": 4,
    "decide": 5,
    "vclusters": 6,
    **dict.fromkeys(("cluster", "retries", "proposals", "recording", "autoscale", "explain_placed", ""), 7),
}
"""The rank of each part of services.core (a module or a package; "" is the package's own face): a part
imports only parts of its own rank or lower, so the core reads bottom-up, leaf modules first."""


def core_part(module: str) -> str:
    """The part of services.core a module or imported name belongs to: `services.core.state.view` -> `state`;
    a name the package itself exports (`services.core.Cluster`) -> "" (the package)."""
    head = module.removeprefix("services.core").lstrip(".").split(".")[0]
    return head if head in CORE_RANKS else ""


def upward_imports(folder: Path = ROOT / "services" / "core", root: Path = ROOT) -> list[str]:
    """Each import in the core that reaches a part ranked above the importer's, as `path:line imports module`."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        rank = CORE_RANKS[core_part(module_name(path, root))]
        for line, imported in imported_modules(path, root):
            if within(imported, ("services.core",)) and CORE_RANKS[core_part(imported)] > rank:
                found.append(f"{path.relative_to(root)}:{line} imports {imported}")
    return found


def test_every_part_of_the_core_has_a_rank() -> None:
    parts = {path.stem if path.is_file() else path.name for path in (ROOT / "services" / "core").iterdir()}
    unranked = sorted(p for p in parts - {"__init__", "__pycache__"} if p not in CORE_RANKS)
    assert unranked == [], f"give these parts of services.core a rank in CORE_RANKS: {unranked}"


def test_the_cores_packages_import_only_downward() -> None:
    found = upward_imports()
    assert found == [], "\n".join(["services.core imports upward (see CORE_RANKS):", *found])


def test_an_upward_import_in_the_core_is_found(tmp_path: Path) -> None:
    core = tmp_path / "services" / "core"
    (core / "state").mkdir(parents=True)
    (core / "state" / "view.py").write_text("from services.core.decide.actor import place_actor\n", encoding="utf-8")
    (core / "request.py").write_text("from services.core.state import ClusterView\n", encoding="utf-8")
    assert upward_imports(core, tmp_path) == [
        "services/core/state/view.py:1 imports services.core.decide.actor.place_actor"
    ]


# every event type of the log has exactly one fold


def test_every_event_type_of_the_log_has_exactly_one_fold() -> None:
    event_types = get_args(AnyEvent)
    assert len(set(event_types)) == len(event_types)
    missing = sorted(t.__name__ for t in set(event_types) - set(FOLDS))
    unknown = sorted(t.__name__ for t in set(FOLDS) - set(event_types))
    assert not missing, f"event types without a fold: {missing}"
    assert not unknown, f"folds for types that are not events of the log: {unknown}"


def test_a_second_fold_for_an_event_type_is_refused_and_the_first_stays() -> None:
    first = FOLDS[NodeDied]

    def another(view: object, event: object) -> None:
        del view, event

    with pytest.raises(TypeError, match="NodeDied has two folds"):
        fold_of(NodeDied)(another)
    assert FOLDS[NodeDied] is first
