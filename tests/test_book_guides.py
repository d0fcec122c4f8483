"""The README and the book's guides (docs/*.md) say only what is true.

Every number in their prose is covered by a claim below: a phrase of the page holding the
number, with a check that reads the value from where it is defined — the code, the
configuration, the test or benchmark that performs it, or a notebook's stored output — not
restated here. A number that no claim covers fails the test: add the claim when you add the
number. What is not a claim: chapter (01, 02…) and exercise (1.1, 3.2…) names that exist, and
code — fenced blocks and inline `code` spans (examples, commands, identifiers). Tables that
other tests generate or check are named in :data:`CHECKED_ELSEWHERE`; the measurements of the
benchmarks page in :data:`MEASURED`.

The other tests: every ``autodiff-lab`` command a page shows exists, and every relative link
(with its ``#anchor``) resolves; tests/test_book_site.py checks the built book's links.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from notebook_helpers import chapter_label

from autodiff_lab.cli import build_parser
from autodiff_lab.grading import registry

ROOT = Path(__file__).resolve().parent.parent
GUIDES = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *GUIDES]
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w.]*\w)")
#: fenced code blocks (any language, MyST directives), then inline code spans
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
INLINE = re.compile(r"`[^`]+`")


def text_of(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def says(path: str, *snippets: str) -> Callable[[], bool]:
    """The file (a test, a benchmark, a module) holds each snippet: it performs what the
    page states."""
    return lambda: all(s in text_of(path) for s in snippets)


def const(module: str, name: str, value) -> Callable[[], bool]:
    """A constant of the package has the value the page states."""

    def check() -> bool:
        import importlib

        return getattr(importlib.import_module(module), name) == value

    return check


def grade_default(option: str):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["grade"].get_default(option)


def pinned(name: str) -> str:
    return re.search(rf'"{re.escape(name)}==([^"]+)"', text_of("pyproject.toml"))[1]


def floor(name: str) -> str:
    return re.search(rf'"{re.escape(name)}>=([^",<]+)', text_of("pyproject.toml"))[1]


def printed(notebook: str, *snippets: str) -> Callable[[], bool]:
    """A stored output of the notebook prints each snippet."""
    import json

    def check() -> bool:
        cells = json.loads(text_of(f"notebooks/{notebook}.ipynb"))["cells"]
        outputs = " ".join(
            "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
            for c in cells
            for o in c.get("outputs", [])
        )
        return all(s in outputs for s in snippets)

    return check


def checked_by(test: str, name: str) -> Callable[[], bool]:
    """Another test checks it: the named test function exists (and runs in the suite)."""
    return lambda: f"def {name}(" in text_of(f"tests/{test}")


def minutes_within(ranges: dict[str, tuple[int, int]]) -> bool:
    """Every course exercise's minutes lie in the range the rubric gives its level."""
    from autodiff_lab.grading import registry

    return all(
        ranges[e.level][0] <= e.minutes <= ranges[e.level][1] for e in registry.course_exercises()
    )


def chapters() -> set[str]:
    """The chapters' numbers as the pages write them: "03", and "03.1" for a part of one."""
    paths = list(ROOT.glob("notebooks/[0-9][0-9]_*.ipynb"))
    return {p.name[:2] for p in paths} | {chapter_label(p) for p in paths}


def exercise_ids() -> set[str]:
    return {e.id for e in registry.course_exercises()}


