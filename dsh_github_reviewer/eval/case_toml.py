"""Writing a case as TOML (``eval mine`` and the importers write drafts people then edit).

Only the case schema's shapes are needed, so a small writer here rather than a dependency:
file texts as multi-line literal strings where that is exact (readable in review), otherwise
as escaped basic strings; every written file is read back through ``load_case`` by the
callers' tests.
"""

from __future__ import annotations

import json
import re
from typing import Any

_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _basic(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped too)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _text(text: str) -> str:
    if "'''" in text or text.endswith("'") or _UNSAFE.search(text) or "\r" in text:
        return _basic(text)
    return "'''\n" + text + "'''"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _basic(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_basic(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _files(table: str, files: dict[str, str]) -> list[str]:
    out = [f"[{table}]"]
    for path, text in files.items():
        out.append(f"{_basic(path)} = {_text(text)}")
    return out


def dumps_case(case: dict[str, Any], header: str = "") -> str:
    """``case``: language, title, body, base, push (the schema of ``cases.py``, no id)."""
    # A comment may hold no control character but a tab: one in a commit subject (an ANSI
    # colour, say) made the whole draft unreadable; it is written as its escape instead.
    lines = [f"# {_UNSAFE.sub(lambda m: repr(m.group())[1:-1], h)}" if h else "#"
             for h in header.splitlines()]
    lines += [f"language = {_basic(case['language'])}", f"title = {_basic(case['title'])}"]
    if case.get("body"):
        lines.append(f"body = {_basic(case['body'])}")
    lines += ["", *_files("base", case["base"])]
    for push in case["push"]:
        lines += ["", "[[push]]", f"message = {_basic(push.get('message', 'update'))}"]
        for key in ("delete", "fixes"):
            if push.get(key):
                lines.append(f"{key} = {_value(push[key])}")
        if push.get("moved"):
            lines.append(f"moved = {_value(push['moved'])}")
        lines += _files("push.files", push.get("files", {}))
        for kind in ("defects", "decoys"):
            for item in push.get(kind, []):
                lines += ["", f"[[push.{kind}]]"]
                for k, v in item.items():
                    if k == "also" and not v:
                        continue
                    lines.append(f"{k} = {_value(v)}")
    return "\n".join(lines) + "\n"
