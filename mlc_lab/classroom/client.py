"""The class server's client (``submit``, ``leaderboard``, ``summary``...). It lives in
``mlc_lab.core.classroom`` so that ``Session.submit`` needs nothing above core; this module is its
name beside the server."""

from mlc_lab.core.classroom import (  # noqa: F401  (re-exported)
    ENV,
    HUB_TOKEN_ENV,
    TOKEN_ENV,
    ClassServerError,
    assignment,
    class_token,
    history,
    leaderboard,
    me,
    server_url,
    submit,
    summary,
    tries_within,
    verdict,
    verdict_text,
)
