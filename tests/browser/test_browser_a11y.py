"""Accessibility in the real browser (target: WCAG 2.1 level AA for the course's own markup).

1. **Automated audit** with axe-core (``axe-playwright-python``), rules tagged wcag2a, wcag2aa,
   wcag21a, wcag21aa, on: chapter 02 run in JupyterLab (it has the backward stepper), a
   notebook with the training dashboard and the other widgets, exercise notebook 01 run (its
   scorecards), each in JupyterLab's light and dark themes (axe's color-contrast rule checks
   text at 4.5:1, large text 3:1, in both), and the offline slide exports of chapters 01, 02
   and 08 (``autodiff-lab slides 02 --offline``). A serious or critical violation fails the
   test when its element is the course's: inside a cell's output or rendered Markdown in
   JupyterLab, anywhere in the slide export. Elsewhere (JupyterLab's own menus, panels,
   editor) it must be listed in :data:`THIRD_PARTY_A11Y` (rule id and selector pattern, as
   THIRD_PARTY_CONSOLE_ERRORS lists console errors), else it fails too — so the list stays
   exactly what JupyterLab shows. Chapter 02's figures, drawn live, must each be an
   ``<img>`` whose alt text says what it plots (:mod:`autodiff_lab.viz.figures`).
2. **Keyboard**: every widget is driven with the keyboard alone — Tab moves focus to a
   control, Enter/Space press buttons, arrow keys move sliders, and the kernel's answer is
   checked in the picture or text.
3. **Colour vision**: screenshots of the stepper (a node highlighted) and of the dashboard
   (two classes) are seen through a simulated deuteranopia and protanopia (Machado et al.
   2009, :mod:`colour_vision`); the colours that carry meaning must stay at least
   :data:`MIN_DELTA_E` apart (CIE76 ΔE*ab; a just-noticeable difference is about 2.3).
4. **No news prompt**: JupyterLab started the way ``make lab`` starts it shows no
   "get notified about Jupyter news?" toast.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import colour_vision as cv
import lab_walk
import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_notebook

# every chapter and widget audited in JupyterLab: minutes, so in make test-exhaustive (CI)
pytestmark = [pytest.mark.browser, pytest.mark.exhaustive]

ROOT = Path(__file__).resolve().parents[2]
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING_IMPACTS = ("serious", "critical")
#: Colours that carry meaning must differ by at least this much under every simulation.
MIN_DELTA_E = 20.0

#: Where the course's own markup sits in a JupyterLab page: cell outputs (widgets,
#: drawings, scorecards) and the chapters' rendered Markdown.
COURSE_MARKUP = ".jp-OutputArea-output, .jp-MarkdownOutput"

#: Serious/critical axe violations in markup the course does not write, each reproduced on a
#: notebook page with no course code: (rule id, regex over axe's selector + the element's
#: HTML, whose markup and why). A violation matching none of these fails the test.
THIRD_PARTY_A11Y: list[tuple[str, str, str]] = [
    # JupyterLab 4.6's toolbar buttons (the <jp-button> element of @jupyter/web-components,
    # also used by the Voila and nbgrader extensions' toolbar buttons) carry aria-pressed,
    # which axe does not allow on an element with no button role.
    ("aria-allowed-attr", r"<jp-button ", "JupyterLab toolbar (jp-button web component)"),
    # JupyterLab's code editor (CodeMirror 6, role=textbox) in every code cell has no name.
    ("aria-input-field-name", r"\.cm-content|class=\"cm-content\"", "JupyterLab cell editor"),
    # JupyterLab's collapse button beside each Markdown heading has no text or label.
    ("button-name", r"jp-collapseHeadingButton", "JupyterLab heading collapser"),
    # JupyterLab's notebook cell list is role=feed whose children are not role=article.
    ("aria-required-children", r"jp-WindowedPanel-viewport", "JupyterLab notebook panel"),
    # ipywidgets 8.1.9's sliders create noUiSlider's handle (role=slider) without a name: the
    # widget's visible label is a sibling <label> the handle does not reference, and
    # ipywidgets passes noUiSlider no handleAttributes. The course cannot name it from Python.
    ("aria-input-field-name", r"noUi-handle", "ipywidgets slider handle"),
]

NOTEBOOK = "a11y_widgets.ipynb"
SETUP = """\
from autodiff_lab import Value, exp, sin
from autodiff_lab.viz import BackwardStepper, FiniteDifferenceExplorer, TrainingDashboard

