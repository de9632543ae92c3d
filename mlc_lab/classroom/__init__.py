"""A class around one assignment: the class server (``mlc-lab class serve``: submissions in SQLite,
graded by the autograder in a child process, timed by mlc_lab's one method, locally or on the class's
measurement machines through TVM's RPC tracker), and its client (``submit``, ``leaderboard``,
``summary``). The widgets over it are in ``mlc_lab.widgets.classroom``."""

from mlc_lab.classroom.client import ClassServerError, leaderboard, submit, summary

__all__ = ["ClassServerError", "leaderboard", "submit", "summary"]
