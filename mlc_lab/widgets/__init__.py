"""Jupyter widgets (anywidget) over the Session API. Plain data in, user events out; no TVM here."""

# `access_view` is not re-exported: the function would shadow its submodule of the same name
# (`from mlc_lab.widgets import access_view` must stay the module). Use `mlc_lab.access_view`.
from mlc_lab.widgets.access_view import AccessView
from mlc_lab.widgets.explorer import Explorer, explore

__all__ = ["AccessView", "Explorer", "explore"]
