"""Course defaults for JupyterLab, written into the environment (never the user's home).

JupyterLab asks "Would you like to get notified about official Jupyter news?" in a toast
that covers the lower right of every page until answered. The course answers it for the
student: ``fetchNews: "false"`` (and no update check, which needs news), as a settings
*override* file in the environment's JupyterLab application folder,
``<sys.prefix>/share/jupyter/lab/settings/overrides.d/autodiff-lab.json`` (jupyterlab_server
reads every ``overrides.d/*.json`` there as new defaults). A student can still turn news on
in Settings > Notifications: user settings win over overrides.

Where ipywidgets is older than 8 (the lecture environment, ``make lecture``), the Jupyter
server of the environment also gets the course's contents manager,
:class:`autodiff_lab.viz.widget_state.LectureContentsManager`, in
``<sys.prefix>/etc/jupyter/jupyter_server_config.json``: it opens a notebook without the
saved ipywidgets 8 state that ipywidgets 7's widget manager cannot load (which would keep
every new widget at "Loading widget..."). Elsewhere that setting is taken out again.

``make lab`` (and ``make lecture``, through it) runs this before starting JupyterLab; the
browser tests' server (tests/browser/conftest.py) runs it too, so it starts the same way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: The plugin settings the course sets: no news prompt, no news, no update check; a
#: slideshow that opens full-window at the first slide (see the module docstring).
OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "jupyterlab-rise:plugin": {
        # after Run All the selected cell is the last one: RISE's default ("selected")
        # would open the lecture at its references
        "start_slideshow_at": "beginning",
        # a slide taller than the screen scrolls instead of being cut off
        "scroll": True,
    },
    "@jupyterlab/shortcuts-extension:shortcuts": {
        "shortcuts": [
            # Alt+R opens the slideshow in its own browser tab, the whole window wide
            # (RISE:slideshow), instead of RISE's half-width preview panel
            {"command": "RISE:preview", "keys": ["Alt R"], "selector": ".jp-Notebook:focus",
             "disabled": True},
            # (a selector spelled differently from the disabled one: JupyterLab drops every
            # shortcut with the keys and selector of a disabled entry)
            {"command": "RISE:slideshow", "keys": ["Alt R"],
             "selector": ".jp-Notebook.jp-mod-commandMode :focus"},
        ]
    },
}  # fmt: skip
FILE_NAME = "autodiff-lab.json"


def overrides_path() -> Path:
    """Where this environment's JupyterLab reads override files (respects JUPYTERLAB_DIR)."""
    try:
        from jupyterlab.commands import get_app_dir

        app_dir = Path(get_app_dir())
    except ImportError:  # JupyterLab not installed: the default location
        app_dir = Path(sys.prefix) / "share" / "jupyter" / "lab"
    return app_dir / "settings" / "overrides.d" / FILE_NAME


def write_overrides() -> Path:
    """Write :data:`OVERRIDES` (only when the file differs) and return its path."""
    path = overrides_path()
    text = json.dumps(OVERRIDES, indent=2) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


#: The server setting of an environment whose ipywidgets is older than 8 (module docstring).
CONTENTS_MANAGER = "autodiff_lab.viz.widget_state.LectureContentsManager"


def server_config_path() -> Path:
    """This environment's Jupyter server configuration file (``jupyter_server_config.json``
    in ``<sys.prefix>/etc/jupyter``, which the server reads; its ``.d`` folder only enables
    server extensions)."""
    return Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.json"


def needs_lecture_contents(ipywidgets_version: str) -> bool:
    """Whether saved ipywidgets 8 state must be hidden from this ipywidgets (older than 8)."""
    return int(ipywidgets_version.split(".")[0]) < 8


def write_server_config() -> Path | None:
    """Set ``ServerApp.contents_manager_class`` to :data:`CONTENTS_MANAGER` in
    :func:`server_config_path` where ipywidgets is older than 8, else take the course's
    setting out of it (other settings in the file are kept); returns the path when set."""
    import ipywidgets

    path = server_config_path()
    config = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    server = config.setdefault("ServerApp", {})
    wanted = needs_lecture_contents(ipywidgets.__version__)
    if wanted:
        server["contents_manager_class"] = CONTENTS_MANAGER
    elif server.get("contents_manager_class") == CONTENTS_MANAGER:
        del server["contents_manager_class"]
    if not server:
        del config["ServerApp"]
    text = json.dumps(config, indent=2) + "\n"
    if not config:
        path.unlink(missing_ok=True)
    elif not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path if wanted else None


if __name__ == "__main__":
    print(f"JupyterLab course settings: {write_overrides()}")
    server = write_server_config()
    if server is not None:
        print(f"Jupyter server course settings (ipywidgets 7): {server}")
