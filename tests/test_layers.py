"""The import graph: no cycles, and imports only go down the layers.

Every import counts — at module level, inside functions and under ``TYPE_CHECKING`` — because a
lazy or type-only import is still a dependency a reader must follow. The one exception: the
command line (``cli/``) may import anything lazily, inside a function, so ``dsh --help`` stays
fast. The layers are those of ``docs/architecture.en.md`` ("Layout"); a new package has to be
placed in them here before its imports are accepted.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Top to bottom; one set per layer. Packages of one layer may import each other (no cycle).
REVIEWER_LAYERS: list[set[str]] = [
    {"plugin"},                                   # the entry: hook implementations
    {"cli", "web", "ci", "eval", "testing"},     # front ends over the wired app
    {"app"},                                      # composition root: wires what is below
    {"sources"},                                  # where work comes from: poll, webhook
    {"work"},                                     # durable per-PR work
    {"reviewers"},                                # who reviews: single, team
    {"turn"},                                     # what a review turn is made of
    {"pr_output"},                                # what people see on a PR
    {"github"},                                   # contact with GitHub
    {"config"},
    {"core", ""},                                 # "" is the package's own __init__
]
HARNESS_LAYERS: list[set[str]] = [
    {"", "cli", "init_config", "testing"},       # "" is dsh_harness/__init__: the public API
    {"default_plugins"},                          # plugins like any other, built in
    {"harness"},
    {"plugins"},
    {"hookspecs"},
    {"web"},
    {"agents"},
    {"llm"},
    {"sessions"},
    {"storage"},
    {"home_lock"},
    {"config"},
    {"provider_presets"},
    {"redact"},
    {"validation"},
    {"errors"},
]
# Plugin loading, not a dependency: the plugin host lists the built-in plugins by module name.
LOADS = {("dsh_harness.plugins", "dsh_harness.default_plugins")}
LAYERS = {"dsh_github_reviewer": REVIEWER_LAYERS, "dsh_harness": HARNESS_LAYERS}


def modules() -> dict[str, Path]:
    out = {}
    for top in LAYERS:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = modules()


def _resolve(name: str) -> str | None:
    """The module of ours an imported name lives in (a name may be a module's attribute)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _lazy_nodes(tree: ast.Module) -> set[int]:
    """ids of import nodes inside a function body (lazy imports)."""
    lazy: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            lazy.update(id(n) for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom))
    return lazy


