"""Course defaults for JupyterLab, written into the environment (never the user's home).

JupyterLab asks "Would you like to get notified about official Jupyter news?" in a toast
that covers the lower right of every page until answered. The course answers it for the
student: ``fetchNews: "false"`` (and no update check, which needs news), as a settings
*override* file in the environment's JupyterLab application folder,
``<sys.prefix>/share/jupyter/lab/settings/overrides.d/autodiff-lab.json`` (jupyterlab_server
reads every ``overrides.d/*.json`` there as new defaults). A student can still turn news on
in Settings > Notifications: user settings win over overrides.

``make lab`` runs this before starting JupyterLab; the browser tests' server
(tests/browser/conftest.py) runs it too, so it starts the same way.
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


if __name__ == "__main__":
    print(f"JupyterLab course settings: {write_overrides()}")