#: (page, phrase holding the numbers, check). Phrases are matched with whitespace collapsed.
CLAIMS: list[tuple[str, str, Callable[[], bool]]] = [
    # --- README ---------------------------------------------------------------------------
    (
        "README",
        "Python ≥ 3.10",
        checked_by(
            "test_guide_claims.py",
            "test_the_python_version_the_readme_and_the_guide_need_is_pyprojects",
        ),
    ),
    (
        "README",
        "step 3 of 5",
        checked_by("test_guide_claims.py", "test_the_readme_picture_is_the_widgets_stored_picture"),
    ),
    ("README", "not 2n", lambda: True),  # a count in the letter n, not a figure
    # --- student --------------------------------------------------------------------------
    (
        "student",
        "micrograd's moons MLP to 100 %",
        printed("05_training_an_mlp", "training accuracy: 100 %"),
    ),
    ("student", "(≥ 97 % test)", says("tests/test_chapters_05.py", "assert test_acc >= 97.0")),
    ("student", "relu'(0)/abs'(0)", lambda: True),  # the derivatives at the point 0
    (
        "student",
        "reading the text at 100 words a minute, its code at 9 seconds\n"
        "a line, and 30 seconds a cell",
        lambda: (
            const("test_chapters_reading_time", "WORDS_PER_MINUTE", 100)()
            and const("test_chapters_reading_time", "SECONDS_PER_CODE_LINE", 9)()
            and const("test_chapters_reading_time", "SECONDS_PER_CODE_CELL", 30)()
        ),
    ),
    (
        "student",
        "The capstones (3.6, 4.6, 4.7, 5.6, 7.5, 8.3) are graded",
        checked_by(
            "test_guide_claims.py", "test_the_capstones_the_guide_names_are_the_hard_exercises"
        ),
    ),
    # --- exercises ------------------------------------------------------------------------
    (
        "exercises",
        "10 operations per operation of the program, 2 per input and 10 more",
        says(
            "autodiff_lab/grading/exercises/ch07_source.py",
            "SIZE_PER_OP, SIZE_PER_INPUT, SIZE_BASE = 10, 2, 10",
        ),
    ),
    ("exercises", "up to about 3 lines", says("autodiff_lab/grading/spec.py", "about 3 lines")),
    ("exercises", "(up to about 10)", says("autodiff_lab/grading/spec.py", "(up to about 10)")),
    ("exercises", "up to about 15 lines", says("autodiff_lab/grading/spec.py", "about 15 lines")),
    (
        "exercises",
        "more than about 12 lines",
        says("autodiff_lab/grading/spec.py", "about 12 lines"),
    ),
    (
        "exercises",
        "Between 12 and 15 lines the count does not decide",
        says("autodiff_lab/grading/spec.py", "Between 12 and 15 lines"),
    ),
    (
        "exercises",
        "trivial 5 minutes, easy 10–15, medium 15–40, hard 40–90",
        lambda: minutes_within(
            {"trivial": (5, 5), "easy": (10, 15), "medium": (15, 40), "hard": (40, 90)}
        ),  # fmt: skip
    ),
    # --- lecturer -------------------------------------------------------------------------
    (
        "lecturer",
        "jupyterlab-rise 0.43.1, the newest release, cannot create ipywidgets 8's "
        "widget manager (jupyterlab-contrib/rise#119, open)",
        says(
            "tests/browser/test_rise_slides.py", "RISE 0.43.1 cannot load ipywidgets 8", "rise#119"
        ),
    ),
    (
        "lecturer",
        "at ipywidgets 7.8.5, `jupyterlab_widgets` 1.1.11, jupyterlab-rise 0.43.1 and "
        "JupyterLab 4.6.6",
        says(
            "tools/lecture-constraints.txt",
            "\nipywidgets==7.8.5\n",
            "\njupyterlab_widgets==1.1.11\n",
            "\njupyterlab-rise==0.43.1\n",
            "\njupyterlab==4.6.6\n",
        ),
    ),
    (
        "lecturer",
        "at 1280×720 in chapters 02, 03, 05 and 07",
        lambda: (
            says("tests/browser/test_rise_slides.py", "PROJECTOR = (1280, 720)")()
            and all(
                f"def test_chapter_{c}_" in text_of("tests/browser/test_rise_slides.py")
                for c in ("02", "03", "05", "07")
            )
        ),
    ),
    (
        "lecturer",
        "At 1280×720 its body text is 18 px and its code 16 px",
        says(
            "tests/browser/test_slides_fit.py",
            'PROJECTOR = {"width": 1280, "height": 720}',
            "BODY_TEXT_PX = 18",
            "CODE_TEXT_PX = 16",
        ),
    ),
    (
        "lecturer",
        "under ipywidgets 8 the same tests are a strict expected failure",
        says("tests/browser/test_rise_slides.py", "pytest.mark.xfail(", "strict=True"),
    ),
    (
        "lecturer",
        "The chapters store ipywidgets 8's widget state, which ipywidgets 7 cannot load",
        says(
            "tests/test_viz_widget_state.py",
            "def test_the_chapter_stores_ipywidgets_8_state",
            "def test_ipywidgets_7_gets_the_chapter_without_that_state",
        ),
    ),
    (
        "lecturer",
        "the `test` extra cannot take 7.8 (otter-grader 7.0.0 requires ipywidgets ≥ 8.1.5)",
        lambda: (
            pinned("otter-grader") == "7.0.0"
            and says("tools/lecture-constraints.txt", "otter-grader 7.0.0", "ipywidgets>=8.1.5")()
        ),
    ),
    ("lecturer", "| 1 | autodiff is exact", lambda: True),  # the claim map's row numbers
    ("lecturer", "| 2 | each op", lambda: True),
    ("lecturer", "| 3 | `backward()`", lambda: True),
    ("lecturer", "| 4 | forward pass", lambda: True),
    ("lecturer", "| 5 | `jvp`", lambda: True),
    ("lecturer", "| 6 | gradients", lambda: True),
    ("lecturer", "| 7 | the graph", lambda: True),
    ("lecturer", "| 8 | the scalar", lambda: True),
    ("lecturer", '"4. Define-by-run vs static tracing"', lambda: True),  # a heading's number
    (
        "lecturer",
        "a file over 100 MB is refused unopened",
        const("autodiff_lab.grading.reading", "MAX_STORED_BYTES", 100 * 2**20),
    ),
    (
        "lecturer",
        "a 100 GB sparse file unread",
        says("tests/test_grading_batch_attacks.py", "f.truncate(100 * 2**30)"),
    ),
    (
        "lecturer",
        "folders are searched 16 levels deep",
        const("autodiff_lab.grading.reading", "MAX_FOLDER_DEPTH", 16),
    ),
    (
        "lecturer",
        "limited to 1024 MB and 60 s",
        lambda: (
            const("autodiff_lab.grading.reading", "READ_MEMORY_MB", 1024.0)()
            and const("autodiff_lab.grading.reading", "READ_SECONDS", 60.0)()
        ),
    ),
    ("lecturer", "(the first 200)", const("autodiff_lab.grading.reading", "MAX_COPIED_FILES", 200)),
    ("lecturer", "(default 60)", lambda: grade_default("timeout") == 60),
    ("lecturer", "(default 600)", lambda: grade_default("notebook_timeout") == 600),
    ("lecturer", "(default 2048)", lambda: grade_default("memory") == 2048),
    ("lecturer", "(default 64)", lambda: grade_default("max_processes") == 64),
    (
        "lecturer",
        "a notebook that reserves 8 GB it never touches",
        says("tests/test_grading_isolation.py", "mmap.mmap(-1, 8 * 2**30"),
    ),
    ("lecturer", "maps more than 2 GB of libraries", lambda: True),  # why PSS, not address space
    (
        "lecturer",
        "over 16 MB of code",
        const("autodiff_lab.grading.notebook_facts", "MAX_CODE_BYTES", 16 * 2**20),
    ),
    (
        "lecturer",
        "past the first 20, or past 100 MB of files for one student",
        lambda: (
            const("autodiff_lab.grading.reading", "MAX_NOTEBOOKS_PER_STUDENT", 20)()
            and const("autodiff_lab.grading.reading", "MAX_STUDENT_BYTES", 100 * 2**20)()
        ),
    ),
    ("lecturer", "in a class of two, half is one student", lambda: True),
    (
        "lecturer",
        "(64 characters at most)",
        const("autodiff_lab.grading.gradebook", "REPORT_NAME_CHARS", 64),
    ),
    (
        "lecturer",
        "20 at most, each one line of at most 400 characters",
        lambda: (
            const("autodiff_lab.grading.results", "MAX_NOTES", 20)()
            and const("autodiff_lab.grading.results", "MAX_NOTE_CHARS", 400)()
        ),
    ),
    (
        "lecturer",
        "is tried 3 times",
        const("autodiff_lab.grading.isolation", "INFRASTRUCTURE_ATTEMPTS", 3),
    ),
    (
        "lecturer",
        "as uid 65534 (nobody)",
        const("autodiff_lab.grading.sandbox", "SANDBOX_UID", 65534),
    ),
    (
        "lecturer",
        "limited to 256 MB",
        const("autodiff_lab.grading.sandbox", "SANDBOX_TMP_MB", 256.0),
    ),
    (
        "lecturer",
        "(over 100 000 lines)",
        says("tests/test_grading_fairness.py", "for k in range(100_000)"),
    ),
    (
        "lecturer",
        "80 children in sessions of their own",
        says("tests/test_grading_sandbox.py", "for _ in range(80)]"),
    ),
    (
        "lecturer",
        "a 250-character name",
        says("tests/test_grading_fairness.py", 'LONG_NAME = "x" * 250'),
    ),
    ("lecturer", "JSON nested 40 000 deep", says("tests/test_grading_fairness.py", '"[" * 40_000')),
    (
        "lecturer",
        "60 000 blank lines in a cell",
        says("tests/test_grading_batch_attacks.py", '"\\n" * 60_000'),
    ),
    (
        "lecturer",
        "a 100 GB sparse file, a folder tree 1 100 deep, a 6 MB cell, 50 MB of stored "
        "output, comments claiming 3 000 other exercises",
        says(
            "tests/test_grading_batch_attacks.py",
            "f.truncate(100 * 2**30)",
            "range(1_100)",
            "of 6 MB",
            "50 MB of stored output",
            "for k in range(3000)",
        ),
    ),
    ("lecturer", "2 000 cells", says("tests/test_grading_redteam.py", "for _ in range(2_000)")),
    (
        "lecturer",
        "tasks are counted every 20 ms and memory every quarter second",
        lambda: (
            const("autodiff_lab.grading.accounting", "TASK_CHECK_SECONDS", 0.02)()
            and const("autodiff_lab.grading.accounting", "MEMORY_CHECK_SECONDS", 0.25)()
        ),
    ),
    (
        "lecturer",
        "on x86_64 and aarch64",
        says("autodiff_lab/grading/sandbox.py", '"x86_64":', '"aarch64":'),
    ),
    (
        "lecturer",
        "only each file's size is limited (64 MB)",
        const("autodiff_lab.grading.isolation", "OUTPUT_LIMIT_MB", 64.0),
    ),
    (
        "lecturer",
        "past the first 512 KB",
        const("autodiff_lab.grading.notebook_facts", "MAX_PARSED_BYTES", 512 * 2**10),
    ),
    (
        "lecturer",
        "nbgrader 0.9.6 and otter-grader 7.0.0",
        lambda: pinned("nbgrader") == "0.9.6" and pinned("otter-grader") == "7.0.0",
    ),
    (
        "lecturer",
        "WCAG 2.1 level AA",
        says("tests/browser/test_browser_a11y.py", '"wcag21a", "wcag21aa"'),
    ),
    (
        "lecturer",
        "the WCAG 2.1 A and AA rules",
        says("tests/browser/test_browser_a11y.py", '"wcag21a", "wcag21aa"'),
    ),
    ("lecturer", "offline slide exports of chapters 01, 02 and 08", lambda: True),  # chapters
    (
        "lecturer",
        "holds text to 4.5:1",
        says("tests/browser/test_browser_a11y.py", "text at 4.5:1"),
    ),
    (
        "lecturer",
        '"computation graph of L = tanh(a × b + a): 5 values, 3 operations"',
        says(
            "tests/browser/test_browser_widgets.py",
            "computation graph of L = tanh(a × b + a): 5 values, 3 operations",
        ),
    ),
    (
        "lecturer",
        "for graphs of up to 12 values",
        const("autodiff_lab.viz.drawing", "DESCRIBE_ALL_LIMIT", 12),
    ),
    (
        "lecturer",
        "“Hv stays cheap; forming H grows with n”: 3 lines",
        checked_by(
            "test_viz_figures.py", "test_the_guides_example_is_a_stored_figure_of_chapter_06"
        ),
    ),
    ("lecturer", "(Machado et al. 2009)", lambda: True),  # a reference's year
    (
        "lecturer",
        "at least ΔE\\*ab 20 apart",
        says("tests/browser/test_browser_a11y.py", "MIN_DELTA_E = 20.0"),
    ),
    # --- maintainer -----------------------------------------------------------------------
    (
        "maintainer",
        "Python ≥ 3.10",
        checked_by(
            "test_guide_claims.py",
            "test_the_python_version_the_readme_and_the_guide_need_is_pyprojects",
        ),
    ),
    ("maintainer", "PyTorch 2.13.0, the tests' oracle", lambda: pinned("torch") == "2.13.0"),
    ("maintainer", "within 5 minutes on 2 cores", lambda: True),  # the suite's budget (issue 28)
    (
        "maintainer",
        "one process per core plus one, up to 4",
        says("tools/run_pytest.py", "n = min(cores + 1, 4)"),
    ),
    (
        "maintainer",
        "exit code 5 (no tests collected)",
        says("tools/run_pytest.py", "if code == 5:"),
    ),
    ("maintainer", "chapters 04 and 05 re-run on perturbed data", lambda: True),  # chapters
    ("maintainer", "on an AVX-512 machine", lambda: True),  # an instruction set's name
    ("maintainer", "numpy ≥ 2.0 (numpy 1.x", lambda: floor("numpy") == "2.0"),
    (
        "maintainer",
        "matplotlib ≥ 3.8.4 and scikit-learn ≥ 1.4.2 (the first releases built for numpy 2)",
        lambda: floor("matplotlib") == "3.8.4" and floor("scikit-learn") == "1.4.2",
    ),
    (
        "maintainer",
        "a table of 56 bad inputs",
        checked_by("test_guide_claims.py", "test_error_table_size_matches_the_maintainers_guide"),
    ),
    (
        "maintainer",
        "nested `grad` to order 4",
        checked_by("test_higher_order.py", "test_nested_grad_orders_1_to_4_match_closed_forms"),
    ),
    ("maintainer", "equal `torch.optim` (1e-10)", says("tests/test_nn_optim.py", "atol=1e-10")),
    ("maintainer", "moons ≥ 95 % in 100 steps", says("tests/test_nn_training.py", ">= 0.95")),
    (
        "maintainer",
        "budget on a 5000-node graph",
        checked_by("test_viz_drawing.py", "test_5000_node_graph_is_cut_to_the_budget_and_small"),
    ),
    (
        "maintainer",
        "perturbed by 1e-9",
        const("test_chapters_05_robust_outputs", "RELATIVE_PERTURBATION", 1e-9),
    ),
    (
        "maintainer",
        "scorecards and hints, 65 plausible wrong answers",
        checked_by(
            "test_guide_claims.py", "test_wrong_answer_table_size_matches_the_maintainers_guide"
        ),
    ),
    (
        "maintainer",
        "nbgrader 0.9.6 and Otter 7.0.0",
        lambda: pinned("nbgrader") == "0.9.6" and pinned("otter-grader") == "7.0.0",
    ),
    ("maintainer", "Notebook 7", lambda: floor("notebook").startswith("7.")),
    ("maintainer", "in a 600 px panel", says("tests/browser/test_browser_dashboard.py", "600 px")),
    # --- design ---------------------------------------------------------------------------
    (
        "design",
        "each of the 361 ordered pairs of its 19 stages",
        checked_by("test_transforms_compose.py", "test_the_guides_counts_are_this_tests"),
    ),
    (
        "design",
        "and 19 chosen triples",
        checked_by("test_transforms_compose.py", "test_the_guides_counts_are_this_tests"),
    ),
    (
        "design",
        "19 stages in all",
        checked_by("test_transforms_compose.py", "test_the_guides_counts_are_this_tests"),
    ),
    (
        "design",
        "within 2 % + 1 KiB for chains of 10 to 1,000 ops",
        says("tests/test_control_memory.py", "REL, ABS = 0.02, 1024", "[10, 100, 1000]"),
    ),
    ("design", "(chapters 02 and 06 measure that cost)", lambda: True),  # chapters
    ("design", "(1) Calling", lambda: True),
    ("design", "(2) Every node", lambda: True),
    (
        "design",
        "at a = 2 gives `a.grad` 12, then 24",
        checked_by(
            "test_guide_claims.py", "test_backward_twice_on_one_graph_as_the_design_guide_says"
        ),
    ),
    (
        "design",
        "PyTorch also gives 12 then 24",
        checked_by(
            "test_guide_claims.py", "test_backward_twice_on_one_graph_as_the_design_guide_says"
        ),
    ),
    (
        "design",
        "(one score of the 2-16-16-1 MLP depends on 467 nodes instead of 1009",
        printed("05_training_an_mlp", "written by hand: 1009", "nn.MLP (dot):    467"),
    ),
    (
        "design",
        "chain of 10⁶ ops backpropagates",
        checked_by("test_engine_value.py", "test_a_chain_of_a_million_ops_backpropagates"),
    ),
    # --- benchmarks -----------------------------------------------------------------------
    ("benchmarks", "exits 1 when", says("benchmarks/__main__.py", "return 1 if failed else 0")),
    (
        "benchmarks",
        "in three measurements in a row",
        says("benchmarks/common.py", "attempts: int = 3"),
    ),
    (
        "benchmarks",
        'chapter 05\'s "more than 10×" and "more than 30×"',
        says("benchmarks/bench_claims.py", "CH05_SPEEDUP = {10: 10, 100: 30}"),
    ),
    (
        "benchmarks",
        'a step on 100 points "about as long as one on 10" (0.5 to 2 times, steps timed in',
        says("benchmarks/bench_claims.py", '"bound": "0.5 to 2"', "repeat=20"),
    ),
    (
        "benchmarks",
        "a 5,000-value drawing in under 2 s",
        says("benchmarks/bench_claims.py", "over 5,000 values", '"bound": "< 2"'),
    ),
    (
        "benchmarks",
        "(MLP 2-16-16-1, 100 moons",
        says("benchmarks/bench_micrograd.py", "MLP 2-16-16-1 on 100 two-moons points"),
    ),
    ("benchmarks", "≤ 0.08×", says("benchmarks/bench_micrograd.py", "<= 0.08x")),
    (
        "benchmarks",
        "step 64-128-10, batch 32, float32 | hand-written numpy = 1",
        says("benchmarks/bench_tensor_mlp.py", '"64-128-10, batch 32"'),
    ),
    ("benchmarks", "≤ 1.25× ✘ |", says("benchmarks/bench_tensor_mlp.py", "<= 1.25x numpy")),
    (
        "benchmarks",
        "step 784-256-10, batch 256, float32 | numpy = 1",
        says("benchmarks/bench_tensor_mlp.py", '"784-256-10, batch 256"'),
    ),
    ("benchmarks", "≤ 1.05× ✔", says("benchmarks/bench_tensor_mlp.py", "<= 1.05x numpy")),
    (
        "benchmarks",
        "digits epoch, tensor MLP 64-128-10, batch 32",
        says("benchmarks/bench_digits_epoch.py", "MLP 64-128-10, batch 32"),
    ),
    (
        "benchmarks",
        "the remaining cost goes at batch 32",
        says("benchmarks/bench_tensor_mlp.py", "Where a batch-32 step's time goes"),
    ),
    (
        "benchmarks",
        "the demo step and batch 256 meet",
        says("benchmarks/bench_tensor_mlp.py", '"784-256-10, batch 256"'),
    ),
    ("benchmarks", "N = 10³ … 10⁶", lambda: True),  # the chain lengths, in the benchmark
    ("benchmarks", "= 1 |", lambda: True),  # the anchor each ratio of its row is taken against
    ("design", "(a scalar at 0 is", lambda: True),  # the point 0
    ("lecturer", "not UTF-8", lambda: True),  # encodings' names
    ("lecturer", "a Latin-1", lambda: True),
]

