"""Turns every ```cpp block of the README and docs/*.md into one C++ file.

The build compiles the result (never runs it), so a snippet of the README or
of a docs page that stops compiling fails `make test`. Each block becomes
`namespace <page>_N { ... }` (`readme_3`, `storage_0`), its lines preceded by
`#line` directives, so that a compiler error names the page and its line:
its includes and `using` lines go to the top of the file, `struct` definitions
and TENSORDICT_PYTHON_CLASS lines stay at namespace scope, and the rest
becomes the body of a function. Names a snippet uses without declaring
(`other`, `mask`, `model`, ...) are declared first from GIVEN, so the pages
can stay short. A ```c++ block is shown, not compiled (code that needs more
than GIVEN: a pybind11 module, a user's own functions).

usage: extract.py ROOT OUT.cpp PAGE.md...   (pages named relative to ROOT)
"""

import os
import re
import sys

# What the snippets take as given, declared when a block uses the
# name without declaring it.
GIVEN = {
    "td": "tensordict::TensorDict td;",
    "other": "tensordict::TensorDict other;",
    "a": "tensordict::TensorDict a;",
    "b": "tensordict::TensorDict b;",
    "step": "tensordict::TensorDict step;",
    "stacked": "tensordict::TensorDict stacked;",
    "mask": "at::Tensor mask;",
    "x": "at::Tensor x;",
    "i": "int64_t i = 0;",
    "model": "torch::nn::Linear model(3, 4);",
    "fresh": "torch::nn::Linear fresh(3, 4);",
    "longer": "Step longer;",
}

DECLARATION = re.compile(r"^\s*(?:const\s+)?[\w:<>]+[&*]?\s+(\w+)\s*[=({;]")


def blocks(text):
    """Yields each ```cpp block as a list of (line number, line)."""
    inside, current = False, []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            if inside:
                yield current
                inside, current = False, []
            elif line.strip() == "```cpp":
                inside = True
        elif inside:
            current.append((number, line))


def code_only(lines):
    # Comments and string literals do not use names.
    text = "\n".join(line for _, line in lines)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def split(lines):
    top, scope, body = [], [], []
    depth = None  # brace depth inside a struct at namespace scope
    for entry in lines:
        line = entry[1]
        stripped = line.strip()
        if depth is not None:
            scope.append(entry)
            depth += line.count("{") - line.count("}")
            if depth == 0 and stripped.endswith("};"):
                depth = None
        elif stripped.startswith("#include") or stripped.startswith("using "):
            top.append(stripped)
        elif stripped.startswith("struct "):
            scope.append(entry)
            depth = line.count("{") - line.count("}")
            if depth == 0 and stripped.endswith("};"):
                depth = None
        elif stripped.startswith("TENSORDICT_PYTHON_CLASS"):
            scope.append(entry)
        else:
            body.append(entry)
    return top, scope, body


def located(entries, path):
    # Each line after a #line naming its place in the page (an absolute
    # path, so that the compiler can show the line).
    return "\n".join(f'#line {number} "{path}"\n{line}' for number, line in entries)


def main(root, out_path, *pages):
    found = []  # (namespace, page, absolute path, block)
    for path in pages:
        page = os.path.relpath(path, root)
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(page))[0].lower())
        with open(path) as f:
            found += [
                (f"{stem}_{n}", page, os.path.abspath(path), b)
                for n, b in enumerate(blocks(f.read()))
            ]
    if not any(page == "README.md" for _, page, _, _ in found):
        sys.exit("README.md: no ```cpp blocks found")
    includes, usings, units = ["#include <torch/torch.h>"], [], []
    for name, _, path, lines in found:
        top, scope, body = split(lines)
        for line in top:
            target = includes if line.startswith("#include") else usings
            if line not in target:
                target.append(line)
        code = code_only(body)
        declared = {m.group(1) for l in code.splitlines() if (m := DECLARATION.match(l))}
        given = [
            decl
            for name, decl in GIVEN.items()
            if name not in declared and re.search(rf"\b{name}\b", code)
        ]
        units.append(
            f"namespace {name} {{\n"
            + located(scope, path)
            + f"\n[[maybe_unused]] void snippet() {{\n"
            + "\n".join(f"  {decl}" for decl in given)
            + "\n"
            + located(body, path)
            + f"\n}}\n}}  // namespace {name}\n"
        )
    with open(out_path, "w") as f:
        names = sorted({page for _, page, _, _ in found})
        f.write(f"// Generated from {', '.join(names)} by tests/snippets/extract.py.\n")
        f.write("\n".join(includes) + "\n\n")
        # `using` lines of every block apply at file scope, as a reader of one
        # block would expect them to apply to it.
        f.write("\n".join(usings) + "\n\n")
        f.write("\n".join(units))


if __name__ == "__main__":
    main(*sys.argv[1:])