a = Value(0.5, label="a"); b = Value(-0.75, label="b")
c = a * b; c.label = "c"
s = c + a; s.label = "s"
L = s.tanh(); L.label = "L"
stepper = BackwardStepper(L)
stepper"""
EXPLORER = "explorer = FiniteDifferenceExplorer(lambda x: sin(x) * exp(x), x=1.0)\nexplorer"
DASHBOARD = "dashboard = TrainingDashboard(seed=0, grid=30, steps=20)\ndashboard"
LINEARIZE = """\
from autodiff_lab import ops
from autodiff_lab.viz import LinearizeViewer
viewer = LinearizeViewer(lambda x, y: ops.sin(x * y) + x, 0.5, 2.0, tangents=(1.0, 0.0))
viewer"""
CHECKPOINT = """\
from autodiff_lab.viz import CheckpointExplorer
checkpoints = CheckpointExplorer(n=8, width=100, repeats=1)
checkpoints"""


@pytest.fixture(scope="module")
def lab(browser, jupyter_server, console_gate):
    """One JupyterLab tab for this module, and the widgets notebook written to the server."""
    cells = [SETUP, EXPLORER, DASHBOARD, LINEARIZE, CHECKPOINT]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, jupyter_server.root / NOTEBOOK)
    target = jupyter_server.root / "exercises"
    if not target.exists():
        shutil.copytree(ROOT / "exercises", target)
    context, page = lab_walk.open_lab(browser, jupyter_server, console_gate)
    yield page
    lab_walk.set_theme(page, "JupyterLab Light")
    context.close()
    ours = console_gate.ours(page.console_problems)
    assert not ours, "errors in the browser console:\n" + "\n".join(ours)


@pytest.fixture(scope="module")
def widgets_panel(lab):
    """The widgets notebook, run once for the tests of this module (each test sets the
    state it needs); returns a function that shows its tab and gives its outputs."""
    report = lab_walk.run_notebook(lab, NOTEBOOK)

    def outputs():
        lab.evaluate("id => window.jupyterapp.shell.activateById(id)", report["id"])
        return lab.locator(f"#{report['id']} .jp-Cell .jp-OutputArea-output")

    yield outputs
    lab_walk.close(lab, report["id"])


# --- axe ------------------------------------------------------------------------------------

OWNER_JS = """([selectors, course]) => selectors.map(sel => {
  const el = typeof sel === 'string' ? document.querySelector(sel) : null;
  return el ? !!el.closest(course) : null;
})"""


def audit(page, *, whole_page_is_course: bool = False) -> list[dict]:
    """axe's WCAG 2.1 A/AA violations on ``page``, one dict per (rule, element): ``rule``,
    ``impact``, ``target`` (CSS selector), ``html``, ``summary``, ``course`` (True when the
    element is the course's markup)."""
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(
        page, options={"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"]}
    )
    found = []
    for violation in result.response["violations"]:
        for node in violation["nodes"]:
            target = node["target"][-1] if node["target"] else ""
            found.append(
                {
                    "rule": violation["id"],
                    "impact": node.get("impact") or violation.get("impact"),
                    "target": target if isinstance(target, str) else str(target),
                    "html": node.get("html", "")[:200],
                    "summary": node.get("failureSummary", "")[:300],
                }
            )
    if whole_page_is_course:
        owners = [True] * len(found)
    else:
        owners = page.evaluate(OWNER_JS, [[f["target"] for f in found], COURSE_MARKUP])
    for f, owner in zip(found, owners, strict=True):
        f["course"] = owner is not False  # an element axe names but we cannot find: ours
    return found


