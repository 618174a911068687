"""The product sources of build/compile_commands.json, each with a compile command of its own.

The libraries compile as unity batches (kf_unity, the top-level CMakeLists.txt): a batch is a file
in the build tree that includes its sources by paths relative to the project root, and the
compile database holds the batch, not its sources. A batch's entry here stands for each product
source it includes, with the batch's command and that source in place of the batch. Sources
compiled on their own (the binary's main.cc) are kept as they are; tests (tests/) are left out.
Used by tests/lint and tests/thread-safety."""
import json
import os
import re
import shlex

INCLUDE = re.compile(r'^#include "([^"]+\.cc)"$', re.MULTILINE)


def _product(path):
    return not path.startswith(("tests/", "build", ".."))


def entries(root, build="build"):
    """Yields one dict per product source: path (relative to root), arguments (the compile command
    with that source compiled), directory and output (the object the build writes, the batch's for
    a batched source)."""
    for entry in json.load(open(os.path.join(root, build, "compile_commands.json"))):
        source = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        args = entry.get("arguments") or shlex.split(entry["command"])
        output = entry.get("output") or (args[args.index("-o") + 1] if "-o" in args else "")
        path = os.path.relpath(source, root)
        members = [path]
        if path.startswith("build") and re.search(r"_unity_\d+\.cc$", path):
            with open(source) as f:
                members = INCLUDE.findall(f.read())
        for member in members:
            if not _product(member):
                continue
            own = [os.path.join(root, member) if a in (entry["file"], source) else a for a in args]
            yield {"path": member, "arguments": own, "directory": entry["directory"],
                   "output": output}


PROJECT_INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)


def project_includes(root, path, seen=None):
    """The project files `path` includes, directly or through another (its #include "..." lines
    that name a file of the project): a batched source's own share of its batch's dependencies."""
    seen = set() if seen is None else seen
    with open(os.path.join(root, path)) as f:
        for name in PROJECT_INCLUDE.findall(f.read()):
            if name not in seen and os.path.exists(os.path.join(root, name)):
                seen.add(name)
                project_includes(root, name, seen)
    return seen
