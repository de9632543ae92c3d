"""A class's roster: who may hand in (student id, display name, the pseudonym the teacher approved).

Read from a CSV file (a header ``student_id,name[,pseudonym]``, one student a row) or from a TOML
file's ``[roster]`` table (``ID = {name = "...", pseudonym = "..."}``). Every bad row is refused with
its line (or key) and what is wrong; two pseudonyms that look alike (the same letters once case,
width and accents are set aside) are refused, so a leaderboard never shows two names a reader cannot
tell apart.
"""

from __future__ import annotations

import csv
import io
import re
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from mlc_lab.errors import MlcLabError

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+\-]{0,63}$")
# ASCII only: a pseudonym cannot borrow a Cyrillic a (U+0430) to pass for another student's 'a'
PSEUDONYM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._\-]{0,39}$")
PSEUDONYM_RULE = "1 to 40 ASCII letters, digits, spaces, dots, dashes or underscores, starting with a letter or digit"


class RosterError(MlcLabError):
    """A roster the server cannot use (the sentence names the file, the line and what is wrong)."""


@dataclass(frozen=True)
class Student:
    id: str
    name: str
    pseudonym: str | None = None  # approved by the teacher; None: "student N" on the leaderboard


def skeleton(name: str) -> str:
    """What a name looks like to a reader: case, width, accents, spacing and punctuation set aside."""
    folded = unicodedata.normalize("NFKD", name).casefold()
    return "".join(c for c in folded if c.isalnum() and not unicodedata.combining(c))


def load_roster(path: str | Path) -> list[Student]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RosterError(f"{path}: no such roster file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    if path.suffix.lower() == ".toml":
        students = _from_toml(text, str(path))
    else:
        students = _from_csv(text, str(path))
    if not students:
        raise RosterError(f"{path}: the roster lists no student")
    return students


def _from_csv(text: str, where: str) -> list[Student]:
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    header = [c.strip().lower() for c in rows[0]] if rows else []
    if header[:2] != ["student_id", "name"] or len(header) > 3 or (len(header) == 3 and header[2] != "pseudonym"):
        raise RosterError(f"{where}: line 1 must be the header 'student_id,name' or 'student_id,name,pseudonym'")
    out = []
    for line, row in enumerate(rows[1:], 2):
        if not any(c.strip() for c in row):
            continue
        if len(row) > len(header):
            raise RosterError(f"{where}: line {line} has {len(row)} fields; the header names {len(header)}")
        row = [c.strip() for c in row] + [""] * (3 - len(row))
        out.append(_student(row[0], row[1], row[2] or None, f"{where}: line {line}"))
    return _checked(out, where)


def _from_toml(text: str, where: str) -> list[Student]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RosterError(f"{where}: not valid TOML: {exc}") from None
    table = data.get("roster")
    if not isinstance(table, dict):
        raise RosterError(f'{where}: no [roster] table (ID = {{name = "...", pseudonym = "..."}} per student)')
    out = []
    for sid, entry in table.items():
        at = f"{where}: [roster] {sid!r}"
        if not isinstance(entry, dict) or set(entry) - {"name", "pseudonym"}:
            raise RosterError(f'{at} must be {{name = "...", pseudonym = "..."}} (pseudonym optional)')
        name, pseudonym = entry.get("name"), entry.get("pseudonym")
        if not isinstance(name, str) or (pseudonym is not None and not isinstance(pseudonym, str)):
            raise RosterError(f"{at}: name and pseudonym must be strings")
        out.append(_student(sid, name.strip(), (pseudonym or "").strip() or None, at))
    return _checked(out, where)


def _student(sid: str, name: str, pseudonym: str | None, at: str) -> Student:
    if not STUDENT_ID.match(sid):
        raise RosterError(
            f"{at}: the student id {sid[:70]!r} must be 1 to 64 ASCII letters, digits, dots, dashes, "
            "underscores, @ or +, starting with a letter or digit"
        )
    if not name or len(name) > 100 or any(unicodedata.category(c)[0] == "C" for c in name):
        raise RosterError(f"{at}: the name must be 1 to 100 printable characters")
    if pseudonym is not None and not PSEUDONYM.match(pseudonym):
        raise RosterError(f"{at}: the pseudonym {pseudonym[:50]!r} must be {PSEUDONYM_RULE}")
    if pseudonym is not None and re.fullmatch(r"student\d+", skeleton(pseudonym)):
        raise RosterError(f"{at}: the pseudonym {pseudonym!r} looks like the leaderboard's 'student N' of another")
    return Student(sid, name, pseudonym)


def _checked(students: list[Student], where: str) -> list[Student]:
    ids: dict[str, str] = {}
    looks: dict[str, str] = {}
    for s in students:
        if s.id.casefold() in ids:
            raise RosterError(f"{where}: the student id {s.id!r} is listed twice (as {ids[s.id.casefold()]!r} too)")
        ids[s.id.casefold()] = s.id
        if s.pseudonym:
            key = skeleton(s.pseudonym)
            if key in looks:
                raise RosterError(
                    f"{where}: the pseudonyms {looks[key]!r} and {s.pseudonym!r} look alike; "
                    "approve only names a reader can tell apart"
                )
            looks[key] = s.pseudonym
    return students