def matches(violation: dict, entries: list[tuple[str, str, str]]) -> bool:
    text = f"{violation['target']} {violation['html']}"
    return any(
        violation["rule"] == rule and re.search(pattern, text) for rule, pattern, _ in entries
    )


def failures(violations: list[dict]) -> list[str]:
    """Serious/critical violations not listed as third-party."""
    bad = []
    for v in violations:
        if v["impact"] not in FAILING_IMPACTS:
            continue
        if matches(v, THIRD_PARTY_A11Y):
            continue
        owner = "course markup" if v["course"] else "outside the outputs, not listed"
        bad.append(f"[{v['impact']}] {v['rule']} ({owner}) at {v['target']}: {v['html']}")
    return bad


def audit_both_themes(page, name: str, screenshot) -> dict[str, list[dict]]:
    """Audit in the light theme, then the dark one (back to light afterwards)."""
    found = {}
    try:
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            lab_walk.set_theme(page, theme)
            page.wait_for_timeout(300)  # the theme's CSS variables applied everywhere
            found[theme] = audit(page)
            screenshot(page, f"a11y-{name}-{'dark' if 'Dark' in theme else 'light'}")
    finally:
        lab_walk.set_theme(page, "JupyterLab Light")
    return found


def assert_no_failures(found: dict[str, list[dict]]) -> None:
    messages = [f"{theme}: {m}" for theme, vs in found.items() for m in failures(vs)]
    assert not messages, "accessibility violations:\n" + "\n".join(messages)


def test_axe_chapter_with_backward_stepper(lab, screenshot):
    report = lab_walk.run_notebook(lab, "02_reverse_mode.ipynb")
    try:
        panel = lab.locator(f"#{report['id']}")
        stepper = panel.locator(".widget-button", has_text="step ▶").first
        stepper.scroll_into_view_if_needed()
        stepper.click()  # a highlighted node and an explanation table on screen
        found = audit_both_themes(lab, "chapter02", screenshot)
        pictures = panel.locator(".jp-OutputArea-output img").evaluate_all(
            "imgs => imgs.map(i => [i.src.slice(0, 22), i.getAttribute('alt') || i.title])"
        )
    finally:
        lab_walk.close(lab, report["id"])
    assert_no_failures(found)
    # the chapter's 3 matplotlib figures, drawn by the live kernel, each with its words; the
    # other pictures (graph drawings, the live widgets' images) have alt text or a title
    figures = [alt for src, alt in pictures if src == "data:image/png;base64,"]
    assert len(figures) == 4, pictures  # chapter 02 shows four live figures
    assert all(alt and alt.startswith(("Plot", "Figure")) for alt in figures), figures
    assert all(alt for _, alt in pictures), pictures


def test_axe_widgets_and_dashboard(lab, widgets_panel, screenshot):
    widgets_panel().nth(2).scroll_into_view_if_needed()  # the dashboard on screen
    found = audit_both_themes(lab, "widgets", screenshot)
    assert_no_failures(found)


def test_axe_exercise_scorecards(lab, screenshot):
    report = lab_walk.run_notebook(lab, "exercises/01_forward_mode.ipynb")
    try:
        scorecard = lab.locator(f"#{report['id']} .jp-OutputArea-output", has_text="NOT ATTEMPTED")
        scorecard.first.wait_for()
        found = audit_both_themes(lab, "exercise01", screenshot)
    finally:
        lab_walk.close(lab, report["id"])
    assert_no_failures(found)


#: Offline slide exports audited: the stepper chapter, and the two whose wide formula (01)
#: or table (08) scrolls sideways (focusable regions, see autodiff_lab/slides.py).
SLIDE_CHAPTERS = ["01_forward_mode", "02_reverse_mode", "08_transformations"]


