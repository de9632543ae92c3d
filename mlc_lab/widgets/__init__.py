"""Jupyter widgets (anywidget) over the Session API. Plain data in, user events out; no TVM here."""

# The classes only: re-exporting the functions `access_view`/`explore` here would shadow the
# submodules of the same name (`from mlc_lab.widgets import access_view` must stay the module).
from mlc_lab.widgets.access_view import AccessView
from mlc_lab.widgets.explorer import Explorer

__all__ = ["AccessView", "Explorer"]
