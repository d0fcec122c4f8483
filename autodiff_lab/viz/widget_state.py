"""Saved widget state that this environment's ipywidgets cannot load, hidden when a notebook opens.

An executed notebook keeps its widgets' state in ``metadata.widgets``, written by the
ipywidgets that ran it: the committed chapters' by ipywidgets 8 (``@jupyter-widgets/base``
and ``controls`` 2.0.0). The lecture environment (``make lecture``: ipywidgets 7.8.5, whose
widgets are live in RISE's slideshow) speaks 1.x of those modules. Its JupyterLab widget
manager (jupyterlab_widgets 1.1.11) loads that saved state when the notebook opens, fails on
the first 2.0.0 model ("Could not instantiate widget") and from then on never reports itself
restored: every widget the kernel creates afterwards stays "Loading widget..." (in the
notebook and in the slideshow), although the same widgets are live in a notebook without
saved state.

:class:`LectureContentsManager` is the Jupyter server's contents manager of that environment
(tools/lab_settings.py configures it where ipywidgets is older than 8): a notebook whose saved
state uses other major versions of the core widget modules than the installed ipywidgets is
handed to JupyterLab without that state, and its stored widget outputs keep only their other
representations (the course's widgets store a static picture beside the widget view), which
JupyterLab shows until the cell runs again. The file on disk is not changed by opening it.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from .render import WIDGET_VIEW

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: The widget modules whose major version changed between ipywidgets 7 and 8.
CORE_MODULES = ("@jupyter-widgets/base", "@jupyter-widgets/controls")


def installed_majors() -> dict[str, str]:
    """The major version of each of :data:`CORE_MODULES` that the installed ipywidgets speaks."""
    import ipywidgets

    return {
        "@jupyter-widgets/base": ipywidgets.__jupyter_widgets_base_version__.split(".")[0],
        "@jupyter-widgets/controls": ipywidgets.__jupyter_widgets_controls_version__.split(".")[0],
    }


def foreign_models(notebook: dict[str, Any], majors: dict[str, str]) -> set[str]:
    """The ids of the saved models when any of them needs a core module at another major
    version than ``majors`` (the state cannot be loaded then); else the empty set."""
    state = notebook.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    foreign = any(
        model.get("model_module") in majors
        and str(model.get("model_module_version", "")).split(".")[0]
        != majors[model["model_module"]]
        for model in state.values()
    )
    return set(state) if foreign else set()


def hide_foreign_widget_state(notebook: dict[str, Any], majors: dict[str, str]) -> int:
    """Remove saved widget state that ``majors`` cannot load, and the widget views of those
    models from the outputs that have another representation; return how many views went."""
    models = foreign_models(notebook, majors)
    if not models:
        return 0
    del notebook["metadata"]["widgets"][WIDGET_STATE]
    if not notebook["metadata"]["widgets"]:
        del notebook["metadata"]["widgets"]
    removed = 0
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            view = data.get(WIDGET_VIEW)
            if view and view.get("model_id") in models and len(data) > 1:
                del data[WIDGET_VIEW]
                removed += 1
    return removed


class LectureContentsManager(AsyncLargeFileManager):
    """jupyter_server's default contents manager, except that a notebook is served without
    saved widget state the installed ipywidgets cannot load (see the module docstring)."""

    async def get(self, path, content=True, type=None, format=None, require_hash=False):
        # (require_hash is passed on only when asked: jupyter_server before 2.11 has none)
        extra = {"require_hash": True} if require_hash else {}
        model = await super().get(path, content=content, type=type, format=format, **extra)
        if model.get("type") == "notebook" and model.get("content") is not None:
            hide_foreign_widget_state(model["content"], installed_majors())
        return model