@pytest.mark.parametrize("chapter", SLIDE_CHAPTERS)
def test_axe_offline_slide_export(browser_page, tmp_path, screenshot, chapter):
    from autodiff_lab.slides import export_slides

    html = export_slides(ROOT / "notebooks" / f"{chapter}.ipynb", tmp_path, offline=True)
    page = browser_page
    page.goto(html.as_uri())
    page.wait_for_selector("#offline-counter")
    slides = int(page.locator("#offline-counter").inner_text().split("/")[1])
    assert slides >= 5
    # every slide and fragment at once (axe skips what is hidden): one audit of all markup
    page.add_style_tag(
        content=".reveal .slides section { display: block !important; }"
        " .reveal .fragment { visibility: visible !important; }"
    )
    found = audit(page, whole_page_is_course=True)
    screenshot(page, f"a11y-slides-{chapter}-offline-all", full_page=True)
    assert_no_failures({f"offline slides {chapter}": found})


# --- keyboard -------------------------------------------------------------------------------

MARK_JS = "el => { document.querySelectorAll('[data-kb]').forEach(e => delete e.dataset.kb);"
MARK_JS += " el.dataset.kb = '1'; }"


def tab_to(page, target, limit: int = 8, back: bool = False) -> int:
    """Press Tab (Shift+Tab with ``back``) until ``target`` has the focus; the presses used."""
    target.evaluate(MARK_JS)
    for presses in range(1, limit + 1):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        if page.evaluate("() => document.activeElement?.dataset?.kb === '1'"):
            return presses
    raise AssertionError(f"Tab did not reach {target} in {limit} presses")


def test_keyboard_alone_drives_every_widget(lab, widgets_panel, screenshot):
    """From each widget's first control, Tab reaches every control in order, and the keys
    a keyboard user presses (Enter, Space, arrows) drive it: the kernel's answer is checked."""
    from playwright.sync_api import expect

    page = lab
    outputs = widgets_panel()
    # -- backward stepper: buttons by Enter/Space, the slider by arrow keys
    stepper = outputs.nth(0)
    caption = stepper.locator(".widget-html-content").first
    buttons = {
        name: stepper.locator(".jupyter-button", has_text=name).first
        for name in ("reset", "step back", "play", "step ▶")
    }
    buttons["reset"].focus()
    page.keyboard.press("Enter")
    expect(caption).to_contain_text("Step 0 of 5")
    assert tab_to(page, buttons["step back"]) == 1
    assert tab_to(page, buttons["play"]) == 1
    assert tab_to(page, buttons["step ▶"]) == 1
    page.keyboard.press("Enter")
    expect(caption).to_contain_text("Step 1 of 5")
    page.keyboard.press("Space")
    expect(caption).to_contain_text("Step 2 of 5")
    handle = stepper.locator(".noUi-handle, .ui-slider-handle").first
    tab_to(page, handle)
    page.keyboard.press("ArrowRight")
    expect(caption).to_contain_text("Step 3 of 5")
    page.keyboard.press("ArrowLeft")
    expect(caption).to_contain_text("Step 2 of 5")
    tab_to(page, buttons["play"], back=True)
    page.keyboard.press("Space")  # plays to the end, one step every 0.9 s
    expect(caption).to_contain_text("Step 5 of 5", timeout=30_000)
    expect(buttons["play"]).to_contain_text("play")  # back to "▶ play" at the end

    # -- finite-difference explorer: its slider by arrow keys
    explorer = outputs.nth(1)
    text = explorer.locator(".widget-html-content").first
    expect(text).to_contain_text("x = 1.000")
    explorer.locator(".noUi-handle, .ui-slider-handle").first.focus()
    page.keyboard.press("ArrowRight")
    expect(text).to_contain_text("x = 1.020")  # one slider step: (3 - (-1)) / 200

    # -- dashboard: sliders by arrows, the dropdown by arrows, Start by Enter, Step by Space
    dashboard = outputs.nth(2)
    status = dashboard.locator(".widget-html-content").first
    handles = dashboard.locator(".noUi-handle, .ui-slider-handle")
    handles.nth(0).focus()
    page.keyboard.press("ArrowRight")  # learning rate 0.1 -> 10^(-0.9)
    expect(dashboard.locator(".widget-readout").first).to_have_text("0.126")
    tab_to(page, handles.nth(1))
    tab_to(page, handles.nth(2))
    tab_to(page, dashboard.locator("select").first)
    tab_to(page, handles.nth(3))
    start = dashboard.locator(".jupyter-button", has_text="Start").first
    tab_to(page, start)
    before = dashboard_step(status.inner_text())
    page.keyboard.press("Enter")
    expect(status).to_contain_text(f"step {before + 20},", timeout=60_000)
    step = dashboard.locator(".jupyter-button", has_text="Step").first
    tab_to(page, step)
    page.keyboard.press("Space")
    expect(status).to_contain_text(f"step {before + 21},", timeout=30_000)
    screenshot(dashboard, "keyboard-dashboard-after-start")

    # -- the linearize viewer (chapter 08): its toggle buttons by Tab and Enter
    viewer = outputs.nth(3)
    toggles = viewer.locator(".widget-toggle-button")
    toggles.nth(0).focus()
    tab_to(page, toggles.nth(1))
    page.keyboard.press("Enter")
    expect(viewer.locator(".widget-html-content").first).to_contain_text("vjp")
    expect(toggles.nth(1)).to_have_class(re.compile("mod-active"))

    # -- the checkpoint explorer (chapter 07): its selection slider by arrow keys
    checkpoints = outputs.nth(4)
    readout = checkpoints.locator(".widget-readout").first
    before = readout.inner_text()
    checkpoints.locator(".noUi-handle, .ui-slider-handle").first.focus()
    page.keyboard.press("ArrowRight")
    expect(readout).not_to_have_text(before)


