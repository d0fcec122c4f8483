"""Own-code capstones (issue 24 §2): the answer is computed where the library is switched off.

Each red-team attack is a notebook graded by the real batch grader (``autodiff-lab grade``,
:func:`grading_testkit.grade_folder`): every spelling of "use the library anyway" scores 0
on the capstone, with the rule in its feedback; the course's solutions keep full marks, and
a notebook that imports the library for its other exercises keeps those points. One grader
run grades the whole class (a module fixture), so the cost is paid once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from grading_testkit import bubblewrap_or_skip, grade_folder, write_notebook

from autodiff_lab.grading import registry
from autodiff_lab.grading.own_code import chosen_statements, switched_off

pytestmark = pytest.mark.slow  # one class graded: seconds

ROOT = Path(__file__).resolve().parent.parent

# A MyValue whose parts are the library's, each attack spelled differently (3.6).
WRAPS = """
class MyValue:
    def __init__(self, data, _node=None):
        self._v = _node if _node is not None else {lib}(data)
        self.data = self._v.data
    @property
    def grad(self):
        return self._v.grad
    def _w(self, node):
        return MyValue(None, node)
    def _u(self, o):
        return o._v if isinstance(o, MyValue) else o
    def __add__(self, o): return self._w(self._v + self._u(o))
    __radd__ = __add__
    def __mul__(self, o): return self._w(self._v * self._u(o))
    __rmul__ = __mul__
    def __sub__(self, o): return self._w(self._v - self._u(o))
    def __rsub__(self, o): return self._w(self._u(o) - self._v)
    def __truediv__(self, o): return self._w(self._v / self._u(o))
    def __rtruediv__(self, o): return self._w(self._u(o) / self._v)
    def __pow__(self, k): return self._w(self._v ** k)
    def __neg__(self): return self._w(-self._v)
    def tanh(self): return self._w(self._v.tanh())
    def exp(self): return self._w(self._v.exp())
    def relu(self): return self._w(self._v.relu())
    def backward(self): self._v.backward()
    def zero_grad(self): self._v.zero_grad()
"""

ATTACKS_36 = {
    "toplevel": ["import autodiff_lab", WRAPS.format(lib="autodiff_lab.Value")],
    "fromimport": ["from autodiff_lab import Value", WRAPS.format(lib="Value")],
    "importlib": [
        'import importlib\nlab = importlib.import_module("autodiff_" + "lab")',
        WRAPS.format(lib="lab.Value"),
    ],
    "dunder": [WRAPS.format(lib='__import__("autodiff_lab").Value')],
    "indict": [  # the library's Value kept in a dict attribute, made by a helper function
        "from autodiff_lab import value as _lib\n\ndef make(d):\n    return {'v': _lib.Value(d)}",
        WRAPS.format(lib="make").replace("{lib}", "make").replace("make(data)", "make(data)['v']"),
    ],
    "torch": [
        "import torch",
        WRAPS.format(lib="torch.tensor").replace("torch.tensor(data)", "torch.tensor(float(data))"),
    ],
    # The library's source read from disk and executed under another name: the student knows
    # where the package lies (its folder is written into the attack), or looks on sys.path.
    "fromdisk": [
        """
import os, sys, types
def _load():
    known = LIB_FOLDER
    for folder in [known, *(os.path.join(entry or '.', 'autodiff_lab') for entry in sys.path)]:
        if os.path.exists(os.path.join(folder, 'value.py')):""".replace(
            "LIB_FOLDER", repr(str(ROOT / "autodiff_lab"))
        )
        + """
            package = types.ModuleType('mylab'); package.__path__ = [folder]
            sys.modules['mylab'] = package
            for name in ('kinds', 'ops', 'primitives', 'methods', 'graph', 'value'):
                module = types.ModuleType('mylab.' + name); module.__package__ = 'mylab'
                sys.modules['mylab.' + name] = module
                with open(os.path.join(folder, name + '.py')) as f:
                    exec(compile(f.read(), name, 'exec'), module.__dict__)
            return sys.modules['mylab.value'].Value
Value = _load()
""",
        WRAPS.format(lib="Value"),
    ],
}

ATTACK_25 = """
import autodiff_lab

class ReverseMode:
    def vjp(f, x, u):
        value, pull = autodiff_lab.functional.vjp(f, x)
        return value, pull(u)[0]
    def jacrev(f, x):
        return autodiff_lab.functional.jacrev(f)(x)
"""

ATTACK_56 = """
import numpy as np
from autodiff_lab import nn, optim

