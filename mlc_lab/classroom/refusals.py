"""An attack or a mistake: what the teacher's list of refused hand-ins says of each.

The grader refuses a trace that is not a schedule: a typo, a syntax error, a name that does not exist
(an honest mistake, the student's to fix), and a trace that reaches for what no schedule does:
Python's imports, builtins that open files or run code, dunder attributes that climb out of an
object, code in an annotation, brackets nested to exhaust the parser (an attack, the teacher's to
look at). The text is read, never run: by its syntax tree when it parses, else by its words, and
judged by what it reaches for, whatever the grader's sentence was.
"""

from __future__ import annotations

import ast
import json
import re

# Names whose call or mention in a trace reaches past the schedule: the machine, files, code.
REACHING = frozenset(
    {
        "__import__", "breakpoint", "compile", "delattr", "eval", "exec", "getattr", "globals", "input",
        "locals", "open", "setattr", "vars", "builtins", "ctypes", "importlib", "os", "pathlib", "pickle",
        "shutil", "signal", "socket", "subprocess", "sys", "urllib",
    }
)  # fmt: skip
# What the grader says of a trace that tries to put code into a build or to exhaust the parser.
_ATTACK_SENTENCES = (
    "a trace never adds code",
    "nested more than",
    "nested too deeply",
)
_DUNDER = re.compile(r"__[A-Za-z_]\w*__")
_WORD = re.compile(r"[A-Za-z_]\w*")
_MAX_SCAN = 400_000  # characters read of a trace (the class server takes at most 200,000)


def refusal_kind(trace: str, message: str) -> tuple[str, str]:
    """``("attack" | "mistake", why)`` for a refused hand-in: ``trace`` its text, ``message`` the
    grader's sentence. ``why`` names what the trace reached for (an attack), or is empty."""
    for sentence in _ATTACK_SENTENCES:
        if sentence in message:
            return "attack", message.split(": ", 1)[-1][:120] if ": " in message else sentence
    text = trace[:_MAX_SCAN]
    reached = _reached_json(text) if text.lstrip().startswith(("[", "{")) else None
    if reached is None:
        reached = _reached_tree(text)
    if reached is None:  # neither JSON nor Python: by its words
        reached = _reached_words(text)
    return ("attack", reached) if reached else ("mistake", "")


def _reached_tree(text: str) -> str | None:
    """What a trace that parses as Python reaches for ("" for nothing), or None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(n.split(".")[0] != "tvm" for n in names):  # a printed trace imports from tvm only
                return f"imports {', '.join(n for n in names if n.split('.')[0] != 'tvm')[:60]}"
        elif isinstance(node, ast.Attribute) and _DUNDER.fullmatch(node.attr):
            return f"reaches for {node.attr}"
        elif isinstance(node, ast.Name) and _DUNDER.fullmatch(node.id):
            return f"reaches for {node.id}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DUNDER.search(node.value):
            return f"names {_DUNDER.search(node.value).group()}"  # type: ignore[union-attr]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in REACHING:
            return f"calls {node.func.id}"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in REACHING:
            return f"reaches for {node.value.id}.{node.attr}"
    return ""


def _reached_json(text: str) -> str | None:
    """What a JSON trace reaches for ("" for nothing), or None when it is not JSON."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found = _reached_words(value)
            if found:
                return found
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
    return ""


def _reached_words(text: str) -> str:
    """What text that is neither Python nor JSON names of what reaches past a schedule ("" for nothing)."""
    dunder = _DUNDER.search(text)
    if dunder:
        return f"reaches for {dunder.group()}"
    if re.search(r"^\s*(import|from)\s+(?!tvm\b)\w", text, re.M):
        return "imports a module"
    for word in _WORD.findall(text):
        if word in REACHING and re.search(rf"\b{word}\s*[.(]", text):
            return f"reaches for {word}"
    return ""