def dashboard_step(status: str) -> int:
    """The step count in the dashboard's status line (0 while untrained)."""
    found = re.search(r"step (\d+),", status)
    return int(found.group(1)) if found else 0


# --- colour vision --------------------------------------------------------------------------


def _pixels(image: np.ndarray, color: str, tolerance: float) -> np.ndarray:
    """Mask of the pixels within ``tolerance`` (RGB distance, 0..255) of ``color``."""
    return np.linalg.norm(image - cv.hex_rgb(color), axis=-1) <= tolerance


def seen_colours(
    png: bytes, colours: dict[str, str], name: str, *, tolerance: float = 0.0, min_pixels: int = 20
) -> dict[str, dict[str, np.ndarray]]:
    """For each named colour drawn in the screenshot ``png``: the median colour of its pixels
    as seen normally and through each simulation (the simulated screenshots are saved)."""
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)
    views = {"normal": image}
    for kind in cv.MACHADO_2009:
        views[kind] = cv.simulate(image, kind)
        out = Image.fromarray(np.round(views[kind]).astype(np.uint8))
        (ROOT / "artifacts" / "screenshots").mkdir(parents=True, exist_ok=True)
        out.save(ROOT / "artifacts" / "screenshots" / f"cvd-{name}-{kind}.png")
    seen = {}
    for label, colour in colours.items():
        mask = _pixels(image, colour, tolerance)
        assert mask.sum() >= min_pixels, (
            f"{name}: {label} ({colour}) is not drawn ({mask.sum()} px)"
        )
        seen[label] = {view: np.median(img[mask], axis=0) for view, img in views.items()}
    return seen


def assert_distinct(seen, pairs, name: str) -> dict[str, float]:
    """Every pair stays at least MIN_DELTA_E apart in every view; returns the smallest ΔE."""
    smallest = {}
    for a, b in pairs:
        for view in seen[a]:
            d = cv.delta_e(seen[a][view], seen[b][view])
            smallest[f"{a} / {b} ({view})"] = d
            assert d >= MIN_DELTA_E, f"{name}: {a} vs {b} only ΔE {d:.1f} under {view}"
    return smallest


