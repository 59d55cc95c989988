#!/usr/bin/env python3
"""The layout's rules, checked: which folder of src/ may include which (docs/ARCHITECTURE.md,
"Dependency rules"), no file over 700 lines and no function over 120 lines (generated tables
and the listed exceptions aside). Exit 1 with one line per violation.

Usage: scripts/check_layout.py [SRC_DIR]   (default: src/ beside this script)
"""
import os
import re
import sys

# folder -> the folders it may include besides itself. Anything else is a violation.
ALLOWED = {
    "base": set(),
    "tensor": {"base"},
    "format": {"base", "tensor"},
    "backend": {"base", "tensor"},
    "kv": {"base", "tensor", "backend"},
    "parallel": {"base"},
    "model": {"base", "tensor", "format", "backend", "kv", "parallel"},
    "tokenizer": {"base", "tensor", "format"},
    "engine": {"base", "tensor", "backend", "kv", "model", "parallel"},
    "grammar": {"base"},
    "http": {"base"},
    "audit": {"base"},
    "pii": {"base"},
    "client": {"base", "http"},
    "bench": {"base", "client"},
    "server": {"base", "tensor", "format", "kv", "model", "parallel", "tokenizer", "engine", "grammar", "http", "audit", "pii"},
    "cluster": {"base", "http", "client"},
    "cli": None,  # the verbs tie everything together
}
MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 120
# Generated tables or tables of data, not logic.
SIZE_EXEMPT = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/')


def check_includes(src, path, rel, out):
    folder = rel.split("/")[0]
    allowed = ALLOWED.get(folder, "unknown")
    if allowed == "unknown":
        out.append(f"{rel}: folder {folder}/ has no rule in scripts/check_layout.py")
        return
    if allowed is None:
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m and m.group(1) != folder and m.group(1) not in allowed:
                out.append(f"{rel}:{n}: {folder}/ may not include {m.group(1)}/ ({line.strip()})")


def strip_code(text):
    """Blanks comments, strings and character literals, keeping the line structure."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_lengths(text):
    """(name, first line, lines) of each function body at namespace or class level: a '{' whose
    preceding code ends with ')' (plus qualifiers) opens a function unless it is a control
    statement's or a lambda's."""
    code = strip_code(text)
    results = []
    stack = []  # (kind, start line, name)
    line = 1
    last = 0
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[last:i]
            kind, name = "block", ""
            m = re.search(r"([~\w:]+)\s*\([^;{}]*\)\s*(?:const|noexcept|override|final|mutable|->\s*[\w:<>,\s*&]+|\s)*$", head)
            inside_function = any(k == "function" for k, _, _ in stack)
            if m and not inside_function and m.group(1) not in ("if", "for", "while", "switch", "catch", "return"):
                kind, name = "function", m.group(1)
            stack.append((kind, line, name))
            last = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    results.append((name, start, line - start + 1))
            last = i + 1
        elif c == ";":
            last = i + 1
    return results


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    src = os.path.normpath(src)
    problems = []
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp", ".cu")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            check_includes(src, path, rel, problems)
            if rel in SIZE_EXEMPT:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            n_lines = text.count("\n")
            if n_lines > MAX_FILE_LINES:
                problems.append(f"{rel}: {n_lines} lines (at most {MAX_FILE_LINES})")
            for fn, start, length in function_lengths(text):
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{rel}:{start}: function {fn} is {length} lines (at most {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layout: {len(problems)} problem(s)")
        return 1
    print("check_layout: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