def imports(module: str) -> Iterator[tuple[str, int, bool]]:
    """(imported module of ours, line, lazy) for every import statement of ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    lazy = _lazy_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{a.name}" for a in node.names]
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                yield target, node.lineno, id(node) in lazy


def layer_of(module: str) -> tuple[str, int, str]:
    """(top package, layer index, role package) of a module of ours."""
    top, _, rest = module.partition(".")
    role = rest.partition(".")[0]
    for i, layer in enumerate(LAYERS[top]):
        if role in layer:
            return top, i, role
    raise AssertionError(f"{module}: package {role!r} has no layer in tests/test_layers.py "
                         "(place it there and in docs/architecture*.md)")


def graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in imports(m)} for m in MODULES}


def test_every_package_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_imports_only_go_down_the_layers():
    wrong = []
    for module in sorted(MODULES):
        top, mine, role = layer_of(module)
        for target, line, lazy in imports(module):
            ttop, theirs, trole = layer_of(target)
            if ttop != top:
                # The harness never imports the reviewer; the reviewer uses its public API only.
                if top == "dsh_harness" or (trole not in ("", "testing")):
                    wrong.append(f"{module}:{line} imports {target} (across packages)")
                continue
            if theirs < mine and not (lazy and role == "cli") \
                    and not (lazy and (module, target) in LOADS):
                wrong.append(f"{module}:{line} imports {target} ({role or top} is below "
                             f"{trole or ttop})")
    assert not wrong, "imports running up the layers:\n" + "\n".join(wrong)


def test_no_import_cycles():
    edges = graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycles.append([*stack[stack.index(t):], t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_cycles_between_packages_of_one_layer():
    """Packages of one layer may import each other, but only one way: two that import each
    other (say eval and testing) are one package in two folders, and the file-level cycle test
    cannot see it when no single file closes the loop."""
    edges: dict[str, set[str]] = {}
    for module in MODULES:
        top, _, role = layer_of(module)
        for target in {t for t, _, _ in imports(module)}:
            ttop, _, trole = layer_of(target)
            if ttop == top and trole != role:
                edges.setdefault(f"{top}.{role}", set()).add(f"{ttop}.{trole}")
    both = sorted(f"{a} <-> {b}" for a, targets in edges.items() for b in targets
                  if a < b and a in edges.get(b, set()))
    assert not both, "packages importing each other:\n" + "\n".join(both)


def test_agents_know_neither_their_service_nor_the_harness():
    for module in MODULES:
        if module.startswith("dsh_harness.agents.") and module != "dsh_harness.agents.service":
            targets = {t for t, _, _ in imports(module)}
            assert "dsh_harness.agents.service" not in targets, module
            assert "dsh_harness.harness" not in targets, module


def test_the_reviewer_top_level_holds_only_the_entry_app_config_and_role_packages():
    top = ROOT / "dsh_github_reviewer"
    loose = sorted(p.name for p in top.glob("*.py") if p.name not in ("__init__.py", "plugin.py"))
    assert loose == [], f"modules beside the role packages: {loose}"
    roles = set().union(*REVIEWER_LAYERS) - {""}
    for package in top.iterdir():
        if (package / "__init__.py").exists():
            assert package.name in roles, f"{package.name}/ is no role package of the layout"


def test_every_package_says_its_concern_and_what_it_may_import():
    missing = []
    for init in sorted((ROOT / "dsh_github_reviewer").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if "may import" not in doc.lower():
            missing.append(str(init.relative_to(ROOT)))
    assert not missing, f"package docstrings without their concern and imports: {missing}"


def test_no_process_residue_in_code_or_help_texts():
    """Issue numbers and review tags mean nothing to a reader of the code ("issue 12", "[fix]");
    "cursor" named the work record before it was one."""
    residue = re.compile(r"\bissues? \d+\b|\[fix\]|\bcursor (key|record|state)\b", re.I)
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in MODULES.values()
             for n, line in enumerate(path.read_text().splitlines(), 1) if residue.search(line)]
    assert not found, "process residue:\n" + "\n".join(found)


def wall_clock_reads(tree: ast.AST) -> list[int]:
    """Lines that read the wall clock: ``now``/``utcnow``/``today`` of ``datetime``/``date``
    and ``time.time``, whatever they were imported as (``import datetime as dt``,
    ``from datetime import datetime as D``)."""
    modules: set[str] = set()       # names bound to the datetime or time module
    classes: set[str] = set()       # names bound to datetime.datetime / datetime.date
    times: set[str] = set()         # names bound to time.time
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ("datetime", "time"):
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module in ("datetime", "time"):
            for alias in node.names:
                if node.module == "datetime" and alias.name in ("datetime", "date"):
                    classes.add(alias.asname or alias.name)
                if node.module == "time" and alias.name == "time":
                    times.add(alias.asname or alias.name)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in times:
            lines.append(node.lineno)
        elif isinstance(func, ast.Attribute):
            owner = func.value
            if func.attr in ("now", "utcnow", "today") and (
                    (isinstance(owner, ast.Name) and owner.id in classes)
                    or (isinstance(owner, ast.Attribute) and owner.attr in ("datetime", "date")
                        and isinstance(owner.value, ast.Name) and owner.value.id in modules)):
                lines.append(node.lineno)
            elif func.attr == "time" and isinstance(owner, ast.Name) and owner.id in modules:
                lines.append(node.lineno)
    return sorted(lines)


def test_one_clock():
    """The reviewer reads the time through ``core.clock`` (tests move it); the sandbox GitHub
    in ``testing`` keeps its own, as GitHub would. Durations read ``time.monotonic``, which is
    no clock of the day and stays allowed."""
    calls = [f"{path.relative_to(ROOT)}:{n}"
             for module, path in MODULES.items()
             if module.startswith("dsh_github_reviewer.")
             and module not in ("dsh_github_reviewer.core.clock",)
             and not module.startswith("dsh_github_reviewer.testing")
             for n in wall_clock_reads(ast.parse(path.read_text()))]
    assert not calls, f"the wall clock read outside core/clock.py: {calls}"


def test_the_clock_check_sees_every_spelling():
    spellings = ["import datetime as dt\ndt.datetime.now()",
                 "from datetime import datetime as D\nD.now(UTC)",
                 "from datetime import date\ndate.today()",
                 "import datetime\ndatetime.datetime.utcnow()",
                 "import time\ntime.time()",
                 "from time import time as now\nnow()"]
    for source in spellings:
        assert wall_clock_reads(ast.parse(source)) == [2], source
    assert wall_clock_reads(ast.parse("import time\ntime.monotonic()\nx.now()")) == []


# The tests mirror the code: ``tests/reviewer/<pkg>/`` tests ``dsh_github_reviewer/<pkg>/``,
# ``tests/harness/<pkg>/`` tests ``dsh_harness/<pkg>/``; a test file directly in one of them is
# named after a top-level module (``tests/harness/test_config.py`` ↔ ``dsh_harness/config.py``).
# ``tests/e2e/`` drives the deployed bot, and the files directly in ``tests/`` check the whole
# project (layers, docs, packaging, the wheel).
TEST_TREES = {"reviewer": "dsh_github_reviewer", "harness": "dsh_harness"}
TEST_FOLDERS_BESIDE = {"e2e", "fixtures", "__pycache__"}


def test_tests_are_laid_out_like_the_code():
    tests = ROOT / "tests"
    misplaced = []
    for folder in sorted(p for p in tests.iterdir() if p.is_dir()):
        if folder.name not in {*TEST_TREES, *TEST_FOLDERS_BESIDE}:
            misplaced.append(f"tests/{folder.name}/ mirrors no package")
    for tree, package in TEST_TREES.items():
        code = ROOT / package
        for path in sorted((tests / tree).rglob("test_*.py")):
            rel = path.relative_to(tests / tree)
            if len(rel.parts) == 1:
                module = rel.name.removeprefix("test_")
                if not ((code / module).exists() or (code / module[:-3]).is_dir()):
                    misplaced.append(f"tests/{tree}/{rel} names no top-level module of {package}")
            elif not (code / rel.parts[0]).is_dir():
                misplaced.append(f"tests/{tree}/{rel} is in a folder that is no package of "
                                 f"{package}")
            elif not (path.parent / "__init__.py").exists():
                misplaced.append(f"tests/{tree}/{rel}: its folder lacks __init__.py")
    assert not misplaced, "\n".join(misplaced)


# -- the PR record key: one typed value (``PrRef``), parsed once -----------------------------

SESSION_KEY = "dsh_github_reviewer/core/session_key.py"
# Where a stored PR record key enters from storage: the only callers of ``PrRef.parse``.
STORAGE_EDGES = {"dsh_github_reviewer/work/store.py", "dsh_github_reviewer/web/pages.py"}
# Strings split on ":" that are not PR record keys, and what they are. A new entry must name
# what it splits; a record key is never split by hand (``PrRef`` has its parts).
COLON_SPLITS = {
    "dsh_github_reviewer/core/triggers.py": "a trigger's wire form <account>:<kind>:<id>",
    "dsh_github_reviewer/web/findings.py": "a reaction fact key reactions:<id>:<+1>:<-1>:<…>",
    "dsh_github_reviewer/eval/command.py": "a case check's '<case>: <problem>' line",
    "dsh_github_reviewer/testing/sandbox_graphql.py": "a GraphQL '<sha>:<path>' expression",
    "dsh_github_reviewer/testing/reviewer_model.py": "a scripted '<path>:<line>' spot",
}
_SPLITS = {"split", "rsplit", "partition", "rpartition"}
# f"{account}:{owner}/{repo}#{n}" and f"{account}:{repo}#{n}": a record key built by hand.
_KEY_SHAPE = re.compile(r"\{\}:\{\}(/\{\})?#\{\}")


def record_key_handling(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of every hand-made PR record key in ``tree``: ``repo_of``/``pr_key``,
    a split on "#" or ":", an f-string shaped like a record key, a ``PrRef.parse`` call."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        name = (node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                else node.id if isinstance(node, ast.Name)
                else node.attr if isinstance(node, ast.Attribute) else None)
        if name in ("repo_of", "pr_key", "split_pr_key"):
            found.append((node.lineno, name))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            arg = node.args[0] if node.args else None
            sep = arg.value if isinstance(arg, ast.Constant) else None
            if node.func.attr in _SPLITS and sep in ("#", ":"):
                found.append((node.lineno, f'.{node.func.attr}("{sep}")'))
            owner = node.func.value
            if node.func.attr == "parse" and isinstance(owner, ast.Name) \
                    and owner.id == "PrRef":
                found.append((node.lineno, "PrRef.parse"))
        if isinstance(node, ast.JoinedStr):
            shape = "".join(v.value if isinstance(v, ast.Constant) else "{}"
                            for v in node.values)
            if _KEY_SHAPE.search(shape):
                found.append((node.lineno, f'f"{shape}"'))
    return found


def test_the_pr_record_key_is_parsed_once_and_never_split_by_hand():
    """A PR's record key is the storage form of ``PrRef`` (core/session_key.py): built with
    ``format``, read back with ``parse`` where it comes out of storage, never re-split."""
    bad = []
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("dsh_github_reviewer/") or rel == SESSION_KEY:
            continue
        for line, what in record_key_handling(ast.parse(path.read_text())):
            if what == "PrRef.parse" and rel in STORAGE_EDGES:
                continue
            if what.endswith('(":")') and rel in COLON_SPLITS:
                continue
            bad.append(f"{rel}:{line}: {what}")
    assert not bad, ("PR record keys handled by hand (use PrRef: .owner/.name/.number, "
                     "WorkStore takes it; parse only at a storage edge):\n" + "\n".join(bad))


def test_the_record_key_check_sees_every_spelling():
    src = '''
def repo_of(key): ...
a, _, b = key.partition("#")
c = key.rsplit("#", 1)
d = key.split(":")
e = f"{account}:{owner}/{repo}#{n}"
f = f"{account}:{repo}#{n}"
g = PrRef.parse(key)
h = context.repo_of(key)
'''
    found = [what for _, what in record_key_handling(ast.parse(src))]
    assert found.count("repo_of") == 2
    assert {'.partition("#")', '.rsplit("#")', '.split(":")', "PrRef.parse"} <= set(found)
    assert sum(w.startswith('f"') for w in found) == 2
    fine = 'x = f"{owner}/{repo}#{n}"\ny = text.split(",")\nz = PrRef(a, r, 1).format()\n'
    assert record_key_handling(ast.parse(fine)) == []


# -- the trigger: typed from the record to the guard; its string only in core/triggers.py -----

TRIGGERS = "dsh_github_reviewer/core/triggers.py"


def _named(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else \
        node.attr if isinstance(node, ast.Attribute) else ""


def trigger_strings(tree: ast.AST) -> list[int]:
    """Lines where a trigger-named value is turned into its string by hand: ``x.format()``,
    ``str(x)`` or ``f"{x}"`` with ``x`` named ``…trigger``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "format" and not node.args and not node.keywords \
                and _named(node.func.value).endswith("trigger"):
            found.append(node.lineno)
        if isinstance(node, ast.Call) and _named(node.func) == "str" and len(node.args) == 1 \
                and _named(node.args[0]).endswith("trigger"):
            found.append(node.lineno)
        if isinstance(node, ast.FormattedValue) and _named(node.value).endswith("trigger"):
            found.append(node.lineno)
    return found


def test_a_trigger_becomes_a_string_only_in_core_triggers():
    """Work, CI and the reviewers pass the typed ``Trigger``; its wire form is written in one
    module: markers (``review_marker``…), turn meta (``turn_meta``/``meta_trigger``), stored
    fields (``StoredTrigger``). Log lines format it with ``%s``."""
    bad = [f"{path.relative_to(ROOT).as_posix()}:{line}"
           for path in MODULES.values()
           if path.relative_to(ROOT).as_posix().startswith("dsh_github_reviewer/")
           and path.relative_to(ROOT).as_posix() != TRIGGERS
           for line in trigger_strings(ast.parse(path.read_text()))]
    assert not bad, "a trigger stringified by hand (pass the Trigger; core/triggers.py " \
                    "renders it):\n" + "\n".join(bad)


def test_the_trigger_check_sees_every_spelling():
    src = ('meta = {"trigger": trigger.format()}\nx = str(rec.trigger)\ny = f"{self.trigger}"\n'
           'ok = Trigger.cmd(a, 1).format()\nlog.info("%s", trigger)\n')
    assert sorted(trigger_strings(ast.parse(src))) == [1, 2, 3]
