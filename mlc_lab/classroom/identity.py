"""Who sent a request to the class server: a student (by the token the teacher handed out, or by
JupyterHub's word when the server runs as a Hub service), the teacher (the teacher's token, or a Hub
admin), or, on a demo server (``--open``), whoever typed a name. Never the name in a request's body
when the server knows its students.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Literal

from mlc_lab.classroom.roster import PSEUDONYM, PSEUDONYM_RULE, skeleton
from mlc_lab.classroom.store import Store
from mlc_lab.errors import MlcLabError

Mode = Literal["roster", "jupyterhub", "open"]
HUB_CACHE_S = 60.0  # how long JupyterHub's answer for one token is trusted
OPEN_NOTICE = (
    "demo mode (--open): this class server does not know its students; anyone can hand in under "
    "any name, and every verdict can be read by its id"
)


class NotIdentified(MlcLabError):
    """The request carries no identity the server accepts (``status``: the HTTP status to answer)."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Who:
    student: str | None  # the key of one student's submissions; None for the teacher
    teacher: bool = False


def bearer(authorization: str) -> str:
    """The token of an ``Authorization: Bearer T`` (or JupyterHub's ``token T``) header, or ""."""
    scheme, _, value = authorization.strip().partition(" ")
    return value.strip() if scheme.lower() in ("bearer", "token") else ""


class Identities:
    """Resolves a request's token to a ``Who``, in one of three modes (see the module)."""

    def __init__(self, store: Store, mode: Mode, hub_api: str | None = None, hub_token: str | None = None) -> None:
        self.store, self.mode = store, mode
        self.hub_api, self.hub_token = (hub_api or "").rstrip("/"), hub_token
        self._hub_cache: dict[str, tuple[float, Who]] = {}
        self._lock = threading.Lock()

    def who(self, token: str) -> Who | None:
        """The identity behind a token, or None without one; ``NotIdentified`` for a wrong one."""
        if not token:
            return None
        if self.store.is_teacher(token):  # by its hash, as the students' (the token itself is kept nowhere)
            return Who(None, teacher=True)
        if self.mode == "jupyterhub":
            return self._hub_user(token)
        student = self.store.student_for_token(token)
        if student is None:
            if self.mode == "open":
                return None  # a demo server takes anyone; a wrong token is no one in particular
            raise NotIdentified("this token is not one the class server issued (or it was replaced); ask the teacher")
        return Who(student)

    def required(self, token: str, what: str) -> Who:
        who = self.who(token)
        if who is None:
            raise NotIdentified(f"{what} needs your class token: {TOKEN_HELP}")
        return who

    def open_name(self, name: object) -> Who:
        """On a demo server: the typed name is the identity (ASCII, and not a look-alike of another)."""
        if not isinstance(name, str) or not PSEUDONYM.match(name.strip()):
            raise NotIdentified(f"the pseudonym must be {PSEUDONYM_RULE}", status=400)
        name = name.strip()
        for other in self.store.names():
            if other != name and skeleton(other) == skeleton(name):
                raise NotIdentified(f"the pseudonym {name!r} looks like {other!r}, which is taken", status=400)
        return Who(name)

    # --- JupyterHub -------------------------------------------------------------------------------

    def _hub_user(self, token: str) -> Who:
        """JupyterHub's user for a token: ``GET {JUPYTERHUB_API_URL}/user`` with the token, as the
        Hub's service authentication (``HubAuth.user_for_token``) does; answers kept a minute."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            hit = self._hub_cache.get(key)
            if hit and now - hit[0] < HUB_CACHE_S:
                return hit[1]
        req = urllib.request.Request(self.hub_api + "/user", headers={"Authorization": f"token {token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                model = json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403, 404):
                raise NotIdentified("JupyterHub does not know this token (log in to the hub again)") from None
            raise NotIdentified(f"JupyterHub answered {exc.code} when asked who this is", status=503) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise NotIdentified(
                f"JupyterHub at {self.hub_api} cannot be asked who this is ({getattr(exc, 'reason', exc)})", status=503
            ) from None
        if not isinstance(model, dict) or model.get("kind", "user") != "user" or not isinstance(model.get("name"), str):
            raise NotIdentified("this JupyterHub token is not a user's")
        name = model["name"]
        if model.get("admin"):
            who = Who(None, teacher=True)
        elif self.store.student_known(name):
            who = Who(name)
        elif self.store.has_roster():
            raise NotIdentified(f"the JupyterHub user {name!r} is not on this class's roster", status=403)
        else:
            self.store.add_student(name, name)
            who = Who(name)
        with self._lock:
            self._hub_cache[key] = (now, who)
        return who


TOKEN_HELP = (
    "send it as the header 'Authorization: Bearer TOKEN' (mlc-lab submit --token, token=... in Python, "
    "or $MLC_LAB_CLASS_TOKEN)"
)