#: (page, regex, check of every match): the claim map quotes chapters' headings by name.
PATTERN_CLAIMS = [
    (
        "lecturer",
        r'"(?:Way|Claim|Step) \d[^"]*"',
        lambda found: all(
            any(name.strip('"') in heading for heading in notebook_headings()) for name in found
        ),
    ),
]


def notebook_headings() -> list[str]:
    import json

    headings = []
    for path in sorted(ROOT.glob("notebooks/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                headings += re.findall(r"^#+ (.+)$", "".join(cell["source"]), re.M)
    return [" ".join(INLINE.sub(" ", h).split()) for h in headings]  # read as prose() reads


#: Regions whose numbers another test generates or checks: (page, regex, the test).
READING_TIMES = (
    "test_chapters_reading_time.py",
    "test_the_course_tables_give_the_times_the_chapters_state",
)
EXERCISE_TABLE = (
    "test_exercise_table.py",
    "test_the_guides_table_lists_every_exercise_with_its_level_and_time",
)
CHECKED_ELSEWHERE = [
    ("exercises", r"\| exercise \| title \| level \| time \|.*?(?=\s##)", EXERCISE_TABLE),
    (
        "README",
        r"\(\d+: [a-z0-9, ]+; ~\d+ min\)",
        ("test_guide_claims.py", "test_exercise_counts_in_the_course_table_match_the_registry"),
    ),
    (
        "README",
        r"\d+ exercises \([^)]*\), about \d+ minutes",
        ("test_guide_claims.py", "test_the_totals_sentence_matches_the_registry"),
    ),
    (
        "exercises",
        r"\d+ exercises \([^)]*\), about \d+ minutes",
        ("test_guide_claims.py", "test_the_totals_sentence_matches_the_registry"),
    ),
    ("README", r"\| ~\d+ min \|", READING_TIMES),
    ("student", r"\| ~\d+ min \|", READING_TIMES),
]

#: The benchmarks page's measurements: `make bench` prints them (re-measure to update);
#: no test times anything. (page, regex)
MEASURED = [
    ("benchmarks", r"Measured on the 2-core project machine[^:]*:"),  # (the run's date)
    ("benchmarks", r"\*\*0\.042×\*\* \| 0\.036×|0\.25× \| 0\.25×"),
    ("benchmarks", r"micrograd 0\.83–1\.20 µs|\*\*0\.78–0\.90 µs\*\*, flat \| 1\.4–2\.4 µs"),
    ("benchmarks", r"1\.60× \(PyTorch eager 2\.49×\) \| 1\.78×"),
    ("benchmarks", r"\*\*0\.94×\*\* \(PyTorch 1\.20×\) \| 0\.96×"),
    ("benchmarks", r"1\.95× \(PyTorch eager 2\.98×\) \| 2\.12×"),
    ("benchmarks", r"≤ 1\.0 µs"),  # issue 27's target for the chain (stated, not measured)
    ("benchmarks", r"\(100 of 10³ ops … 3 of 10⁶\)"),  # benchmarks/bench_micrograd.py
    ("benchmarks", r"\| (forward|backward|update) \| [\d.]+ µs \| [\d.]+ µs \|"),
    ("benchmarks", r"medians of 6,000 steps"),  # benchmarks/bench_tensor_mlp.py run_phases
    ("benchmarks", r"A step is ~25 numpy calls|At batch 256 numpy's work|two batch-32 targets"),
]


def prose(path: Path) -> str:
    """The page without its code, whitespace collapsed."""
    return " ".join(INLINE.sub(" ", FENCED.sub(" ", path.read_text(encoding="utf-8"))).split())


def page_key(path: Path) -> str:
    return "README" if path.name == "README.md" else path.stem


def test_every_number_in_the_readme_and_the_guides_is_checked():
    ids, names = exercise_ids(), chapters()
    unchecked, stale, false = [], [], []
    for page in PAGES:
        key, text = page_key(page), prose(page)
        covered: list[tuple[int, int]] = []
        for where, phrase, check in CLAIMS:
            if where != key:
                continue
            phrase = " ".join(INLINE.sub(" ", phrase).split())  # as prose() reads the page
            spans = [(m.start(), m.end()) for m in re.finditer(re.escape(phrase), text)]
            if not spans:
                stale.append(f"{page.name}: {phrase!r}")
            elif not check():
                false.append(f"{page.name}: {phrase!r}")
            covered += spans
        for where, pattern, (test, name) in CHECKED_ELSEWHERE:
            if where == key:
                spans = [(m.start(), m.end()) for m in re.finditer(pattern, text, re.S)]
                assert spans and checked_by(test, name)(), (page.name, pattern, test, name)
                covered += spans
        for where, pattern, check in PATTERN_CLAIMS:
            if where == key:
                found = list(re.finditer(pattern, text))
                assert found and check([m.group() for m in found]), (page.name, pattern)
                covered += [(m.start(), m.end()) for m in found]
        for where, pattern in MEASURED:
            if where == key:
                spans = [(m.start(), m.end()) for m in re.finditer(pattern, text)]
                assert spans, (page.name, pattern)
                covered += spans
        for m in NUMBER.finditer(text):
            number = m.group()
            if number in names or number in ids or number == "00":
                continue  # a chapter (01, 02…) or an exercise (1.1, 3.2…) that exists
            if not any(a <= m.start() and m.end() <= b for a, b in covered):
                context = text[m.start() - 40 : m.end() + 20]
                unchecked.append(f"{page.name}: {number} in …{context}…")
    assert not false, "claims no longer true:\n" + "\n".join(false)
    assert not stale, "claims whose phrase is gone from the page:\n" + "\n".join(stale)
    assert not unchecked, "numbers no claim checks:\n" + "\n".join(unchecked)


def test_the_commands_of_the_readme_and_the_guides_exist():
    """Every ``autodiff-lab`` sub-command and option a page shows is the command line's."""
    parser = build_parser()
    top = {s for a in parser._actions for s in a.option_strings}
    sub = next(a for a in parser._actions if a.dest == "command")
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for command, rest in re.findall(r"autodiff-lab ([a-z-]+)([^`\n]*)", text):
            if command.startswith("-"):
                assert command in top, f"{page.name}: autodiff-lab {command}"
                continue
            assert command in sub.choices, f"{page.name}: autodiff-lab {command}"
            options = {s for a in sub.choices[command]._actions for s in a.option_strings}
            for option in re.findall(r"(?<!\S)(--?[a-z][a-z-]*)", rest):
                assert option in options, f"{page.name}: autodiff-lab {command} {option}"


def anchors(page: Path) -> set[str]:
    """The heading anchors of a Markdown page, as GitHub and MyST (``myst_heading_anchors``)
    make them: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", FENCED.sub("", page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        found.add(slug)
    return found


def test_every_relative_link_of_the_readme_and_the_guides_resolves():
    """Relative links in README.md and docs/*.md point at files that exist, and at a heading
    of the page when they name an anchor (the built book's links are checked in
    tests/test_book_site.py; links to other sites are not fetched)."""
    broken, checked = [], 0
    for page in PAGES:
        text = FENCED.sub("", page.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            checked += 1
            if not path.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert checked > 60 and not broken, (checked, broken)


def test_the_anchor_rule_is_githubs_and_mysts():
    page = ROOT / "docs" / "design.md"
    assert {"what-composes-and-what-refuses", "one-graph-core-one-table-of-rules",
            "pytorch-is-a-test-dependency-only"} <= anchors(page)  # fmt: skip
