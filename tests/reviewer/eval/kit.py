"""Small hand-made eval cases for exact-score tests."""

from __future__ import annotations

import tomllib

from dsh_github_reviewer.eval import Case

# base: 3 lines. Push 1 adds lines 4-13 of app/calc.py; line 6 is the defect "div" (lines 6-6),
# line 12 a decoy; push 2 fixes "div" (same line count), keeps "loop" and adds "secret" at 14.
TWO_PUSH = """
language = "python"
title = "Calculator"
[base]
"app/calc.py" = '''
import math


'''
[[push]]
message = "one"
[push.files]
"app/calc.py" = '''
import math


def ratio(a, b):
    # ratio of a to b
    return a / b


def total(xs):
    s = 0
    for i in range(len(xs) + 1):
        s += xs[i]
    print(f"total {s}")
    return s
'''
[[push.defects]]
id = "div"
path = "app/calc.py"
lines = [6, 6]
category = "edge-case"
severity = "major"
description = "b may be zero"
[[push.defects]]
id = "loop"
path = "app/calc.py"
lines = [11, 12]
category = "off-by-one"
severity = "major"
description = "one past the end"
[[push.decoys]]
id = "fstring"
path = "app/calc.py"
lines = [13, 13]
description = "an f-string print"

[[push]]
message = "two"
fixes = ["div"]
[push.files]
"app/calc.py" = '''
import math


def ratio(a, b):
    # ratio of a to b
    return a / b if b else math.nan


def total(xs):
    s = 0
    for i in range(len(xs) + 1):
        s += xs[i]
    print(f"total {s}")
    return s
API_KEY = "sk-live-1234"
'''
[[push.defects]]
id = "secret"
path = "app/calc.py"
lines = [15, 15]
category = "secret"
severity = "critical"
description = "a committed key"
"""


def case(text: str = TWO_PUSH, id: str = "calc") -> Case:
    return Case.model_validate({"id": id, **tomllib.loads(text)})
