"""Jupyter widgets (anywidget) over the Session API. Plain data in, user events out; no TVM here."""

from mlc_lab.widgets.access_view import AccessView, access_view
from mlc_lab.widgets.explorer import Explorer, explore

__all__ = ["AccessView", "Explorer", "access_view", "explore"]
