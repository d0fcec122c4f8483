"""The capstones through the command-line grader's real machinery: programs and tables
travel to the student's process as plain data, verdicts and hints come back from the
grader, and a submission built on the library's own classes scores nothing, saying why.

One notebook, one worker (in the sandbox where the machine has one).
"""

from __future__ import annotations

from grading_testkit import write_notebook

from autodiff_lab.grading.grader import Submission, grade_submission

CELLS = [
    "import numpy as np\nfrom autodiff_lab import Tensor, Value",
    # 3.6 with the library's Value underneath: no marks, and the report says why
    "class MyValue(Value):\n    pass",
    # 4.6 with repeated indices overwriting: loses the getitem cases, with the np.add.at hint
    """
class BackwardRules:
    def sum(x, g, axis, keepdims):
        if axis is not None and not keepdims:
            g = np.expand_dims(g, axis)
        return np.broadcast_to(g, x.shape).copy()

    def mean(x, g, axis, keepdims):
        return BackwardRules.sum(x, g, axis, keepdims) * g.size / x.size

    def max(x, g, axis, keepdims):
        top = x == x.max(axis=axis, keepdims=True)
        return BackwardRules.sum(x, g, axis, keepdims) * top / top.sum(axis=axis, keepdims=True)

    def reshape(x, g, shape):
        return g.reshape(x.shape)

    def transpose(x, g, axes):
        return np.transpose(g, None if axes is None else np.argsort(axes))

    def getitem(x, g, index):
        out = np.zeros(x.shape)
        out[index] += g
        return out
""",
    # 2.5 right
    """
class ReverseMode:
    def vjp(f, x, u):
        leaf = Tensor(np.asarray(x, dtype=float), requires_grad=True)
        out = f(leaf)
        out.backward(np.asarray(u, dtype=float))
        return out.data, leaf.grad

    def jacrev(f, x):
        m = np.size(f(np.asarray(x, dtype=float)))
        return np.stack([ReverseMode.vjp(f, x, np.eye(m)[i])[1] for i in range(m)])
""",
]


def test_capstones_are_graded_in_the_students_process_and_judged_here(tmp_path):
    path = write_notebook(tmp_path / "ann" / "capstones.ipynb", CELLS)
    result = grade_submission(Submission(path, "ann"), seed=11)
    by_id = {e.exercise_id: e for e in result.exercises}
    assert set(by_id) == {"2.5", "3.6", "4.6"}, result.notes
    assert by_id["2.5"].status == "passed", by_id["2.5"].feedback
    value = by_id["3.6"]
    assert value.score == 0 and value.status == "failed"
    # computed where the library is switched off (grading/own_code.py): the import is refused
    assert "exercise 3.6 must be your own code: importing autodiff_lab" in value.feedback
    assert "graded on your own class" in value.feedback
    rules = by_id["4.6"]
    assert 0 < rules.score < rules.max_score
    assert "np.add.at" in rules.feedback
    failing = {c.name.split(" ")[0] for c in rules.cases if not c.passed}
    assert failing == {"x[rows]", "x[rows,"}
