"""Jupyter widgets (anywidget) over the Session API. Plain data in, user events out; no TVM here."""

# `access_view` is not re-exported: the function would shadow its submodule of the same name
# (`from mlc_lab.widgets import access_view` must stay the module). Use `mlc_lab.access_view`.
from mlc_lab.core import display as _display
from mlc_lab.widgets.access.view import AccessView
from mlc_lab.widgets.explorer import Explorer, explore

# Session.view(), Session.access_view() and a Session's notebook display open these (core never
# imports widgets; it finds them here once this package is imported).
_display.register_view("explorer", Explorer)
_display.register_view("access", AccessView)

__all__ = ["AccessView", "Explorer", "explore"]