def test_highlight_and_classes_survive_colour_blindness(lab, widgets_panel, screenshot):
    """The stepper's highlight (the active node's fill and vermillion border; the blue border
    of the nodes that just received a share) and the dashboard's two classes stay at least
    MIN_DELTA_E apart under simulated deuteranopia and protanopia, on real screenshots: the
    active fill against every other fill drawn, the active border against the blue one."""
    from playwright.sync_api import expect

    from autodiff_lab.viz import drawing
    from autodiff_lab.viz.dashboard import CLASS_COLORS

    outputs = widgets_panel()
    stepper = outputs.nth(0)
    stepper.locator(".jupyter-button", has_text="reset").first.click()
    for _ in range(3):  # step 3: c = a * b runs; a and b receive their shares
        stepper.locator(".jupyter-button", has_text="step ▶").first.click()
    expect(stepper.locator(".widget-html-content").first).to_contain_text("Step 3 of 5")
    picture = stepper.locator(".widget-html-content svg").first
    png = screenshot(picture, "cvd-stepper-step3").read_bytes()
    colours = {
        "active fill": drawing.FILL_ACTIVE,
        "input fill": drawing.FILL_INPUT,
        "output fill": drawing.FILL_OUTPUT,
        "operation fill": drawing.FILL_OP,
        "value fill (white)": drawing.FILL_VALUE,
        "active border": drawing.OKABE_ITO["vermillion"],
        "touched border": drawing.OKABE_ITO["blue"],
    }
    seen = seen_colours(png, colours, "stepper", min_pixels=10)
    pairs = [("active fill", other) for other in list(colours)[1:5]]
    pairs.append(("active border", "touched border"))
    stepper_dE = assert_distinct(seen, pairs, "stepper")

    dashboard = outputs.nth(2)  # the training points are drawn in their class colours
    dashboard.scroll_into_view_if_needed()
    png = screenshot(dashboard.locator(".widget-image").first, "cvd-dashboard").read_bytes()
    classes = {"class 0": CLASS_COLORS[0], "class 1": CLASS_COLORS[1]}
    seen = seen_colours(png, classes, "dashboard", tolerance=12, min_pixels=30)
    dash_dE = assert_distinct(seen, [("class 0", "class 1")], "dashboard")
    print("smallest ΔE:", {k: round(v, 1) for k, v in {**stepper_dE, **dash_dE}.items()})


def test_simulation_confuses_red_and_green():
    """The simulation works: matplotlib's red and green (ΔE ~120 to normal vision) fall far
    below MIN_DELTA_E under deuteranopia, while blue and orange stay apart."""
    red, green = cv.hex_rgb("#D62728"), cv.hex_rgb("#2CA02C")
    assert cv.delta_e(red, green) > 100
    seen = [cv.simulate(c, "deuteranopia") for c in (red, green)]
    assert cv.delta_e(*seen) < MIN_DELTA_E / 2
    assert np.allclose(cv.simulate(np.array([255.0, 255.0, 255.0]), "protanopia"), 255, atol=0.5)
    assert abs(cv.contrast_ratio(np.zeros(3), np.full(3, 255.0)) - 21.0) < 1e-9


# --- the news prompt -----------------------------------------------------------------------


def test_no_news_prompt_in_lab_started_like_make_lab(browser_page, jupyter_server):
    """The server starts with tools/lab_settings.py's override, as ``make lab`` does: the
    setting JupyterLab reads says "never" and no news toast appears."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "tools/lab_settings.py" in recipe.split("jupyter lab")[0]  # before the server

    page = browser_page
    page.goto(f"{jupyter_server.base}/lab?token={jupyter_server.token}&reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell")
    fetch_news = page.evaluate(
        """async () => {
          const app = window.jupyterapp;
          await app.restored;
          const s = await app.serviceManager.settings.fetch(
            '@jupyterlab/apputils-extension:notification');
          return s.settings?.fetchNews ?? JSON.parse(s.raw || '{}').fetchNews ?? null;
        }"""
    )
    composite = page.evaluate(
        """async () => {
          const r = await fetch('/lab/api/settings/@jupyterlab/apputils-extension:notification'
            + location.search);
          return (await r.json()).schema.properties.fetchNews.default;
        }"""
    )
    assert composite == "false", (fetch_news, composite)
    page.wait_for_timeout(2000)  # the prompt shows right after the app is restored
    toasts = page.locator(".Toastify__toast")
    assert not [t for t in toasts.all_inner_texts() if "news" in t.lower()]
