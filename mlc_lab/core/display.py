"""Where the widgets plug their views of a Session in, so that core never imports them.

The widgets package registers its view factories here when it is imported (``import mlc_lab``
does that for you); ``Session.view()``, ``Session.access_view()`` and the
notebook display of a Session then use them. Without widgets a Session displays as text.
"""

from __future__ import annotations

from typing import Any, Callable

from mlc_lab.errors import MlcLabError

_FACTORIES: dict[str, Callable[..., Any]] = {}


def register_view(name: str, factory: Callable[..., Any]) -> None:
    """Make ``factory(session, *args, **kwargs)`` the view called ``name`` ("explorer", "access")."""
    _FACTORIES[name] = factory


def open_view(name: str, session: Any, *args: Any, **kwargs: Any) -> Any:
    factory = _FACTORIES.get(name)
    if factory is None:
        raise MlcLabError(
            f"no {name} view is registered: `import mlc_lab` (with anywidget installed) registers the widget views"
        )
    return factory(session, *args, **kwargs)


def has_view(name: str) -> bool:
    return name in _FACTORIES
