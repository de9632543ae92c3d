"""Jupyter widgets (anywidget) over the Session API. Plain data in, user events out; no TVM here."""

from mlc_lab.widgets.explorer import Explorer, explore

__all__ = ["Explorer", "explore"]