def train_mlp(weights, X, y, lr, steps):  # the ready-made parts do the work
    model = nn.MLP(X.shape[1], [len(b) for _w, b in weights])
    opt = optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        losses.append(loss.data)
    return losses, [(layer.W.data, layer.b.data) for layer in model.layers]
"""

ATTACK_46 = """
import numpy as np
from autodiff_lab import Tensor

def _via_library(x, g, op, *params):
    t = Tensor(x, requires_grad=True)
    out = getattr(t, op)(*params) if params else getattr(t, op)()
    out.backward(g)
    return t.grad

class BackwardRules:
    def sum(x, g, axis, keepdims):
        return _via_library(x, g, "sum", axis, keepdims)
"""


ATTACK_64 = """
import autodiff_lab

def derivative(f, x):
    return autodiff_lab.functional.jvp(f, (x,), (1.0,))[1]
"""


@pytest.fixture(scope="module")
def class_graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("owncode")
    subs = root / "subs"
    for name, cells in ATTACKS_36.items():
        write_notebook(subs / f"a36_{name}" / "answer.ipynb", ["import numpy as np", *cells])
    write_notebook(subs / "a25" / "answer.ipynb", [ATTACK_25])
    write_notebook(subs / "a56" / "answer.ipynb", [ATTACK_56])
    write_notebook(subs / "a46" / "answer.ipynb", [ATTACK_46])
    write_notebook(subs / "a64" / "answer.ipynb", [ATTACK_64])
    for chapter in ("02_reverse_mode", "03_micrograd", "04_tensors", "05_training", "06_beyond"):
        (subs / "solutions").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "solutions" / f"{chapter}.ipynb", subs / "solutions")
    # The chapter-03 solution (3.1-3.5 use the library's Value) plus a cell that makes
    # MyValue the library's: 3.6 scores nothing, the others keep their points.
    nb = json.loads((ROOT / "solutions" / "03_micrograd.ipynb").read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    cells.append("from autodiff_lab import Value as _Library\n\nclass MyValue(_Library):\n    pass")
    write_notebook(subs / "mixed" / "03_micrograd.ipynb", cells)
    result = grade_folder(subs, root, "notes")
    assert result["rc"] == 0, result["err"]
    rows = {(r["student"], r["exercise"]): r for r in result["rows"]}
    return rows, result["subs"]


@pytest.fixture(scope="module")
def graded(class_graded):
    return class_graded[0]


def _points(row) -> tuple[float, float]:
    return float(row["points"]), float(row["max_points"])


@pytest.mark.parametrize("attack", sorted(ATTACKS_36))
def test_each_spelling_of_the_library_scores_nothing_on_36(graded, attack):
    row = graded[(f"a36_{attack}", "3.6")]
    assert _points(row)[0] == 0.0
    assert "exercise 3.6 must be your own code" in row["feedback"]
    assert "switched off here" in row["feedback"]


def test_reading_the_library_from_disk_is_refused(graded):
    """The files are on disk (in the sandbox too: the worker runs them), but the child's
    audit hook refuses to open them: the attack fails at its first open()."""
    assert "reading" in graded[("a36_fromdisk", "3.6")]["feedback"]


@pytest.mark.parametrize(
    ("student", "exercise", "module"),
    [("a25", "2.5", "autodiff_lab.functional"), ("a56", "5.6", "autodiff_lab.nn"),
     ("a46", "4.6", "autodiff_lab"), ("a64", "6.4", "autodiff_lab.functional")],
)  # fmt: skip
def test_other_capstones_refuse_the_library(graded, student, exercise, module):
    row = graded[(student, exercise)]
    assert _points(row)[0] == 0.0
    assert f"exercise {exercise} must be your own code: importing {module} " in row["feedback"]


def test_the_solutions_keep_full_marks(graded):
    for exercise in ("2.5", "3.6", "4.6", "4.7", "5.6", "6.4"):
        got, most = _points(graded[("solutions", exercise)])
        assert got == most > 0, (exercise, graded[("solutions", exercise)]["feedback"])


def test_the_refusal_is_also_a_note_at_the_top_of_the_report(class_graded):
    _rows, subs = class_graded
    notes = subs["a36_toplevel"][1]
    assert "exercise 3.6 must be your own code: importing autodiff_lab is switched off" in notes
    assert "(code cell 2); it scores nothing" in notes
    assert "must be your own code" not in subs["solutions"][1]


def test_other_exercises_of_the_notebook_keep_their_points(graded):
    assert _points(graded[("mixed", "3.6")])[0] == 0.0
    for exercise in ("3.1", "3.2", "3.3", "3.4", "3.5"):
        got, most = _points(graded[("mixed", exercise)])
        assert got == most > 0, exercise


def test_own_code_is_declared_on_every_capstone_built_by_the_student():
    marked = sorted(e.id for e in registry.all_exercises() if e.own_code)
    assert marked == ["2.5", "3.6", "4.6", "4.7", "5.6", "6.4", "7.5"]
    engine = switched_off(registry.get("2.5"))
    assert engine is not None and "autodiff_lab.functional" in engine
    assert "autodiff_lab" not in engine and "torch" in engine
    assert switched_off(registry.get("3.6"))[:1] == ["autodiff_lab"]
    assert switched_off(registry.get("3.1")) is None


def test_only_the_statements_the_answer_needs_are_chosen():
    cells = [
        "import numpy as np\nfrom autodiff_lab import Value\n"
        "from autodiff_lab.grading import check",
        "x = Value(2.0)",
        "def helper(v):\n    return np.tanh(v)",
        "class MyValue:\n    def tanh(self):\n        x = helper(self.data)\n        return x",
        "MyValue.extra = 1",
        'check("3.6", MyValue)',
    ]
    chosen = {(i, n) for i, _src, numbers in chosen_statements(cells, "MyValue") for n in numbers}
    # numpy's import (statement 0 of cell 0), helper, the class and the attribute set; not
    # Value's import, x = Value(2.0) (a local x in tanh is not the global), nor check.
    assert chosen == {(0, 0), (2, 0), (3, 0), (4, 0)}


def test_in_the_sandbox_too(tmp_path):
    """Under bubblewrap the package's files are there (the worker runs them): reading them
    is refused all the same, and a helper module beside the notebook is still found."""
    bubblewrap_or_skip()
    subs = tmp_path / "subs"
    write_notebook(subs / "disk" / "answer.ipynb", ["import numpy as np", *ATTACKS_36["fromdisk"]])
    folder = subs / "helper"
    (folder / "myengine.py").parent.mkdir(parents=True)
    nb = json.loads((ROOT / "solutions" / "03_micrograd.ipynb").read_text(encoding="utf-8"))
    (source,) = [
        "".join(c["source"]) for c in nb["cells"] if "class MyValue" in "".join(c["source"])
    ]
    (folder / "myengine.py").write_text("import math\nimport numpy as np\n" + source)
    write_notebook(folder / "answer.ipynb", ["from myengine import MyValue", "# Exercise 3.6"])
    result = grade_folder(subs, tmp_path, "notes", sandbox="bubblewrap")
    rows = {(r["student"], r["exercise"]): r for r in result["rows"]}
    disk = rows[("disk", "3.6")]
    assert disk["sandbox"] == "bubblewrap"
    assert float(disk["points"]) == 0.0 and "reading" in disk["feedback"], disk["feedback"]
    helper = rows[("helper", "3.6")]
    assert float(helper["points"]) == float(helper["max_points"]) > 0, helper["feedback"]


def test_the_practice_check_in_a_kernel_uses_the_same_child(tmp_path):
    """``check`` in a real kernel: the answer's cells (IPython's ``In``) rerun where the
    library is switched off. The library's Value subclassed scores 0 with the rule; the
    solution's class, defined further down, gets full marks (the earlier attempt is not
    rerun); the library's own class handed to check is judged in-process (name differs)."""
    from nbclient import NotebookClient

    nb = json.loads((ROOT / "solutions" / "03_micrograd.ipynb").read_text(encoding="utf-8"))
    (own,) = ["".join(c["source"]) for c in nb["cells"] if "class MyValue" in "".join(c["source"])]
    show = (
        "r = check('3.6', {}, show=False, record=False)\nprint(r.score, r.max_score, r.to_text())"
    )
    path = write_notebook(
        tmp_path / "kernel.ipynb",
        [
            "from autodiff_lab.grading import check\nfrom autodiff_lab import Value",
            "class MyValue(Value):\n    pass",
            show.format("MyValue"),
            "import math\nimport numpy as np\n" + own,
            show.format("MyValue"),
            show.format("Value"),
        ],
    )
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    printed = ["".join(o.get("text", "") for o in cell.outputs) for cell in notebook.cells]
    assert printed[2].startswith("0.0 15.0"), printed[2]
    assert "exercise 3.6 must be your own code: importing autodiff_lab" in printed[2]
    assert printed[4].startswith("15.0 15.0"), printed[4]
    assert printed[5].startswith("0.0 15.0") and "switched off" not in printed[5], printed[5]
