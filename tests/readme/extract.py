"""Turns every ```cpp block of README.md into one C++ file that compiles them.

The build compiles the result (never runs it), so a README snippet that stops
compiling fails `make test`. Each block becomes `namespace readme_N { ... }`:
its includes and `using` lines go to the top of the file, `struct` definitions
and TENSORDICT_PYTHON_CLASS lines stay at namespace scope, and the rest
becomes the body of a function. Names a snippet uses without declaring
(`other`, `mask`, `model`, ...) are declared first from GIVEN, so the README
can stay short.

usage: extract.py README.md OUT.cpp
"""

import re
import sys

# What the README's snippets take as given, declared when a block uses the
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


def blocks(readme):
    inside, current = False, []
    for line in readme.splitlines():
        if line.startswith("```"):
            if inside:
                yield current
                inside, current = False, []
            elif line.strip() == "```cpp":
                inside = True
        elif inside:
            current.append(line)


def code_only(lines):
    # Comments and string literals do not use names.
    text = "\n".join(lines)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def split(lines):
    top, scope, body = [], [], []
    depth = None  # brace depth inside a struct at namespace scope
    for line in lines:
        stripped = line.strip()
        if depth is not None:
            scope.append(line)
            depth += line.count("{") - line.count("}")
            if depth == 0 and stripped.endswith("};"):
                depth = None
        elif stripped.startswith("#include") or stripped.startswith("using "):
            top.append(stripped)
        elif stripped.startswith("struct "):
            scope.append(line)
            depth = line.count("{") - line.count("}")
            if depth == 0 and stripped.endswith("};"):
                depth = None
        elif stripped.startswith("TENSORDICT_PYTHON_CLASS"):
            scope.append(line)
        else:
            body.append(line)
    return top, scope, body


def main(readme_path, out_path):
    with open(readme_path) as f:
        found = list(blocks(f.read()))
    if not found:
        sys.exit(f"{readme_path}: no ```cpp blocks found")
    includes, usings, units = ["#include <torch/torch.h>"], [], []
    for n, lines in enumerate(found):
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
            f"namespace readme_{n} {{\n"
            + "\n".join(scope)
            + f"\n[[maybe_unused]] void snippet() {{\n"
            + "\n".join(f"  {decl}" for decl in given)
            + "\n"
            + "\n".join(body)
            + "\n}\n}  // namespace readme_"
            + f"{n}\n"
        )
    with open(out_path, "w") as f:
        f.write(f"// Generated from {readme_path} by tests/readme/extract.py.\n")
        f.write("\n".join(includes) + "\n\n")
        # `using` lines of every block apply at file scope, as a reader of one
        # block would expect them to apply to it.
        f.write("\n".join(usings) + "\n\n")
        f.write("\n".join(units))


if __name__ == "__main__":
    main(*sys.argv[1:])
